//! `keel-plugin-test`: run a plugin in-process against the real kernel, so an author unit-tests
//! a plugin without building the `keel` binary or loading a `cdylib` (issue 12 item 4).
//!
//! The plugin crate is also an `rlib` (`crate-type = ["cdylib", "rlib"]`), so a test links it
//! statically. [`TestHost`] builds each plugin type's root module from the same SDK entry points
//! `export_plugin!` uses ([`static_root`]), wraps it as the kernel's `PluginLibrary` (no file,
//! no digest, no `dlopen`), validates each row's config against the plugin's schema exactly as
//! `keel` does, checks the facility graph, and starts a real `keel_kernel::Kernel`: the same
//! bus, services, fibers, effects and activation waves as the binary.
//!
//! The test itself talks to the kernel through one extra row, the *probe*
//! ([`PROBE_ROW`]): a plugin whose [`Context`] the host keeps, so a test dispatches events and
//! calls services with the SDK an author already knows ([`TestHost::ctx`],
//! [`TestHost::client`]). The probe can also stand in for the plugin's dependencies: it serves
//! fake providers of any contract ([`Builder::serve`], [`Builder::serve_named`]) and declares
//! events the test dispatches ([`Builder::declares`]).
//!
//! ```
//! use keel_plugin_test::TestHost;
//! # use keel_plugin_api::prelude::*;
//! # #[derive(Default)] struct Quiet;
//! # impl Plugin for Quiet {
//! #     type Dispatches = ();
//! #
//! #     fn manifest(&self) -> Manifest { Manifest::new("quiet", "0.1.0") }
//! #     async fn activate(&self, _ctx: Context) -> Result<()> { Ok(()) }
//! # }
//! let host = TestHost::builder().row::<Quiet>("q", serde_json::json!({})).start()?;
//! assert_eq!(host.row("q").map(|r| r.state), Some("active".to_owned()));
//! # Ok::<(), keel_plugin_test::HarnessError>(())
//! ```
//!
//! Limits, from the kernel's host table being process-global: one host runs at a time per
//! process (hosts in parallel test threads wait for each other), and a process starts at most
//! `keel_plugin_api::host::MAX_KERNELS` (256) hosts; `cargo nextest` runs each test in its own
//! process, as keel's own `cargo xtask test` does. Two plugin crates that both
//! `export_plugin!` cannot be linked into one test binary (their exported symbols clash): test
//! one plugin crate per test target, and write its neighbours as plain `Plugin` types in the
//! test (they need no export).
//!
//! The host owns its tokio runtime: write harness tests as plain `#[test]` functions and await
//! with [`TestHost::block_on`] (inside `#[tokio::test]`, dropping the host would block inside
//! a runtime).

mod probe;
mod roots;

use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, Once};

use keel_config::KernelSettings;
use keel_kernel::graph::{GraphRow, plan};
use keel_kernel::loader::PluginLibrary;
use keel_kernel::runtime::{Kernel, RowSpec, RowStatus};
use keel_plugin_api::prelude::*;
use keel_plugin_api::sdk::{Contract, Serves};

pub use roots::static_root;

use keel_plugin_api::__private::LibHeader;

/// The exported root of a plugin crate linked into the test, for [`Builder::linked`]:
/// `exported!(keel_plugin_system_prompt)`, or `exported!(crate)` inside the plugin's own tests.
#[macro_export]
macro_rules! exported {
    ($krate:ident) => {
        (
            stringify!($krate),
            &$krate::__keel_plugin_export::LIB_HEADER,
        )
    };
}

/// The row id of the probe: the test's own fiber.
pub const PROBE_ROW: &str = "test-probe";

/// Why a host could not start or answer. Each message is one line naming the row at fault.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A plugin's manifest could not be read.
    #[error("plugin type {plugin}: invalid manifest: {reason}")]
    Manifest {
        /// The Rust type.
        plugin: String,
        /// Why.
        reason: String,
    },
    /// Two plugin types claim one plugin id, or two rows one id.
    #[error("{0}")]
    Duplicate(String),
    /// A row's config does not match its plugin's schema (as `keel` reports it).
    #[error("row '{row}' (plugin {plugin}): config {pointer}: {reason}")]
    Config {
        /// Row id.
        row: String,
        /// Plugin id.
        plugin: String,
        /// JSON pointer into the config.
        pointer: String,
        /// What is wrong.
        reason: String,
    },
    /// The kernel refused the assembly or a row did not activate.
    #[error("{0}")]
    Kernel(Box<keel_kernel::KernelError>),
    /// The test host itself failed (runtime, temp dir).
    #[error("test host: {0}")]
    Host(String),
}

impl From<keel_kernel::KernelError> for HarnessError {
    fn from(e: keel_kernel::KernelError) -> Self {
        HarnessError::Kernel(Box::new(e))
    }
}

/// One host at a time per process: the kernel's host table is process-global.
static ONE_HOST: Mutex<()> = Mutex::new(());

fn log_to_test_output() {
    static INIT: Once = Once::new();
    // First: a plugin linked into this image installs its log forwarder as the global tracing
    // subscriber only when none is set; the kernel re-emits forwarded lines through tracing, so
    // the forwarder must never be this process's subscriber.
    INIT.call_once(|| {
        let filter = tracing_subscriber::EnvFilter::try_from_env("KEEL_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    });
}

/// Assembles a small profile: rows of statically linked plugin types, plus the probe.
#[must_use = "a builder does nothing until `start`"]
pub struct Builder {
    rows: Vec<(
        String,
        Result<Arc<PluginLibrary>, HarnessError>,
        serde_json::Value,
    )>,
    probe: probe::ProbeSpec,
    settings: KernelSettings,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rows: Vec<&str> = self.rows.iter().map(|(id, _, _)| id.as_str()).collect();
        f.debug_struct("Builder").field("rows", &rows).finish()
    }
}

impl Builder {
    /// Adds a row `id` running plugin type `P` with `config` (its `[[insert]] config`).
    pub fn row<P: Plugin + Default>(mut self, id: &str, config: serde_json::Value) -> Self {
        self.rows
            .push((id.to_owned(), roots::library::<P>(), config));
        self
    }

    /// Adds a row `id` running a plugin crate linked into the test as an `rlib`, through the
    /// root its `export_plugin!` exported (its plugin type may stay private): pass
    /// [`exported!`]`(the_crate)`.
    pub fn linked(
        mut self,
        id: &str,
        (crate_name, header): (&str, &'static LibHeader),
        config: serde_json::Value,
    ) -> Self {
        self.rows
            .push((id.to_owned(), roots::exported(crate_name, header), config));
        self
    }

    /// The probe serves `provider` as contract `C`: a fake of a service the plugin requires.
    pub fn serve<C: Serves<P>, P: Send + Sync + 'static>(mut self, provider: P) -> Self {
        self.probe.manifest = self.probe.manifest.provides::<C>();
        self.probe
            .on_activate(move |ctx| ctx.serve::<C, P>(provider).map(|_| ()));
        self
    }

    /// The probe serves `provider` as contract `C` under a run-time `name` (a tool provider's
    /// `keel.tool.<row>`, an adapter's `keel.llm.adapter.<row>`).
    pub fn serve_named<C: Serves<P>, P: Send + Sync + 'static>(
        mut self,
        name: &str,
        provider: P,
    ) -> Self {
        self.probe.manifest = self.probe.manifest.provides_named(name, false);
        let name = name.to_owned();
        self.probe
            .on_activate(move |ctx| ctx.serve_named::<C, P>(&name, provider).map(|_| ()));
        self
    }

    /// The probe declares plugin event `E` (one the plugin under test listens to but does not
    /// declare itself), so the test may dispatch it ([`TestHost::dispatch`]).
    pub fn declares<E: Event>(mut self) -> Self {
        self.probe.manifest = self.probe.manifest.__declares::<E>();
        self
    }

    /// Runs `f` with the probe's context when it activates (before the rows that need what it
    /// provides): anything else a fake needs — a listener, a service by hand.
    pub fn on_probe_activate(
        mut self,
        f: impl FnOnce(Context) -> Result<()> + Send + 'static,
    ) -> Self {
        self.probe.on_activate(f);
        self
    }

    /// Changes the probe's manifest (e.g. `.provides_named(…)` for a service set up in
    /// [`Builder::on_probe_activate`]).
    pub fn probe_manifest(mut self, f: impl FnOnce(Manifest) -> Manifest) -> Self {
        self.probe.manifest = f(self.probe.manifest);
        self
    }

    /// Kernel settings (`[kernel]`): fault threshold, deadlines.
    pub fn settings(mut self, settings: KernelSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Validates every row's config, checks the facility graph, starts the kernel and
    /// activates every row.
    ///
    /// # Errors
    /// The first problem, as one line naming the row: a config that does not match the
    /// plugin's schema, a missing provider, a row that failed to activate.
    pub fn start(self) -> Result<TestHost, HarnessError> {
        log_to_test_output();
        let serial = ONE_HOST
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut specs = Vec::new();
        for (id, library, config) in self.rows {
            let library = library?;
            if specs.iter().any(|s: &RowSpec| s.id == id) || id == PROBE_ROW {
                return Err(HarnessError::Duplicate(format!(
                    "row '{id}' is added twice"
                )));
            }
            keel_kernel::schema::validate(&library.manifest.config_schema, &config).map_err(
                |(pointer, reason)| HarnessError::Config {
                    row: id.clone(),
                    plugin: library.name.clone(),
                    pointer,
                    reason,
                },
            )?;
            specs.push(RowSpec {
                id,
                plugin: library,
                config,
                idle: false,
            });
        }
        let probe = probe::install(self.probe)?;
        specs.insert(
            0,
            RowSpec {
                id: PROBE_ROW.to_owned(),
                plugin: probe,
                config: serde_json::json!({}),
                idle: false,
            },
        );
        let graph: Vec<GraphRow<'_>> = specs
            .iter()
            .map(|s| GraphRow {
                id: &s.id,
                plugin: &s.plugin.name,
                manifest: &s.plugin.manifest,
            })
            .collect();
        plan(&graph)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| HarnessError::Host(format!("cannot start a tokio runtime: {e}")))?;
        let home = tempfile::tempdir()
            .map_err(|e| HarnessError::Host(format!("cannot create a KEEL_HOME: {e}")))?;
        let kernel = Kernel::new(
            runtime.handle().clone(),
            self.settings,
            home.path().to_owned(),
            specs,
        )?;
        let started = runtime.block_on(kernel.start());
        match (started, probe::take_context()) {
            (Ok(()), Some(probe)) => Ok(TestHost {
                kernel,
                probe,
                runtime,
                home,
                _serial: serial,
            }),
            (started, _) => {
                // Unload what did activate before reporting.
                runtime.block_on(kernel.shutdown());
                started?;
                Err(HarnessError::Host(format!(
                    "the probe row '{PROBE_ROW}' did not activate"
                )))
            }
        }
    }
}

/// A running kernel with the rows of a [`Builder`]; shut down (dependents first, effects last
/// in first out) when dropped or by [`TestHost::shutdown`].
pub struct TestHost {
    kernel: Kernel,
    probe: Context,
    runtime: tokio::runtime::Runtime,
    home: tempfile::TempDir,
    _serial: MutexGuard<'static, ()>,
}

impl std::fmt::Debug for TestHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestHost")
            .field("home", &self.home.path())
            .finish()
    }
}

impl TestHost {
    /// A profile with no rows yet.
    pub fn builder() -> Builder {
        Builder {
            rows: Vec::new(),
            probe: probe::ProbeSpec::default(),
            settings: KernelSettings::default(),
        }
    }

    /// The probe's context: dispatch events (`emit`, `run_waterfall`, `parallel`, `serial`…,
    /// each with a [`TestHost::dispatch`] handle), look services up, read `plugin_status`, as a
    /// plugin would.
    pub fn ctx(&self) -> Context {
        self.probe
    }

    /// The probe's right to dispatch `E`: `host.ctx().emit(host.dispatch::<E>(), &payload)`.
    /// The probe stands in for whichever plugin dispatches `E`, so it has no set of its own;
    /// the kernel still refuses `E` (`UNKNOWN_EVENT`) unless a loaded row declares it (the
    /// plugin under test, or the probe through [`Builder::declares`]).
    pub fn dispatch<E: Event>(&self) -> Dispatch<E> {
        Dispatch::__new()
    }

    /// Runs a future (a client call, an async dispatch) on the kernel's runtime.
    pub fn block_on<T>(&self, fut: impl Future<Output = T>) -> T {
        self.runtime.block_on(fut)
    }

    /// A typed client of contract `C` as the probe sees it.
    ///
    /// # Errors
    /// `SERVICE_UNAVAILABLE` when no active row provides `C`.
    pub fn client<C: Contract>(&self) -> Result<C::Client> {
        self.ctx().get_client::<C>()?.ok_or_else(|| {
            Error::coded(
                keel_plugin_api::codes::ContractCode::ServiceUnavailable,
                format!("no active row provides '{}'", C::NAME),
            )
        })
    }

    /// A typed client of contract `C` served under `name`.
    ///
    /// # Errors
    /// `SERVICE_UNAVAILABLE` when no active row provides `name`; `SERVICE_LAYOUT` when it is
    /// not a contract.
    pub fn named_client<C: Contract>(&self, name: &str) -> Result<C::Client> {
        self.ctx().named_client::<C>(name)?.ok_or_else(|| {
            Error::coded(
                keel_plugin_api::codes::ContractCode::ServiceUnavailable,
                format!("no active row provides '{name}'"),
            )
        })
    }

    /// Every row's state (the probe's included): `active`, `failed`…, its last error and the
    /// effects it registered, oldest first.
    pub fn status(&self) -> Vec<RowStatus> {
        self.kernel.status()
    }

    /// One row's state.
    pub fn row(&self, id: &str) -> Option<RowStatus> {
        self.status().into_iter().find(|r| r.row == id)
    }

    /// How many listeners are registered on event `E`.
    pub fn listeners<E: Event>(&self) -> usize {
        self.kernel.bus().listener_count(E::NAME)
    }

    /// The kernel (for what the methods above do not cover).
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// `$KEEL_HOME` of this host (a temporary directory, removed on drop).
    pub fn keel_home(&self) -> &Path {
        self.home.path()
    }

    /// Unloads every row now (dependents first, effects last in first out).
    pub fn shutdown(self) {
        drop(self);
    }
}

impl Drop for TestHost {
    fn drop(&mut self) {
        self.runtime.block_on(self.kernel.shutdown());
    }
}
