//! The digest cache: `$KEEL_HOME/cache/library-digests`, one entry per library path, each the
//! digest of the file as it was when it was hashed and what the file system said about it then.
//!
//! **When an entry answers.** Only when the open file's [`StatKey`] (device, inode, size,
//! mtime and ctime in nanoseconds) and absolute path equal the entry's, the file is not in
//! memory-only storage (tmpfs, ramfs: see [`crate::cacheable`]), and the entry is not *racy*:
//! its mtime and ctime must be older than the moment the entry was recorded (taken before the
//! file was looked at) by [`racy_margin`]. A file written again within the timestamp
//! granularity of its recorded times (a 2 s FAT stamp, a coarse kernel tick), or through a
//! shared mapping whose page is still dirty, would keep its stamps; such an entry is hashed
//! again and recorded anew, as racy-git does. An entry recorded in the future (the clock went
//! back) never answers.
//!
//! **Why that keeps the lock's promise** (no library changed since `keel lock` runs): changing
//! a file's bytes moves its mtime and ctime; `utimensat` can put mtime back but moves ctime;
//! a new file or a rename over the path brings another inode and a fresh ctime. Only the
//! clock's owner (root) can stamp a ctime of their choosing. So an untouched key means untouched
//! bytes, unless someone could write the cache itself — which is why it is trusted only where
//! that is no easier than writing what it vouches for:
//!
//! - under `$KEEL_HOME`, which no confined tool can read or write (docs/security.md), while
//!   the libraries in a dev checkout used as the workspace can be;
//! - only when `$KEEL_HOME` is absolute, and it, `cache/` and the file are owned by the
//!   effective user and not group- or world-writable; `cache/` and the file are not symlinks
//!   (the file is opened `O_NOFOLLOW`). Written 0600 in a 0700 directory, atomically (a
//!   temporary file, then rename), with a blake3 of its body in its first line.
//!
//! An unconfined process running as you could forge an entry, but it could as well
//! change which `keel` you run or what it preloads; the lock never defended against that.
//! Anything off — missing, unreadable, another version, a checksum or an entry that does not
//! parse, the owner or mode — means the stored file is not used and every library is hashed
//! (its location checks failing means it is not written either). A cached digest that
//! disagrees with the lock is hashed again before anything is refused (the kernel's
//! `assemble`).

use std::collections::BTreeMap;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::StatKey;

/// The cache file, under `$KEEL_HOME`.
pub const CACHE_FILE: &str = "cache/library-digests";

/// The least that an entry's mtime and ctime must be older than its recording for it to
/// answer: more than the coarsest timestamp granularity in common use (FAT's 2 s). keel uses
/// [`racy_margin`], which is longer.
pub const RACY_MARGIN: Duration = Duration::from_secs(2);

/// The margin keel uses: the kernel's writeback delay (`vm.dirty_expire_centisecs` plus
/// `vm.dirty_writeback_centisecs`, 35 s by default) and 5 s more, at least [`RACY_MARGIN`];
/// 60 s when they cannot be read.
///
/// Why writeback: a write through a shared mapping moves mtime and ctime only at the first
/// write to a clean page; later writes to that dirty page move nothing until writeback cleans
/// it (and write-protects it again). A file whose stamps are older than writeback has no dirty
/// page left, so its next change moves them.
pub fn racy_margin() -> Duration {
    let centisecs = |name: &str| -> Option<u64> {
        let text = std::fs::read_to_string(format!("/proc/sys/vm/{name}")).ok()?;
        text.trim().parse().ok()
    };
    match (
        centisecs("dirty_expire_centisecs"),
        centisecs("dirty_writeback_centisecs"),
    ) {
        (Some(expire), Some(every)) => {
            let writeback = Duration::from_millis(expire.saturating_add(every).saturating_mul(10));
            (writeback + Duration::from_secs(5)).max(RACY_MARGIN)
        }
        _ => Duration::from_secs(60),
    }
}

/// The first line's start; the format version is in it.
const HEADER: &str = "keel library digests v1";

/// Entries kept; the oldest recorded go first.
const MAX_ENTRIES: usize = 512;

/// A stored file larger than this is not read (it would be something else).
const MAX_BYTES: u64 = 4 << 20;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    path: String,
    key: StatKey,
    /// When it was recorded, in nanoseconds since the epoch.
    recorded_ns: i64,
    digest: String,
}

/// Digests recorded after a hash, and the lookups a start makes.
#[derive(Debug)]
pub struct Cache {
    /// Where it is saved; `None`: nowhere.
    file: Option<PathBuf>,
    entries: BTreeMap<String, Entry>,
    /// Lookups may answer (not for `keel lock`, which pins bytes it read).
    answers: bool,
    dirty: bool,
    margin_ns: i64,
    hits: usize,
    note: Option<String>,
}

impl Cache {
    /// The cache under `home` (`$KEEL_HOME`): entries answer when they may.
    pub fn open(home: &Path) -> Cache {
        Cache::at(home, true)
    }

    /// The cache under `home`, recording fresh digests but answering nothing: what `keel lock`
    /// uses, so the lock is always written from bytes read.
    pub fn refresh(home: &Path) -> Cache {
        Cache::at(home, false)
    }

    /// No cache: every file is hashed and nothing is saved.
    pub fn off() -> Cache {
        Cache {
            file: None,
            entries: BTreeMap::new(),
            answers: false,
            dirty: false,
            margin_ns: nanos(RACY_MARGIN),
            hits: 0,
            note: Some("off".to_owned()),
        }
    }

    /// The same with another racy margin (tests; keel uses [`racy_margin`]).
    #[must_use]
    pub fn with_margin(mut self, margin: Duration) -> Cache {
        self.margin_ns = nanos(margin);
        self
    }

    /// Lookups answered so far.
    pub fn hits(&self) -> usize {
        self.hits
    }

    /// Why the stored cache is not used, if it is not (for logs and tests).
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    fn at(home: &Path, answers: bool) -> Cache {
        let mut cache = Cache::off();
        cache.answers = answers;
        cache.margin_ns = nanos(racy_margin());
        cache.note = None;
        let file = match location(home, CACHE_FILE) {
            Ok(file) => file,
            Err(why) => {
                cache.answers = false;
                cache.note = Some(why);
                return cache;
            }
        };
        match load(&file) {
            Ok(entries) => cache.entries = entries,
            Err(why) => {
                tracing::debug!(target: "keel::digest", file = %file.display(), "digest cache not used: {why}");
                cache.note = Some(why);
            }
        }
        cache.file = Some(file);
        cache
    }

    /// The recorded digest of `path` when `key` is the one recorded and the entry may answer.
    pub(crate) fn lookup(&mut self, path: &Path, key: &StatKey) -> Option<String> {
        if !self.answers {
            return None;
        }
        let entry = self.entries.get(path.to_str()?)?;
        let limit = entry.recorded_ns.saturating_sub(self.margin_ns);
        let now = since_epoch(SystemTime::now())?;
        let answers = entry.key == *key
            && key.mtime_ns < limit
            && key.ctime_ns < limit
            && entry.recorded_ns <= now;
        if !answers {
            return None;
        }
        self.hits += 1;
        Some(entry.digest.clone())
    }

    /// Records `digest` for `path` as `key` describes it; `before` was taken before the file
    /// was looked at.
    pub(crate) fn record(&mut self, path: &Path, key: StatKey, digest: &str, before: SystemTime) {
        let (Some(path), Some(recorded_ns)) = (path.to_str(), since_epoch(before)) else {
            return;
        };
        if self.file.is_none() || !path.starts_with('/') || !is_digest(digest) {
            return;
        }
        let entry = Entry {
            path: path.to_owned(),
            key,
            recorded_ns,
            digest: digest.to_owned(),
        };
        self.entries.insert(path.to_owned(), entry);
        self.dirty = true;
    }

    /// Writes the cache if anything was recorded; a failure only costs the next start a hash.
    pub(crate) fn save(&mut self) {
        let Some(file) = self.file.clone().filter(|_| self.dirty) else {
            return;
        };
        self.dirty = false;
        if let Err(why) = self.write(&file) {
            tracing::debug!(target: "keel::digest", file = %file.display(), "digest cache not written: {why}");
        }
    }

    fn write(&mut self, file: &Path) -> Result<(), String> {
        while self.entries.len() > MAX_ENTRIES {
            let oldest = self
                .entries
                .values()
                .min_by_key(|e| e.recorded_ns)
                .map(|e| e.path.clone());
            let Some(oldest) = oldest else { break };
            self.entries.remove(&oldest);
        }
        let entries: Vec<&Entry> = self.entries.values().collect();
        let body = serde_json::to_string(&entries).map_err(|e| e.to_string())?;
        write_checked(file, HEADER, &body)
    }
}

/// Writes `body` under `header` (with a blake3 of the body) to `file`, a store under
/// `$KEEL_HOME/cache/`: 0600 in a 0700 directory, atomically, and only while the directories
/// still pass [`location`]'s checks. Shared by the digest and the manifest caches.
pub(crate) fn write_checked(file: &Path, header: &str, body: &str) -> Result<(), String> {
    let dir = file.parent().ok_or("no directory")?;
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| e.to_string())?;
    // The directories as they are now (made just now, or there before) must still pass.
    let home = dir.parent().ok_or("no home")?;
    let name = file.file_name().and_then(|n| n.to_str()).ok_or("no name")?;
    location(home, &format!("cache/{name}"))?;
    let text = format!(
        "{header} blake3:{}\n{body}",
        blake3::hash(body.as_bytes()).to_hex()
    );
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        since_epoch(SystemTime::now()).unwrap_or_default()
    ));
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .and_then(|()| std::fs::rename(&tmp, file));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(|e| e.to_string())
}

/// The store `rel` (`cache/…`) under `home`, when the directories are fit to hold it (those
/// that exist).
pub(crate) fn location(home: &Path, rel: &str) -> Result<PathBuf, String> {
    if !home.is_absolute() {
        return Err(format!("$KEEL_HOME {} is not absolute", home.display()));
    }
    let file = home.join(rel);
    // `$KEEL_HOME` may be a symlink (its target is judged); `cache/` may not.
    match std::fs::metadata(home) {
        Ok(meta) => fit("$KEEL_HOME", &meta, true)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(file),
        Err(e) => return Err(e.to_string()),
    }
    let dir = file.parent().ok_or("no directory")?;
    match std::fs::symlink_metadata(dir) {
        Ok(meta) => fit("cache/", &meta, true)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.to_string()),
    }
    Ok(file)
}

/// Refuses a directory or file someone other than the effective user could replace or write.
fn fit(what: &str, meta: &std::fs::Metadata, dir: bool) -> Result<(), String> {
    let kind_ok = if dir {
        meta.file_type().is_dir()
    } else {
        meta.file_type().is_file()
    };
    if !kind_ok {
        let kind = if dir { "directory" } else { "regular file" };
        return Err(format!("{what} is not a {kind}"));
    }
    let euid = rustix::process::geteuid().as_raw();
    if meta.uid() != euid {
        return Err(format!("{what} is owned by uid {}, not {euid}", meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "{what} is group- or world-writable (mode {:o})",
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

/// The stored entries; a missing file is none. Any doubt is an error (and nothing is used).
fn load(file: &Path) -> Result<BTreeMap<String, Entry>, String> {
    let Some(body) = read_checked(file, HEADER)? else {
        return Ok(BTreeMap::new());
    };
    let entries: Vec<Entry> = serde_json::from_str(&body).map_err(|e| format!("corrupt: {e}"))?;
    let mut out = BTreeMap::new();
    for entry in entries {
        if !entry.path.starts_with('/') || !is_digest(&entry.digest) {
            return Err(format!("corrupt entry for {}", entry.path));
        }
        out.insert(entry.path.clone(), entry);
    }
    Ok(out)
}

/// The body of a store written by [`write_checked`] under `header`; `None` when there is none.
/// Errs on anything off: a symlink, another owner or mode, the size, the header, the checksum.
pub(crate) fn read_checked(file: &Path, header: &str) -> Result<Option<String>, String> {
    let nofollow = rustix::fs::OFlags::NOFOLLOW.bits();
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(i32::try_from(nofollow).unwrap_or_default())
        .open(file);
    let mut f: File = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let meta = f.metadata().map_err(|e| e.to_string())?;
    fit("the cache file", &meta, false)?;
    if meta.len() > MAX_BYTES {
        return Err(format!("{} bytes, more than a cache holds", meta.len()));
    }
    let mut text = String::new();
    f.read_to_string(&mut text).map_err(|e| e.to_string())?;
    let (first, body) = text.split_once('\n').ok_or("no header line")?;
    let sum = first
        .strip_prefix(header)
        .and_then(|rest| rest.strip_prefix(" blake3:"))
        .ok_or("another format or version")?;
    if sum != blake3::hash(body.as_bytes()).to_hex().as_str() {
        return Err("its checksum does not match (corrupt)".to_owned());
    }
    Ok(Some(body.to_owned()))
}

/// `blake3:` and 64 lowercase hex digits.
pub(crate) fn is_digest(s: &str) -> bool {
    s.strip_prefix("blake3:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

fn since_epoch(t: SystemTime) -> Option<i64> {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).ok()?;
    i64::try_from(d.as_nanos()).ok()
}

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}
