//! Helpers for the acp suites (issue 26 item 3): a test profile with the `acp` row, and the
//! editor stand-in — `tests/acp-client/client.mjs` on the official TypeScript SDK, installed
//! pinned by `cargo xtask test` into `target/acp-client` — which spawns the real `keel acp`,
//! runs a list of steps and reports what it saw as JSON lines ([`Transcript`]).

use std::io::Read as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keel_tests::Env;
use keel_tests::model_server::ModelServer;
use serde_json::{Value, json};

use crate::suite::agent_support::agent_env;

/// The test profile `t` (the agent bundle at `server`, approval `never` unless `keel acp
/// --approval ask`) with the `acp` row, plus `extra`.
pub fn acp_env(server: &ModelServer, extra: &str) -> Env {
    agent_env(
        server,
        &format!("[[insert]]\nid = \"acp\"\nplugin = \"acp\"\n\n{extra}"),
    )
}

/// Where `cargo xtask test` installed the client's packages. Missing is a failure, never a skip.
fn client_dir() -> PathBuf {
    let dir = keel_tests::target_dir().join("acp-client");
    let sdk = dir.join("node_modules/@agentclientprotocol/sdk/package.json");
    assert!(
        sdk.is_file(),
        "{} is missing: `cargo xtask test` installs the pinned ACP client SDK (npm ci of \
         tests/acp-client into target/acp-client; needs node and npm)",
        sdk.display()
    );
    dir
}

/// What the client saw.
#[derive(Debug)]
pub struct Transcript {
    /// Every line, parsed.
    pub lines: Vec<Value>,
    /// keel's stderr and the client's, together.
    pub stderr: String,
}

impl Transcript {
    /// The `session/update` payloads, in arrival order.
    pub fn updates(&self) -> Vec<&Value> {
        self.of("update").map(|l| &l["update"]).collect()
    }

    /// The updates of one kind (`agent_message_chunk`, `tool_call`, …).
    pub fn updates_of(&self, kind: &str) -> Vec<&Value> {
        self.updates()
            .into_iter()
            .filter(|u| u["sessionUpdate"] == kind)
            .collect()
    }

    /// The text of the `agent_message_chunk`s, joined in order.
    pub fn agent_text(&self) -> String {
        self.updates_of("agent_message_chunk")
            .iter()
            .filter_map(|u| u["content"]["text"].as_str())
            .collect()
    }

    /// The result line of step `n`.
    pub fn result(&self, n: usize) -> &Value {
        self.of("result")
            .find(|l| l["step"] == n)
            .unwrap_or_else(|| panic!("no result for step {n}:\n{self}"))
    }

    /// Lines of kind `ev`.
    pub fn of<'a>(&'a self, ev: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.lines.iter().filter(move |l| l["ev"] == ev)
    }

    /// Index of the first line matching `pred` (for order checks).
    pub fn position(&self, pred: impl Fn(&Value) -> bool) -> Option<usize> {
        self.lines.iter().position(pred)
    }
}

impl std::fmt::Display for Transcript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for l in &self.lines {
            writeln!(f, "{l}")?;
        }
        write!(f, "--- stderr ---\n{}", self.stderr)
    }
}

/// Runs the client against `keel acp --profile t ARGS` in `env`: `steps` as the client takes
/// them, `permissions` the option ids it answers permission requests with, in order. Fails the
/// test if the client has not finished within `limit` (a safety net, not a timing check).
pub fn run_client(
    env: &Env,
    args: &[&str],
    steps: Value,
    permissions: &[&str],
    limit: Duration,
) -> Transcript {
    run_client_with(env, args, steps, permissions, &json!({}), limit)
}

/// [`run_client`] with the editor's buffers: `files` maps absolute paths to the text
/// `fs/read_text_file` answers (a path not there is not found).
pub fn run_client_with(
    env: &Env,
    args: &[&str],
    steps: Value,
    permissions: &[&str],
    files: &Value,
    limit: Duration,
) -> Transcript {
    let dir = client_dir();
    let script = dir.join("client.mjs");
    std::fs::copy(
        keel_tests::workspace_root().join("tests/acp-client/client.mjs"),
        &script,
    )
    .expect("copy the client script next to its packages");
    let mut all = vec!["acp", "--profile", "t"];
    all.extend_from_slice(args);
    let keel = env.command(&all);
    let vars: serde_json::Map<String, Value> = keel
        .get_envs()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.map_or(Value::Null, |v| {
                    Value::String(v.to_string_lossy().into_owned())
                }),
            )
        })
        .collect();
    let spec = json!({
        "program": keel.get_program().to_string_lossy(),
        "args": keel.get_args().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>(),
        "env": vars,
        "cwd": env.work(),
        "steps": steps,
        "permissions": permissions,
        "files": files,
    });
    let mut child = Command::new("node")
        .arg(&script)
        .arg(spec.to_string())
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn node (needs node on PATH)");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let read_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let read_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    loop {
        if child.try_wait().expect("wait for node").is_some() {
            break;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let stdout = read_out.join().unwrap_or_default();
            let stderr = read_err.join().unwrap_or_default();
            panic!(
                "the ACP client did not finish within {limit:?}:\n{stdout}\n--- stderr ---\n{stderr}"
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let stdout = read_out.join().unwrap_or_default();
    let stderr = read_err.join().unwrap_or_default();
    let lines = stdout
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("client line {l:?}: {e}\n{stderr}"))
        })
        .collect();
    Transcript { lines, stderr }
}

/// `initialize` then `session/new` in the work dir: the first two steps of most scripts.
pub fn open_steps(env: &Env, fs: bool) -> Vec<Value> {
    vec![
        json!({"op": "initialize", "fs": fs}),
        json!({"op": "new", "cwd": env.work()}),
    ]
}
