//! `proof-approver`: an approver on the `approval/answer` seam, standing in for the person an
//! interactive front end would ask. It answers every question with its configured `outcome`
//! (only questions whose reason starts with `reasons_starting`, when set; others it leaves to
//! the next approver) and appends each question it saw to `record` as a JSON line, so tests
//! can check what was asked, and when, against what happened on disk.

use std::io::Write as _;
use std::path::PathBuf;

use keel_plugin_api::events::Json;
use keel_plugin_api::events::approval::Answer;
use keel_plugin_api::prelude::*;
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// `allowed-once`, `rejected` or `cancelled`.
    outcome: String,
    /// Only answer questions whose reason starts with this.
    #[serde(default)]
    reasons_starting: Option<String>,
    /// Where questions are recorded, one JSON line each.
    record: PathBuf,
}

#[derive(Default)]
struct Approver;

impl Plugin for Approver {
    fn manifest(&self) -> Manifest {
        Manifest::new("proof-approver", env!("CARGO_PKG_VERSION"))
            .description("answers approval questions from its config and records them")
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: Config = ctx.config()?;
        ctx.on_serial::<Answer, _, _>(ListenerOptions::default(), move |question: &Json| {
            let c = config.clone();
            let parsed: Result<Value> = question.parse();
            async move {
                let q = parsed?;
                let reason = q.get("reason").and_then(Value::as_str).unwrap_or("");
                if let Some(prefix) = &c.reasons_starting
                    && !reason.starts_with(prefix.as_str())
                {
                    return Ok(None);
                }
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&c.record)?;
                writeln!(file, "{q}")?;
                Json::of(&serde_json::json!({ "outcome": c.outcome })).map(Some)
            }
        })?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(Approver);
