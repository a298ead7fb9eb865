//! The adapter against a scripted OpenAI-compatible server on loopback: streaming text and tool
//! calls, usage ordering, every failure mapping of B14/LLM-04, and credential handling (LLM-05).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails by panicking"
)]

mod support;

use std::sync::{Arc, Once};
use std::time::Duration;

use keel_plugin_api::sdk::{ContractClient, ContractHandle};
use keel_plugin_api::services::llm::{
    CheckRequest, FinishReason, LlmAdapter, LlmAdapterClient, LlmResponse, StreamChunk, Usage,
};
use keel_plugin_llm_openai::{Adapter, Service};
use serde_json::json;
use support::*;

const KEY_REF: &str = "KEEL_TEST_LOOPBACK_OPENAI_KEY";
const KEY: &str = "sk-loopback-secret-0123456789";

fn set_key() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        #[allow(
            unsafe_code,
            reason = "std::env::set_var is unsafe; this test owns the variable"
        )]
        // SAFETY: set once, before any adapter in this binary reads it; the only other readers
        // are Rust `std::env` calls (which share std's env lock) — loopback IP literals mean no
        // libc resolver runs.
        unsafe {
            std::env::set_var(KEY_REF, KEY);
        }
    });
}

async fn run(mock: &Mock, tweak: impl FnOnce(&mut keel_plugin_llm_openai::Config)) -> LlmResponse {
    set_key();
    let mut config = config(&mock.base_url, KEY_REF);
    tweak(&mut config);
    let adapter = Adapter::new(config).unwrap();
    adapter.generate(request("hello")).await
}

async fn failure_for(reply: Reply) -> keel_plugin_api::services::llm::LlmFailure {
    let mock = Mock::start(vec![reply]);
    let r = run(&mock, |_| {}).await;
    let f = failure_of(&r.chunks).unwrap_or_else(|| panic!("expected an error: {r:?}"));
    assert!(!f.message.contains(KEY), "key leaked: {}", f.message);
    f
}

#[tokio::test]
async fn streams_text_with_usage_before_finish_and_sends_the_documented_request() {
    let mock = Mock::start(vec![sse(&[
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
        text_delta("Hello"),
        text_delta(", world"),
        finish_event("stop"),
        usage_event(12, 3),
    ])]);
    let r = run(&mock, |_| {}).await;
    assert_eq!(
        r.chunks,
        vec![
            StreamChunk::TextDelta {
                index: 0,
                text: "Hello".into()
            },
            StreamChunk::TextDelta {
                index: 0,
                text: ", world".into()
            },
            StreamChunk::Usage {
                usage: Usage {
                    input_tokens: 12,
                    output_tokens: 3
                }
            },
            StreamChunk::Finish {
                reason: FinishReason::Stop
            },
        ]
    );
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    let req = &reqs[0];
    assert_eq!(req.request_line, "POST /v1/chat/completions HTTP/1.1");
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert!(
        req.header("user-agent").unwrap().starts_with("keel/"),
        "{req:?}"
    );
    assert_eq!(req.body["stream"], json!(true));
    assert_eq!(req.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(req.body["model"], json!("mock-model"));
    assert_eq!(
        req.body["messages"],
        json!([{"role": "user", "content": "hello"}])
    );
}

#[tokio::test]
async fn custom_headers_are_sent() {
    let mock = Mock::start(vec![sse(&[text_delta("x"), finish_event("stop")])]);
    let r = run(&mock, |c| {
        c.headers.insert("X-Extra".into(), "yes".into());
    })
    .await;
    assert!(failure_of(&r.chunks).is_none(), "{r:?}");
    assert_eq!(mock.requests()[0].header("x-extra"), Some("yes"));
}

#[tokio::test]
async fn split_deltas_of_two_parallel_tool_calls() {
    let call = |index: u64, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut c = json!({"index": index, "function": {"arguments": args}});
        if let Some(id) = id {
            c["id"] = json!(id);
            c["type"] = json!("function");
        }
        if let Some(name) = name {
            c["function"]["name"] = json!(name);
        }
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [c]}}]})
    };
    let mock = Mock::start(vec![sse(&[
        call(0, Some("call_1"), Some("read_file"), ""),
        call(1, Some("call_2"), Some("glob"), "{\"pat"),
        call(0, None, None, "{\"path\":"),
        call(1, None, None, "tern\":\"*.rs\"}"),
        call(0, None, None, "\"a.txt\"}"),
        finish_event("tool_calls"),
        usage_event(40, 20),
    ])]);
    let r = run(&mock, |_| {}).await;
    // Assemble per index as the loop does.
    let mut calls: Vec<(String, String, String)> = vec![Default::default(); 2];
    for c in &r.chunks {
        if let StreamChunk::ToolCallDelta {
            index,
            id,
            name,
            arguments_delta,
        } = c
        {
            let slot = &mut calls[*index as usize];
            if !id.is_empty() {
                slot.0 = id.clone();
            }
            if let Some(n) = name {
                slot.1 = n.clone();
            }
            slot.2.push_str(arguments_delta);
        }
    }
    assert_eq!(
        calls,
        vec![
            (
                "call_1".into(),
                "read_file".into(),
                "{\"path\":\"a.txt\"}".into()
            ),
            (
                "call_2".into(),
                "glob".into(),
                "{\"pattern\":\"*.rs\"}".into()
            ),
        ]
    );
    let n = r.chunks.len();
    assert_eq!(
        r.chunks[n - 2],
        StreamChunk::Usage {
            usage: Usage {
                input_tokens: 40,
                output_tokens: 20
            }
        }
    );
    assert_eq!(
        r.chunks[n - 1],
        StreamChunk::Finish {
            reason: FinishReason::ToolCalls
        }
    );
}

#[tokio::test]
async fn llm_04_rate_limit_with_retry_after_seconds() {
    let f = failure_for(status(
        429,
        &[("retry-after", "7")],
        r#"{"error":{"message":"slow down"}}"#,
    ))
    .await;
    assert_eq!(f.code.as_str(), "RATE_LIMIT");
    assert_eq!(f.status, Some(429));
    assert_eq!(f.provider_retry_after_ms, Some(7000));
    assert_eq!(f.request_id.as_deref(), Some("req_err"));
    assert!(f.message.contains("slow down"), "{}", f.message);
}

#[tokio::test]
async fn llm_04_rate_limit_with_retry_after_ms_and_http_date() {
    let f = failure_for(status(
        429,
        &[("retry-after-ms", "1500"), ("retry-after", "9")],
        "{}",
    ))
    .await;
    assert_eq!(f.provider_retry_after_ms, Some(1500));
    let later = httpdate_in(30);
    let f = failure_for(status(429, &[("retry-after", later.as_str())], "{}")).await;
    let ms = f.provider_retry_after_ms.unwrap();
    assert!((25_000..=30_000).contains(&ms), "{ms}");
}

fn httpdate_in(secs: u64) -> String {
    httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(secs))
}

#[tokio::test]
async fn llm_04_auth_server_and_bad_request() {
    let f = failure_for(status(
        401,
        &[],
        &format!(r#"{{"error":{{"message":"Incorrect API key provided: {KEY}"}}}}"#),
    ))
    .await;
    assert_eq!((f.code.as_str(), f.status), ("AUTH", Some(401)));
    let f = failure_for(status(403, &[], "{}")).await;
    assert_eq!((f.code.as_str(), f.status), ("AUTH", Some(403)));
    let f = failure_for(status(500, &[], "boom")).await;
    assert_eq!((f.code.as_str(), f.status), ("SERVER", Some(500)));
    let f = failure_for(status(503, &[], "overloaded")).await;
    assert_eq!(f.code.as_str(), "SERVER");
    let f = failure_for(status(
        400,
        &[],
        &format!(r#"{{"error":{{"message":"bad value near {KEY}"}}}}"#),
    ))
    .await;
    assert_eq!((f.code.as_str(), f.status), ("BAD_REQUEST", Some(400)));
    let f = failure_for(status(404, &[], "no such model")).await;
    assert_eq!(f.code.as_str(), "BAD_REQUEST");
}

#[tokio::test]
async fn llm_04_context_overflow_is_context_window_exceeded() {
    let f = failure_for(status(
        400,
        &[],
        r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","code":"context_length_exceeded"}}"#,
    ))
    .await;
    assert_eq!(
        (f.code.as_str(), f.status),
        ("CONTEXT_WINDOW_EXCEEDED", Some(400))
    );
    let f = failure_for(status(413, &[], "request exceeds the context window")).await;
    assert_eq!(
        (f.code.as_str(), f.status),
        ("CONTEXT_WINDOW_EXCEEDED", Some(413))
    );
}

#[tokio::test]
async fn llm_04_connect_refused_is_transport() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    set_key();
    let adapter = Adapter::new(config(&format!("http://127.0.0.1:{port}/v1"), KEY_REF)).unwrap();
    let r = adapter.generate(request("hi")).await;
    let f = failure_of(&r.chunks).unwrap();
    assert_eq!(f.code.as_str(), "TRANSPORT");
    assert!(f.message.contains("cannot connect"), "{}", f.message);
    assert_eq!(r.chunks.len(), 1);
}

#[tokio::test]
async fn llm_04_connection_closed_without_answer_is_transport() {
    let f = failure_for(vec![]).await;
    assert_eq!(f.code.as_str(), "TRANSPORT");
}

#[tokio::test]
async fn llm_04_eof_mid_stream_is_transport_after_the_partial_chunks() {
    let mock = Mock::start(vec![vec![sse_head(), event(&text_delta("partial"))]]);
    let r = run(&mock, |_| {}).await;
    assert_eq!(
        r.chunks[0],
        StreamChunk::TextDelta {
            index: 0,
            text: "partial".into()
        }
    );
    let f = failure_of(&r.chunks).unwrap();
    assert_eq!(f.code.as_str(), "TRANSPORT");
    assert_eq!(f.request_id.as_deref(), Some("req_mock"));
}

#[tokio::test]
async fn eof_after_finish_reason_without_done_is_complete() {
    let mock = Mock::start(vec![vec![
        sse_head(),
        event(&text_delta("ok")),
        event(&finish_event("stop")),
    ]]);
    let r = run(&mock, |_| {}).await;
    assert_eq!(
        r.chunks.last(),
        Some(&StreamChunk::Finish {
            reason: FinishReason::Stop
        })
    );
}

#[tokio::test]
async fn llm_04_undecodable_sse_data_is_transport() {
    let f = failure_for(vec![
        sse_head(),
        Step::Write(b"data: {not json\n\n".to_vec()),
    ])
    .await;
    assert_eq!(f.code.as_str(), "TRANSPORT");
}

#[tokio::test]
async fn llm_04_idle_stream_is_timeout() {
    let mock = Mock::start(vec![vec![
        sse_head(),
        event(&text_delta("slow")),
        Step::Sleep(Duration::from_millis(1500)),
    ]]);
    let r = run(&mock, |c| c.timeout_ms = 300).await;
    let f = failure_of(&r.chunks).unwrap();
    assert_eq!(f.code.as_str(), "TIMEOUT");
    assert!(f.message.contains("300 ms"), "{}", f.message);
}

/// Issue 10 item 15: no response head is the first-byte deadline's, not the idle watchdog's
/// (set far longer here, so only the first-byte rule can end the wait).
#[tokio::test]
async fn llm_04_no_response_head_is_timeout() {
    let mock = Mock::start(vec![vec![Step::Sleep(Duration::from_millis(1500))]]);
    let r = run(&mock, |c| {
        c.first_byte_timeout_ms = 300;
        c.timeout_ms = 60_000;
    })
    .await;
    let f = failure_of(&r.chunks).unwrap();
    assert_eq!(f.code.as_str(), "TIMEOUT");
    assert!(
        f.message.contains("within 300 ms (first_byte_timeout_ms)"),
        "{}",
        f.message
    );
}

#[tokio::test]
async fn llm_04_empty_completion_is_empty_response() {
    let f = failure_for(sse(&[
        text_delta(""),
        finish_event("stop"),
        usage_event(5, 0),
    ]))
    .await;
    assert_eq!(f.code.as_str(), "EMPTY_RESPONSE");
}

#[tokio::test]
async fn llm_05_missing_credential_fails_before_any_request() {
    let mock = Mock::start(vec![sse(&[text_delta("never"), finish_event("stop")])]);
    let adapter = Adapter::new(config(&mock.base_url, "KEEL_TEST_NEVER_SET_KEY_REF")).unwrap();
    let e = adapter.check(&request("x").config).unwrap_err();
    assert_eq!(e.code, "CREDENTIAL_MISSING");
    assert!(
        e.message.contains("KEEL_TEST_NEVER_SET_KEY_REF is not set"),
        "{}",
        e.message
    );
    let r = adapter.generate(request("x")).await;
    assert_eq!(r.chunks.len(), 1);
    let f = failure_of(&r.chunks).unwrap();
    assert_eq!(f.code.as_str(), "CREDENTIAL_MISSING");
    assert!(
        f.message.contains("export KEEL_TEST_NEVER_SET_KEY_REF="),
        "{}",
        f.message
    );
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn llm_03_unsupported_reasoning_effort_is_refused_before_io() {
    set_key();
    let mock = Mock::start(vec![sse(&[text_delta("never"), finish_event("stop")])]);
    let adapter = Adapter::new(config(&mock.base_url, KEY_REF)).unwrap();
    let mut req = request("x");
    req.config.reasoning_effort = Some("ludicrous".into());
    assert_eq!(
        adapter.check(&req.config).unwrap_err().code,
        "UNSUPPORTED_REASONING_EFFORT"
    );
    let r = adapter.generate(req).await;
    assert_eq!(
        failure_of(&r.chunks).unwrap().code.as_str(),
        "UNSUPPORTED_REASONING_EFFORT"
    );
    assert!(mock.requests().is_empty());
}

/// The service, reached through its typed contract exactly as `keel.llm` reaches it.
fn client(adapter: Arc<Adapter>) -> LlmAdapterClient {
    let handle = ContractHandle::serve::<LlmAdapter, _>("llm-openai", Service(adapter));
    ContractClient::new(handle, "test").into()
}

/// The service entry point runs `generate` on the plugin's own runtime (`spawn_bridged`), awaited
/// here from a plain executor, as the kernel's runtime would.
#[test]
fn service_generate_runs_on_the_plugin_runtime() {
    set_key();
    let mock = Mock::start(vec![sse(&[text_delta("bridged"), finish_event("stop")])]);
    let adapter = Arc::new(Adapter::new(config(&mock.base_url, KEY_REF)).unwrap());
    let service = client(adapter);
    let r = futures::executor::block_on(service.generate(request("hi"))).unwrap();
    assert_eq!(
        r.chunks[0],
        StreamChunk::TextDelta {
            index: 0,
            text: "bridged".into()
        }
    );
    let check = futures::executor::block_on(service.check(CheckRequest {
        config: request("x").config,
        cwd: None,
    }));
    assert_eq!(check, Ok(()));
}

/// Issue 14 item 1: `limits` through the typed contract answers the row's window, without a
/// request to the server.
#[test]
fn service_limits_answer_the_row_window_without_io() {
    let mock = Mock::start(vec![]);
    let mut cfg = config(&mock.base_url, KEY_REF);
    cfg.context_window = Some(16_000);
    cfg.output_reserve = Some(1_000);
    let service = client(Arc::new(Adapter::new(cfg).unwrap()));
    let limits = futures::executor::block_on(service.limits(request("x").config)).unwrap();
    assert_eq!(
        (limits.context_window, limits.output_reserve),
        (Some(16_000), 1_000)
    );
    assert_eq!(limits.source, "config");
    assert!(mock.requests().is_empty());
}

/// LLM-06: dropping the service future (a cancelled model call) aborts the request on the
/// plugin runtime, and the provider sees the connection close at once.
#[test]
fn llm_06_dropping_the_call_closes_the_connection() {
    set_key();
    let mock = Mock::start(vec![vec![
        sse_head(),
        event(&text_delta("thinking")),
        Step::AwaitClose(Duration::from_secs(5)),
    ]]);
    let mut cfg = config(&mock.base_url, KEY_REF);
    cfg.timeout_ms = 10_000; // the watchdog must not be what closes it
    let adapter = Arc::new(Adapter::new(cfg).unwrap());
    let service = client(adapter);
    let call = Box::pin(service.generate(request("hi")));
    let started = std::time::Instant::now();
    futures::executor::block_on(async {
        let stop = Box::pin(futures_timer(Duration::from_millis(300)));
        match futures::future::select(call, stop).await {
            futures::future::Either::Left((r, _)) => panic!("the stalled call finished: {r:?}"),
            futures::future::Either::Right(((), call)) => drop(call),
        }
    });
    // Wait for the server thread to record the close (or its 5 s limit).
    while mock.closed.lock().unwrap().is_empty() {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(*mock.closed.lock().unwrap(), vec![true]);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

/// A timer that needs no runtime: a thread completes a oneshot.
fn futures_timer(d: Duration) -> impl std::future::Future<Output = ()> {
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    std::thread::spawn(move || {
        std::thread::sleep(d);
        let _ = tx.send(());
    });
    async move {
        let _ = rx.await;
    }
}
