//! `keel-session-store-kit`: the parts every `keel.session-store` backend plugin shares, kept
//! once here because plugin crates may not depend on each other. It owns request parsing
//! ([`args`]), the envelope shape check ([`envelope`], and [`line`] on raw JSON text), the store thread ([`worker`]), the
//! one-live-writer lock ([`lock`]) and their failures ([`KitError`]), which each backend maps
//! into its own error type. Not a plugin: a plain library that only session-store plugins use.

pub mod args;
pub mod envelope;
pub mod error;
pub mod line;
pub mod lock;
pub mod worker;

pub use error::{KitError, SharedFailures};
pub use worker::{Backend, Worker};
