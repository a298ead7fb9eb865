//! `ticker`: a plugin that uses tokio directly (timers and a spawned task), the case that panics
//! with "no reactor running" when a cdylib's own tokio is polled by the kernel's runtime.
//!
//! It opts into the SDK's plugin-owned runtime (`plugin-runtime` feature) and runs its tokio
//! work there with `spawn_bridged`, which the kernel awaits through runtime-agnostic wakers.

use std::io::Write as _;
use std::time::Duration;

use keel_plugin_api::prelude::*;
use keel_plugin_api::sdk::spawn_bridged;

#[derive(Default)]
struct Ticker;

fn note(line: &str) {
    if let Some(path) = std::env::var_os("KEEL_PROOF_TRACE") {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

impl Plugin for Ticker {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new("ticker", env!("CARGO_PKG_VERSION"))
            .description("counts tokio interval ticks")
    }

    async fn activate(&self, _ctx: Context) -> Result<()> {
        // tokio::time and tokio::spawn inside the plugin's own runtime.
        let ticks = spawn_bridged(async {
            let mut interval = tokio::time::interval(Duration::from_millis(5));
            let mut n = 0u32;
            for _ in 0..3 {
                interval.tick().await;
                n += 1;
            }
            let spawned = tokio::spawn(async {
                tokio::time::sleep(Duration::from_millis(1)).await;
                7u32
            });
            n + spawned.await.unwrap_or(0)
        })
        .await?;
        note(&format!("ticker ticks={ticks}"));
        Ok(())
    }
}

keel_plugin_api::export_plugin!(Ticker);
