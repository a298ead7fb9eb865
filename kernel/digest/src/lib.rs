//! The blake3 digests `keel.lock` checks: each plugin library opened once, hashed from that
//! open file only when it must be, and handed on open so the loader runs the file that was
//! checked (issue 25 item 2).
//!
//! Why a crate of its own: hashing every library was the largest single cost of start-up
//! (~66 MB for the `headless` profile, read whole before anything loads), and what makes it
//! cheap — a cache keyed by what the file system records about a file — is file-system work
//! with no kernel types in it. Kept out of `kernel/src`, it does not count against the
//! kernel's line budget and can be tested (and measured) alone.
//!
//! - **Open once** ([`open_all`]): each library is opened once; its [`StatKey`] comes from that
//!   open file (`fstat`), its digest from reading that same file when the cache cannot answer,
//!   and the file stays open. [`Opened::load_path`] names it to `dlopen` as `/proc/self/fd/N`,
//!   so a library renamed over, or replaced, between the check and the load is never what
//!   runs: the loader opens the inode that was checked. Where `/proc` cannot name it (no
//!   `/proc`, not Linux) the path is used and that window stays as it was.
//! - **The cache** ([`Cache`]): a digest is reused only when the file's device, inode, size,
//!   mtime and ctime (in nanoseconds) and absolute path all equal the ones recorded after it was
//!   hashed, and the entry is not *racy*. Any doubt hashes. `cache.rs` says why that keeps the
//!   lock's promise.
//! - **The manifest cache** ([`ManifestCache`], `manifests.rs`): by digest, what opening a
//!   library proved (its checks passed, its manifest), so a row with nothing to do is planned
//!   without opening its library (issue 25 item 3).

mod cache;
mod manifests;
mod pin;

use std::fs::File;
use std::os::unix::fs::{FileExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

pub use cache::{CACHE_FILE, Cache, RACY_MARGIN, racy_margin};
pub use manifests::{MANIFEST_FILE, ManifestCache};

/// Why a library could not be digested: the file and what failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {reason}", path.display())]
pub struct DigestError {
    /// The library file.
    pub path: PathBuf,
    /// What failed (the OS's message).
    pub reason: String,
}

/// What the file system records about a file that changing its content cannot leave alone
/// (git's index keeps the same): a write moves mtime and ctime, a rename or a new file moves
/// the inode (and ctime), and ctime cannot be set back by anyone but the clock's owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StatKey {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
    /// `st_size`.
    pub size: u64,
    /// `st_mtime` in nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// `st_ctime` in nanoseconds since the epoch.
    pub ctime_ns: i64,
}

impl StatKey {
    /// The key of `meta` (from `fstat` of the open file); `None` for a time out of range.
    pub fn of(meta: &std::fs::Metadata) -> Option<StatKey> {
        let ns = |secs: i64, nanos: i64| secs.checked_mul(1_000_000_000)?.checked_add(nanos);
        Some(StatKey {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec())?,
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec())?,
        })
    }
}

/// A library opened once and digested: the digest describes this open file.
#[derive(Debug, Clone)]
pub struct Opened {
    /// The library's path as found on the search path.
    pub path: PathBuf,
    /// `blake3:<hex>` of the file's bytes.
    pub digest: String,
    /// The digest came from the cache (nothing was read).
    pub cached: bool,
    file: Arc<File>,
    key: Option<StatKey>,
    /// The cache may answer for it and record it ([`cacheable`]).
    keyed: bool,
}

impl Opened {
    /// The digest of the open file's bytes, read now: what a caller about to refuse the
    /// library on a cached digest asks first, so a refusal always rests on bytes read.
    ///
    /// # Errors
    /// [`DigestError`] when the file cannot be read.
    pub fn rehash(&self) -> Result<String, DigestError> {
        hash_file(&self.file, &self.path)
    }

    /// The name to hand `dlopen`: `/proc/self/fd/N` for this very open file where the
    /// process's `/proc` names it (the descriptor is then kept open for the life of the
    /// process, as the library is never unloaded), else [`Opened::path`].
    pub fn load_path(&self) -> PathBuf {
        pin::load_path(&self.file, self.key.as_ref(), &self.path)
    }
}

/// Whether the file system holding `file` keeps stamps the cache can rely on: not tmpfs or
/// ramfs, whose pages are never written back, so a write through a shared mapping that already
/// dirtied a page never moves mtime or ctime again.
pub fn cacheable(file: &File) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    rustix::fs::fstatfs(file).is_ok_and(|fs| {
        #[allow(
            clippy::unnecessary_cast,
            reason = "f_type is i64 on this target, narrower or unsigned on others"
        )]
        let kind = fs.f_type as i64;
        kind != TMPFS_MAGIC && kind != RAMFS_MAGIC
    })
}

/// blake3 of `path`'s bytes, `blake3:<hex>`, with no cache.
///
/// # Errors
/// [`DigestError`] when the file cannot be opened or read.
pub fn digest_file(path: &Path) -> Result<String, DigestError> {
    let file = File::open(path).map_err(|e| error(path, &e))?;
    hash_file(&file, path)
}

/// Opens and digests `files`, in order, one result each: from `cache` where it can answer,
/// else by reading the open file (on a few threads). Fresh digests are recorded in `cache`,
/// which is saved if anything was recorded.
pub fn open_all(files: &[PathBuf], cache: &mut Cache) -> Vec<Result<Opened, DigestError>> {
    // Taken before any file is looked at: an entry recorded now is trusted later only for a
    // file whose times are older than this by the racy margin.
    let now = SystemTime::now();
    let mut out: Vec<Result<Opened, DigestError>> = Vec::with_capacity(files.len());
    let mut todo: Vec<usize> = Vec::new();
    for path in files {
        let opened = File::open(path)
            .map_err(|e| error(path, &e))
            .and_then(|file| {
                let meta = file.metadata().map_err(|e| error(path, &e))?;
                let key = StatKey::of(&meta);
                let keyed = key.is_some() && cacheable(&file);
                let hit = key.filter(|_| keyed).and_then(|k| cache.lookup(path, &k));
                Ok(Opened {
                    path: path.clone(),
                    cached: hit.is_some(),
                    digest: hit.unwrap_or_default(),
                    file: Arc::new(file),
                    key,
                    keyed,
                })
            });
        if opened.as_ref().is_ok_and(|o| !o.cached) {
            todo.push(out.len());
        }
        out.push(opened);
    }
    let hashed = {
        let items: Vec<&Opened> = todo
            .iter()
            .filter_map(|i| out.get(*i)?.as_ref().ok())
            .collect();
        hash_many(&items)
    };
    for (i, digest) in todo.into_iter().zip(hashed) {
        let Some(slot) = out.get_mut(i) else {
            continue;
        };
        match digest {
            Err(e) => *slot = Err(e),
            Ok(digest) => {
                if let Ok(opened) = slot {
                    if let Some(key) = opened.key.filter(|_| opened.keyed) {
                        cache.record(&opened.path, key, &digest, now);
                    }
                    opened.digest = digest;
                }
            }
        }
    }
    tracing::debug!(
        target: "keel::digest",
        libraries = files.len(),
        cached = out.iter().filter(|o| o.as_ref().is_ok_and(|o| o.cached)).count(),
        hashed = out.iter().filter(|o| o.as_ref().is_ok_and(|o| !o.cached)).count(),
        "library digests"
    );
    cache.save();
    out
}

/// Digests of `items`' open files, in order. Digests are most of a cold start (every library
/// read whole), so more than one is hashed on a few threads.
fn hash_many(items: &[&Opened]) -> Vec<Result<String, DigestError>> {
    if items.len() < 2 {
        return items.iter().map(|o| o.rehash()).collect();
    }
    let workers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .clamp(1, 4);
    let chunk = items.len().div_ceil(workers).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| {
                let handle = scope.spawn(move || part.iter().map(|o| o.rehash()).collect());
                (part, handle)
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|(part, h)| {
                // One result per library, whatever happened, so results stay aligned.
                h.join().unwrap_or_else(|_| {
                    part.iter()
                        .map(|o| {
                            Err(DigestError {
                                path: o.path.clone(),
                                reason: "the digest thread panicked".to_owned(),
                            })
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect()
    })
}

/// blake3 of an open file's bytes from offset 0 (positional reads: the file is shared).
fn hash_file(file: &File, path: &Path) -> Result<String, DigestError> {
    let mut hasher = blake3::Hasher::new();
    // Large reads let blake3 hash many chunks per SIMD batch (an 8 KiB buffer made the digest
    // a sixth of boot). Plain reads, not mmap: a file truncated while it is hashed must be an
    // error or a different digest, never a SIGBUS.
    let mut buf = vec![0u8; 1 << 20];
    let mut offset = 0u64;
    loop {
        let n = match file.read_at(&mut buf, offset) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(error(path, &e)),
        };
        if n == 0 {
            break;
        }
        hasher.update(buf.get(..n).unwrap_or_default());
        offset += n as u64;
    }
    Ok(format!("blake3:{}", hasher.finalize().to_hex()))
}

fn error(path: &Path, e: &std::io::Error) -> DigestError {
    DigestError {
        path: path.to_owned(),
        reason: e.to_string(),
    }
}

#[cfg(test)]
mod tests;
