//! Runs the shared `keel.session-store` contract suite (SES-08) against [`JsonlStore`], with
//! the physical damage a crash or an outside edit does to a JSONL file.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    reason = "tests fail loudly by design"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_plugin_api::sdk::ContractHandle;
use keel_plugin_api::services::session::SessionStore;
use keel_plugin_session_jsonl::{JsonlOptions, JsonlStore};
use keel_session_contract::{Backend, ContractStore, Damage, Failure, call_served, contract_tests};
use keel_session_store_kit::Worker;
use serde_json::Value;

struct Jsonl;

/// A store instance served through the real `keel.session-store` contract and worker thread.
struct Store {
    store: Arc<JsonlStore>,
    handle: Option<ContractHandle>,
}

/// Dropping an instance is a process going away: wait until its worker thread has let go of
/// the store (and so of its locks).
impl Drop for Store {
    fn drop(&mut self) {
        self.handle.take();
        while Arc::strong_count(&self.store) > 1 {
            std::thread::yield_now();
        }
    }
}

impl Store {
    fn new(store: JsonlStore) -> Store {
        let store = Arc::new(store);
        let worker = Worker::start("contract-suite", Arc::clone(&store)).unwrap();
        let handle = ContractHandle::serve::<SessionStore, _>("session-jsonl", worker);
        Store {
            store,
            handle: Some(handle),
        }
    }
}

impl ContractStore for Store {
    fn call(&self, method: &str, args: Value) -> Result<Value, Failure> {
        call_served(self.handle.as_ref().unwrap(), method, args)
    }

    fn fail_next_write(&self) {
        self.store.fail_next_write();
    }
}

fn lines(root: &Path, id: &str) -> (PathBuf, Vec<String>) {
    let path = root.join(format!("{id}.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap();
    (path, text.lines().map(str::to_owned).collect())
}

fn write_lines(path: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(path, text).unwrap();
}

impl Backend for Jsonl {
    fn open(&self, root: &Path) -> Box<dyn ContractStore> {
        Box::new(Store::new(JsonlStore::new(root, JsonlOptions::default())))
    }

    fn data_files(&self, root: &Path) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(root) else {
            return Vec::new();
        };
        let mut files: Vec<PathBuf> = entries
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_none_or(|x| x != "lock"))
            .collect();
        files.sort();
        files
    }

    fn stored_sessions(&self, root: &Path) -> Vec<String> {
        let mut ids: Vec<String> = self
            .data_files(root)
            .iter()
            .filter_map(|p| {
                p.file_name()?
                    .to_str()?
                    .strip_suffix(".jsonl")
                    .map(str::to_owned)
            })
            .filter(|n| !n.starts_with('.'))
            .collect();
        ids.sort();
        ids
    }

    fn damage(&self, root: &Path, id: &str, damage: Damage) {
        let (path, mut lines) = lines(root, id);
        match damage {
            Damage::TornTail => {
                let mut text = std::fs::read(&path).unwrap();
                text.extend_from_slice(br#"{"seq":10,"time":17000"#);
                std::fs::write(&path, text).unwrap();
            }
            Damage::Garble { seq } => {
                lines[seq as usize + 1] = "#not json#".into();
                write_lines(&path, &lines);
            }
            Damage::DropRecord { seq } => {
                lines.remove(seq as usize + 1);
                write_lines(&path, &lines);
            }
            Damage::HeaderVersion(v) => {
                let mut header: Value = serde_json::from_str(&lines[0]).unwrap();
                header["version"] = v.into();
                lines[0] = header.to_string();
                write_lines(&path, &lines);
            }
        }
    }
}

contract_tests!(Jsonl);
