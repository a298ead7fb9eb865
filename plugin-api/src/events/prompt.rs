//! `system-prompt/*` events (LOOP-14).

use abi_stable::StableAbi;
use abi_stable::std_types::RString;

use super::json::Json;
use crate::declare_event;

/// The prompt being assembled.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct PromptAssembly {
    /// Session id.
    pub session_id: RString,
    /// `[PromptSection]` so far; listeners append or replace (same id) and call `next`.
    pub sections: Json,
    /// `{name: value}` for `{{name}}` interpolation; listeners may add.
    pub variables: Json,
}

declare_event! {
    /// Cooperative prompt assembly: each listener contributes sections and variables.
    pub struct Assemble: waterfall("system-prompt/assemble") -> PromptAssembly;
}
