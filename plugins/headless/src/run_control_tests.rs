//! The headless flow's controls against the same fake agent ([`super`]'s harness): approval
//! modes, SIGINT, failed closes and waits, option parsing, one run at a time, and a run
//! stopped from outside.

use super::*;
use pretty_assertions::assert_eq;

use keel_plugin_api::services::approval::{
    Approval, ApprovalClient, ApprovalProvider, ApprovalRequest, AskAnswer, ModeAnswer,
    ModeRequest, SetModeRequest,
};

/// A fake `keel.approval`: records `set_mode`, or refuses it.
struct FakeApproval {
    calls: Calls,
    fails: bool,
}

impl ApprovalProvider for FakeApproval {
    async fn ask(&self, _: ApprovalRequest) -> Result<AskAnswer> {
        Err(Error::msg("not asked in these tests"))
    }
    async fn mode(&self, _: ModeRequest) -> Result<ModeAnswer> {
        Err(Error::msg("not asked in these tests"))
    }
    async fn set_mode(&self, request: SetModeRequest) -> Result<()> {
        self.calls.lock().unwrap().push((
            "approval.set_mode".to_owned(),
            serde_json::to_value(&request).unwrap(),
        ));
        if self.fails {
            return Err(Error::coded(
                keel_plugin_api::codes::ContractCode::UnknownMethod,
                "no set_mode",
            ));
        }
        Ok(())
    }
}

fn approval_handle(calls: Calls, fails: bool) -> ApprovalClient {
    let handle = ContractHandle::serve::<Approval, _>("approval", FakeApproval { calls, fails });
    ContractClient::<Approval>::new(handle, "headless").into()
}

#[test]
fn approval_mode_is_set_when_asked_and_a_row_provides_it() {
    let seen = Calls::default();
    let approval = approval_handle(Arc::clone(&seen), false);
    let options = json!({"output_format": "text", "approval": "never"});
    let h = drive_with(
        &inv("run", Some("x"), options),
        Script::default(),
        Some(&approval),
        "",
    );
    assert_eq!(h.code, 0);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(
            "approval.set_mode".to_owned(),
            json!({"session_id": "s1", "mode": "never"})
        )]
    );
    // Without the option nothing is set.
    let seen = Calls::default();
    let approval = approval_handle(Arc::clone(&seen), false);
    drive_with(
        &inv("run", Some("x"), text()),
        Script::default(),
        Some(&approval),
        "",
    );
    assert!(seen.lock().unwrap().is_empty());
}

#[test]
fn a_refused_approval_mode_exits_2_and_still_closes_the_session() {
    let approval = approval_handle(Calls::default(), true);
    let options = json!({"output_format": "text", "approval": "ask"});
    let h = drive_with(
        &inv("run", Some("x"), options),
        Script::default(),
        Some(&approval),
        "",
    );
    assert_eq!(h.code, 2);
    assert_eq!(h.methods(), ["create", "close"]);
    assert_eq!(h.out.stderr(), ["keel: error[UNKNOWN_METHOD]: no set_mode"]);
}

/// §11, issue 10 items 7 and 8: every stop request (SIGINT, SIGTERM, SIGHUP) takes one path —
/// abort, wait for the turn to close, close — and the run returns the request's exit code.
/// The kernel prints the `keel: interrupted` line, so the driver prints none.
#[test]
fn surf01_a_stop_request_aborts_the_turn_then_closes_and_exits_128_plus_n() {
    for (signal, code) in [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)] {
        let script = Script {
            wait_for_abort: true,
            interrupt_on_send: Some(DriverInterrupt {
                signal: signal.to_owned(),
                exit_code: code,
            }),
            report: Ok(report(json!({"kind": "aborted", "by": "user"}), "")),
            ..Script::default()
        };
        let h = drive(
            &inv("run", Some("x"), json!({"output_format": "json"})),
            script,
        );
        assert_eq!(h.code, code, "{signal}");
        assert_eq!(
            h.methods(),
            ["create", "send", "wait_idle", "abort", "close"]
        );
        assert!(h.out.stderr().is_empty(), "{:?}", h.out.stderr());
        let result: Value = serde_json::from_str(&h.out.stdout()[0]).unwrap();
        assert_eq!(result["turn_end_reason"], "aborted");
    }
}

/// A stop request that came before the run got going: the session is closed unsent.
#[test]
fn surf01_a_stop_request_before_the_send_closes_without_sending() {
    let calls = Calls::default();
    let hub = Arc::new(Hub::default());
    let stops = crate::interrupt::Stops::default();
    stops.request(DriverInterrupt {
        signal: "SIGTERM".to_owned(),
        exit_code: 143,
    });
    let (tx, _) = Interrupts::channel();
    let agent = fake_agent(Script::default(), Arc::clone(&calls), Arc::clone(&hub), tx);
    let out = Captured::default();
    let env = RunEnv {
        hub,
        active: Arc::new(Active::default()),
        sink: Box::new(out.clone()),
        progress: false,
        interrupts: stops.listen(),
        stdin: Box::new(|| Ok(String::new())),
        lines: Box::new(|| Box::new(std::io::empty())),
    };
    let services = Services {
        agent: &agent,
        approval: None,
        sandbox: None,
        sessions: None,
        describe: None,
    };
    let code = futures::executor::block_on(run(&inv("run", Some("x"), text()), services, env));
    assert_eq!(code, 143);
    assert!(out.stdout().is_empty() && out.stderr().is_empty());
    let methods: Vec<String> = calls
        .lock()
        .unwrap()
        .iter()
        .map(|(m, _)| m.clone())
        .collect();
    assert_eq!(methods, ["create", "close"]);
}

#[test]
fn a_failed_close_turns_success_into_exit_1() {
    let script = Script {
        close_fails: true,
        ..Script::default()
    };
    let h = drive(&inv("run", Some("x"), text()), script);
    assert_eq!(h.code, 1);
    assert_eq!(
        h.out.stderr(),
        ["keel: error[SESSION_IO]: closing session s1 failed: disk full"]
    );
}

#[test]
fn a_failed_wait_reads_as_an_error_turn() {
    let script = Script {
        report: Err(("AGENT_GONE".into(), "the loop stopped".into())),
        ..Script::default()
    };
    let h = drive(&inv("run", Some("x"), text()), script);
    assert_eq!(h.code, 1);
    assert_eq!(
        h.out.stderr(),
        ["keel: turn ended error AGENT_GONE: the loop stopped"]
    );
    assert_eq!(h.methods().last().map(String::as_str), Some("close"));
}

#[test]
fn options_parse_and_refuse_nonsense() {
    let parse = |v: Value| Options::parse(v.as_object().unwrap());
    assert_eq!(
        parse(json!({})),
        Ok(Options {
            format: OutputFormat::Text,
            ephemeral: false,
            max_turns: None,
            approval: None,
            sandbox: None,
            input: crate::input::InputFormat::Text,
            partial: false,
        })
    );
    // A malformed option is refused by the driver that declared it (issue 13 item 2).
    assert!(parse(json!({"max_turns": -1})).is_err());
    assert!(parse(json!({"sandbox": "wide-open"})).is_err());
    assert!(parse(json!({"colour": true})).is_err());
    // Issue 26 item 1: partial messages are stream-json's, as in Claude Code.
    let refused = parse(json!({"include_partial_messages": true})).unwrap_err();
    assert!(
        refused.contains("--include-partial-messages needs --output-format stream-json"),
        "{refused}"
    );
    let partial = parse(json!({"include_partial_messages": true, "output_format": "stream-json"}));
    assert_eq!(partial.map(|o| o.partial), Ok(true));
    assert_eq!(
        parse(json!({"sandbox": "read-only", "approval": "ask", "ephemeral": true})).map(|o| (
            o.sandbox,
            o.approval,
            o.ephemeral
        )),
        Ok((Some("read-only".into()), Some("ask".into()), true))
    );
    assert!(parse(json!({"output_format": "xml"})).is_err());
    assert!(parse(json!({"approval": 1})).is_err());
    let h = drive(
        &inv("run", Some("x"), json!({"output_format": "xml"})),
        Script::default(),
    );
    assert_eq!(h.code, 2);
    assert!(h.out.stderr()[0].starts_with("keel: error[USAGE]: unknown output format"));
}

#[test]
fn unknown_commands_are_usage_errors() {
    let h = drive(&inv("fork", Some("x"), text()), Script::default());
    assert_eq!(h.code, 2);
    assert!(h.out.stderr()[0].contains("not \"fork\""));
}

#[test]
fn a_second_concurrent_run_is_refused() {
    let active = Arc::new(Active::default());
    assert!(active.try_begin());
    let out = Captured::default();
    let agent = agent_client(|_m, _a| async { Ok(json!({})) });
    let env = RunEnv {
        hub: Arc::new(Hub::default()),
        active: Arc::clone(&active),
        sink: Box::new(out.clone()),
        progress: false,
        interrupts: Interrupts::never(),
        stdin: Box::new(|| Ok(String::new())),
        lines: Box::new(|| Box::new(std::io::empty())),
    };
    let services = Services {
        agent: &agent,
        approval: None,
        sandbox: None,
        sessions: None,
        describe: None,
    };
    let code = futures::executor::block_on(run(&inv("run", Some("x"), text()), services, env));
    assert_eq!(code, 2);
    assert!(out.stderr()[0].starts_with("keel: error[DRIVER_BUSY]"));
}

#[test]
fn surf01_a_run_stopped_from_outside_is_finished_by_the_disposer() {
    // The kernel's own Ctrl-C handling drops the run's future mid-wait; the disposer then
    // finishes the session the run left open.
    let calls = Calls::default();
    let hub = Arc::new(Hub::default());
    let (tx, interrupts) = Interrupts::channel();
    let script = Script {
        wait_for_abort: true,
        at_send: vec![notice("s1", 0, "turn/start")],
        report: Ok(report(json!({"kind": "aborted"}), "")),
        ..Script::default()
    };
    let agent = fake_agent(script, Arc::clone(&calls), Arc::clone(&hub), tx);
    let out = Captured::default();
    let active = Arc::new(Active::default());
    let env = RunEnv {
        hub,
        active: Arc::clone(&active),
        sink: Box::new(out.clone()),
        progress: false,
        interrupts,
        stdin: Box::new(|| Ok(String::new())),
        lines: Box::new(|| Box::new(std::io::empty())),
    };
    let services = Services {
        agent: &agent,
        approval: None,
        sandbox: None,
        sessions: None,
        describe: None,
    };
    let invocation = inv("run", Some("x"), json!({"output_format": "stream-json"}));
    futures::executor::block_on(async {
        let mut running = Box::pin(run(&invocation, services, env).fuse());
        // Poll until the run waits for idle, then drop it as the kernel's select would.
        for _ in 0..1000 {
            if calls.lock().unwrap().iter().any(|(m, _)| m == "wait_idle") {
                break;
            }
            futures::select_biased! {
                _ = running => panic!("the run should be waiting"),
                default => std::thread::yield_now(),
            }
        }
    });
    let open = active.take_open().expect("the run left its session open");
    assert_eq!(open.session_id, "s1");
    // The log as `keel.session` `inspect` answers after close: what was printed, and the
    // turn's closers the listener no longer saw.
    let sessions = inspect_only(|request| {
        assert_eq!(request.session_id, "s1");
        let ev = |seq: u64, kind: &str| json!({"seq": seq, "time": 0, "type": kind, "data": {}});
        let header =
            json!({"type": "session", "version": 0, "id": "s1", "created_at": 0, "cwd": "/"});
        serde_json::from_value(json!({"header": header, "recovered": [], "truncated": null,
            "events": [ev(0, "turn/start"), ev(1, "step/end"), ev(2, "turn/end")]}))
        .unwrap()
    });
    futures::executor::block_on(finish_stopped(&agent, Some(&sessions), open));
    let methods: Vec<String> = calls
        .lock()
        .unwrap()
        .iter()
        .map(|(m, _)| m.clone())
        .collect();
    assert_eq!(
        methods,
        ["create", "send", "wait_idle", "abort", "wait_idle", "close"]
    );
    let stdout: Vec<Value> = out
        .stdout()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(stdout.len(), 5, "{stdout:?}");
    assert_eq!(stdout[0]["subtype"], "init");
    let kinds: Vec<&str> = stdout[1..4]
        .iter()
        .map(|l| l["event"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["turn/start", "step/end", "turn/end"],
        "no duplicate seq 0"
    );
    assert_eq!(stdout[4]["turn_end_reason"], "aborted");
    assert!(active.take_open().is_none());
}

/// A `keel.session` whose only method is `inspect`, answered by `answer`.
fn inspect_only(
    answer: fn(
        keel_plugin_api::services::session::SessionRef,
    ) -> keel_plugin_api::services::session::SessionLog,
) -> keel_plugin_api::services::session::SessionsClient {
    use keel_plugin_api::sdk::{ContractClient, ContractHandle};
    use keel_plugin_api::services::session::*;
    struct Fake(fn(SessionRef) -> SessionLog);
    fn no<T>() -> Result<T> {
        Err(Error::msg("not in this test"))
    }
    impl SessionsProvider for Fake {
        async fn create(&self, _: CreateSession) -> Result<CreatedSession> {
            no()
        }
        async fn open(&self, _: SessionRef) -> Result<OpenedSession> {
            no()
        }
        async fn append(&self, _: AppendEvents) -> Result<AppendedEvents> {
            no()
        }
        async fn flush(&self, _: SessionRef) -> Result<Flushed> {
            no()
        }
        async fn close(&self, _: SessionRef) -> Result<()> {
            no()
        }
        async fn load(&self, _: SessionRef) -> Result<SessionLog> {
            no()
        }
        async fn inspect(&self, request: SessionRef) -> Result<SessionLog> {
            Ok((self.0)(request))
        }
        async fn fork(&self, _: ForkSession) -> Result<ForkedSession> {
            no()
        }
        async fn list(&self) -> Result<SessionListing> {
            no()
        }
        async fn messages(&self, _: SessionRef) -> Result<SessionMessages> {
            no()
        }
        async fn profile(&self, _: SessionRef) -> Result<RecordedProfile> {
            no()
        }
        async fn surface(&self, _: SessionRef) -> Result<SurfaceView> {
            no()
        }
        async fn read(&self, _: ReadEvents) -> Result<ReadAnswer> {
            no()
        }
    }
    let handle = ContractHandle::serve::<Sessions, _>("session", Fake(answer));
    ContractClient::new(handle, "headless").into()
}
