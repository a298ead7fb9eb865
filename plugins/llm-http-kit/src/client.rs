//! [`SharedClient`]: an adapter's HTTP client, built off the start path (issue 25 item 2).
//!
//! Building a `reqwest` client sets up its TLS configuration (the webpki root store, the
//! rustls provider, ALPN), about 1–2 ms that a row's activation used to wait for although no
//! request can be sent before the driver's first turn. [`SharedClient::prepare`] starts the
//! build on a thread of its own at activation (and the plugin runtime the requests run on with
//! it), so it overlaps the other rows' activation and the driver's first turn; the first
//! request takes the client from [`SharedClient::get`], which waits for a build under way or,
//! when none was started, builds it there. Exactly one build runs ([`OnceLock`]), so both
//! callers get the same client and its pool; a build that fails is the same failure for every
//! request (`HTTP_CLIENT`), never a client with other settings. TLS verification is whatever
//! the builder closure sets: this type only decides *when* it runs.

use std::sync::{Arc, OnceLock};

use keel_plugin_api::services::llm::{LlmCode, LlmFailure};

/// Builds one client (the adapter's settings: timeouts, pool size, user agent).
type Build = dyn Fn() -> reqwest::Result<reqwest::Client> + Send + Sync;

/// One lazily built client, shared by clones.
#[derive(Clone)]
pub struct SharedClient {
    cell: Arc<OnceLock<Result<reqwest::Client, String>>>,
    build: Arc<Build>,
}

impl std::fmt::Debug for SharedClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedClient")
            .field("built", &self.cell.get().is_some())
            .finish_non_exhaustive()
    }
}

impl SharedClient {
    /// A client `build` makes when first needed (nothing runs yet).
    pub fn new(
        build: impl Fn() -> reqwest::Result<reqwest::Client> + Send + Sync + 'static,
    ) -> Self {
        SharedClient {
            cell: Arc::new(OnceLock::new()),
            build: Arc::new(build),
        }
    }

    /// Starts the build on a thread of its own, after making sure the plugin runtime exists
    /// (the first request runs on it). A thread that cannot start changes nothing: the first
    /// [`SharedClient::get`] builds.
    pub fn prepare(&self) {
        let this = self.clone();
        let spawned = std::thread::Builder::new()
            .name("keel-http-client".into())
            .spawn(move || {
                if let Err(e) = keel_plugin_api::sdk::plugin_runtime() {
                    tracing::debug!(error = %e, "the plugin runtime is not up yet");
                }
                let _ = this.get();
            });
        if let Err(e) = spawned {
            tracing::debug!(error = %e, "the HTTP client is built at the first request");
        }
    }

    /// The client: the one built already, the one being built (waited for), or one built now.
    ///
    /// # Errors
    /// `HTTP_CLIENT` with the build's failure (the TLS stack could not be set up), the same for
    /// every call.
    pub fn get(&self) -> Result<&reqwest::Client, LlmFailure> {
        self.cell
            .get_or_init(|| {
                (self.build)().map_err(|e| format!("cannot build the HTTP client: {e}"))
            })
            .as_ref()
            .map_err(|e| LlmFailure::new(LlmCode::HttpClient, e.as_str()))
    }

    /// Whether the client has been built (tests: a request before it was built).
    pub fn is_built(&self) -> bool {
        self.cell.get().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn nothing_is_built_before_use_and_exactly_once_after() {
        let builds = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&builds);
        let client = SharedClient::new(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            reqwest::Client::builder().build()
        });
        assert!(!client.is_built());
        assert_eq!(builds.load(Ordering::SeqCst), 0);
        let clones: Vec<_> = (0..4).map(|_| client.clone()).collect();
        client.prepare();
        let threads: Vec<_> = clones
            .into_iter()
            .map(|c| std::thread::spawn(move || c.get().map(|_| ()).map_err(|e| e.message)))
            .collect();
        for t in threads {
            t.join().unwrap().unwrap();
        }
        assert!(client.get().is_ok());
        assert!(client.is_built());
        assert_eq!(builds.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_failed_build_is_the_same_error_every_time() {
        // An unparsable proxy URL fails `build()` itself, as a broken TLS stack would.
        let client = SharedClient::new(|| {
            reqwest::Client::builder()
                .proxy(reqwest::Proxy::all("http://[::1")?)
                .build()
        });
        let first = client.get().unwrap_err();
        assert_eq!(first.code, LlmCode::HttpClient);
        assert!(
            first.message.starts_with("cannot build the HTTP client: "),
            "{first:?}"
        );
        assert_eq!(client.get().unwrap_err().message, first.message);
    }
}
