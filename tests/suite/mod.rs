//! Suites, one per behaviour.

/// Bad input to the binary: one line, exit 2, naming the culprit.
mod cli_errors;
/// Profiles, layers, provenance, `config dump`, `plugins list`, `doctor`.
mod cli_reports;
/// `keel.lock` beside the binary (KRN-04, KRN-05).
mod lock;
/// A plugin built out of tree, and an ABI-major mismatch fixture.
mod out_of_tree;
/// Workspace structure rules (the kernel depends on no plugin).
mod structure;
