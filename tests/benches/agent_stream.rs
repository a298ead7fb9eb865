//! Model's first text piece → its `stream_event` line on keel's stdout (issue 26 item 1,
//! target p50 ≤ 2 ms): a `keel run --output-format stream-json --include-partial-messages`
//! session of [`STEPS`] steps, each answer held by the model server after its first text piece
//! ([`Reply::held`]). Per step, the sample is from the moment the server began writing that
//! piece ([`Hold::reached`]) to the moment this process read the piece's `content_block_delta`
//! line from keel's stdout pipe; then the step's hold is released and the rest of its message
//! read. What it covers: the socket,
//! SSE parsing, `llm/delta` from the adapter, the loop's forward as `agent/delta`, the headless
//! listener, its output thread and the pipe.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use keel_tests::bench::{Summary, summarize};
use keel_tests::model_server::{Hold, ModelServer, Reply};
use serde_json::Value;

/// Steps per session (each a sample).
pub const STEPS: usize = 10;

const WAIT: Duration = Duration::from_secs(30);

/// One session's samples, in ms.
fn session(keel: &Path, toml: impl Fn(&str) -> String) -> Result<Vec<f64>, String> {
    let dir = tempfile::Builder::new()
        .prefix("keel-stream-bench-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?;
    for sub in ["home", "config/profiles", "work"] {
        std::fs::create_dir_all(dir.path().join(sub)).map_err(|e| format!("{sub}: {e}"))?;
    }
    let holds: Vec<Hold> = (0..STEPS).map(|_| Hold::new()).collect();
    let mut replies: Vec<Reply> = holds[..STEPS - 1]
        .iter()
        .enumerate()
        .map(|(i, hold)| {
            Reply::text_and_calls(
                "Looking at the directory first.",
                vec![(format!("c{i}"), "list_dir", r#"{"path":"."}"#)],
            )
            .held(hold, 1)
        })
        .collect();
    replies.push(Reply::text("All done, nothing else to do.").held(&holds[STEPS - 1], 1));
    let server = ModelServer::start(replies);
    let profile = dir.path().join("config/profiles/s.toml");
    std::fs::write(&profile, toml(&server.base_url())).map_err(|e| e.to_string())?;
    let mut child = Command::new(keel)
        .args(["run", "--profile", "s", "--output-format", "stream-json"])
        .args(["--include-partial-messages", "benchmark"])
        .current_dir(dir.path().join("work"))
        .env_remove("KEEL_PLUGIN_PATH")
        .env_remove("KEEL_LOG")
        .env("KEEL_HOME", dir.path().join("home"))
        .env("KEEL_CONFIG_PATH", dir.path().join("config"))
        .env("KEEL_BENCH_KEY", "bench-key")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", keel.display()))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (tx, lines) = mpsc::channel::<(Instant, String)>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send((Instant::now(), line)).is_err() {
                return;
            }
        }
    });
    let mut samples = Vec::new();
    for hold in &holds {
        let sent = wait_reached(hold)?;
        let read = loop {
            let (at, line) = lines
                .recv_timeout(WAIT)
                .map_err(|_| "no text piece on keel's stdout".to_owned())?;
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if v["type"] == "stream_event" && v["event"]["delta"]["type"] == "text_delta" {
                break at;
            }
        };
        samples.push(read.saturating_duration_since(sent).as_secs_f64() * 1e3);
        hold.release();
        // The rest of this step's message, so the next sample starts from the next step's.
        loop {
            let (_, line) = lines
                .recv_timeout(WAIT)
                .map_err(|_| "the streamed message never ended".to_owned())?;
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if v["type"] == "stream_event" && v["event"]["type"] == "message_stop" {
                break;
            }
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("keel exited {:?}", status.code()));
    }
    Ok(samples)
}

/// [`Hold::wait_reached`] as an error, not a panic, after [`WAIT`].
fn wait_reached(hold: &Hold) -> Result<Instant, String> {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if let Some(at) = hold.reached() {
            return Ok(at);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Err("the model server's stream was never reached".to_owned())
}

/// `runs` sessions of [`STEPS`] samples each, under the profile `toml(base_url)` writes.
///
/// # Errors
/// A session that failed.
pub fn measure(keel: &Path, runs: usize, toml: impl Fn(&str) -> String) -> Result<Summary, String> {
    let mut all = Vec::new();
    for _ in 0..runs {
        all.extend(session(keel, &toml)?);
    }
    Ok(summarize(all))
}
