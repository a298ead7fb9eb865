//! The managed layer, `$KEEL_HOME/credentials.toml` (`file`): a strict TOML table of
//! `REF = "string"`, mode 0600.
//!
//! Reads take no lock: writers replace the file by rename, so a reader sees the old or the new
//! file whole. Writes take an exclusive `flock` on `credentials.toml.lock` (cross-process),
//! re-read the file under it, patch only their own key, write a temp file in the same directory
//! (0600, fsynced), rename it over the file and fsync the directory: concurrent writers of
//! different keys both survive (B13).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use keel_plugin_api::sdk::Error;
use keel_plugin_api::services::credentials::{CredentialCode, is_valid_reference};

/// The file name under `$KEEL_HOME`.
pub const FILE_NAME: &str = "credentials.toml";
/// The lock file beside it.
pub const LOCK_NAME: &str = "credentials.toml.lock";

const HEADER: &str = "# Managed by keel (`keel credentials`): REFERENCE = \"value\". Mode 0600.\n";

/// The parsed file: reference → value (empty values kept; callers treat them as absent).
pub type Entries = BTreeMap<String, String>;

/// Reads and validates the file at `path` (missing → empty).
///
/// # Errors
/// `CREDENTIALS_FILE` naming the file (and line) when it is unreadable or not a strict table of
/// valid references to strings. Messages never quote values.
pub fn read(path: &Path) -> Result<Entries, Error> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Entries::new()),
        Err(e) => {
            return Err(Error::coded(
                CredentialCode::File,
                format!("cannot read {}: {e}", path.display()),
            ));
        }
    };
    let bad = |offset: Option<usize>, what: String| {
        let at = offset.map_or_else(String::new, |o| format!(" line {}", line_of(&text, o)));
        Error::coded(
            CredentialCode::File,
            format!("{}:{at}: {what}", path.display()),
        )
    };
    // `message()` only: the error's Display quotes the offending source line, which may hold
    // a secret.
    let table: BTreeMap<String, toml::Spanned<toml::Value>> = toml::from_str(&text)
        .map_err(|e| bad(e.span().map(|s| s.start), e.message().to_owned()))?;
    let mut entries = Entries::new();
    for (key, value) in table {
        let start = value.span().start;
        if !is_valid_reference(&key) {
            return Err(bad(
                Some(start),
                format!("'{key}' is not a valid reference ([A-Z_][A-Z0-9_]*)"),
            ));
        }
        match value.into_inner() {
            toml::Value::String(s) => {
                entries.insert(key, s);
            }
            other => {
                return Err(bad(
                    Some(start),
                    format!("{key} must be a string, found {}", other.type_str()),
                ));
            }
        }
    }
    Ok(entries)
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(offset)
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

fn io(what: &str, path: &Path, e: &std::io::Error) -> Error {
    Error::coded(
        CredentialCode::Io,
        format!("{what} {}: {e}", path.display()),
    )
}

/// Applies `patch` to the file in `home` under the cross-process lock: re-read, patch, write a
/// 0600 temp file, fsync, rename, fsync the directory.
///
/// # Errors
/// `CREDENTIALS_FILE` when the current file is malformed (nothing is written);
/// `CREDENTIALS_IO` for lock/write/rename failures.
pub fn update(home: &Path, patch: impl FnOnce(&mut Entries)) -> Result<(), Error> {
    std::fs::create_dir_all(home).map_err(|e| io("cannot create", home, &e))?;
    let lock_path = home.join(LOCK_NAME);
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&lock_path)
        .map_err(|e| io("cannot open", &lock_path, &e))?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| io("cannot lock", &lock_path, &e.into()))?;
    let path = home.join(FILE_NAME);
    let mut entries = read(&path)?;
    patch(&mut entries);
    let text = render(&entries)?;
    let tmp = temp_path(home);
    let written = write_synced(&tmp, &text).and_then(|()| {
        std::fs::rename(&tmp, &path).map_err(|e| io("cannot rename onto", &path, &e))
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    File::open(home)
        .and_then(|d| d.sync_all())
        .map_err(|e| io("cannot fsync", home, &e))?;
    // The lock is released when `lock` is dropped (closing its descriptor).
    drop(lock);
    Ok(())
}

fn render(entries: &Entries) -> Result<String, Error> {
    let body = toml::to_string(entries).map_err(|e| {
        Error::coded(
            CredentialCode::Io,
            format!("cannot encode {FILE_NAME}: {e}"),
        )
    })?;
    Ok(format!("{HEADER}{body}"))
}

fn temp_path(home: &Path) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    home.join(format!(".{FILE_NAME}.{}.{nanos}.tmp", std::process::id()))
}

fn write_synced(path: &Path, text: &str) -> Result<(), Error> {
    let mut f = OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| io("cannot create", path, &e))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| io("cannot write", path, &e))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn sec_08_write_is_mode_0600_and_round_trips() {
        let d = tempfile::tempdir().unwrap();
        update(d.path(), |e| {
            e.insert("A_KEY".into(), "va\"lue\n".into());
        })
        .unwrap();
        let path = d.path().join(FILE_NAME);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(read(&path).unwrap()["A_KEY"], "va\"lue\n");
    }

    #[test]
    fn b13_patch_keeps_other_keys() {
        let d = tempfile::tempdir().unwrap();
        update(d.path(), |e| {
            e.insert("A".into(), "1".into());
        })
        .unwrap();
        update(d.path(), |e| {
            e.insert("B".into(), "2".into());
        })
        .unwrap();
        let got = read(&d.path().join(FILE_NAME)).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got["A"], "1");
    }

    #[test]
    fn sec_11_malformed_toml_names_file_and_line_without_the_value() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join(FILE_NAME);
        std::fs::write(&path, "A = \"ok\"\n\nB = sk-secret-unquoted\n").unwrap();
        let e = read(&path).unwrap_err();
        assert_eq!(e.code, CredentialCode::File.code());
        assert!(
            e.message.contains(&path.display().to_string()),
            "{}",
            e.message
        );
        assert!(e.message.contains("line 3"), "{}", e.message);
        assert!(!e.message.contains("sk-secret"), "{}", e.message);
    }

    #[test]
    fn strict_table_rejects_non_strings_and_bad_names() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join(FILE_NAME);
        std::fs::write(&path, "A = \"x\"\nB = 3\n").unwrap();
        let e = read(&path).unwrap_err();
        assert!(
            e.message.contains("line 2") && e.message.contains("B must be a string"),
            "{}",
            e.message
        );
        std::fs::write(&path, "lower = \"x\"\n").unwrap();
        let e = read(&path).unwrap_err();
        assert!(e.message.contains("not a valid reference"), "{}", e.message);
        std::fs::write(&path, "[T]\nA = \"x\"\n").unwrap();
        assert_eq!(read(&path).unwrap_err().code, CredentialCode::File.code());
    }

    #[test]
    fn malformed_file_is_never_overwritten() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join(FILE_NAME);
        std::fs::write(&path, "A = = \n").unwrap();
        let e = update(d.path(), |e| {
            e.insert("B".into(), "2".into());
        })
        .unwrap_err();
        assert_eq!(e.code, CredentialCode::File.code());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "A = = \n");
    }

    #[test]
    fn b13_concurrent_writers_of_different_keys_all_survive() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().to_path_buf();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let home = home.clone();
                std::thread::spawn(move || {
                    for i in 0..25 {
                        update(&home, |e| {
                            e.insert(format!("K_{t}_{i}"), format!("v{t}{i}"));
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let got = read(&home.join(FILE_NAME)).unwrap();
        assert_eq!(got.len(), 100);
        assert_eq!(got["K_3_24"], "v324");
    }
}
