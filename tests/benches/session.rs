//! Session benchmarks (ARCHITECTURE §12, issue 3): the session plugin's and the backends' Rust
//! APIs, in-process (each plugin crate is also an rlib). Run with `cargo xtask bench [--quick]`.
//!
//! 1. **Append throughput (write-behind).** `SessionLog::append_one` (validation, B15
//!    invariants, incremental projection) plus `Writer::push` (queue, no I/O) over 1M events of
//!    the agent loop's shape (turns, steps, 1–3 tool calls), with the background writer
//!    draining into an in-memory store. Event construction is done untimed in chunks.
//! 2. **Flush latency per backend.** One durable batch of one event (what a checkpoint flush
//!    writes after a step): `JsonlStore` (append + fsync) and `SqliteStore` (one WAL
//!    transaction, `synchronous = FULL`), next to a bare `write + fsync` on the same file system.
//! 3. **Cold load + recovery at 1M events.** A session of 1M events whose last turn is open
//!    (crashed after a `tool/call`), loaded by a fresh store instance with repair, passed
//!    through the `keel.session-store` contract the plugin uses, replayed (`SessionLog::replay`: validation,
//!    invariants, projection), closed (`recovery::closers`) and the closers committed — per
//!    phase. The page cache is warm (the file was just written); "cold" means no in-process
//!    state.
//! 4. **Finding and closing a crashed tail** (`recovery::closers`) at 10k and 1M events: O(tail).
//! 5. **Projection cost of the next request** at 10k and 1M events: appending one step's events
//!    (the incremental projection update) — must not grow with history; for reference also the
//!    shared walk of the projected messages and their deep copy, which are O(messages) by
//!    nature (a request carries the whole history).
//!
//! Prints a summary and writes `target/bench/session.json`. `--quick`: 100k events instead of
//! 1M and fewer repetitions. `--only cold-load`: only case 3, printed, no report written; `--only next-request`: likewise
//! only case 5. Under `cargo test --benches` (no `--bench` flag) it does nothing.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_plugin_api::sdk::{ContractClient, ContractHandle};
use keel_plugin_api::services::session::{
    AppendBatch, EventRecord, FORMAT_VERSION, HeaderKind, LoadFormat, LoadStored, SessionHeader,
    SessionStore, SessionStoreClient,
};
use keel_plugin_session::log::SessionLog;
use keel_plugin_session::recovery;
use keel_plugin_session::store::{BoxFut, MemStore, Timer};
use keel_plugin_session::validate::{EventTypes, NewEvent};
use keel_plugin_session::wire;
use keel_plugin_session::writer::Writer;
use keel_plugin_session_jsonl::{JsonlOptions, JsonlStore};
use keel_plugin_session_sqlite::SqliteStore;
use keel_session_store_kit::{Backend, Worker};
use keel_tests::bench::{Summary, machine, summarize};
use serde_json::{Value, json};

type Failure = String;

struct Settings {
    quick: bool,
    cold_load_only: bool,
    next_request_only: bool,
    appends: u64,
    big: u64,
    flushes: usize,
    load_reps: usize,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        println!(
            "session benchmarks: nothing to do outside `cargo bench`; run `cargo xtask bench`"
        );
        return ExitCode::SUCCESS;
    }
    let mut quick = false;
    let mut cold_load_only = false;
    let mut next_request_only = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--bench" => {}
            "--quick" => quick = true,
            "--only" => match it.next().map(String::as_str) {
                Some("cold-load") => cold_load_only = true,
                Some("next-request") => next_request_only = true,
                _ => {
                    eprintln!("session bench: `--only` takes `cold-load` or `next-request`");
                    return ExitCode::from(2);
                }
            },
            other => {
                eprintln!(
                    "session bench: unknown argument `{other}` \
                     (`--quick`, `--only cold-load|next-request`)"
                );
                return ExitCode::from(2);
            }
        }
    }
    let settings = if quick {
        Settings {
            quick,
            cold_load_only,
            next_request_only,
            appends: 100_000,
            big: 100_000,
            flushes: 30,
            load_reps: 2,
        }
    } else {
        Settings {
            quick,
            cold_load_only,
            next_request_only,
            appends: 1_000_000,
            big: 1_000_000,
            flushes: 200,
            load_reps: 3,
        }
    };
    match run(&settings) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("session bench: {e}");
            ExitCode::FAILURE
        }
    }
}

// ---- helpers ---------------------------------------------------------------------------------

/// The cargo target dir, from this executable's location (`target/release/deps/session-…`).
fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.ancestors().nth(3).map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("target"))
}

fn header(id: &str) -> SessionHeader {
    SessionHeader {
        kind: HeaderKind::Session,
        version: FORMAT_VERSION,
        id: id.to_owned(),
        created_at: 1_700_000_000_000,
        cwd: "/bench".to_owned(),
        parent_session: None,
        seed_length: None,
        parent_call_id: None,
        origin: None,
        delegation_depth: 0,
    }
}

fn types() -> Arc<EventTypes> {
    Arc::new(EventTypes::default())
}

/// The events of turn `t` in the agent loop's shape: a tool step with 1–3 calls, then a final
/// answer step. `open` stops after the first `tool/call` (a crash before its result).
fn turn_events(t: u64, open: bool) -> Vec<NewEvent> {
    let mut v = vec![
        NewEvent::new("turn/start", json!({"turn": t})),
        NewEvent::surface(
            "user/message",
            json!({"id": format!("u{t}"), "content": format!("please do task {t}")}),
        ),
    ];
    for step in 0..2u64 {
        v.push(NewEvent::new(
            "step/start",
            json!({"turn": t, "step": step}),
        ));
        let n = if step == 0 { 1 + t % 3 } else { 0 };
        let args = |i: u64| format!("{{\"path\":\"src/f{i}.rs\"}}");
        let calls: Vec<Value> = (0..n)
            .map(|i| json!({"id": format!("c{t}-{i}"), "name": "read_file", "arguments": args(i)}))
            .collect();
        let content = if n == 0 { "done" } else { "" };
        v.push(NewEvent::surface(
            "assistant/message",
            json!({"turn": t, "step": step,
                   "message": {"content": content, "tool_calls": calls}}),
        ));
        for i in 0..n {
            let id = format!("c{t}-{i}");
            v.push(NewEvent::new(
                "tool/call",
                json!({"turn": t, "step": step, "call_id": id,
                       "name": "read_file", "arguments": args(i)}),
            ));
            if open {
                return v;
            }
            v.push(NewEvent::surface(
                "tool/result",
                json!({"turn": t, "step": step, "call_id": id, "content": "fn main() {}\n"}),
            ));
        }
        v.push(NewEvent::new("step/end", json!({"turn": t, "step": step})));
    }
    v.push(NewEvent::new(
        "turn/end",
        json!({"turn": t, "reason": {"kind": "completed"}}),
    ));
    v
}

/// A log of at least `n` events of complete turns; with `open`, one more turn left open.
fn build_log(id: &str, n: u64, open: bool) -> Result<SessionLog, Failure> {
    let mut log = SessionLog::new(header(id), types()).map_err(|e| e.to_string())?;
    let mut t = 0;
    while log.len() < n {
        for ev in turn_events(t, false) {
            log.append_one(ev).map_err(|e| e.to_string())?;
        }
        t += 1;
    }
    if open {
        for ev in turn_events(t, true) {
            log.append_one(ev).map_err(|e| e.to_string())?;
        }
    }
    Ok(log)
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn sj(s: Summary) -> Value {
    json!({"median": round(s.median), "min": round(s.min), "max": round(s.max), "n": s.n})
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

struct TokioTimer(tokio::runtime::Handle);

impl Timer for TokioTimer {
    fn spawn(&self, task: BoxFut<()>) {
        self.0.spawn(task);
    }
    fn sleep(&self, d: Duration) -> BoxFut<()> {
        Box::pin(tokio::time::sleep(d))
    }
}

// ---- 1. append throughput ---------------------------------------------------------------------

fn appends(settings: &Settings) -> Result<Value, Failure> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    // `push` arms the batching window on this thread: it needs the runtime's timer context.
    let _context = rt.enter();
    let store = MemStore::new();
    let writer = Writer::new(
        "append",
        Some(header("append")),
        0,
        Arc::new(store.clone()),
        Arc::new(TokioTimer(rt.handle().clone())),
        Duration::from_millis(keel_plugin_session::writer::DEFAULT_DELAY_MS),
    );
    let mut log = SessionLog::new(header("append"), types()).map_err(|e| e.to_string())?;
    let (mut timed, mut t) = (Duration::ZERO, 0u64);
    while log.len() < settings.appends {
        // Build a chunk of ~10k events untimed, then append it event by event.
        let mut chunk = Vec::new();
        while chunk.len() < 10_000 {
            chunk.extend(turn_events(t, false));
            t += 1;
        }
        let started = Instant::now();
        for ev in chunk {
            let seq = log.append_one(ev).map_err(|e| e.to_string())?;
            writer.push(&log.events()[seq as usize..]);
        }
        timed += started.elapsed();
    }
    let drain = Instant::now();
    let mut durable = rt.block_on(writer.flush()).map_err(|e| e.to_string())?;
    let n = log.len();
    // A flush must drain everything pushed before it; if it came back short (a background
    // batch was in flight), say so and flush again so the numbers below stay meaningful.
    let short = durable != Some(n - 1);
    if short {
        eprintln!(
            "session bench: WARNING: flush returned durable seq {durable:?} with {n} events \
             pushed (barrier short); flushing again"
        );
        durable = rt.block_on(writer.flush()).map_err(|e| e.to_string())?;
    }
    let drain = drain.elapsed();
    let rate = n as f64 / timed.as_secs_f64();
    println!(
        "append (write-behind): {n} events in {:.0} ms = {:.0} events/s ({:.2} µs/event); \
         final drain {:.0} ms, {} background batches",
        ms(timed),
        rate,
        us(timed) / n as f64,
        ms(drain),
        store.append_calls()
    );
    if durable != Some(n - 1) {
        return Err(format!(
            "the writer drained to {durable:?}, expected {}",
            n - 1
        ));
    }
    Ok(json!({
        "events": n,
        "timed_ms": round(ms(timed)),
        "events_per_s": rate.round(),
        "us_per_event": round(us(timed) / n as f64),
        "final_drain_ms": round(ms(drain)),
        "background_batches": store.append_calls(),
        "first_flush_returned_short": short,
        "target_events_per_s": 500_000,
    }))
}

// ---- 2. flush latency -------------------------------------------------------------------------

/// A backend served through the real `keel.session-store` contract (its worker thread, the
/// payload encode and decode), as the session plugin reaches it.
trait Call {
    /// The typed client.
    fn client(&self) -> &SessionStoreClient;
    /// The backend's own typed load without repair; returns the number of events.
    fn typed_load(&self, id: &str) -> Result<usize, Failure>;
}

struct Served<B> {
    backend: Arc<B>,
    client: SessionStoreClient,
}

fn serve<B: Backend>(name: &str, backend: B) -> Result<Served<B>, Failure> {
    let backend = Arc::new(backend);
    let worker = Worker::start(name, Arc::clone(&backend)).map_err(|e| e.to_string())?;
    let handle = ContractHandle::serve::<SessionStore, _>(name, worker);
    Ok(Served {
        backend,
        client: ContractClient::new(handle, "bench").into(),
    })
}

fn wait<T>(
    f: impl std::future::Future<Output = keel_plugin_api::sdk::Result<T>>,
) -> Result<T, Failure> {
    futures::executor::block_on(f).map_err(|e| format!("[{}] {}", e.code, e.message))
}

impl Call for Served<JsonlStore> {
    fn client(&self) -> &SessionStoreClient {
        &self.client
    }
    fn typed_load(&self, id: &str) -> Result<usize, Failure> {
        let loaded = JsonlStore::load(&self.backend, id, false).map_err(|e| e.to_string())?;
        Ok(loaded.count as usize)
    }
}

impl Call for Served<SqliteStore> {
    fn client(&self) -> &SessionStoreClient {
        &self.client
    }
    fn typed_load(&self, id: &str) -> Result<usize, Failure> {
        let loaded = SqliteStore::load(&self.backend, id, false, LoadFormat::Jsonl)
            .map_err(|e| e.to_string())?;
        Ok(loaded.events.len() as usize)
    }
}

/// Stores `events` as session `id` in batches of `batch`.
fn store_log(
    store: &dyn Call,
    id: &str,
    events: &[Arc<EventRecord>],
    batch: usize,
) -> Result<(), Failure> {
    for (i, chunk) in events.chunks(batch).enumerate() {
        let request = AppendBatch {
            session_id: id.to_owned(),
            header: (i == 0).then(|| header(id)),
            events: chunk.to_vec(),
            expected_next_seq: (i * batch) as u64,
        };
        wait(store.client().append(request))?;
    }
    Ok(())
}

fn flush_latency(store: &dyn Call, settings: &Settings) -> Result<Summary, Failure> {
    let log = build_log("flush", settings.flushes as u64 + 20, false)?;
    let events = log.events();
    store_log(store, "flush", &events[..1], 1)?;
    let mut samples = Vec::with_capacity(settings.flushes);
    for (i, ev) in events[1..=settings.flushes].iter().enumerate() {
        let request = AppendBatch {
            session_id: "flush".into(),
            header: None,
            events: vec![Arc::clone(ev)],
            expected_next_seq: i as u64 + 1,
        };
        let started = Instant::now();
        wait(store.client().append(request))?;
        samples.push(us(started.elapsed()));
    }
    Ok(summarize(samples))
}

fn raw_fsync(dir: &Path, n: usize) -> Result<Summary, Failure> {
    use std::io::Write as _;
    let mut f = std::fs::File::create(dir.join("raw-fsync")).map_err(|e| e.to_string())?;
    let line = [b'x'; 300];
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        f.write_all(&line)
            .and_then(|()| f.sync_all())
            .map_err(|e| e.to_string())?;
        samples.push(us(started.elapsed()));
    }
    Ok(summarize(samples))
}

// ---- 3. cold load + recovery ------------------------------------------------------------------

/// One cold load with repair through the contract seam, replay, closers and their commit.
fn load_and_recover(store: &dyn Call, id: &str) -> Result<(Value, usize), Failure> {
    // For reference: the backend's own typed load (no answer across the seam), without repair.
    let r0 = Instant::now();
    let native = store.typed_load(id)?;
    let native_ms = ms(r0.elapsed());
    // For reference: the `events` form of the same answer (what callers that do not opt in
    // get), through the seam into typed records.
    let load = |repair, format| LoadStored {
        session_id: id.to_owned(),
        repair,
        format,
    };
    let a0 = Instant::now();
    let direct = wait(store.client().load(load(false, LoadFormat::Events)))?;
    let direct_ms = ms(a0.elapsed());
    let direct_len = direct.events.as_ref().map_or(0, Vec::len);
    drop(direct);

    let t0 = Instant::now();
    // The plugin's seam: the typed answer crosses the contract as one payload (the JSONL
    // backend names a byte range, SQLite sends JSON lines), and the core decodes it
    // (`wire::load_answer`: the lines straight into typed records).
    let loaded = wait(store.client().load(load(true, LoadFormat::JsonlFile)))?;
    let t1 = Instant::now();
    let decoded = wire::load_answer(loaded).map_err(|e| e.to_string())?;
    let (header, events) = (decoded.header, decoded.events);
    let t2 = Instant::now();
    let n = events.len();
    let mut log = SessionLog::replay(header, events, types()).map_err(|e| e.to_string())?;
    let t3 = Instant::now();
    let stored: Vec<EventRecord> = log.events().iter().map(|e| (**e).clone()).collect();
    let t3b = Instant::now();
    let closers = recovery::closers(&stored);
    let t4 = Instant::now();
    let count = closers.len();
    let committed = log.commit_records(closers).map_err(|e| e.to_string())?;
    let request = AppendBatch {
        session_id: id.to_owned(),
        header: None,
        events: committed.to_vec(),
        expected_next_seq: n as u64,
    };
    wait(store.client().append(request))?;
    let t5 = Instant::now();

    if direct_len != n || native != n {
        return Err(format!("{n} events via the seam, {native} natively"));
    }
    let phases = json!({
        "backend_load_and_seam_ms": round(ms(t1 - t0)),
        "seam_decode_records_ms": round(ms(t2 - t1)),
        "replay_ms": round(ms(t3 - t2)),
        "closers_ms": round(ms(t4 - t3b)),
        "commit_closers_ms": round(ms(t5 - t4)),
        "total_ms": round(ms((t5 - t0) - (t3b - t3))),
        "closers": count,
        "reference_backend_typed_load_ms": round(native_ms),
        "reference_events_array_typed_parse_ms": round(direct_ms),
    });
    Ok((phases, n))
}

fn cold_load(
    name: &str,
    dir: &Path,
    open: impl Fn(&Path) -> Result<Box<dyn Call>, Failure>,
    log: &SessionLog,
    settings: &Settings,
) -> Result<Value, Failure> {
    let pristine = dir.join(format!("{name}-pristine"));
    {
        let store = open(&pristine)?;
        store_log(&*store, "big", log.events(), 10_000)?;
    }
    let bytes: u64 = files(&pristine)
        .iter()
        .filter_map(|p| p.metadata().ok())
        .map(|m| m.len())
        .sum();
    let mut runs = Vec::new();
    let mut totals = Vec::new();
    for rep in 0..settings.load_reps {
        let root = dir.join(format!("{name}-rep{rep}"));
        copy_dir(&pristine, &root)?;
        let store = open(&root)?;
        let (phases, n) = load_and_recover(&*store, "big")?;
        if n as u64 != log.len() {
            return Err(format!("{name}: loaded {n} events, stored {}", log.len()));
        }
        totals.push(phases["total_ms"].as_f64().unwrap_or(0.0));
        runs.push(phases);
        drop(store);
        let _ = std::fs::remove_dir_all(&root);
    }
    let total = summarize(totals);
    println!(
        "cold load + recovery, {name}: {} events ({:.0} MiB) in {:.0} ms median (phases of the \
         first run: {})",
        log.len(),
        bytes as f64 / 1_048_576.0,
        total.median,
        runs[0]
    );
    Ok(json!({"events": log.len(), "bytes": bytes, "total_ms": sj(total), "runs": runs}))
}

fn files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default()
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), Failure> {
    std::fs::create_dir_all(to).map_err(|e| e.to_string())?;
    for f in files(from) {
        let name = f.file_name().ok_or("no file name")?;
        if name.to_string_lossy().ends_with(".lock") {
            continue;
        }
        let dest = to.join(name);
        std::fs::copy(&f, &dest).map_err(|e| format!("copy {}: {e}", f.display()))?;
        // A session being loaded was written long ago: flush the copy now, so the repair's
        // fsync in the timed load does not pay for writing back this fresh copy.
        std::fs::File::open(&dest)
            .and_then(|file| file.sync_all())
            .map_err(|e| format!("sync {}: {e}", dest.display()))?;
    }
    Ok(())
}

// ---- 4/5. closing the tail and the next request's projection -----------------------------------

fn closers_cost(log: &SessionLog, reps: usize) -> Result<Summary, Failure> {
    let events: Vec<EventRecord> = log.events().iter().map(|e| (**e).clone()).collect();
    let mut samples = Vec::new();
    for _ in 0..reps {
        let started = Instant::now();
        let c = recovery::closers(&events);
        samples.push(us(started.elapsed()));
        if c.is_empty() {
            return Err("the open log got no closers".into());
        }
    }
    Ok(summarize(samples))
}

fn next_request(log: &mut SessionLog, reps: usize) -> Result<Value, Failure> {
    let first = log
        .events()
        .iter()
        .rev()
        .find(|e| e.kind == "turn/end")
        .and_then(|e| e.data["turn"].as_u64())
        .map_or(0, |t| t + 1);
    let (mut step_us, mut walk_us, mut copy_us) = (Vec::new(), Vec::new(), Vec::new());
    for t in first..first + reps as u64 {
        let evs = turn_events(t, false);
        let n = evs.len() as f64;
        let started = Instant::now();
        for ev in evs {
            log.append_one(ev).map_err(|e| e.to_string())?;
        }
        step_us.push(us(started.elapsed()) / n);
        let started = Instant::now();
        let shared = log.projection().shared().map_err(|e| e.to_string())?;
        walk_us.push(us(started.elapsed()));
        drop(shared);
        if copy_us.len() < 5 {
            let started = Instant::now();
            let owned = log.messages();
            copy_us.push(us(started.elapsed()));
            drop(owned);
        }
    }
    Ok(json!({
        "events": log.len(),
        "messages": log.projection().len(),
        "append_with_projection_us_per_event": sj(summarize(step_us)),
        "shared_walk_us": sj(summarize(walk_us)),
        "deep_copy_us": sj(summarize(copy_us)),
    }))
}

fn next_requests(settings: &Settings) -> Result<Vec<Value>, Failure> {
    let mut projections = Vec::new();
    for n in [10_000, settings.big] {
        let mut log = build_log("proj", n, false)?;
        let r = next_request(&mut log, 200)?;
        println!(
            "next request at {} events: {} µs/event appended (projection update, median); \
                 shared walk of {} messages {} µs; deep copy {} µs",
            n,
            r["append_with_projection_us_per_event"]["median"],
            r["messages"],
            r["shared_walk_us"]["median"],
            r["deep_copy_us"]["median"]
        );
        projections.push(r);
    }
    Ok(projections)
}

// ---- the whole run ---------------------------------------------------------------------------

fn open_jsonl(root: &Path) -> Result<Box<dyn Call>, Failure> {
    let store = JsonlStore::new(root, JsonlOptions::default());
    Ok(Box::new(serve("session-jsonl", store)?))
}

fn open_sqlite(root: &Path) -> Result<Box<dyn Call>, Failure> {
    Ok(Box::new(serve("session-sqlite", SqliteStore::new(root))?))
}

fn run(settings: &Settings) -> Result<(), Failure> {
    let out_dir = target_dir().join("bench");
    std::fs::create_dir_all(&out_dir).map_err(|e| e.to_string())?;
    let tmp = tempfile::Builder::new()
        .prefix("session-bench-")
        .tempdir_in(&out_dir)
        .map_err(|e| e.to_string())?;
    eprintln!(
        "session bench: {} (scratch {})",
        if settings.quick { "quick" } else { "full" },
        tmp.path().display()
    );

    if settings.cold_load_only {
        let big = build_log("big", settings.big, true)?;
        for (name, open) in [
            (
                "jsonl",
                open_jsonl as fn(&Path) -> Result<Box<dyn Call>, Failure>,
            ),
            ("sqlite", open_sqlite),
        ] {
            cold_load(name, tmp.path(), open, &big, settings)?;
        }
        return Ok(());
    }
    if settings.next_request_only {
        next_requests(settings)?;
        return Ok(());
    }
    let append = appends(settings)?;

    let fsync = raw_fsync(tmp.path(), settings.flushes)?;
    let jsonl = flush_latency(&*open_jsonl(&tmp.path().join("flush-jsonl"))?, settings)?;
    let sqlite = flush_latency(&*open_sqlite(&tmp.path().join("flush-sqlite"))?, settings)?;
    println!(
        "flush latency (one event, durable): jsonl {:.0} µs, sqlite {:.0} µs median; \
         bare write+fsync {:.0} µs",
        jsonl.median, sqlite.median, fsync.median
    );

    let big = build_log("big", settings.big, true)?;
    let jsonl_load = cold_load("jsonl", tmp.path(), open_jsonl, &big, settings)?;
    let sqlite_load = cold_load("sqlite", tmp.path(), open_sqlite, &big, settings)?;

    let small = build_log("small", 10_000, true)?;
    let close_small = closers_cost(&small, 50)?;
    let close_big = closers_cost(&big, 50)?;
    println!(
        "closing a crashed tail: {:.1} µs at {} events, {:.1} µs at {} events (median)",
        close_small.median,
        small.len(),
        close_big.median,
        big.len()
    );
    drop(big);

    let projections = next_requests(settings)?;

    let report = json!({
        "machine": machine(),
        "quick": settings.quick,
        "append_write_behind": append,
        "flush_latency_us": {"jsonl": sj(jsonl), "sqlite": sj(sqlite), "bare_fsync": sj(fsync)},
        "cold_load_recovery": {"jsonl": jsonl_load, "sqlite": sqlite_load, "target_jsonl_ms": 2000},
        "close_crashed_tail_us": {
            "small": {"events": small.len(), "us": sj(close_small)},
            "big": {"events": settings.big, "us": sj(close_big)},
        },
        "next_request_projection": projections,
    });
    let path = out_dir.join("session.json");
    let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(&path, text + "\n").map_err(|e| format!("write {}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}
