//! The headless flow against an in-process fake `keel.agent` (SURF-01, SURF-02, §11 exit
//! codes and output formats). The fake records every call and feeds `session/event` notices
//! through the hub the way the session plugin's listener would; its `close` reports them
//! durable (`session/durable`), as the real close's flush does.

use std::sync::{Arc, Mutex};

use futures::FutureExt as _;
use futures::channel::{mpsc, oneshot};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::{
    AgentClient, AgentCreated, AgentProvider, AgentResumed, AgentService, CreateAgent, MessageSent,
    ResumeAgent,
};
use keel_plugin_api::services::driver::{DriverInterrupt, DriverInvocation};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;
use crate::feed::{Hub, Notice};
use crate::interrupt::Interrupts;
use crate::testing::Captured;

type Calls = Arc<Mutex<Vec<(String, Value)>>>;

/// How the fake agent behaves.
#[derive(Clone)]
struct Script {
    create: std::result::Result<Value, (String, String)>,
    report: std::result::Result<Value, (String, String)>,
    close_fails: bool,
    /// Notices fed at `create` (before the driver knows the id) and at `send`.
    at_create: Vec<Notice>,
    at_send: Vec<Notice>,
    /// `wait_idle` waits for `abort`.
    wait_for_abort: bool,
    /// `send` fires this stop request (as the kernel's `interrupt` on a signal during the turn
    /// would).
    interrupt_on_send: Option<DriverInterrupt>,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            create: Ok(json!({"session_id": "s1"})),
            report: Ok(report(json!({"kind": "completed"}), "All done.")),
            close_fails: false,
            at_create: Vec::new(),
            at_send: Vec::new(),
            wait_for_abort: false,
            interrupt_on_send: None,
        }
    }
}

fn report(reason: Value, result: &str) -> Value {
    json!({
        "session_id": "s1",
        "num_turns": 1,
        "turn_end_reason": reason,
        "result": result,
        "usage": {"input_tokens": 12, "output_tokens": 4},
        "model_requests": 2,
        "api_ms": 40,
    })
}

fn notice(session: &str, seq: u64, kind: &str) -> Notice {
    Notice {
        session_id: session.to_owned(),
        seq,
        kind: kind.to_owned(),
        record: json!({"seq": seq, "time": 0, "type": kind, "data": {}}).to_string(),
    }
}

struct Harness {
    calls: Calls,
    out: Captured,
    code: i32,
}

impl Harness {
    fn methods(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .map(|(m, _)| m.clone())
            .collect()
    }

    fn args(&self, method: &str) -> Value {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .find(|(m, _)| m == method)
            .map(|(_, a)| a.clone())
            .unwrap_or_else(|| panic!("no {method} call"))
    }
}

fn fail(e: &(String, String)) -> Error {
    Error::received(e.0.clone(), e.1.clone())
}

type Answer = futures::future::BoxFuture<'static, Result<Value>>;

/// A fake `keel.agent` answering each call from a function of `(method, request as JSON)`, so
/// the tests record and script the wire shapes; served through a real contract handle.
struct FakeAgent(Arc<dyn Fn(String, Value) -> Answer + Send + Sync>);

impl FakeAgent {
    async fn ask<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        request: impl serde::Serialize,
    ) -> Result<T> {
        let answer = (self.0)(method.to_owned(), serde_json::to_value(request)?).await?;
        Ok(serde_json::from_value(answer)?)
    }
}

impl AgentProvider for FakeAgent {
    async fn create(&self, r: CreateAgent) -> Result<AgentCreated> {
        self.ask("create", r).await
    }
    async fn resume(&self, r: ResumeAgent) -> Result<AgentResumed> {
        self.ask("resume", r).await
    }
    async fn send(&self, r: SendMessage) -> Result<MessageSent> {
        self.ask("send", r).await
    }
    async fn wait_idle(&self, r: AgentSession) -> Result<RunReport> {
        self.ask("wait_idle", r).await
    }
    async fn abort(&self, r: AgentSession) -> Result<()> {
        self.ask::<Value>("abort", r).await.map(drop)
    }
    async fn close(&self, r: AgentSession) -> Result<()> {
        self.ask::<Value>("close", r).await.map(drop)
    }
    async fn take_pending(
        &self,
        r: AgentSession,
    ) -> Result<keel_plugin_api::services::agent::PendingInputs> {
        self.ask("take_pending", r).await
    }
    async fn status(
        &self,
        r: AgentSession,
    ) -> Result<keel_plugin_api::services::agent::AgentStatus> {
        self.ask("status", r).await
    }
}

/// An agent client whose provider is `answer`.
fn agent_client<F, Fut>(answer: F) -> AgentClient
where
    F: Fn(String, Value) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Value>> + Send + 'static,
{
    let fake = FakeAgent(Arc::new(move |m, a| Box::pin(answer(m, a))));
    ContractClient::new(
        ContractHandle::serve::<AgentService, _>("fake-agent", fake),
        "headless",
    )
    .into()
}

fn fake_agent(
    script: Script,
    calls: Calls,
    hub: Arc<Hub>,
    interrupt: mpsc::UnboundedSender<DriverInterrupt>,
) -> AgentClient {
    let (abort_tx, abort_rx) = oneshot::channel::<()>();
    let abort_tx = Arc::new(Mutex::new(Some(abort_tx)));
    let abort_rx = Arc::new(Mutex::new(Some(abort_rx)));
    agent_client(move |method: String, args: Value| {
        calls.lock().unwrap().push((method.clone(), args));
        let (script, hub, interrupt) = (script.clone(), Arc::clone(&hub), interrupt.clone());
        let (abort_tx, abort_rx) = (Arc::clone(&abort_tx), Arc::clone(&abort_rx));
        async move {
            match method.as_str() {
                "create" | "resume" => {
                    for n in &script.at_create {
                        hub.notice(|| n.clone());
                    }
                    script.create.clone().map_err(|e| fail(&e))
                }
                "send" => {
                    for n in &script.at_send {
                        hub.notice(|| n.clone());
                    }
                    if let Some(stop) = script.interrupt_on_send {
                        let _ = interrupt.unbounded_send(stop);
                    }
                    Ok(json!({"id": "m1"}))
                }
                "wait_idle" => {
                    if script.wait_for_abort {
                        let rx = abort_rx.lock().unwrap().take();
                        if let Some(rx) = rx {
                            let _ = rx.await;
                        }
                    }
                    script.report.clone().map_err(|e| fail(&e))
                }
                "abort" => {
                    if let Some(tx) = abort_tx.lock().unwrap().take() {
                        let _ = tx.send(());
                    }
                    Ok(json!({}))
                }
                "close" if script.close_fails => Err(Error::coded(
                    keel_plugin_api::services::session::SessionCode::Io,
                    "disk full",
                )),
                "close" => {
                    for n in script.at_create.iter().chain(&script.at_send) {
                        hub.durable(|| n.session_id.clone(), n.seq);
                    }
                    Ok(json!({}))
                }
                other => Err(Error::coded(
                    keel_plugin_api::codes::ContractCode::UnknownMethod,
                    other.to_owned(),
                )),
            }
        }
    })
}

fn inv(command: &str, prompt: Option<&str>, options: Value) -> DriverInvocation {
    let options = serde_json::from_value(options).unwrap();
    DriverInvocation {
        command: command.to_owned(),
        session_id: (command == "resume").then(|| "s1".to_owned()),
        prompt: prompt.map(str::to_owned),
        cwd: "/work/p".to_owned(),
        profile: "default".to_owned(),
        profile_identity: None,
        profile_explicit: false,
        options,
        stderr_is_terminal: Some(false),
    }
}

fn drive_with(
    inv: &DriverInvocation,
    script: Script,
    approval: Option<&keel_plugin_api::services::approval::ApprovalClient>,
    stdin: &'static str,
) -> Harness {
    let calls = Calls::default();
    let hub = Arc::new(Hub::default());
    let (tx, interrupts) = Interrupts::channel();
    let agent = fake_agent(script, Arc::clone(&calls), Arc::clone(&hub), tx);
    let out = Captured::default();
    let env = RunEnv {
        hub,
        active: Arc::new(Active::default()),
        sink: Box::new(out.clone()),
        progress: false,
        interrupts,
        stdin: Box::new(move || Ok(stdin.to_owned())),
        lines: Box::new(move || Box::new(std::io::Cursor::new(stdin.as_bytes()))),
    };
    let services = Services {
        agent: &agent,
        approval,
        sandbox: None,
        sessions: None,
        describe: None,
    };
    let code = futures::executor::block_on(run(inv, services, env));
    Harness { calls, out, code }
}

fn drive(inv: &DriverInvocation, script: Script) -> Harness {
    drive_with(inv, script, None, "")
}

fn text() -> Value {
    json!({"output_format": "text", "ephemeral": false, "max_turns": null})
}

#[test]
fn surf01_run_creates_sends_a_followup_waits_closes_and_prints_the_text() {
    let h = drive(&inv("run", Some("fix the bug"), text()), Script::default());
    assert_eq!(h.out.stderr(), Vec::<String>::new());
    assert_eq!(h.code, 0);
    assert_eq!(h.methods(), ["create", "send", "wait_idle", "close"]);
    assert_eq!(
        h.args("create"),
        json!({"cwd": "/work/p", "ephemeral": false})
    );
    assert_eq!(
        h.args("send"),
        json!({"session_id": "s1", "content": "fix the bug", "target": "followup"})
    );
    assert_eq!(h.args("wait_idle"), json!({"session_id": "s1"}));
    assert_eq!(h.args("close"), json!({"session_id": "s1"}));
    assert_eq!(h.out.stdout(), ["All done."]);
    assert_eq!(h.out.stderr(), Vec::<String>::new());
}

// Issue 11 item 7: the running profile reaches `create`, to be recorded with the session.
#[test]
fn item7_the_running_profile_reaches_create() {
    let mut run = inv("run", Some("x"), text());
    run.profile_identity = Some(keel_plugin_api::services::driver::ProfileIdentity {
        name: "headless".into(),
        digest: "d1".into(),
        ..Default::default()
    });
    let h = drive(&run, Script::default());
    assert_eq!(
        h.args("create"),
        json!({"cwd": "/work/p", "ephemeral": false, "profile": {"name": "headless", "digest": "d1"}})
    );
}

#[test]
fn surf01_ephemeral_and_max_turns_reach_create() {
    let options = json!({"output_format": "text", "ephemeral": true, "max_turns": 3});
    let h = drive(&inv("run", Some("x"), options), Script::default());
    assert_eq!(
        h.args("create"),
        json!({"cwd": "/work/p", "ephemeral": true, "max_turns": 3})
    );
}

#[test]
fn surf01_json_prints_the_result_object_alone() {
    let h = drive(
        &inv("run", Some("x"), json!({"output_format": "json"})),
        Script::default(),
    );
    assert_eq!(h.code, 0);
    let stdout = h.out.stdout();
    assert_eq!(stdout.len(), 1);
    let mut v: Value = serde_json::from_str(&stdout[0]).unwrap();
    assert!(v["duration_ms"].is_u64());
    v["duration_ms"] = json!(0);
    assert_eq!(
        v,
        json!({
            "type": "result", "subtype": "success", "is_error": false, "session_id": "s1",
            "num_turns": 2, "keel_turns": 1, "result": "All done.", "stop_reason": "end_turn",
            "turn_end_reason": "completed",
            "usage": {"input_tokens": 12, "output_tokens": 4}, "total_cost_usd": null,
            "duration_ms": 0, "duration_api_ms": 40
        })
    );
}

#[test]
fn surf01_stream_json_is_init_then_this_sessions_events_in_seq_order_then_the_result() {
    let script = Script {
        at_create: vec![
            notice("s1", 1, "request/header"),
            notice("s1", 0, "session/x"),
        ],
        at_send: vec![
            notice("other", 0, "turn/start"),
            notice("s1", 3, "turn/end"),
            notice("s1", 2, "turn/start"),
            notice("s1", 2, "turn/start"),
        ],
        ..Script::default()
    };
    let h = drive(
        &inv("run", Some("x"), json!({"output_format": "stream-json"})),
        script,
    );
    assert_eq!(h.code, 0);
    let lines: Vec<Value> = h
        .out
        .stdout()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines[0],
        json!({"type": "system", "subtype": "init", "schema_version": 1,
               "session_id": "s1", "profile": "default", "cwd": "/work/p",
               "tools": [], "mcp_servers": [], "model": "", "permissionMode": "bypassPermissions",
               "approval": ""})
    );
    let seqs: Vec<u64> = lines[1..lines.len() - 1]
        .iter()
        .map(|l| {
            assert_eq!(l["type"], "event");
            l["event"]["seq"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(seqs, [0, 1, 2, 3]);
    let last = lines.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["subtype"].as_str()),
        (Some("result"), Some("success"))
    );
}

#[test]
fn surf01_a_turn_that_did_not_complete_exits_1_with_its_code_on_stderr() {
    let script = Script {
        report: Ok(report(
            json!({"kind": "error", "error": {"code": "RATE_LIMIT", "message": "429 after 3 tries"}}),
            "",
        )),
        ..Script::default()
    };
    let h = drive(&inv("run", Some("x"), text()), script);
    assert_eq!(h.code, 1);
    assert_eq!(h.out.stdout(), Vec::<String>::new());
    assert_eq!(
        h.out.stderr(),
        ["keel: turn ended error RATE_LIMIT: 429 after 3 tries"]
    );
    assert_eq!(h.methods().last().map(String::as_str), Some("close"));
}

#[test]
fn surf01_stream_json_error_result_is_marked() {
    let script = Script {
        report: Ok(report(json!({"kind": "max-turns"}), "partial")),
        ..Script::default()
    };
    let h = drive(
        &inv("run", Some("x"), json!({"output_format": "stream-json"})),
        script,
    );
    assert_eq!(h.code, 1);
    let last: Value = serde_json::from_str(h.out.stdout().last().unwrap()).unwrap();
    assert_eq!(last["subtype"], "error_max_turns");
    assert_eq!(last["is_error"], true);
    assert_eq!(last["turn_end_reason"], "max-turns");
    assert_eq!(
        h.out.stderr(),
        ["keel: turn ended max-turns: the turn limit was reached"]
    );
}

#[test]
fn surf01_create_failure_exits_2_before_any_model_request() {
    let script = Script {
        create: Err((
            "CREDENTIAL_MISSING".into(),
            "no credential: set `keel secrets set openai`".into(),
        )),
        ..Script::default()
    };
    let h = drive(
        &inv("run", Some("x"), json!({"output_format": "stream-json"})),
        script,
    );
    assert_eq!(h.code, 2);
    assert_eq!(h.methods(), ["create"]);
    assert_eq!(
        h.out.stdout(),
        Vec::<String>::new(),
        "not even the init line"
    );
    assert_eq!(
        h.out.stderr(),
        ["keel: error[CREDENTIAL_MISSING]: no credential: set `keel secrets set openai`"]
    );
}

#[test]
fn surf01_missing_or_blank_prompts_are_usage_errors() {
    for (prompt, stdin, needle) in [
        (None, "", "keel run needs a prompt"),
        (Some("   "), "", "the prompt is empty"),
        (Some("-"), " \n", "the prompt read from stdin is empty"),
    ] {
        let h = drive_with(&inv("run", prompt, text()), Script::default(), None, stdin);
        assert_eq!(h.code, 2, "{prompt:?}");
        assert_eq!(h.methods(), Vec::<String>::new());
        let err = h.out.stderr();
        assert_eq!(err.len(), 1);
        assert!(err[0].starts_with("keel: error[USAGE]: "), "{err:?}");
        assert!(err[0].contains(needle), "{err:?}");
    }
}

#[test]
fn surf01_dash_reads_the_prompt_from_stdin() {
    let h = drive_with(
        &inv("run", Some("-"), text()),
        Script::default(),
        None,
        "from stdin\n",
    );
    assert_eq!(h.code, 0);
    assert_eq!(h.args("send")["content"], "from stdin\n");
}

#[test]
fn surf02_resume_opens_the_given_session_and_never_invents_a_prompt() {
    let h = drive(&inv("resume", None, text()), Script::default());
    assert_eq!(h.code, 2);
    assert_eq!(h.methods(), Vec::<String>::new());
    assert!(h.out.stderr()[0].contains("keel resume needs a prompt"));

    let options = json!({"output_format": "text", "max_turns": 2});
    let h = drive(&inv("resume", Some("go on"), options), Script::default());
    assert_eq!(h.code, 0);
    assert_eq!(h.methods(), ["resume", "send", "wait_idle", "close"]);
    assert_eq!(
        h.args("resume"),
        json!({"session_id": "s1", "max_turns": 2})
    );
}

// Issue 10 item 13: a session another keel holds is a lock conflict (exit 1), not a usage
// error; the other refusals before any request stay exit 2.
#[test]
fn surf02_resume_failures_exit_2_and_a_lock_conflict_1() {
    for (code, exit) in [
        ("SESSION_NOT_FOUND", 2),
        ("SESSION_UNSUPPORTED", 2),
        ("SESSION_LOCKED", 1),
    ] {
        let script = Script {
            create: Err((code.into(), "nope".into())),
            ..Script::default()
        };
        let h = drive(&inv("resume", Some("go on"), text()), script);
        assert_eq!(h.code, exit, "{code}");
        assert_eq!(h.out.stderr(), [format!("keel: error[{code}]: nope")]);
        assert_eq!(h.methods(), ["resume"]);
    }
}

/// Approval and sandbox modes, interrupts, closes, options, concurrency.
#[path = "run_control_tests.rs"]
mod control;
