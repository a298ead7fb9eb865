//! Context benchmark (issue 14): what compaction costs, in the release build.
//!
//! - **The long session**: 300 headless steps, each a `read_file` of an 8 KB workspace file,
//!   then a final answer, against the loopback model server with a 16k-token window (the
//!   `llm-openai` row says the same: `context_window = 16384`, `output_reserve = 1024`), the
//!   shipped `context` row with its defaults (sink). With compaction the history the model sees
//!   stays bounded, so the cost of a step must too: keel's **CPU per step** over steps
//!   290→300 against 1→10 (target ≤ 1.5×), read by the server's hook the moment request N
//!   arrives (a cgroup of keel's own when the bench may create one, else `/proc` ticks; see
//!   `growth_cpu.rs`).
//! - **One sink compaction**: a step whose request carries stubs the previous one did not
//!   (a compaction ran before it) against the other steps: keel's time per step (from the
//!   server's answer to the next request) and CPU, medians; the difference is the compaction.
//! - **One summarise compaction** with the model's time left out: short sessions of three
//!   14 KB reads under the same window with `strategies = ["summarise", "sink"]`; the fourth
//!   request is preceded by the side request, which the server answers at once. keel's time for
//!   that step is (side request − previous answer) + (request − side answer), against the
//!   step before it.
//!
//! Median of 3 long sessions and 10 short ones (1 and 3 with `--quick`). Prints a table and
//! writes `target/bench/context.json`. Under `cargo test --benches` it does nothing.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keel_tests::bench::{machine, release_dir, summarize};

#[path = "growth_cpu.rs"]
mod growth_cpu;
use growth_cpu::CpuMeter;
use keel_tests::model_server::{ModelServer, Reply, Window};
use serde_json::{Value, json};

/// Tool-calling steps of the long session; request STEPS + 1 gets the final answer.
const STEPS: usize = 300;
/// The window (server and row) and the row's output reserve, in tokens.
const WINDOW: u64 = 16_384;
const RESERVE: u64 = 1024;
/// The requests that bound the CPU windows: 1→10 and 290→300.
const WINDOWS: [(usize, usize); 2] = [(1, 10), (290, 300)];
/// A run that takes longer than this is stuck.
const TIMEOUT: Duration = Duration::from_secs(300);
/// The summarise prompt's text.
const PROMPT: &str = "Summarise the history above for the agent itself.\n";

fn main() -> ExitCode {
    keel_tests::bench::harness_main("context benchmark", run)
}

/// What the hook saw when one chat-completions request arrived.
#[derive(Debug, Clone)]
struct Sample {
    at: Instant,
    answered: Instant,
    cpu_ns: Option<u64>,
    /// The request's stubs (`[keel context: …` contents), joined.
    stubs: String,
    /// The request's system message (tells the summarise side request apart).
    system: String,
}

/// A fresh home, config and workspace.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Result<Scratch, String> {
        let dir = tempfile::Builder::new()
            .prefix("keel-context-bench-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        for sub in ["home", "config/profiles", "work"] {
            std::fs::create_dir_all(dir.path().join(sub)).map_err(|e| format!("{sub}: {e}"))?;
        }
        Ok(Scratch { dir })
    }

    fn write(&self, rel: &str, text: &str) -> Result<(), String> {
        let p = self.dir.path().join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))
    }

    fn profile(&self, server: &ModelServer, context: &str) -> Result<(), String> {
        self.write(
            "config/profiles/ctx.toml",
            &format!(
                r#"bundles = ["base", "agent"]

[[replace]]
id = "approval"
config = {{ mode = "never" }}

[[replace]]
id = "agent-loop"
config = {{ max_steps = 1000 }}

[[insert]]
id = "llm-openai"
plugin = "llm-openai"
config = {{ base_url = "{}", model = "bench", api_key_ref = "KEEL_BENCH_KEY", context_window = {WINDOW}, output_reserve = {RESERVE} }}

[[insert]]
id = "driver"
plugin = "headless"

{context}
"#,
                server.base_url()
            ),
        )
    }
}

/// About `bytes` bytes of text in 80-byte lines with `marker` on the first line.
fn text(seed: u64, marker: &str, bytes: usize) -> String {
    const WORDS: [&str; 8] = [
        "alpha", "copper", "ember", "gravel", "juniper", "lumen", "nickel", "prism",
    ];
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = String::with_capacity(bytes + 80);
    let mut first = true;
    while out.len() < bytes {
        let mut line = if first {
            format!("{marker} ")
        } else {
            String::new()
        };
        first = false;
        while line.len() < 79 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            line.push_str(WORDS[(state % 8) as usize]);
            line.push(' ');
        }
        line.truncate(79);
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn read(i: usize, path: &str) -> Reply {
    Reply::tool_calls(vec![(
        format!("c{i}"),
        "read_file".to_owned(),
        json!({ "path": path }).to_string(),
    )])
}

/// Runs `keel run --profile ctx PROMPT` in `scratch` against `server`, sampling every request;
/// returns the samples in arrival order.
fn drive(
    keel: &Path,
    scratch: &Scratch,
    server: &ModelServer,
) -> Result<(Vec<Sample>, &'static str), String> {
    let pid = Arc::new(AtomicU32::new(0));
    let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
    let meter: Arc<Mutex<Option<CpuMeter>>> = Arc::default();
    {
        let (pid, samples, meter) = (Arc::clone(&pid), Arc::clone(&samples), Arc::clone(&meter));
        server.on_completion(move |request| {
            let p = keel_pid(&pid);
            let cpu_ns = meter
                .lock()
                .ok()
                .and_then(|m| m.as_ref().and_then(|m| m.read_ns(|| cpu_ticks(p))));
            let messages = request.messages().as_array().cloned().unwrap_or_default();
            let stubs: Vec<&str> = messages
                .iter()
                .filter_map(|m| m["content"].as_str())
                .filter(|c| c.contains("[keel context:"))
                .collect();
            let system = messages
                .first()
                .and_then(|m| m["content"].as_str())
                .unwrap_or_default()
                .to_owned();
            let sample = Sample {
                at: request.at,
                answered: Instant::now(),
                cpu_ns,
                stubs: stubs.join("\u{1}"),
                system,
            };
            if let Ok(mut s) = samples.lock() {
                s.push(sample);
            }
        });
    }
    let dir = scratch.dir.path();
    let stderr_path = dir.join("stderr.txt");
    let stderr = std::fs::File::create(&stderr_path).map_err(|e| format!("stderr file: {e}"))?;
    let mut child = Command::new(keel)
        .args(["run", "--profile", "ctx", "benchmark"])
        .current_dir(dir.join("work"))
        .env_remove("KEEL_PLUGIN_PATH")
        .env_remove("KEEL_LOG")
        .env("KEEL_HOME", dir.join("home"))
        .env("KEEL_CONFIG_PATH", dir.join("config"))
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
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| format!("wait: {e}"))? {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("keel did not finish within {TIMEOUT:?}; killed"));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if !status.success() {
        let err = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        return Err(format!("keel exited {:?}: {}", status.code(), err.trim()));
    }
    if server.consumed() != server.completions().len() {
        return Err("the server refused a request as over its window".to_owned());
    }
    let samples = samples
        .lock()
        .map_err(|_| "the sample lock is poisoned".to_owned())?
        .clone();
    let source = meter
        .lock()
        .ok()
        .and_then(|m| m.as_ref().map(CpuMeter::source))
        .unwrap_or("none");
    Ok((samples, source))
}

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

/// utime + stime + cutime + cstime of `pid`, in ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|f| f.parse::<i64>().map_or(0, |v| v.max(0) as u64))
        .collect();
    Some(f.get(11)? + f.get(12)? + f.get(13)? + f.get(14)?)
}

/// keel's time for request `n` (1-based): from the answer to request n−1 to request n.
fn keel_ms(s: &[Sample], n: usize) -> f64 {
    s[n - 1]
        .at
        .saturating_duration_since(s[n - 2].answered)
        .as_secs_f64()
        * 1e3
}

/// The long session's measures.
#[derive(Debug, Clone)]
struct Long {
    cpu: [f64; 2],
    wall: [f64; 2],
    compactions: usize,
    compaction_wall: f64,
    normal_wall: f64,
    compaction_cpu: f64,
    normal_cpu: f64,
    max_tokens: u64,
    source: &'static str,
}

fn long_session(keel: &Path) -> Result<Long, String> {
    let scratch = Scratch::new()?;
    let mut replies: Vec<Reply> = (0..STEPS)
        .map(|i| read(i, &format!("f/{i:03}.txt")))
        .collect();
    replies.push(Reply::text("done"));
    for i in 0..STEPS {
        scratch.write(
            &format!("work/f/{i:03}.txt"),
            &text(i as u64 + 1, &format!("zqmark{i:03}x"), 8000),
        )?;
    }
    let server = ModelServer::start_windowed(Window::new(WINDOW), replies);
    scratch.profile(&server, "")?;
    let (s, source) = drive(keel, &scratch, &server)?;
    if s.len() != STEPS + 1 {
        return Err(format!("expected {} requests, got {}", STEPS + 1, s.len()));
    }
    let cpu_ns = |n: usize| {
        s[n - 1]
            .cpu_ns
            .ok_or_else(|| format!("could not read keel's CPU time at request {n}"))
    };
    let mut m = Long {
        cpu: [0.0; 2],
        wall: [0.0; 2],
        compactions: 0,
        compaction_wall: 0.0,
        normal_wall: 0.0,
        compaction_cpu: 0.0,
        normal_cpu: 0.0,
        // Counted by the server after the hook ran: read from its record, not the sample.
        max_tokens: server
            .completions()
            .iter()
            .map(|r| r.prompt_tokens())
            .max()
            .unwrap_or(0),
        source,
    };
    for (w, &(a, b)) in WINDOWS.iter().enumerate() {
        let steps = (b - a) as f64;
        m.cpu[w] = cpu_ns(b)?.saturating_sub(cpu_ns(a)?) as f64 / 1e6 / steps;
        m.wall[w] = (a + 1..=b).map(|n| keel_ms(&s, n)).sum::<f64>() / steps;
    }
    let (mut cw, mut nw, mut cc, mut nc) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for n in 2..=s.len() {
        let cpu = match (s[n - 1].cpu_ns, s[n - 2].cpu_ns) {
            (Some(b), Some(a)) => b.saturating_sub(a) as f64 / 1e6,
            _ => 0.0,
        };
        if s[n - 1].stubs != s[n - 2].stubs {
            cw.push(keel_ms(&s, n));
            cc.push(cpu);
        } else {
            nw.push(keel_ms(&s, n));
            nc.push(cpu);
        }
    }
    m.compactions = cw.len();
    if m.compactions == 0 {
        return Err("no request carried a compaction stub: nothing was compacted".to_owned());
    }
    m.compaction_wall = summarize(cw).median;
    m.normal_wall = summarize(nw).median;
    m.compaction_cpu = summarize(cc).median;
    m.normal_cpu = summarize(nc).median;
    Ok(m)
}

/// One summarise session: (keel's time for the summarising step, for the step before), ms.
fn summarise_session(keel: &Path) -> Result<(f64, f64), String> {
    let scratch = Scratch::new()?;
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        scratch.write(
            &format!("work/{name}.txt"),
            &text(50 + i as u64, &format!("zq{name}mark"), 14_000),
        )?;
    }
    scratch.write("config/profiles/summarise.md", PROMPT)?;
    let server = ModelServer::start_windowed(
        Window::new(WINDOW),
        vec![
            read(0, "a.txt"),
            read(1, "b.txt"),
            read(2, "c.txt"),
            Reply::text("SUMMARY: three files read."),
            Reply::text("done"),
        ],
    );
    scratch.profile(
        &server,
        "[[replace]]\nid = \"context\"\nconfig = { strategies = [\"summarise\", \"sink\"], \
         keep_recent_steps = 1, summarise = { prompt = \"${this_dir}/summarise.md\" } }\n",
    )?;
    let (s, _) = drive(keel, &scratch, &server)?;
    if s.len() != 5 || s[3].system != PROMPT {
        return Err(format!(
            "expected r1-r3, the summarise side request, r4; got {} requests (4th system: {:?})",
            s.len(),
            s.get(3).map(|x| &x.system)
        ));
    }
    let summarising = keel_ms(&s, 4) + keel_ms(&s, 5);
    Ok((summarising, keel_ms(&s, 3)))
}

/// The 1-minute load average (`None` without `/proc/loadavg`).
fn loadavg() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    summarize(values.collect()).median
}

fn run(quick: bool) -> Result<(), String> {
    let release = release_dir()?;
    let keel = release.join("keel");
    let (long_runs, short_runs) = if quick { (1, 3) } else { (3, 10) };
    // Wall times on a shared machine depend on what else runs; the JSON keeps the load.
    let load_before = loadavg();
    let mut long = Vec::new();
    for i in 0..long_runs {
        let m = long_session(&keel)?;
        eprintln!(
            "context run {}/{long_runs}: CPU/step {:.2} → {:.2} ms, {} compactions",
            i + 1,
            m.cpu[0],
            m.cpu[1],
            m.compactions
        );
        long.push(m);
    }
    let mut short = Vec::new();
    for _ in 0..short_runs {
        short.push(summarise_session(&keel)?);
    }
    let med = |f: &dyn Fn(&Long) -> f64| median(long.iter().map(f));
    let cpu = [med(&|m| m.cpu[0]), med(&|m| m.cpu[1])];
    let wall = [med(&|m| m.wall[0]), med(&|m| m.wall[1])];
    let ratio = med(&|m| m.cpu[1] / m.cpu[0].max(f64::MIN_POSITIVE));
    let (cw, nw) = (med(&|m| m.compaction_wall), med(&|m| m.normal_wall));
    let (cc, nc) = (med(&|m| m.compaction_cpu), med(&|m| m.normal_cpu));
    let compactions = med(&|m| m.compactions as f64);
    let max_tokens = long.iter().map(|m| m.max_tokens).max().unwrap_or(0);
    let sw = median(short.iter().map(|s| s.0));
    let sn = median(short.iter().map(|s| s.1));
    let source = long.first().map_or("none", |m| m.source);

    let mut report = String::new();
    let _ = writeln!(
        report,
        "## Context ({STEPS} steps of one 8 KB read_file under a {WINDOW}-token window; \
         median of {long_runs} run(s))\n"
    );
    let _ = writeln!(report, "CPU counted by: {source}\n");
    let _ = writeln!(report, "| | steps 1→10 | steps 290→300 | ratio | target |");
    let _ = writeln!(report, "|---|---|---|---|---|");
    let _ = writeln!(
        report,
        "| keel CPU per step | {:.2} ms | {:.2} ms | {ratio:.2}× | ≤ 1.5× |",
        cpu[0], cpu[1]
    );
    let _ = writeln!(
        report,
        "| keel wall per step (answer → next request) | {:.2} ms | {:.2} ms | | |",
        wall[0], wall[1]
    );
    let _ = writeln!(
        report,
        "\n| one compaction (model excluded) | step with it | other steps | compaction |"
    );
    let _ = writeln!(report, "|---|---|---|---|");
    let _ = writeln!(
        report,
        "| sink, wall ({compactions:.0} per session, largest request {max_tokens} tokens) | \
         {cw:.2} ms | {nw:.2} ms | {:.2} ms |",
        cw - nw
    );
    let _ = writeln!(
        report,
        "| sink, CPU | {cc:.2} ms | {nc:.2} ms | {:.2} ms |",
        cc - nc
    );
    let _ = writeln!(
        report,
        "| summarise, wall (median of {short_runs}) | {sw:.2} ms | {sn:.2} ms | {:.2} ms |",
        sw - sn
    );
    println!("{report}");

    let json = json!({
        "machine": machine(),
        "loadavg": { "before": load_before, "after": loadavg() },
        "steps": STEPS,
        "window_tokens": WINDOW,
        "output_reserve": RESERVE,
        "long_runs": long_runs,
        "short_runs": short_runs,
        "cpu_source": source,
        "cpu_per_step_ms": { "1-10": round(cpu[0]), "290-300": round(cpu[1]) },
        "cpu_ratio": round(ratio),
        "wall_per_step_ms": { "1-10": round(wall[0]), "290-300": round(wall[1]) },
        "sink": {
            "compactions_per_session": compactions,
            "step_wall_ms": round(cw), "other_step_wall_ms": round(nw),
            "compaction_wall_ms": round(cw - nw),
            "step_cpu_ms": round(cc), "other_step_cpu_ms": round(nc),
            "compaction_cpu_ms": round(cc - nc),
        },
        "summarise": {
            "step_wall_ms": round(sw), "previous_step_wall_ms": round(sn),
            "compaction_wall_ms": round(sw - sn),
        },
        "largest_request_tokens": max_tokens,
        "targets": { "cpu_ratio_max": 1.5 },
        "per_run": long.iter().map(|m| json!({
            "cpu_per_step_ms": [round(m.cpu[0]), round(m.cpu[1])],
            "compactions": m.compactions,
            "sink_step_wall_ms": round(m.compaction_wall),
            "other_step_wall_ms": round(m.normal_wall),
        })).collect::<Vec<Value>>(),
    });
    keel_tests::bench::write_results(&release, "context", &json)?;
    Ok(())
}
