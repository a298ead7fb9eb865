//! Rendering of `keel config dump [--explain]` as TOML and as JSON (CFG-08).
//!
//! The TOML dump is itself a valid layer: saved as a profile with no bundles it reproduces the same
//! kernel settings and rows. `--explain` adds `#` comments naming, per row and per top-level key,
//! the layer and file that set it and the layers it overrode, plus the disabled rows. Launcher-only
//! patches (CFG-07) are never shown: the dump renders the snapshot taken before the first one, and
//! says so in a trailing note.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::model::{KeyProvenance, LayerRef, ResolvedProfile, Row, View};
use super::values::json_object_to_toml;

/// The note every dump ends with (CFG-08: a dump is not a full snapshot of the live runtime).
pub const LAUNCHER_NOTE: &str = "launcher-only patches are not shown (CFG-08)";

/// Renders the final tree as TOML; with `explain`, annotated with provenance comments.
pub fn render_dump(profile: &ResolvedProfile, explain: bool) -> String {
    let view = profile.dump_view();
    let mut out = String::new();
    comment(
        &mut out,
        &format!("profile {} ({})", profile.name, profile.path.display()),
    );
    if let Some(description) = &profile.description {
        comment(&mut out, &format!("description: {description}"));
    }
    if explain {
        for (i, layer) in view.layers.iter().enumerate() {
            comment(&mut out, &format!("layer {}: {layer}", i + 1));
        }
        if let Some(project) = &profile.project {
            comment(
                &mut out,
                &format!(
                    "project layer {}: {}",
                    project.path.display(),
                    project.trust.describe()
                ),
            );
        }
    }
    out.push('\n');

    if explain {
        for key in [
            "fault_threshold",
            "listener_deadline_ms",
            "activation_deadline_ms",
        ] {
            let text = match view.kernel_provenance.iter().find(|k| k.key == key) {
                Some(prov) => key_line(prov),
                None => "default".to_owned(),
            };
            comment(&mut out, &format!("kernel {key}: {text}"));
        }
    }
    let mut kernel = toml::Table::new();
    kernel.insert(
        "fault_threshold".to_owned(),
        toml::Value::Integer(i64::from(view.kernel.fault_threshold)),
    );
    kernel.insert(
        "listener_deadline_ms".to_owned(),
        toml::Value::Integer(i64::try_from(view.kernel.listener_deadline_ms).unwrap_or(i64::MAX)),
    );
    kernel.insert(
        "activation_deadline_ms".to_owned(),
        toml::Value::Integer(i64::try_from(view.kernel.activation_deadline_ms).unwrap_or(i64::MAX)),
    );
    push_toml(&mut out, "kernel", toml::Value::Table(kernel), "[kernel]");

    for row in view.rows {
        out.push('\n');
        if explain {
            comment(&mut out, &row_line(row));
            for key in &row.provenance.keys {
                comment(&mut out, &format!("key {}: {}", key.key, key_line(key)));
            }
        }
        let mut table = toml::Table::new();
        table.insert("id".to_owned(), toml::Value::String(row.id.clone()));
        table.insert("plugin".to_owned(), toml::Value::String(row.plugin.clone()));
        if let Value::Object(config) = &row.config
            && !config.is_empty()
        {
            table.insert(
                "config".to_owned(),
                toml::Value::Table(json_object_to_toml(config)),
            );
        }
        let rows = toml::Value::Array(vec![toml::Value::Table(table)]);
        push_toml(&mut out, "insert", rows, &format!("row '{}'", row.id));
    }

    out.push('\n');
    if explain {
        if view.disabled.is_empty() {
            comment(&mut out, "disabled rows: none");
        } else {
            comment(&mut out, "disabled rows:");
            for d in view.disabled {
                comment(
                    &mut out,
                    &format!(
                        "  row '{}' (plugin {}): inserted by {}; disabled by {}",
                        d.id, d.plugin, d.inserted_by, d.disabled_by
                    ),
                );
            }
        }
    }
    comment(&mut out, &format!("note: {LAUNCHER_NOTE}"));
    out
}

/// Renders the final tree as JSON; with `explain`, with provenance, disabled rows and layers.
pub fn render_dump_json(profile: &ResolvedProfile, explain: bool) -> Value {
    let view = profile.dump_view();
    let rows: Vec<Value> = view
        .rows
        .iter()
        .map(|row| {
            let mut obj = json!({ "id": row.id, "plugin": row.plugin, "config": row.config });
            if explain {
                obj["provenance"] = row_provenance_json(row);
            }
            obj
        })
        .collect();
    let mut out = json!({
        "profile": profile.name,
        "path": profile.path.display().to_string(),
        "description": profile.description,
        "bundles": profile.bundles,
        "kernel": {
            "fault_threshold": view.kernel.fault_threshold,
            "listener_deadline_ms": view.kernel.listener_deadline_ms,
            "activation_deadline_ms": view.kernel.activation_deadline_ms,
        },
        "rows": rows,
    });
    if explain {
        out["kernel_provenance"] = keys_json(view.kernel_provenance);
        out["disabled"] = disabled_json(&view);
        out["layers"] = view.layers.iter().map(layer_json).collect();
        if let Some(project) = &profile.project {
            out["project_trust"] = json!({
                "path": project.path.display().to_string(),
                "digest": project.digest,
                "trusted": project.trust.allows(),
                "state": project.trust.describe(),
            });
        }
    }
    out["note"] = Value::String(LAUNCHER_NOTE.to_owned());
    out
}

/// The digest of the assembled config a session records (issue 11 item 7): blake3 (lowercase
/// hex) over the canonical JSON — keys sorted, no whitespace — of `{"kernel": …, "rows": […]}`
/// exactly as [`render_dump_json`] shows them, so launcher-only patches are excluded (CFG-08)
/// and `keel config dump --json` is enough to recompute it.
pub fn config_digest(profile: &ResolvedProfile) -> String {
    let dump = render_dump_json(profile, false);
    let body = json!({ "kernel": dump["kernel"], "rows": dump["rows"] });
    let text = serde_json::to_string(&sorted(&body)).unwrap_or_default();
    blake3::hash(text.as_bytes()).to_hex().to_string()
}

/// `v` with every object's keys in sorted order (objects keep insertion order otherwise).
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// `row 'x': inserted by A; replaced by B, C; keys overridden by D; previously disabled by E`.
fn row_line(row: &Row) -> String {
    let p = &row.provenance;
    let mut line = format!("row '{}': inserted by {}", row.id, p.inserted_by);
    if let Some(by) = &p.previously_disabled_by {
        let _ = write!(line, " (after being disabled by {by})");
    }
    if !p.replaced_by.is_empty() {
        let _ = write!(line, "; replaced by {}", list(&p.replaced_by));
    }
    if !p.overridden_by.is_empty() {
        let _ = write!(line, "; keys overridden by {}", list(&p.overridden_by));
    }
    line
}

/// `set by A, overrode B, C` (overridden layers oldest first).
fn key_line(key: &KeyProvenance) -> String {
    let mut line = format!("set by {}", key.set_by);
    if !key.overrode.is_empty() {
        let _ = write!(line, ", overrode {}", list(&key.overrode));
    }
    line
}

fn list(layers: &[LayerRef]) -> String {
    layers
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Appends `# text`, keeping it one line whatever the text holds.
fn comment(out: &mut String, text: &str) {
    let flat: String = text
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    out.push_str("# ");
    out.push_str(flat.trim_end());
    out.push('\n');
}

/// Serializes `{ key = value }` as a TOML document and appends it.
fn push_toml(out: &mut String, key: &str, value: toml::Value, what: &str) {
    let mut doc = toml::Table::new();
    doc.insert(key.to_owned(), value);
    match toml::to_string(&doc) {
        Ok(text) => out.push_str(&text),
        Err(err) => comment(out, &format!("cannot render {what}: {err}")),
    }
}

fn layer_json(layer: &LayerRef) -> Value {
    json!({ "kind": layer.kind.to_string(), "source": layer.source })
}

fn keys_json(keys: &[KeyProvenance]) -> Value {
    keys.iter()
        .map(|k| {
            json!({
                "key": k.key,
                "set_by": layer_json(&k.set_by),
                "overrode": k.overrode.iter().map(layer_json).collect::<Vec<_>>(),
            })
        })
        .collect()
}

fn row_provenance_json(row: &Row) -> Value {
    let p = &row.provenance;
    json!({
        "inserted_by": layer_json(&p.inserted_by),
        "replaced_by": p.replaced_by.iter().map(layer_json).collect::<Vec<_>>(),
        "overridden_by": p.overridden_by.iter().map(layer_json).collect::<Vec<_>>(),
        "previously_disabled_by": p.previously_disabled_by.as_ref().map(layer_json),
        "keys": keys_json(&p.keys),
    })
}

fn disabled_json(view: &View<'_>) -> Value {
    view.disabled
        .iter()
        .map(|d| {
            json!({
                "id": d.id,
                "plugin": d.plugin,
                "inserted_by": layer_json(&d.inserted_by),
                "disabled_by": layer_json(&d.disabled_by),
            })
        })
        .collect()
}

#[cfg(test)]
#[path = "dump_tests.rs"]
mod tests;
