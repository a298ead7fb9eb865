//! Benchmark plugin: the listener side of keel's dispatch benchmark.
//!
//! Row config `{ "count": N }` registers N listeners on each benchmark event (sync waterfall,
//! async waterfall, the two decision waterfalls, emit, parallel). Each does the minimal work from `keel-bench-api` — a
//! waterfall listener bumps `max_tokens` and calls `next`, a notification listener reads one
//! field — so the benchmark measures the dispatch path, not the listeners.

use keel_bench_api::{
    BenchAsyncWaterfall, BenchDecisionJson, BenchDecisionTyped, BenchEmit, BenchParallel,
    BenchWaterfall, ChatRequest, bump, observe, read_json_decision, read_typed_decision,
};
use keel_plugin_api::prelude::*;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default = "one")]
    count: u32,
}

fn one() -> u32 {
    1
}

#[derive(Default)]
struct BenchListener;

keel_plugin_api::dispatches! {
    /// The bench events, declared here too (this row only listens).
    pub struct Dispatches {
        pub bench_waterfall: BenchWaterfall,
        pub bench_async_waterfall: BenchAsyncWaterfall,
        pub bench_decision_json: BenchDecisionJson,
        pub bench_decision_typed: BenchDecisionTyped,
        pub bench_emit: BenchEmit,
        pub bench_parallel: BenchParallel,
    }
}

impl Plugin for BenchListener {
    type Dispatches = Dispatches;

    fn manifest(&self) -> Manifest {
        Manifest::new("bench-listener", env!("CARGO_PKG_VERSION"))
            .description("N minimal listeners per dispatch mode, for the dispatch benchmark")
            .config_schema(serde_json::json!({
                "type": "object",
                "properties": {
                    "count": {"type": "integer", "minimum": 0, "maximum": 10000}
                },
                "additionalProperties": false
            }))
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: Config = ctx.config()?;
        let options = ListenerOptions::default();
        for _ in 0..config.count {
            ctx.waterfall::<BenchWaterfall>(options, |request, next| {
                bump(request);
                next.run(request)
            })?;
            ctx.async_waterfall::<BenchAsyncWaterfall, _, _>(
                options,
                |mut request: ChatRequest, next| async move {
                    bump(&mut request);
                    next.run(request).await
                },
            )?;
            ctx.async_waterfall::<BenchDecisionJson, _, _>(
                options,
                |request: ChatRequest, next| async move {
                    let decision = next.run(request).await?;
                    read_json_decision(&decision)?;
                    Ok(decision)
                },
            )?;
            ctx.async_waterfall::<BenchDecisionTyped, _, _>(
                options,
                |request: ChatRequest, next| async move {
                    let decision = next.run(request).await?;
                    read_typed_decision(&decision)?;
                    Ok(decision)
                },
            )?;
            ctx.on::<BenchEmit>(options, |request| {
                observe(request);
                Ok(())
            })?;
            ctx.on_parallel::<BenchParallel, _, _>(options, |request| {
                observe(request);
                async { Ok(()) }
            })?;
        }
        Ok(())
    }
}

keel_plugin_api::export_plugin!(BenchListener);
