//! Proof plugin: requires `proof.counter`; uses it at activation and again in its own disposer
//! (which must still see the service: dependents unload before their provider's entry goes).

use keel_plugin_api::prelude::*;
use keel_proof_api::{Counter, trace};

#[derive(Default)]
struct ProofConsumer;

impl Plugin for ProofConsumer {
    fn manifest(&self) -> Manifest {
        Manifest::new("proof-consumer", env!("CARGO_PKG_VERSION"))
            .description("requires proof.counter")
            .requires::<Counter>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let row = ctx.row()?;
        let seen = ctx.client::<Counter>()?.get(()).await?;
        trace(format!("activate {row} provider={}", seen.row));
        ctx.effect("consumer-dispose", move || async move {
            let outcome = match ctx.client::<Counter>() {
                Ok(c) => match c.get(()).await {
                    Ok(v) => format!("service-ok provider={}", v.row),
                    Err(e) => format!("service-call-failed {}", e.code),
                },
                Err(e) => format!("service-missing {}", e.code),
            };
            trace(format!("dispose {row} {outcome}"));
            Ok(())
        })?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(ProofConsumer);
