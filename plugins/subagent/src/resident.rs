//! Resident children (issue 16 item 2). Filled in by the resident work.

use keel_plugin_api::prelude::*;

use crate::config::SubagentConfig;

/// Registers the resident tools.
///
/// # Errors
/// A registration the tools row refused.
pub fn activate(_ctx: &Context, _config: &SubagentConfig) -> Result<()> {
    Ok(())
}
