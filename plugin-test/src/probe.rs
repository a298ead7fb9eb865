//! The probe: the test's own row. Its manifest and activation hooks are set per host (one host
//! at a time per process), and its context is handed to the test once it activated.

use std::sync::{Arc, Mutex};

use keel_kernel::loader::PluginLibrary;
use keel_plugin_api::prelude::*;

use crate::HarnessError;

type Hook = Box<dyn FnOnce(Context) -> Result<()> + Send>;

/// What the probe provides, declares and runs at activation.
pub(crate) struct ProbeSpec {
    pub(crate) manifest: Manifest,
    hooks: Vec<Hook>,
}

impl Default for ProbeSpec {
    fn default() -> Self {
        ProbeSpec {
            manifest: Manifest::new(crate::PROBE_ROW, env!("CARGO_PKG_VERSION"))
                .description("keel-plugin-test's probe: the test's own fiber"),
            hooks: Vec::new(),
        }
    }
}

impl ProbeSpec {
    pub(crate) fn on_activate(&mut self, f: impl FnOnce(Context) -> Result<()> + Send + 'static) {
        self.hooks.push(Box::new(f));
    }
}

struct State {
    manifest: Option<Manifest>,
    hooks: Vec<Hook>,
    ctx: Option<Context>,
}

static STATE: Mutex<State> = Mutex::new(State {
    manifest: None,
    hooks: Vec::new(),
    ctx: None,
});

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[derive(Default)]
struct Probe;

impl Plugin for Probe {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        state()
            .manifest
            .clone()
            .unwrap_or_else(|| ProbeSpec::default().manifest)
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let hooks = std::mem::take(&mut state().hooks);
        for hook in hooks {
            hook(ctx)?;
        }
        state().ctx = Some(ctx);
        Ok(())
    }
}

/// Makes `spec` the probe of the next host and returns its library.
pub(crate) fn install(spec: ProbeSpec) -> Result<Arc<PluginLibrary>, HarnessError> {
    {
        let mut s = state();
        s.manifest = Some(spec.manifest);
        s.hooks = spec.hooks;
        s.ctx = None;
    }
    Ok(Arc::new(crate::roots::open(
        "keel_plugin_test::Probe",
        crate::roots::static_root::<Probe>(),
    )?))
}

/// The probe's context, once it activated.
pub(crate) fn take_context() -> Option<Context> {
    state().ctx.take()
}
