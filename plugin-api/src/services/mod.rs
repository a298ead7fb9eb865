//! Service interfaces shared between plugins (and the seams the kernel hands control to or
//! asks: `driver`, `command` and `doctor`).
//!
//! Feature services are declared by the issue that builds them, never as placeholders.

pub mod agent;
pub mod approval;
pub mod child_env;
pub mod command;
pub mod context;
pub mod credentials;
pub mod doctor;
pub mod driver;
pub mod editor_files;
pub mod firewall;
pub mod llm;
pub mod prompt;
pub mod protected;
pub mod resident;
pub mod sandbox;
pub mod secret_env;
pub mod session;
pub mod subagent;
pub mod tool_dynamic;
pub mod tool_trait;
pub mod tools;
