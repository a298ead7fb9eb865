//! Helpers for the agent suites: a profile that points the shipped agent bundle at the loopback
//! model server (`keel_tests::model_server`), runs of the built binary, and readers for what the
//! tests assert on: the session file on disk and the requests the server received.

use std::path::PathBuf;
use std::time::Duration;

use keel_tests::model_server::{ModelServer, Reply, check_tool_call_contract};
use keel_tests::{Env, Run};
use serde_json::Value;

use crate::suite::sessions_support::jsonl_file;

/// The environment variable the test profile's `api_key_ref` names, and its value.
pub const KEY_REF: &str = "KEEL_TEST_MODEL_KEY";
/// A recognisable key value (the canary the tests grep for).
pub const KEY_VALUE: &str = "sk-test-4c1d-canary";

/// Whether bubblewrap runs on this machine (the sandbox row's runner). Probed once.
pub fn sandbox_usable() -> bool {
    static USABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *USABLE.get_or_init(|| {
        let ok = std::process::Command::new("bwrap")
            .args([
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "true",
            ])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!(
                "note: bubblewrap is not usable here: the agent suites run without the sandbox row \
                 and the sandbox suite skips (install bubblewrap to run them confined)"
            );
        }
        ok
    })
}

/// A test profile `t`: the shipped `base` and `agent` bundles, `llm-openai` at `server`, the
/// headless driver, approval `never`, and short retry backoffs. `extra` is appended verbatim
/// (more rows, `[[replace]]`s).
pub fn agent_env(server: &ModelServer, extra: &str) -> Env {
    agent_env_at(&server.base_url(), extra)
}

/// [`agent_env`] for an arbitrary base URL.
pub fn agent_env_at(base_url: &str, extra: &str) -> Env {
    let env = Env::new().var(KEY_REF, KEY_VALUE);
    env.profile(
        "t",
        &format!(
            r#"bundles = ["base", "agent"]

[[replace]]
id = "approval"
config = {{ mode = "never" }}

[[replace]]
id = "agent-loop"
config = {{ retry = {{ initial_backoff_ms = 10, max_backoff_ms = 50 }} }}

[[insert]]
id = "llm-openai"
plugin = "llm-openai"
config = {{ base_url = "{base_url}", model = "test-model", api_key_ref = "{KEY_REF}", timeout_ms = 2000 }}

[[insert]]
id = "driver"
plugin = "headless"

{unsandboxed}
{extra}
"#,
            unsandboxed = if sandbox_usable() {
                ""
            } else {
                "[[disable]]\nid = \"sandbox\"\n"
            },
        ),
    );
    env
}

/// A server with `replies`.
pub fn server(replies: Vec<Reply>) -> ModelServer {
    ModelServer::start(replies)
}

/// `keel run --profile t --output-format json PROMPT` plus `args`; returns the run and the
/// parsed result object (`Null` when stdout is not one JSON object).
pub fn run_json(env: &Env, prompt: &str, args: &[&str]) -> (Run, Value) {
    let mut all = vec!["run", "--profile", "t", "--output-format", "json"];
    all.extend_from_slice(args);
    all.push(prompt);
    let run = env.keel(&all);
    let result = serde_json::from_str(run.stdout.trim()).unwrap_or(Value::Null);
    (run, result)
}

/// The session id of a json/stream-json result object.
pub fn session_of(result: &Value) -> String {
    result["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no session_id in {result}"))
        .to_owned()
}

/// The events of session `id` read from its JSONL file (the header line skipped).
pub fn stored_events(env: &Env, id: &str) -> Vec<Value> {
    let path = jsonl_file(env, id);
    let text = std::fs::read_to_string(&path).expect("read the session file");
    text.lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}: {l}", path.display())))
        .collect()
}

/// Event types in order.
pub fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The last `turn/end` reason.
pub fn last_reason(events: &[Value]) -> Value {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == "turn/end")
        .map(|e| e["data"]["reason"].clone())
        .unwrap_or(Value::Null)
}

/// TOOL-06 on every chat-completions request the server received; returns them.
pub fn contract_holds(server: &ModelServer) -> Vec<keel_tests::model_server::Request> {
    let reqs = server.completions();
    for (i, r) in reqs.iter().enumerate() {
        if let Err(e) = check_tool_call_contract(r.messages()) {
            panic!(
                "request {i} breaks the tool-call contract: {e}\n{}",
                r.messages()
            );
        }
    }
    reqs
}

/// The `role:"tool"` message answering `call_id` in `messages`.
pub fn tool_message(messages: &Value, call_id: &str) -> Value {
    messages
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .cloned()
        .unwrap_or_else(|| panic!("no tool message for {call_id} in {messages}"))
}

/// Waits for `path` to exist (a tool's side effect), up to `limit`.
pub fn wait_for_file(path: &std::path::Path, limit: Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// `work/<rel>`.
pub fn work_file(env: &Env, rel: &str) -> PathBuf {
    env.work().join(rel)
}

/// JSON arguments as the model would send them.
pub fn args(v: Value) -> String {
    v.to_string()
}

/// Whether `pid` is still a live process (absent or a zombie counts as gone).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(|s| s != "Z"))
        })
        .unwrap_or(false)
}

/// A path outside the workspace and outside every writable root (`/tmp` is one): under `$HOME`,
/// unique to this test process and `tag`.
pub fn outside_workspace(tag: &str, name: &str) -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| "/root".into(), PathBuf::from);
    home.join(format!("keel-{tag}-{}-{name}", std::process::id()))
}

/// Starts `keel ARGV` in `env`, waits for the tool to write `pid_files` (workspace-relative,
/// the last one written last), SIGKILLs keel and returns the pids still alive after up to 5 s —
/// killed and reaped here, so a failing test leaves nothing behind. Makes this test process
/// the subreaper, so orphans are never PID 1's.
pub fn survivors_of_a_sigkilled_keel(env: &Env, argv: &[&str], pid_files: &[&str]) -> Vec<i32> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).unwrap();
    let mut child = env
        .command(argv)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let last = pid_files.last().expect("at least one pid file");
    assert!(
        wait_for_file(&work_file(env, last), Duration::from_secs(30)),
        "the tool never started"
    );
    std::thread::sleep(Duration::from_millis(50));
    let pids: Vec<i32> = pid_files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(work_file(env, f)).unwrap();
            text.trim().parse().unwrap()
        })
        .collect();
    assert!(pids.iter().all(|p| alive(*p)), "the command is not running");
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|p| alive(*p)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survivors: Vec<i32> = pids.into_iter().filter(|p| alive(*p)).collect();
    for p in survivors
        .iter()
        .filter_map(|p| rustix::process::Pid::from_raw(*p))
    {
        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
    }
    while rustix::process::waitpid(None, rustix::process::WaitOptions::NOHANG)
        .is_ok_and(|r| r.is_some())
    {}
    survivors
}

/// Pids of live processes whose command line has `token` as an argument. Pid namespaces
/// (bwrap) rename pids but not command lines, so this finds a sandboxed process too.
pub fn processes_with_arg(token: &str) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| c.split(|&b| b == 0).any(|arg| arg == token.as_bytes()))
                .unwrap_or(false)
                && alive(*pid)
        })
        .collect()
}

/// `keel secrets set NAME` with `value` on stdin (profile `t`); asserts it succeeded.
pub fn set_secret(env: &Env, name: &str, value: &str) {
    let out = secrets_set(env, name, value);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `keel secrets set NAME` with `value` on stdin (profile `t`), whatever it answers.
pub fn secrets_set(env: &Env, name: &str, value: &str) -> std::process::Output {
    use std::io::Write as _;
    let mut set = env
        .command(&["secrets", "set", name, "--profile", "t"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    set.stdin
        .take()
        .unwrap()
        .write_all(format!("{value}\n").as_bytes())
        .unwrap();
    set.wait_with_output().unwrap()
}

/// Starts `keel run --profile t --output-format stream-json ARGS…` in `env` (the last argument
/// the prompt) with stdout and stderr piped, for a test that signals or kills it.
pub fn spawn_stream_json(env: &Env, args: &[&str]) -> std::process::Child {
    let mut all = vec!["run", "--profile", "t", "--output-format", "stream-json"];
    all.extend_from_slice(args);
    env.command(&all)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn keel")
}

/// Starts `keel run --output-format stream-json` in `env`, waits until the tool wrote
/// `started.pid` (workspace-relative), SIGKILLs keel and returns the session id from the init
/// line. This test process becomes the subreaper, so orphans are never PID 1's; unconfined,
/// the tool's process group outlives keel and is killed here (under bubblewrap
/// `--die-with-parent` takes it down, and `$$` is a pid of the sandbox's own namespace, which
/// must never be signalled from here).
pub fn sigkill_while_the_tool_runs(env: &Env) -> String {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).unwrap();
    let mut child = env
        .command(&[
            "run",
            "--profile",
            "t",
            "--output-format",
            "stream-json",
            "run it",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid_file = work_file(env, "started.pid");
    assert!(
        wait_for_file(&pid_file, Duration::from_secs(30)),
        "the tool never started"
    );
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    if !sandbox_usable()
        && let Ok(pid) = std::fs::read_to_string(&pid_file)
        && let Ok(pid) = pid.trim().parse::<i32>()
        // Not `kill -9 -PID`: procps-ng 4.0.2's kill reads that as `kill -9 -1` (everything).
        && let Some(pgid) = rustix::process::Pid::from_raw(pid)
    {
        let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
    }
    let init: Value = serde_json::from_str(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .expect("the init line"),
    )
    .unwrap();
    init["session_id"].as_str().unwrap().to_owned()
}
