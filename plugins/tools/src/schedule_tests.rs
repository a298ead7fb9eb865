//! Scheduler tests (B9 `tool-calls.spec` list, TOOL-07/09/10) with a scripted pipeline: bodies
//! that yield a chosen number of times, so they settle in a chosen order on one thread.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use futures::executor::block_on;
use pretty_assertions::assert_eq;

use super::*;

struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

async fn yields(n: usize) {
    for _ in 0..n {
        YieldNow(false).await;
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Admit {
    Run,
    Deny,
    Broken,
    Fatal,
}

#[derive(Clone, Copy)]
struct Script {
    mode: Mode,
    admit: Admit,
    delay: usize,
    cancel_on_start: bool,
    exec_broken: bool,
    post_broken: bool,
    commit_fatal: bool,
}

fn par(delay: usize) -> Script {
    Script {
        mode: Mode::Parallel,
        admit: Admit::Run,
        delay,
        cancel_on_start: false,
        exec_broken: false,
        post_broken: false,
        commit_fatal: false,
    }
}

fn excl(delay: usize) -> Script {
    Script {
        mode: Mode::Exclusive,
        ..par(delay)
    }
}

struct Mock {
    calls: Vec<Script>,
    log: Mutex<Vec<String>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    bodies: AtomicUsize,
    max_bodies: AtomicUsize,
    cancel: AtomicBool,
}

impl Mock {
    fn new(calls: Vec<Script>) -> Self {
        Mock {
            calls,
            log: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            bodies: AtomicUsize::new(0),
            max_bodies: AtomicUsize::new(0),
            cancel: AtomicBool::new(false),
        }
    }

    fn note(&self, line: String) {
        self.log.lock().unwrap().push(line);
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// Log lines starting with `prefix`, in order.
    fn lines(&self, prefix: &str) -> Vec<String> {
        self.log()
            .into_iter()
            .filter(|l| l.starts_with(prefix))
            .collect()
    }

    fn pos(&self, line: &str) -> usize {
        self.log().iter().position(|l| l == line).unwrap()
    }

    fn script(&self, i: usize) -> Script {
        self.calls[i]
    }

    fn run(&self, cap: usize) -> Result<BatchOutcome<ToolResult>> {
        block_on(run_batch(self, self.calls.len(), cap, &self.cancel))
    }
}

fn bump(now: &AtomicUsize, max: &AtomicUsize) {
    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
    max.fetch_max(n, Ordering::SeqCst);
}

fn broken(stage: &str, i: usize) -> Settled {
    Settled {
        result: ToolResult::error(ToolCode::ToolFailed, format!("{stage} failed")),
        failure: Some(BatchFailure {
            code: "ToolCode::StageFailed.code()".into(),
            message: format!("{stage} failed for call {i}"),
        }),
    }
}

impl Pipeline for Mock {
    type Ticket = usize;
    type Committed = ToolResult;

    fn classify(&self, index: usize) -> Mode {
        self.script(index).mode
    }

    async fn admit(&self, i: usize) -> Result<Admission<usize>> {
        bump(&self.in_flight, &self.max_in_flight);
        self.note(format!("admit {i}"));
        yields(1).await;
        let done = |s: Settled| {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            Ok(Admission::Settled(i, s))
        };
        match self.script(i).admit {
            Admit::Run => Ok(Admission::Run(i)),
            Admit::Deny => done(Settled::ok(ToolResult::error(ToolCode::ToolDenied, "no"))),
            Admit::Broken => done(broken("tools/pre-execute", i)),
            Admit::Fatal => {
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                Err(Error::coded(
                    keel_plugin_api::services::session::SessionCode::Invalid,
                    "append refused",
                ))
            }
        }
    }

    async fn execute(&self, &i: &usize) -> Settled {
        bump(&self.bodies, &self.max_bodies);
        let script = self.script(i);
        self.note(format!(
            "start {i} with {} bodies",
            self.bodies.load(Ordering::SeqCst)
        ));
        if script.cancel_on_start {
            self.cancel.store(true, Ordering::SeqCst);
        }
        yields(script.delay).await;
        self.note(format!("end {i}"));
        self.bodies.fetch_sub(1, Ordering::SeqCst);
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if script.exec_broken {
            return broken("tools/execute", i);
        }
        Settled::ok(ToolResult::ok(format!("r{i}")))
    }

    async fn finish(&self, &i: &usize, result: ToolResult) -> Settled {
        self.note(format!("post {i}"));
        if self.script(i).post_broken {
            return broken("tools/post-execute", i);
        }
        Settled::ok(result)
    }

    async fn commit(&self, &i: &usize, result: ToolResult) -> Result<ToolResult> {
        yields(1).await;
        if self.script(i).commit_fatal {
            return Err(Error::coded(
                keel_plugin_api::services::session::SessionCode::Io,
                "disk full",
            ));
        }
        self.note(format!("commit {i}"));
        Ok(result)
    }

    async fn skip(&self, i: usize) -> Result<usize> {
        self.note(format!("skip {i}"));
        Ok(i)
    }
}

fn code(r: &ToolResult) -> Option<&str> {
    r.error.as_ref().map(|e| e.code.as_str())
}

fn codes_of(out: &BatchOutcome<ToolResult>) -> Vec<Option<&str>> {
    out.results.iter().map(code).collect()
}

#[test]
fn b9_results_commit_in_model_order_when_bodies_settle_out_of_order() {
    let mock = Mock::new(vec![par(40), par(20), par(1)]);
    let out = mock.run(10).unwrap();
    assert_eq!(mock.lines("end"), ["end 2", "end 1", "end 0"]);
    assert_eq!(mock.lines("commit"), ["commit 0", "commit 1", "commit 2"]);
    let contents: Vec<_> = out.results.iter().map(|r| r.content.as_str()).collect();
    assert_eq!(contents, ["r0", "r1", "r2"]);
    assert_eq!(out.failure, None);
    // Post-execute runs in model order too (TOOL-10).
    assert_eq!(mock.lines("post"), ["post 0", "post 1", "post 2"]);
    assert_eq!(mock.max_bodies.load(Ordering::SeqCst), 3);
}

#[test]
fn tool10_pool_cap_bounds_running_calls() {
    let mock = Mock::new((0..7).map(|i| par(5 + (i * 3) % 7)).collect());
    let out = mock.run(2).unwrap();
    assert_eq!(out.results.len(), 7);
    assert_eq!(mock.max_in_flight.load(Ordering::SeqCst), 2);
    assert_eq!(mock.max_bodies.load(Ordering::SeqCst), 2);
    let commits: Vec<String> = (0..7).map(|i| format!("commit {i}")).collect();
    assert_eq!(mock.lines("commit"), commits);
}

#[test]
fn tool10_pool_cap_of_one_is_serial() {
    let mock = Mock::new(vec![par(9), par(1), par(5)]);
    mock.run(1).unwrap();
    assert_eq!(mock.max_in_flight.load(Ordering::SeqCst), 1);
    let order: Vec<String> = mock
        .log()
        .into_iter()
        .filter(|l| l.starts_with("admit") || l.starts_with("end"))
        .collect();
    assert_eq!(
        order,
        ["admit 0", "end 0", "admit 1", "end 1", "admit 2", "end 2"]
    );
    // A cap of 0 in a hand-made config is treated as 1.
    let zero = Mock::new(vec![par(3), par(1)]);
    zero.run(0).unwrap();
    assert_eq!(zero.max_in_flight.load(Ordering::SeqCst), 1);
}

#[test]
fn tool10_exclusive_call_is_a_barrier() {
    let mock = Mock::new(vec![par(10), par(3), excl(2), par(1), par(1)]);
    mock.run(10).unwrap();
    // The exclusive call waits for both running calls and runs alone.
    assert!(mock.pos("admit 2") > mock.pos("end 0"));
    assert!(mock.pos("admit 2") > mock.pos("end 1"));
    assert!(mock.log().contains(&"start 2 with 1 bodies".to_owned()));
    // Later parallel calls wait for it.
    assert!(mock.pos("admit 3") > mock.pos("end 2"));
    // And run together again.
    assert_eq!(mock.max_bodies.load(Ordering::SeqCst), 2);
    let commits: Vec<String> = (0..5).map(|i| format!("commit {i}")).collect();
    assert_eq!(mock.lines("commit"), commits);
}

#[test]
fn tool10_parallel_calls_share_the_pool() {
    let mock = Mock::new(vec![par(10), par(10), par(10)]);
    mock.run(10).unwrap();
    // All three admitted before the first body ends.
    assert!(mock.pos("admit 2") < mock.pos("end 0"));
}

#[test]
fn tool08_denied_call_records_its_reason_and_the_batch_continues() {
    let mut calls = vec![par(2), par(2), par(2)];
    calls[1].admit = Admit::Deny;
    let mock = Mock::new(calls);
    let out = mock.run(10).unwrap();
    assert_eq!(
        codes_of(&out),
        [None, Some(ToolCode::ToolDenied.code()), None]
    );
    assert_eq!(out.failure, None);
    assert!(!mock.log().iter().any(|l| l.starts_with("start 1")));
    // No post-execute for a call that had no body.
    assert_eq!(mock.lines("post"), ["post 0", "post 2"]);
}

#[test]
fn listener_failure_fails_the_call_stops_new_starts_and_keeps_the_log_whole() {
    let mut calls = vec![par(30), par(2), par(2), par(2)];
    calls[1].admit = Admit::Broken;
    let mock = Mock::new(calls);
    let out = mock.run(10).unwrap();
    // Call 0 was running: it drains and keeps its result.
    assert_eq!(
        codes_of(&out),
        [
            None,
            Some(ToolCode::ToolFailed.code()),
            Some(ToolCode::AbortedBeforeDispatch.code()),
            Some(ToolCode::AbortedBeforeDispatch.code())
        ]
    );
    assert_eq!(out.results[0].content, "r0");
    let failure = out.failure.unwrap();
    assert_eq!(failure.code, "ToolCode::StageFailed.code()");
    assert!(failure.message.contains("tools/pre-execute"));
    assert!(!mock.log().iter().any(|l| l.starts_with("admit 2")));
    // Unstarted calls get their tool/call logged, then their result, in model order.
    assert!(mock.pos("skip 2") < mock.pos("commit 2"));
    assert!(mock.pos("commit 2") < mock.pos("skip 3"));
    assert_eq!(mock.lines("commit").len(), 4);
}

#[test]
fn execute_and_post_execute_failures_stop_the_batch_too() {
    let mut calls = vec![excl(1), excl(1), excl(1)];
    calls[0].exec_broken = true;
    let mock = Mock::new(calls);
    let out = mock.run(10).unwrap();
    assert_eq!(
        codes_of(&out),
        [
            Some(ToolCode::ToolFailed.code()),
            Some(ToolCode::AbortedBeforeDispatch.code()),
            Some(ToolCode::AbortedBeforeDispatch.code())
        ]
    );
    assert!(out.failure.unwrap().message.contains("tools/execute"));

    let mut calls = vec![excl(1), excl(1), excl(1)];
    calls[0].post_broken = true;
    let mock = Mock::new(calls);
    let out = mock.run(10).unwrap();
    assert_eq!(code(&out.results[0]), Some(ToolCode::ToolFailed.code()));
    assert_eq!(
        code(&out.results[2]),
        Some(ToolCode::AbortedBeforeDispatch.code())
    );
    assert!(out.failure.unwrap().message.contains("tools/post-execute"));
}

#[test]
fn tool09_cancel_before_the_batch_starts_nothing() {
    let mock = Mock::new(vec![par(1), excl(1)]);
    mock.cancel.store(true, Ordering::SeqCst);
    let out = mock.run(10).unwrap();
    assert_eq!(
        codes_of(&out),
        [
            Some(ToolCode::AbortedBeforeDispatch.code()),
            Some(ToolCode::AbortedBeforeDispatch.code())
        ]
    );
    assert_eq!(out.failure, None);
    assert_eq!(mock.log(), ["skip 0", "commit 0", "skip 1", "commit 1"]);
}

#[test]
fn tool09_cancel_during_drains_started_bodies_as_aborted() {
    let mut calls = vec![par(20), par(2), par(1), excl(1)];
    calls[1].cancel_on_start = true;
    let mock = Mock::new(calls);
    let out = mock.run(10).unwrap();
    // 0 and 1 started: drained to completion, successes become ABORTED (output kept).
    assert_eq!(
        codes_of(&out),
        [
            Some(ToolCode::Aborted.code()),
            Some(ToolCode::Aborted.code()),
            Some(ToolCode::AbortedBeforeDispatch.code()),
            Some(ToolCode::AbortedBeforeDispatch.code())
        ]
    );
    assert!(out.results[0].content.contains("r0"));
    assert!(mock.log().contains(&"end 0".to_owned()));
    assert!(mock.lines("post").is_empty());
    assert_eq!(out.failure, None);
}

#[test]
fn tool09_cancel_during_admission_keeps_the_body_from_starting() {
    // Call 1 is admitted while call 0 runs; the cancel lands during call 1's admission.
    let mut calls = vec![par(1), par(3)];
    calls[0].cancel_on_start = true;
    let mock = Mock::new(calls);
    let out = mock.run(10).unwrap();
    assert_eq!(
        codes_of(&out),
        [
            Some(ToolCode::Aborted.code()),
            Some(ToolCode::AbortedBeforeDispatch.code())
        ]
    );
    assert!(mock.log().contains(&"admit 1".to_owned()));
    assert!(!mock.log().iter().any(|l| l.starts_with("start 1")));
    // It was admitted, so its tool/call is already logged: no skip.
    assert!(mock.lines("skip").is_empty());
}

#[test]
fn tool09_fatal_commit_drains_started_calls_and_fabricates_nothing() {
    let mut calls = vec![par(1), par(30), par(1), par(1)];
    calls[0].commit_fatal = true;
    let mock = Mock::new(calls);
    let err = mock.run(10).unwrap_err();
    assert_eq!(err.code, "SESSION_IO");
    // Every started body ran to the end before the error surfaced.
    let started = mock.lines("start").len();
    assert_eq!(mock.lines("end").len(), started);
    assert!(mock.lines("commit").is_empty());
    assert!(mock.lines("skip").is_empty());
}

#[test]
fn fatal_admission_returns_the_error() {
    let mut calls = vec![par(10), par(1)];
    calls[1].admit = Admit::Fatal;
    let mock = Mock::new(calls);
    let err = mock.run(10).unwrap_err();
    assert_eq!(err.code, "SESSION_INVALID");
    assert!(mock.log().contains(&"end 0".to_owned()));
}

#[test]
fn empty_batch_answers_no_results() {
    let mock = Mock::new(Vec::new());
    let out = mock.run(10).unwrap();
    assert!(out.results.is_empty());
    assert_eq!(
        serde_json::to_value(&out).unwrap(),
        serde_json::json!({"results": []})
    );
}
