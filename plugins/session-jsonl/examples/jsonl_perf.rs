//! Quick backend measurements, run by hand: `cargo run --release -p keel-plugin-session-jsonl --example jsonl_perf`.
//! Per-batch flush latency (one write + one fsync) and cold load of a 1M-event session.
//! `cargo xtask bench` owns the published numbers; these are the backend's own check.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    reason = "a measurement tool fails loudly"
)]

use std::io::Write as _;
use std::time::{Duration, Instant};

use keel_plugin_api::services::session::{LoadFormat, LoadStored};
use keel_plugin_session_jsonl::{JsonlOptions, JsonlStore};
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
    let s = JsonlStore::new(dir.path(), JsonlOptions::default());
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
        "jsonl flush (8-event batch, write+fsync): p50 {:?} p90 {:?} p99 {:?}",
        percentile(&times, 0.5),
        percentile(&times, 0.9),
        percentile(&times, 0.99)
    );
}

fn cold_load_of_a_million_events() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(out, "{}", header("big")).unwrap();
    let n = 1_000_000_u64;
    for seq in 0..n {
        let e = match seq % 8 {
            0 => event(seq, "turn/start", json!({ "turn": seq / 8 })),
            7 => event(seq, "turn/end", json!({ "reason": "done" })),
            _ => event(
                seq,
                "assistant/chunk",
                json!({ "text": "some streamed model output text", "index": seq % 8 }),
            ),
        };
        writeln!(out, "{e}").unwrap();
    }
    out.flush().unwrap();
    drop(out);
    let size = std::fs::metadata(&path).unwrap().len();
    // Best of 3 (the machine is shared); each run is a fresh store, the answer dropped after.
    let mut load = Duration::MAX;
    let mut encode = Duration::MAX;
    for _ in 0..3 {
        let s = JsonlStore::new(dir.path(), JsonlOptions::default());
        let t = Instant::now();
        let request = LoadStored {
            session_id: "big".into(),
            repair: true,
            format: LoadFormat::Events,
        };
        let answer = json!(Backend::load(&s, request).unwrap());
        load = load.min(t.elapsed());
        assert_eq!(answer["events"].as_array().unwrap().len() as u64, n);
        let t = Instant::now();
        let text = answer.to_string();
        encode = encode.min(t.elapsed());
        assert!(text.len() as u64 > size / 2);
    }
    println!(
        "jsonl cold load, {n} events ({} MB): load call (read, parse, check, answer) {load:?}; encoding the answer for the contract payload {encode:?} (best of 3)",
        size / 1_000_000
    );
}

/// Relative costs of the pieces of a load, single-threaded, on 200k lines (so that a shared
/// machine's load does not decide the comparison).
fn parse_cost_breakdown() {
    use keel_plugin_api::services::session::EventRecord;
    let lines: Vec<String> = (0..200_000_u64)
        .map(|seq| {
            event(
                seq,
                "assistant/chunk",
                json!({ "text": "some streamed model output text", "index": seq % 8 }),
            )
            .to_string()
        })
        .collect();
    let time = |what: &str, f: &dyn Fn() -> usize| {
        let mut best = Duration::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            assert_eq!(f(), lines.len());
            best = best.min(t.elapsed());
        }
        println!("{what}: {:?} per 1M lines", best * 5);
    };
    let each = |f: &dyn Fn(&str)| {
        lines.iter().for_each(|l| f(l));
        lines.len()
    };
    time("parse to EventRecord", &|| {
        each(&|l| {
            drop(std::hint::black_box(
                serde_json::from_str::<EventRecord>(l).unwrap(),
            ))
        })
    });
    time("parse to Value", &|| {
        each(&|l| {
            drop(std::hint::black_box(
                serde_json::from_str::<Value>(l).unwrap(),
            ))
        })
    });
    time("parse to EventRecord + to_value", &|| {
        each(&|l| {
            let e = serde_json::from_str::<EventRecord>(l).unwrap();
            drop(std::hint::black_box(serde_json::to_value(e).unwrap()));
        })
    });
    let values: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    time("serialize Values", &|| {
        values
            .iter()
            .for_each(|v| drop(std::hint::black_box(v.to_string())));
        values.len()
    });
}

/// Where a cold load's time goes: reading the file, then `scan` (split + parse + check).
fn cold_load_phases() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(out, "{}", header("big")).unwrap();
    for seq in 0..1_000_000_u64 {
        let e = event(
            seq,
            "assistant/chunk",
            json!({ "text": "some streamed model output text", "index": seq % 8 }),
        );
        writeln!(out, "{e}").unwrap();
    }
    out.flush().unwrap();
    drop(out);
    for _ in 0..2 {
        let t = Instant::now();
        let bytes = std::fs::read(&path).unwrap();
        let read = t.elapsed();
        let t = Instant::now();
        let scan = keel_plugin_session_jsonl::scan::scan(&path, "big", &bytes).unwrap();
        let parse = t.elapsed();
        let t = Instant::now();
        drop(scan);
        println!("read {read:?}, scan {parse:?}, drop {:?}", t.elapsed());
    }
}

/// Runs every measurement: `cargo run --release -p keel-plugin-session-jsonl --example jsonl_perf`.
fn main() {
    flush_latency_per_batch();
    cold_load_of_a_million_events();
    parse_cost_breakdown();
    cold_load_phases();
}
