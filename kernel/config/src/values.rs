//! Conversions between TOML values (what layer files hold) and JSON values (what the rest of the
//! kernel and the plugins see).
//!
//! TOML → JSON is lossless except for datetimes, which become their TOML text (RFC 3339), and
//! non-finite floats (`nan`, `inf`), which JSON cannot hold and become strings. JSON → TOML is only
//! used to render dumps; JSON `null` has no TOML form and is dropped (it can only come from an
//! in-memory launcher patch, which dumps never show anyway).

use serde_json::{Map, Number, Value};

/// Converts one TOML value to JSON.
pub(crate) fn toml_to_json(value: toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::Number(Number::from(i)),
        toml::Value::Float(f) => match Number::from_f64(f) {
            Some(n) => Value::Number(n),
            None => Value::String(f.to_string()),
        },
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(dt) => Value::String(dt.to_string()),
        toml::Value::Array(items) => Value::Array(items.into_iter().map(toml_to_json).collect()),
        toml::Value::Table(table) => Value::Object(table_to_json(table)),
    }
}

/// Converts a TOML table to a JSON object, keeping key order.
pub(crate) fn table_to_json(table: toml::Table) -> Map<String, Value> {
    table
        .into_iter()
        .map(|(k, v)| (k, toml_to_json(v)))
        .collect()
}

/// The token a layer file writes for its own directory: `"${this_dir}/prompts/x.md"` names a
/// file shipped beside the profile or bundle, wherever the config root is installed.
pub(crate) const THIS_DIR: &str = "${this_dir}";

/// Replaces [`THIS_DIR`] in every string of a row config with `dir` (the directory of the
/// layer file the config is written in).
pub(crate) fn expand_this_dir(config: &mut Map<String, Value>, dir: &str) {
    fn walk(value: &mut Value, dir: &str) {
        match value {
            Value::String(s) if s.contains(THIS_DIR) => *s = s.replace(THIS_DIR, dir),
            Value::Array(items) => items.iter_mut().for_each(|v| walk(v, dir)),
            Value::Object(map) => map.values_mut().for_each(|v| walk(v, dir)),
            _ => {}
        }
    }
    config.values_mut().for_each(|v| walk(v, dir));
}

/// Converts one JSON value to TOML; `None` for `null`.
pub(crate) fn json_to_toml(value: &Value) -> Option<toml::Value> {
    Some(match value {
        Value::Null => return None,
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            // u64 above i64::MAX or a float: TOML keeps it as a float.
            None => toml::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => toml::Value::String(s.clone()),
        Value::Array(items) => toml::Value::Array(items.iter().filter_map(json_to_toml).collect()),
        Value::Object(map) => toml::Value::Table(json_object_to_toml(map)),
    })
}

/// Converts a JSON object to a TOML table, dropping `null` members.
pub(crate) fn json_object_to_toml(map: &Map<String, Value>) -> toml::Table {
    map.iter()
        .filter_map(|(k, v)| json_to_toml(v).map(|v| (k.clone(), v)))
        .collect()
}
