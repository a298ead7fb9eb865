//! Proof plugin: provides and requires the non-exclusive facility `proof.ring`. One row is
//! fine (a row never depends on itself); two rows form a dependency cycle the kernel must name.

use keel_plugin_api::prelude::*;
use keel_proof_api::{RING, trace};

#[derive(Default)]
struct ProofGraph;

impl Plugin for ProofGraph {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new("proof-graph", env!("CARGO_PKG_VERSION"))
            .description("provides and requires proof.ring")
            .provides_named(RING, false)
            .requires_named(RING, false)
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        trace(format!("activate {}", ctx.row()?));
        Ok(())
    }
}

keel_plugin_api::export_plugin!(ProofGraph);
