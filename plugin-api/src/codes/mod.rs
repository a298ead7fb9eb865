//! Error codes: one typed set per domain, each code with who returns it and whether a retry can
//! help. `docs/errors.md` is generated from [`CATALOG`] (`cargo xtask docs`; CI fails on drift).
//!
//! Why typed: codes cross the ABI and reach the CLI (`error[CODE]`) and the session log as
//! strings, and strings drift (`INVALID_ARGS` beside `INVALID_ARGUMENTS`). A plugin now builds
//! an error from a variant ([`Error::coded`](crate::sdk::Error::coded)) and matches a received
//! one by parsing it back ([`ErrorCode::parse`]); the spelling on the wire is the variant's
//! declared string, so the log and the CLI do not change.

mod contract;
mod declare;
mod driver;
mod mcp;
mod sdk;

pub use contract::ContractCode;
pub use driver::DriverCode;
pub use mcp::McpCode;
pub use sdk::SdkCode;

/// Whether retrying can help (what a caller, or a model reading a tool error, should do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Retry {
    /// The same call fails the same way: fix the cause first.
    Never,
    /// Transient: the same call may succeed later (back off).
    Later,
    /// Retried at most once: the same call usually fails the same way, but not provably.
    Once,
    /// A *different* call may succeed (corrected arguments, another path, after approval).
    Changed,
}

impl Retry {
    /// How `docs/errors.md` words it.
    pub const fn describe(self) -> &'static str {
        match self {
            Retry::Never => "no",
            Retry::Later => "yes, later (transient)",
            Retry::Once => "once",
            Retry::Changed => "with a changed call",
        }
    }
}

/// One documented code.
#[derive(Debug, Clone, Copy)]
pub struct CodeInfo {
    /// The wire spelling.
    pub code: &'static str,
    /// Who returns it.
    pub returned_by: &'static str,
    /// Whether a retry can help.
    pub retry: Retry,
    /// What it means (the variant's doc comment).
    pub doc: &'static str,
}

/// One domain's code set.
#[derive(Debug, Clone, Copy)]
pub struct CodeSet {
    /// Domain name, e.g. `tools`.
    pub domain: &'static str,
    /// The Rust type declaring it.
    pub type_name: &'static str,
    /// What the domain covers.
    pub doc: &'static str,
    /// Its codes, in declaration order.
    pub codes: &'static [CodeInfo],
}

/// A typed error code.
pub trait ErrorCode: Copy + 'static {
    /// The wire spelling.
    fn as_str(self) -> &'static str;
    /// Whether a retry can help.
    fn retry(self) -> Retry;
    /// The variant whose spelling is `code`, if any.
    fn parse(code: &str) -> Option<Self>;
}

/// Every code set, in the order `docs/errors.md` lists them.
pub const CATALOG: &[CodeSet] = &[
    ContractCode::SET,
    SdkCode::SET,
    crate::services::llm::LlmCode::SET,
    crate::services::prompt::PromptCode::SET,
    crate::services::tools::ToolCode::SET,
    crate::services::tools::FsCode::SET,
    crate::services::tools::ShellCode::SET,
    McpCode::SET,
    crate::services::approval::ApprovalCode::SET,
    crate::services::sandbox::SandboxCode::SET,
    crate::host::ConfigCode::SET,
    crate::host::KernelCode::SET,
    crate::host::HostCode::SET,
    crate::host::ControlCode::SET,
    DriverCode::SET,
    crate::services::agent::AgentCode::SET,
    crate::services::subagent::SubagentCode::SET,
    crate::services::credentials::CredentialCode::SET,
    crate::services::firewall::SecretsCode::SET,
    crate::services::session::SessionCode::SET,
    crate::services::context::ContextCode::SET,
    crate::services::resident::ResidentCode::SET,
];
