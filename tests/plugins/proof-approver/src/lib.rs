//! `proof-approver`: an approver on the `approval/answer` seam, standing in for the person an
//! interactive front end would ask. It answers every question with its configured `outcome`
//! (only questions whose reason starts with `reasons_starting`, when set; others it leaves to
//! the next approver) and appends each question it saw to `record` as a JSON line, so tests
//! can check what was asked, and when, against what happened on disk.

use std::io::Write as _;
use std::path::PathBuf;

use keel_plugin_api::events::Typed;
use keel_plugin_api::events::approval::{Answer, ApprovalQuestion};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::approval::{ApprovalOutcome, AskAnswer};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// `allowed-once`, `rejected` or `cancelled`.
    outcome: ApprovalOutcome,
    /// Only answer questions whose reason starts with this.
    #[serde(default)]
    reasons_starting: Option<String>,
    /// Where questions are recorded, one JSON line each.
    record: PathBuf,
}

#[derive(Default)]
struct Approver;

impl Plugin for Approver {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new("proof-approver", env!("CARGO_PKG_VERSION"))
            .description("answers approval questions from its config and records them")
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: Config = ctx.config()?;
        ctx.on_serial::<Answer, _, _>(ListenerOptions::default(), move |question| {
            let c = config.clone();
            let parsed = question.get();
            let text = question.text().to_owned();
            async move {
                let q: ApprovalQuestion = parsed?;
                let reason = q.request.reason.as_deref().unwrap_or("");
                if let Some(prefix) = &c.reasons_starting
                    && !reason.starts_with(prefix.as_str())
                {
                    return Ok(None);
                }
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&c.record)?;
                writeln!(file, "{text}")?;
                Typed::new(&AskAnswer { outcome: c.outcome }).map(Some)
            }
        })?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(Approver);
