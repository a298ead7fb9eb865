//! [`register_until_unload`]: the one protocol of keel's registries (`keel.llm` for adapters,
//! `keel.tools` for tool providers): `"register"` answers `{registration}`, `"unregister"
//! {registration}` undoes it. A plugin registers at activation and the registration must go
//! when its row unloads; this does both, so every provider does not write the pair again.

use serde_json::{Value, json};

use super::call::CallHandle;
use super::context::Context;
use super::error::{Error, Result};

/// Calls `registry`'s `"register"` with `args` and registers an effect (labelled `label`)
/// that calls `"unregister"` when this fiber unloads. An unregister that fails is logged and
/// ignored: the registry may be gone already (a reload can dispose it first), and then there
/// is nothing left to undo.
///
/// # Errors
/// The registry's error (`DUPLICATE_ADAPTER`, `DUPLICATE_TOOL`, …), `INVALID_ANSWER` when it
/// answers without a registration, `INACTIVE_FIBER`.
pub async fn register_until_unload(
    ctx: &Context,
    registry: CallHandle,
    args: Value,
    label: &str,
) -> Result<u64> {
    let answer = registry.call("register", args).await?;
    let Some(registration) = answer.get("registration").and_then(Value::as_u64) else {
        return Err(Error::new(
            "INVALID_ANSWER",
            format!("register answered without a registration: {answer}"),
        ));
    };
    let what = label.to_owned();
    ctx.effect(label, move || async move {
        if let Err(e) = registry
            .call("unregister", json!({ "registration": registration }))
            .await
        {
            tracing::debug!(error = %e, "{what}");
        }
        Ok(())
    })?;
    Ok(registration)
}
