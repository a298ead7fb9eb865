//! The `agent` tool (issue 16 item 1). Filled in by the delegate work.

use keel_plugin_api::prelude::*;

use crate::config::SubagentConfig;

/// Registers the `agent` tool and the resume listener.
///
/// # Errors
/// A registration the tools row refused.
pub fn activate(_ctx: &Context, _config: &SubagentConfig) -> Result<()> {
    Ok(())
}
