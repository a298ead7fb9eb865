//! Applying layers to the row tree, with provenance (CFG-02, CFG-03, CFG-08).
//!
//! Owns the semantics of the row operations: `insert` of a live id is an error naming both layers;
//! `replace` swaps the whole config (no deep merge); `disable` removes the row but remembers it for
//! `--explain`; an `insert` after a `disable` revives the id. A `replace`, `disable` or `-c` that
//! matches no live row is a warning naming its layer, not an error. Launcher-only patches
//! (CFG-07) are applied here too, after a snapshot of the dumpable tree is taken.

use serde_json::{Map, Value};

use super::error::ConfigError;
use super::layer::{KernelPatch, LayerOps, RowAction, RowOp};
use super::model::{
    DisabledRow, DumpView, KeyProvenance, LayerKind, LayerRef, ResolvedProfile, Row, RowProvenance,
};
use super::overrides::{Override, set_path};

impl ResolvedProfile {
    /// Applies an extra in-memory layer marked `launcher` (CFG-07). It changes `rows`, `kernel`,
    /// `disabled` and `warnings` like any layer, but dumps keep showing the tree as it was before
    /// the first launcher patch (CFG-08). On error nothing changes.
    pub fn apply_launcher_patch(&mut self, ops: LayerOps) -> Result<(), ConfigError> {
        self.apply_launcher_patch_from("launcher", ops)
    }

    /// Like [`ResolvedProfile::apply_launcher_patch`], with a label (e.g. `agent-presets`) used as
    /// the layer's source in provenance and warnings.
    pub fn apply_launcher_patch_from(
        &mut self,
        label: &str,
        ops: LayerOps,
    ) -> Result<(), ConfigError> {
        let layer = LayerRef::new(LayerKind::Launcher, label);
        ops.validate_ids(&layer)?;
        let mut next = self.clone();
        if next.dump_view.is_none() {
            next.dump_view = Some(Box::new(DumpView {
                rows: self.rows.clone(),
                kernel: self.kernel,
                kernel_provenance: self.kernel_provenance.clone(),
                disabled: self.disabled.clone(),
                layers: self.layers.clone(),
            }));
        }
        next.apply_layer(layer, &ops)?;
        *self = next;
        Ok(())
    }

    /// Applies one layer's kernel settings and row operations, in order.
    pub(crate) fn apply_layer(
        &mut self,
        layer: LayerRef,
        ops: &LayerOps,
    ) -> Result<(), ConfigError> {
        tracing::debug!(layer = %layer, ops = ops.ops.len(), "applying config layer");
        self.apply_kernel(&layer, ops.kernel);
        for op in &ops.ops {
            self.apply_op(&layer, op)?;
        }
        self.layers.push(layer);
        Ok(())
    }

    /// Applies one parsed `-c` override as its own `cli` layer.
    pub(crate) fn apply_override(&mut self, ov: &Override) -> Result<(), ConfigError> {
        let layer = LayerRef::new(LayerKind::Cli, ov.source());
        tracing::debug!(layer = %layer, "applying config override");
        match self.rows.iter_mut().find(|r| r.id == ov.row) {
            Some(row) => {
                set_path(&mut row.config, &ov.path, ov.value.clone()).map_err(|reason| {
                    ConfigError::BadOverride {
                        arg: ov.arg.clone(),
                        reason,
                    }
                })?;
                set_key(&mut row.provenance.keys, ov.top_key(), &layer);
                row.provenance.overridden_by.push(layer.clone());
            }
            None => self.warn(&layer, "override", &ov.row),
        }
        self.layers.push(layer);
        Ok(())
    }

    fn apply_kernel(&mut self, layer: &LayerRef, patch: KernelPatch) {
        if let Some(v) = patch.fault_threshold {
            self.kernel.fault_threshold = v;
            set_key(&mut self.kernel_provenance, "fault_threshold", layer);
        }
        if let Some(v) = patch.listener_deadline_ms {
            self.kernel.listener_deadline_ms = v;
            set_key(&mut self.kernel_provenance, "listener_deadline_ms", layer);
        }
        if let Some(v) = patch.activation_deadline_ms {
            self.kernel.activation_deadline_ms = v;
            set_key(&mut self.kernel_provenance, "activation_deadline_ms", layer);
        }
    }

    fn apply_op(&mut self, layer: &LayerRef, op: &RowOp) -> Result<(), ConfigError> {
        match &op.action {
            RowAction::Insert { id, plugin, config } => {
                if let Some(live) = self.rows.iter().find(|r| &r.id == id) {
                    return Err(ConfigError::DuplicateRow {
                        id: id.clone(),
                        layer: layer.at(op.line),
                        first: live.provenance.inserted_by.to_string(),
                    });
                }
                let mut provenance = RowProvenance::inserted(layer, config.keys());
                if let Some(pos) = self.disabled.iter().position(|d| &d.id == id) {
                    provenance.previously_disabled_by = Some(self.disabled.remove(pos).disabled_by);
                }
                self.rows.push(Row {
                    id: id.clone(),
                    plugin: plugin.clone(),
                    config: Value::Object(config.clone()),
                    provenance,
                });
            }
            RowAction::Replace { id, config } => match self.rows.iter_mut().find(|r| &r.id == id) {
                Some(row) => replace_config(row, layer, config),
                None => self.warn(layer, "replace", id),
            },
            RowAction::Disable { id } => match self.rows.iter().position(|r| &r.id == id) {
                Some(pos) => {
                    let row = self.rows.remove(pos);
                    self.disabled.push(DisabledRow {
                        id: row.id,
                        plugin: row.plugin,
                        inserted_by: row.provenance.inserted_by,
                        disabled_by: layer.clone(),
                    });
                }
                None => self.warn(layer, "disable", id),
            },
        }
        Ok(())
    }

    /// Records `warning: <kind> layer <source>: <op> of row '<id>' matches no row` (CFG-03).
    fn warn(&mut self, layer: &LayerRef, op: &str, id: &str) {
        let message = format!(
            "warning: {} layer {}: {op} of row '{id}' matches no row",
            layer.kind, layer.source
        );
        tracing::debug!("{message}");
        self.warnings.push(message);
    }
}

/// Whole-row replacement: the new config replaces the old one; keys absent from it vanish.
fn replace_config(row: &mut Row, layer: &LayerRef, config: &Map<String, Value>) {
    let old = std::mem::take(&mut row.provenance.keys);
    row.provenance.keys = config
        .keys()
        .map(|key| {
            let overrode = old
                .iter()
                .find(|k| &k.key == key)
                .map(|k| {
                    let mut chain = k.overrode.clone();
                    chain.push(k.set_by.clone());
                    chain
                })
                .unwrap_or_default();
            KeyProvenance {
                key: key.clone(),
                set_by: layer.clone(),
                overrode,
            }
        })
        .collect();
    row.config = Value::Object(config.clone());
    row.provenance.replaced_by.push(layer.clone());
}

/// Records that `layer` set `key`, pushing any previous setter onto its override chain.
fn set_key(keys: &mut Vec<KeyProvenance>, key: &str, layer: &LayerRef) {
    match keys.iter_mut().find(|k| k.key == key) {
        Some(entry) => {
            let previous = std::mem::replace(&mut entry.set_by, layer.clone());
            entry.overrode.push(previous);
        }
        None => keys.push(KeyProvenance {
            key: key.to_owned(),
            set_by: layer.clone(),
            overrode: Vec::new(),
        }),
    }
}

#[cfg(test)]
#[path = "assemble_tests.rs"]
mod tests;
