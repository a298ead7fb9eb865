//! The core event taxonomy: every event keel's kernel and first-party plugins agree on.
//!
//! One module per domain. Each event is declared once with [`declare_event!`](crate::declare_event),
//! which gives it a name, a dispatch mode, a payload type and a doc line; [`CATALOG`] lists them
//! all so that `docs/events.md` is generated from this one source (`cargo xtask docs`).
//!
//! This crate only defines the types. Who *declares* an event on the bus is its owner: the
//! kernel declares `kernel/*` ([`kernel::EVENTS`]) and nothing else; every other domain is
//! declared by the plugin that dispatches it, in its
//! [`Plugin::Dispatches`](crate::sdk::Plugin::Dispatches) set ([`OWNERS`]), which is also where
//! its dispatch handles come from. A dispatch of an event that no loaded row declares is refused
//! (`UNKNOWN_EVENT`).
//! Domains whose payloads belong to later subsystems (memory, scheduling, …) are added by the
//! issue that builds them, never as placeholders: a payload type is an ABI promise.

pub mod agent;
pub mod approval;
pub mod context;
pub mod fs;
mod json;
pub mod kernel;
pub mod llm;
pub mod prompt;
pub mod session;
pub mod subagent;
pub mod tools;
mod typed;

pub use json::Json;
pub use typed::Typed;

use crate::sdk::event::{Event as _, EventInfo};

/// Which first-party plugin declares each domain's events in its manifest (the one that
/// dispatches them); `keel` means the kernel. `docs/events.md` names the owner of every event
/// from this table, and an integration test checks it against the plugins' real manifests.
pub const OWNERS: &[(&str, &str)] = &[
    ("kernel/", "keel"),
    ("session/", "session"),
    ("agent/", "agent-loop"),
    ("llm/", "llm"),
    ("system-prompt/", "system-prompt"),
    ("tools/", "tools"),
    ("approval/", "approval"),
    ("fs/", "tool-fs"),
    ("context/", "context"),
    ("subagent/", "subagent"),
];

/// The owner of `event` per [`OWNERS`], by its domain prefix.
pub fn owner(event: &str) -> Option<&'static str> {
    OWNERS
        .iter()
        .find(|(domain, _)| event.starts_with(domain))
        .map(|(_, owner)| *owner)
}

/// Every event typed in `keel-plugin-api`, in documentation order.
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
    agent::Resumed::INFO,
    agent::Delta::INFO,
    llm::Stream::INFO,
    llm::Delta::INFO,
    prompt::Assemble::INFO,
    tools::Rewrite::INFO,
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
    context::Compact::INFO,
    context::Compacted::INFO,
    subagent::ChildStarted::INFO,
    subagent::ChildEnded::INFO,
];

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 13 item 2: every catalog event has a named owner, and the kernel's own list is
    // exactly the `kernel/*` part of the catalog.
    #[test]
    fn every_event_has_an_owner_and_the_kernel_owns_only_kernel_events() {
        for info in CATALOG {
            assert!(owner(info.name).is_some(), "{} has no owner", info.name);
        }
        let kernel: Vec<&str> = CATALOG
            .iter()
            .filter(|i| owner(i.name) == Some("keel"))
            .map(|i| i.name)
            .collect();
        let declared: Vec<&str> = kernel::EVENTS.iter().map(|i| i.name).collect();
        assert_eq!(kernel, declared);
    }
}
