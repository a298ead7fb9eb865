//! The core event taxonomy: every event keel's kernel and first-party plugins agree on.
//!
//! One module per domain. Each event is declared once with [`declare_event!`](crate::declare_event),
//! which gives it a name, a dispatch mode, a payload type and a doc line; [`CATALOG`] lists them
//! all so that `docs/events.md` is generated from this one source (`cargo xtask docs`).
//! Domains whose payloads belong to later subsystems (memory, compaction, …) are added by the
//! issue that builds them, never as placeholders: a payload type is an ABI promise.

pub mod agent;
pub mod approval;
pub mod fs;
mod json;
pub mod kernel;
pub mod llm;
pub mod prompt;
pub mod session;
pub mod tools;

pub use json::Json;

use crate::sdk::event::{Event as _, EventInfo};

/// Every event declared in `keel-plugin-api`, in documentation order.
pub const CATALOG: &[EventInfo] = &[
    kernel::PluginStatus::INFO,
    kernel::ListenerError::INFO,
    kernel::ConfigUpdateFailed::INFO,
    session::Persist::INFO,
    session::SessionEvent::INFO,
    session::SessionDurable::INFO,
    session::SessionFlush::INFO,
    session::SessionCreated::INFO,
    session::SessionDisposed::INFO,
    agent::PreStep::INFO,
    agent::Request::INFO,
    agent::RequestError::INFO,
    agent::TurnStopping::INFO,
    agent::Status::INFO,
    agent::AgentError::INFO,
    agent::InboxInserted::INFO,
    agent::InboxClaimed::INFO,
    agent::InboxDiscarded::INFO,
    llm::Stream::INFO,
    prompt::Assemble::INFO,
    tools::PreExecute::INFO,
    tools::Guard::INFO,
    tools::Execute::INFO,
    tools::PostExecute::INFO,
    tools::ToolsResult::INFO,
    tools::Change::INFO,
    approval::Answer::INFO,
    fs::WriteIntent::INFO,
    fs::EditIntent::INFO,
    fs::Observed::INFO,
];
