//! The secrets in memory: loaded from the [`SecretStore`] at activation and again whenever
//! `keel secrets` changes the store in this process. Readers take a cheap snapshot
//! ([`Arc<Vault>`]) so a reload never races a fill or a scrub half-way.
//!
//! Beside the secrets, the credentials keel resolved (issue 10 item 2): scrub-only entries,
//! registered by the `credentials` row and kept in memory only. They are scrubbed like
//! secrets but replaced by `[credential REF]`, and the fill never sees them: it looks names up
//! among the secrets alone, so no alias the model writes can bring a credential into a tool.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde_json::Value;

use keel_plugin_api::services::firewall::credential_marker;

use crate::error::FirewallError;
use crate::fill::{fill_str, map_strings};
use crate::scrub::{Scrubber, encodings};
use crate::store::{SecretStore, SecretValue, alias};

/// Resolved credentials: `(reference, value)` pairs, each once, in registration order.
pub type Credentials = Vec<(String, SecretValue)>;

/// One snapshot of the secrets and the registered credentials.
#[derive(Debug)]
pub struct Vault {
    secrets: BTreeMap<String, SecretValue>,
    credentials: Credentials,
    scrubber: Scrubber,
}

impl Vault {
    /// A vault over `secrets` alone.
    ///
    /// # Errors
    /// As [`Scrubber::new`].
    pub fn new(secrets: BTreeMap<String, SecretValue>) -> Result<Self, FirewallError> {
        Self::with_credentials(secrets, Vec::new())
    }

    /// A vault over `secrets` and the scrub-only `credentials`.
    ///
    /// # Errors
    /// As [`Scrubber::new`].
    pub fn with_credentials(
        secrets: BTreeMap<String, SecretValue>,
        credentials: Credentials,
    ) -> Result<Self, FirewallError> {
        let scrubber = Scrubber::from_entries(Self::entries(&secrets, &credentials))?;
        Ok(Vault {
            secrets,
            credentials,
            scrubber,
        })
    }

    /// `(value, replacement)` of everything scrubbed.
    fn entries<'a>(
        secrets: &'a BTreeMap<String, SecretValue>,
        credentials: &'a Credentials,
    ) -> impl Iterator<Item = (&'a str, String)> {
        secrets
            .iter()
            .map(|(name, v)| (v.expose(), alias(name)))
            .chain(
                credentials
                    .iter()
                    .map(|(reference, v)| (v.expose(), credential_marker(reference))),
            )
    }

    /// No secret is stored: nothing to fill (the inbound hook skips its parse).
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Nothing to scrub: no secret and no credential (the outbound hooks skip their parse).
    pub fn scrubs_nothing(&self) -> bool {
        self.secrets.is_empty() && self.credentials.is_empty()
    }

    /// Whether `(reference, value)` is registered.
    pub fn has_credential(&self, reference: &str, value: &str) -> bool {
        self.credentials
            .iter()
            .any(|(r, v)| r == reference && v.expose() == value)
    }

    /// The secret value of `name` (the fill; never a credential).
    pub fn secret(&self, name: &str) -> Option<&str> {
        self.secrets.get(name).map(SecretValue::expose)
    }

    /// Aliases, sorted.
    pub fn aliases(&self) -> Vec<String> {
        self.secrets.keys().map(|n| alias(n)).collect()
    }

    /// Inbound: fills aliases in `text`.
    pub fn fill(&self, text: &str) -> Option<String> {
        fill_str(text, |name| self.secret(name))
    }

    /// Inbound: fills aliases in every string of `value`; true when any changed.
    pub fn fill_json(&self, value: &mut Value) -> bool {
        map_strings(value, &mut |s| self.fill(s))
    }

    /// Outbound: whether anything may need scrubbing in the JSON document `text` (see
    /// [`Scrubber::may_occur_in_json`]).
    pub fn may_occur_in_json(&self, text: &str) -> bool {
        self.scrubber.may_occur_in_json(text)
    }

    /// Outbound: scrubs `text`.
    pub fn scrub(&self, text: &str) -> Option<String> {
        self.scrubber.scrub(text)
    }

    /// Outbound: scrubs every string of `value`; true when any changed.
    pub fn scrub_json(&self, value: &mut Value) -> bool {
        map_strings(value, &mut |s| self.scrub(s))
    }

    /// `(form, alias)` for every scrubbed form of every value: what the kernel replaces in
    /// tracing lines and printed output (SEC-03).
    pub fn redactions(&self) -> Vec<(String, String)> {
        Self::entries(&self.secrets, &self.credentials)
            .flat_map(|(value, replacement)| {
                encodings(value)
                    .into_iter()
                    .map(move |form| (form, replacement.clone()))
            })
            .collect()
    }

    /// The aliases of the secrets found in `text`.
    pub fn findings(&self, text: &str) -> Vec<String> {
        self.scrubber.findings(text).into_iter().collect()
    }
}

/// The current vault, shared by the listeners and the command.
#[derive(Debug, Clone)]
pub struct SharedVault {
    store: SecretStore,
    current: Arc<RwLock<Arc<Vault>>>,
    /// The store file's stamp when `current` was read.
    seen: Arc<std::sync::Mutex<Option<Stamp>>>,
    /// The registered credentials; held while a new vault is built, so a reload and a
    /// registration never lose each other's change.
    credentials: Arc<std::sync::Mutex<Credentials>>,
}

type Stamp = (u64, u64, std::time::SystemTime);

impl SharedVault {
    /// Loads `store`.
    ///
    /// # Errors
    /// As [`SecretStore::load`].
    pub fn load(store: SecretStore) -> Result<Self, FirewallError> {
        let stamp = store.stamp();
        let vault = Vault::new(store.load()?)?;
        Ok(SharedVault {
            store,
            current: Arc::new(RwLock::new(Arc::new(vault))),
            seen: Arc::new(std::sync::Mutex::new(stamp)),
            credentials: Arc::new(std::sync::Mutex::new(Vec::new())),
        })
    }

    fn install(&self, vault: Vault) {
        let vault = Arc::new(vault);
        match self.current.write() {
            Ok(mut g) => *g = vault,
            Err(poisoned) => *poisoned.into_inner() = vault,
        }
    }

    /// Registers a resolved credential as a scrub-only entry (never stored, never filled).
    /// `true` when the pair is new (the kernel's redactions must follow); a known pair costs
    /// one lookup.
    ///
    /// # Errors
    /// As [`Scrubber::new`]; the previous snapshot stays in force.
    pub fn register_credential(&self, reference: &str, value: &str) -> Result<bool, FirewallError> {
        if self.snapshot().has_credential(reference, value) {
            return Ok(false);
        }
        let mut credentials = self
            .credentials
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if credentials
            .iter()
            .any(|(r, v)| r == reference && v.expose() == value)
        {
            return Ok(false);
        }
        let mut next = credentials.clone();
        next.push((reference.to_owned(), SecretValue::new(value)));
        let secrets = self.snapshot().secrets.clone();
        self.install(Vault::with_credentials(secrets, next.clone())?);
        *credentials = next;
        tracing::debug!(reference, "firewall: credential registered for scrubbing");
        Ok(true)
    }

    /// The store behind it.
    pub fn store(&self) -> &SecretStore {
        &self.store
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<Vault> {
        match self.current.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Re-reads the store (after `keel secrets set|rm`).
    ///
    /// # Errors
    /// As [`SecretStore::load`]; the previous snapshot stays in force.
    pub fn reload(&self) -> Result<(), FirewallError> {
        let credentials = self
            .credentials
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let stamp = self.store.stamp();
        let vault = Vault::with_credentials(self.store.load()?, credentials.clone())?;
        *self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = stamp;
        self.install(vault);
        drop(credentials);
        tracing::debug!(aliases = ?self.snapshot().aliases(), "firewall: secrets reloaded");
        Ok(())
    }

    /// Reloads when the store file changed since it was read (another process ran `keel
    /// secrets set|rm` during this run): one `stat`, no read, when nothing changed. `true`
    /// when it reloaded.
    ///
    /// # Errors
    /// As [`SharedVault::reload`]; the previous snapshot stays in force.
    pub fn refresh(&self) -> Result<bool, FirewallError> {
        let now = self.store.stamp();
        let changed = *self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            != now;
        if changed {
            self.reload()?;
        }
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn sec03_fill_then_scrub_round_trips_and_reload_sees_new_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let shared = SharedVault::load(SecretStore::new(dir.path())).unwrap();
        assert!(shared.snapshot().aliases().is_empty());
        shared
            .store()
            .set("KEY", &SecretValue::new("abcd-1234"))
            .unwrap();
        assert!(shared.snapshot().aliases().is_empty(), "not before reload");
        assert!(
            shared.refresh().unwrap(),
            "the store file changed: refresh reloads"
        );
        assert!(!shared.refresh().unwrap(), "unchanged: nothing to do");
        let v = shared.snapshot();
        assert_eq!(v.aliases(), ["sec_KEY"]);
        let mut args = json!({"command": "echo sec_KEY"});
        assert!(v.fill_json(&mut args));
        assert_eq!(args["command"], "echo abcd-1234");
        assert!(v.scrub_json(&mut args));
        assert_eq!(args["command"], "echo sec_KEY");
        assert_eq!(v.findings("x abcd-1234"), ["sec_KEY"]);
    }

    /// Issue 10 item 2: a registered credential is scrubbed (with its encodings, and in the
    /// kernel's redactions) as `[credential REF]`, survives a reload of the store, is never
    /// filled, even by an alias of its reference, and is never stored.
    #[test]
    fn sec01_credentials_are_scrub_only_and_survive_reloads() {
        let dir = tempfile::tempdir().unwrap();
        let shared = SharedVault::load(SecretStore::new(dir.path())).unwrap();
        assert!(shared.snapshot().scrubs_nothing());
        assert!(
            shared
                .register_credential("OPENAI_API_KEY", "sk-cred-0042")
                .unwrap()
        );
        assert!(
            !shared
                .register_credential("OPENAI_API_KEY", "sk-cred-0042")
                .unwrap()
        );
        let v = shared.snapshot();
        assert!(
            v.is_empty() && !v.scrubs_nothing(),
            "nothing to fill, something to scrub"
        );
        assert_eq!(
            v.scrub("key=sk-cred-0042 b64=c2stY3JlZC0wMDQy").unwrap(),
            "key=[credential OPENAI_API_KEY] b64=[credential OPENAI_API_KEY]"
        );
        assert_eq!(v.fill("echo sec_OPENAI_API_KEY"), None);
        assert!(
            v.redactions()
                .iter()
                .any(|(form, to)| form == "sk-cred-0042" && to == "[credential OPENAI_API_KEY]")
        );
        assert!(v.may_occur_in_json(r#"{"a":"sk-cred-0042"}"#));
        assert!(!v.may_occur_in_json(r#"{"a":"clean"}"#));

        shared
            .store()
            .set("OTHER", &SecretValue::new("other-value"))
            .unwrap();
        shared.reload().unwrap();
        let v = shared.snapshot();
        assert_eq!(v.aliases(), ["sec_OTHER"]);
        assert!(v.scrub("sk-cred-0042").is_some(), "kept across a reload");
        assert_eq!(shared.store().names().unwrap(), ["OTHER"], "never stored");
        // A rotated value joins the old one.
        assert!(
            shared
                .register_credential("OPENAI_API_KEY", "sk-cred-0043")
                .unwrap()
        );
        let v = shared.snapshot();
        assert!(v.scrub("sk-cred-0042").is_some() && v.scrub("sk-cred-0043").is_some());
        // The same value under another reference is its own pair, scrubbed under that name.
        assert!(
            shared
                .register_credential("BACKUP_KEY", "sk-cred-0043")
                .unwrap()
        );
        assert!(
            shared
                .snapshot()
                .has_credential("BACKUP_KEY", "sk-cred-0043")
        );
        assert!(
            !shared
                .snapshot()
                .has_credential("BACKUP_KEY", "sk-cred-0042")
        );
    }
}
