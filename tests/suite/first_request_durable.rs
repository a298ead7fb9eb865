//! SES-05 at the very first model request (issue 25 item 3): the checkpoint no longer flushes
//! at the session's first pre-step, so the `llm/stream` checkpoint alone creates the session
//! file. keel is SIGKILLed the moment the model server holds its first request (before any
//! answer); the file must already hold the whole prefix that led to the request — the turn's
//! opening, the step's opening and the user's prompt — and load without repair.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_tests::model_server::Reply;
use serde_json::Value;

use crate::suite::agent_support::*;

#[test]
fn ses05_the_session_is_durable_when_keel_dies_right_after_its_first_request() {
    let server = server(vec![Reply::text("never read")]);
    let env = agent_env(&server, "");
    let pid: Arc<Mutex<Option<i32>>> = Arc::new(Mutex::new(None));
    let target = Arc::clone(&pid);
    // On the server's connection thread, before the request is answered.
    server.on_completion(move |_| {
        for _ in 0..3000 {
            if let Some(p) = *target.lock().unwrap() {
                if let Some(p) = rustix::process::Pid::from_raw(p) {
                    let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let child = env
        .command(&[
            "run",
            "--profile",
            "t",
            "--output-format",
            "stream-json",
            "the first prompt",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    *pid.lock().unwrap() = Some(i32::try_from(child.id()).unwrap());
    let out = child.wait_with_output().unwrap();
    assert!(
        !out.status.success(),
        "keel was meant to die at its first request: {out:?}"
    );
    assert_eq!(
        server.completions().len(),
        1,
        "the request reached the server"
    );
    let init: Value = serde_json::from_str(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .expect("the init line"),
    )
    .unwrap();
    let id = init["session_id"].as_str().unwrap().to_owned();
    let events = stored_events(&env, &id);
    let kinds = types(&events);
    for kind in ["turn/start", "step/start", "user/message"] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} missing: {kinds:?}");
    }
    let prompt = events
        .iter()
        .find(|e| e["type"] == "user/message")
        .map(|e| e["data"].to_string())
        .unwrap_or_default();
    assert!(prompt.contains("the first prompt"), "{prompt}");
    // Contiguous from 0, and the file loads (recovery closes the open turn).
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64, "{events:?}");
    }
    let show = env.keel(&["sessions", "show", &id, "--json", "--profile", "t"]);
    show.expect_code(0);
}
