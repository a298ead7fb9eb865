//! Unit tests for `config dump`: round-trip, `--explain` annotations, JSON, and launcher hiding.

use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::layer::{LayerOps, parse_layer};
use crate::model::{KernelSettings, LayerKind, LayerRef};
use crate::resolve_profile;
use crate::test_support::{Fixture, obj, shown};

/// A demo tree: base bundle, profile replace + disable, user kernel, one `-c`.
fn demo(fx: &Fixture) -> ResolvedProfile {
    fx.write(
        "root/bundles/base.toml",
        r#"
[[insert]]
id = "agent-loop"
plugin = "agent-loop"
config = { max_steps = 20, model = "m" }

[[insert]]
id = "telemetry"
plugin = "telemetry"

[[insert]]
id = "odd"
plugin = "odd"
[insert.config]
"key with spaces" = "a \"quoted\"\nmultiline ''' string"
when = 1979-05-27T07:32:00Z
ratio = 0.25
empty = {}
nested = { deep = { list = [1, 2, 3] } }
mixed = [1, "a", { t = true }]
nested_arrays = [[{ a = 1 }], []]
empties = [{}, {}]
[[insert.config.tools]]
name = "read"
[[insert.config.tools]]
name = "write"
"#,
    );
    fx.write(
        "root/profiles/demo.toml",
        r#"description = "offline demo"
bundles = ["base"]
[[replace]]
id = "agent-loop"
config = { max_steps = 5 }
[[disable]]
id = "telemetry"
"#,
    );
    fx.write("home/config.toml", "[kernel]\nfault_threshold = 9\n");
    let mut sources = fx.sources();
    sources.overrides = vec!["agent-loop.max_steps=3".into()];
    resolve_profile("demo", &sources).unwrap()
}

/// Parses a dump back as a profile and applies it over an empty tree.
fn reparse(text: &str) -> ResolvedProfile {
    let path = Path::new("/dump.toml");
    let parsed = parse_layer(text, path, None).unwrap();
    assert!(parsed.bundles.is_empty());
    let mut tree = ResolvedProfile::empty("dump".into(), path.to_path_buf());
    tree.apply_layer(
        LayerRef::new(LayerKind::Profile("dump".into()), "/dump.toml"),
        &parsed.ops,
    )
    .unwrap();
    tree
}

fn shape(p: &ResolvedProfile) -> (KernelSettings, Vec<(String, String, serde_json::Value)>) {
    let rows = p
        .rows
        .iter()
        .map(|r| (r.id.clone(), r.plugin.clone(), r.config.clone()))
        .collect();
    (p.kernel, rows)
}

#[test]
fn cfg08_dump_round_trips_to_the_same_rows_with_and_without_explain() {
    let fx = Fixture::new();
    let resolved = demo(&fx);
    for explain in [false, true] {
        let text = render_dump(&resolved, explain);
        assert_eq!(
            shape(&reparse(&text)),
            shape(&resolved),
            "explain={explain}\n{text}"
        );
    }
    let odd = resolved.row("odd").unwrap();
    assert_eq!(odd.config["when"], json!("1979-05-27T07:32:00Z"));
    assert_eq!(
        odd.config["tools"],
        json!([{ "name": "read" }, { "name": "write" }])
    );
}

#[test]
fn plain_dump_has_header_kernel_and_rows() {
    let fx = Fixture::new();
    let resolved = demo(&fx);
    let text = render_dump(&resolved, false);
    let header = format!(
        "# profile demo ({})\n",
        shown(&fx.path("root/profiles/demo.toml"))
    );
    assert!(text.starts_with(&header), "{text}");
    assert!(
        text.contains("[kernel]\nfault_threshold = 9\nlistener_deadline_ms = 60000\n"),
        "{text}"
    );
    assert!(text.contains("[[insert]]\nid = \"agent-loop\"\nplugin = \"agent-loop\"\n\n[insert.config]\nmax_steps = 3\n"), "{text}");
    assert!(!text.contains("telemetry"), "disabled rows vanish: {text}");
    assert!(
        !text.contains("inserted by"),
        "no provenance without --explain: {text}"
    );
    assert!(
        text.ends_with("# note: launcher-only patches are not shown (CFG-08)\n"),
        "{text}"
    );
}

#[test]
fn cfg08_explain_annotates_rows_keys_kernel_and_disabled_rows() {
    let fx = Fixture::new();
    let resolved = demo(&fx);
    let text = render_dump(&resolved, true);
    let base = format!(
        "bundle:base ({})",
        shown(&fx.path("root/bundles/base.toml"))
    );
    let prof = format!(
        "profile:demo ({})",
        shown(&fx.path("root/profiles/demo.toml"))
    );
    let user = format!("user ({})", shown(&fx.path("home/config.toml")));
    let cli = "cli (-c agent-loop.max_steps=3)";
    for line in [
        format!("# layer 1: {base}"),
        format!("# layer 4: {cli}"),
        format!("# kernel fault_threshold: set by {user}"),
        "# kernel listener_deadline_ms: default".to_owned(),
        format!(
            "# row 'agent-loop': inserted by {base}; replaced by {prof}; keys overridden by {cli}"
        ),
        format!("# key max_steps: set by {cli}, overrode {base}, {prof}"),
        format!("# row 'odd': inserted by {base}"),
        format!("# key ratio: set by {base}"),
        "# disabled rows:".to_owned(),
        format!("#   row 'telemetry' (plugin telemetry): inserted by {base}; disabled by {prof}"),
        "# note: launcher-only patches are not shown (CFG-08)".to_owned(),
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing line {line:?} in:\n{text}"
        );
    }
    // `model` was dropped by the whole-row replace: no stale key comment.
    assert!(!text.contains("# key model"), "{text}");
    // Comment lines above the row they describe.
    let row_comment = text.find("# row 'agent-loop'").unwrap();
    let row_table = text.find("id = \"agent-loop\"").unwrap();
    assert!(row_comment < row_table);
}

#[test]
fn cfg07_launcher_patch_applies_but_is_never_shown_in_dumps() {
    let fx = Fixture::new();
    let mut resolved = demo(&fx);
    let before_text = render_dump(&resolved, true);
    let before_json = render_dump_json(&resolved, true);
    let ops = LayerOps::default()
        .insert(
            "agent-presets",
            "agent-presets",
            obj(json!({ "trust": "system" })),
        )
        .replace("agent-loop", obj(json!({ "max_steps": 99 })))
        .disable("odd");
    resolved.apply_launcher_patch(ops).unwrap();
    let mut more = LayerOps::default();
    more.kernel.fault_threshold = Some(1);
    resolved.apply_launcher_patch(more).unwrap();

    // The live tree has the launcher's changes...
    assert!(resolved.row("agent-presets").is_some());
    assert!(resolved.row("odd").is_none());
    assert_eq!(
        resolved.row("agent-loop").unwrap().config,
        json!({ "max_steps": 99 })
    );
    assert_eq!(resolved.kernel.fault_threshold, 1);
    // ...the dumps do not.
    assert_eq!(render_dump(&resolved, true), before_text);
    assert_eq!(render_dump_json(&resolved, true), before_json);
    assert!(!before_text.contains("launcher ("), "{before_text}");
}

#[test]
fn json_dump_has_rows_and_explain_fields() {
    let fx = Fixture::new();
    let resolved = demo(&fx);
    let plain = render_dump_json(&resolved, false);
    assert_eq!(plain["profile"], json!("demo"));
    assert_eq!(plain["description"], json!("offline demo"));
    assert_eq!(plain["bundles"], json!(["base"]));
    assert_eq!(
        plain["kernel"],
        json!({ "fault_threshold": 9, "listener_deadline_ms": 60000, "activation_deadline_ms": 60000 })
    );
    assert_eq!(
        plain["rows"][0],
        json!({ "id": "agent-loop", "plugin": "agent-loop", "config": { "max_steps": 3 } })
    );
    assert_eq!(plain["note"], json!(LAUNCHER_NOTE));
    assert!(plain.get("disabled").is_none());

    let explained = render_dump_json(&resolved, true);
    let key = &explained["rows"][0]["provenance"]["keys"][0];
    assert_eq!(key["key"], json!("max_steps"));
    assert_eq!(
        key["set_by"],
        json!({ "kind": "cli", "source": "-c agent-loop.max_steps=3" })
    );
    assert_eq!(key["overrode"][1]["kind"], json!("profile:demo"));
    assert_eq!(explained["disabled"][0]["id"], json!("telemetry"));
    assert_eq!(explained["layers"].as_array().unwrap().len(), 4);
    assert_eq!(
        explained["kernel_provenance"][0]["set_by"]["kind"],
        json!("user")
    );
}

#[test]
fn comments_stay_single_line_even_with_newlines_in_sources() {
    let fx = Fixture::new();
    fx.write(
        "root/profiles/p.toml",
        "[[insert]]\nid = \"a\"\nplugin = \"p\"\n",
    );
    let mut sources = fx.sources();
    sources.overrides = vec!["a.k=line1\nline2".into()];
    let resolved = resolve_profile("p", &sources).unwrap();
    let text = render_dump(&resolved, true);
    assert_eq!(shape(&reparse(&text)), shape(&resolved), "{text}");
    assert!(
        text.contains("# key k: set by cli (-c a.k=line1 line2)"),
        "{text}"
    );
}

// Issue 11 item 7: the digest a session records is blake3 over the sorted-key JSON of the dump's
// `kernel` and `rows` — a `-c` changes it, a launcher patch does not, key order does not.
#[test]
fn item7_config_digest_is_the_dump_digest_and_ignores_launcher_patches() {
    let fx = Fixture::new();
    let mut resolved = demo(&fx);
    let digest = config_digest(&resolved);
    let dump = render_dump_json(&resolved, false);
    let text = serde_json::to_string(&sorted(
        &json!({ "kernel": dump["kernel"], "rows": dump["rows"] }),
    ))
    .unwrap();
    assert!(
        text.starts_with(r#"{"kernel":{"activation_deadline_ms":"#),
        "{text}"
    );
    assert_eq!(digest, blake3::hash(text.as_bytes()).to_hex().to_string());
    resolved
        .apply_launcher_patch(LayerOps::default().disable("odd"))
        .unwrap();
    assert_eq!(config_digest(&resolved), digest);
    let mut sources = fx.sources();
    sources.overrides = vec!["agent-loop.max_steps=4".into()];
    let other = resolve_profile("demo", &sources).unwrap();
    assert_ne!(config_digest(&other), digest);
    // The same values in another key order digest the same.
    let a = json!({ "b": 1, "a": { "y": [ { "q": 1, "p": 2 } ], "x": 0 } });
    let b = json!({ "a": { "x": 0, "y": [ { "p": 2, "q": 1 } ] }, "b": 1 });
    assert_eq!(
        serde_json::to_string(&sorted(&a)).unwrap(),
        serde_json::to_string(&sorted(&b)).unwrap()
    );
}
