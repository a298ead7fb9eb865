//! Service interfaces shared between plugins (and the two seams the kernel hands control to:
//! `driver` and `command`).
//!
//! Feature services are declared by the issue that builds them, never as placeholders.

pub mod command;
pub mod driver;
pub mod session;
