//! `transcript_path` (issue 23 item 10): a JSONL transcript in Claude Code's line shape,
//! written for the hooks, because keel's own session file is not Claude Code's and lives under
//! `$KEEL_HOME`, which no confined hook can read.
//!
//! One file per session, `<tmp>/keel-hooks-XXXX/<session>.jsonl`, in a directory only this
//! user can enter (0700, files 0600) that goes when the row is dropped. It is written only when
//! a hook is about to run: the session's projected history (`keel.session` `messages`, the
//! same scrubbed history the model reads) is rendered one line per message —
//! `{"type":"user"|"assistant"|"system", "message":{"role","content"}, "uuid", "parentUuid",
//! "sessionId", "cwd", "isSidechain":false}` — tool calls as `tool_use` blocks under their
//! Claude Code names and inputs ([`crate::alias`]), results as `tool_result` blocks. Messages
//! already written are not written again: while the history only grows the file is appended
//! to, and it is rewritten when the history changed behind it (a compaction).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use keel_plugin_api::events::fs::content_version;
use keel_plugin_api::sdk::Frozen;
use serde_json::{Value, json};

use crate::alias;

/// The transcripts of one row.
#[derive(Default)]
pub struct Transcripts {
    /// The private directory, made at the first write.
    dir: Mutex<Option<tempfile::TempDir>>,
    /// Per session, the messages already in its file.
    written: Mutex<HashMap<String, Vec<Frozen>>>,
}

impl std::fmt::Debug for Transcripts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transcripts").finish_non_exhaustive()
    }
}

fn same(a: &Frozen, b: &Frozen) -> bool {
    std::ptr::eq(a.as_str(), b.as_str()) || a.as_str() == b.as_str()
}

/// A stable UUID-shaped id for message `index` of `session`.
fn uuid(session: &str, index: usize) -> String {
    let h = content_version(format!("{session}/{index}").as_bytes());
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn text_of(content: &Value) -> Value {
    match content {
        Value::Null => Value::String(String::new()),
        Value::String(_) | Value::Array(_) => content.clone(),
        other => Value::String(other.to_string()),
    }
}

/// One message of the projection as a Claude Code transcript line's `type` and `message`.
fn line_of(message: &Value, cwd: &str) -> (&'static str, Value) {
    let content = message.get("content").unwrap_or(&Value::Null);
    match message.get("role").and_then(Value::as_str) {
        Some("assistant") => {
            let mut blocks = Vec::new();
            match content {
                Value::String(t) if !t.is_empty() => {
                    blocks.push(json!({"type": "text", "text": t}));
                }
                Value::Array(parts) => blocks.extend(parts.iter().cloned()),
                _ => {}
            }
            for call in message
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let name = call.get("name").and_then(Value::as_str).unwrap_or_default();
                let args = match call.get("arguments") {
                    Some(Value::String(raw)) => serde_json::from_str(raw).unwrap_or(Value::Null),
                    Some(other) => other.clone(),
                    None => Value::Null,
                };
                blocks.push(json!({
                    "type": "tool_use",
                    "id": call.get("id").cloned().unwrap_or(Value::Null),
                    "name": alias::hook_name(name),
                    "input": alias::hook_input(name, &args, cwd),
                }));
            }
            (
                "assistant",
                json!({"role": "assistant", "type": "message", "content": blocks}),
            )
        }
        Some("tool") => (
            "user",
            json!({"role": "user", "content": [{
                "type": "tool_result",
                "tool_use_id": message.get("tool_call_id").cloned().unwrap_or(Value::Null),
                "content": text_of(content),
                "is_error": message.get("is_error").and_then(Value::as_bool).unwrap_or(false),
            }]}),
        ),
        Some("system") => (
            "system",
            json!({"role": "system", "content": text_of(content)}),
        ),
        _ => ("user", json!({"role": "user", "content": text_of(content)})),
    }
}

fn file_name(session_id: &str) -> String {
    let safe: String = session_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.jsonl")
}

impl Transcripts {
    /// The path of `session_id`'s transcript, brought up to date with `messages`.
    ///
    /// # Errors
    /// The directory or the file could not be written (the hook then gets no path).
    pub fn sync(
        &self,
        session_id: &str,
        cwd: &str,
        messages: &[Frozen],
    ) -> Result<PathBuf, String> {
        let path = {
            let mut dir = self.dir.lock().unwrap_or_else(PoisonError::into_inner);
            if dir.is_none() {
                use std::os::unix::fs::PermissionsExt;
                let made = tempfile::Builder::new()
                    .prefix("keel-hooks-")
                    .permissions(std::fs::Permissions::from_mode(0o700))
                    .tempdir()
                    .map_err(|e| format!("the transcript directory cannot be made: {e}"))?;
                *dir = Some(made);
            }
            match dir.as_ref() {
                Some(d) => d.path().join(file_name(session_id)),
                None => return Err("no transcript directory".into()),
            }
        };
        let mut written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        let done = written.entry(session_id.to_owned()).or_default();
        let keeps_prefix = done.len() <= messages.len()
            && done.iter().zip(messages).all(|(a, b)| same(a, b))
            && path.exists();
        let from = if keeps_prefix { done.len() } else { 0 };
        let mut file = open(&path, keeps_prefix).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut text = String::new();
        for (i, m) in messages.iter().enumerate().skip(from) {
            let parsed: Value = serde_json::from_str(m.as_str()).unwrap_or(Value::Null);
            let (kind, message) = line_of(&parsed, cwd);
            let line = json!({
                "type": kind,
                "message": message,
                "uuid": uuid(session_id, i),
                "parentUuid": if i == 0 { Value::Null } else { uuid(session_id, i - 1).into() },
                "sessionId": session_id,
                "cwd": cwd,
                "isSidechain": false,
                "userType": "external",
            });
            text.push_str(&line.to_string());
            text.push('\n');
        }
        file.write_all(text.as_bytes())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        *done = messages.to_vec();
        Ok(path)
    }

    /// Removes the directory and every transcript in it (the row is being disposed).
    pub fn remove_all(&self) {
        self.written
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        let dir = self
            .dir
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(dir) = dir
            && let Err(e) = dir.close()
        {
            tracing::warn!("the hook transcripts could not be removed: {e}");
        }
    }

    /// Forgets a disposed session (its file goes with the directory).
    pub fn forget(&self, session_id: &str) {
        self.written
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(session_id);
    }
}

fn open(path: &std::path::Path, append: bool) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.create(true).mode(0o600);
    if append {
        o.append(true);
    } else {
        o.write(true).truncate(true);
    }
    o.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn frozen(v: Value) -> Frozen {
        Frozen::freeze(&v).unwrap()
    }

    fn lines(path: &std::path::Path) -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn the_transcript_has_claude_codes_lines_and_only_grows_while_the_history_does() {
        let t = Transcripts::default();
        let user = frozen(json!({"role": "user", "content": "fix it"}));
        let call = frozen(json!({"role": "assistant", "content": "on it",
            "tool_calls": [{"id": "c1", "name": "shell", "arguments": "{\"command\":\"ls\"}"}]}));
        let path = t.sync("s/1", "/w", &[user.clone(), call.clone()]).unwrap();
        assert!(path.ends_with("s_1.jsonl"));
        let got = lines(&path);
        assert_eq!(got[0]["type"], "user");
        assert_eq!(got[0]["message"]["content"], "fix it");
        assert_eq!(got[0]["parentUuid"], Value::Null);
        assert_eq!(got[1]["parentUuid"], got[0]["uuid"]);
        let blocks = &got[1]["message"]["content"];
        assert_eq!(blocks[0], json!({"type": "text", "text": "on it"}));
        assert_eq!(blocks[1]["name"], "Bash");
        assert_eq!(blocks[1]["input"]["command"], "ls");

        let result = frozen(json!({"role": "tool", "tool_call_id": "c1", "content": "a\nb"}));
        t.sync("s/1", "/w", &[user, call, result]).unwrap();
        let got = lines(&path);
        assert_eq!(got.len(), 3);
        assert_eq!(got[2]["message"]["content"][0]["type"], "tool_result");
        // A compaction replaced the history: the file is rewritten, not appended to.
        let summary = frozen(json!({"role": "user", "content": "summary"}));
        t.sync("s/1", "/w", &[summary]).unwrap();
        let got = lines(&path);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0]["message"]["content"], "summary");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
        let dir = path.parent().unwrap().to_path_buf();
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        t.remove_all();
        assert!(!dir.exists(), "the transcripts outlived the row");
    }
}
