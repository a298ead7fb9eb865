//! MCP benchmarks (issue 15, "Benchmarks"), against the loopback model server and the release
//! build, with the real `@modelcontextprotocol/server-everything` (installed by `cargo xtask
//! bench` into `target/mcp-servers`):
//!
//! 1. **Start → first model request** with no MCP server and with one stdio server (confined
//!    by the sandbox row, the default). The `mcp` row waits for the server's tool list before
//!    the first request (docs/mcp.md), so the difference is what a user waits for it: node's
//!    start, bubblewrap, the handshake and `tools/list`, minus what overlaps with the other
//!    rows' activation.
//! 2. **Added cost per MCP call**: a 30-step session whose steps each call one tool, once with
//!    `mcp__everything__echo` and once with the built-in `read_file` on a small file; the
//!    difference of the per-step times is what one MCP call costs over an in-process tool
//!    (JSON-RPC over the child's pipes, the server's own work, the result mapping).
//!
//! Prints a table and writes `target/bench/mcp.json`. `--quick` runs fewer repetitions.
//! Under `cargo test --benches` (no `--bench` flag) it does nothing.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use keel_tests::bench::{machine, release_dir, summarize};
use keel_tests::model_server::{ModelServer, Reply};
use serde_json::{Value, json};

const STEPS: usize = 30;

fn main() -> ExitCode {
    keel_tests::bench::harness_main("mcp benchmarks", run)
}

fn everything_js() -> Result<PathBuf, String> {
    let p = keel_tests::target_dir()
        .join("mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!(
            "{} is missing: run `cargo xtask bench`",
            p.display()
        ))
    }
}

/// One run's scratch directory and profile.
struct Scratch {
    dir: tempfile::TempDir,
    keel: PathBuf,
}

impl Scratch {
    fn new(keel: &Path, server: &ModelServer, mcp: Option<&Path>) -> Result<Scratch, String> {
        let dir = tempfile::Builder::new()
            .prefix("keel-mcp-bench-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        for sub in ["home", "config/profiles", "work"] {
            std::fs::create_dir_all(dir.path().join(sub)).map_err(|e| format!("{sub}: {e}"))?;
        }
        std::fs::write(dir.path().join("work/small.txt"), "hello\n").map_err(|e| e.to_string())?;
        let servers = match mcp {
            Some(js) => format!(
                "[[replace]]\nid = \"mcp\"\n[replace.config.servers.everything]\ncommand = \"node\"\nargs = [{}, \"stdio\"]\n",
                Value::String(js.display().to_string())
            ),
            None => String::new(),
        };
        let toml = format!(
            "bundles = [\"base\", \"agent\"]\n\n[[replace]]\nid = \"approval\"\nconfig = {{ mode = \"never\" }}\n\n\
             [[insert]]\nid = \"llm-openai\"\nplugin = \"llm-openai\"\n\
             config = {{ base_url = \"{}\", model = \"bench\", api_key_ref = \"KEEL_BENCH_KEY\" }}\n\n\
             [[insert]]\nid = \"driver\"\nplugin = \"headless\"\n\n{servers}",
            server.base_url()
        );
        let path = dir.path().join("config/profiles/b.toml");
        std::fs::write(&path, toml).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Scratch {
            dir,
            keel: keel.to_path_buf(),
        })
    }

    fn run(&self) -> Result<(), String> {
        let out = Command::new(&self.keel)
            .args(["run", "--profile", "b", "benchmark"])
            .current_dir(self.dir.path().join("work"))
            .env_remove("KEEL_PLUGIN_PATH")
            .env_remove("KEEL_LOG")
            .env("KEEL_HOME", self.dir.path().join("home"))
            .env("KEEL_CONFIG_PATH", self.dir.path().join("config"))
            .env("KEEL_BENCH_KEY", "bench-key")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("spawn {}: {e}", self.keel.display()))?;
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
}

/// Start → first request, in ms.
fn first_request(keel: &Path, mcp: Option<&Path>) -> Result<f64, String> {
    let server = ModelServer::start(vec![Reply::text("ok")]);
    let scratch = Scratch::new(keel, &server, mcp)?;
    let started = Instant::now();
    scratch.run()?;
    let first = server
        .completions()
        .first()
        .map(|r| r.at)
        .ok_or("the server received no request")?;
    Ok(first.duration_since(started).as_secs_f64() * 1e3)
}

/// Per-step time of a session whose steps each call `tool` with `args`, in ms.
fn per_step(keel: &Path, js: &Path, tool: &str, args: &str) -> Result<f64, String> {
    let mut replies: Vec<Reply> = (0..STEPS - 1)
        .map(|i| Reply::tool_calls(vec![(format!("c{i}"), tool.to_owned(), args.to_owned())]))
        .collect();
    replies.push(Reply::text("done"));
    let server = ModelServer::start(replies);
    // The server is configured in both runs, so only the call differs.
    let scratch = Scratch::new(keel, &server, Some(js))?;
    scratch.run()?;
    let stamps: Vec<Instant> = server.completions().iter().map(|r| r.at).collect();
    if stamps.len() != STEPS {
        return Err(format!("expected {STEPS} requests, got {}", stamps.len()));
    }
    let (Some(first), Some(last)) = (stamps.first(), stamps.last()) else {
        return Err("no requests".to_owned());
    };
    Ok(last.duration_since(*first).as_secs_f64() * 1e3 / (STEPS - 1) as f64)
}

fn stats(samples: Vec<f64>) -> Value {
    let s = summarize(samples);
    let r = |x: f64| (x * 1000.0).round() / 1000.0;
    json!({ "median": r(s.median), "p90": r(s.p90), "min": r(s.min), "max": r(s.max), "n": s.n })
}

fn run(quick: bool) -> Result<(), String> {
    let release = release_dir()?;
    let keel = release.join("keel");
    let js = everything_js()?;
    let (first_runs, step_runs) = if quick { (3, 1) } else { (15, 5) };
    // Warm-up: the page cache holds the libraries and node's modules, as it does for a user.
    first_request(&keel, Some(&js))?;
    let (mut none, mut one) = (Vec::new(), Vec::new());
    for _ in 0..first_runs {
        none.push(first_request(&keel, None)?);
        one.push(first_request(&keel, Some(&js))?);
    }
    let (mut mcp, mut builtin) = (Vec::new(), Vec::new());
    for _ in 0..step_runs {
        mcp.push(per_step(
            &keel,
            &js,
            "mcp__everything__echo",
            r#"{"message":"x"}"#,
        )?);
        builtin.push(per_step(
            &keel,
            &js,
            "read_file",
            r#"{"path":"small.txt"}"#,
        )?);
    }
    let (none, one, mcp, builtin) = (stats(none), stats(one), stats(mcp), stats(builtin));
    let med = |v: &Value| v["median"].as_f64().unwrap_or_default();
    let mut report = String::new();
    let _ = writeln!(report, "## MCP\n");
    report.push_str(&keel_tests::bench::stats_table(&[
        ("start → first request, no MCP server", &none),
        ("start → first request, one stdio server (sandboxed)", &one),
        ("per step, one `read_file` call", &builtin),
        ("per step, one `mcp__everything__echo` call", &mcp),
    ]));
    let _ = writeln!(
        report,
        "\nadded by the server at start: {:.1} ms; added per MCP call over read_file: {:.2} ms",
        med(&one) - med(&none),
        med(&mcp) - med(&builtin)
    );
    println!("{report}");
    let json = json!({
        "machine": machine(),
        "first_request_no_mcp_ms": none,
        "first_request_one_stdio_ms": one,
        "per_step_read_file_ms": builtin,
        "per_step_mcp_echo_ms": mcp,
        "steps": STEPS,
    });
    keel_tests::bench::write_results(&release, "mcp", &json)?;
    Ok(())
}
