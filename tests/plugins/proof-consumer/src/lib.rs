//! Proof plugin: requires `proof.counter`; uses it at activation and again in its own disposer
//! (which must still see the service: dependents unload before their provider's entry goes).
//! It also serves `keel doctor` one check, `counter`, that calls the counter: its status is the
//! row's `doctor` config (`ok`, `warn` or `fail`; default `ok`), so tests drive the doctor seam.

use keel_plugin_api::prelude::*;
use keel_plugin_api::services::doctor::{
    Check, CheckStatus, Doctor, DoctorProvider, DoctorReport, DoctorRequest, service_name,
};
use keel_proof_api::{Counter, trace};

const ID: &str = "proof-consumer";

#[derive(Default)]
struct ProofConsumer;

impl Plugin for ProofConsumer {
    fn manifest(&self) -> Manifest {
        Manifest::new(ID, env!("CARGO_PKG_VERSION"))
            .description("requires proof.counter")
            .requires::<Counter>()
            .provides_named(&service_name(ID), false)
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let row = ctx.row()?;
        let seen = ctx.client::<Counter>()?.get(()).await?;
        trace(format!("activate {row} provider={}", seen.row));
        let config: serde_json::Value = ctx.config()?;
        let status = match config.get("doctor").and_then(|s| s.as_str()) {
            Some("warn") => CheckStatus::Warn,
            Some("fail") => CheckStatus::Fail,
            _ => CheckStatus::Ok,
        };
        ctx.serve_named::<Doctor, _>(&service_name(ID), Checks { ctx, status })?;
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

/// The doctor check: the required counter answers.
struct Checks {
    ctx: Context,
    status: CheckStatus,
}

impl DoctorProvider for Checks {
    async fn checks(&self, _: DoctorRequest) -> Result<DoctorReport> {
        let seen = self.ctx.client::<Counter>()?.get(()).await?;
        trace(format!("doctor {} provider={}", self.ctx.row()?, seen.row));
        Ok(DoctorReport {
            checks: vec![Check::new(
                "counter",
                self.status,
                format!("answered by row {}", seen.row),
            )],
        })
    }
}

keel_plugin_api::export_plugin!(ProofConsumer);
