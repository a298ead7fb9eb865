//! `credentials`: the `keel.credentials` service (ARCHITECTURE §9, requirements B13,
//! SEC-07…SEC-11). Config elsewhere holds references; this row resolves them per call from the
//! process environment > `$KEEL_HOME/credentials.toml` > `<cwd>/.env` > `$KEEL_HOME/.env`.
//!
//! The contract (methods, shapes, error codes) is
//! [`keel_plugin_api::services::credentials`]; [`Service`] provides it. The layers live in [`store`], the environment
//! layer (held values, variables taken out of keel's environment) in [`env_layer`], the
//! managed file (lock, atomic patch, 0600) in [`file`], `.env` parsing in [`dotenv`]. Reads
//! run inline (a few small files); writes, which may wait on the cross-process lock, run on a
//! short-lived std thread so the kernel's executor never blocks on `flock`.
//!
//! Every value `resolve` returns is first registered with `keel.firewall` (looked up per call,
//! an optional requirement that orders the firewall's activation first), so the firewall
//! scrubs it from everything bound for the model, a log, a session or the terminal (issue 10
//! item 2). A direct call rather than an event: the value goes to the one row that must hold
//! it, the caller learns whether it is guarded (a firewall that cannot register it gets the
//! value withheld, `CREDENTIAL_UNGUARDED`), and a re-activated firewall learns it again at the
//! next request, since registering a known pair is a no-op.

pub mod dotenv;
pub mod env_layer;
pub mod file;
pub mod store;

use std::sync::Arc;

use keel_plugin_api::prelude::*;
use keel_plugin_api::services::credentials::{
    CredentialCode, CredentialRef, Credentials, CredentialsProvider, Description, Held,
    HeldRequest, ListCredentials, Listed, ListedRef, RemoveCredential, Resolved, SetCredential,
};
use keel_plugin_api::services::firewall::{Firewall, FirewallClient, RegisterCredential};
use schemars::JsonSchema;
use serde::Deserialize;

pub use store::Store;

/// The plugin id.
pub const PLUGIN_ID: &str = "credentials";

/// The row config: none (the layers are fixed by ARCHITECTURE §9).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Config {}

/// Runs `work` on its own std thread and awaits it (no runtime needed on either side).
async fn off_executor(work: impl FnOnce() -> Result<()> + Send + 'static) -> Result<()> {
    let (tx, rx) = futures::channel::oneshot::channel();
    std::thread::Builder::new()
        .name("keel-credentials-write".into())
        .spawn(move || {
            let _ = tx.send(work());
        })
        .map_err(|e| {
            Error::coded(
                CredentialCode::Io,
                format!("cannot start a writer thread: {e}"),
            )
        })?;
    rx.await
        .map_err(|_| Error::coded(CredentialCode::Io, "the credentials writer thread died"))?
}

/// Fetches the loaded firewall's client, or `None` when no firewall row is loaded.
pub type FirewallLookup = Arc<dyn Fn() -> Option<FirewallClient> + Send + Sync>;

/// Registers a resolved value with the firewall, when one is loaded.
///
/// # Errors
/// `CREDENTIAL_UNGUARDED` naming the reference and the firewall's error (never the value).
async fn guard(firewall: &FirewallLookup, reference: &str, value: &str) -> Result<()> {
    let Some(client) = firewall() else {
        return Ok(());
    };
    let request = RegisterCredential {
        reference: reference.to_owned(),
        value: value.to_owned(),
    };
    client
        .register_credential(request)
        .await
        .map(|_| ())
        .map_err(|e| {
            Error::coded(
                CredentialCode::Unguarded,
                format!(
                    "{reference} was found but withheld: the firewall could not register it for \
                     scrubbing ([{}] {})",
                    e.code, e.message
                ),
            )
        })
}

/// The `keel.credentials` provider. Public so tests drive the service exactly as callers do.
#[derive(Clone)]
pub struct Service {
    /// The layers.
    pub store: Store,
    /// The firewall to register resolved values with.
    pub firewall: FirewallLookup,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").finish_non_exhaustive()
    }
}

impl CredentialsProvider for Service {
    async fn resolve(&self, request: CredentialRef) -> Result<Resolved> {
        let found = self
            .store
            .resolve(&request.reference, request.cwd.as_deref())?;
        if let Some((value, _)) = &found {
            env_layer::note_resolved(&request.reference);
            guard(&self.firewall, &request.reference, value).await?;
        }
        let (value, source) = found.map_or((None, None), |(v, s)| (Some(v), Some(s)));
        Ok(Resolved { value, source })
    }

    async fn describe(&self, request: CredentialRef) -> Result<Description> {
        self.store
            .describe(&request.reference, request.cwd.as_deref())
    }

    async fn set(&self, request: SetCredential) -> Result<()> {
        let store = self.store.clone();
        off_executor(move || store.set(&request.reference, &request.value)).await
    }

    async fn remove(&self, request: RemoveCredential) -> Result<()> {
        let store = self.store.clone();
        off_executor(move || store.remove(&request.reference)).await
    }

    async fn held(&self, _request: HeldRequest) -> Result<Held> {
        Ok(Held {
            refs: env_layer::held_names(),
        })
    }

    async fn list(&self, request: ListCredentials) -> Result<Listed> {
        let refs = self
            .store
            .list(request.cwd.as_deref())?
            .into_iter()
            .map(|(reference, source)| ListedRef { reference, source })
            .collect();
        Ok(Listed { refs })
    }
}

/// The plugin value.
#[derive(Default)]
struct CredentialsPlugin;

impl Plugin for CredentialsPlugin {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new(PLUGIN_ID, env!("CARGO_PKG_VERSION"))
            .description("credentials: layered references (env > credentials.toml > .env)")
            .provides::<Credentials>()
            .optional::<Firewall>()
            .guard_row()
            .config_type::<Config>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        // Issue 10 item 4: no credential stays in keel's environment (or `/proc/<pid>/environ`).
        let held = env_layer::hold();
        if !held.is_empty() {
            tracing::debug!(?held, "credentials: taken out of the process environment");
        }
        let store = Store::new(ctx.keel_home()?);
        let firewall: FirewallLookup =
            Arc::new(move || ctx.get_client::<Firewall>().ok().flatten());
        ctx.serve::<Credentials, _>(Service { store, firewall })?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(CredentialsPlugin);

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use keel_plugin_api::services::firewall::{
        CheckNetwork, CheckPath, CheckTool, Findings, FirewallProvider, Registered, ScanContent,
        Verdict,
    };
    use serde_json::{Value, json};

    fn client(store: &Store, firewall: FirewallLookup) -> ContractClient<Credentials> {
        let service = Service {
            store: store.clone(),
            firewall,
        };
        ContractClient::new(
            ContractHandle::serve::<Credentials, _>(PLUGIN_ID, service),
            "test",
        )
    }

    /// One call with its wire JSON, as a caller of another build would send it.
    fn call(store: &Store, method: &str, args: Value) -> Result<Value> {
        block_on(client(store, Arc::new(|| None)).__call::<Value, Value>(method, 1, &args))
    }

    /// A stand-in firewall that records registrations, or refuses them.
    struct StandIn {
        seen: Arc<std::sync::Mutex<Vec<Value>>>,
        refuse: bool,
    }

    impl FirewallProvider for StandIn {
        async fn check_tool(&self, _: CheckTool) -> Result<Verdict> {
            Err(Error::msg("not in this test"))
        }
        async fn check_path(&self, _: CheckPath) -> Result<Verdict> {
            Err(Error::msg("not in this test"))
        }
        async fn check_network(&self, _: CheckNetwork) -> Result<Verdict> {
            Err(Error::msg("not in this test"))
        }
        async fn scan_content(&self, _: ScanContent) -> Result<Findings> {
            Err(Error::msg("not in this test"))
        }
        async fn register_credential(&self, r: RegisterCredential) -> Result<Registered> {
            if self.refuse {
                return Err(Error::coded(
                    keel_plugin_api::services::firewall::SecretsCode::Corrupt,
                    "cannot build the scrubber",
                ));
            }
            self.seen.lock().unwrap().push(serde_json::to_value(r)?);
            Ok(Registered { added: true })
        }
    }

    fn firewall(seen: Arc<std::sync::Mutex<Vec<Value>>>, refuse: bool) -> FirewallLookup {
        let handle = ContractHandle::serve::<Firewall, _>("firewall", StandIn { seen, refuse });
        Arc::new(move || Some(ContractClient::new(handle.clone(), PLUGIN_ID).into()))
    }

    /// Issue 10 item 2: every value `resolve` hands out was registered with the firewall
    /// first; a firewall that cannot take it gets the value withheld.
    #[test]
    fn sec01_resolve_registers_the_value_with_the_firewall_first() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::new(home.path().to_path_buf());
        let r = "KEEL_CRED_GUARD_TEST_REF";
        call(&store, "set", json!({"ref": r, "value": "sk-guarded-1"})).unwrap();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let fw = firewall(Arc::clone(&seen), false);
        let resolve = |fw: &FirewallLookup, reference: &str| {
            let typed: keel_plugin_api::services::credentials::CredentialsClient =
                client(&store, Arc::clone(fw)).into();
            block_on(typed.resolve(CredentialRef {
                reference: reference.into(),
                cwd: None,
            }))
        };
        assert_eq!(
            resolve(&fw, r).unwrap().value.as_deref(),
            Some("sk-guarded-1")
        );
        assert_eq!(
            *seen.lock().unwrap(),
            [json!({"ref": r, "value": "sk-guarded-1"})]
        );
        // Nothing found: nothing to register.
        resolve(&fw, "KEEL_CRED_GUARD_TEST_UNSET").unwrap();
        assert_eq!(seen.lock().unwrap().len(), 1);
        let e = resolve(&firewall(seen, true), r).unwrap_err();
        assert!(e.is(CredentialCode::Unguarded), "{e}");
        assert!(e.message.contains(r) && e.message.contains("SECRETS_CORRUPT"));
        assert!(!e.message.contains("sk-guarded-1"));
    }

    #[test]
    fn sec_11_service_shapes_and_describe_never_has_the_value() {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let store = Store::new(home.path().to_path_buf());
        let r = "KEEL_CRED_SERVICE_TEST_REF";
        let c = cwd.path().to_str().unwrap();
        assert_eq!(
            call(&store, "describe", json!({"ref": r, "cwd": c})).unwrap(),
            json!({"configured": false, "source": null, "writable": true})
        );
        assert_eq!(
            call(&store, "resolve", json!({"ref": r})).unwrap(),
            json!({"value": null, "source": null})
        );
        assert_eq!(
            call(&store, "set", json!({"ref": r, "value": "sk-123456"})).unwrap(),
            Value::Null
        );
        let d = call(&store, "describe", json!({"ref": r})).unwrap();
        assert_eq!(
            d,
            json!({"configured": true, "source": "file", "writable": true})
        );
        assert!(!d.to_string().contains("sk-123456"));
        assert_eq!(
            call(&store, "resolve", json!({"ref": r, "cwd": c})).unwrap(),
            json!({"value": "sk-123456", "source": "file"})
        );
        assert_eq!(
            call(&store, "list", json!({})).unwrap(),
            json!({"refs": [{"ref": r, "source": "file"}]})
        );
        assert_eq!(
            call(&store, "remove", json!({"ref": r})).unwrap(),
            Value::Null
        );
        assert_eq!(
            call(&store, "list", json!({})).unwrap(),
            json!({"refs": []})
        );
        std::fs::write(cwd.path().join(".env"), format!("{r}=from-cwd\n")).unwrap();
        assert_eq!(
            call(&store, "describe", json!({"ref": r, "cwd": c})).unwrap()["source"],
            "dotenv-cwd"
        );
    }

    #[test]
    fn sec_08_service_rejects_shadowed_and_bad_calls() {
        use keel_plugin_api::codes::ContractCode;
        let home = tempfile::tempdir().unwrap();
        let store = Store::new(home.path().to_path_buf());
        let e = call(&store, "set", json!({"ref": "PATH", "value": "x"})).unwrap_err();
        assert!(e.is(CredentialCode::Shadowed), "{e}");
        assert_eq!(
            call(&store, "describe", json!({"ref": "PATH"})).unwrap()["writable"],
            false
        );
        let e = call(&store, "resolve", json!({"ref": "x-y"})).unwrap_err();
        assert!(e.is(CredentialCode::InvalidReference), "{e}");
        let e = call(&store, "resolve", json!({})).unwrap_err();
        assert!(e.is(ContractCode::InvalidArguments), "{e}");
        // A method this provider lacks is refused naming both sides.
        let e = call(&store, "nope", json!({})).unwrap_err();
        assert!(e.is(ContractCode::UnknownMethod), "{e}");
        assert!(
            e.message.contains("`test`") && e.message.contains(PLUGIN_ID),
            "{e}"
        );
    }
}
