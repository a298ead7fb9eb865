//! Whether a project's `.claude/settings*.json` may be run: the project trust (`keel trust
//! DIR` recorded these bytes, or `--trust-project` vouches for this run), asked of the kernel
//! through the SDK so this row and the config layers agree on one answer (issue 15 item 3).

use std::path::Path;

use keel_plugin_api::prelude::*;

/// `(trusted, state)`: `state` is one phrase for messages ("not recorded", "changed since
/// `keel trust`", …).
///
/// # Errors
/// The kernel could not answer (the run stops: an unanswered trust question never runs hooks).
pub async fn file_trust(ctx: &Context, path: &Path) -> Result<(bool, String)> {
    // Until the SDK's `Context::project_file_trust` lands (issue 15, the lead's part), every
    // project file is untrusted: named and ignored, never run.
    let _ = (ctx, path);
    Ok((false, "not recorded".to_owned()))
}
