//! Proof plugin: requires `proof.counter`; uses it at activation and again in its own disposer
//! (which must still see the service: dependents unload before their provider's entry goes).
//! Row config `{"hold_for": LINE}` makes `activate` slow on purpose: after its first disposer it
//! traces `holding ROW`, waits until LINE is in the trace, lingers 300 ms, registers a second
//! disposer and traces `activated ROW late-effect=OK` (or the error code, which it returns) —
//! so a test can see whether a teardown overlapped the activation (issue 13 item 1).
//!
//! It also serves `keel doctor` one check, `counter`, that calls the counter: its status is the
//! row's `doctor` config (`ok`, `warn` or `fail`; default `ok`), so tests drive the doctor seam.

use keel_plugin_api::prelude::*;
use keel_plugin_api::services::doctor::{
    Check, CheckStatus, Doctor, DoctorProvider, DoctorReport, DoctorRequest, service_name,
};
use keel_proof_api::{Counter, trace, traced};

const ID: &str = "proof-consumer";

#[derive(Default)]
struct ProofConsumer;

impl Plugin for ProofConsumer {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new(ID, env!("CARGO_PKG_VERSION"))
            .description("requires proof.counter")
            .requires::<Counter>()
            .provides_named(&service_name(ID), false)
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let row = ctx.row()?;
        let seen = ctx.client::<Counter>()?.get().await?;
        trace(format!("activate {row} provider={}", seen.row));
        let config: serde_json::Value = ctx.config()?;
        let status = match config.get("doctor").and_then(|s| s.as_str()) {
            Some("warn") => CheckStatus::Warn,
            Some("fail") => CheckStatus::Fail,
            _ => CheckStatus::Ok,
        };
        ctx.serve_named::<Doctor, _>(&service_name(ID), Checks { ctx, status })?;
        let dispose_row = row.clone();
        ctx.effect("consumer-dispose", move || async move {
            let row = dispose_row;
            let outcome = match ctx.client::<Counter>() {
                Ok(c) => match c.get().await {
                    Ok(v) => format!("service-ok provider={}", v.row),
                    Err(e) => format!("service-call-failed {}", e.code),
                },
                Err(e) => format!("service-missing {}", e.code),
            };
            trace(format!("dispose {row} {outcome}"));
            Ok(())
        })?;
        let config = ctx.config_json()?;
        if let Some(line) = config.get("hold_for").and_then(|v| v.as_str()) {
            trace(format!("holding {row}"));
            traced(line, 10_000).await;
            keel_plugin_api::sdk::sleep(std::time::Duration::from_millis(300)).await;
            let late_row = row.clone();
            let late = ctx.effect("consumer-late", move || async move {
                trace(format!("dispose-late {late_row}"));
                Ok(())
            });
            let code = late.as_ref().err().map_or("OK", |e| e.code.as_str());
            trace(format!("activated {row} late-effect={code}"));
            late?;
        }
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
        let seen = self.ctx.client::<Counter>()?.get().await?;
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
