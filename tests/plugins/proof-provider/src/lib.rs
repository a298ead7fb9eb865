//! Proof plugin: serves the `proof.counter` contract (exclusive; declared in proof-api) and traces its lifecycle, for
//! the inject tests: pending → active → provider gone → dependents unload first → back.
//! Row config `{"activate_delay_ms": N}` makes activation linger N ms after the service is
//! registered and then trace `activated ROW`, so a test can tell "registered" from "ACTIVE".

use std::sync::atomic::{AtomicU64, Ordering};

use keel_plugin_api::prelude::*;
use keel_plugin_api::sdk::sleep;
use keel_proof_api::{Counter, CounterProvider, CounterReading, trace};

/// The counter one fiber serves.
struct Count {
    row: String,
    fiber: u64,
    calls: AtomicU64,
}

impl CounterProvider for Count {
    async fn get(&self, (): ()) -> Result<CounterReading> {
        Ok(CounterReading {
            row: self.row.clone(),
            fiber: self.fiber,
            calls: self.calls.fetch_add(1, Ordering::SeqCst) + 1,
        })
    }
}

#[derive(Default)]
struct ProofProvider;

impl Plugin for ProofProvider {
    fn manifest(&self) -> Manifest {
        Manifest::new("proof-provider", env!("CARGO_PKG_VERSION"))
            .description("provides proof.counter")
            .provides::<Counter>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let row = ctx.row()?;
        trace(format!("activate {row}"));
        ctx.serve::<Counter, _>(Count {
            row: row.clone(),
            fiber: ctx.fiber().0,
            calls: AtomicU64::new(0),
        })?;
        let dispose_row = row.clone();
        ctx.effect("provider-dispose", move || async move {
            trace(format!("dispose {dispose_row}"));
            Ok(())
        })?;
        let config = ctx.config_json()?;
        if let Some(ms) = config.get("activate_delay_ms").and_then(|v| v.as_u64()) {
            sleep(std::time::Duration::from_millis(ms)).await;
            trace(format!("activated {row}"));
        }
        Ok(())
    }
}

keel_plugin_api::export_plugin!(ProofProvider);
