//! Agent benchmarks (issue 4, ARCHITECTURE §12), against the loopback model server of
//! `keel_tests::model_server` and the release build:
//!
//! 1. **Start → first model request**: from spawning `keel run` to the server holding the first
//!    chat-completions request (exec, profile resolution, loading every agent plugin, activation,
//!    session creation, the first checkpoint, the system prompt, the request itself), for three
//!    profiles in the same loop with a bare `keel --version` (issue 25 item 1): the minimal
//!    working agent, a middle one and every shipped row (`base` + `agent` + adapter + driver, the
//!    `headless` shape), so the cost per added row is a printed number; PSS when the first
//!    request arrives for the smallest and the largest; and where start-up goes
//!    (`KEEL_LOG=keel::boot=debug`, medians per phase and per row) — see [`startup`].
//! 2. **Per-step overhead**: a 50-step headless session (49 steps each calling `list_dir`, a
//!    trivial in-process tool, then a final answer) against a server that answers at once. The
//!    time between the first and the last request, divided by the steps in between, is what
//!    keel spends per step: SSE parsing, the log appends, three checkpoints (pre-step flush,
//!    `llm/stream` flush, `tools/execute` flush, each an fsync on JSONL), the tool pipeline, the
//!    projection and the next request. No tool process time is involved.
//!
//! 3. **First piece → stdout**: the model's first text piece of a step to its `stream_event`
//!    line on keel's stdout, with `--include-partial-messages` (issue 26 item 1) — see
//!    [`stream`].
//!
//! Prints a table and writes `target/bench/agent.json`. `--quick` runs fewer repetitions.
//! Under `cargo test --benches` (no `--bench` flag) it does nothing.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use keel_tests::bench::{Summary, machine, release_dir, summarize};
use keel_tests::model_server::{ModelServer, Reply};
use serde_json::{Value, json};

#[path = "agent_startup.rs"]
mod startup;
#[path = "agent_stream.rs"]
mod stream;

const STEPS: usize = 50;

fn main() -> ExitCode {
    keel_tests::bench::harness_main("agent benchmarks", run)
}

struct Sandbox {
    dir: tempfile::TempDir,
    keel: PathBuf,
}

impl Sandbox {
    fn new(keel: PathBuf) -> Result<Sandbox, String> {
        let dir = tempfile::Builder::new()
            .prefix("keel-agent-bench-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        for sub in ["home", "config/profiles", "work"] {
            std::fs::create_dir_all(dir.path().join(sub)).map_err(|e| format!("{sub}: {e}"))?;
        }
        Ok(Sandbox { dir, keel })
    }

    /// Profile `b`: every shipped row (`headless`'s shape) against `server`.
    fn profile(&self, server: &ModelServer) -> Result<(), String> {
        self.write_profile("b", &startup::Shape::All.toml(&server.base_url()))
    }

    fn write_profile(&self, name: &str, toml: &str) -> Result<(), String> {
        let path = self.dir.path().join(format!("config/profiles/{name}.toml"));
        std::fs::write(&path, toml).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn spawn(&self) -> Result<std::process::Child, String> {
        self.spawn_with(&[])
    }

    fn spawn_with(&self, extra: &[&str]) -> Result<std::process::Child, String> {
        self.spawn_profile("b", extra, None)
    }

    /// `keel run --profile NAME EXTRA… benchmark`, with `KEEL_LOG` set to `log` if given.
    fn spawn_profile(
        &self,
        name: &str,
        extra: &[&str],
        log: Option<&str>,
    ) -> Result<std::process::Child, String> {
        let mut cmd = Command::new(&self.keel);
        cmd.args(["run", "--profile", name])
            .args(extra)
            .arg("benchmark")
            .current_dir(self.dir.path().join("work"))
            .env_remove("KEEL_PLUGIN_PATH")
            .env_remove("KEEL_LOG");
        if let Some(log) = log {
            cmd.env("KEEL_LOG", log);
        }
        cmd.env("KEEL_HOME", self.dir.path().join("home"))
            .env("KEEL_CONFIG_PATH", self.dir.path().join("config"))
            .env("KEEL_BENCH_KEY", "bench-key")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", self.keel.display()))
    }
}

fn finish(child: std::process::Child) -> Result<(), String> {
    finish_output(child).map(drop)
}

/// Waits for keel and answers its stderr, or an error with it when keel failed.
fn finish_output(child: std::process::Child) -> Result<String, String> {
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stderr).into_owned())
    } else {
        Err(format!(
            "keel exited {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Per-step time of a 50-step session, in ms; `ephemeral` runs it with `--ephemeral` (the
/// checkpoints still run; nothing reaches the disk), which separates keel's own time from the
/// machine's fsync latency.
fn per_step(keel: &Path, ephemeral: bool) -> Result<f64, String> {
    let sandbox = Sandbox::new(keel.to_path_buf())?;
    let mut replies: Vec<Reply> = (0..STEPS - 1)
        .map(|i| {
            Reply::tool_calls(vec![(
                format!("c{i}"),
                "list_dir".to_owned(),
                r#"{"path":"."}"#.to_owned(),
            )])
        })
        .collect();
    replies.push(Reply::text("done"));
    let server = ModelServer::start(replies);
    sandbox.profile(&server)?;
    let child = if ephemeral {
        sandbox.spawn_with(&["--ephemeral"])?
    } else {
        sandbox.spawn()?
    };
    finish(child)?;
    // Arrival times are read after the run: nothing in this process wakes up per step.
    let stamps: Vec<Instant> = server.completions().iter().map(|r| r.at).collect();
    if stamps.len() != STEPS {
        return Err(format!("expected {STEPS} requests, got {}", stamps.len()));
    }
    let (Some(first), Some(last)) = (stamps.first(), stamps.last()) else {
        return Err("no requests".to_owned());
    };
    Ok(last.duration_since(*first).as_secs_f64() * 1e3 / (STEPS - 1) as f64)
}

/// The machine's append + `fdatasync` latency (256 bytes at a time, 50 times), in ms: what each
/// of a step's three checkpoints waits for at least.
fn fsync_latency() -> Result<Summary, String> {
    use std::io::Write as _;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("probe.jsonl"))
        .map_err(|e| e.to_string())?;
    let line = [b'x'; 255];
    let mut samples = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        file.write_all(&line).map_err(|e| e.to_string())?;
        file.write_all(b"\n").map_err(|e| e.to_string())?;
        file.sync_data().map_err(|e| e.to_string())?;
        samples.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(summarize(samples))
}

fn summary_json(s: Summary) -> Value {
    json!({ "median": round(s.median), "p90": round(s.p90), "min": round(s.min), "max": round(s.max), "n": s.n })
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn run(quick: bool) -> Result<(), String> {
    let release = release_dir()?;
    let keel = release.join("keel");
    let (first_runs, step_runs) = if quick { (3, 1) } else { (20, 5) };
    let start = startup::measure(&keel, first_runs, if quick { 2 } else { 5 })?;
    let first = start.first_request(startup::Shape::All);
    let (mut steps, mut steps_eph) = (Vec::new(), Vec::new());
    for _ in 0..step_runs {
        steps.push(per_step(&keel, false)?);
        steps_eph.push(per_step(&keel, true)?);
    }
    let steps = summarize(steps);
    let steps_eph = summarize(steps_eph);
    let fsync = fsync_latency()?;
    let piece = stream::measure(&keel, if quick { 3 } else { 10 }, |url| {
        startup::Shape::All.toml(url)
    })?;
    let mut report = String::new();
    let _ = writeln!(report, "## Agent\n");
    let _ = writeln!(report, "| measure | median | p90 | min | runs | target |");
    let _ = writeln!(report, "|---|---|---|---|---|---|");
    let _ = writeln!(
        report,
        "| start → first model request (every shipped row) | {:.1} ms | {:.1} ms | {:.1} ms | {} | ≤ 15 ms (issue 25) |",
        first.median, first.p90, first.min, first.n
    );
    let _ = writeln!(
        report,
        "| per step, {STEPS}-step session (checkpoints on) | {:.2} ms | {:.2} ms | {:.2} ms | {} | ≤ 2 ms |",
        steps.median, steps.p90, steps.min, steps.n
    );
    let _ = writeln!(
        report,
        "| per step, same session with `--ephemeral` (no disk) | {:.2} ms | {:.2} ms | {:.2} ms | {} | |",
        steps_eph.median, steps_eph.p90, steps_eph.min, steps_eph.n
    );
    let _ = writeln!(
        report,
        "| model's first text piece → its stream_event line on stdout | {:.3} ms | {:.3} ms | {:.3} ms | {} | ≤ 2 ms (issue 26) |",
        piece.median, piece.p90, piece.min, piece.n
    );
    let _ = writeln!(
        report,
        "| this machine's append + fdatasync (256 B) | {:.3} ms | {:.3} ms | {:.3} ms | {} | |",
        fsync.median, fsync.p90, fsync.min, fsync.n
    );
    report.push_str(&start.report());
    println!("{report}");
    let json = json!({
        "machine": machine(),
        "first_request_ms": summary_json(first),
        "startup": start.json(),
        "per_step_ms": summary_json(steps),
        "per_step_ephemeral_ms": summary_json(steps_eph),
        "fdatasync_ms": summary_json(fsync),
        "first_piece_to_stdout_ms": summary_json(piece),
        "steps": STEPS,
    });
    keel_tests::bench::write_results(&release, "agent", &json)?;
    Ok(())
}
