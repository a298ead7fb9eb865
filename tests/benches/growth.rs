//! Growth benchmark (issue 12): what a step costs as the session grows. A 200-step headless
//! session of the release `keel` against the loopback model server of
//! `keel_tests::model_server`; each step the model calls `shell` with
//! `head -c 6000 /dev/urandom | base64 -w 100` (about 8 KB of output, confined by the sandbox
//! row as a user's would be), then answers finally. Only the HTTP body has to grow with the
//! history; a step's CPU and keel's memory should not, which is what this measures:
//!
//! - **CPU per step**: the CPU of keel and its shell children, read by the server's hook the
//!   moment request N arrives, averaged over steps 1→10, 10→100 and 100→200, and the ratio
//!   (100→200)/(1→10) (target ≤ 1.3). Counted by a cgroup of keel's own when the bench may
//!   create one (nanoseconds, [`growth_cpu`]), else utime+stime+cutime+cstime from
//!   `/proc/<pid>/stat` (10 ms ticks: a window of 9 steps then resolves about 1 ms per step).
//! - **Wall per step** over the same windows: from the server answering request N to request
//!   N+1 arriving (keel's time; the server's own parse of the body is left out), and the raw
//!   arrival-to-arrival time beside it.
//! - **Memory**: PSS of keel's process tree (`/proc/<pid>/smaps_rollup` of keel and its live
//!   descendants) when requests 10, 50, 100 and 200 arrive, before they are answered (targets
//!   ≤ 30 MB at 50 and ≤ 45 MB at 200, issue 25), and the size of each of those request bodies
//!   and of the last one.
//!
//! The server answers at once (no delays), so keel's cost dominates. Median of 3 runs, 1 with
//! `--quick`. Prints a table and writes `target/bench/growth.json`. Under `cargo test --benches`
//! (no `--bench` flag) it does nothing.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keel_tests::bench::{machine, release_dir, summarize};

#[path = "growth_cpu.rs"]
mod growth_cpu;
use growth_cpu::CpuMeter;
use keel_tests::model_server::{ModelServer, Reply};
use serde_json::{Value, json};

/// Tool-calling steps; request STEPS + 1 gets the final answer.
const STEPS: usize = 200;
/// What the model runs each step: 6000 random bytes as 8000 base64 characters in lines of 100.
const COMMAND: &str = "head -c 6000 /dev/urandom | base64 -w 100";
/// The requests that bound the windows: 1→10, 10→100, 100→200.
const WINDOWS: [(usize, usize); 3] = [(1, 10), (10, 100), (100, 200)];
/// The requests at which PSS and the body size are read.
const MARKS: [usize; 4] = [10, 50, 100, 200];
/// A run that takes longer than this is stuck: keel is killed and the bench fails.
const TIMEOUT: Duration = Duration::from_secs(300);

fn main() -> ExitCode {
    keel_tests::bench::harness_main("growth benchmark", run)
}

/// What the hook saw when one chat-completions request arrived.
#[derive(Debug, Clone)]
struct Sample {
    /// The request was read whole.
    at: Instant,
    /// The hook was done and the server about to answer.
    answered: Instant,
    /// CPU of keel's tree so far, in ns (`None` when it could not be read).
    cpu_ns: Option<u64>,
    /// PSS of keel's tree in kB, at the [`MARKS`] only.
    pss_kb: Option<u64>,
    /// The request body's size in bytes.
    body_bytes: u64,
}

/// The measures of one run: per window (wall, raw wall, CPU; ms per step), per mark (PSS MB,
/// body bytes), the last body.
#[derive(Debug, Clone)]
struct Measured {
    wall: [f64; 3],
    wall_raw: [f64; 3],
    cpu: [f64; 3],
    pss_mb: [f64; 4],
    body: [u64; 4],
    last_body: u64,
    /// Where the CPU time came from ([`CpuMeter::source`]).
    cpu_source: &'static str,
}

impl Measured {
    fn cpu_ratio(&self) -> f64 {
        self.cpu[2] / self.cpu[0].max(f64::MIN_POSITIVE)
    }
    fn wall_ratio(&self) -> f64 {
        self.wall[2] / self.wall[0].max(f64::MIN_POSITIVE)
    }
}

/// One session: a fresh home, config and workspace, the server, keel, the samples.
fn session(keel: &Path) -> Result<Measured, String> {
    let dir = tempfile::Builder::new()
        .prefix("keel-growth-bench-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?;
    for sub in ["home", "config/profiles", "work"] {
        std::fs::create_dir_all(dir.path().join(sub)).map_err(|e| format!("{sub}: {e}"))?;
    }
    let args = json!({ "command": COMMAND }).to_string();
    let mut replies: Vec<Reply> = (0..STEPS)
        .map(|i| Reply::tool_calls(vec![(format!("c{i}"), "shell".to_owned(), args.clone())]))
        .collect();
    replies.push(Reply::text("done"));
    let server = ModelServer::start(replies);
    let profile = format!(
        r#"bundles = ["base", "agent"]

[[replace]]
id = "approval"
config = {{ mode = "never" }}

[[insert]]
id = "llm-openai"
plugin = "llm-openai"
config = {{ base_url = "{}", model = "bench", api_key_ref = "KEEL_BENCH_KEY" }}

[[insert]]
id = "driver"
plugin = "headless"
"#,
        server.base_url()
    );
    let path = dir.path().join("config/profiles/growth.toml");
    std::fs::write(&path, profile).map_err(|e| format!("{}: {e}", path.display()))?;

    let pid = Arc::new(AtomicU32::new(0));
    let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
    let meter: Arc<Mutex<Option<CpuMeter>>> = Arc::default();
    {
        let (pid, samples, meter) = (Arc::clone(&pid), Arc::clone(&samples), Arc::clone(&meter));
        server.on_completion(move |request| {
            let Ok(mut samples) = samples.lock() else {
                return;
            };
            let n = samples.len() + 1;
            let pid = keel_pid(&pid);
            let cpu_ns = meter
                .lock()
                .ok()
                .and_then(|m| m.as_ref().and_then(|m| m.read_ns(|| cpu_ticks(pid))));
            let pss_kb = if MARKS.contains(&n) {
                tree_pss_kb(pid)
            } else {
                None
            };
            let body_bytes = request
                .headers
                .get("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| serde_json::to_vec(&request.body).map_or(0, |b| b.len() as u64));
            samples.push(Sample {
                at: request.at,
                answered: Instant::now(),
                cpu_ns,
                pss_kb,
                body_bytes,
            });
        });
    }

    let stderr_path = dir.path().join("stderr.txt");
    let stderr = std::fs::File::create(&stderr_path).map_err(|e| format!("stderr file: {e}"))?;
    let child = Command::new(keel)
        .args([
            "run",
            "--profile",
            "growth",
            "-c",
            "agent-loop.max_steps=1000",
        ])
        .arg("benchmark")
        .current_dir(dir.path().join("work"))
        .env_remove("KEEL_PLUGIN_PATH")
        .env_remove("KEEL_LOG")
        .env("KEEL_HOME", dir.path().join("home"))
        .env("KEEL_CONFIG_PATH", dir.path().join("config"))
        .env("KEEL_BENCH_KEY", "bench-key")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", keel.display()))?;
    if let Ok(mut m) = meter.lock() {
        *m = Some(CpuMeter::attach(child.id()));
    }
    pid.store(child.id(), Ordering::SeqCst);
    let status = wait(child)?;
    if !status.success() {
        let err = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        return Err(format!("keel exited {:?}: {}", status.code(), err.trim()));
    }
    drop(server);
    let samples = samples
        .lock()
        .map_err(|_| "the sample lock is poisoned".to_owned())?
        .clone();
    let source = meter
        .lock()
        .ok()
        .and_then(|m| m.as_ref().map(CpuMeter::source))
        .unwrap_or("none");
    measure(&samples).map(|mut m| {
        m.cpu_source = source;
        m
    })
}

/// Waits for keel, killing it after [`TIMEOUT`].
fn wait(mut child: Child) -> Result<std::process::ExitStatus, String> {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| format!("wait for keel: {e}"))?
        {
            return Ok(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("keel did not finish within {TIMEOUT:?}; killed"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// keel's pid, once the spawning thread has stored it (the first request can only come after).
fn keel_pid(pid: &AtomicU32) -> u32 {
    for _ in 0..1000 {
        let p = pid.load(Ordering::SeqCst);
        if p != 0 {
            return p;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    0
}

/// The fields of `/proc/<pid>/stat` after the command name (index 0 is field 3, `state`).
fn stat_fields(pid: u32) -> Option<Vec<u64>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // `state` is a letter; number it 0 so every index stays in place.
    Some(
        rest.split_whitespace()
            .map(|f| f.parse::<i64>().map_or(0, |v| v.max(0) as u64))
            .collect(),
    )
}

/// utime + stime + cutime + cstime (fields 14–17) of `pid`, in ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let f = stat_fields(pid)?;
    Some(f.get(11)? + f.get(12)? + f.get(13)? + f.get(14)?)
}

/// PSS in kB of `pid` and its live descendants (`Pss:` of `smaps_rollup`).
fn tree_pss_kb(pid: u32) -> Option<u64> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        // Field 4, ppid, is index 1.
        if let Some(ppid) = stat_fields(p).and_then(|f| f.get(1).copied()) {
            parents.push((p, ppid as u32));
        }
    }
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    let mut total = 0;
    for p in &tree {
        let Ok(rollup) = std::fs::read_to_string(format!("/proc/{p}/smaps_rollup")) else {
            // A child that exited meanwhile has no memory left to count; keel itself must.
            if *p == pid {
                return None;
            }
            continue;
        };
        total += rollup
            .lines()
            .find_map(|l| l.strip_prefix("Pss:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(total)
}

/// The run's measures from its samples (one per request, in arrival order).
fn measure(samples: &[Sample]) -> Result<Measured, String> {
    if samples.len() != STEPS + 1 {
        return Err(format!(
            "expected {} model requests (every step and the final answer), the server saw {}",
            STEPS + 1,
            samples.len()
        ));
    }
    let at = |n: usize| &samples[n - 1];
    let cpu_ns = |n: usize| {
        at(n)
            .cpu_ns
            .ok_or_else(|| format!("could not read keel's CPU time at request {n}"))
    };
    let mut m = Measured {
        wall: [0.0; 3],
        wall_raw: [0.0; 3],
        cpu: [0.0; 3],
        pss_mb: [0.0; 4],
        body: [0; 4],
        last_body: samples.last().map_or(0, |s| s.body_bytes),
        cpu_source: "",
    };
    for (w, &(a, b)) in WINDOWS.iter().enumerate() {
        let steps = (b - a) as f64;
        let keel: Duration = (a + 1..=b)
            .map(|n| at(n).at.saturating_duration_since(at(n - 1).answered))
            .sum();
        m.wall[w] = keel.as_secs_f64() * 1e3 / steps;
        m.wall_raw[w] = at(b).at.duration_since(at(a).at).as_secs_f64() * 1e3 / steps;
        m.cpu[w] = cpu_ns(b)?.saturating_sub(cpu_ns(a)?) as f64 / 1e6 / steps;
    }
    for (k, &n) in MARKS.iter().enumerate() {
        let pss = at(n)
            .pss_kb
            .ok_or_else(|| format!("could not read keel's smaps_rollup at request {n}"))?;
        m.pss_mb[k] = pss as f64 / 1024.0;
        m.body[k] = at(n).body_bytes;
    }
    // base64 of 6000 bytes is 8000 characters: a history without them means the shell never
    // ran (e.g. no sandbox runner), and the numbers would measure something else.
    if m.last_body < (STEPS * 8000) as u64 {
        return Err(format!(
            "the last request is only {} bytes: the shell output did not reach the history",
            m.last_body
        ));
    }
    Ok(m)
}

/// The 1-minute load average (`None` without `/proc/loadavg`).
fn loadavg() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    summarize(values.collect()).median
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn run(quick: bool) -> Result<(), String> {
    let release = release_dir()?;
    let keel = release.join("keel");
    let runs = if quick { 1 } else { 3 };
    // Wall times on a shared 2-core machine depend on what else runs; the JSON keeps the load.
    let load_before = loadavg();
    let mut all = Vec::new();
    for i in 0..runs {
        let m = session(&keel)?;
        eprintln!(
            "growth run {}/{runs}: CPU/step {:.1}/{:.1}/{:.1} ms, PSS at 50 {:.1} MB, at 200 {:.1} MB",
            i + 1,
            m.cpu[0],
            m.cpu[1],
            m.cpu[2],
            m.pss_mb[1],
            m.pss_mb[3]
        );
        all.push(m);
    }
    let med3 = |f: &dyn Fn(&Measured) -> [f64; 3]| -> [f64; 3] {
        [0, 1, 2].map(|k| median(all.iter().map(|m| f(m)[k])))
    };
    let med4 = |f: &dyn Fn(&Measured) -> [f64; 4]| -> [f64; 4] {
        [0, 1, 2, 3].map(|k| median(all.iter().map(|m| f(m)[k])))
    };
    let wall = med3(&|m| m.wall);
    let wall_raw = med3(&|m| m.wall_raw);
    let cpu = med3(&|m| m.cpu);
    let pss = med4(&|m| m.pss_mb);
    let body = med4(&|m| m.body.map(|b| b as f64));
    let cpu_ratio = median(all.iter().map(Measured::cpu_ratio));
    let wall_ratio = median(all.iter().map(Measured::wall_ratio));
    let last_body = median(all.iter().map(|m| m.last_body as f64));

    let mut report = String::new();
    let _ = writeln!(
        report,
        "## Growth ({STEPS} steps, each one `shell` call printing 8 KB; median of {runs} run(s))\n"
    );
    let source = all.first().map_or("none", |m| m.cpu_source);
    let _ = writeln!(report, "CPU counted by: {source}\n");
    let _ = writeln!(
        report,
        "| | steps 1→10 | steps 10→100 | steps 100→200 | (100→200)/(1→10) | target |"
    );
    let _ = writeln!(report, "|---|---|---|---|---|---|");
    let _ = writeln!(
        report,
        "| CPU per step (keel and its shell children) | {:.1} ms | {:.1} ms | {:.1} ms | {cpu_ratio:.2}× | ≤ 1.3× |",
        cpu[0], cpu[1], cpu[2]
    );
    let _ = writeln!(
        report,
        "| wall per step (keel: answer → next request) | {:.1} ms | {:.1} ms | {:.1} ms | {wall_ratio:.2}× | |",
        wall[0], wall[1], wall[2]
    );
    let _ = writeln!(
        report,
        "| wall per step (request → request) | {:.1} ms | {:.1} ms | {:.1} ms | | |",
        wall_raw[0], wall_raw[1], wall_raw[2]
    );
    let _ = writeln!(
        report,
        "\n| when request N arrives | 10 | 50 | 100 | 200 | target |"
    );
    let _ = writeln!(report, "|---|---|---|---|---|---|");
    let _ = writeln!(
        report,
        "| PSS of keel's process tree | {:.1} MB | {:.1} MB | {:.1} MB | {:.1} MB | ≤ 30 MB at 50, ≤ 45 MB at 200 |",
        pss[0], pss[1], pss[2], pss[3]
    );
    let _ = writeln!(
        report,
        "| request body | {:.0} KB | {:.0} KB | {:.0} KB | {:.0} KB | last: {:.0} KB |",
        body[0] / 1024.0,
        body[1] / 1024.0,
        body[2] / 1024.0,
        body[3] / 1024.0,
        last_body / 1024.0
    );
    println!("{report}");

    let windows = |v: [f64; 3]| -> Value {
        json!({ "1-10": round(v[0]), "10-100": round(v[1]), "100-200": round(v[2]) })
    };
    let marks = |v: [f64; 4]| -> Value {
        json!({ "10": round(v[0]), "50": round(v[1]), "100": round(v[2]), "200": round(v[3]) })
    };
    let json = json!({
        "machine": machine(),
        "loadavg": { "before": load_before, "after": loadavg() },
        "steps": STEPS,
        "command": COMMAND,
        "runs": runs,
        "cpu_per_step_ms": windows(cpu),
        "cpu_source": source,
        "cpu_ratio": round(cpu_ratio),
        "wall_per_step_ms": windows(wall),
        "wall_ratio": round(wall_ratio),
        "wall_per_step_raw_ms": windows(wall_raw),
        "pss_mb": marks(pss),
        "body_bytes": marks(body),
        "last_body_bytes": last_body,
        "targets": { "cpu_ratio_max": 1.3, "pss_mb_at_50_max": 30.0, "pss_mb_at_200_max": 45.0 },
        "per_run": all.iter().map(|m| json!({
            "cpu_per_step_ms": windows(m.cpu),
            "wall_per_step_ms": windows(m.wall),
            "wall_per_step_raw_ms": windows(m.wall_raw),
            "pss_mb": marks(m.pss_mb),
            "last_body_bytes": m.last_body,
        })).collect::<Vec<_>>(),
    });
    keel_tests::bench::write_results(&release, "growth", &json)?;
    Ok(())
}
