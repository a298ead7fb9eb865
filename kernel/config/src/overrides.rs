//! Parsing of `-c ROW.KEY=VALUE` command-line overrides.
//!
//! The argument splits at the first `=` into `ROW.KEY` and `VALUE`, and `ROW.KEY` at its first `.`
//! (row ids contain no dots). `KEY` may be a dotted path into the row config. `VALUE` is read as a
//! TOML value (`5`, `true`, `"s"`, `[1, 2]`, `{ a = 1 }`); text that is not one TOML value is taken
//! verbatim as a string, so `-c llm.model=gpt-x` needs no quoting. Applying an override sets one key
//! (the single exception to whole-row replacement, CFG-03); that lives in `assemble.rs`.

use serde_json::Value;

use super::error::ConfigError;
use super::values::toml_to_json;

/// One parsed `-c` argument.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    /// The argument as given (without `-c`), for messages and provenance.
    pub arg: String,
    /// The target row id.
    pub row: String,
    /// The key path inside the row config; never empty, no empty segments.
    pub path: Vec<String>,
    pub value: Value,
}

impl Override {
    /// Parses `ROW.KEY=VALUE`.
    pub fn parse(arg: &str) -> Result<Override, ConfigError> {
        let bad = |reason: &str| ConfigError::BadOverride {
            arg: arg.to_owned(),
            reason: reason.to_owned(),
        };
        let (target, raw_value) = arg
            .split_once('=')
            .ok_or_else(|| bad("expected ROW.KEY=VALUE (missing '=')"))?;
        let (row, key) = target
            .split_once('.')
            .ok_or_else(|| bad("expected ROW.KEY=VALUE (missing '.' between row and key)"))?;
        let row = row.trim();
        if row.is_empty() {
            return Err(bad("empty row id"));
        }
        let path: Vec<String> = key.split('.').map(|s| s.trim().to_owned()).collect();
        if path.iter().any(String::is_empty) {
            return Err(bad("empty key (or empty segment in a dotted key)"));
        }
        Ok(Override {
            arg: arg.to_owned(),
            row: row.to_owned(),
            path,
            value: parse_value(raw_value),
        })
    }

    /// The `-c` text used as this layer's source: `-c ROW.KEY=VALUE`.
    pub fn source(&self) -> String {
        format!("-c {}", self.arg)
    }

    /// The top-level config key this override touches.
    pub fn top_key(&self) -> &str {
        self.path.first().map_or("", String::as_str)
    }
}

/// Reads `raw` as one TOML value, or else as a plain string.
pub(crate) fn parse_value(raw: &str) -> Value {
    const PROBE: &str = "v";
    if let Ok(mut table) = toml::from_str::<toml::Table>(&format!("{PROBE} = {raw}"))
        && table.len() == 1
        && let Some(value) = table.remove(PROBE)
    {
        return toml_to_json(value);
    }
    Value::String(raw.to_owned())
}

/// Sets `value` at `path` inside `config` (an object), creating intermediate tables. Fails when an
/// intermediate key holds a non-table value.
pub(crate) fn set_path(config: &mut Value, path: &[String], value: Value) -> Result<(), String> {
    let Some((last, parents)) = path.split_last() else {
        return Err("empty key".to_owned());
    };
    let mut current = config;
    let mut walked = Vec::new();
    for segment in parents {
        walked.push(segment.as_str());
        let Value::Object(map) = current else {
            return Err("row config is not a table".to_owned());
        };
        current = map
            .entry(segment.clone())
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if !current.is_object() {
            return Err(format!("key '{}' is not a table", walked.join(".")));
        }
    }
    match current {
        Value::Object(map) => {
            map.insert(last.clone(), value);
            Ok(())
        }
        _ => Err("row config is not a table".to_owned()),
    }
}

#[cfg(test)]
#[path = "overrides_tests.rs"]
mod tests;
