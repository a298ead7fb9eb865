//! Unit tests for applying layers: row operations, warnings, provenance and launcher patches.

use std::path::PathBuf;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::model::KernelSettings;
use crate::test_support::obj;

fn tree() -> ResolvedProfile {
    ResolvedProfile::empty("p".into(), PathBuf::from("/cfg/profiles/p.toml"))
}

fn bundle() -> LayerRef {
    LayerRef::new(LayerKind::Bundle("base".into()), "/cfg/bundles/base.toml")
}

fn profile() -> LayerRef {
    LayerRef::new(LayerKind::Profile("p".into()), "/cfg/profiles/p.toml")
}

fn user() -> LayerRef {
    LayerRef::new(LayerKind::User, "/home/.keel/config.toml")
}

fn ids(t: &ResolvedProfile) -> Vec<&str> {
    t.rows.iter().map(|r| r.id.as_str()).collect()
}

fn apply_c(t: &mut ResolvedProfile, arg: &str) -> Result<(), ConfigError> {
    t.apply_override(&Override::parse(arg)?)
}

#[test]
fn cfg03_replace_swaps_the_whole_config_without_deep_merge() {
    let mut t = tree();
    let base = LayerOps::default().insert(
        "agent-loop",
        "agent-loop",
        obj(json!({ "max_steps": 20, "limits": { "a": 1, "b": 2 } })),
    );
    t.apply_layer(bundle(), &base).unwrap();
    let patch = LayerOps::default().replace("agent-loop", obj(json!({ "limits": { "a": 9 } })));
    t.apply_layer(user(), &patch).unwrap();
    let row = t.row("agent-loop").unwrap();
    // `max_steps` and `limits.b` are gone: the replacement is the whole config.
    assert_eq!(row.config, json!({ "limits": { "a": 9 } }));
    assert_eq!(row.plugin, "agent-loop");
    assert_eq!(row.provenance.inserted_by, bundle());
    assert_eq!(row.provenance.replaced_by, vec![user()]);
    assert!(t.warnings.is_empty());
}

#[test]
fn cfg03_disable_removes_the_row_and_reinsert_revives_it_at_the_end() {
    let mut t = tree();
    let base = LayerOps::default()
        .insert("a", "pa", obj(json!({})))
        .insert("telemetry", "telemetry", obj(json!({ "on": true })))
        .insert("b", "pb", obj(json!({})));
    t.apply_layer(bundle(), &base).unwrap();
    t.apply_layer(profile(), &LayerOps::default().disable("telemetry"))
        .unwrap();
    assert_eq!(ids(&t), vec!["a", "b"]);
    assert_eq!(
        t.disabled,
        vec![DisabledRow {
            id: "telemetry".into(),
            plugin: "telemetry".into(),
            inserted_by: bundle(),
            disabled_by: profile(),
        }]
    );

    let revive = LayerOps::default().insert("telemetry", "telemetry-otel", obj(json!({ "x": 1 })));
    t.apply_layer(user(), &revive).unwrap();
    assert_eq!(ids(&t), vec!["a", "b", "telemetry"]);
    let row = t.row("telemetry").unwrap();
    assert_eq!(row.plugin, "telemetry-otel");
    assert_eq!(row.config, json!({ "x": 1 }));
    assert_eq!(row.provenance.inserted_by, user());
    assert_eq!(row.provenance.previously_disabled_by, Some(profile()));
    assert!(t.disabled.is_empty());
}

#[test]
fn cfg03_duplicate_insert_names_both_layers() {
    let mut t = tree();
    t.apply_layer(
        bundle(),
        &LayerOps::default().insert("shell", "tools-shell", obj(json!({}))),
    )
    .unwrap();
    let mut again = LayerOps::default().insert("shell", "tools-shell", obj(json!({})));
    again.ops[0].line = Some(12);
    let err = t.apply_layer(profile(), &again).unwrap_err();
    assert_eq!(err.code(), "CONFIG_DUPLICATE_ROW");
    assert_eq!(
        err.to_string(),
        "duplicate row 'shell': inserted by profile:p (/cfg/profiles/p.toml:12) \
         but already inserted by bundle:base (/cfg/bundles/base.toml)"
    );
}

#[test]
fn cfg03_unmatched_replace_disable_and_override_are_warnings_naming_the_layer() {
    let mut t = tree();
    let ops = LayerOps::default()
        .replace("ghost", obj(json!({})))
        .disable("phantom");
    t.apply_layer(user(), &ops).unwrap();
    apply_c(&mut t, "nobody.k=1").unwrap();
    assert_eq!(
        t.warnings,
        vec![
            "warning: user layer /home/.keel/config.toml: replace of row 'ghost' matches no row",
            "warning: user layer /home/.keel/config.toml: disable of row 'phantom' matches no row",
            "warning: cli layer -c nobody.k=1: override of row 'nobody' matches no row",
        ]
    );
    assert!(t.rows.is_empty());
}

#[test]
fn disabling_twice_warns_the_second_time() {
    let mut t = tree();
    t.apply_layer(
        bundle(),
        &LayerOps::default().insert("a", "p", obj(json!({}))),
    )
    .unwrap();
    t.apply_layer(profile(), &LayerOps::default().disable("a"))
        .unwrap();
    t.apply_layer(user(), &LayerOps::default().disable("a"))
        .unwrap();
    assert_eq!(t.warnings.len(), 1);
    assert!(t.warnings[0].contains("disable of row 'a' matches no row"));
    assert_eq!(t.disabled.len(), 1);
}

#[test]
fn cfg08_key_provenance_tracks_setter_and_overridden_layers() {
    let mut t = tree();
    t.apply_layer(
        bundle(),
        &LayerOps::default().insert("r", "p", obj(json!({ "a": 1, "b": 1 }))),
    )
    .unwrap();
    t.apply_layer(
        profile(),
        &LayerOps::default().replace("r", obj(json!({ "a": 2, "c": 2 }))),
    )
    .unwrap();
    apply_c(&mut t, "r.a=3").unwrap();
    apply_c(&mut t, "r.d.e=4").unwrap();
    let row = t.row("r").unwrap();
    assert_eq!(row.config, json!({ "a": 3, "c": 2, "d": { "e": 4 } }));
    let cli_a = LayerRef::new(LayerKind::Cli, "-c r.a=3");
    let cli_d = LayerRef::new(LayerKind::Cli, "-c r.d.e=4");
    assert_eq!(
        row.provenance.keys,
        vec![
            KeyProvenance {
                key: "a".into(),
                set_by: cli_a.clone(),
                overrode: vec![bundle(), profile()]
            },
            KeyProvenance {
                key: "c".into(),
                set_by: profile(),
                overrode: vec![]
            },
            KeyProvenance {
                key: "d".into(),
                set_by: cli_d.clone(),
                overrode: vec![]
            },
        ]
    );
    assert_eq!(row.provenance.replaced_by, vec![profile()]);
    assert_eq!(row.provenance.overridden_by, vec![cli_a, cli_d]);
}

#[test]
fn override_through_a_scalar_is_a_bad_override() {
    let mut t = tree();
    t.apply_layer(
        bundle(),
        &LayerOps::default().insert("r", "p", obj(json!({ "a": 1 }))),
    )
    .unwrap();
    let err = apply_c(&mut t, "r.a.b=2").unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad override '-c r.a.b=2': key 'a' is not a table"
    );
}

#[test]
fn kernel_settings_later_layer_wins_per_key() {
    let mut t = tree();
    assert_eq!(
        t.kernel,
        KernelSettings {
            fault_threshold: 3,
            listener_deadline_ms: 60_000,
            activation_deadline_ms: 60_000,
            trust_project: false,
        }
    );
    let first = LayerOps {
        kernel: KernelPatch {
            fault_threshold: Some(5),
            listener_deadline_ms: Some(1_000),
            activation_deadline_ms: Some(9_000),
        },
        ..LayerOps::default()
    };
    let mut second = LayerOps::default();
    second.kernel.fault_threshold = Some(7);
    t.apply_layer(bundle(), &first).unwrap();
    t.apply_layer(user(), &second).unwrap();
    assert_eq!(
        t.kernel,
        KernelSettings {
            fault_threshold: 7,
            listener_deadline_ms: 1_000,
            activation_deadline_ms: 9_000,
            trust_project: false,
        }
    );
    assert_eq!(
        t.kernel_provenance,
        vec![
            KeyProvenance {
                key: "fault_threshold".into(),
                set_by: user(),
                overrode: vec![bundle()]
            },
            KeyProvenance {
                key: "listener_deadline_ms".into(),
                set_by: bundle(),
                overrode: vec![]
            },
            KeyProvenance {
                key: "activation_deadline_ms".into(),
                set_by: bundle(),
                overrode: vec![]
            },
        ]
    );
    assert_eq!(t.layers, vec![bundle(), user()]);
}

#[test]
fn cfg07_launcher_patch_applies_and_snapshots_the_dumpable_tree() {
    let mut t = tree();
    t.apply_layer(
        bundle(),
        &LayerOps::default().insert("presets", "agent-presets", obj(json!({}))),
    )
    .unwrap();
    let ops = LayerOps::default()
        .replace(
            "presets",
            obj(json!({ "root": "/shipped", "trust": "system" })),
        )
        .disable("ghost");
    t.apply_launcher_patch_from("agent-presets", ops).unwrap();
    let launcher = LayerRef::new(LayerKind::Launcher, "agent-presets");
    let row = t.row("presets").unwrap();
    assert_eq!(row.config, json!({ "root": "/shipped", "trust": "system" }));
    assert_eq!(row.provenance.replaced_by, vec![launcher.clone()]);
    assert_eq!(t.layers.last(), Some(&launcher));
    assert_eq!(
        t.warnings,
        vec!["warning: launcher layer agent-presets: disable of row 'ghost' matches no row"]
    );
    let view = t.dump_view();
    assert_eq!(view.rows[0].config, json!({}));
    assert_eq!(view.layers, &[bundle()]);
}

#[test]
fn launcher_patch_is_all_or_nothing() {
    let mut t = tree();
    t.apply_layer(
        bundle(),
        &LayerOps::default().insert("a", "p", obj(json!({}))),
    )
    .unwrap();
    let before = t.clone();
    let ops = LayerOps::default()
        .insert("b", "p", obj(json!({})))
        .insert("a", "p", obj(json!({})));
    let err = t.apply_launcher_patch(ops).unwrap_err();
    assert_eq!(
        err.to_string(),
        "duplicate row 'a': inserted by launcher (launcher) \
         but already inserted by bundle:base (/cfg/bundles/base.toml)"
    );
    assert_eq!(t, before);
    let err = t
        .apply_launcher_patch(LayerOps::default().disable("A"))
        .unwrap_err();
    assert_eq!(err.code(), "CONFIG_INVALID_ID");
    assert_eq!(t, before);
}
