//! `fs/*` events: the file tool's decision slots and observation feed (FS-01…03, B11).
//!
//! The decisions ([`WriteDecision`], [`EditDecision`]) and the observation ([`Observation`])
//! are typed and cross the ABI as [`Typed`] values (issue 24 item 2); the wire JSON is what
//! it was (`{"kind":"create-if-absent"}`, `{"kind":"present","version":"…"}`, …).

use abi_stable::StableAbi;
use abi_stable::std_types::RString;
use serde::{Deserialize, Serialize};

use super::typed::Typed;
use crate::declare_event;
use crate::services::tools::FsCode;

/// The decision of `fs/write-intent`. Wire form: `{"kind":"unconditional"}`,
/// `{"kind":"create-if-absent"}` or `{"kind":"replace-if-version","version":"…"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum WriteDecision {
    /// Write whatever is there (the terminal's pre-set: no policy loaded).
    Unconditional,
    /// Only create: an existing target → `FS_NOT_OBSERVED`.
    CreateIfAbsent,
    /// Only replace this version: absent or changed → `FS_STALE_VERSION`.
    ReplaceIfVersion {
        /// The version the session read.
        version: String,
    },
}

/// The decision of `fs/edit-intent`. Wire form: `{"kind":"unconditional"}`,
/// `{"kind":"version","version":"…"}` or `{"kind":"error","code":"FS_NOT_OBSERVED"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum EditDecision {
    /// Edit whatever is there (the terminal's pre-set: no policy loaded).
    Unconditional,
    /// The file must still be at this version (checked before matching).
    Version {
        /// The version the session read.
        version: String,
    },
    /// Refuse with this code (`FS_NOT_OBSERVED`, `FS_NOT_FOUND`).
    Error {
        /// A B11 code.
        code: FsCode,
    },
}

/// What a read, stat or write learnt about a target. Wire form:
/// `{"kind":"present","version":"…"}` or `{"kind":"absent"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Observation {
    /// The target exists; the version is [`content_version`] of its bytes.
    Present {
        /// Content version of the bytes read or written.
        version: String,
    },
    /// The target does not exist.
    Absent,
}

/// A write or edit the file tool is about to make; `D` is the slot's decision
/// ([`WriteDecision`] or [`EditDecision`]).
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
#[sabi(unsafe_unconstrained(D))]
pub struct FsIntent<D> {
    /// Owner session.
    pub session_id: RString,
    /// Canonical target key (absolute path).
    pub target: RString,
    /// The decision; a policy listener sets it and does not call `next` (single slot, first
    /// registered wins). The file tool pre-sets `Unconditional`, which the terminal keeps.
    pub decision: Typed<D>,
}

/// What the file tool learnt about a target.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct FsObserved {
    /// Owner session.
    pub session_id: RString,
    /// Canonical target key.
    pub target: RString,
    /// Present (with its [`content_version`]) or absent.
    pub observation: Typed<Observation>,
}

/// Hex characters of a content version (128 bits of the digest).
const VERSION_HEX_LEN: usize = 32;

/// The content version `fs/observed` carries: the first 32 hex characters of the blake3
/// digest of the file's bytes. One definition, so a plugin that observes a file another row
/// wrote (the hooks row after a PostToolUse formatter, issue 23 item 12) reports the version
/// the file tools compare against.
pub fn content_version(bytes: &[u8]) -> String {
    let mut hex = blake3::hash(bytes).to_hex().to_string();
    hex.truncate(VERSION_HEX_LEN);
    hex
}

declare_event! {
    /// Decision slot for `write_file` (FS-01).
    pub struct WriteIntent: waterfall("fs/write-intent") -> FsIntent<WriteDecision>;
}
declare_event! {
    /// Decision slot for `edit_file` (FS-01).
    pub struct EditIntent: waterfall("fs/edit-intent") -> FsIntent<EditDecision>;
}
declare_event! {
    /// A read, stat or write observed a target (FS-02). Synchronous, side-effect only.
    pub struct Observed: emit("fs/observed") -> FsObserved;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    // The typed decisions and observations write the JSON the untyped ones did.
    #[test]
    fn decisions_and_observations_keep_their_wire_form() {
        let w = |d: WriteDecision| serde_json::to_value(d).unwrap();
        assert_eq!(
            w(WriteDecision::Unconditional),
            json!({"kind": "unconditional"})
        );
        assert_eq!(
            w(WriteDecision::CreateIfAbsent),
            json!({"kind": "create-if-absent"})
        );
        assert_eq!(
            w(WriteDecision::ReplaceIfVersion {
                version: "v".into()
            }),
            json!({"kind": "replace-if-version", "version": "v"})
        );
        let e = EditDecision::Error {
            code: FsCode::NotObserved,
        };
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"kind": "error", "code": "FS_NOT_OBSERVED"})
        );
        let back: EditDecision =
            serde_json::from_value(json!({"kind": "version", "version": "v"})).unwrap();
        assert_eq!(
            back,
            EditDecision::Version {
                version: "v".into()
            }
        );
        assert_eq!(
            serde_json::to_value(Observation::Absent).unwrap(),
            json!({"kind": "absent"})
        );
    }
}
