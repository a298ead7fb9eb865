//! `credentials`: the `keel.credentials` service (ARCHITECTURE §9, requirements B13,
//! SEC-07…SEC-11). Config elsewhere holds references; this row resolves them per call from the
//! process environment > `$KEEL_HOME/credentials.toml` > `<cwd>/.env` > `$KEEL_HOME/.env`.
//!
//! The method shapes and error codes are documented on
//! [`keel_plugin_api::services::credentials`]. The layers live in [`store`], the environment
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

use std::path::PathBuf;
use std::sync::Arc;

use keel_plugin_api::prelude::*;
use keel_plugin_api::services::credentials::{CREDENTIAL_UNGUARDED, Credentials, Source};
use keel_plugin_api::services::firewall::{Firewall, register_credential};
use serde::Deserialize;
use serde_json::{Value, json};

pub use store::Store;

/// The plugin id.
pub const PLUGIN_ID: &str = "credentials";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RefArgs {
    #[serde(rename = "ref")]
    reference: String,
    #[serde(default)]
    cwd: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetArgs {
    #[serde(rename = "ref")]
    reference: String,
    value: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoveArgs {
    #[serde(rename = "ref")]
    reference: String,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    #[serde(default)]
    cwd: Option<PathBuf>,
}

fn parse<T: serde::de::DeserializeOwned>(method: &str, args: Value) -> Result<T> {
    // serde's message names the field, never echoes a value of a string field it accepted.
    serde_json::from_value(args).map_err(|e| Error::new("INVALID_ARGS", format!("{method}: {e}")))
}

fn source_json(source: Option<Source>) -> Result<Value> {
    Ok(serde_json::to_value(source)?)
}

/// Runs `work` on its own std thread and awaits it (no runtime needed on either side).
async fn off_executor(work: impl FnOnce() -> Result<()> + Send + 'static) -> Result<()> {
    let (tx, rx) = futures::channel::oneshot::channel();
    std::thread::Builder::new()
        .name("keel-credentials-write".into())
        .spawn(move || {
            let _ = tx.send(work());
        })
        .map_err(|e| {
            Error::new(
                "CREDENTIALS_IO",
                format!("cannot start a writer thread: {e}"),
            )
        })?;
    rx.await
        .map_err(|_| Error::new("CREDENTIALS_IO", "the credentials writer thread died"))?
}

/// Fetches the loaded firewall's handle, or `None` when no firewall row is loaded.
pub type FirewallLookup = Arc<dyn Fn() -> Option<CallHandle> + Send + Sync>;

/// Registers a resolved value with the firewall, when one is loaded.
///
/// # Errors
/// `CREDENTIAL_UNGUARDED` naming the reference and the firewall's error (never the value).
async fn guard(firewall: &FirewallLookup, reference: &str, value: &str) -> Result<()> {
    let Some(handle) = firewall() else {
        return Ok(());
    };
    register_credential(&handle, reference, value)
        .await
        .map(|_| ())
        .map_err(|e| {
            Error::new(
                CREDENTIAL_UNGUARDED,
                format!(
                    "{reference} was found but withheld: the firewall could not register it for \
                     scrubbing ([{}] {})",
                    e.code, e.message
                ),
            )
        })
}

/// One `keel.credentials` call. Public so tests drive the service exactly as callers do.
///
/// # Errors
/// `INVALID_ARGS`, `UNKNOWN_METHOD`, `CREDENTIAL_UNGUARDED`, and the codes of the [`Store`]
/// methods.
pub async fn serve(
    store: Store,
    firewall: FirewallLookup,
    method: String,
    args: Value,
) -> Result<Value> {
    match method.as_str() {
        "resolve" => {
            let a: RefArgs = parse(&method, args)?;
            let found = store.resolve(&a.reference, a.cwd.as_deref())?;
            if let Some((value, _)) = &found {
                guard(&firewall, &a.reference, value).await?;
            }
            let (value, source) = found.map_or((None, None), |(v, s)| (Some(v), Some(s)));
            Ok(json!({ "value": value, "source": source_json(source)? }))
        }
        "describe" => {
            let a: RefArgs = parse(&method, args)?;
            Ok(serde_json::to_value(
                store.describe(&a.reference, a.cwd.as_deref())?,
            )?)
        }
        "set" => {
            let a: SetArgs = parse(&method, args)?;
            off_executor(move || store.set(&a.reference, &a.value)).await?;
            Ok(json!({}))
        }
        "remove" => {
            let a: RemoveArgs = parse(&method, args)?;
            off_executor(move || store.remove(&a.reference)).await?;
            Ok(json!({}))
        }
        "list" => {
            let a: ListArgs = if args.is_null() {
                ListArgs::default()
            } else {
                parse(&method, args)?
            };
            let refs = store
                .list(a.cwd.as_deref())?
                .into_iter()
                .map(|(r, s)| Ok(json!({ "ref": r, "source": source_json(Some(s))? })))
                .collect::<Result<Vec<_>>>()?;
            Ok(json!({ "refs": refs }))
        }
        other => Err(Error::new(
            "UNKNOWN_METHOD",
            format!("{PLUGIN_ID} has no method '{other}'"),
        )),
    }
}

/// The plugin value.
#[derive(Default)]
struct CredentialsPlugin;

impl Plugin for CredentialsPlugin {
    fn manifest(&self) -> Manifest {
        Manifest::new(PLUGIN_ID, env!("CARGO_PKG_VERSION"))
            .description("credentials: layered references (env > credentials.toml > .env)")
            .provides::<Credentials>()
            .optional::<Firewall>()
            .guard_row()
            .config_schema(json!({
                "type": "object",
                "properties": {},
                "additionalProperties": false
            }))
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        // Issue 10 item 4: no credential stays in keel's environment (or `/proc/<pid>/environ`).
        let held = env_layer::hold();
        if !held.is_empty() {
            tracing::debug!(?held, "credentials: taken out of the process environment");
        }
        let store = Store::new(ctx.keel_home()?);
        let firewall: FirewallLookup = Arc::new(move || {
            ctx.get_service::<Firewall>()
                .ok()
                .flatten()
                .map(|h| (*h).clone())
        });
        ctx.provide::<Credentials>(CallHandle::new(move |method, args| {
            serve(store.clone(), Arc::clone(&firewall), method, args)
        }))?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(CredentialsPlugin);

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;

    fn call(store: &Store, method: &str, args: Value) -> Result<Value> {
        block_on(serve(store.clone(), Arc::new(|| None), method.into(), args))
    }

    /// A stand-in firewall that records registrations, or refuses them.
    fn firewall(seen: Arc<std::sync::Mutex<Vec<Value>>>, refuse: bool) -> FirewallLookup {
        let handle = CallHandle::new(move |method, args| {
            let seen = Arc::clone(&seen);
            async move {
                assert_eq!(method, "register_credential");
                if refuse {
                    return Err(Error::new("SECRETS_CORRUPT", "cannot build the scrubber"));
                }
                seen.lock().unwrap().push(args);
                Ok(json!({"added": true}))
            }
        });
        Arc::new(move || Some(handle.clone()))
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
        let resolve = |fw: &FirewallLookup| {
            block_on(serve(
                store.clone(),
                Arc::clone(fw),
                "resolve".into(),
                json!({"ref": r}),
            ))
        };
        assert_eq!(resolve(&fw).unwrap()["value"], "sk-guarded-1");
        assert_eq!(
            *seen.lock().unwrap(),
            [json!({"ref": r, "value": "sk-guarded-1"})]
        );
        // Nothing found: nothing to register.
        let unset = json!({"ref": "KEEL_CRED_GUARD_TEST_UNSET"});
        block_on(serve(
            store.clone(),
            Arc::clone(&fw),
            "resolve".into(),
            unset,
        ))
        .unwrap();
        assert_eq!(seen.lock().unwrap().len(), 1);
        let e = resolve(&firewall(seen, true)).unwrap_err();
        assert_eq!(e.code, CREDENTIAL_UNGUARDED);
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
            json!({})
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
            json!({})
        );
        assert_eq!(
            call(&store, "list", Value::Null).unwrap(),
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
        let home = tempfile::tempdir().unwrap();
        let store = Store::new(home.path().to_path_buf());
        let e = call(&store, "set", json!({"ref": "PATH", "value": "x"})).unwrap_err();
        assert_eq!(e.code, "CREDENTIAL_SHADOWED");
        assert_eq!(
            call(&store, "describe", json!({"ref": "PATH"})).unwrap()["writable"],
            false
        );
        assert_eq!(
            call(&store, "resolve", json!({"ref": "x-y"}))
                .unwrap_err()
                .code,
            "INVALID_REFERENCE"
        );
        assert_eq!(
            call(&store, "resolve", json!({})).unwrap_err().code,
            "INVALID_ARGS"
        );
        assert_eq!(
            call(&store, "nope", json!({})).unwrap_err().code,
            "UNKNOWN_METHOD"
        );
    }
}
