//! Profiles, bundles and layered configuration (requirements C4, CFG-01..CFG-11; architecture §6).
//!
//! A running instance is a plugin tree assembled at boot from ordered TOML layers applied over an
//! empty row list (CFG-02): the bundles a profile names → the profile's own operations → the user
//! layer → the project layer → `--patch` files → `-c ROW.KEY=VALUE` overrides → launcher-only
//! patches. Row operations are `insert`, whole-config `replace` (no deep merge) and `disable`
//! (CFG-03); every row and key keeps the provenance a `--explain` dump prints (CFG-08).
//!
//! Layout: `layer` parses one file, `overrides` parses `-c`, `assemble` applies layers, `resolve`
//! finds files and sequences layers, `dump` renders, `model` holds the data types, `error` the
//! errors. This module owns no I/O beyond reading the layer files it is pointed at.

mod assemble;
mod dump;
mod error;
mod layer;
mod model;
mod overrides;
mod resolve;
pub mod taint;
pub mod trust;
mod values;

pub use dump::{LAUNCHER_NOTE, config_digest, render_dump, render_dump_json};
pub use error::ConfigError;
pub use layer::{KernelPatch, LayerOps, RowAction, RowOp, is_valid_id};
pub use model::{
    ConfigSources, DEFAULT_FAULT_THRESHOLD, DEFAULT_LISTENER_DEADLINE_MS, DisabledRow,
    KernelSettings, KeyProvenance, LayerKind, LayerRef, ProjectLayer, ResolvedProfile, Row,
    RowProvenance, RowState,
};
pub use overrides::Override;
pub use resolve::{names_a_file, resolve_profile};

#[cfg(test)]
mod test_support;
