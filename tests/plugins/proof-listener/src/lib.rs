//! Proof plugin: listeners whose behaviour comes from the row config, so one library can play
//! every role the conformance suite needs (order, short-circuit, re-run `next`, errors, panics
//! in sync and async listeners, hangs past a deadline, removal and addition mid-dispatch,
//! effect LIFO, activation failure and rollback, registration refused while unloading).
//! With `watch = true` the row also traces what the kernel reports about everyone else
//! (`kernel/listener-error`, `kernel/plugin-status`, `kernel/config-update-failed`).

#![allow(
    clippy::panic,
    reason = "panicking on purpose is what this proof plugin is for"
)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_plugin_api::abi::RString;
use keel_plugin_api::events::agent::Status;
use keel_plugin_api::events::kernel::{ConfigUpdateFailed, ListenerError, PluginStatus};
use keel_plugin_api::prelude::*;
use keel_plugin_api::sdk::sleep;
use keel_proof_api::{
    Chain, Decision, ProofAsyncWaterfall, ProofEmit, ProofParallel, ProofSerial, ProofWaterfall,
    trace, traced,
};
use serde::Deserialize;

keel_plugin_api::error_codes! {
    /// This test plugin's own code (a plugin declares its codes like any other).
    enum ProofCode in "proof" {
        /// The fixture failed on purpose.
        Proof = "PROOF", by "this test plugin", retry Never;
    }
}

/// One listener. `action` by mode — emit: `next` (trace only), `error`, `panic`,
/// `remove-next` (unregisters the row's next listener mid-dispatch), `add` (registers
/// `TAG-added`), `nested` (re-emits `inner` when the payload tag is `outer`); waterfalls:
/// `next`, `short`, `next-twice`, `error`, `panic`, and `hang` (async); parallel: `next`,
/// `error`, `panic`, `panic-start` (panics before returning its future), `hang`; serial:
/// `pass`, `decide`, `error`, `panic`, `hang`. `agent/status` (the agent loop's event, which
/// this plugin listens to without declaring it) only traces.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Spec {
    event: String,
    tag: String,
    #[serde(default)]
    order: i32,
    #[serde(default = "default_action")]
    action: String,
    #[serde(default)]
    deadline_ms: u64,
    #[serde(default)]
    sleep_ms: u64,
}

fn default_action() -> String {
    "next".to_owned()
}

/// A disposer: a bare name, or `{name, sleep_ms, fail}` (an async disposer that traces
/// `dispose NAME`, sleeps, then traces `disposed NAME`; `fail` makes it return an error).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum EffectSpec {
    Name(String),
    Full {
        name: String,
        #[serde(default)]
        sleep_ms: u64,
        #[serde(default)]
        fail: bool,
    },
}

impl EffectSpec {
    fn parts(&self) -> (String, u64, bool) {
        match self {
            EffectSpec::Name(n) => (n.clone(), 0, false),
            EffectSpec::Full {
                name,
                sleep_ms,
                fail,
            } => (name.clone(), *sleep_ms, *fail),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    listeners: Vec<Spec>,
    #[serde(default)]
    effects: Vec<EffectSpec>,
    #[serde(default)]
    fail_activation: bool,
    #[serde(default)]
    panic_activation: bool,
    #[serde(default)]
    register_in_disposer: bool,
    #[serde(default)]
    watch: bool,
    /// Rendezvous with another row's activation: proves rows of one layer activate
    /// concurrently (a sequential kernel would make the first one wait for ever).
    #[serde(default)]
    barrier: Option<Barrier>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Barrier {
    me: String,
    peer: String,
}

/// Traces arrival, then waits (up to 10 s) until the peer's arrival is in the trace file.
async fn rendezvous(b: &Barrier) -> Result<()> {
    trace(format!("barrier-arrive {}", b.me));
    if traced(&format!("barrier-arrive {}", b.peer), 10_000).await {
        trace(format!("barrier-pass {}", b.me));
        return Ok(());
    }
    Err(Error::coded(
        ProofCode::Proof,
        format!(
            "{} never reached the barrier: activations are not concurrent",
            b.peer
        ),
    ))
}

#[derive(Default)]
struct ProofListener;

fn boom(tag: &str) -> Error {
    Error::coded(
        ProofCode::Proof,
        format!("listener {tag} failed on purpose"),
    )
}

keel_plugin_api::dispatches! {
    /// The proof events, declared here too (a listener emits `proof/emit`).
    pub struct Dispatches {
        pub proof_emit: ProofEmit,
        pub proof_waterfall: ProofWaterfall,
        pub proof_async_waterfall: ProofAsyncWaterfall,
        pub proof_parallel: ProofParallel,
        pub proof_serial: ProofSerial,
    }
}

impl Plugin for ProofListener {
    type Dispatches = Dispatches;

    fn manifest(&self) -> Manifest {
        Manifest::new("proof-listener", env!("CARGO_PKG_VERSION"))
            .description("configurable listeners for the event-bus conformance suite")
            .config_schema(serde_json::json!({
                "type": "object",
                "properties": {
                    "listeners": {"type": "array"},
                    "effects": {"type": "array", "items": {"anyOf": [
                        {"type": "string"},
                        {"type": "object", "required": ["name"]}
                    ]}},
                    "fail_activation": {"type": "boolean"},
                    "panic_activation": {"type": "boolean"},
                    "register_in_disposer": {"type": "boolean"},
                    "watch": {"type": "boolean"},
                    "barrier": {"type": "object"}
                },
                "additionalProperties": false
            }))
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: Config = ctx.config()?;
        let row = ctx.row()?;
        trace(format!("activate {row}"));
        if config.watch {
            watch(&ctx)?;
        }
        if let Some(b) = &config.barrier {
            rendezvous(b).await?;
        }
        for effect in &config.effects {
            let (name, sleep_ms, fail) = effect.parts();
            let register = config.register_in_disposer;
            ctx.effect(&name.clone(), move || async move {
                trace(format!("dispose {name}"));
                if sleep_ms > 0 {
                    sleep(Duration::from_millis(sleep_ms)).await;
                    trace(format!("disposed {name}"));
                }
                if fail {
                    return Err(Error::coded(
                        ProofCode::Proof,
                        format!("disposer {name} fails on purpose"),
                    ));
                }
                if register {
                    let refused = ctx
                        .on::<ProofEmit>(ListenerOptions::default(), |_| Ok(()))
                        .err();
                    trace(format!(
                        "register-in-disposer {}",
                        refused
                            .map(|e| e.code)
                            .unwrap_or_else(|| "ACCEPTED".to_owned())
                    ));
                }
                Ok(())
            })?;
        }
        // Registrations made by listeners themselves (removal/addition during dispatch).
        let registrations: Regs = Arc::default();
        for spec in config.listeners.clone() {
            let reg = register(&ctx, spec.clone(), Arc::clone(&registrations))?;
            if let Ok(mut r) = registrations.lock() {
                r.push((spec.tag.clone(), Some(reg)));
            }
        }
        if config.panic_activation {
            panic!("activation panics on purpose");
        }
        if config.fail_activation {
            return Err(Error::coded(
                ProofCode::Proof,
                "activation fails on purpose",
            ));
        }
        Ok(())
    }
}

/// This row's listeners in registration order; `None` once removed by `remove-next`.
type Regs = Arc<Mutex<Vec<(String, Option<Registration>)>>>;

/// Traces the kernel's own reports (the `watch` option).
fn watch(ctx: &Context) -> Result<()> {
    ctx.on::<ListenerError>(ListenerOptions::default(), |e| {
        trace(format!("listener-error {} {} {}", e.event, e.row, e.code));
        Ok(())
    })?;
    ctx.on::<PluginStatus>(ListenerOptions::default(), |e| {
        trace(format!(
            "plugin-status {} {} faulted={}",
            e.row, e.state, e.faulted
        ));
        Ok(())
    })?;
    ctx.on::<ConfigUpdateFailed>(ListenerOptions::default(), |e| {
        trace(format!("config-update-failed {}", e.row));
        Ok(())
    })?;
    Ok(())
}

/// Removes the listener registered right after `tag` in this row, *now* (once: later calls
/// find nothing to remove). Unregistering a listener completes synchronously, so polling the
/// kernel's future once finishes it while the dispatch that called us is still running (case 18).
fn remove_next(ctx: Context, regs: &Regs, tag: &str) {
    let victim = regs.lock().ok().and_then(|mut r| {
        let me = r.iter().position(|(t, _)| t == tag)?;
        let (name, reg) = r.get_mut(me + 1)?;
        Some((name.clone(), reg.take()?))
    });
    let Some((victim, reg)) = victim else {
        return;
    };
    let mut fut = std::pin::pin!(ctx.unregister(reg));
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(Ok(())) => trace(format!("removed {victim}")),
        std::task::Poll::Ready(Err(e)) => trace(format!("remove {victim} failed {}", e.code)),
        std::task::Poll::Pending => trace(format!("remove {victim} pending")),
    }
}

fn options(spec: &Spec) -> ListenerOptions {
    ListenerOptions {
        order: spec.order,
        deadline_ms: spec.deadline_ms,
    }
}

fn register(ctx: &Context, spec: Spec, regs: Regs) -> Result<Registration> {
    let opts = options(&spec);
    let ctx2 = *ctx;
    match spec.event.as_str() {
        "proof/emit" => ctx.on::<ProofEmit>(opts, move |p| {
            trace(format!("emit {} {}", spec.tag, p.tag));
            match spec.action.as_str() {
                "panic" => panic!("emit listener {} panics", spec.tag),
                "error" => Err(boom(&spec.tag)),
                "remove-next" => {
                    remove_next(ctx2, &regs, &spec.tag);
                    Ok(())
                }
                "add" => {
                    let tag = format!("{}-added", spec.tag);
                    ctx2.on::<ProofEmit>(ListenerOptions::default(), move |p| {
                        trace(format!("emit {tag} {}", p.tag));
                        Ok(())
                    })?;
                    Ok(())
                }
                "nested" => {
                    // Re-entrant dispatch runs immediately, depth-first (case 20).
                    if p.tag.as_str() == "outer" {
                        ctx2.emit(
                            crate::DISPATCH.proof_emit,
                            &keel_proof_api::Probe {
                                tag: "inner".into(),
                            },
                        )?;
                    }
                    Ok(())
                }
                _ => Ok(()),
            }
        }),
        "proof/waterfall" => ctx.waterfall::<ProofWaterfall>(opts, move |p, next| {
            trace(format!("waterfall {}", spec.tag));
            p.value += 1;
            p.log.push(RString::from(spec.tag.as_str()));
            match spec.action.as_str() {
                "short" => Ok(()),
                "panic" => panic!("waterfall listener {} panics", spec.tag),
                "error" => Err(boom(&spec.tag)),
                "next-twice" => {
                    next.run(p)?;
                    next.run(p)
                }
                _ => next.run(p),
            }
        }),
        "proof/async-waterfall" => {
            ctx.async_waterfall::<ProofAsyncWaterfall, _, _>(opts, move |mut p: Chain, next| {
                let spec = spec.clone();
                async move {
                    trace(format!("async-waterfall {}", spec.tag));
                    p.value += 1;
                    p.log.push(RString::from(spec.tag.as_str()));
                    match spec.action.as_str() {
                        "short" => Ok(p),
                        "panic" => panic!("async waterfall listener {} panics", spec.tag),
                        "error" => Err(boom(&spec.tag)),
                        "hang" => {
                            sleep(Duration::from_secs(3600)).await;
                            Ok(p)
                        }
                        "next-twice" => {
                            let first = next.run(p.clone()).await?;
                            trace(format!(
                                "async-waterfall {} first {}",
                                spec.tag, first.value
                            ));
                            next.run(p).await
                        }
                        _ => {
                            let mut out = next.run(p).await?;
                            out.value *= 10;
                            trace(format!("async-waterfall {} back {}", spec.tag, out.value));
                            Ok(out)
                        }
                    }
                }
            })
        }
        "proof/parallel" => ctx.on_parallel::<ProofParallel, _, _>(opts, move |p| {
            let spec = spec.clone();
            let tag = p.tag.to_string();
            trace(format!("parallel-start {} {tag}", spec.tag));
            if spec.action == "panic-start" {
                panic!(
                    "parallel listener {} panics before its future exists",
                    spec.tag
                );
            }
            async move {
                if spec.sleep_ms > 0 {
                    sleep(Duration::from_millis(spec.sleep_ms)).await;
                }
                match spec.action.as_str() {
                    "panic" => panic!("parallel listener {} panics", spec.tag),
                    "error" => return Err(boom(&spec.tag)),
                    "hang" => sleep(Duration::from_secs(3600)).await,
                    _ => {}
                }
                trace(format!("parallel-end {}", spec.tag));
                Ok(())
            }
        }),
        "proof/serial" => ctx.on_serial::<ProofSerial, _, _>(opts, move |_p| {
            let spec = spec.clone();
            async move {
                trace(format!("serial {}", spec.tag));
                if spec.sleep_ms > 0 {
                    sleep(Duration::from_millis(spec.sleep_ms)).await;
                }
                match spec.action.as_str() {
                    "decide" => Ok(Some(Decision {
                        by: RString::from(spec.tag.as_str()),
                    })),
                    "panic" => panic!("serial listener {} panics", spec.tag),
                    "error" => Err(boom(&spec.tag)),
                    "hang" => {
                        sleep(Duration::from_secs(3600)).await;
                        Ok(None)
                    }
                    _ => Ok(None),
                }
            }
        }),
        // A core event owned by the agent loop, which this plugin does not declare.
        "agent/status" => ctx.on::<Status>(opts, move |p| {
            trace(format!("agent-status {} {}", spec.tag, p.session_id));
            Ok(())
        }),
        other => Err(Error::coded(
            ProofCode::Proof,
            format!("unknown proof event '{other}'"),
        )),
    }
}

keel_plugin_api::export_plugin!(ProofListener);
