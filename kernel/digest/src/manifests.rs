//! The manifest cache: `$KEEL_HOME/cache/library-manifests`, what opening a library proved,
//! by the library's digest (issue 25 item 3).
//!
//! Opening a library to read its manifest runs its initialisers and costs ~0.25–0.9 ms per
//! library; an idle row (nothing to do for its config) need not pay that at all if its
//! manifest is known. An entry says: the library whose bytes have this blake3 digest, opened by
//! *this host*, passed the ABI major and abi_stable layout checks and answered this manifest
//! JSON. "This host" is a fingerprint the caller gives (the kernel: keel's version, its ABI
//! major and what the file system says about the running executable), stored once for the file:
//! a store written by another host is not used, and is replaced when this one saves.
//!
//! The store is kept and trusted exactly as the digest cache is (same directory checks, 0600,
//! atomic writes, a blake3 of the body in the first line; see `cache.rs`): anything off —
//! missing, unreadable, another version or host, a checksum or an entry that does not parse —
//! means no entry answers, and the caller opens the library as it would without a cache.
//! An entry is keyed by the digest, which still comes from the digest cache or from hashing
//! and is still checked against the lock before any of this is asked: the cache can only
//! spare an open, never make a library acceptable. docs/security.md says why.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::cache::{is_digest, location, read_checked, write_checked};

/// The store, under `$KEEL_HOME`.
pub const MANIFEST_FILE: &str = "cache/library-manifests";

const HEADER: &str = "keel library manifests v1";

/// Entries kept (the store is rewritten whole; more would be a dev tree's stale builds).
const MAX_ENTRIES: usize = 256;

/// Config verdicts kept.
const MAX_VALID: usize = 1024;

#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    host: String,
    /// Digest → manifest JSON exactly as the library returned it.
    entries: BTreeMap<String, String>,
    /// Row configs found valid against the schema of a library's manifest: `<digest> <blake3
    /// of the config JSON>` (issue 25 item 3: compiling 20 schemas was ~2 ms of a start).
    #[serde(default)]
    valid: BTreeSet<String>,
}

/// Manifests recorded after an open, and the lookups a start makes.
#[derive(Debug)]
pub struct ManifestCache {
    file: Option<PathBuf>,
    host: String,
    entries: BTreeMap<String, String>,
    valid: BTreeSet<String>,
    dirty: bool,
    note: Option<String>,
}

impl ManifestCache {
    /// The store under `home` for `host`: entries answer when the stored host is `host`.
    pub fn open(home: &Path, host: &str) -> ManifestCache {
        let mut cache = ManifestCache::off();
        cache.host = host.to_owned();
        cache.note = None;
        let file = match location(home, MANIFEST_FILE) {
            Ok(file) => file,
            Err(why) => {
                cache.note = Some(why);
                return cache;
            }
        };
        match load(&file, host) {
            Ok((entries, valid)) => (cache.entries, cache.valid) = (entries, valid),
            Err(why) => {
                tracing::debug!(target: "keel::digest", file = %file.display(), "manifest cache not used: {why}");
                cache.note = Some(why);
            }
        }
        cache.file = Some(file);
        cache
    }

    /// No cache: nothing answers and nothing is saved.
    pub fn off() -> ManifestCache {
        ManifestCache {
            file: None,
            host: String::new(),
            entries: BTreeMap::new(),
            valid: BTreeSet::new(),
            dirty: false,
            note: Some("off".to_owned()),
        }
    }

    /// The manifest JSON recorded for the library with `digest`.
    pub fn get(&self, digest: &str) -> Option<&str> {
        self.entries.get(digest).map(String::as_str)
    }

    /// Why the stored cache is not used, if it is not (logs and tests).
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// Records what opening the library with `digest` answered (after its checks passed).
    pub fn record(&mut self, digest: &str, manifest_json: &str) {
        if self.file.is_none() || !is_digest(digest) {
            return;
        }
        if self.entries.get(digest).map(String::as_str) != Some(manifest_json) {
            self.entries
                .insert(digest.to_owned(), manifest_json.to_owned());
            self.dirty = true;
        }
    }

    /// Whether `key` (`<library digest> <config digest>`) was recorded valid.
    pub fn config_valid(&self, key: &str) -> bool {
        self.valid.contains(key)
    }

    /// Records that the config `key` names passed its schema.
    pub fn record_valid(&mut self, key: &str) {
        if self.file.is_some() && self.valid.len() < MAX_VALID {
            self.dirty |= self.valid.insert(key.to_owned());
        }
    }

    /// Forgets the entry for `digest` (it disagreed with the library it names).
    pub fn forget(&mut self, digest: &str) {
        self.dirty |= self.entries.remove(digest).is_some();
    }

    /// Writes the store if anything changed; a failure only costs the next start an open.
    pub fn save(&mut self) {
        let Some(file) = self.file.clone().filter(|_| self.dirty) else {
            return;
        };
        self.dirty = false;
        while self.entries.len() > MAX_ENTRIES {
            let Some(first) = self.entries.keys().next().cloned() else {
                break;
            };
            self.entries.remove(&first);
        }
        let stored = Stored {
            host: self.host.clone(),
            entries: std::mem::take(&mut self.entries),
            valid: std::mem::take(&mut self.valid),
        };
        let written = serde_json::to_string(&stored)
            .map_err(|e| e.to_string())
            .and_then(|body| write_checked(&file, HEADER, &body));
        (self.entries, self.valid) = (stored.entries, stored.valid);
        if let Err(why) = written {
            tracing::debug!(target: "keel::digest", file = %file.display(), "manifest cache not written: {why}");
        }
    }
}

/// The stored entries for `host`; none when the store is missing or another host's. Any
/// doubt is an error (and nothing is used).
type Loaded = (BTreeMap<String, String>, BTreeSet<String>);

fn load(file: &Path, host: &str) -> Result<Loaded, String> {
    let Some(body) = read_checked(file, HEADER)? else {
        return Ok(Loaded::default());
    };
    let stored: Stored = serde_json::from_str(&body).map_err(|e| format!("corrupt: {e}"))?;
    if stored.host != host {
        return Err("written by another keel (host fingerprint differs)".to_owned());
    }
    if let Some(bad) = stored.entries.keys().find(|d| !is_digest(d)) {
        return Err(format!("corrupt entry {bad}"));
    }
    Ok((stored.entries, stored.valid))
}

#[cfg(test)]
mod tests {
    use super::{MANIFEST_FILE, ManifestCache};
    use std::os::unix::fs::PermissionsExt as _;

    const D: &str = "blake3:1111111111111111111111111111111111111111111111111111111111111111";

    fn home() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        dir
    }

    // issue 25 item 3: an entry answers only for the host that wrote it.
    #[test]
    fn entries_answer_for_the_host_that_recorded_them() {
        let home = home();
        let mut c = ManifestCache::open(home.path(), "host a");
        assert_eq!(c.get(D), None);
        c.record(D, r#"{"id":"x"}"#);
        c.record("not a digest", "{}");
        c.record_valid("d c");
        c.save();
        let c = ManifestCache::open(home.path(), "host a");
        assert_eq!(c.get(D), Some(r#"{"id":"x"}"#));
        assert!(c.config_valid("d c") && !c.config_valid("d other"));
        assert_eq!(c.note(), None);
        let other = ManifestCache::open(home.path(), "host b");
        assert_eq!(other.get(D), None);
        assert!(!other.config_valid("d c"));
        assert!(other.note().is_some_and(|n| n.contains("another keel")));
    }

    // Any doubt means no entry answers: a corrupt body, a wrong checksum, a loose mode.
    #[test]
    fn a_corrupt_or_loose_store_answers_nothing() {
        let home = home();
        let mut c = ManifestCache::open(home.path(), "h");
        c.record(D, "{}");
        c.save();
        let file = home.path().join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&file).expect("read");
        std::fs::write(&file, text.replacen("{}", "{ }", 1)).expect("write");
        let c = ManifestCache::open(home.path(), "h");
        assert_eq!(c.get(D), None);
        assert!(
            c.note().is_some_and(|n| n.contains("checksum")),
            "{:?}",
            c.note()
        );
        std::fs::write(&file, text).expect("restore");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let c = ManifestCache::open(home.path(), "h");
        assert_eq!(c.get(D), None);
        assert!(
            c.note().is_some_and(|n| n.contains("writable")),
            "{:?}",
            c.note()
        );
    }
}
