//! Quick backend measurements, run by hand: `cargo run --release -p keel-plugin-session-sqlite --example sqlite_perf`.
//! Per-batch flush latency (one write + one fsync) and cold load of a 1M-event session.
//! `cargo xtask bench` owns the published numbers; these are the backend's own check.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    reason = "a measurement tool fails loudly"
)]

use std::time::{Duration, Instant};

use keel_plugin_session_sqlite::SqliteStore;
use keel_plugin_session_sqlite::args::LoadFormat;
use keel_session_contract::fixtures::{event, header, turn};
use keel_session_store_kit::Backend;
use serde_json::{Value, json};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

fn flush_latency_per_batch() {
    let dir = tempfile::Builder::new()
        .tempdir_in(std::env::var("PERF_DIR").unwrap_or("/tmp".into()))
        .unwrap();
    let s = SqliteStore::new(dir.path());
    let first = json!({ "session_id": "p", "header": header("p"), "events": turn(0), "expected_next_seq": 0 });
    Backend::append(&s, serde_json::from_value(first).unwrap()).unwrap();
    let mut times = Vec::new();
    for i in 0..500_u64 {
        let seq0 = 8 + i * 8;
        let args = json!({ "session_id": "p", "events": turn(seq0), "expected_next_seq": seq0 });
        let t = Instant::now();
        Backend::append(&s, serde_json::from_value(args).unwrap()).unwrap();
        times.push(t.elapsed());
    }
    times.sort();
    println!(
        "sqlite flush (8-event batch, one transaction): p50 {:?} p90 {:?} p99 {:?}",
        percentile(&times, 0.5),
        percentile(&times, 0.9),
        percentile(&times, 0.99)
    );
}

fn cold_load_of_a_million_events() {
    let dir = tempfile::tempdir().unwrap();
    let n = 1_000_000_u64;
    {
        let s = SqliteStore::new(dir.path());
        let mut args = json!({ "session_id": "big", "header": header("big"), "events": [], "expected_next_seq": 0 });
        Backend::append(&s, serde_json::from_value(args.clone()).unwrap()).unwrap();
        args.as_object_mut().unwrap().remove("header");
        for chunk in 0..(n / 10_000) {
            let events: Vec<Value> = (chunk * 10_000..(chunk + 1) * 10_000)
                .map(|seq| match seq % 8 {
                    0 => event(seq, "turn/start", json!({ "turn": seq / 8 })),
                    7 => event(seq, "turn/end", json!({ "reason": "done" })),
                    _ => event(
                        seq,
                        "assistant/chunk",
                        json!({ "text": "some streamed model output text", "index": seq % 8 }),
                    ),
                })
                .collect();
            args["events"] = json!(events);
            args["expected_next_seq"] = json!(chunk * 10_000);
            Backend::append(&s, serde_json::from_value(args.clone()).unwrap()).unwrap();
        }
    }
    let s = SqliteStore::new(dir.path());
    let t = Instant::now();
    let loaded = s.load("big", true, LoadFormat::Jsonl).unwrap();
    let typed = t.elapsed();
    assert_eq!(loaded.events.len() as u64, n);
    println!("sqlite cold load, {n} events: read+validate {typed:?}");
}

/// Runs every measurement: `cargo run --release -p keel-plugin-session-sqlite --example sqlite_perf`.
fn main() {
    flush_latency_per_batch();
    cold_load_of_a_million_events();
}
