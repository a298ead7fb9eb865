//! Shared helpers for the config unit tests: a temporary config tree and JSON shorthands.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use tempfile::TempDir;

use super::model::ConfigSources;

/// A temporary directory holding config roots, a `KEEL_HOME` and a project.
pub(crate) struct Fixture {
    pub(crate) dir: TempDir,
}

impl Fixture {
    pub(crate) fn new() -> Self {
        Fixture {
            dir: TempDir::new().expect("tempdir"),
        }
    }

    /// `<tmp>/root`, the first config root.
    pub(crate) fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    /// Writes `text` at `rel` under the temp dir (creating parents) and returns the path.
    pub(crate) fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, text).expect("write");
        path
    }

    /// Sources with `root` as the only root, `home` as `KEEL_HOME`, `project` as project dir.
    pub(crate) fn sources(&self) -> ConfigSources {
        ConfigSources {
            roots: vec![self.root()],
            keel_home: Some(self.dir.path().join("home")),
            project_dir: Some(self.dir.path().join("project")),
            patches: Vec::new(),
            overrides: Vec::new(),
            trust_project: false,
        }
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
}

/// The object inside a `json!({...})`.
pub(crate) fn obj(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// Display form of a path, as used in layer sources and messages.
pub(crate) fn shown(path: &Path) -> String {
    path.display().to_string()
}
