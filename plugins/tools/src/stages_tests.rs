//! Stage tests (TOOL-01…04, TOOL-08, B9) over a scripted host, driven by the real scheduler.

use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use futures::executor::block_on;
use keel_plugin_api::services::tools::ToolDefinition;
use pretty_assertions::assert_eq;

use super::*;
use crate::schedule::{BatchOutcome, run_batch};

type Script<T> = Box<dyn Fn(&ToolExecution) -> Result<T> + Send + Sync>;

struct FakeHost {
    events: Mutex<Vec<Value>>,
    stages: Mutex<Vec<String>>,
    notified: Mutex<Vec<ToolOutcome>>,
    rewrite: Script<Json>,
    pre: Script<Json>,
    ask: AskAnswer,
    asked: Mutex<Vec<ApprovalRequest>>,
    guard: Script<Option<Json>>,
    exec: Script<Json>,
    post: Script<Json>,
    refuse_append: Option<&'static str>,
    /// The body's snapshot, handed back beside its document (as the kernel host does).
    body_snapshot: Mutex<Option<Snapshot>>,
}

fn j(v: Value) -> Json {
    Json {
        text: v.to_string().into(),
    }
}

/// A scripted document as a listener's typed output: the wire text as it is, so a script can
/// leave a document outside the vocabulary, as a foreign listener could.
fn typed<T>(json: Json) -> Typed<T> {
    Typed::from_payload(Payload {
        text: json.text,
        frozen: Default::default(),
    })
}

impl FakeHost {
    fn new() -> Self {
        FakeHost {
            events: Mutex::new(Vec::new()),
            stages: Mutex::new(Vec::new()),
            notified: Mutex::new(Vec::new()),
            rewrite: Box::new(|_| Ok(j(json!({})))),
            pre: Box::new(|_| Ok(j(json!({"kind": "allow"})))),
            ask: AskAnswer::NoService,
            asked: Mutex::new(Vec::new()),
            guard: Box::new(|_| Ok(None)),
            exec: Box::new(|e| {
                Ok(j(
                    json!({"content": format!("ran {} with {}", e.name, e.args.text)}),
                ))
            }),
            post: Box::new(|_| Ok(j(json!({"kind": "accept"})))),
            refuse_append: None,
            body_snapshot: Mutex::new(None),
        }
    }

    fn stage(&self, s: &str, e: &ToolExecution) {
        self.stages
            .lock()
            .unwrap()
            .push(format!("{s} {}", e.call_id));
    }

    fn stages(&self) -> Vec<String> {
        self.stages.lock().unwrap().clone()
    }

    fn events(&self) -> Vec<Value> {
        self.events.lock().unwrap().clone()
    }
}

impl Host for FakeHost {
    async fn append(&self, event: Value) -> Result<()> {
        if self.refuse_append == event["type"].as_str() {
            return Err(Error::coded(
                keel_plugin_api::services::session::SessionCode::Invalid,
                "refused",
            ));
        }
        self.events.lock().unwrap().push(event);
        Ok(())
    }
    async fn rewrite(&self, exec: ToolExecution) -> Result<Typed<RewriteDecision>> {
        (self.rewrite)(&exec).map(typed)
    }
    async fn pre_execute(&self, exec: ToolExecution) -> Result<Typed<PreDecision>> {
        self.stage("pre", &exec);
        (self.pre)(&exec).map(typed)
    }
    async fn ask(&self, request: ApprovalRequest) -> AskAnswer {
        self.asked.lock().unwrap().push(request);
        self.ask.clone()
    }
    async fn guard(&self, exec: ToolExecution) -> Result<Option<Typed<GuardDecision>>> {
        self.stage("guard", &exec);
        (self.guard)(&exec).map(|g| g.map(typed))
    }
    async fn execute(&self, exec: ToolExecution, _args: Value) -> Result<Executed> {
        self.stage("execute", &exec);
        let snapshot = self.body_snapshot.lock().unwrap().clone();
        match snapshot {
            Some(snapshot) => Ok(Executed {
                json: snapshot.typed(),
                snapshot: Some(snapshot),
            }),
            None => (self.exec)(&exec).map(|j| Executed::from(typed(j))),
        }
    }
    async fn post_execute(&self, outcome: ToolOutcome) -> Result<Typed<PostDecision>> {
        self.stage("post", &outcome.exec);
        (self.post)(&outcome.exec).map(typed)
    }
    fn notify(&self, outcome: &ToolOutcome) {
        self.notified.lock().unwrap().push(outcome.clone());
    }
}

fn def(name: &str, parallel_safe: bool, mutating: bool) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: String::new(),
        parameters: json!({"type": "object"}),
        parallel_safe,
        mutating,
        child_only: false,
    }
}

fn registry() -> Registry {
    let r = Registry::new();
    r.register(
        "keel.tool.fs",
        vec![
            def("read_file", true, false),
            def("write_file", false, true),
            ToolDefinition {
                child_only: true,
                ..def("memory_write", false, false)
            },
        ],
    )
    .unwrap();
    r
}

fn request(calls: &[(&str, &str)]) -> BatchRequest {
    BatchRequest {
        session_id: "s1".into(),
        turn: 2,
        step: 1,
        cwd: "/w".into(),
        calls: calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| ModelCall {
                id: format!("c{i}"),
                name: (*name).into(),
                arguments: (*args).into(),
            })
            .collect(),
        allowed_tools: None,
        child: false,
    }
}

/// Runs the batch; the frozen results are parsed back (each is the one snapshot of its call).
fn run(host: &FakeHost, calls: &[(&str, &str)]) -> Result<BatchOutcome<ToolResult>> {
    run_allowed(host, calls, None)
}

fn run_allowed(
    host: &FakeHost,
    calls: &[(&str, &str)],
    allowed: Option<&[&str]>,
) -> Result<BatchOutcome<ToolResult>> {
    run_as(host, calls, allowed, false)
}

fn run_as(
    host: &FakeHost,
    calls: &[(&str, &str)],
    allowed: Option<&[&str]>,
    child: bool,
) -> Result<BatchOutcome<ToolResult>> {
    let registry = registry();
    let mut request = request(calls);
    request.child = child;
    request.allowed_tools = allowed.map(|a| a.iter().map(|t| (*t).to_owned()).collect());
    let pipeline = CallPipeline {
        host,
        registry: &registry,
        request: &request,
        timeout_ms: 600_000,
        parsed: Default::default(),
    };
    let out = block_on(run_batch(
        &pipeline,
        calls.len(),
        10,
        &AtomicBool::new(false),
    ))?;
    Ok(BatchOutcome {
        results: out.results.iter().map(|f| f.parse().unwrap()).collect(),
        failure: out.failure,
    })
}

fn code(r: &ToolResult) -> Option<&str> {
    r.error.as_ref().map(|e| e.code.as_str())
}

#[test]
fn tool01_call_is_logged_raw_then_result_appended_with_surface_op() {
    let host = FakeHost::new();
    let out = run(&host, &[("read_file", r#"{ "path":"a" }"#)]).unwrap();
    assert_eq!(
        out.results,
        [ToolResult::ok(r#"ran read_file with {"path":"a"}"#)]
    );
    assert_eq!(
        host.events(),
        [
            json!({"type": "tool/call", "data": {"turn": 2, "step": 1, "call_id": "c0",
                "name": "read_file", "arguments": r#"{ "path":"a" }"#}}),
            json!({"type": "tool/result", "surface_op": "append", "data": {"turn": 2,
                "step": 1, "call_id": "c0", "content": r#"ran read_file with {"path":"a"}"#}}),
        ]
    );
    assert_eq!(
        host.stages(),
        ["pre c0", "guard c0", "execute c0", "post c0"]
    );
}

#[test]
fn tool04_observers_see_the_logged_snapshot() {
    let mut host = FakeHost::new();
    host.exec = Box::new(|_| {
        Ok(j(
            json!({"content": "x", "meta": {"version": 3}, "concludes_turn": true}),
        ))
    });
    let out = run(&host, &[("write_file", "{}")]).unwrap();
    assert!(out.results[0].concludes_turn);
    let notified = host.notified.lock().unwrap().clone();
    let seen: Value = serde_json::from_str(notified[0].result.text()).unwrap();
    assert_eq!(seen["meta"], json!({"version": 3}));
    let logged = &host.events()[1]["data"];
    for key in ["content", "meta"] {
        assert_eq!(seen[key], logged[key]);
    }
    // The execution the observers see is the one that ran.
    assert_eq!(notified[0].exec.call_id.as_str(), "c0");
    assert!(notified[0].exec.mutating);
    assert_eq!(notified[0].exec.timeout_ms, 600_000);
}

#[test]
fn concludes_turn_only_survives_on_success() {
    let mut host = FakeHost::new();
    host.exec = Box::new(|_| {
        Ok(j(
            json!({"content": "bad", "is_error": true, "concludes_turn": true}),
        ))
    });
    let out = run(&host, &[("read_file", "{}")]).unwrap();
    assert!(!out.results[0].concludes_turn);
}

// Issue 16: a child's tool set refuses a registered tool outside it, before any policy, and
// names what the child may call; the calls inside it run as usual.
#[test]
fn a_tool_outside_the_agents_tool_set_is_unknown_to_it() {
    let host = FakeHost::new();
    let calls = [("write_file", "{}"), ("read_file", "{}")];
    let out = run_allowed(&host, &calls, Some(&["read_file"])).unwrap();
    assert_eq!(code(&out.results[0]), Some(ToolCode::UnknownTool.code()));
    assert!(
        out.results[0].content.contains("(available: read_file)"),
        "{}",
        out.results[0].content
    );
    assert_ne!(code(&out.results[1]), Some(ToolCode::UnknownTool.code()));
    let everything = run_allowed(&FakeHost::new(), &calls, None).unwrap();
    assert_ne!(
        code(&everything.results[0]),
        Some(ToolCode::UnknownTool.code())
    );
}

// Issue 16: a child-only tool (a resident child's memory) is refused to a root agent's batch
// before any policy, and runs for a child's.
#[test]
fn a_child_only_tool_is_unknown_to_a_root_agent() {
    let host = FakeHost::new();
    let out = run_as(&host, &[("memory_write", "{}")], None, false).unwrap();
    assert_eq!(code(&out.results[0]), Some(ToolCode::UnknownTool.code()));
    assert!(
        out.results[0]
            .content
            .contains("offered only to child agents"),
        "{}",
        out.results[0].content
    );
    assert!(host.stages().is_empty());
    let child = run_as(&FakeHost::new(), &[("memory_write", "{}")], None, true).unwrap();
    assert_ne!(code(&child.results[0]), Some(ToolCode::UnknownTool.code()));
}

#[test]
fn unknown_tool_gets_a_readable_error_and_no_policy_runs() {
    let host = FakeHost::new();
    let out = run(&host, &[("rm_rf", "{}")]).unwrap();
    assert_eq!(code(&out.results[0]), Some(ToolCode::UnknownTool.code()));
    assert!(out.results[0].content.contains("read_file, write_file"));
    assert!(host.stages().is_empty());
    assert_eq!(host.events().len(), 2);
}

#[test]
fn invalid_arguments_get_the_parse_error_and_no_body() {
    let host = FakeHost::new();
    let out = run(&host, &[("read_file", "{nope"), ("read_file", "[1]")]).unwrap();
    assert_eq!(code(&out.results[0]), Some("INVALID_ARGUMENTS"));
    assert!(out.results[0].content.contains("not valid JSON"));
    assert_eq!(code(&out.results[1]), Some("INVALID_ARGUMENTS"));
    assert!(out.results[1].content.contains("got an array"));
    assert!(host.stages().is_empty());
    // The raw text is still what was logged.
    assert_eq!(host.events()[0]["data"]["arguments"], "{nope");
}

#[test]
fn empty_arguments_are_an_empty_object() {
    let host = FakeHost::new();
    let out = run(&host, &[("read_file", "")]).unwrap();
    assert_eq!(out.results[0].content, "ran read_file with {}");
}

#[test]
fn pre_execute_deny_is_final() {
    let mut host = FakeHost::new();
    host.pre = Box::new(|_| {
        Ok(j(
            json!({"kind": "deny", "reason": "outside the workspace"}),
        ))
    });
    let out = run(&host, &[("write_file", "{}")]).unwrap();
    assert_eq!(code(&out.results[0]), Some(ToolCode::ToolDenied.code()));
    assert!(out.results[0].content.contains("outside the workspace"));
    assert_eq!(host.stages(), ["pre c0"]);
    assert_eq!(out.failure, None);
}

fn ask_host(answer: AskAnswer) -> FakeHost {
    let mut host = FakeHost::new();
    host.pre = Box::new(|_| {
        Ok(j(
            json!({"kind": "ask", "reason": "write_file changes the workspace"}),
        ))
    });
    host.ask = answer;
    host
}

#[test]
fn tool03_approval_outcomes_have_distinct_codes_and_fail_closed() {
    let cases = [
        (
            AskAnswer::Outcome(ApprovalOutcome::Rejected),
            ToolCode::ApprovalRejected.code(),
        ),
        (
            AskAnswer::Outcome(ApprovalOutcome::Cancelled),
            ToolCode::ApprovalCancelled.code(),
        ),
        (
            AskAnswer::Outcome(ApprovalOutcome::Unavailable),
            ToolCode::ApprovalUnavailable.code(),
        ),
        (AskAnswer::NoService, ToolCode::ApprovalUnavailable.code()),
        (
            AskAnswer::Failed(Error::coded(
                keel_plugin_api::services::session::SessionCode::Io,
                "audit append failed",
            )),
            ToolCode::ApprovalUnavailable.code(),
        ),
    ];
    let mut messages = Vec::new();
    for (answer, expected) in cases {
        let host = ask_host(answer);
        let out = run(&host, &[("write_file", r#"{"path":"x"}"#)]).unwrap();
        assert_eq!(code(&out.results[0]), Some(expected));
        assert_eq!(
            host.stages(),
            ["pre c0"],
            "no guard, no body after a failed ask"
        );
        let asked = host.asked.lock().unwrap().clone();
        assert_eq!(asked[0].tool_name, "write_file");
        assert_eq!(asked[0].call_id, "c0");
        assert_eq!(asked[0].args, json!({"path": "x"}));
        assert_eq!(
            asked[0].reason.as_deref(),
            Some("write_file changes the workspace")
        );
        messages.push(out.results[0].content.clone());
    }
    // The model can tell a human "no" from a missing channel.
    messages.sort();
    messages.dedup();
    assert_eq!(messages.len(), 5);
}

#[test]
fn tool03_allowed_once_proceeds_and_guards_still_apply() {
    let host = ask_host(AskAnswer::Outcome(ApprovalOutcome::AllowedOnce));
    let out = run(&host, &[("write_file", "{}")]).unwrap();
    assert_eq!(code(&out.results[0]), None);
    assert_eq!(
        host.stages(),
        ["pre c0", "guard c0", "execute c0", "post c0"]
    );

    let mut host = ask_host(AskAnswer::Outcome(ApprovalOutcome::AllowedOnce));
    host.guard = Box::new(|_| Ok(Some(j(json!({"reason": "sandbox is read-only"})))));
    let out = run(&host, &[("write_file", "{}")]).unwrap();
    assert_eq!(code(&out.results[0]), Some(ToolCode::ToolDenied.code()));
    assert!(out.results[0].content.contains("sandbox is read-only"));
}

#[test]
fn tool02_guard_denies_after_an_allowing_pre_execute() {
    let mut host = FakeHost::new();
    host.guard = Box::new(|e| {
        Ok((e.name.as_str() == "write_file").then(|| j(json!({"reason": "no writes"}))))
    });
    let out = run(&host, &[("write_file", "{}"), ("read_file", "{}")]).unwrap();
    assert_eq!(code(&out.results[0]), Some(ToolCode::ToolDenied.code()));
    assert_eq!(code(&out.results[1]), None);
    assert_eq!(out.failure, None);
}

#[test]
fn a_panicking_pre_execute_listener_fails_the_call_and_aborts_the_rest() {
    let mut host = FakeHost::new();
    host.pre = Box::new(|e| {
        if e.call_id.as_str() == "c1" {
            Err(Error::coded(
                keel_plugin_api::codes::ContractCode::Panic,
                "plugin panicked: boom",
            ))
        } else {
            Ok(j(json!({"kind": "allow"})))
        }
    });
    let out = run(
        &host,
        &[
            ("write_file", "{}"),
            ("write_file", "{}"),
            ("read_file", "{}"),
        ],
    )
    .unwrap();
    let codes_seen: Vec<_> = out.results.iter().map(code).collect();
    assert_eq!(
        codes_seen,
        [
            None,
            Some(ToolCode::ToolFailed.code()),
            Some(ToolCode::AbortedBeforeDispatch.code())
        ]
    );
    assert!(out.results[1].content.contains("tools/pre-execute"));
    let failure = out.failure.unwrap();
    assert_eq!(failure.code, ToolCode::StageFailed.code());
    assert!(failure.message.contains("PANIC"));
    assert!(failure.message.contains("'c1'"));
    // Every call has its tool/call before its tool/result; results are in model order.
    let kinds: Vec<String> = host
        .events()
        .iter()
        .map(|e| {
            let kind = e["type"].as_str().unwrap();
            format!("{kind} {}", e["data"]["call_id"].as_str().unwrap())
        })
        .collect();
    let at = |line: &str| kinds.iter().position(|k| k == line).unwrap();
    for i in 0..3 {
        assert!(at(&format!("tool/call c{i}")) < at(&format!("tool/result c{i}")));
    }
    assert!(at("tool/result c0") < at("tool/result c1"));
    assert!(at("tool/result c1") < at("tool/result c2"));
    assert_eq!(kinds.len(), 6);
}

#[test]
fn an_invalid_decision_is_a_stage_failure() {
    let mut host = FakeHost::new();
    host.pre = Box::new(|_| Ok(j(json!({"kind": "maybe"}))));
    let out = run(&host, &[("read_file", "{}")]).unwrap();
    assert_eq!(code(&out.results[0]), Some(ToolCode::ToolFailed.code()));
    assert!(out.failure.unwrap().message.contains("INVALID_DECISION"));
}

#[test]
fn post_execute_can_replace_content_or_block() {
    let mut host = FakeHost::new();
    host.exec = Box::new(|_| Ok(j(json!({"content": "secret=hunter2", "meta": {"n": 1}}))));
    host.post = Box::new(|_| Ok(j(json!({"kind": "accept", "content": "secret=sec_x"}))));
    let out = run(&host, &[("read_file", "{}")]).unwrap();
    assert_eq!(out.results[0].content, "secret=sec_x");
    assert_eq!(out.results[0].meta, Some(json!({"n": 1})));
    // The log records the replacement under the model's call id.
    assert_eq!(host.events()[1]["data"]["content"], "secret=sec_x");
    assert_eq!(host.events()[1]["data"]["call_id"], "c0");

    let mut host = FakeHost::new();
    host.post = Box::new(|_| Ok(j(json!({"kind": "block", "feedback": "do not read .env"}))));
    let out = run(&host, &[("read_file", "{}")]).unwrap();
    assert_eq!(code(&out.results[0]), Some(ToolCode::ToolBlocked.code()));
    assert!(out.results[0].content.contains("do not read .env"));
    assert_eq!(out.failure, None);
}

#[test]
fn an_answer_that_is_not_a_tool_result_is_invalid_output() {
    let mut host = FakeHost::new();
    host.exec = Box::new(|_| Ok(j(json!([1, 2]))));
    let out = run(&host, &[("read_file", "{}")]).unwrap();
    assert_eq!(
        code(&out.results[0]),
        Some(ToolCode::InvalidToolOutput.code())
    );
    assert_eq!(out.failure, None);
}

#[test]
fn a_failing_execute_listener_is_a_stage_failure() {
    let mut host = FakeHost::new();
    host.exec = Box::new(|_| Err(Error::received("CHECKPOINT", "flush failed")));
    let out = run(&host, &[("write_file", "{}"), ("write_file", "{}")]).unwrap();
    assert_eq!(code(&out.results[0]), Some(ToolCode::ToolFailed.code()));
    assert_eq!(
        code(&out.results[1]),
        Some(ToolCode::AbortedBeforeDispatch.code())
    );
    assert!(out.failure.unwrap().message.contains("tools/execute"));
}

#[test]
fn a_refused_append_is_a_batch_error() {
    let mut host = FakeHost::new();
    host.refuse_append = Some("tool/result");
    let err = run(&host, &[("read_file", "{}")]).unwrap_err();
    assert_eq!(err.code, "SESSION_INVALID");
    let mut host = FakeHost::new();
    host.refuse_append = Some("tool/call");
    assert!(run(&host, &[("read_file", "{}")]).is_err());
    assert!(host.stages().is_empty());
}

#[test]
fn tool10_classification_needs_parallel_safe_and_parsed_arguments() {
    let r = registry();
    let read = r.lookup("read_file");
    let write = r.lookup("write_file");
    assert_eq!(
        classify(read.as_ref(), parse_args("{}").is_ok()),
        Mode::Parallel
    );
    assert_eq!(
        classify(read.as_ref(), parse_args("").is_ok()),
        Mode::Parallel
    );
    assert_eq!(
        classify(read.as_ref(), parse_args("{oops").is_ok()),
        Mode::Exclusive
    );
    assert_eq!(
        classify(read.as_ref(), parse_args("3").is_ok()),
        Mode::Exclusive
    );
    assert_eq!(
        classify(write.as_ref(), parse_args("{}").is_ok()),
        Mode::Exclusive
    );
    assert_eq!(classify(None, parse_args("{}").is_ok()), Mode::Exclusive);
}

#[path = "stages_tests_rewrite.rs"]
mod rewrite;
