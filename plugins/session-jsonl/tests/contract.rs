//! Runs the shared `keel.session-store` contract suite (SES-08) against [`JsonlStore`], with
//! the physical damage a crash or an outside edit does to a JSONL file.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    reason = "tests fail loudly by design"
)]

use std::path::{Path, PathBuf};

use keel_plugin_session_jsonl::{JsonlOptions, JsonlStore};
use keel_session_contract::{Backend, ContractStore, Damage, Served, contract_tests};
use serde_json::Value;

struct Jsonl;

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
        Box::new(Served::new(
            "session-jsonl",
            JsonlStore::new(root, JsonlOptions::default()),
            JsonlStore::fail_next_write,
        ))
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
