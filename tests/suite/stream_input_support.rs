//! A `keel run --input-format stream-json` session driven line by line (issue 16 item 4): the
//! binary with piped stdin and stdout, stdout read on a thread so a test can wait for a line
//! (a result object, a control response) before it writes the next message.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use keel_tests::Env;
use serde_json::{Value, json};

/// A running conversation.
pub struct Conversation {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    /// Every stdout line read so far.
    pub seen: Vec<Value>,
}

/// How a conversation ended.
pub struct Ended {
    /// The exit code.
    pub code: i32,
    /// Every stdout line, parsed.
    pub stdout: Vec<Value>,
    /// stderr.
    pub stderr: String,
}

impl Conversation {
    /// Starts `keel run --profile t --input-format stream-json --output-format stream-json`
    /// plus `args` (a prompt among them, or none).
    pub fn start(env: &Env, args: &[&str]) -> Conversation {
        let mut all = vec![
            "run",
            "--profile",
            "t",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
        ];
        all.extend_from_slice(args);
        let mut child = env
            .command(&all)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn keel");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        Conversation {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        }
    }

    /// Writes one line (a JSON value) on keel's stdin.
    pub fn write(&mut self, line: &Value) {
        self.write_raw(&line.to_string());
    }

    /// Writes one raw line on keel's stdin.
    pub fn write_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{line}").expect("write to keel's stdin");
        stdin.flush().expect("flush keel's stdin");
    }

    /// Writes raw bytes on keel's stdin (not necessarily UTF-8).
    pub fn write_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).expect("write to keel's stdin");
        stdin.flush().expect("flush keel's stdin");
    }

    /// A user message in Claude Code's shape.
    pub fn user(&mut self, text: &str) {
        self.write(&user_line(text));
    }

    /// Waits for a stdout line matching `pred` (lines before it are kept in `seen`).
    pub fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        if let Some(v) = self.seen.iter().find(|v| pred(v)) {
            return v.clone();
        }
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let v: Value = serde_json::from_str(&line)
                        .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
                    self.seen.push(v.clone());
                    if pred(&v) {
                        return v;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = self.child.kill();
        panic!("no stdout line for {what}; seen: {:#?}", self.seen);
    }

    /// Waits for the `n`th result object (from 1).
    pub fn wait_results(&mut self, n: usize) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let results: Vec<&Value> = self.seen.iter().filter(|v| v["type"] == "result").collect();
            if results.len() >= n {
                return results[n - 1].clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = self.lines.recv_timeout(left) else {
                let _ = self.child.kill();
                let mut stderr = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
                }
                panic!("fewer than {n} results: {:#?}\nstderr: {stderr}", self.seen);
            };
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
            self.seen.push(v);
        }
    }

    /// Closes stdin and waits for keel to exit.
    pub fn finish(mut self) -> Ended {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "keel did not exit after stdin closed; seen: {:#?}",
                    self.seen
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stdout = std::mem::take(&mut self.seen);
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            stdout.push(serde_json::from_str(&line).unwrap_or(Value::String(line)));
        }
        let mut stderr = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
        }
        Ended {
            code: status.code().unwrap_or(-1),
            stdout,
            stderr,
        }
    }
}

/// `{"type":"user","message":{"role":"user","content":TEXT}}`.
pub fn user_line(text: &str) -> Value {
    json!({"type": "user", "message": {"role": "user", "content": text}})
}

/// The user-message texts of a chat-completions request body.
pub fn user_texts(messages: &Value) -> Vec<String> {
    messages
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect()
}
