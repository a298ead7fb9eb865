//! `proof-agent-hooks`: joins one agent seam and misbehaves there, once, so the integration
//! tests can prove a failing plugin listener ends only its turn (LOOP-08).
//!
//! Row config: `seam` (`tools/pre-execute`, `llm/stream`, `tools/execute`, `session/flush`,
//! `agent/turn-stopping`, `context/compact`),
//! `action` (`panic` or `error` the first time, `steer` for turn-stopping, `veto` for
//! context/compact (every plan is refused), `log` to log `text`
//! at warn level and print it with `println!`/`eprintln!` every time, `delay` to wait
//! `delay_ms` every time and pass — a slow hook, like an approval waiting for a person), and
//! `marker`: a
//! file created on the first call; while it exists the listener passes through, so the next turn
//! (for example after `keel resume`) runs normally.

#![allow(
    clippy::panic,
    reason = "this proof plugin panics on purpose to test containment"
)]

use std::path::PathBuf;

use keel_plugin_api::events::Typed;
use keel_plugin_api::events::agent::{Steer, TurnStopping};
use keel_plugin_api::events::context::Compact;
use keel_plugin_api::events::llm::Stream;
use keel_plugin_api::events::session::SessionFlush;
use keel_plugin_api::events::tools::{Execute, PreExecute};
use keel_plugin_api::prelude::*;
use serde::Deserialize;

keel_plugin_api::error_codes! {
    /// This test plugin's own codes (a plugin declares its codes like any other).
    enum HooksCode in "proof-agent-hooks" {
        /// The configured seam failed on purpose.
        Injected = "INJECTED", by "this test plugin", retry Never;
        /// The row config names a seam this plugin does not know.
        InvalidConfig = "INVALID_CONFIG", by "this test plugin", retry Changed;
    }
}

#[derive(Debug, Clone, Deserialize)]
struct Config {
    seam: String,
    #[serde(default = "panic_action")]
    action: String,
    marker: PathBuf,
    /// For `action = "log"`: the line to log at warn level, each time the seam fires.
    #[serde(default)]
    text: String,
    /// For `action = "delay"`: how long to wait, each time the seam fires.
    #[serde(default)]
    delay_ms: u64,
}

fn panic_action() -> String {
    "panic".to_owned()
}

impl Config {
    /// `true` the first time (and creates the marker).
    fn first_time(&self) -> bool {
        if self.marker.exists() {
            return false;
        }
        let _ = std::fs::write(&self.marker, b"fired\n");
        true
    }

    async fn misbehave(&self) -> Result<()> {
        if self.action == "delay" {
            keel_plugin_api::sdk::sleep(std::time::Duration::from_millis(self.delay_ms)).await;
            return Ok(());
        }
        if self.action == "log" {
            // A plugin that logs what it should not (SEC-03: the kernel redacts the line).
            tracing::warn!("proof-agent-hooks saw: {}", self.text);
            // And one that prints past every API, with its own copy of std (SEC-03: the
            // kernel's output guard owns descriptors 1 and 2).
            println!("proof-agent-hooks printed: {}", self.text);
            eprintln!("proof-agent-hooks printed: {}", self.text);
            return Ok(());
        }
        if !self.first_time() {
            return Ok(());
        }
        if self.action == "error" {
            return Err(Error::coded(
                HooksCode::Injected,
                format!("proof-agent-hooks failed {} on purpose", self.seam),
            ));
        }
        panic!("proof-agent-hooks panics in {} on purpose", self.seam);
    }
}

#[derive(Default)]
struct Hooks;

impl Plugin for Hooks {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new("proof-agent-hooks", env!("CARGO_PKG_VERSION"))
            .description("fails one agent seam once, on purpose")
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: Config = ctx.config()?;
        let opts = ListenerOptions::default();
        match config.seam.as_str() {
            "tools/pre-execute" => {
                ctx.async_waterfall::<PreExecute, _, _>(opts, move |exec, next| {
                    let c = config.clone();
                    async move {
                        c.misbehave().await?;
                        next.run(exec).await
                    }
                })?;
            }
            "tools/execute" => {
                ctx.async_waterfall::<Execute, _, _>(opts, move |exec, next| {
                    let c = config.clone();
                    async move {
                        c.misbehave().await?;
                        next.run(exec).await
                    }
                })?;
            }
            "llm/stream" => {
                ctx.async_waterfall::<Stream, _, _>(opts, move |call, next| {
                    let c = config.clone();
                    async move {
                        c.misbehave().await?;
                        next.run(call).await
                    }
                })?;
            }
            "session/flush" => {
                ctx.on_parallel::<SessionFlush, _, _>(opts, move |_flush| {
                    let c = config.clone();
                    async move { c.misbehave().await }
                })?;
            }
            "agent/turn-stopping" => {
                ctx.on_serial::<TurnStopping, _, _>(opts, move |_point| {
                    let c = config.clone();
                    async move {
                        if c.action == "steer" && c.first_time() {
                            return Typed::new(&Steer {
                                steer: "One more thing: say goodbye.".into(),
                            })
                            .map(Some);
                        }
                        Ok(None)
                    }
                })?;
            }
            "context/compact" => {
                ctx.waterfall::<Compact>(opts, move |point, next| {
                    if config.action == "veto" {
                        let mut plan = point.data.get()?;
                        plan.veto = Some("proof-agent-hooks vetoes every plan".into());
                        point.data = Typed::new(&plan)?;
                    }
                    next.run(point)
                })?;
            }
            other => {
                return Err(Error::coded(
                    HooksCode::InvalidConfig,
                    format!("proof-agent-hooks: unknown seam '{other}'"),
                ));
            }
        }
        Ok(())
    }
}

keel_plugin_api::export_plugin!(Hooks);
