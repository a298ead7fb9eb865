//! The encrypted secrets store (ARCHITECTURE §9): `<dir>/master.key` (32 random bytes, 0600,
//! created atomically on first write) and `<dir>/store.json` (`{"version":1,"secrets":{NAME:
//! base64(nonce ‖ ciphertext)}}`, written atomically, 0600) in a 0700 directory, normally
//! `$KEEL_HOME/secrets`. Encryption is the [`Codec`]'s (domain `keel security/variables`, the
//! name bound as associated data). Values only ever leave this module as [`SecretValue`]s, whose
//! `Debug` is redacted.
//!
//! Concurrent writers in different processes are not serialised (last rename wins).

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use crate::codec::{Codec, Domain, MASTER_KEY_LEN, random_master_key};
use crate::custody::{self, Passphrase};
use crate::error::{FirewallError, codes};

const MASTER: &str = "master.key";
const STORE: &str = "store.json";

/// A secret's value. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        SecretValue(value.into())
    }

    /// The value (for the fill and the scrubber only).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretValue(<redacted>)")
    }
}

/// Checks a secret name: `[A-Za-z0-9_]{1,64}`.
///
/// # Errors
/// `SECRET_NAME_INVALID`.
pub fn validate_name(name: &str) -> Result<(), FirewallError> {
    let ok = (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(FirewallError::new(
            codes::SECRET_NAME_INVALID,
            format!("invalid secret name {name:?}: use 1 to 64 of A-Z a-z 0-9 _"),
        ))
    }
}

/// The alias the model sees for `name`.
pub fn alias(name: &str) -> String {
    format!("sec_{name}")
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct StoreFile {
    version: u32,
    secrets: BTreeMap<String, String>,
}

/// The store at one directory.
#[derive(Debug, Clone)]
pub struct SecretStore {
    dir: PathBuf,
    /// Opens (and seals) a passphrase-custody master key ([`crate::custody`]).
    passphrase: Option<Passphrase>,
}

impl SecretStore {
    /// The store in `dir` (nothing is touched until used).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        SecretStore {
            dir: dir.into(),
            passphrase: None,
        }
    }

    /// The store with the master key in passphrase custody: opened with `passphrase`, and a
    /// new or raw key sealed under it ([`SecretStore::seal_master`]).
    #[must_use]
    pub fn with_passphrase(mut self, passphrase: Option<Passphrase>) -> Self {
        self.passphrase = passphrase;
        self
    }

    /// Seals a raw `master.key` under the passphrase, in place (atomic rename); a no-op
    /// without a passphrase, without a key, or for a key sealed already.
    ///
    /// # Errors
    /// `SECRETS_IO`, `SECRETS_CORRUPT`.
    pub fn seal_master(&self) -> Result<bool, FirewallError> {
        let Some(passphrase) = &self.passphrase else {
            return Ok(false);
        };
        let path = self.dir.join(MASTER);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => {
                return Err(FirewallError::io(
                    &format!("reading {}", path.display()),
                    &e,
                ));
            }
        };
        if custody::is_sealed(&bytes) {
            return Ok(false);
        }
        let key = custody::open(&bytes, None)?;
        let tmp = self.write_temp(MASTER, &custody::seal(&key, passphrase)?)?;
        if let Err(e) = fs::rename(&tmp, &path) {
            let _ = fs::remove_file(&tmp);
            return Err(FirewallError::io("sealing master.key", &e));
        }
        self.sync_dir();
        Ok(true)
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What identifies the store file's current version without reading it: inode, size and
    /// modification time (`None` while there is no file). A `set` or `rm` renames a new file
    /// into place, so the inode changes even within one mtime tick.
    pub fn stamp(&self) -> Option<(u64, u64, std::time::SystemTime)> {
        use std::os::unix::fs::MetadataExt as _;
        let m = fs::metadata(self.dir.join(STORE)).ok()?;
        Some((m.ino(), m.len(), m.modified().ok()?))
    }

    fn read_file(&self) -> Result<StoreFile, FirewallError> {
        let path = self.dir.join(STORE);
        match fs::read(&path) {
            Ok(bytes) => {
                let file: StoreFile = serde_json::from_slice(&bytes).map_err(|e| {
                    FirewallError::new(
                        codes::SECRETS_CORRUPT,
                        format!("{} is not a secrets store: {e}", path.display()),
                    )
                })?;
                if file.version != 1 {
                    return Err(FirewallError::new(
                        codes::SECRETS_CORRUPT,
                        format!(
                            "{} has unsupported version {}",
                            path.display(),
                            file.version
                        ),
                    ));
                }
                Ok(file)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StoreFile {
                version: 1,
                secrets: BTreeMap::new(),
            }),
            Err(e) => Err(FirewallError::io(
                &format!("reading {}", path.display()),
                &e,
            )),
        }
    }

    fn read_master(&self) -> Result<Option<[u8; MASTER_KEY_LEN]>, FirewallError> {
        let path = self.dir.join(MASTER);
        match fs::read(&path) {
            Ok(bytes) => custody::open(&bytes, self.passphrase.as_ref()).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(FirewallError::io(
                &format!("reading {}", path.display()),
                &e,
            )),
        }
    }

    fn ensure_dir(&self) -> Result<(), FirewallError> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| FirewallError::io(&format!("creating {}", self.dir.display()), &e))
    }

    /// The master key, created on first use: written to a temporary 0600 file, then linked
    /// into place without replacing, so two first writers agree on one key.
    fn master_or_create(&self) -> Result<[u8; MASTER_KEY_LEN], FirewallError> {
        if let Some(key) = self.read_master()? {
            return Ok(key);
        }
        self.ensure_dir()?;
        let key = random_master_key();
        let stored = match &self.passphrase {
            Some(p) => custody::seal(&key, p)?,
            None => key.to_vec(),
        };
        let tmp = self.write_temp(MASTER, &stored)?;
        let linked = fs::hard_link(&tmp, self.dir.join(MASTER));
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => {
                self.sync_dir();
                Ok(key)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => self
                .read_master()?
                .ok_or_else(|| FirewallError::new(codes::SECRETS_IO, "master key vanished")),
            Err(e) => Err(FirewallError::io("installing the master key", &e)),
        }
    }

    fn write_temp(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, FirewallError> {
        let tmp = self
            .dir
            .join(format!(".{name}.{}.{}", std::process::id(), nonce_suffix()));
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| FirewallError::io(&format!("creating {}", tmp.display()), &e))?;
        let written = f.write_all(bytes).and_then(|()| f.sync_all());
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(FirewallError::io(&format!("writing {}", tmp.display()), &e));
        }
        Ok(tmp)
    }

    fn sync_dir(&self) {
        if let Ok(d) = fs::File::open(&self.dir) {
            let _ = d.sync_all();
        }
    }

    fn write_file(&self, file: &StoreFile) -> Result<(), FirewallError> {
        self.ensure_dir()?;
        let bytes = serde_json::to_vec_pretty(file)
            .map_err(|e| FirewallError::new(codes::SECRETS_IO, e.to_string()))?;
        let tmp = self.write_temp(STORE, &bytes)?;
        if let Err(e) = fs::rename(&tmp, self.dir.join(STORE)) {
            let _ = fs::remove_file(&tmp);
            return Err(FirewallError::io("replacing store.json", &e));
        }
        self.sync_dir();
        Ok(())
    }

    /// Stored names, sorted (nothing is decrypted).
    ///
    /// # Errors
    /// `SECRETS_IO`, `SECRETS_CORRUPT`.
    pub fn names(&self) -> Result<Vec<String>, FirewallError> {
        Ok(self.read_file()?.secrets.into_keys().collect())
    }

    /// Every secret, decrypted. An absent store is empty; a store without its master key is
    /// corrupt.
    ///
    /// # Errors
    /// `SECRETS_IO`, `SECRETS_CORRUPT`.
    pub fn load(&self) -> Result<BTreeMap<String, SecretValue>, FirewallError> {
        let file = self.read_file()?;
        if file.secrets.is_empty() {
            return Ok(BTreeMap::new());
        }
        let master = self.read_master()?.ok_or_else(|| {
            FirewallError::new(
                codes::SECRETS_CORRUPT,
                format!(
                    "{} holds secrets but {MASTER} is missing",
                    self.dir.display()
                ),
            )
        })?;
        let codec = Codec::new(&master, Domain::Variables);
        let mut out = BTreeMap::new();
        for (name, sealed) in file.secrets {
            let corrupt = |why: &str| {
                FirewallError::new(codes::SECRETS_CORRUPT, format!("secret {name}: {why}"))
            };
            let bytes = STANDARD
                .decode(sealed.as_bytes())
                .map_err(|_| corrupt("not base64"))?;
            let plain = codec.open(&bytes, name.as_bytes())?;
            let value = String::from_utf8(plain).map_err(|_| corrupt("not UTF-8"))?;
            out.insert(name, SecretValue(value));
        }
        Ok(out)
    }

    /// Stores (or replaces) `name`.
    ///
    /// # Errors
    /// `SECRET_NAME_INVALID`, `SECRET_EMPTY`, `SECRETS_IO`, `SECRETS_CORRUPT`.
    pub fn set(&self, name: &str, value: &SecretValue) -> Result<(), FirewallError> {
        validate_name(name)?;
        if value.0.is_empty() {
            return Err(FirewallError::new(
                codes::SECRET_EMPTY,
                format!("the value for {name} is empty"),
            ));
        }
        let mut file = self.read_file()?;
        let master = self.master_or_create()?;
        let sealed =
            Codec::new(&master, Domain::Variables).seal(value.0.as_bytes(), name.as_bytes())?;
        file.secrets
            .insert(name.to_owned(), STANDARD.encode(sealed));
        self.write_file(&file)
    }

    /// Deletes `name`.
    ///
    /// # Errors
    /// `SECRET_NAME_INVALID`, `SECRET_NOT_FOUND`, `SECRETS_IO`, `SECRETS_CORRUPT`.
    pub fn remove(&self, name: &str) -> Result<(), FirewallError> {
        validate_name(name)?;
        let mut file = self.read_file()?;
        if file.secrets.remove(name).is_none() {
            return Err(FirewallError::new(
                codes::SECRET_NOT_FOUND,
                format!("no secret named {name}"),
            ));
        }
        self.write_file(&file)
    }
}

fn nonce_suffix() -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{n:x}")
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn names_are_validated() {
        for ok in ["A", "api_KEY_2", &"x".repeat(64)] {
            validate_name(ok).unwrap();
        }
        for bad in ["", "a-b", "a b", "é", &"x".repeat(65)] {
            assert_eq!(
                validate_name(bad).unwrap_err().code,
                codes::SECRET_NAME_INVALID
            );
        }
        assert_eq!(alias("TOKEN"), "sec_TOKEN");
    }

    #[test]
    fn set_load_remove_on_disk_with_private_modes_and_no_plaintext() {
        let home = tempfile::tempdir().unwrap();
        let store = SecretStore::new(home.path().join("secrets"));
        assert!(store.load().unwrap().is_empty());
        assert!(!store.dir().exists(), "nothing is created by reading");

        store.set("API", &SecretValue::new("s3cr3t-value")).unwrap();
        store.set("OTHER", &SecretValue::new("second")).unwrap();
        let dir = store.dir();
        assert_eq!(mode(dir), 0o700);
        assert_eq!(mode(&dir.join(MASTER)), 0o600);
        assert_eq!(mode(&dir.join(STORE)), 0o600);
        assert_eq!(fs::read(dir.join(MASTER)).unwrap().len(), 32);
        let text = fs::read_to_string(dir.join(STORE)).unwrap();
        assert!(!text.contains("s3cr3t"), "SEC-01: no plaintext on disk");
        assert_eq!(fs::read_dir(dir).unwrap().count(), 2, "no temp files left");

        let loaded = SecretStore::new(dir).load().unwrap();
        assert_eq!(loaded["API"].expose(), "s3cr3t-value");
        assert_eq!(format!("{:?}", loaded["API"]), "SecretValue(<redacted>)");
        assert_eq!(store.names().unwrap(), ["API", "OTHER"]);

        store.set("API", &SecretValue::new("rotated")).unwrap();
        assert_eq!(store.load().unwrap()["API"].expose(), "rotated");
        store.remove("API").unwrap();
        assert_eq!(store.names().unwrap(), ["OTHER"]);
        assert_eq!(
            store.remove("API").unwrap_err().code,
            codes::SECRET_NOT_FOUND
        );
        let e = store.set("X", &SecretValue::new("")).unwrap_err();
        assert_eq!(e.code, codes::SECRET_EMPTY);
    }

    #[test]
    fn a_store_without_its_master_key_or_with_swapped_values_is_corrupt() {
        let home = tempfile::tempdir().unwrap();
        let store = SecretStore::new(home.path());
        store.set("A", &SecretValue::new("aaaa")).unwrap();
        store.set("B", &SecretValue::new("bbbb")).unwrap();
        // Swap the two ciphertexts: the name is bound, so neither opens.
        let path = home.path().join(STORE);
        let mut file: StoreFile = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        let (a, b) = (file.secrets["A"].clone(), file.secrets["B"].clone());
        file.secrets.insert("A".into(), b);
        file.secrets.insert("B".into(), a);
        fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();
        assert_eq!(store.load().unwrap_err().code, codes::SECRETS_CORRUPT);

        fs::remove_file(home.path().join(MASTER)).unwrap();
        let e = store.load().unwrap_err();
        assert_eq!(e.code, codes::SECRETS_CORRUPT);
        assert!(e.message.contains("master.key is missing"));
    }
}
