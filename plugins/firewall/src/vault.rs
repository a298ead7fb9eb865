//! The secrets in memory: loaded from the [`SecretStore`] at activation and again whenever
//! `keel secrets` changes the store in this process. Readers take a cheap snapshot
//! ([`Arc<Vault>`]) so a reload never races a fill or a scrub half-way.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde_json::Value;

use crate::error::FirewallError;
use crate::fill::{fill_str, map_strings};
use crate::scrub::{Scrubber, encodings};
use crate::store::{SecretStore, SecretValue, alias};

/// One snapshot of the secrets.
#[derive(Debug)]
pub struct Vault {
    secrets: BTreeMap<String, SecretValue>,
    scrubber: Scrubber,
}

impl Vault {
    /// A vault over `secrets`.
    ///
    /// # Errors
    /// As [`Scrubber::new`].
    pub fn new(secrets: BTreeMap<String, SecretValue>) -> Result<Self, FirewallError> {
        let scrubber = Scrubber::new(&secrets)?;
        Ok(Vault { secrets, scrubber })
    }

    /// No secret is stored (the hooks skip their work).
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// The secret value of `name` (the fill).
    pub fn secret(&self, name: &str) -> Option<&str> {
        self.secrets.get(name).map(SecretValue::expose)
    }

    /// Secret names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.secrets.keys().cloned().collect()
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
        self.secrets
            .iter()
            .flat_map(|(name, value)| {
                let alias = alias(name);
                encodings(value.expose())
                    .into_iter()
                    .map(move |form| (form, alias.clone()))
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
        })
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
        let stamp = self.store.stamp();
        let vault = Arc::new(Vault::new(self.store.load()?)?);
        *self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = stamp;
        match self.current.write() {
            Ok(mut g) => *g = vault,
            Err(poisoned) => *poisoned.into_inner() = vault,
        }
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
        assert!(shared.snapshot().names().is_empty());
        shared
            .store()
            .set("KEY", &SecretValue::new("abcd-1234"))
            .unwrap();
        assert!(shared.snapshot().names().is_empty(), "not before reload");
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
}
