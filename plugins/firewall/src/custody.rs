//! Custody of the master key (issue 10 item 3; docs/security.md, "The master key").
//!
//! `master.key` holds the key in one of two forms:
//! - **file** (the default): the raw 32 bytes, mode 0600. Only the fences keep it from a
//!   same-user process: `$KEEL_HOME` is masked, ungranted and refused to every tool, and keel
//!   itself is non-dumpable. A same-user process outside every fence (`danger-full-access`, a
//!   profile without a sandbox row) can read it.
//! - **passphrase**: when `KEEL_SECRETS_PASSPHRASE` is set, the key is sealed under a
//!   key-encryption key derived from the passphrase with Argon2id (19 MiB, 2 passes: OWASP's
//!   minimum), a random salt, XChaCha20-Poly1305 over it. The file then opens nothing by
//!   itself: a same-user process that reads it anyway gets a sealed blob, and the passphrase
//!   lives only in keel's (non-dumpable) memory for the run. A raw key is sealed in place the
//!   first time keel runs with the passphrase set.
//!
//! Why not the kernel keyring: keys that outlive the process sit in the user or persistent
//! keyring, which every process of the same user can link into its session and read; keys
//! that do not outlive it vanish at reboot. Without user input (a passphrase) or hardware,
//! Linux has no place a same-user process cannot reach that also survives a reboot.

use argon2::{Algorithm, Argon2, Params, Version};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::rand_core::RngCore as _;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use serde::{Deserialize, Serialize};

use crate::codec::MASTER_KEY_LEN;
use crate::error::{FirewallError, codes};

/// The variable that holds the passphrase (never a file: a file would sit beside the key).
pub const PASSPHRASE_VAR: &str = "KEEL_SECRETS_PASSPHRASE";

/// Argon2id memory, KiB (19 MiB), passes and lanes.
const M_KIB: u32 = 19_456;
const T_COST: u32 = 2;
const P_COST: u32 = 1;
const SALT_LEN: usize = 16;
const NONCE_LEN: usize = 24;
/// Binds the sealed key to its use.
const AAD: &[u8] = b"keel master key v2";
const FORMAT: u32 = 2;

/// A passphrase held in memory. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Passphrase(String);

impl Passphrase {
    /// Wraps a passphrase; `None` for an empty one (empty counts as unset).
    pub fn new(text: String) -> Option<Passphrase> {
        (!text.is_empty()).then_some(Passphrase(text))
    }
}

impl std::fmt::Debug for Passphrase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Passphrase(<redacted>)")
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct SealedKey {
    version: u32,
    kdf: Kdf,
    /// base64(nonce ‖ ciphertext ‖ tag).
    sealed: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Kdf {
    alg: String,
    m_kib: u32,
    t: u32,
    p: u32,
    /// base64.
    salt: String,
}

fn corrupt(what: &str) -> FirewallError {
    FirewallError::new(
        codes::SECRETS_CORRUPT,
        format!("master.key is not a sealed key: {what}"),
    )
}

fn kek(passphrase: &Passphrase, kdf: &Kdf) -> Result<[u8; 32], FirewallError> {
    let salt = STANDARD
        .decode(&kdf.salt)
        .map_err(|_| corrupt("bad salt"))?;
    let params =
        Params::new(kdf.m_kib, kdf.t, kdf.p, Some(32)).map_err(|e| corrupt(&e.to_string()))?;
    let mut out = [0u8; 32];
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password_into(passphrase.0.as_bytes(), &salt, &mut out)
        .map_err(|e| corrupt(&e.to_string()))?;
    Ok(out)
}

/// `master` sealed under `passphrase`: the bytes `master.key` holds in passphrase custody.
///
/// # Errors
/// `SECRETS_CORRUPT` if the KDF or the AEAD refuses (they do not for these sizes).
pub fn seal(
    master: &[u8; MASTER_KEY_LEN],
    passphrase: &Passphrase,
) -> Result<Vec<u8>, FirewallError> {
    let mut salt = [0u8; SALT_LEN];
    OsRng.fill_bytes(&mut salt);
    let kdf = Kdf {
        alg: "argon2id".to_owned(),
        m_kib: M_KIB,
        t: T_COST,
        p: P_COST,
        salt: STANDARD.encode(salt),
    };
    let cipher = XChaCha20Poly1305::new(&kek(passphrase, &kdf)?.into());
    let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
    let ct = cipher
        .encrypt(
            &nonce,
            Payload {
                msg: master,
                aad: AAD,
            },
        )
        .map_err(|_| corrupt("sealing failed"))?;
    let mut body = nonce.to_vec();
    body.extend_from_slice(&ct);
    let doc = SealedKey {
        version: FORMAT,
        kdf,
        sealed: STANDARD.encode(body),
    };
    let mut bytes = serde_json::to_vec_pretty(&doc).map_err(|e| corrupt(&e.to_string()))?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Whether `bytes` (the content of `master.key`) is a sealed key rather than a raw one.
pub fn is_sealed(bytes: &[u8]) -> bool {
    bytes.len() != MASTER_KEY_LEN && bytes.first() == Some(&b'{')
}

/// The master key in `bytes`: raw, or sealed and opened with `passphrase`.
///
/// # Errors
/// `SECRETS_LOCKED` for a sealed key without a passphrase or with the wrong one;
/// `SECRETS_CORRUPT` for anything that is neither form.
pub fn open(
    bytes: &[u8],
    passphrase: Option<&Passphrase>,
) -> Result<[u8; MASTER_KEY_LEN], FirewallError> {
    if !is_sealed(bytes) {
        return <[u8; MASTER_KEY_LEN]>::try_from(bytes)
            .map_err(|_| corrupt(&format!("neither a {MASTER_KEY_LEN}-byte key nor sealed")));
    }
    let doc: SealedKey = serde_json::from_slice(bytes).map_err(|e| corrupt(&e.to_string()))?;
    if doc.version != FORMAT || doc.kdf.alg != "argon2id" {
        return Err(corrupt(&format!(
            "format {} / {} (this keel reads {FORMAT} / argon2id)",
            doc.version, doc.kdf.alg
        )));
    }
    let Some(passphrase) = passphrase else {
        return Err(FirewallError::new(
            codes::SECRETS_LOCKED,
            format!("the master key is sealed with a passphrase: set {PASSPHRASE_VAR}"),
        ));
    };
    let body = STANDARD
        .decode(&doc.sealed)
        .map_err(|_| corrupt("bad base64"))?;
    if body.len() < NONCE_LEN {
        return Err(corrupt("too short"));
    }
    let (nonce, ct) = body.split_at(NONCE_LEN);
    let cipher = XChaCha20Poly1305::new(&kek(passphrase, &doc.kdf)?.into());
    let key = cipher
        .decrypt(XNonce::from_slice(nonce), Payload { msg: ct, aad: AAD })
        .map_err(|_| {
            FirewallError::new(
                codes::SECRETS_LOCKED,
                format!("{PASSPHRASE_VAR} does not open the master key (wrong passphrase?)"),
            )
        })?;
    <[u8; MASTER_KEY_LEN]>::try_from(key.as_slice()).map_err(|_| corrupt("wrong key length"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::random_master_key;

    fn pw(s: &str) -> Passphrase {
        Passphrase::new(s.to_owned()).unwrap()
    }

    // Issue 10 item 3: a sealed key opens only with its passphrase and holds no raw key.
    #[test]
    fn a_sealed_key_opens_only_with_its_passphrase() {
        let master = random_master_key();
        let sealed = seal(&master, &pw("correct horse")).unwrap();
        assert!(is_sealed(&sealed));
        assert!(
            !sealed.windows(MASTER_KEY_LEN).any(|w| w == master),
            "the raw key is in the file"
        );
        assert_eq!(open(&sealed, Some(&pw("correct horse"))).unwrap(), master);
        let e = open(&sealed, Some(&pw("wrong"))).unwrap_err();
        assert_eq!(e.code, codes::SECRETS_LOCKED);
        let e = open(&sealed, None).unwrap_err();
        assert_eq!(e.code, codes::SECRETS_LOCKED);
        assert!(e.message.contains(PASSPHRASE_VAR), "{}", e.message);
        // Two seals of one key differ (fresh salt and nonce).
        assert_ne!(sealed, seal(&master, &pw("correct horse")).unwrap());
    }

    // Issue 10 item 3 through the store: a raw key is sealed in place and keeps its values;
    // without the passphrase the store is locked, with the wrong one too.
    #[test]
    fn the_store_seals_a_raw_key_and_stays_locked_without_the_passphrase() {
        use crate::store::{SecretStore, SecretValue};
        let dir = tempfile::tempdir().unwrap();
        let plain = SecretStore::new(dir.path());
        plain.set("TOKEN", &SecretValue::new("v-123456")).unwrap();
        let raw = std::fs::read(dir.path().join("master.key")).unwrap();
        assert_eq!(raw.len(), MASTER_KEY_LEN);

        let sealed = SecretStore::new(dir.path()).with_passphrase(Some(pw("pass phrase")));
        assert!(sealed.seal_master().unwrap());
        assert!(!sealed.seal_master().unwrap(), "sealed once");
        let on_disk = std::fs::read(dir.path().join("master.key")).unwrap();
        assert!(is_sealed(&on_disk));
        assert!(!on_disk.windows(MASTER_KEY_LEN).any(|w| w == raw.as_slice()));
        assert_eq!(sealed.load().unwrap()["TOKEN"].expose(), "v-123456");

        let e = plain.load().unwrap_err();
        assert_eq!(e.code, codes::SECRETS_LOCKED);
        let wrong = SecretStore::new(dir.path()).with_passphrase(Some(pw("guess")));
        assert_eq!(wrong.load().unwrap_err().code, codes::SECRETS_LOCKED);

        // A fresh store with a passphrase creates a sealed key from the start.
        let fresh = tempfile::tempdir().unwrap();
        let store = SecretStore::new(fresh.path()).with_passphrase(Some(pw("p")));
        store.set("A", &SecretValue::new("value-a")).unwrap();
        assert!(is_sealed(
            &std::fs::read(fresh.path().join("master.key")).unwrap()
        ));
        assert_eq!(store.load().unwrap()["A"].expose(), "value-a");
    }

    #[test]
    fn raw_keys_still_open_and_garbage_is_corrupt() {
        let master = random_master_key();
        assert_eq!(open(&master, None).unwrap(), master);
        assert_eq!(open(&master, Some(&pw("x"))).unwrap(), master);
        assert_eq!(
            open(b"short", None).unwrap_err().code,
            codes::SECRETS_CORRUPT
        );
        assert_eq!(
            open(b"{nope", None).unwrap_err().code,
            codes::SECRETS_CORRUPT
        );
        let mut sealed = seal(&master, &pw("p")).unwrap();
        let text = String::from_utf8(sealed.clone()).unwrap();
        sealed = text
            .replace("\"version\": 2", "\"version\": 9")
            .into_bytes();
        assert_eq!(
            open(&sealed, Some(&pw("p"))).unwrap_err().code,
            codes::SECRETS_CORRUPT
        );
        assert!(Passphrase::new(String::new()).is_none());
        assert_eq!(format!("{:?}", pw("secret")), "Passphrase(<redacted>)");
    }
}
