//! Issue 25 item 2: the client is built off the row's activation, and a request that comes
//! before it was built — or while the background build runs — still reaches the server, once.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;

use keel_plugin_api::sdk::Frozen;
use keel_plugin_api::services::llm::LlmRequest;
use serde_json::json;

use super::Adapter;
use crate::credential::Resolver;

/// Serves `n` connections with a 400 (the adapter's failure path is enough: the point is
/// that the request arrived) and sends each request line to the receiver.
fn server(n: usize) -> (String, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for _ in 0..n {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let mut length = 0;
            loop {
                let mut header = String::new();
                reader.read_line(&mut header).unwrap();
                if header.trim().is_empty() {
                    break;
                }
                if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let _ = tx.send(line.trim().to_owned());
            let mut stream = reader.into_inner();
            let _ = stream.write_all(
                b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
            );
        }
    });
    (url, rx)
}

fn adapter(base_url: &str) -> Adapter {
    // `PATH` is set in every test environment: a key without touching the environment.
    let config = serde_json::from_value(json!({
        "base_url": base_url,
        "model": "claude-test",
        "api_key_ref": "PATH",
    }))
    .unwrap();
    Adapter::new(config, Resolver::env_only("llm-anthropic")).unwrap()
}

fn request() -> LlmRequest {
    LlmRequest {
        session_id: None,
        config: serde_json::from_value(json!({"provider": "anthropic", "model": "claude-test"}))
            .unwrap(),
        system: None,
        messages: vec![Frozen::freeze(&json!({"role": "user", "content": "hi"})).unwrap()],
        tools: Vec::new(),
        stream_id: None,
    }
}

#[tokio::test]
async fn a_request_before_the_client_was_built_builds_it_and_reaches_the_server() {
    let (url, seen) = server(1);
    let adapter = adapter(&url);
    assert!(
        !adapter.client_built(),
        "Adapter::new must not build the client"
    );
    let _ = adapter.generate(request()).await;
    assert_eq!(seen.try_recv().unwrap(), "POST /v1/messages HTTP/1.1");
    assert!(adapter.client_built());
}

#[tokio::test]
async fn a_request_racing_the_background_build_reaches_the_server_once() {
    for _ in 0..10 {
        let (url, seen) = server(1);
        let adapter = adapter(&url);
        adapter.prepare_client();
        let _ = adapter.generate(request()).await;
        assert_eq!(seen.try_recv().unwrap(), "POST /v1/messages HTTP/1.1");
        assert!(seen.try_recv().is_err());
    }
}
