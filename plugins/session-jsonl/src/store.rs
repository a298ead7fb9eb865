//! [`JsonlStore`]: the `keel.session-store` contract over one JSONL file per session,
//! `<root>/<id>.jsonl` (header line, then one envelope per line).
//!
//! - **First append** writes header + batch to a temp file in the root, fsyncs it, publishes it
//!   with a hard link (which never overwrites), unlinks the temp and fsyncs the directory. A
//!   session that is never appended to leaves no file.
//! - **Later appends** are one positioned write + one fsync at the known committed length; on
//!   a write or fsync failure the file is truncated back, so nothing of the batch is stored.
//! - **Load** checks the file ([`crate::scan`]) and cuts a torn last line (physically only with
//!   `repair`); [`crate::answer`] shapes the answer (`events`, `events_jsonl` or
//!   `events_file`). Root and files are created 0700/0600.
//!
//! Calls are synchronous; the plugin runs them on a thread of its own.

use keel_session_store_kit::SharedFailures as _;
use std::collections::HashMap;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::UNIX_EPOCH;

use std::sync::Arc;

use keel_plugin_api::prelude::Result as SdkResult;
use keel_plugin_api::services::session::{
    AppendBatch, BatchStored, EventRecord, ListedSession, LoadStored, SessionCode, SessionHeader,
    SessionRef, StoredListing, StoredLog, StoredUnreadable,
};
use keel_session_store_kit::Backend;

use crate::args::{self, AppendArgs};
use crate::error::JsonlError;
use crate::lock::Locks;
use crate::scan::{self, Scan, Torn};

/// Store options (the plugin's row config).
#[derive(Debug, Clone)]
pub struct JsonlOptions {
    /// fsync files and the directory on every durable write (default true; tests and
    /// benchmarks of the write path may turn it off).
    pub fsync: bool,
}

impl Default for JsonlOptions {
    fn default() -> Self {
        JsonlOptions { fsync: true }
    }
}

/// The committed end of a session file this store has seen.
#[derive(Debug, Clone, Copy)]
struct Tail {
    len: u64,
    next_seq: u64,
}

/// What `load` returns.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The header.
    pub header: SessionHeader,
    /// Every committed event (checked envelopes) as JSON lines, verbatim from the file.
    pub records: String,
    /// Number of committed events (lines of `records`).
    pub count: u64,
    /// The torn last line that was cut (or would be, without `repair`).
    pub truncated: Option<Torn>,
}

/// The JSONL session store rooted at one directory.
#[derive(Debug)]
pub struct JsonlStore {
    root: PathBuf,
    options: JsonlOptions,
    tails: Mutex<HashMap<String, Tail>>,
    locks: Locks,
    temp_counter: AtomicU64,
    #[cfg(any(test, feature = "fail-points"))]
    fail_next: std::sync::atomic::AtomicBool,
}

impl JsonlStore {
    /// A store on `root` (created on the first write, 0700).
    pub fn new(root: impl Into<PathBuf>, options: JsonlOptions) -> Self {
        JsonlStore {
            root: root.into(),
            options,
            tails: Mutex::new(HashMap::new()),
            locks: Locks::default(),
            temp_counter: AtomicU64::new(0),
            #[cfg(any(test, feature = "fail-points"))]
            fail_next: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/<id>.jsonl`.
    pub fn session_path(&self, id: &str) -> PathBuf {
        self.root.join(format!("{id}.jsonl"))
    }

    /// Test-only: the next durable write fails after writing part of its batch.
    #[cfg(any(test, feature = "fail-points"))]
    pub fn fail_next_write(&self) {
        self.fail_next.store(true, Ordering::SeqCst);
    }

    fn fail_point(&self) -> std::io::Result<()> {
        #[cfg(any(test, feature = "fail-points"))]
        if self.fail_next.swap(false, Ordering::SeqCst) {
            return Err(std::io::Error::other("injected write failure (fail point)"));
        }
        Ok(())
    }

    fn ensure_root(&self) -> Result<(), JsonlError> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.root)
            .map_err(|e| JsonlError::io("create directory", &self.root, e))
    }

    fn fsync(&self, file: &File, path: &Path) -> Result<(), JsonlError> {
        if self.options.fsync {
            file.sync_all()
                .map_err(|e| JsonlError::io("fsync", path, e))?;
        }
        Ok(())
    }

    /// Appends one durable batch; returns the next seq.
    ///
    /// # Errors
    /// `SESSION_NOT_FOUND`/`EXISTS` for a missing or superfluous header, `SESSION_SEQ`,
    /// `SESSION_IO` (nothing of the batch stored), or the load errors of a damaged file.
    pub fn append(&self, a: AppendArgs) -> Result<u64, JsonlError> {
        let path = self.session_path(&a.session_id);
        let mut tails = self.tails.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(header) = &a.header {
            if path.symlink_metadata().is_ok() {
                return Err(JsonlError::Exists {
                    id: a.session_id,
                    path,
                });
            }
            if a.expected_next_seq != 0 {
                return Err(JsonlError::seq(format!(
                    "session '{}' is new: its first batch starts at seq 0, not {}",
                    a.session_id, a.expected_next_seq
                )));
            }
            let len = self.materialise(&path, header, &a.events)?;
            let next_seq = a.events.len() as u64;
            tails.insert(a.session_id, Tail { len, next_seq });
            return Ok(next_seq);
        }
        let file = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(JsonlError::NotFound {
                    id: a.session_id,
                    path,
                });
            }
            Err(e) => {
                // Still report damage or a foreign version before an I/O refusal.
                if let Ok(bytes) = std::fs::read(&path) {
                    scan::scan(&path, &a.session_id, &bytes)?;
                }
                return Err(JsonlError::io("open for writing", &path, e));
            }
        };
        let on_disk = file
            .metadata()
            .map_err(|e| JsonlError::io("stat", &path, e))?
            .len();
        let tail = match tails.get(&a.session_id) {
            Some(t) if t.len == on_disk => *t,
            _ => {
                tails.remove(&a.session_id);
                let (_, scan) = self.read_scan(&path, &a.session_id)?;
                if let Some(torn) = scan.torn {
                    return Err(JsonlError::Corrupt {
                        path,
                        line: torn.line,
                        detail: format!(
                            "{}; load with repair to cut it before appending",
                            torn.reason
                        ),
                    });
                }
                Tail {
                    len: scan.committed_len,
                    next_seq: scan.count,
                }
            }
        };
        if a.expected_next_seq != tail.next_seq {
            return Err(JsonlError::seq(format!(
                "session '{}': stored next seq is {}, the batch expects {}",
                a.session_id, tail.next_seq, a.expected_next_seq
            )));
        }
        if a.events.is_empty() {
            tails.insert(a.session_id, tail);
            return Ok(tail.next_seq);
        }
        let buf = encode(&a.events)?;
        if let Err(e) = self.write_batch(&file, &path, &buf, tail.len) {
            let restored = file.set_len(tail.len).and_then(|()| file.sync_all());
            if let Err(t) = restored {
                tracing::error!(
                    "{}: truncating a failed batch back failed: {t}",
                    path.display()
                );
            }
            return Err(e);
        }
        let next = Tail {
            len: tail.len + buf.len() as u64,
            next_seq: tail.next_seq + a.events.len() as u64,
        };
        tails.insert(a.session_id, next);
        Ok(next.next_seq)
    }

    fn write_batch(&self, file: &File, path: &Path, buf: &[u8], at: u64) -> Result<(), JsonlError> {
        let half = buf.len() / 2;
        file.write_all_at(&buf[..half], at)
            .and_then(|()| self.fail_point())
            .and_then(|()| file.write_all_at(&buf[half..], at + half as u64))
            .map_err(|e| JsonlError::io("write", path, e))?;
        self.fsync(file, path)
    }

    /// Writes header + batch to a temp file, fsyncs, links it into place (never overwriting),
    /// unlinks the temp and fsyncs the directory. Returns the file length.
    fn materialise(
        &self,
        path: &Path,
        header: &SessionHeader,
        events: &[Arc<EventRecord>],
    ) -> Result<u64, JsonlError> {
        self.ensure_root()?;
        let mut buf =
            serde_json::to_vec(header).map_err(|e| JsonlError::invalid(format!("header: {e}")))?;
        buf.push(b'\n');
        buf.extend_from_slice(&encode(events)?);
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let name = path
            .file_name()
            .and_then(|s| s.to_str())
            .unwrap_or("session");
        let temp = self
            .root
            .join(format!(".{name}.tmp-{}-{n}", std::process::id()));
        let result = self.publish(&temp, path, &buf);
        if temp.symlink_metadata().is_ok()
            && let Err(e) = std::fs::remove_file(&temp)
        {
            tracing::warn!("cannot remove temp file {}: {e}", temp.display());
        }
        result?;
        let dir =
            File::open(&self.root).map_err(|e| JsonlError::io("open directory", &self.root, e))?;
        self.fsync(&dir, &self.root)?;
        Ok(buf.len() as u64)
    }

    fn publish(&self, temp: &Path, path: &Path, buf: &[u8]) -> Result<(), JsonlError> {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(temp)
            .map_err(|e| JsonlError::io("create", temp, e))?;
        self.write_batch(&file, temp, buf, 0)?;
        drop(file);
        std::fs::hard_link(temp, path).map_err(|e| JsonlError::io("publish (hard link)", path, e))
    }

    fn read_scan(&self, path: &Path, id: &str) -> Result<(Vec<u8>, Scan), JsonlError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(JsonlError::NotFound {
                    id: id.to_owned(),
                    path: path.to_owned(),
                });
            }
            Err(e) => return Err(JsonlError::io("read", path, e)),
        };
        let scan = scan::scan(path, id, &bytes)?;
        Ok((bytes, scan))
    }

    /// Loads every committed event; a torn last line is reported and, with `repair`, cut.
    ///
    /// # Errors
    /// `SESSION_NOT_FOUND`, `SESSION_UNSUPPORTED`, `SESSION_CORRUPT` (file and line), `SESSION_IO`.
    pub fn load(&self, id: &str, repair: bool) -> Result<Loaded, JsonlError> {
        let (path, mut bytes, scan) = self.check(id, repair)?;
        bytes.truncate(scan.committed_len as usize);
        bytes.drain(..scan.body_start);
        // Every kept line was checked as JSON, so this is valid UTF-8.
        let records = String::from_utf8(bytes).map_err(|e| JsonlError::Corrupt {
            path: path.clone(),
            line: 0,
            detail: format!("records are not UTF-8: {e}"),
        })?;
        Ok(Loaded {
            header: scan.header,
            records,
            count: scan.count,
            truncated: scan.torn,
        })
    }

    /// The checking half of [`JsonlStore::load`]: the file's path, its whole bytes as read and
    /// their scan. Every line in `scan.body_start..scan.committed_len` is a checked, committed
    /// record; a torn tail lies past `committed_len` (and, with `repair`, is cut from the file).
    ///
    /// # Errors
    /// As [`JsonlStore::load`].
    pub fn check(&self, id: &str, repair: bool) -> Result<(PathBuf, Vec<u8>, Scan), JsonlError> {
        let path = self.session_path(id);
        let mut tails = self.tails.lock().unwrap_or_else(|p| p.into_inner());
        tails.remove(id);
        let (bytes, scan) = self.read_scan(&path, id)?;
        if scan.torn.is_some() && repair {
            let file = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| JsonlError::io("open for repair", &path, e))?;
            file.set_len(scan.committed_len)
                .map_err(|e| JsonlError::io("truncate torn tail of", &path, e))?;
            self.fsync(&file, &path)?;
        }
        if scan.torn.is_none() || repair {
            let tail = Tail {
                len: scan.committed_len,
                next_seq: scan.count,
            };
            tails.insert(id.to_owned(), tail);
        }
        drop(tails);
        Ok((path, bytes, scan))
    }

    /// `{sessions: [header + {events, updated_at}], unreadable: [{session_id, path, code,
    /// message}]}`, sorted by id. Reads headers and counts lines; it does not validate every
    /// record. A `.jsonl` file whose name is not a session id is unreadable too
    /// (`session_id: null`), never skipped silently.
    ///
    /// # Errors
    /// `SESSION_IO` when the root cannot be read.
    pub fn list(&self) -> Result<StoredListing, JsonlError> {
        let entries = match std::fs::read_dir(&self.root) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(StoredListing::default());
            }
            Err(e) => return Err(JsonlError::io("read directory", &self.root, e)),
        };
        let mut ids = Vec::new();
        let mut unreadable = Vec::new();
        for entry in entries.filter_map(|e| e.ok()) {
            let name = entry.file_name();
            let Some(stem) = name.as_encoded_bytes().strip_suffix(b".jsonl") else {
                continue;
            };
            match std::str::from_utf8(stem) {
                Ok(id) if args::check_id(id).is_ok() => ids.push(id.to_owned()),
                _ => {
                    let path = entry.path();
                    unreadable.push(StoredUnreadable {
                        session_id: None,
                        path: path.to_string_lossy().into_owned(),
                        code: SessionCode::Invalid.code().to_owned(),
                        message: format!(
                            "{}: the file name is not a session id ([A-Za-z0-9_-]{{1,128}}.jsonl)",
                            path.display()
                        ),
                    });
                }
            }
        }
        ids.sort();
        let mut sessions = Vec::new();
        for id in ids {
            match self.summary(&id) {
                Ok(entry) => sessions.push(entry),
                Err(e) => unreadable.push(StoredUnreadable {
                    path: self.session_path(&id).to_string_lossy().into_owned(),
                    session_id: Some(id),
                    code: e.code().code().to_owned(),
                    message: e.to_string(),
                }),
            }
        }
        Ok(StoredListing {
            sessions,
            unreadable,
        })
    }

    fn summary(&self, id: &str) -> Result<ListedSession, JsonlError> {
        let path = self.session_path(id);
        let file = File::open(&path).map_err(|e| JsonlError::io("open", &path, e))?;
        let modified = file
            .metadata()
            .and_then(|m| m.modified())
            .map_err(|e| JsonlError::io("stat", &path, e))?;
        let updated_at = modified
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut reader = BufReader::with_capacity(1 << 16, file);
        let mut line = Vec::new();
        reader
            .read_until(b'\n', &mut line)
            .map_err(|e| JsonlError::io("read", &path, e))?;
        let trimmed = line.strip_suffix(b"\n").unwrap_or(&line);
        let header = scan::header(&path, id, trimmed)?;
        let mut events = 0_u64;
        loop {
            let buf = reader
                .fill_buf()
                .map_err(|e| JsonlError::io("read", &path, e))?;
            if buf.is_empty() {
                break;
            }
            events += buf.iter().filter(|&&b| b == b'\n').count() as u64;
            let n = buf.len();
            reader.consume(n);
        }
        Ok(ListedSession {
            header,
            events,
            updated_at,
            live: false,
        })
    }
}

/// The `keel.session-store` contract over this store (run on the plugin's thread).
impl Backend for JsonlStore {
    fn append(&self, request: AppendBatch) -> SdkResult<BatchStored> {
        let a = args::append(request, |id| self.session_path(id)).map_err(JsonlError::from)?;
        Ok(BatchStored {
            next_seq: JsonlStore::append(self, a)?,
        })
    }

    fn load(&self, request: LoadStored) -> SdkResult<StoredLog> {
        Ok(crate::answer::load(self, request)?)
    }

    fn list(&self) -> SdkResult<StoredListing> {
        Ok(JsonlStore::list(self)?)
    }

    fn claim(&self, request: SessionRef) -> SdkResult<()> {
        let id = args::session_id(request).map_err(JsonlError::from)?;
        self.ensure_root()?;
        self.locks
            .claim(&self.root, &id)
            .map_err(JsonlError::from)?;
        Ok(())
    }

    fn release(&self, request: SessionRef) -> SdkResult<()> {
        let id = args::session_id(request).map_err(JsonlError::from)?;
        self.locks.release(&id);
        Ok(())
    }
}

/// One line per event.
fn encode(events: &[Arc<EventRecord>]) -> Result<Vec<u8>, JsonlError> {
    let mut buf = Vec::with_capacity(events.len() * 160);
    for e in events {
        serde_json::to_writer(&mut buf, &**e)
            .map_err(|e| JsonlError::invalid(format!("event: {e}")))?;
        buf.push(b'\n');
    }
    Ok(buf)
}
