//! Subagent benchmarks (issue 16, "Benchmarks"), against the loopback model server (its
//! per-conversation routes) and the release build:
//!
//! 1. **Added cost of a spawned child over a plain tool call.** From the moment the server
//!    finished writing the parent's answer that holds the call to the next model request: for
//!    `read_file`, the parent's own next request; for `agent`, the child's first request
//!    (the tool pipeline, `keel.agent` `create` with lineage, the child's session, the
//!    approval mode, `subagent/spawned` made durable in the parent (one flush), the task sent,
//!    the child's first checkpoint and request). Also the way back: from the child's answer to
//!    the parent's next request (the child's turn closing, its session closed and flushed,
//!    `subagent/ended`, the tool result).
//! 2. **4 parallel children vs 4 sequential ones** on the same script, each child's model
//!    answer delayed 200 ms: the wall time from the parent's first answer to its last request.
//!
//! Prints a table and writes `target/bench/subagent.json`. `--quick` runs fewer repetitions.
//! Under `cargo test --benches` (no `--bench` flag) it does nothing.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keel_tests::bench::{machine, release_dir, summarize};
use keel_tests::model_server::{ModelServer, Reply, Request};
use serde_json::{Value, json};

/// Each child's model answer waits this long in the parallel/sequential comparison.
const CHILD_DELAY: Duration = Duration::from_millis(200);
const CHILDREN: usize = 4;

fn main() -> std::process::ExitCode {
    keel_tests::bench::harness_main("subagent benchmarks", run)
}

/// Runs `keel run` once against `server` in a fresh home and workspace.
fn keel_run(keel: &Path, server: &ModelServer) -> Result<(), String> {
    let dir = tempfile::Builder::new()
        .prefix("keel-subagent-bench-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?;
    for sub in ["home", "config/profiles", "work"] {
        std::fs::create_dir_all(dir.path().join(sub)).map_err(|e| format!("{sub}: {e}"))?;
    }
    std::fs::write(dir.path().join("work/small.txt"), "hello\n").map_err(|e| e.to_string())?;
    let toml = format!(
        "bundles = [\"base\", \"agent\"]\n\n[[replace]]\nid = \"approval\"\nconfig = {{ mode = \"never\" }}\n\n\
         [[insert]]\nid = \"llm-openai\"\nplugin = \"llm-openai\"\n\
         config = {{ base_url = \"{}\", model = \"bench\", api_key_ref = \"KEEL_BENCH_KEY\" }}\n\n\
         [[insert]]\nid = \"driver\"\nplugin = \"headless\"\n",
        server.base_url()
    );
    let path = dir.path().join("config/profiles/b.toml");
    std::fs::write(&path, toml).map_err(|e| format!("{}: {e}", path.display()))?;
    let out = Command::new(keel)
        .args(["run", "--profile", "b", "benchmark"])
        .current_dir(dir.path().join("work"))
        .env_remove("KEEL_PLUGIN_PATH")
        .env_remove("KEEL_LOG")
        .env("KEEL_HOME", dir.path().join("home"))
        .env("KEEL_CONFIG_PATH", dir.path().join("config"))
        .env("KEEL_BENCH_KEY", "bench-key")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("spawn {}: {e}", keel.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "keel exited {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn agent_call(id: &str, marker: &str) -> (String, String, String) {
    (
        id.to_owned(),
        "agent".to_owned(),
        json!({ "task": format!("{marker} work") }).to_string(),
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn done(r: &Request) -> Result<Instant, String> {
    r.done
        .ok_or_else(|| "a request was never answered".to_owned())
}

/// `read_file`: the parent's answer with the call → its next request, in ms.
fn plain_call(keel: &Path) -> Result<f64, String> {
    let server = ModelServer::start(vec![
        Reply::tool_calls(vec![(
            "r1",
            "read_file",
            json!({"path": "small.txt"}).to_string(),
        )]),
        Reply::text("done"),
    ]);
    keel_run(keel, &server)?;
    let reqs = server.completions();
    let [first, second] = reqs.as_slice() else {
        return Err(format!("expected 2 requests, got {}", reqs.len()));
    };
    Ok(ms(second.at.duration_since(done(first)?)))
}

/// `agent`: (the parent's answer with the call → the child's first request, the child's
/// answer → the parent's next request), in ms.
fn child_call(keel: &Path) -> Result<(f64, f64), String> {
    let server = ModelServer::start_routed(
        vec![("[bench-child]", vec![Reply::text("child answer")])],
        vec![
            Reply::tool_calls(vec![agent_call("a1", "[bench-child]")]),
            Reply::text("done"),
        ],
    );
    keel_run(keel, &server)?;
    let parent = server.routed(None);
    let child = server.routed(Some("[bench-child]"));
    let ([p1, p2], [c1]) = (parent.as_slice(), child.as_slice()) else {
        return Err(format!(
            "expected 2 parent and 1 child requests, got {} and {}",
            parent.len(),
            child.len()
        ));
    };
    Ok((
        ms(c1.at.duration_since(done(p1)?)),
        ms(p2.at.duration_since(done(c1)?)),
    ))
}

/// Four children, in one message (parallel) or one per step (sequential): the parent's first
/// answer → its last request, in ms.
fn four_children(keel: &Path, parallel: bool) -> Result<f64, String> {
    let markers: Vec<String> = (0..CHILDREN).map(|i| format!("[kid-{i}]")).collect();
    let calls: Vec<_> = markers
        .iter()
        .enumerate()
        .map(|(i, m)| agent_call(&format!("k{i}"), m))
        .collect();
    let mut parent: Vec<Reply> = if parallel {
        vec![Reply::tool_calls(calls)]
    } else {
        calls
            .into_iter()
            .map(|c| Reply::tool_calls(vec![c]))
            .collect()
    };
    parent.push(Reply::text("done"));
    let server = ModelServer::start_routed(
        markers
            .iter()
            .map(|m| (m.as_str(), vec![Reply::text("ok").delay(CHILD_DELAY)]))
            .collect(),
        parent,
    );
    keel_run(keel, &server)?;
    let parent = server.routed(None);
    let (Some(first), Some(last)) = (parent.first(), parent.last()) else {
        return Err("no parent requests".to_owned());
    };
    if server.completions().len() != parent.len() + CHILDREN {
        return Err("not every child made its request".to_owned());
    }
    Ok(ms(last.at.duration_since(done(first)?)))
}

fn stats(samples: Vec<f64>) -> Value {
    let s = summarize(samples);
    let r = |x: f64| (x * 1000.0).round() / 1000.0;
    json!({ "median": r(s.median), "p90": r(s.p90), "min": r(s.min), "max": r(s.max), "n": s.n })
}

fn run(quick: bool) -> Result<(), String> {
    let release = release_dir()?;
    let keel = release.join("keel");
    let (runs, wall_runs) = if quick { (3, 1) } else { (15, 5) };
    // Warm-up: the page cache holds the libraries, as it does for a user.
    child_call(&keel)?;
    let (mut plain, mut start, mut back) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        plain.push(plain_call(&keel)?);
        let (s, b) = child_call(&keel)?;
        start.push(s);
        back.push(b);
    }
    let (mut par, mut seq) = (Vec::new(), Vec::new());
    for _ in 0..wall_runs {
        par.push(four_children(&keel, true)?);
        seq.push(four_children(&keel, false)?);
    }
    let (plain, start, back, par, seq) = (
        stats(plain),
        stats(start),
        stats(back),
        stats(par),
        stats(seq),
    );
    let med = |v: &Value| v["median"].as_f64().unwrap_or_default();
    let mut report = String::new();
    let _ = writeln!(report, "## Subagents\n");
    report.push_str(&keel_tests::bench::stats_table(&[
        ("`read_file` call → the parent's next request", &plain),
        ("`agent` call → the child's first request", &start),
        ("the child's answer → the parent's next request", &back),
        ("4 children in parallel (200 ms each): wall", &par),
        ("4 children one after another (200 ms each): wall", &seq),
    ]));
    let _ = writeln!(
        report,
        "\nadded by a spawned child over a plain call, to its first request: {:.2} ms; \
         parallel vs sequential wall: {:.0} ms vs {:.0} ms",
        med(&start) - med(&plain),
        med(&par),
        med(&seq)
    );
    println!("{report}");
    let json = json!({
        "machine": machine(),
        "plain_call_to_next_request_ms": plain,
        "agent_call_to_child_first_request_ms": start,
        "child_answer_to_parent_next_request_ms": back,
        "four_parallel_wall_ms": par,
        "four_sequential_wall_ms": seq,
        "child_delay_ms": CHILD_DELAY.as_millis() as u64,
    });
    keel_tests::bench::write_results(&release, "subagent", &json)?;
    Ok(())
}
