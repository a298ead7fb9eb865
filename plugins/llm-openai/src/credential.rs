//! Credential resolution (LLM-05, SEC-07…SEC-11, requirements B13): the row names a reference
//! (`api_key_ref`), and its value is looked up at every request so a rotated key takes effect on
//! the very next call. Nothing is cached.
//!
//! When a `keel.credentials` row is loaded (an optional requirement of this plugin), the lookup
//! goes through it: process environment > `$KEEL_HOME/credentials.toml` > `<cwd>/.env` >
//! `$KEEL_HOME/.env`. The service handle is fetched afresh per request, so a credentials row
//! loaded, reloaded or removed later is honoured. Without that row (and in plain-Rust tests) the
//! only source is the process environment, as before. The value never leaves this adapter
//! except in the `Authorization` header: messages name the reference, not the key.

use std::path::PathBuf;
use std::sync::Arc;

use keel_plugin_api::sdk::Error;
pub use keel_plugin_api::services::credentials::redact;
use keel_plugin_api::services::credentials::{CredentialsClient, resolve_value};

/// Fetches the current `keel.credentials` client, or `None` when no such row is loaded.
pub type ServiceLookup = Arc<dyn Fn() -> Option<CredentialsClient> + Send + Sync>;

/// Where this adapter looks its key up: the credentials service when one is loaded, else the
/// process environment.
#[derive(Clone, Default)]
pub struct Resolver {
    lookup: Option<ServiceLookup>,
    keel_home: Option<PathBuf>,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("service", &self.lookup.is_some())
            .field("keel_home", &self.keel_home)
            .finish()
    }
}

impl Resolver {
    /// The process environment only (no credentials service).
    pub fn env_only() -> Self {
        Resolver::default()
    }

    /// Through `keel.credentials` whenever `lookup` finds it; `keel_home` is named in the
    /// "missing" message as the place of the managed file.
    pub fn with_service(lookup: ServiceLookup, keel_home: Option<PathBuf>) -> Self {
        Resolver {
            lookup: Some(lookup),
            keel_home,
        }
    }

    /// The value of `reference` for this one request: `None` when absent (unset or empty in
    /// every layer). `cwd` selects the working-directory `.env` layer (`None`: the service's
    /// default).
    ///
    /// # Errors
    /// The credentials service's own error (`INVALID_REFERENCE`, `CREDENTIALS_FILE`, …): its
    /// messages name files and lines, never values.
    pub async fn resolve(
        &self,
        reference: &str,
        cwd: Option<&str>,
    ) -> Result<Option<String>, Error> {
        let service = self.lookup.as_ref().and_then(|l| l());
        resolve_value(service, reference, cwd.map(std::path::Path::new)).await
    }

    /// The `CREDENTIAL_MISSING` message for `reference`: every place it may be set, never a
    /// value.
    pub fn missing_message(&self, reference: &str) -> String {
        if self.lookup.as_ref().and_then(|l| l()).is_none() {
            return missing_message(reference);
        }
        let home = self
            .keel_home
            .as_ref()
            .map_or_else(|| "$KEEL_HOME".to_owned(), |h| h.display().to_string());
        format!(
            "credential {reference} is not set; export {reference}=…, or store it in \
             {home}/credentials.toml (`{reference} = \"…\"`, keel.credentials `set`), or add \
             {reference}=… to .env in the working directory or {home}/.env (the api_key_ref of \
             this adapter row)"
        )
    }
}

/// Resolves `reference` from the process environment: its value, or `None` when unset, empty
/// or not UTF-8 (all "absent").
pub fn resolve(reference: &str) -> Option<String> {
    std::env::var(reference).ok().filter(|v| !v.is_empty())
}

/// The environment-only `CREDENTIAL_MISSING` message for `reference` (names where to set it,
/// never a value).
pub fn missing_message(reference: &str) -> String {
    format!(
        "credential {reference} is not set; export {reference}=… (the api_key_ref of this adapter row)"
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use futures::executor::block_on;
    use keel_plugin_api::sdk::{ContractClient, ContractHandle};
    use keel_plugin_api::services::credentials::{
        CredentialRef, Credentials, CredentialsProvider, Description, ListCredentials, Listed,
        RemoveCredential, Resolved, SetCredential, Source,
    };
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn llm_05_missing_message_names_the_reference_only() {
        let m = missing_message("MY_KEY");
        assert!(m.contains("MY_KEY is not set"), "{m}");
        assert!(m.contains("export MY_KEY="), "{m}");
    }

    #[test]
    fn unset_reference_is_absent() {
        assert_eq!(resolve("KEEL_TEST_SURELY_UNSET_REFERENCE_42"), None);
    }

    #[test]
    fn redact_removes_the_key() {
        assert_eq!(
            redact("bad key sk-secret-1 given", "sk-secret-1"),
            "bad key [redacted] given"
        );
    }

    /// A stand-in `keel.credentials` that records its `resolve` requests (as wire JSON) and
    /// answers from a value it holds, or fails every call with `fail`.
    struct StandIn {
        value: Arc<Mutex<Option<String>>>,
        calls: Arc<Mutex<Vec<Value>>>,
        fail: Option<Error>,
    }

    impl CredentialsProvider for StandIn {
        async fn resolve(&self, r: CredentialRef) -> Result<Resolved, Error> {
            if let Some(e) = &self.fail {
                return Err(e.clone());
            }
            self.calls.lock().unwrap().push(serde_json::to_value(r)?);
            let value = self.value.lock().unwrap().clone();
            let source = value.as_ref().map(|_| Source::File);
            Ok(Resolved { value, source })
        }
        async fn describe(&self, _: CredentialRef) -> Result<Description, Error> {
            Err(Error::msg("not in this test"))
        }
        async fn set(&self, _: SetCredential) -> Result<(), Error> {
            Err(Error::msg("not in this test"))
        }
        async fn remove(&self, _: RemoveCredential) -> Result<(), Error> {
            Err(Error::msg("not in this test"))
        }
        async fn list(&self, _: ListCredentials) -> Result<Listed, Error> {
            Err(Error::msg("not in this test"))
        }
        async fn held(
            &self,
            _: keel_plugin_api::services::credentials::HeldRequest,
        ) -> Result<keel_plugin_api::services::credentials::Held, Error> {
            Err(Error::msg("not in this test"))
        }
    }

    fn client(stand_in: StandIn) -> CredentialsClient {
        let handle = ContractHandle::serve::<Credentials, _>("credentials", stand_in);
        ContractClient::new(handle, "openai").into()
    }

    fn fake(value: Arc<Mutex<Option<String>>>, calls: Arc<Mutex<Vec<Value>>>) -> CredentialsClient {
        client(StandIn {
            value,
            calls,
            fail: None,
        })
    }

    #[test]
    fn llm_05_service_is_asked_per_request_with_the_cwd() {
        let value = Arc::new(Mutex::new(Some("k1".to_owned())));
        let calls = Arc::new(Mutex::new(Vec::new()));
        let handle = fake(Arc::clone(&value), Arc::clone(&calls));
        let r = Resolver::with_service(Arc::new(move || Some(handle.clone())), None);
        assert_eq!(
            block_on(r.resolve("K", Some("/w"))).unwrap().as_deref(),
            Some("k1")
        );
        *value.lock().unwrap() = Some("k2".to_owned());
        assert_eq!(
            block_on(r.resolve("K", None)).unwrap().as_deref(),
            Some("k2")
        );
        *value.lock().unwrap() = Some(String::new());
        assert_eq!(
            block_on(r.resolve("K", None)).unwrap(),
            None,
            "empty is absent"
        );
        let calls = calls.lock().unwrap();
        assert_eq!(calls[0], json!({"ref": "K", "cwd": "/w"}));
        assert_eq!(calls[1], json!({"ref": "K", "cwd": null}));
    }

    #[test]
    fn sec_11_service_missing_message_names_every_place_not_a_value() {
        let value = Arc::new(Mutex::new(None));
        let handle = fake(value, Arc::new(Mutex::new(Vec::new())));
        let r = Resolver::with_service(
            Arc::new(move || Some(handle.clone())),
            Some(PathBuf::from("/home/u/.keel")),
        );
        let m = r.missing_message("MY_KEY");
        assert!(m.contains("MY_KEY is not set"), "{m}");
        assert!(m.contains("export MY_KEY="), "{m}");
        assert!(m.contains("/home/u/.keel/credentials.toml"), "{m}");
        assert!(m.contains("/home/u/.keel/.env"), "{m}");
    }

    #[test]
    fn no_service_row_falls_back_to_the_environment() {
        let r = Resolver::with_service(Arc::new(|| None), None);
        assert_eq!(
            block_on(r.resolve("KEEL_TEST_SURELY_UNSET_REFERENCE_42", None)).unwrap(),
            None
        );
        assert!(block_on(r.resolve("PATH", None)).unwrap().is_some());
        assert_eq!(r.missing_message("X"), missing_message("X"));
    }

    fn adapter_with(handle: Option<CredentialsClient>) -> crate::Adapter {
        let config: crate::Config = serde_json::from_value(json!({
            "base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_ref": "K_REF"
        }))
        .unwrap();
        let lookup: ServiceLookup = Arc::new(move || handle.clone());
        crate::Adapter::new(config)
            .unwrap()
            .with_credentials(Resolver::with_service(lookup, Some(PathBuf::from("/kh"))))
    }

    fn failure_of(adapter: &crate::Adapter) -> keel_plugin_api::services::llm::LlmFailure {
        use keel_plugin_api::services::llm::{FinishReason, LlmRequest, StreamChunk};
        let request: LlmRequest = serde_json::from_value(json!({
            "config": {"provider": "openai", "model": "m"}, "messages": [], "tools": []
        }))
        .unwrap();
        let response = block_on(adapter.generate(request));
        match response.chunks.last() {
            Some(StreamChunk::Finish {
                reason: FinishReason::Error { failure },
            }) => failure.clone(),
            other => panic!("expected an error finish, got {other:?}"),
        }
    }

    #[test]
    fn llm_05_generate_and_check_report_missing_through_the_service() {
        let handle = fake(Arc::new(Mutex::new(None)), Arc::new(Mutex::new(Vec::new())));
        let adapter = adapter_with(Some(handle));
        let f = failure_of(&adapter);
        assert_eq!(f.code.as_str(), "CREDENTIAL_MISSING");
        assert!(
            f.message.contains("K_REF is not set") && f.message.contains("/kh/credentials.toml"),
            "{}",
            f.message
        );
        let config = serde_json::from_value(json!({"provider": "openai", "model": "m"})).unwrap();
        let e = block_on(adapter.check_resolved(&config, Some("/w"))).unwrap_err();
        assert_eq!(e.code, "CREDENTIAL_MISSING");
        assert!(e.message.contains("/kh/.env"), "{}", e.message);
    }

    #[test]
    fn service_errors_become_credential_missing_naming_the_cause() {
        let handle = client(StandIn {
            value: Arc::new(Mutex::new(None)),
            calls: Arc::new(Mutex::new(Vec::new())),
            fail: Some(Error::coded(
                keel_plugin_api::services::credentials::CredentialCode::File,
                "/kh/credentials.toml: line 2: bad",
            )),
        });
        let f = failure_of(&adapter_with(Some(handle)));
        assert_eq!(f.code.as_str(), "CREDENTIAL_MISSING");
        assert!(
            f.message.contains("CREDENTIALS_FILE") && f.message.contains("line 2"),
            "{}",
            f.message
        );
    }
}
