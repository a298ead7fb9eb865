//! Proof plugin: serves the `proof.counter` contract (exclusive; declared in proof-api) and traces its lifecycle, for
//! the inject tests: pending → active → provider gone → dependents unload first → back.
//! Row config `{"activate_delay_ms": N}` makes activation linger N ms after the service is
//! registered and then trace `activated ROW`, so a test can tell "registered" from "ACTIVE".
//! `{"drop_on": LINE}` makes a task wait until LINE is in the trace, then unregister the
//! service (tracing `unregistering ROW` before and `unregistered ROW` after the call) and, with
//! `"reprovide": true`, serve a new one at once (`reprovided ROW`): a provider leaving while a
//! dependent is still inside its `activate` (issue 13 item 1).

use std::sync::atomic::{AtomicU64, Ordering};

use keel_plugin_api::prelude::*;
use keel_plugin_api::sdk::sleep;
use keel_proof_api::{Counter, CounterProvider, CounterReading, trace, traced};

/// The counter one fiber serves.
struct Count {
    row: String,
    fiber: u64,
    calls: AtomicU64,
}

impl CounterProvider for Count {
    async fn get(&self) -> Result<CounterReading> {
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
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new("proof-provider", env!("CARGO_PKG_VERSION"))
            .description("provides proof.counter")
            .provides::<Counter>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let row = ctx.row()?;
        trace(format!("activate {row}"));
        let count = || Count {
            row: row.clone(),
            fiber: ctx.fiber().0,
            calls: AtomicU64::new(0),
        };
        let registration = ctx.serve::<Counter, _>(count())?;
        let dispose_row = row.clone();
        ctx.effect("provider-dispose", move || async move {
            trace(format!("dispose {dispose_row}"));
            Ok(())
        })?;
        let config = ctx.config_json()?;
        if let Some(line) = config.get("drop_on").and_then(|v| v.as_str()) {
            let (line, again) = (line.to_owned(), count());
            let reprovide = config.get("reprovide").and_then(|v| v.as_bool()) == Some(true);
            ctx.spawn(async move {
                if !traced(&line, 60_000).await {
                    return;
                }
                let row = again.row.clone();
                trace(format!("unregistering {row}"));
                let code =
                    |r: Result<()>| r.err().map(|e| format!(" {}", e.code)).unwrap_or_default();
                trace(format!(
                    "unregistered {row}{}",
                    code(ctx.unregister(registration).await)
                ));
                if reprovide {
                    let served = ctx.serve::<Counter, _>(again).map(|_| ());
                    trace(format!("reprovided {row}{}", code(served)));
                }
            })?;
        }
        if let Some(ms) = config.get("activate_delay_ms").and_then(|v| v.as_u64()) {
            sleep(std::time::Duration::from_millis(ms)).await;
            trace(format!("activated {row}"));
        }
        Ok(())
    }
}

keel_plugin_api::export_plugin!(ProofProvider);
