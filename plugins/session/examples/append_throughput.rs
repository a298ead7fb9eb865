//! Append throughput of the session core, in process (the ≥ 500k appends/s target of issue 3).
//!
//! `cargo run --release -p keel-plugin-session --example append_throughput [N]`
//!
//! Measures `SessionLog::append_one` (validation + seq/time + invariants + projection) for
//! small plugin events, small user messages and a realistic turn mix, and
//! `SessionManager::append` (the same plus the write-behind hand-off; the window never fires,
//! so no I/O is measured — SES-04).

use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_plugin_api::services::session::{FORMAT_VERSION, HeaderKind, SessionHeader};
use keel_plugin_session::core_events::{self as ce, ToolCall};
use keel_plugin_session::log::SessionLog;
use keel_plugin_session::sessions::{Config, CreateArgs, SessionManager};
use keel_plugin_session::store::{BoxFut, MemStore, Timer};
use keel_plugin_session::validate::NewEvent;
use serde_json::json;

struct NeverTimer;
impl Timer for NeverTimer {
    fn spawn(&self, _task: BoxFut<()>) {}
    fn sleep(&self, _d: Duration) -> BoxFut<()> {
        Box::pin(std::future::pending())
    }
}

fn header() -> SessionHeader {
    SessionHeader {
        kind: HeaderKind::Session,
        version: FORMAT_VERSION,
        id: "bench".into(),
        created_at: 0,
        cwd: "/".into(),
        parent_session: None,
        seed_length: None,
        parent_call_id: None,
        origin: None,
        delegation_depth: 0,
    }
}

fn report(name: &str, n: usize, took: Duration) {
    let rate = n as f64 / took.as_secs_f64();
    println!(
        "{name:<40} {n:>9} events  {:>8.1} ms  {:>10.0} events/s  {:>6.0} ns/event",
        took.as_secs_f64() * 1e3,
        rate,
        took.as_nanos() as f64 / n as f64
    );
}

fn turn_mix(turn: u64) -> Vec<NewEvent> {
    let call = ToolCall {
        id: format!("c{turn}"),
        name: "read".into(),
        arguments: "{\"path\":\"a.txt\"}".into(),
    };
    vec![
        ce::user_message(&format!("u{turn}"), "please read a.txt"),
        ce::turn_start(turn),
        ce::step_start(turn, 0),
        ce::assistant_chunk(turn, 0, json!({"text": "ok"})),
        ce::assistant_message(turn, 0, "ok", std::slice::from_ref(&call)),
        ce::tool_call(turn, 0, &call),
        ce::tool_result(turn, 0, &call.id, "contents"),
        ce::step_end(turn, 0),
        ce::turn_end(turn, "completed"),
    ]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);

    let mut log = SessionLog::new(header(), Arc::default())?;
    let batch: Vec<NewEvent> = (0..n)
        .map(|i| NewEvent::new("bench/tick", json!({ "i": i })).ignorable())
        .collect();
    let t = Instant::now();
    for ev in batch {
        log.append_one(ev)?;
    }
    report("SessionLog::append_one plugin event", n, t.elapsed());

    let mut log = SessionLog::new(header(), Arc::default())?;
    let batch: Vec<NewEvent> = (0..n)
        .map(|i| ce::user_message("u", format!("message {i}")))
        .collect();
    let t = Instant::now();
    for ev in batch {
        log.append_one(ev)?;
    }
    report("SessionLog::append_one user/message", n, t.elapsed());

    let mut log = SessionLog::new(header(), Arc::default())?;
    let turns = (n / 9) as u64;
    let batches: Vec<Vec<NewEvent>> = (0..turns).map(turn_mix).collect();
    let t = Instant::now();
    for b in batches {
        for ev in b {
            log.append_one(ev)?;
        }
    }
    report(
        "SessionLog::append_one turn mix",
        turns as usize * 9,
        t.elapsed(),
    );
    let t = Instant::now();
    let shared = log.projection().shared()?;
    report(
        "  shared() first read (renders, freezes once)",
        shared.len(),
        t.elapsed(),
    );
    let t = Instant::now();
    let shared = log.projection().shared()?;
    report(
        "  shared() next read (refcount clones only)",
        shared.len(),
        t.elapsed(),
    );
    let t = Instant::now();
    let msgs = log.messages();
    report("  messages() (owned deep copies)", msgs.len(), t.elapsed());
    let t = Instant::now();
    for ev in turn_mix(turns) {
        log.append_one(ev)?;
    }
    report("  one more turn (incremental update)", 9, t.elapsed());

    let mgr = SessionManager::new(
        Arc::new(MemStore::new()),
        Arc::new(NeverTimer),
        &Config::default(),
    );
    let id = futures::executor::block_on(mgr.create(CreateArgs {
        cwd: "/".into(),
        id: Some("bench".into()),
        ..CreateArgs::default()
    }))?
    .id;
    let batch: Vec<NewEvent> = (0..n)
        .map(|i| NewEvent::new("bench/tick", json!({ "i": i })).ignorable())
        .collect();
    let t = Instant::now();
    for ev in batch {
        mgr.append(&id, vec![ev], |_| {})?;
    }
    report("SessionManager::append (+write-behind)", n, t.elapsed());
    Ok(())
}
