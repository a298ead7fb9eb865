//! The shared contract suite of `keel.session-store` (SES-08): one set of behaviours that every
//! session storage backend must show, written once against the `keel.session-store` contract
//! (`SessionStore` in `keel-plugin-api`) so that JSONL and SQLite stay swappable. The cases send
//! JSON through the real contract dispatch ([`call_served`]), so what a request looks like on
//! the wire, and how a malformed one is refused, is part of what they check.
//!
//! A backend's test crate implements [`Backend`] (how to open a store on a root, where its data
//! lives, how to damage it physically like a crash or an outside edit would) and expands
//! [`contract_tests!`], which generates one `#[test]` per behaviour in [`cases`]. The suite
//! checks the world, not the store's word: refusals are followed by byte comparisons of the
//! data files, and "nothing stored" by the backend's own physical inspection.
//!
//! This crate is test code: assertions and `unwrap` are how it reports.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    reason = "a test suite fails loudly by design"
)]

pub mod cases;
pub mod damage;
pub mod fixtures;
pub mod forms;
mod served;

pub use served::Served;

use std::path::{Path, PathBuf};

use keel_plugin_api::sdk::{ContractClient, ContractHandle};
use keel_plugin_api::services::session::SessionStore;
use serde_json::Value;

/// An error answer of a store call: the wire code (`SESSION_*`) and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// `SESSION_SEQ`, `SESSION_IO`, …
    pub code: String,
    /// Human text; must name the file (and line or seq) for data defects.
    pub message: String,
}

/// Calls `method` of the `keel.session-store` provider behind `handle` with the JSON `args`,
/// through the contract's own decoding and encoding (an unknown method is `UNKNOWN_METHOD`, a
/// malformed request `INVALID_ARGUMENTS`).
pub fn call_served(handle: &ContractHandle, method: &str, args: Value) -> Result<Value, Failure> {
    let client = ContractClient::<SessionStore>::new(handle.clone(), "session-contract");
    futures::executor::block_on(client.__call::<Value, Value>(method, 1, &args)).map_err(|e| {
        Failure {
            code: e.code,
            message: e.message,
        }
    })
}

/// One store instance, as one process sees a root. Two instances on one root model two
/// processes (locks, caches).
pub trait ContractStore {
    /// One `keel.session-store` call: `append`, `load`, `list`, `claim`, `release`.
    fn call(&self, method: &str, args: Value) -> Result<Value, Failure>;
    /// Arms a one-shot I/O failure in the middle of the next durable write: after part of the
    /// batch reached storage and before it is committed.
    fn fail_next_write(&self);
}

/// Physical damage applied to a stored session while no store has it open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// A record after the last stored one that is incomplete or unparsable (a crash mid-write).
    TornTail,
    /// The stored record with this seq becomes unparsable.
    Garble {
        /// Which record.
        seq: u64,
    },
    /// The stored record with this seq disappears (a seq gap).
    DropRecord {
        /// Which record.
        seq: u64,
    },
    /// The header's format version becomes this value.
    HeaderVersion(u32),
}

/// What the suite needs to know about a backend.
pub trait Backend: Sync {
    /// A new store instance rooted at `root` (which may not exist yet).
    fn open(&self, root: &Path) -> Box<dyn ContractStore>;
    /// Every file under `root` that holds session data (including temporary files, excluding
    /// lock files): what must stay byte-identical across a refused load or a failed write.
    fn data_files(&self, root: &Path) -> Vec<PathBuf>;
    /// The ids of the sessions physically present under `root`, read without the store.
    fn stored_sessions(&self, root: &Path) -> Vec<String>;
    /// Damages session `id` under `root` (no store instance is open on it).
    fn damage(&self, root: &Path, id: &str, damage: Damage);
}

/// The data files of a root and their bytes; its `Debug` shows paths and sizes only.
#[derive(Clone, PartialEq, Eq)]
pub struct Snapshot(pub Vec<(PathBuf, Vec<u8>)>);

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(
                self.0
                    .iter()
                    .map(|(p, b)| format!("{} ({} bytes)", p.display(), b.len())),
            )
            .finish()
    }
}

/// The data files of `root` and their bytes, sorted by path.
pub fn snapshot(backend: &dyn Backend, root: &Path) -> Snapshot {
    let mut files: Vec<(PathBuf, Vec<u8>)> = backend
        .data_files(root)
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
            (p, bytes)
        })
        .collect();
    files.sort();
    Snapshot(files)
}

/// Runs every case of the suite in turn (the macro gives one test per case instead).
pub fn run_all(backend: &dyn Backend) {
    for (name, case) in cases::ALL {
        eprintln!("contract case {name}");
        case(backend);
    }
}

/// Expands to one `#[test]` per contract case, each calling the case with `$backend` (an
/// expression of a type implementing [`Backend`]).
#[macro_export]
macro_rules! contract_tests {
    ($backend:expr) => {
        $crate::contract_tests!(@each $backend;
            ses08_first_append_materialises,
            created_but_never_appended_leaves_nothing,
            header_only_on_first_append,
            contiguous_seqs_enforced,
            ses02_round_trip_every_field,
            batches_accumulate_and_survive_reopen,
            list_reports_every_session,
            claim_release_and_double_claim,
            torn_tail_after_last_turn_end_is_cut,
            defect_before_last_turn_end_is_corrupt,
            gap_before_last_turn_end_is_corrupt,
            ses09_wrong_header_version_is_unsupported,
            failed_write_keeps_nothing,
            read_only_root_is_a_clear_io_error,
            invalid_requests_are_refused,
            load_of_unknown_session_is_not_found,
            events_jsonl_matches_events
        );
    };
    (@each $backend:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::cases::$name(&$backend);
            }
        )*
    };
}
