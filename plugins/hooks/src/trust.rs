//! Whether a project's `.claude/settings*.json` may be run: the project trust (`keel trust
//! DIR` recorded these bytes, or `--trust-project` vouches for this run), asked of the kernel
//! through [`Context::project_file_trust`] so this row and the config layers agree on one
//! answer (issue 15 item 3).

use std::path::Path;

use keel_plugin_api::prelude::*;

/// `Some(text)` when `path` (which exists) is trusted as it is: the text whose bytes the trust
/// covered. `None` with the one phrase for the message when it is not (or when it changed
/// between the read and the question: what was vouched for is not what would run).
///
/// # Errors
/// The kernel could not answer, or the file cannot be read (the run stops: an unanswered
/// trust question never runs hooks).
pub async fn trusted_text(
    ctx: &Context,
    path: &Path,
) -> Result<std::result::Result<String, String>> {
    let before = std::fs::read(path)?;
    let trust = ctx.project_file_trust(path).await?;
    if !trust.trusted {
        return Ok(Err(trust.state));
    }
    let after = std::fs::read(path)?;
    if after != before {
        return Ok(Err("untrusted (it changed while keel read it)".to_owned()));
    }
    Ok(String::from_utf8(after).map_err(|_| "unusable (not UTF-8 text)".to_owned()))
}
