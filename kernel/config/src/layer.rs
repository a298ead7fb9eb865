//! Parsing of one layer file (profile, bundle, user, project or `--patch`) into [`LayerOps`].
//!
//! A layer is TOML holding optional `description`/`bundles` (profile only), an optional `[kernel]`
//! table and `[[insert]]`/`[[replace]]`/`[[disable]]` row operations. Operations keep their file
//! order (so "disable x, then insert x" in one file works). Every error names the file with the
//! line and column of the offending item: shape errors come from serde with `deny_unknown_fields`
//! and carry toml's span; id checks use `toml::Spanned`.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};
use toml::Spanned;

use super::error::{ConfigError, one_line};
use super::model::{LayerKind, LayerRef};
use super::values::{expand_this_dir, table_to_json};

/// The row operations and kernel settings of one layer, ready to apply.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LayerOps {
    pub kernel: KernelPatch,
    /// Applied in order.
    pub ops: Vec<RowOp>,
}

/// `[kernel]` settings a layer sets; `None` leaves the current value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelPatch {
    pub fault_threshold: Option<u32>,
    pub listener_deadline_ms: Option<u64>,
    pub activation_deadline_ms: Option<u64>,
}

/// One row operation and the line it came from (for messages; `None` for in-memory layers).
#[derive(Debug, Clone, PartialEq)]
pub struct RowOp {
    pub action: RowAction,
    pub line: Option<usize>,
}

/// What a row operation does (CFG-03).
#[derive(Debug, Clone, PartialEq)]
pub enum RowAction {
    /// Adds a row; the id must not be live.
    Insert {
        id: String,
        plugin: String,
        config: Map<String, Value>,
    },
    /// Replaces the whole config of a live row (no deep merge).
    Replace {
        id: String,
        config: Map<String, Value>,
    },
    /// Removes a live row from the tree.
    Disable { id: String },
}

impl RowAction {
    /// The row id this operation targets.
    pub fn id(&self) -> &str {
        match self {
            RowAction::Insert { id, .. }
            | RowAction::Replace { id, .. }
            | RowAction::Disable { id } => id,
        }
    }
}

impl LayerOps {
    /// Appends an `insert` (builder style, for in-memory launcher layers).
    pub fn insert(mut self, id: &str, plugin: &str, config: Map<String, Value>) -> Self {
        self.ops.push(RowOp {
            action: RowAction::Insert {
                id: id.to_owned(),
                plugin: plugin.to_owned(),
                config,
            },
            line: None,
        });
        self
    }

    /// Appends a whole-config `replace`.
    pub fn replace(mut self, id: &str, config: Map<String, Value>) -> Self {
        self.ops.push(RowOp {
            action: RowAction::Replace {
                id: id.to_owned(),
                config,
            },
            line: None,
        });
        self
    }

    /// Appends a `disable`.
    pub fn disable(mut self, id: &str) -> Self {
        self.ops.push(RowOp {
            action: RowAction::Disable { id: id.to_owned() },
            line: None,
        });
        self
    }

    /// Parses a non-profile layer file's text (`bundles`/`description` are errors). `kind` only
    /// words the error messages.
    pub fn parse(text: &str, path: &Path, kind: &LayerKind) -> Result<LayerOps, ConfigError> {
        parse_layer(text, path, Some(kind)).map(|parsed| parsed.ops)
    }

    /// Checks ids and plugin names of in-memory operations (file layers are checked on parse).
    pub(crate) fn validate_ids(&self, layer: &LayerRef) -> Result<(), ConfigError> {
        for op in &self.ops {
            let location = || layer.at(op.line);
            check_id(op.action.id(), "row id", location)?;
            if let RowAction::Insert { plugin, .. } = &op.action {
                check_id(plugin, "plugin name", location)?;
            }
        }
        Ok(())
    }
}

/// A bundle reference in a profile's `bundles` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BundleRef {
    pub(crate) name: String,
    pub(crate) line: usize,
}

/// A parsed layer file: the profile-only keys plus the operations.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ParsedLayer {
    pub(crate) description: Option<String>,
    pub(crate) bundles: Vec<BundleRef>,
    pub(crate) ops: LayerOps,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLayer {
    description: Option<Spanned<String>>,
    bundles: Option<Spanned<Vec<Spanned<String>>>>,
    kernel: Option<RawKernel>,
    #[serde(default)]
    insert: Vec<Spanned<RawInsert>>,
    #[serde(default)]
    replace: Vec<Spanned<RawReplace>>,
    #[serde(default)]
    disable: Vec<Spanned<RawDisable>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKernel {
    fault_threshold: Option<u32>,
    listener_deadline_ms: Option<u64>,
    activation_deadline_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInsert {
    id: Spanned<String>,
    plugin: Spanned<String>,
    #[serde(default)]
    config: toml::Table,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReplace {
    id: Spanned<String>,
    #[serde(default)]
    config: toml::Table,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDisable {
    id: Spanned<String>,
}

/// Parses one layer file. `non_profile` is `None` for a profile (which may carry `bundles` and
/// `description`) and the layer kind otherwise.
pub(crate) fn parse_layer(
    text: &str,
    path: &Path,
    non_profile: Option<&LayerKind>,
) -> Result<ParsedLayer, ConfigError> {
    let raw: RawLayer = toml::from_str(text).map_err(|err| {
        let (line, col) = line_col(text, err.span().map_or(0, |s| s.start));
        ConfigError::Parse {
            path: path.to_path_buf(),
            line,
            col,
            message: one_line(err.message()),
        }
    })?;
    let at = |offset: usize| {
        let (line, col) = line_col(text, offset);
        format!("{}:{line}:{col}", path.display())
    };

    if let Some(kind) = non_profile {
        let profile_only = [
            (
                "description",
                raw.description.as_ref().map(|d| d.span().start),
            ),
            ("bundles", raw.bundles.as_ref().map(|b| b.span().start)),
        ];
        for (key, offset) in profile_only {
            if let Some(offset) = offset {
                let (line, col) = line_col(text, offset);
                return Err(ConfigError::ProfileOnlyKey {
                    path: path.to_path_buf(),
                    line,
                    col,
                    key: key.to_owned(),
                    layer: kind.to_string(),
                });
            }
        }
    }

    let mut bundles = Vec::new();
    for name in raw.bundles.map(Spanned::into_inner).unwrap_or_default() {
        let offset = name.span().start;
        check_id(name.get_ref(), "bundle name", || at(offset))?;
        bundles.push(BundleRef {
            name: name.into_inner(),
            line: line_col(text, offset).0,
        });
    }

    let this_dir = path
        .parent()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let table_to_json = |table| {
        let mut config = table_to_json(table);
        expand_this_dir(&mut config, &this_dir);
        config
    };
    // Gather the three op arrays, then restore file order by span.
    let mut ops: Vec<(usize, RowOp)> = Vec::new();
    for op in raw.insert {
        let start = op.span().start;
        let RawInsert { id, plugin, config } = op.into_inner();
        let id = checked(id, "row id", &at)?;
        let plugin = checked(plugin, "plugin name", &at)?;
        let config = table_to_json(config);
        ops.push((
            start,
            row_op(text, start, RowAction::Insert { id, plugin, config }),
        ));
    }
    for op in raw.replace {
        let start = op.span().start;
        let RawReplace { id, config } = op.into_inner();
        let id = checked(id, "row id", &at)?;
        let config = table_to_json(config);
        ops.push((
            start,
            row_op(text, start, RowAction::Replace { id, config }),
        ));
    }
    for op in raw.disable {
        let start = op.span().start;
        let id = checked(op.into_inner().id, "row id", &at)?;
        ops.push((start, row_op(text, start, RowAction::Disable { id })));
    }
    ops.sort_by_key(|(start, _)| *start);

    let kernel = raw
        .kernel
        .map_or_else(KernelPatch::default, |k| KernelPatch {
            fault_threshold: k.fault_threshold,
            listener_deadline_ms: k.listener_deadline_ms,
            activation_deadline_ms: k.activation_deadline_ms,
        });
    Ok(ParsedLayer {
        description: raw.description.map(Spanned::into_inner),
        bundles,
        ops: LayerOps {
            kernel,
            ops: ops.into_iter().map(|(_, op)| op).collect(),
        },
    })
}

fn row_op(text: &str, offset: usize, action: RowAction) -> RowOp {
    RowOp {
        action,
        line: Some(line_col(text, offset).0),
    }
}

/// Validates a spanned id/name and unwraps it.
fn checked(
    value: Spanned<String>,
    what: &'static str,
    at: &impl Fn(usize) -> String,
) -> Result<String, ConfigError> {
    let offset = value.span().start;
    check_id(value.get_ref(), what, || at(offset))?;
    Ok(value.into_inner())
}

/// Ok when `value` matches `[a-z0-9][a-z0-9-]*`.
pub(crate) fn check_id(
    value: &str,
    what: &'static str,
    location: impl FnOnce() -> String,
) -> Result<(), ConfigError> {
    if is_valid_id(value) {
        Ok(())
    } else {
        Err(ConfigError::InvalidId {
            location: location(),
            what,
            value: value.to_owned(),
        })
    }
}

/// True when `value` matches `[a-z0-9][a-z0-9-]*` (row ids, plugin names, bundle names).
pub fn is_valid_id(value: &str) -> bool {
    let mut chars = value.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

#[cfg(test)]
#[path = "layer_tests.rs"]
mod tests;
