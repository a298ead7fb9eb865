//! `system-prompt/*` events (LOOP-14).
//!
//! The assembly's sections and variables are typed ([`PromptSection`], a string table) and
//! cross the ABI as [`Typed`] values (issue 24 item 2); the wire JSON is what it was.

use std::collections::BTreeMap;

use abi_stable::StableAbi;
use abi_stable::std_types::RString;

use super::typed::Typed;
use crate::declare_event;
use crate::services::prompt::PromptSection;

/// The prompt being assembled.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct PromptAssembly {
    /// Session id.
    pub session_id: RString,
    /// The sections so far; listeners append or replace (same id) and call `next`.
    pub sections: Typed<Vec<PromptSection>>,
    /// `{name: value}` for `{{name}}` interpolation; listeners may add.
    pub variables: Typed<BTreeMap<String, String>>,
}

declare_event! {
    /// Cooperative prompt assembly: each listener contributes sections and variables.
    pub struct Assemble: waterfall("system-prompt/assemble") -> PromptAssembly;
}
