//! The stages' tests for the result's one encoding (TOOL-04, issue 12 item 2) and the
//! argument rewrite (`tools/rewrite`, issue 15 item 3), on the scripted host of the parent
//! module.

use super::*;
use pretty_assertions::assert_eq;

fn run_frozen(host: &FakeHost) -> Vec<FrozenResult> {
    let registry = registry();
    let request = request(&[("read_file", "{}")]);
    let pipeline = CallPipeline {
        host,
        registry: &registry,
        request: &request,
        timeout_ms: 600_000,
        parsed: Default::default(),
    };
    let out = block_on(run_batch(&pipeline, 1, 10, &AtomicBool::new(false))).unwrap();
    out.results
}

// Issue 12 item 2 / TOOL-04: a result nobody changed is encoded once, by the body: the loop
// gets that very buffer, and post-execute and tools/result read its text.
#[test]
fn tool04_an_unchanged_result_is_frozen_once_by_the_body() {
    let host = FakeHost::new();
    let body = Snapshot::of(ToolResult::ok("x".repeat(8192))).unwrap();
    *host.body_snapshot.lock().unwrap() = Some(body.clone());
    let results = run_frozen(&host);
    assert!(results[0].frozen().same(body.frozen.frozen()));
    let notified = host.notified.lock().unwrap();
    assert_eq!(notified[0].result.text(), body.frozen.as_str());
}

// A post-execute listener that replaces the content gets a new snapshot (the change is kept).
#[test]
fn tool04_a_changed_result_is_frozen_again() {
    let mut host = FakeHost::new();
    host.post = Box::new(|_| Ok(j(json!({"kind": "accept", "content": "scrubbed"}))));
    let body = Snapshot::of(ToolResult::ok("secret")).unwrap();
    *host.body_snapshot.lock().unwrap() = Some(body.clone());
    let results = run_frozen(&host);
    assert!(!results[0].frozen().same(body.frozen.frozen()));
    assert_eq!(results[0].parse().unwrap().content, "scrubbed");
}

// Issue 15 item 3: a `tools/rewrite` answer replaces the arguments every later stage sees —
// pre-execute, approval, guards and the body — and is logged as `tool/rewrite` between the
// model's raw `tool/call` and the `tool/result`.
#[test]
fn a_rewrite_is_logged_and_every_later_stage_sees_the_new_arguments() {
    let mut host = ask_host(AskAnswer::Outcome(ApprovalOutcome::AllowedOnce));
    host.rewrite = Box::new(|e| {
        assert_eq!(
            e.args.text.as_str(),
            r#"{"path":"a"}"#,
            "the model's args go in"
        );
        Ok(j(json!({"args": {"path": "b"}, "by": "hook:fix.sh"})))
    });
    let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
    let (pre_seen, guard_seen) = (seen.clone(), seen.clone());
    host.pre = Box::new(move |e| {
        pre_seen
            .lock()
            .unwrap()
            .push(format!("pre {}", e.args.text));
        Ok(j(json!({"kind": "ask"})))
    });
    host.guard = Box::new(move |e| {
        guard_seen
            .lock()
            .unwrap()
            .push(format!("guard {}", e.args.text));
        Ok(None)
    });
    let out = run(&host, &[("write_file", r#"{"path":"a"}"#)]).unwrap();
    assert_eq!(
        out.results,
        [ToolResult::ok(r#"ran write_file with {"path":"b"}"#)]
    );
    assert_eq!(
        *seen.lock().unwrap(),
        [r#"pre {"path":"b"}"#, r#"guard {"path":"b"}"#]
    );
    assert_eq!(host.asked.lock().unwrap()[0].args, json!({"path": "b"}));
    let events = host.events();
    assert_eq!(events[0]["data"]["arguments"], r#"{"path":"a"}"#);
    assert_eq!(
        events[1],
        json!({"type": "tool/rewrite", "ignorable": true, "data": {"turn": 2, "step": 1,
            "call_id": "c0", "args": {"path": "b"}, "by": "hook:fix.sh"}})
    );
    assert_eq!(events[2]["type"], "tool/result");
    // The observers see the call that ran.
    let notified = host.notified.lock().unwrap();
    assert_eq!(notified[0].exec.args.text.as_str(), r#"{"path":"b"}"#);
}

// Issue 15 item 3: `{}` leaves the call alone and logs nothing extra.
#[test]
fn an_empty_rewrite_changes_nothing() {
    let host = FakeHost::new();
    run(&host, &[("read_file", r#"{"path":"a"}"#)]).unwrap();
    assert_eq!(types_of(&host), ["tool/call", "tool/result"]);
}

fn types_of(host: &FakeHost) -> Vec<String> {
    host.events()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

// Issue 15 item 3: a rewrite to anything but an object, or an answer outside the vocabulary,
// is an invalid decision: the call fails as a stage failure, nothing runs, nothing is logged
// as a rewrite.
#[test]
fn a_rewrite_that_is_not_an_object_is_an_invalid_decision() {
    for bad in [
        json!({"args": "rm -rf /"}),
        json!({"args": [1]}),
        json!({"kind": "allow"}),
    ] {
        let mut host = FakeHost::new();
        host.rewrite = Box::new(move |_| Ok(j(bad.clone())));
        let out = run(&host, &[("read_file", "{}")]).unwrap();
        assert_eq!(code(&out.results[0]), Some(ToolCode::ToolFailed.code()));
        assert!(out.results[0].content.contains("tools/rewrite"));
        let failure = out.failure.unwrap();
        assert!(failure.message.contains("INVALID_DECISION"), "{failure:?}");
        assert!(host.stages().is_empty(), "no policy, no body");
        assert_eq!(types_of(&host), ["tool/call", "tool/result"]);
    }
}

// A failing rewrite listener is a stage failure like any other.
#[test]
fn a_failing_rewrite_listener_is_a_stage_failure() {
    let mut host = FakeHost::new();
    host.rewrite = Box::new(|_| {
        Err(Error::coded(
            keel_plugin_api::codes::ContractCode::Panic,
            "plugin panicked",
        ))
    });
    let out = run(&host, &[("write_file", "{}")]).unwrap();
    assert_eq!(code(&out.results[0]), Some(ToolCode::ToolFailed.code()));
    assert!(out.failure.unwrap().message.contains("tools/rewrite"));
    assert!(host.stages().is_empty());
}

#[test]
fn one_call_parses_its_argument_text_once_through_classify_policy_approval_and_execute() {
    // Issue 24 item 1: the model's text is parsed once; classification, the approval request
    // and the body's invocation share the parsed value.
    let host = ask_host(AskAnswer::Outcome(ApprovalOutcome::AllowedOnce));
    PARSES.with(|n| n.set(0));
    let out = run(&host, &[("read_file", r#"{"path": "a.txt"}"#)]).unwrap();
    assert!(!out.results[0].is_error, "{:?}", out.results);
    assert_eq!(host.asked.lock().unwrap()[0].args["path"], "a.txt");
    assert_eq!(PARSES.with(std::cell::Cell::get), 1);
}
