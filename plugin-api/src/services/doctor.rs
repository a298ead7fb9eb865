//! The doctor seam: checks a plugin contributes to `keel doctor` (issue 13 item 2).
//!
//! The kernel's doctor checks only what the kernel owns (its ABI, the search path, the profile's
//! assembly, the lock). Everything else is asked of the rows: a plugin that can tell whether it
//! will work on this host (the sandbox: which runner confines here) provides
//! `keel.doctor.<plugin>` ([`service_name`], declared with `Manifest::provides_named(…, false)`)
//! and serves [`Doctor`] under that name. `keel doctor` starts those rows, and the rows they
//! require, and nothing else of the profile; it prints each check as
//! `<status> <row>: <check>: <detail>`, and a `Fail` makes it exit 1.

use serde::{Deserialize, Serialize};

crate::contract! {
    /// The shape of every `keel.doctor.<plugin>` service (served under that name, never under
    /// `keel.doctor` itself).
    pub contract Doctor = "keel.doctor", version 1;
    provider DoctorProvider;
    client DoctorClient;
    /// Runs this row's checks now (they may probe the host: spawn a test process, open a
    /// file) and answers them in the order they should be printed.
    fn checks(DoctorRequest) -> DoctorReport;
}

/// What every doctor service name starts with.
pub const PREFIX: &str = "keel.doctor.";

/// The doctor service name of `plugin` (e.g. `keel.doctor.sandbox`).
pub fn service_name(plugin: &str) -> String {
    format!("{PREFIX}{plugin}")
}

/// `checks`' request: nothing yet; a struct so fields can be added without a version bump.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoctorRequest {}

/// `checks`' answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoctorReport {
    /// The checks, in print order.
    pub checks: Vec<Check>,
}

/// One line of `keel doctor`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// Short name (`bubblewrap`, `runner`); the kernel prefixes the row id.
    pub name: String,
    /// How it went.
    pub status: CheckStatus,
    /// One line for a person: what works, or what is wrong and what to do.
    pub detail: String,
}

/// A check's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    /// Works.
    Ok,
    /// Works partly, or not at all but keel copes (fails closed, falls back).
    Warn,
    /// Broken: `keel doctor` exits 1.
    Fail,
}

impl Check {
    /// A check with `status`.
    pub fn new(name: &str, status: CheckStatus, detail: impl Into<String>) -> Check {
        Check {
            name: name.to_owned(),
            status,
            detail: detail.into(),
        }
    }
}
