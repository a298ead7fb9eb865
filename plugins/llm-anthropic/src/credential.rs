//! The API key (LLM-05, SEC-07…SEC-11): the row names a reference (`api_key_ref`, default
//! `ANTHROPIC_API_KEY`) and its value is looked up at every request, through `keel.credentials`
//! when that row is loaded (fetched afresh per request, as `llm-openai` does), else from the
//! process environment. Nothing is cached, so a rotated key takes effect on the next call.
//! The value only ever goes into the `x-api-key` header; messages name the reference and the
//! row, never the key.

use std::sync::Arc;

use keel_plugin_api::sdk::Error;
pub use keel_plugin_api::services::credentials::redact;
use keel_plugin_api::services::credentials::{CredentialsClient, resolve_value};

/// Fetches the current `keel.credentials` client, or `None` when no such row is loaded.
pub type ServiceLookup = Arc<dyn Fn() -> Option<CredentialsClient> + Send + Sync>;

/// Where the key is looked up, and the row it belongs to (for messages).
#[derive(Clone)]
pub struct Resolver {
    lookup: Option<ServiceLookup>,
    row: String,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("service", &self.lookup.is_some())
            .field("row", &self.row)
            .finish()
    }
}

impl Resolver {
    /// The process environment only; `row` is named in messages.
    pub fn env_only(row: &str) -> Self {
        Resolver {
            lookup: None,
            row: row.to_owned(),
        }
    }

    /// Through `keel.credentials` whenever `lookup` finds it.
    pub fn with_service(lookup: ServiceLookup, row: &str) -> Self {
        Resolver {
            lookup: Some(lookup),
            row: row.to_owned(),
        }
    }

    /// The value of `reference` for this one request: `None` when unset or empty everywhere.
    /// `cwd` selects the working-directory `.env` layer.
    ///
    /// # Errors
    /// The credentials service's own error (its messages name files, never values).
    pub async fn resolve(
        &self,
        reference: &str,
        cwd: Option<&str>,
    ) -> Result<Option<String>, Error> {
        let service = self.lookup.as_ref().and_then(|l| l());
        resolve_value(service, reference, cwd.map(std::path::Path::new)).await
    }

    /// The `CREDENTIAL_MISSING` message: the row, the reference, where it may be set.
    pub fn missing_message(&self, reference: &str) -> String {
        let stores = if self.lookup.as_ref().and_then(|l| l()).is_some() {
            " (or put it in $KEEL_HOME/credentials.toml, or in a .env file)"
        } else {
            ""
        };
        format!(
            "row {row}: credential {reference} is not set; export {reference}=…{stores} \
             (the api_key_ref of the {row} row)",
            row = self.row
        )
    }
}

#[cfg(test)]
mod tests {
    use futures::executor::block_on;

    use super::*;

    #[test]
    fn the_missing_message_names_the_row_and_the_reference_only() {
        let m = Resolver::env_only("llm-anthropic").missing_message("ANTHROPIC_API_KEY");
        assert!(m.starts_with("row llm-anthropic: credential ANTHROPIC_API_KEY is not set"));
        assert!(m.contains("export ANTHROPIC_API_KEY="), "{m}");
    }

    #[test]
    fn an_unset_reference_is_absent_and_the_key_is_redacted() {
        let r = Resolver::with_service(Arc::new(|| None), "x");
        assert_eq!(
            block_on(r.resolve("KEEL_TEST_SURELY_UNSET_REFERENCE_43", None)).unwrap(),
            None
        );
        assert_eq!(
            redact("got sk-ant-123 here", "sk-ant-123"),
            "got [redacted] here"
        );
    }
}
