//! The agent bench's start-up part (issue 25 item 1): what a user waits for before the first
//! model request, and how it grows with the rows a profile holds.
//!
//! - **Start → first request** for three profiles ([`Shape`]), interleaved in one loop with a
//!   bare `keel --version` (spawn → exit), so a busy moment of the shared machine hits every
//!   measure alike. Cost per added row: (all − minimal) / (rows of all − rows of minimal), the
//!   medians' difference; issue 25's target is ≤ 0.3 ms per row that has nothing to do.
//! - **PSS when the first request arrives** (`Pss:` of keel's `/proc/<pid>/smaps_rollup`, read
//!   by the server's hook while keel waits for the answer) for the minimal and the full profile:
//!   the fixed memory per added row (target ≤ 0.5 MB).
//! - **Where start-up goes**: runs with `KEEL_LOG=keel::boot=debug,keel::kernel=info`, every
//!   `keel::boot` line's `+MS` since exec (keel's own clock: exec → `main` estimated from
//!   `/proc/self/schedstat`), medians per phase and per row over those runs. Logging costs a
//!   little, so these runs are not among the timed ones. The assembly's line covers digests
//!   and opening together (the digest code is moving into its own crate, issue 25 item 2), so
//!   the bench also times each library's blake3 digest itself, read in 1 MiB blocks as keel
//!   reads it, on one thread (keel hashes on up to 4).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use keel_tests::bench::{Summary, summarize};
use keel_tests::model_server::{ModelServer, Reply};
use serde_json::{Value, json};

use super::{Sandbox, finish, finish_output, round, summary_json};

/// A profile of the start-up bench.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Shape {
    /// The smallest profile that reaches a model: sessions, the adapter registry, the tool
    /// registry (no tools), the loop, the adapter, the driver.
    Minimal,
    /// `base` (sessions, checkpoint, credentials), the registries, the system prompt, the loop,
    /// the fs and shell tools, the adapter, the driver.
    Middle,
    /// Every shipped row: `base` + `agent` + the adapter + the driver, as `profiles/headless`
    /// (approval `never`); MCP without servers, hooks without hooks, no child agents.
    All,
}

const SHAPES: [Shape; 3] = [Shape::Minimal, Shape::Middle, Shape::All];

fn row(id: &str, plugin: &str) -> String {
    format!("[[insert]]\nid = \"{id}\"\nplugin = \"{plugin}\"\n\n")
}

impl Shape {
    /// The plugins the shape's rows load.
    fn plugins(self) -> &'static [&'static str] {
        const MINIMAL: &[&str] = &[
            "session",
            "session-jsonl",
            "llm",
            "tools",
            "agent-loop",
            "llm-openai",
            "headless",
        ];
        const MIDDLE: &[&str] = &[
            "session",
            "session-jsonl",
            "checkpoint",
            "credentials",
            "llm",
            "tools",
            "system-prompt",
            "agent-loop",
            "tool-fs",
            "tool-shell",
            "llm-openai",
            "headless",
        ];
        const ALL: &[&str] = &[
            "session",
            "session-jsonl",
            "checkpoint",
            "credentials",
            "llm",
            "tools",
            "subagent",
            "approval",
            "system-prompt",
            "agent-loop",
            "context",
            "fs-policy",
            "tool-fs",
            "tool-shell",
            "sandbox",
            "firewall",
            "mcp",
            "hooks",
            "llm-openai",
            "headless",
        ];
        match self {
            Shape::Minimal => MINIMAL,
            Shape::Middle => MIDDLE,
            Shape::All => ALL,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Shape::Minimal => "minimal",
            Shape::Middle => "middle",
            Shape::All => "all",
        }
    }

    /// The profile's TOML, its adapter at `base_url`.
    pub fn toml(self, base_url: &str) -> String {
        let adapter = format!(
            "[[insert]]\nid = \"llm-openai\"\nplugin = \"llm-openai\"\nconfig = {{ base_url = \"{base_url}\", model = \"bench\", api_key_ref = \"KEEL_BENCH_KEY\" }}\n\n"
        );
        let driver = row("driver", "headless");
        match self {
            Shape::Minimal => {
                let rows: String = [
                    ("session", "session"),
                    ("session-store", "session-jsonl"),
                    ("llm", "llm"),
                    ("tools", "tools"),
                    ("agent-loop", "agent-loop"),
                ]
                .iter()
                .map(|(id, plugin)| row(id, plugin))
                .collect();
                format!("{rows}{adapter}{driver}")
            }
            Shape::Middle => {
                let rows: String = [
                    ("llm", "llm"),
                    ("tools", "tools"),
                    ("system-prompt", "system-prompt"),
                    ("agent-loop", "agent-loop"),
                    ("tool-fs", "tool-fs"),
                    ("tool-shell", "tool-shell"),
                ]
                .iter()
                .map(|(id, plugin)| row(id, plugin))
                .collect();
                format!("bundles = [\"base\"]\n\n{rows}{adapter}{driver}")
            }
            Shape::All => format!(
                "bundles = [\"base\", \"agent\"]\n\n[[replace]]\nid = \"approval\"\nconfig = {{ mode = \"never\" }}\n\n{adapter}{driver}"
            ),
        }
    }
}

/// One `keel run` of `shape` against a fresh server: spawn → first request in ms, the PSS in
/// MB when that request arrived (`pss`), and keel's stderr.
fn once(keel: &Path, shape: Shape, log: Option<&str>, pss: bool) -> Result<Run, String> {
    let sandbox = Sandbox::new(keel.to_path_buf())?;
    let server = ModelServer::start(vec![Reply::text("ok")]);
    sandbox.write_profile(shape.name(), &shape.toml(&server.base_url()))?;
    let pid = Arc::new(AtomicU32::new(0));
    let pss_kb: Arc<Mutex<Option<u64>>> = Arc::default();
    if pss {
        let (pid, pss_kb) = (Arc::clone(&pid), Arc::clone(&pss_kb));
        server.on_completion(move |_| {
            let p = pid.load(Ordering::SeqCst);
            if let Ok(mut slot) = pss_kb.lock()
                && slot.is_none()
                && p != 0
            {
                *slot = pss_of(p);
            }
        });
    }
    let started = Instant::now();
    let child = sandbox.spawn_profile(shape.name(), &[], log)?;
    pid.store(child.id(), Ordering::SeqCst);
    let stderr = finish_output(child)?;
    let first = server
        .completions()
        .first()
        .map(|r| r.at)
        .ok_or("the server received no request")?;
    let pss_mb = pss_kb
        .lock()
        .ok()
        .and_then(|v| *v)
        .map(|kb| kb as f64 / 1024.0);
    if pss && pss_mb.is_none() {
        return Err(format!(
            "could not read keel's smaps_rollup ({})",
            shape.name()
        ));
    }
    Ok(Run {
        ms: first.duration_since(started).as_secs_f64() * 1e3,
        pss_mb,
        stderr,
    })
}

struct Run {
    ms: f64,
    pss_mb: Option<f64>,
    stderr: String,
}

/// `Pss:` of `/proc/PID/smaps_rollup`, in kB.
fn pss_of(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// blake3 of `path` in 1 MiB reads, in ms.
fn digest_ms(path: &Path) -> Result<f64, String> {
    use std::io::Read as _;
    let started = Instant::now();
    let mut file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    std::hint::black_box(hasher.finalize());
    Ok(started.elapsed().as_secs_f64() * 1e3)
}

/// Each library of `shape` beside `keel`: name, MiB, median digest ms of `runs`.
fn digests(keel: &Path, shape: Shape, runs: usize) -> Result<Vec<(String, f64, f64)>, String> {
    let dir = keel.parent().ok_or("keel has no directory")?;
    shape
        .plugins()
        .iter()
        .map(|plugin| {
            let path = dir.join(keel_tests::plugin_file(plugin));
            let bytes = std::fs::metadata(&path)
                .map_err(|e| format!("{}: {e}", path.display()))?
                .len();
            let ms = (0..runs.max(1))
                .map(|_| digest_ms(&path))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((
                (*plugin).to_owned(),
                bytes as f64 / f64::from(1 << 20),
                summarize(ms).median,
            ))
        })
        .collect()
}

/// `keel --version`, spawn → exit, in ms.
fn version(keel: &Path) -> Result<f64, String> {
    let started = Instant::now();
    let child = Command::new(keel)
        .arg("--version")
        .env_remove("KEEL_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", keel.display()))?;
    finish(child)?;
    Ok(started.elapsed().as_secs_f64() * 1e3)
}

/// One start-up line: its key (the message; `row active: ID` for a row), when it happened in ms
/// since exec (`at_us` where the line has it — exec → `main` is logged later than it happened —
/// else its `+MS`) and `took_us` if it has one.
fn boot_lines(stderr: &str) -> Vec<(String, f64, Option<f64>)> {
    stderr
        .lines()
        .filter_map(|line| {
            let (_, rest) = line.split_once(" keel::boot: ")?;
            let at: f64 = line
                .split_whitespace()
                .nth(1)?
                .strip_prefix('+')?
                .strip_suffix("ms")?
                .parse()
                .ok()?;
            let field = |key: &str| {
                let (_, v) = rest.split_once(&format!(" {key}="))?;
                Some(v.split(' ').next()?.to_owned())
            };
            let message = rest
                .split(" at_us=")
                .next()?
                .split(" row=")
                .next()?
                .split(" took_us=")
                .next()?;
            let key = match field("row") {
                Some(row) if message == "row active" => format!("row active: {row}"),
                _ => message.to_owned(),
            };
            let us = |key: &str| field(key)?.parse::<f64>().ok().map(|us| us / 1e3);
            Some((key, us("at_us").unwrap_or(at), us("took_us")))
        })
        .collect()
}

/// The `rows=N` of the `kernel ready` line.
fn rows_of(stderr: &str) -> Option<usize> {
    let line = stderr.lines().find(|l| l.contains("kernel ready"))?;
    let (_, v) = line.split_once(" rows=")?;
    v.split(' ').next()?.parse().ok()
}

/// Medians of one shape's start-up lines, in the order of the first run.
#[derive(Debug, Default)]
struct Breakdown {
    rows: usize,
    order: Vec<String>,
    at: BTreeMap<String, Vec<f64>>,
    took: BTreeMap<String, Vec<f64>>,
}

impl Breakdown {
    fn add(&mut self, stderr: &str) {
        if let Some(rows) = rows_of(stderr) {
            self.rows = rows;
        }
        for (key, at, took) in boot_lines(stderr) {
            if !self.order.contains(&key) {
                self.order.push(key.clone());
            }
            self.at.entry(key.clone()).or_default().push(at);
            if let Some(took) = took {
                self.took.entry(key).or_default().push(took);
            }
        }
    }

    fn median(map: &BTreeMap<String, Vec<f64>>, key: &str) -> Option<f64> {
        map.get(key).map(|v| summarize(v.clone()).median)
    }

    fn json(&self) -> Value {
        let phases: Vec<Value> = self
            .order
            .iter()
            .map(|k| {
                json!({
                    "phase": k,
                    "at_ms": Self::median(&self.at, k).map(round),
                    "took_ms": Self::median(&self.took, k).map(round),
                })
            })
            .collect();
        json!({ "rows": self.rows, "phases": phases })
    }
}

/// Everything [`measure`] found.
pub struct Startup {
    version: Summary,
    first: BTreeMap<Shape, Summary>,
    pss_mb: BTreeMap<Shape, Summary>,
    breakdown: BTreeMap<Shape, Breakdown>,
    /// Every library of [`Shape::All`]: name, MiB, digest ms.
    digests: Vec<(String, f64, f64)>,
}

/// Runs the start-up measures: `runs` timed rounds, `log_runs` logged runs per shape.
pub fn measure(keel: &Path, runs: usize, log_runs: usize) -> Result<Startup, String> {
    // One warm-up run per shape so the page cache holds the libraries, as it does for a user.
    for shape in SHAPES {
        once(keel, shape, None, false)?;
    }
    let mut breakdown: BTreeMap<Shape, Breakdown> = BTreeMap::new();
    for _ in 0..log_runs {
        for shape in SHAPES {
            let run = once(
                keel,
                shape,
                Some("keel::boot=debug,keel::kernel=info"),
                false,
            )?;
            breakdown.entry(shape).or_default().add(&run.stderr);
        }
    }
    let mut versions = Vec::new();
    let mut first: BTreeMap<Shape, Vec<f64>> = BTreeMap::new();
    for _ in 0..runs {
        versions.push(version(keel)?);
        for shape in SHAPES {
            first
                .entry(shape)
                .or_default()
                .push(once(keel, shape, None, false)?.ms);
        }
    }
    let mut pss: BTreeMap<Shape, Vec<f64>> = BTreeMap::new();
    for _ in 0..runs.clamp(1, 5) {
        for shape in [Shape::Minimal, Shape::All] {
            let run = once(keel, shape, None, true)?;
            pss.entry(shape).or_default().extend(run.pss_mb);
        }
    }
    let digests = digests(keel, Shape::All, log_runs)?;
    Ok(Startup {
        digests,
        version: summarize(versions),
        first: first.into_iter().map(|(k, v)| (k, summarize(v))).collect(),
        pss_mb: pss.into_iter().map(|(k, v)| (k, summarize(v))).collect(),
        breakdown,
    })
}

impl Startup {
    /// Start → first request of `shape`.
    pub fn first_request(&self, shape: Shape) -> Summary {
        self.first
            .get(&shape)
            .copied()
            .unwrap_or_else(|| summarize(Vec::new()))
    }

    fn rows(&self, shape: Shape) -> usize {
        self.breakdown.get(&shape).map_or(0, |b| b.rows)
    }

    /// (all − minimal) / (their row difference), from the medians of `of`.
    fn per_row(&self, of: &BTreeMap<Shape, Summary>) -> Option<f64> {
        let added = self
            .rows(Shape::All)
            .checked_sub(self.rows(Shape::Minimal))?;
        let (all, min) = (of.get(&Shape::All)?, of.get(&Shape::Minimal)?);
        (added > 0).then(|| (all.median - min.median) / added as f64)
    }

    /// The markdown tables.
    pub fn report(&self) -> String {
        let mut r = String::new();
        let _ = writeln!(r, "\n## Start-up by rows (issue 25; same loop)\n");
        let _ = writeln!(r, "| measure | rows | median | p90 | min | runs |");
        let _ = writeln!(r, "|---|---|---|---|---|---|");
        let v = self.version;
        let _ = writeln!(
            r,
            "| `keel --version` (spawn → exit) | | {:.1} ms | {:.1} ms | {:.1} ms | {} |",
            v.median, v.p90, v.min, v.n
        );
        for shape in SHAPES {
            let s = self.first_request(shape);
            let _ = writeln!(
                r,
                "| start → first request, {} | {} | {:.1} ms | {:.1} ms | {:.1} ms | {} |",
                shape.name(),
                self.rows(shape),
                s.median,
                s.p90,
                s.min,
                s.n
            );
        }
        for shape in [Shape::Minimal, Shape::All] {
            if let Some(s) = self.pss_mb.get(&shape) {
                let _ = writeln!(
                    r,
                    "| PSS at the first request, {} | {} | {:.1} MB | {:.1} MB | {:.1} MB | {} |",
                    shape.name(),
                    self.rows(shape),
                    s.median,
                    s.p90,
                    s.min,
                    s.n
                );
            }
        }
        let all = self.first_request(Shape::All).median;
        let _ = writeln!(
            r,
            "\n- cost per added row (all − minimal) / (rows all − rows minimal): {} (target ≤ 0.3 ms), {} PSS (target ≤ 0.5 MB)",
            self.per_row(&self.first)
                .map_or("n/a".to_owned(), |ms| format!("{ms:.2} ms")),
            self.per_row(&self.pss_mb)
                .map_or("n/a".to_owned(), |mb| format!("{mb:.2} MB")),
        );
        let _ = writeln!(
            r,
            "- all rows / `keel --version`: {:.1}× (target ≤ 5×); all − minimal: {:.1} ms (target ≤ 2 ms)",
            all / v.median.max(f64::MIN_POSITIVE),
            all - self.first_request(Shape::Minimal).median
        );
        for shape in SHAPES {
            let Some(b) = self.breakdown.get(&shape) else {
                continue;
            };
            let n = b.at.values().map(Vec::len).max().unwrap_or(0);
            let _ = writeln!(
                r,
                "\n### Where start-up goes: {} ({} rows; `KEEL_LOG=keel::boot=debug`, median of {n})\n",
                shape.name(),
                b.rows
            );
            let _ = writeln!(r, "| phase | at (ms since exec) | took (ms) |");
            let _ = writeln!(r, "|---|---|---|");
            for key in &b.order {
                let at = Breakdown::median(&b.at, key).unwrap_or(f64::NAN);
                let took =
                    Breakdown::median(&b.took, key).map_or(String::new(), |t| format!("{t:.2}"));
                let _ = writeln!(r, "| {key} | {at:.2} | {took} |");
            }
        }
        let _ = writeln!(
            r,
            "\n### blake3 of each library of `all` (1 MiB reads, one thread, page cache warm)\n"
        );
        let _ = writeln!(r, "| library | MiB | digest (ms) |");
        let _ = writeln!(r, "|---|---|---|");
        for (name, mib, ms) in &self.digests {
            let _ = writeln!(r, "| {name} | {mib:.1} | {ms:.2} |");
        }
        let (mib, ms) = self
            .digests
            .iter()
            .fold((0.0, 0.0), |(a, b), (_, m, t)| (a + m, b + t));
        let _ = writeln!(r, "| **total** | {mib:.1} | {ms:.2} |");
        r
    }

    /// The JSON of `target/bench/agent.json`'s `startup`.
    pub fn json(&self) -> Value {
        let by = |m: &BTreeMap<Shape, Summary>, unit: &str| -> Value {
            m.iter()
                .map(|(k, s)| {
                    (
                        k.name().to_owned(),
                        json!({ "rows": self.rows(*k), unit: summary_json(*s) }),
                    )
                })
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        json!({
            "version_ms": summary_json(self.version),
            "first_request": by(&self.first, "ms"),
            "pss_at_first_request": by(&self.pss_mb, "mb"),
            "per_row_ms": self.per_row(&self.first).map(round),
            "per_row_pss_mb": self.per_row(&self.pss_mb).map(round),
            "digests_all": self.digests.iter().map(|(n, mib, ms)| json!({ "library": n, "mib": round(*mib), "ms": round(*ms) })).collect::<Vec<_>>(),
            "breakdown": self.breakdown.iter().map(|(k, b)| (k.name().to_owned(), b.json())).collect::<serde_json::Map<_, _>>(),
            "targets": { "per_row_ms_max": 0.3, "per_row_pss_mb_max": 0.5, "all_over_version_max": 5.0, "all_minus_minimal_ms_max": 2.0 },
        })
    }
}
