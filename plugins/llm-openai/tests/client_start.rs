//! Issue 25 item 2: the HTTP client is built off the row's activation, and a request that
//! comes before it was built — or while it is being built — still goes out, once, with the
//! row's settings (LLM-01: the adapter answers every request it is given).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails by panicking"
)]

mod support;

use keel_plugin_llm_openai::Adapter;
use support::*;

fn answered(text: &str) -> Reply {
    sse(&[text_delta(text), finish_event("stop")])
}

#[tokio::test]
async fn a_request_before_the_client_was_built_builds_it_and_is_sent() {
    let mock = Mock::start(vec![answered("one"), answered("two")]);
    // No key: the row's `api_key_ref` is empty, so nothing reads the environment.
    let adapter = Adapter::new(config(&mock.base_url, "")).unwrap();
    assert!(
        !adapter.client_built(),
        "Adapter::new must not build the client"
    );
    let r = adapter.generate(request("first")).await;
    assert!(failure_of(&r.chunks).is_none(), "{r:?}");
    assert!(adapter.client_built());
    let r = adapter.generate(request("second")).await;
    assert!(failure_of(&r.chunks).is_none(), "{r:?}");
    let seen: Vec<String> = mock
        .requests()
        .iter()
        .map(|r| r.body["messages"][0]["content"].to_string())
        .collect();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen[0].contains("first") && seen[1].contains("second"),
        "{seen:?}"
    );
}

#[tokio::test]
async fn a_request_racing_the_background_build_waits_for_it_and_is_sent_once() {
    for _ in 0..20 {
        let mock = Mock::start(vec![answered("raced")]);
        let adapter = Adapter::new(config(&mock.base_url, "")).unwrap();
        adapter.prepare_client();
        let r = adapter.generate(request("now")).await;
        assert!(failure_of(&r.chunks).is_none(), "{r:?}");
        assert_eq!(mock.requests().len(), 1);
        assert_eq!(
            mock.requests()[0].header("user-agent"),
            Some(concat!("keel/", env!("CARGO_PKG_VERSION")))
        );
    }
}
