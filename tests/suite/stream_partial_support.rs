//! Helpers for the streaming suites (issue 26 item 1): a `keel run --output-format stream-json
//! --include-partial-messages` whose stdout is read line by line while it runs, so a test can
//! see a piece of the model's answer on stdout while the model server still holds the rest of
//! the stream ([`Reply::held`](keel_tests::model_server::Reply::held)).

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use keel_tests::Env;
use serde_json::Value;

/// How long a test waits for a line before it fails.
pub const WAIT: Duration = Duration::from_secs(60);

/// A running `keel` whose stdout lines arrive as they are printed.
pub struct Live {
    child: Child,
    lines: mpsc::Receiver<(Instant, String)>,
    /// Every stdout line read so far, parsed, with when it was read.
    pub seen: Vec<(Instant, Value)>,
}

/// How the run ended.
pub struct Ended {
    /// The exit code (-1: killed by a signal).
    pub code: i32,
    /// Every stdout line, parsed.
    pub lines: Vec<Value>,
    /// stderr.
    pub stderr: String,
}

impl Live {
    /// Starts `keel` with `args`, stdout piped and read on a thread.
    pub fn start(env: &Env, args: &[&str]) -> Live {
        let mut child = env
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn keel");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send((Instant::now(), line)).is_err() {
                    return;
                }
            }
        });
        Live {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a stdout line matching `pred`; returns it and when it was read. Panics (and
    /// kills keel) after [`WAIT`].
    pub fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> (Instant, Value) {
        if let Some(found) = self.seen.iter().find(|(_, v)| pred(v)) {
            return found.clone();
        }
        let deadline = Instant::now() + WAIT;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let Ok((at, line)) = self.lines.recv_timeout(left) else {
                break;
            };
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
            self.seen.push((at, v.clone()));
            if pred(&v) {
                return (at, v);
            }
        }
        let _ = self.child.kill();
        panic!("no stdout line for {what}; seen: {:#?}", self.values());
    }

    /// The lines read so far.
    pub fn values(&self) -> Vec<Value> {
        self.seen.iter().map(|(_, v)| v.clone()).collect()
    }

    /// Kills keel outright (SIGKILL) and reaps it.
    pub fn kill(mut self) -> Ended {
        let _ = self.child.kill();
        self.end()
    }

    /// Waits for keel to exit; every line it printed.
    pub fn end(mut self) -> Ended {
        let stderr = self.child.stderr.take();
        let status = self.child.wait().expect("wait for keel");
        while let Ok((at, line)) = self.lines.recv_timeout(Duration::from_secs(5)) {
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
            self.seen.push((at, v));
        }
        let mut text = String::new();
        if let Some(mut e) = stderr {
            let _ = std::io::Read::read_to_string(&mut e, &mut text);
        }
        Ended {
            code: status.code().unwrap_or(-1),
            lines: self.values(),
            stderr: text,
        }
    }
}

/// Whether `v` is a `stream_event` line whose event is a `content_block_delta` of `kind`
/// (`text_delta`, `thinking_delta`).
pub fn is_delta(v: &Value, kind: &str) -> bool {
    v["type"] == "stream_event"
        && v["event"]["type"] == "content_block_delta"
        && v["event"]["delta"]["type"] == kind
}

/// The `event.type`s of the `stream_event` lines, in order.
pub fn stream_kinds(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|v| v["type"] == "stream_event")
        .map(|v| v["event"]["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The text of the `text_delta`s, joined.
pub fn streamed_text(lines: &[Value]) -> String {
    lines
        .iter()
        .filter(|v| is_delta(v, "text_delta"))
        .filter_map(|v| v["event"]["delta"]["text"].as_str())
        .collect()
}
