//! Benchmark plugin (driver): provides `keel.driver` and, on `run`, executes the benchmark the
//! prompt names, printing one JSON line per case on stdout.
//!
//! Prompts:
//! - `ready` — return at once (boot-to-ready runs: the harness times the kernel, not this).
//! - `dispatch:ITERS:LISTENERS[:REPS[:CASES]]` — for each mode (sync waterfall, async waterfall, emit,
//!   parallel, and the decision waterfalls `decision-json`/`decision-typed` of issue 24 item 2,
//!   whose in-process side is the same encode and reads without dispatch) time ITERS events (ITERS/10 for the async modes) dispatched
//!   1. **across the ABI**: this image → kernel → the `bench-listener` image (LISTENERS
//!      listeners, registered by a row of that plugin) → kernel → the terminal back in this
//!      image; and
//!   2. **in-process**: the same listener bodies (`keel_bench_api::{bump, observe}`) as boxed
//!      Rust closures in this image — a `Vec<Box<dyn Fn…>>` chain with a `next` closure for the
//!      sync waterfall, boxed futures for the async waterfall, `join_all` for parallel.
//!
//!   Each repetition times both paths (alternating which goes first) after a warm-up; the
//!   reported value is the median over REPS repetitions, with min and max. LISTENERS must match
//!   what the profile registered: it is checked before timing through the waterfall result.
//!   CASES (e.g. `sync-waterfall+emit`) limits the run to some modes, for profiling.
//!
//! Output per case: `{"case","listeners","events","reps","abi_ns_per_event",
//! "inproc_ns_per_event","abi_ns_per_hop","inproc_ns_per_hop","abi_min","abi_max",
//! "inproc_min","inproc_max"}`; a failure prints `{"case","error"}` and exits 1.

use std::future::Future;
use std::hint::black_box;
use std::io::Write as _;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use keel_bench_api::{
    BenchAsyncWaterfall, BenchDecision, BenchDecisionJson, BenchDecisionTyped, BenchEmit,
    BenchParallel, BenchWaterfall, ChatRequest, bump, observe, read_json_decision,
    read_typed_decision,
};
use keel_plugin_api::events::{Json, Typed};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::driver::{
    Driver, DriverInterrupt, DriverInvocation, DriverOutcome, DriverProvider,
};
use serde_json::{Value, json};

keel_plugin_api::error_codes! {
    /// This test plugin's own code (a plugin declares its codes like any other).
    enum BenchCode in "bench" {
        /// The fixture failed on purpose.
        Bench = "BENCH", by "this test plugin", retry Never;
    }
}

type BoxFut<T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'static>>;

fn print(line: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn fail(what: impl std::fmt::Display) -> Error {
    Error::coded(BenchCode::Bench, what.to_string())
}

// ---- the in-process baseline -----------------------------------------------------------------

type SyncNextFn<'a> = &'a dyn Fn(&mut ChatRequest) -> Result<()>;
type SyncListener = Box<dyn Fn(&mut ChatRequest, SyncNextFn<'_>) -> Result<()> + Send + Sync>;
type EmitListener = Box<dyn Fn(&ChatRequest) -> Result<()> + Send + Sync>;
type ParallelListener = Box<dyn Fn(&ChatRequest) -> BoxFut<()> + Send + Sync>;
type AsyncListener = Box<dyn Fn(ChatRequest, InprocNext) -> BoxFut<ChatRequest> + Send + Sync>;
type AsyncTerminal = Box<dyn Fn(ChatRequest) -> BoxFut<ChatRequest> + Send + Sync>;

/// The same listeners as `bench-listener`, as plain closures in this image.
struct Inproc {
    listeners: usize,
    sync: Vec<SyncListener>,
    emit: Vec<EmitListener>,
    parallel: Vec<ParallelListener>,
    chain: Arc<AsyncChain>,
}

struct AsyncChain {
    listeners: Vec<AsyncListener>,
    terminal: AsyncTerminal,
}

/// `next` of the in-process async waterfall: owned and re-runnable, like the SDK's.
#[derive(Clone)]
struct InprocNext {
    chain: Arc<AsyncChain>,
    index: usize,
}

impl InprocNext {
    fn run(&self, request: ChatRequest) -> BoxFut<ChatRequest> {
        match self.chain.listeners.get(self.index) {
            Some(listener) => listener(
                request,
                InprocNext {
                    chain: Arc::clone(&self.chain),
                    index: self.index + 1,
                },
            ),
            None => (self.chain.terminal)(request),
        }
    }
}

/// Builds the baseline out of line (and behind `black_box`) so the optimiser cannot see
/// through the boxes the way it never could across a plugin boundary.
#[inline(never)]
fn inproc(listeners: usize) -> Inproc {
    let mut sync: Vec<SyncListener> = Vec::new();
    let mut emit: Vec<EmitListener> = Vec::new();
    let mut parallel: Vec<ParallelListener> = Vec::new();
    let mut asynchronous: Vec<AsyncListener> = Vec::new();
    for _ in 0..listeners {
        sync.push(Box::new(|request, next| {
            bump(request);
            next(request)
        }));
        emit.push(Box::new(|request| {
            observe(request);
            Ok(())
        }));
        parallel.push(Box::new(|request| {
            observe(request);
            Box::pin(async { Ok(()) })
        }));
        asynchronous.push(Box::new(|mut request, next| {
            Box::pin(async move {
                bump(&mut request);
                next.run(request).await
            })
        }));
    }
    black_box(Inproc {
        listeners,
        sync,
        emit,
        parallel,
        chain: Arc::new(AsyncChain {
            listeners: asynchronous,
            terminal: Box::new(|request| Box::pin(async move { Ok(request) })),
        }),
    })
}

fn run_sync(
    chain: &[SyncListener],
    request: &mut ChatRequest,
    terminal: &dyn Fn(&mut ChatRequest) -> Result<()>,
) -> Result<()> {
    match chain.split_first() {
        Some((first, rest)) => first(request, &|r| run_sync(rest, r, terminal)),
        None => terminal(request),
    }
}

fn sync_terminal(request: &mut ChatRequest) -> Result<()> {
    observe(request);
    Ok(())
}

// ---- one timed loop per path and mode --------------------------------------------------------

fn abi_sync(ctx: Context, events: u64) -> Result<Duration> {
    let mut request = ChatRequest::sample();
    let started = Instant::now();
    for _ in 0..events {
        request.max_tokens = 0;
        ctx.run_waterfall(crate::DISPATCH.bench_waterfall, &mut request, sync_terminal)?;
    }
    let elapsed = started.elapsed();
    black_box(&request);
    Ok(elapsed)
}

fn inproc_sync(chain: &Inproc, events: u64) -> Result<Duration> {
    let mut request = ChatRequest::sample();
    let started = Instant::now();
    for _ in 0..events {
        request.max_tokens = 0;
        run_sync(&chain.sync, &mut request, &sync_terminal)?;
    }
    let elapsed = started.elapsed();
    black_box(&request);
    Ok(elapsed)
}

async fn abi_async(ctx: Context, events: u64) -> Result<Duration> {
    let mut request = ChatRequest::sample();
    let started = Instant::now();
    for _ in 0..events {
        request.max_tokens = 0;
        request = ctx
            .run_async_waterfall(
                crate::DISPATCH.bench_async_waterfall,
                request,
                |r: ChatRequest| async move { Ok(r) },
            )
            .await?;
    }
    let elapsed = started.elapsed();
    black_box(&request);
    Ok(elapsed)
}

async fn inproc_async(chain: &Inproc, events: u64) -> Result<Duration> {
    let start = InprocNext {
        chain: Arc::clone(&chain.chain),
        index: 0,
    };
    let mut request = ChatRequest::sample();
    let started = Instant::now();
    for _ in 0..events {
        request.max_tokens = 0;
        request = start.run(request).await?;
    }
    let elapsed = started.elapsed();
    black_box(&request);
    Ok(elapsed)
}

// The decision cases (issue 24 item 2): the terminal encodes one decision, every listener
// runs `next` and then reads the decision, the dispatcher reads it once more. In-process is
// the same work without dispatch: one encode and LISTENERS + 1 reads.
async fn abi_decision_json(ctx: Context, events: u64) -> Result<Duration> {
    let started = Instant::now();
    for _ in 0..events {
        let decision = ctx
            .run_async_waterfall(
                crate::DISPATCH.bench_decision_json,
                ChatRequest::sample(),
                |_: ChatRequest| async move { Json::of(&BenchDecision::sample()) },
            )
            .await?;
        read_json_decision(&decision)?;
    }
    Ok(started.elapsed())
}

async fn abi_decision_typed(ctx: Context, events: u64) -> Result<Duration> {
    let started = Instant::now();
    for _ in 0..events {
        let decision = ctx
            .run_async_waterfall(
                crate::DISPATCH.bench_decision_typed,
                ChatRequest::sample(),
                |_: ChatRequest| async move { Typed::new(&BenchDecision::sample()) },
            )
            .await?;
        read_typed_decision(&decision)?;
    }
    Ok(started.elapsed())
}

fn inproc_decision_json(chain: &Inproc, events: u64) -> Result<Duration> {
    let started = Instant::now();
    for _ in 0..events {
        black_box(ChatRequest::sample());
        let decision = Json::of(&BenchDecision::sample())?;
        for _ in 0..=chain.listeners {
            read_json_decision(&decision)?;
        }
    }
    Ok(started.elapsed())
}

fn inproc_decision_typed(chain: &Inproc, events: u64) -> Result<Duration> {
    let started = Instant::now();
    for _ in 0..events {
        black_box(ChatRequest::sample());
        let decision = Typed::new(&BenchDecision::sample())?;
        for _ in 0..=chain.listeners {
            read_typed_decision(&decision)?;
        }
    }
    Ok(started.elapsed())
}

fn abi_emit(ctx: Context, events: u64) -> Result<Duration> {
    let request = ChatRequest::sample();
    let started = Instant::now();
    for _ in 0..events {
        ctx.emit(crate::DISPATCH.bench_emit, &request)?;
    }
    Ok(started.elapsed())
}

fn inproc_emit(chain: &Inproc, events: u64) -> Result<Duration> {
    let request = ChatRequest::sample();
    let mut failed = 0u64;
    let started = Instant::now();
    for _ in 0..events {
        // Emit contains listener failures: count them, never stop.
        for listener in &chain.emit {
            if listener(&request).is_err() {
                failed += 1;
            }
        }
    }
    let elapsed = started.elapsed();
    black_box(failed);
    Ok(elapsed)
}

// Both parallel paths take the payload by value, so both clone the request once per event.
async fn abi_parallel(ctx: Context, events: u64) -> Result<Duration> {
    let request = ChatRequest::sample();
    let started = Instant::now();
    for _ in 0..events {
        ctx.parallel(crate::DISPATCH.bench_parallel, request.clone())
            .await?;
    }
    Ok(started.elapsed())
}

async fn inproc_parallel(chain: &Inproc, events: u64) -> Result<Duration> {
    let request = ChatRequest::sample();
    let started = Instant::now();
    for _ in 0..events {
        let payload = request.clone();
        let results = join_all(chain.parallel.iter().map(|l| l(&payload))).await;
        let failures: Vec<Error> = results.into_iter().filter_map(|r| r.err()).collect();
        if !failures.is_empty() {
            return Err(fail(format!(
                "{} in-process listeners failed",
                failures.len()
            )));
        }
    }
    Ok(started.elapsed())
}

// ---- statistics and the case loop ------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct Stats {
    median: f64,
    min: f64,
    max: f64,
}

fn stats(mut samples: Vec<f64>) -> Stats {
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    let median = if n == 0 {
        0.0
    } else if n % 2 == 1 {
        samples[n / 2]
    } else {
        (samples[n / 2 - 1] + samples[n / 2]) / 2.0
    };
    Stats {
        median,
        min: samples.first().copied().unwrap_or(0.0),
        max: samples.last().copied().unwrap_or(0.0),
    }
}

fn per_event(d: Duration, events: u64) -> f64 {
    d.as_nanos() as f64 / events.max(1) as f64
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Which mode a case dispatches.
#[derive(Debug, Clone, Copy)]
enum Case {
    SyncWaterfall,
    AsyncWaterfall,
    Emit,
    Parallel,
    DecisionJson,
    DecisionTyped,
}

impl Case {
    const ALL: [Case; 6] = [
        Case::SyncWaterfall,
        Case::AsyncWaterfall,
        Case::Emit,
        Case::Parallel,
        Case::DecisionJson,
        Case::DecisionTyped,
    ];

    fn name(self) -> &'static str {
        match self {
            Case::SyncWaterfall => "sync-waterfall",
            Case::AsyncWaterfall => "async-waterfall",
            Case::Emit => "emit",
            Case::Parallel => "parallel",
            Case::DecisionJson => "decision-json",
            Case::DecisionTyped => "decision-typed",
        }
    }

    fn is_async(self) -> bool {
        matches!(
            self,
            Case::AsyncWaterfall | Case::Parallel | Case::DecisionJson | Case::DecisionTyped
        )
    }

    async fn abi(self, ctx: Context, events: u64) -> Result<Duration> {
        match self {
            Case::SyncWaterfall => abi_sync(ctx, events),
            Case::AsyncWaterfall => abi_async(ctx, events).await,
            Case::Emit => abi_emit(ctx, events),
            Case::Parallel => abi_parallel(ctx, events).await,
            Case::DecisionJson => abi_decision_json(ctx, events).await,
            Case::DecisionTyped => abi_decision_typed(ctx, events).await,
        }
    }

    async fn inproc(self, chain: &Inproc, events: u64) -> Result<Duration> {
        match self {
            Case::SyncWaterfall => inproc_sync(chain, events),
            Case::AsyncWaterfall => inproc_async(chain, events).await,
            Case::Emit => inproc_emit(chain, events),
            Case::Parallel => inproc_parallel(chain, events).await,
            Case::DecisionJson => inproc_decision_json(chain, events),
            Case::DecisionTyped => inproc_decision_typed(chain, events),
        }
    }
}

/// Checks that both paths run exactly `listeners` waterfall listeners before anything is timed.
async fn verify(ctx: Context, chain: &Inproc, listeners: usize) -> Result<()> {
    let want = u32::try_from(listeners).map_err(fail)?;
    let mut request = ChatRequest::sample();
    let mut reached = false;
    ctx.run_waterfall(crate::DISPATCH.bench_waterfall, &mut request, |_| {
        reached = true;
        Ok(())
    })?;
    let abi_out = ctx
        .run_async_waterfall(
            crate::DISPATCH.bench_async_waterfall,
            ChatRequest::sample(),
            |r| async move { Ok(r) },
        )
        .await?;
    let mut local = ChatRequest::sample();
    run_sync(&chain.sync, &mut local, &sync_terminal)?;
    let local_out = InprocNext {
        chain: Arc::clone(&chain.chain),
        index: 0,
    }
    .run(ChatRequest::sample())
    .await?;
    let seen = [
        request.max_tokens,
        abi_out.max_tokens,
        local.max_tokens,
        local_out.max_tokens,
    ];
    if !reached || seen.iter().any(|&n| n != want) {
        return Err(fail(format!(
            "expected {want} listeners on every path, saw {seen:?} (terminal reached: {reached}); \
             does the profile's bench-listener row have count = {want}?"
        )));
    }
    Ok(())
}

async fn dispatch(
    ctx: Context,
    events: u64,
    listeners: usize,
    reps: usize,
    cases: &[Case],
) -> Result<()> {
    let chain = inproc(listeners);
    verify(ctx, &chain, listeners).await?;
    for &case in cases {
        let events = if case.is_async() {
            (events / 10).max(1_000)
        } else {
            events
        };
        // Warm-up: caches, branch predictors, the allocator's free lists, lazily made slots.
        case.abi(ctx, events / 5 + 1).await?;
        case.inproc(&chain, events / 5 + 1).await?;
        let mut abi = Vec::with_capacity(reps);
        let mut local = Vec::with_capacity(reps);
        for rep in 0..reps {
            if rep % 2 == 0 {
                abi.push(per_event(case.abi(ctx, events).await?, events));
                local.push(per_event(case.inproc(&chain, events).await?, events));
            } else {
                local.push(per_event(case.inproc(&chain, events).await?, events));
                abi.push(per_event(case.abi(ctx, events).await?, events));
            }
        }
        let (abi, local) = (stats(abi), stats(local));
        let hops = listeners.max(1) as f64;
        print(&json!({
            "case": case.name(),
            "listeners": listeners,
            "events": events,
            "reps": reps,
            "abi_ns_per_event": round(abi.median),
            "inproc_ns_per_event": round(local.median),
            "abi_ns_per_hop": round(abi.median / hops),
            "inproc_ns_per_hop": round(local.median / hops),
            "abi_min": round(abi.min),
            "abi_max": round(abi.max),
            "inproc_min": round(local.min),
            "inproc_max": round(local.max),
        }));
    }
    Ok(())
}

fn parse<T: std::str::FromStr>(field: Option<&str>, default: T, what: &str) -> Result<T> {
    match field {
        None | Some("") => Ok(default),
        Some(s) => s
            .parse()
            .map_err(|_| fail(format!("bad {what} '{s}' in the prompt"))),
    }
}

async fn run(ctx: Context, prompt: &str) -> Result<()> {
    let mut fields = prompt.trim().split(':');
    match fields.next().unwrap_or_default() {
        "ready" | "" => Ok(()),
        "dispatch" => {
            let events = parse(fields.next(), 1_000_000u64, "ITERS")?;
            let listeners = parse(fields.next(), 1usize, "LISTENERS")?;
            let reps = parse(fields.next(), 7usize, "REPS")?.max(1);
            let cases = match fields.next() {
                None | Some("") => Case::ALL.to_vec(),
                Some(list) => list
                    .split('+')
                    .map(|name| {
                        Case::ALL
                            .into_iter()
                            .find(|c| c.name() == name)
                            .ok_or_else(|| fail(format!("unknown case '{name}'")))
                    })
                    .collect::<Result<Vec<_>>>()?,
            };
            dispatch(ctx, events.max(1), listeners, reps, &cases).await
        }
        other => Err(fail(format!(
            "unknown benchmark '{other}' (use `ready` or `dispatch:ITERS:LISTENERS[:REPS[:CASES]]`)"
        ))),
    }
}

#[derive(Default)]
struct BenchDriver;

keel_plugin_api::dispatches! {
    /// The bench events this driver dispatches.
    pub struct Dispatches {
        pub bench_waterfall: BenchWaterfall,
        pub bench_async_waterfall: BenchAsyncWaterfall,
        pub bench_decision_json: BenchDecisionJson,
        pub bench_decision_typed: BenchDecisionTyped,
        pub bench_emit: BenchEmit,
        pub bench_parallel: BenchParallel,
    }
}

impl Plugin for BenchDriver {
    type Dispatches = Dispatches;

    fn manifest(&self) -> Manifest {
        Manifest::new("bench-driver", env!("CARGO_PKG_VERSION"))
            .description("times event dispatch across the ABI against the same chain in-process")
            .provides::<Driver>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        ctx.serve::<Driver, _>(Bench(ctx))?;
        Ok(())
    }
}

/// The driver: runs the benchmark case the prompt names.
struct Bench(Context);

impl DriverProvider for Bench {
    /// This driver takes no interrupt: the kernel's grace and teardown stop it.
    async fn interrupt(&self, _: DriverInterrupt) -> Result<()> {
        Err(fail("the bench driver takes no interrupt".to_owned()))
    }

    async fn run(&self, invocation: DriverInvocation) -> Result<DriverOutcome> {
        let ctx = self.0;
        let prompt = invocation.prompt.unwrap_or_default();
        let exit_code = match run(ctx, &prompt).await {
            Ok(()) => 0,
            Err(e) => {
                print(&json!({"case": prompt, "error": format!("{}: {}", e.code, e.message)}));
                1
            }
        };
        Ok(DriverOutcome {
            exit_code,
            relaunch: None,
        })
    }
}

keel_plugin_api::export_plugin!(BenchDriver);
