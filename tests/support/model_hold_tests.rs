//! Unit tests of the held stream (issue 26 item 1), with a raw `TcpStream` client that reads
//! the answer as it arrives: the first piece is readable while the server holds, nothing more
//! comes until the release, then the rest; whole streams are chunked, faults close-delimited.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::*;

const CHAT: &str = "/v1/chat/completions";
const MESSAGES: &str = "/v1/messages";

/// A connection that sent one request and reads its answer bit by bit.
struct Reader {
    s: TcpStream,
    got: Vec<u8>,
}

impl Reader {
    fn post(server: &ModelServer, path: &str) -> Reader {
        let body = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
        let mut s = TcpStream::connect(server.addr()).expect("connect");
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
             Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).expect("write");
        Reader { s, got: Vec::new() }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.got).into_owned()
    }

    /// Reads until the answer contains `needle`; panics after 10 s.
    fn until(&mut self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        self.s
            .set_read_timeout(Some(Duration::from_millis(50)))
            .expect("timeout");
        while !self.text().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "no {needle:?} in {}",
                self.text()
            );
            let _ = self.read_some();
        }
    }

    /// One read (with the socket's timeout); the bytes it got.
    fn read_some(&mut self) -> usize {
        let mut buf = [0u8; 4096];
        match self.s.read(&mut buf) {
            Ok(n) => {
                self.got.extend_from_slice(&buf[..n]);
                n
            }
            Err(_) => 0,
        }
    }

    /// Reads for `d` and returns how many bytes came.
    fn quiet_for(&mut self, d: Duration) -> usize {
        self.s.set_read_timeout(Some(d)).expect("timeout");
        self.read_some()
    }

    fn read_to_end(mut self) -> String {
        self.s
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let _ = self.s.read_to_end(&mut self.got);
        self.text()
    }
}

/// The head's lowercase header lines and the body, de-chunked when the head says chunked.
fn parse(answer: &str) -> (String, String) {
    let (head, body) = answer.split_once("\r\n\r\n").expect("head and body");
    let head = head.to_ascii_lowercase();
    if !head.contains("transfer-encoding: chunked") {
        return (head, body.to_owned());
    }
    let mut rest = body;
    let mut out = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n").expect("chunk size line");
        let n = usize::from_str_radix(size.trim(), 16).expect("hex chunk size");
        if n == 0 {
            assert_eq!(after, "\r\n", "the last-chunk ends the body");
            return (head, out);
        }
        out.push_str(&after[..n]);
        rest = after[n..].strip_prefix("\r\n").expect("chunk CRLF");
    }
}

#[test]
fn an_openai_stream_sends_its_first_piece_then_waits_for_the_release() {
    let (reply, hold) = Reply::text_held("Hello, world! How are you?");
    let server = ModelServer::start(vec![reply]);
    let mut r = Reader::post(&server, CHAT);
    let reached = hold.wait_reached(Duration::from_secs(10));
    let first = &split_pieces("Hello, world! How are you?", 3)[0];
    r.until(&format!(r#""content":"{first}""#));
    assert!(reached <= Instant::now());
    assert_eq!(r.quiet_for(Duration::from_millis(200)), 0, "{}", r.text());
    assert!(!r.text().contains("[DONE]"));
    hold.release();
    let (head, body) = parse(&r.read_to_end());
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert!(!head.contains("content-length"), "{head}");
    let content: String = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(content, "Hello, world! How are you?");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
}

#[test]
fn an_anthropic_stream_holds_after_its_first_text_delta() {
    let hold = Hold::new();
    let server = ModelServer::start(vec![Reply::text("one two three").held(&hold, 1)]);
    let mut r = Reader::post(&server, MESSAGES);
    hold.wait_reached(Duration::from_secs(10));
    r.until("text_delta");
    assert_eq!(r.text().matches("text_delta").count(), 1, "{}", r.text());
    assert_eq!(r.quiet_for(Duration::from_millis(200)), 0);
    hold.release();
    let (head, body) = parse(&r.read_to_end());
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert_eq!(body.matches("text_delta").count(), 3, "{body}");
    assert!(
        body.ends_with("data: {\"type\":\"message_stop\"}\n\n"),
        "{body}"
    );
}

#[test]
fn a_held_fault_is_close_delimited_and_ends_where_the_fault_does() {
    let hold = Hold::new();
    let server = ModelServer::start(vec![Reply::disconnect_mid_stream().held(&hold, 1)]);
    let mut r = Reader::post(&server, CHAT);
    hold.wait_reached(Duration::from_secs(10));
    r.until("partial ");
    assert!(!r.text().contains("answer"));
    hold.release();
    let (head, body) = parse(&r.read_to_end());
    assert!(head.contains("connection: close"), "{head}");
    assert!(
        !head.contains("chunked") && !head.contains("content-length"),
        "{head}"
    );
    assert!(
        body.contains("\"answer\"") && !body.contains("[DONE]"),
        "{body}"
    );
}

#[test]
fn a_released_hold_does_not_stop_the_stream_and_a_chunked_one_keeps_the_connection() {
    let hold = Hold::new();
    hold.release();
    let server = ModelServer::start(vec![Reply::text("abc").held(&hold, 1), Reply::text("next")]);
    let body = r#"{"stream":true}"#;
    let mut s = TcpStream::connect(server.addr()).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let req = format!(
        "POST {CHAT} HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("write");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).ends_with("0\r\n\r\n") {
        let n = s.read(&mut buf).expect("read");
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    let first = String::from_utf8_lossy(&got).to_ascii_lowercase();
    assert!(first.contains("connection: keep-alive"), "{first}");
    // The same connection serves the next reply.
    s.write_all(req.as_bytes()).expect("write again");
    let mut again = Vec::new();
    while !String::from_utf8_lossy(&again).contains("[DONE]") {
        let n = s.read(&mut buf).expect("read again");
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&again));
        again.extend_from_slice(&buf[..n]);
    }
    assert!(hold.reached().is_some());
    assert_eq!(server.consumed(), 2);
}

#[test]
fn the_hold_point_counts_text_and_reasoning_pieces() {
    let openai = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n\
                  data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"r\"}}]}\n\n\
                  data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n\
                  data: [DONE]\n\n";
    let b = openai.as_bytes();
    assert_eq!(hold::hold_point(b, 0), 0);
    let one = hold::hold_point(b, 1);
    assert!(
        openai[..one].ends_with("\"r\"}}]}\n\n"),
        "{}",
        &openai[..one]
    );
    let two = hold::hold_point(b, 2);
    assert!(openai[..two].ends_with("\"a\"}}]}\n\n"));
    assert_eq!(hold::hold_point(b, 3), b.len() - 1);
    let anthropic = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\
                     \"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"s\"}}\n\n\
                     event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\
                     \"index\":1,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"t\"}}\n\n";
    assert_eq!(hold::hold_point(anthropic.as_bytes(), 1), anthropic.len());
}
