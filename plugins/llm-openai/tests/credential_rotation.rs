//! LLM-05: the credential is resolved per request, so a rotated key is used by the very next
//! call. Its own test binary with one single-threaded test, because it changes the process
//! environment between calls.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails by panicking"
)]

mod support;

use keel_plugin_llm_openai::Adapter;
use support::*;

const KEY_REF: &str = "KEEL_TEST_ROTATING_OPENAI_KEY";

#[allow(
    unsafe_code,
    reason = "std::env::set_var is unsafe; this test owns the variable"
)]
fn set(value: Option<&str>) {
    // SAFETY: this binary has one test on a current-thread runtime and the adapter is idle
    // between calls, so nothing reads the environment concurrently.
    unsafe {
        match value {
            Some(v) => std::env::set_var(KEY_REF, v),
            None => std::env::remove_var(KEY_REF),
        }
    }
}

#[tokio::test]
async fn llm_05_rotated_key_takes_effect_on_the_next_request() {
    let mock = Mock::start(vec![
        sse(&[text_delta("one"), finish_event("stop")]),
        sse(&[text_delta("two"), finish_event("stop")]),
    ]);
    let adapter = Adapter::new(config(&mock.base_url, KEY_REF)).unwrap();

    set(Some("sk-first-key"));
    let r = adapter.generate(request("a")).await;
    assert!(failure_of(&r.chunks).is_none(), "{r:?}");

    set(Some("sk-second-key"));
    let r = adapter.generate(request("b")).await;
    assert!(failure_of(&r.chunks).is_none(), "{r:?}");

    set(Some(""));
    let r = adapter.generate(request("c")).await;
    assert_eq!(
        failure_of(&r.chunks).unwrap().code.as_str(),
        "CREDENTIAL_MISSING"
    );
    set(None);

    let auth: Vec<String> = mock
        .requests()
        .iter()
        .map(|r| r.header("authorization").unwrap_or_default().to_owned())
        .collect();
    assert_eq!(auth, vec!["Bearer sk-first-key", "Bearer sk-second-key"]);
}
