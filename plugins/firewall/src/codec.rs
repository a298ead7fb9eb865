//! The store's codec (requirements SEC-05): XChaCha20-Poly1305 with a random 24-byte nonce per
//! value, under a key derived from the master key per use ("domain") with blake3's
//! `derive_key`. Each use has its own domain, so ciphertext sealed for one use never opens in
//! another. The store delegates all cryptography here and never sees a derived key.

use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

use crate::error::{FirewallError, codes};

/// Length of the master key in bytes.
pub const MASTER_KEY_LEN: usize = 32;
const NONCE_LEN: usize = 24;

/// A use of the master key. Two uses never share a domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    /// The secrets store (`keel security/variables`).
    Variables,
    /// Config at rest (`keel config-at-rest`).
    ConfigAtRest,
}

impl Domain {
    /// The blake3 key-derivation context.
    pub fn context(self) -> &'static str {
        match self {
            Domain::Variables => "keel security/variables",
            Domain::ConfigAtRest => "keel config-at-rest",
        }
    }
}

/// Seals and opens values for one [`Domain`].
pub struct Codec {
    cipher: XChaCha20Poly1305,
    domain: Domain,
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Codec")
            .field("domain", &self.domain)
            .finish_non_exhaustive()
    }
}

impl Codec {
    /// The codec of `domain` under `master`.
    pub fn new(master: &[u8; MASTER_KEY_LEN], domain: Domain) -> Self {
        let key = blake3::derive_key(domain.context(), master);
        Codec {
            cipher: XChaCha20Poly1305::new(&key.into()),
            domain,
        }
    }

    /// `nonce ‖ ciphertext ‖ tag` of `plaintext`, bound to `aad` (the secret's name).
    ///
    /// # Errors
    /// `SECRETS_CORRUPT` if the AEAD refuses (it does not for in-memory sizes).
    pub fn seal(&self, plaintext: &[u8], aad: &[u8]) -> Result<Vec<u8>, FirewallError> {
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let ct = self
            .cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: plaintext,
                    aad,
                },
            )
            .map_err(|_| FirewallError::new(codes::SECRETS_CORRUPT, "encryption failed"))?;
        let mut out = Vec::with_capacity(NONCE_LEN + ct.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ct);
        Ok(out)
    }

    /// Opens what [`Codec::seal`] produced for the same domain, master key and `aad`.
    ///
    /// # Errors
    /// `SECRETS_CORRUPT` when it is too short or does not authenticate (another domain, another
    /// master key, another name, or tampering).
    pub fn open(&self, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>, FirewallError> {
        let fail = || {
            FirewallError::new(
                codes::SECRETS_CORRUPT,
                format!(
                    "a value does not open under the '{}' key (wrong master key, domain or tampering)",
                    self.domain.context()
                ),
            )
        };
        if sealed.len() < NONCE_LEN {
            return Err(fail());
        }
        let (nonce, ct) = sealed.split_at(NONCE_LEN);
        self.cipher
            .decrypt(XNonce::from_slice(nonce), Payload { msg: ct, aad })
            .map_err(|_| fail())
    }
}

/// 32 fresh random bytes for a master key.
pub fn random_master_key() -> [u8; MASTER_KEY_LEN] {
    XChaCha20Poly1305::generate_key(&mut OsRng).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_round_trip_with_fresh_nonces() {
        let master = random_master_key();
        let c = Codec::new(&master, Domain::Variables);
        let a = c.seal(b"hunter2", b"PW").unwrap();
        let b = c.seal(b"hunter2", b"PW").unwrap();
        assert_ne!(a, b, "a random nonce per value");
        assert_eq!(c.open(&a, b"PW").unwrap(), b"hunter2");
        assert!(!a.windows(7).any(|w| w == b"hunter2"));
    }

    #[test]
    fn sec05_variables_ciphertext_does_not_open_in_config_at_rest() {
        let master = random_master_key();
        let vars = Codec::new(&master, Domain::Variables);
        let cfg = Codec::new(&master, Domain::ConfigAtRest);
        let sealed = vars.seal(b"the value", b"N").unwrap();
        let e = cfg.open(&sealed, b"N").unwrap_err();
        assert_eq!(e.code, codes::SECRETS_CORRUPT);
        assert!(e.message.contains("keel config-at-rest"));
        // And the other way round.
        let sealed = cfg.seal(b"the value", b"N").unwrap();
        assert!(vars.open(&sealed, b"N").is_err());
        assert_ne!(Domain::Variables.context(), Domain::ConfigAtRest.context());
    }

    #[test]
    fn a_value_is_bound_to_its_name_and_master_key() {
        let master = random_master_key();
        let c = Codec::new(&master, Domain::Variables);
        let sealed = c.seal(b"v", b"A").unwrap();
        assert!(c.open(&sealed, b"B").is_err());
        let other = Codec::new(&random_master_key(), Domain::Variables);
        assert!(other.open(&sealed, b"A").is_err());
        assert!(c.open(&sealed[..10], b"A").is_err());
        let mut tampered = sealed;
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert!(c.open(&tampered, b"A").is_err());
    }
}
