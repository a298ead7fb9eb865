//! `fs-policy`: the observation policy of the file tools (requirements B11, FS-01…03) as its
//! own plugin, so a profile can drop or replace it without touching the tools.
//!
//! It listens on `fs/observed` to keep (session, target) → present(version) | absent, and
//! answers the single-slot decision waterfalls `fs/write-intent` and `fs/edit-intent` without
//! calling `next` (FS-01): a write of a target the session has not read becomes
//! create-if-absent, a write of a read target must still match the version read, and an edit
//! needs a prior read. The table itself ([`ObservationTable`]) is plain Rust; this file only
//! wires it to the kernel. No I/O; a session's state goes when the session is disposed, and all
//! of it when the plugin is.

pub mod table;

use std::sync::Arc;

use keel_plugin_api::events::Typed;
use keel_plugin_api::events::fs::{
    EditDecision, EditIntent, FsIntent, FsObserved, Observed, WriteDecision, WriteIntent,
};
use keel_plugin_api::events::session::SessionDisposed;
use keel_plugin_api::prelude::*;

pub use table::{Observation, ObservationTable};

/// The row config: nothing to set (an unknown key is an error).
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Config {}

/// The plugin value.
#[derive(Default)]
struct FsPolicy;

/// Sets the intent's decision from the table; never calls `next` (single slot, FS-01).
fn decide<D: serde::Serialize>(intent: &mut FsIntent<D>, decision: &D) -> Result<()> {
    intent.decision = Typed::new(decision)?;
    Ok(())
}

/// Records an `fs/observed` report. FS-02: side-effect only and never fails; a report that is
/// not an [`Observation`] (a foreign emitter's) is ignored and the previous state stays.
fn observe(table: &ObservationTable, o: &FsObserved) {
    if let Ok(observation) = o.observation.get() {
        table.observe(o.session_id.as_str(), o.target.as_str(), observation);
    }
}

impl Plugin for FsPolicy {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new("fs-policy", env!("CARGO_PKG_VERSION"))
            .description("file tools: writes and edits need a prior read of the same version")
            .config_type::<Config>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let table = Arc::new(ObservationTable::new());

        let t = Arc::clone(&table);
        ctx.on::<Observed>(ListenerOptions::default(), move |o: &FsObserved| {
            observe(&t, o);
            Ok(())
        })?;

        let t = Arc::clone(&table);
        ctx.waterfall::<WriteIntent>(
            ListenerOptions::default(),
            move |intent: &mut FsIntent<WriteDecision>,
                  _next: Next<'_, FsIntent<WriteDecision>>| {
                let decision = t.write_decision(intent.session_id.as_str(), intent.target.as_str());
                decide(intent, &decision)
            },
        )?;

        let t = Arc::clone(&table);
        ctx.waterfall::<EditIntent>(
            ListenerOptions::default(),
            move |intent: &mut FsIntent<EditDecision>, _next: Next<'_, FsIntent<EditDecision>>| {
                let decision = t.edit_decision(intent.session_id.as_str(), intent.target.as_str());
                decide(intent, &decision)
            },
        )?;

        let t = Arc::clone(&table);
        ctx.on::<SessionDisposed>(ListenerOptions::default(), move |s| {
            t.forget_session(s.session_id.as_str());
            Ok(())
        })?;

        ctx.effect("drop the fs observation state", move || async move {
            table.clear();
            Ok(())
        })?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(FsPolicy);

#[cfg(test)]
mod tests {
    use keel_plugin_api::sdk::Payload;

    use super::*;

    fn intent() -> FsIntent<WriteDecision> {
        FsIntent {
            session_id: RString::from("s"),
            target: RString::from("/t"),
            decision: Typed::new(&WriteDecision::Unconditional).unwrap(),
        }
    }

    fn observed(observation: Typed<Observation>) -> FsObserved {
        FsObserved {
            session_id: RString::from("s"),
            target: RString::from("/t"),
            observation,
        }
    }

    // FS-01: the policy overwrites the pre-set terminal decision with its own, and the wire
    // form is the documented one.
    #[test]
    fn fs01_decide_replaces_the_preset_decision() {
        let table = ObservationTable::new();
        let mut i = intent();
        decide(&mut i, &table.write_decision("s", "/t")).unwrap();
        assert_eq!(i.decision.get().unwrap(), WriteDecision::CreateIfAbsent);
        assert_eq!(i.decision.text(), r#"{"kind":"create-if-absent"}"#);
    }

    // FS-02: a report that is not an observation never fails and never changes state.
    #[test]
    fn fs02_malformed_observation_is_ignored() {
        let t = ObservationTable::new();
        let v1 = Observation::Present {
            version: "v1".into(),
        };
        observe(&t, &observed(Typed::new(&v1).unwrap()));
        for foreign in [
            serde_json::json!("not an observation"),
            serde_json::json!({"kind": "present"}),
            serde_json::json!({"kind": "maybe"}),
        ] {
            let forged = Typed::from_payload(Payload::encode(&foreign).unwrap());
            observe(&t, &observed(forged));
        }
        assert_eq!(t.state("s", "/t"), Some(v1));
    }
}
