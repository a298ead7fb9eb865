//! Firing an event's hooks: the matching commands run in parallel, each confined by
//! `keel.sandbox` when one is loaded (like the `shell` tool), in the session's working
//! directory, with the shared allow-listed environment (the base names and the row's
//! `pass_env`, never a held credential: issue 23 item 1) plus `CLAUDE_PROJECT_DIR` /
//! `KEEL_PROJECT_DIR`, and
//! each invocation is audited in the session: `hook/invoked` before it runs and `hook/result`
//! after (both `ignorable`; they go through `session/persist`, so the firewall scrubs a secret
//! a hook printed). A non-blocking error also gets one `keel: hooks: …` line on stderr.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use futures::future::join_all;
use keel_plugin_api::prelude::*;
use keel_plugin_api::sdk::line::one_line;
use keel_plugin_api::services::approval::{Approval, ApprovalMode, ModeRequest};
use keel_plugin_api::services::child_env::{ChildEnv, held_references};
use keel_plugin_api::services::credentials::Credentials;
use keel_plugin_api::services::sandbox::{ConfineRequest, Sandbox};
use keel_plugin_api::services::session::{AppendEvents, EventInput, SessionRef, SessionsClient};
use serde_json::{Map, Value, json};

use crate::config::{Event, Hook, HookSet, HooksConfig, OnTimeout};
use crate::protocol::{self, Answer, Common};
use crate::runner::{self, Outcome, Spec};
use crate::transcript::Transcripts;

/// Where an event fires: its session, working directory, turn (when known) and tool call.
#[derive(Debug, Clone, Copy)]
pub struct At<'a> {
    /// The session.
    pub session_id: &'a str,
    /// Its working directory.
    pub cwd: &'a str,
    /// The open turn (`prompt_id`); `None`: the last one seen for the session.
    pub turn: Option<u64>,
    /// The tool call (audit events name it).
    pub call_id: Option<&'a str>,
}

/// Characters of a hook's stderr kept in `hook/result`.
const STDERR_EXCERPT: usize = 2_000;

/// The row's hooks and what firing them needs.
pub struct Engine {
    /// The row's context.
    pub ctx: Context,
    /// `keel.session`, for the audit events.
    pub sessions: SessionsClient,
    /// Every hook.
    pub set: HookSet,
    /// The workspace root (`CLAUDE_PROJECT_DIR`).
    pub root: PathBuf,
    /// The row's knobs.
    pub config: HooksConfig,
    /// Each live session's working directory (from its header).
    cwds: Mutex<HashMap<String, String>>,
    /// Each live session's last turn seen (for `prompt_id` where the event has none).
    turns: Mutex<HashMap<String, u64>>,
    /// `transcript_path`'s files.
    pub transcripts: Transcripts,
}

impl Engine {
    /// An engine over `set`.
    pub fn new(
        ctx: Context,
        sessions: SessionsClient,
        set: HookSet,
        root: PathBuf,
        config: HooksConfig,
    ) -> Self {
        Engine {
            ctx,
            sessions,
            set,
            root,
            config,
            cwds: Mutex::default(),
            turns: Mutex::default(),
            transcripts: Transcripts::default(),
        }
    }

    /// Remembers (or, with `None`, forgets) a session's working directory.
    pub fn session_cwd(&self, session_id: &str, cwd: Option<String>) {
        let mut cwds = self.cwds.lock().unwrap_or_else(PoisonError::into_inner);
        match cwd {
            Some(c) => cwds.insert(session_id.to_owned(), c),
            None => {
                self.turns
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(session_id);
                self.transcripts.forget(session_id);
                cwds.remove(session_id)
            }
        };
    }

    /// The session's working directory (the workspace root when unknown).
    pub fn cwd_of(&self, session_id: &str) -> String {
        self.cwds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(session_id)
            .cloned()
            .unwrap_or_else(|| self.root.display().to_string())
    }

    /// One `keel: hooks: …` line on stderr (through the kernel's redactions).
    pub fn line(&self, text: &str) {
        let _ = self
            .ctx
            .write_stderr(&format!("keel: hooks: {}\n", one_line(text)));
    }

    /// Runs `event`'s hooks that match the subject known by `names` (a tool's keel and
    /// Claude Code names, a source, a trigger; none for events without a subject) with Claude
    /// Code's stdin document (`fields` added to the common ones) and merges their answers;
    /// nothing configured → the empty answer, at no cost.
    pub async fn fire(
        &self,
        event: Event,
        names: &[&str],
        at: At<'_>,
        fields: Map<String, Value>,
    ) -> Answer {
        let hooks = self.set.matching(event, names);
        if hooks.is_empty() {
            return Answer::default();
        }
        let common = self.common(at).await;
        let input = protocol::input(event, &common, fields);
        let stdin = input.to_string().into_bytes();
        let runs = hooks
            .iter()
            .map(|h| self.run_one(h, at.session_id, at.cwd, &stdin, at.call_id));
        let mut answer = Answer::merge(join_all(runs).await);
        answer.ran = hooks.len();
        answer
    }

    /// The common stdin fields: the transcript brought up to date, the approval mode in
    /// Claude Code's words, the prompt id.
    async fn common(&self, at: At<'_>) -> Common {
        let turn = {
            let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
            match at.turn {
                Some(t) => {
                    turns.insert(at.session_id.to_owned(), t);
                    Some(t)
                }
                None => turns.get(at.session_id).copied(),
            }
        };
        let transcript = match self.sessions.messages(SessionRef::new(at.session_id)).await {
            Ok(m) => self
                .transcripts
                .sync(at.session_id, at.cwd, &m.messages)
                .map(|p| p.display().to_string()),
            Err(e) => Err(e.to_string()),
        };
        let transcript_path = transcript
            .map_err(|e| tracing::warn!(session = %at.session_id, "no hook transcript: {e}"))
            .ok();
        Common {
            session_id: at.session_id.to_owned(),
            transcript_path,
            cwd: at.cwd.to_owned(),
            permission_mode: self.permission_mode(at.session_id).await,
            prompt_id: turn.map(|t| format!("{}-{t}", at.session_id)),
        }
    }

    /// `default` when keel's approval asks before mutating calls, else `bypassPermissions`.
    async fn permission_mode(&self, session_id: &str) -> &'static str {
        let Ok(Some(approval)) = self.ctx.get_client::<Approval>() else {
            return "bypassPermissions";
        };
        let request = ModeRequest {
            session_id: Some(session_id.to_owned()),
        };
        match approval.mode(request).await.map(|m| m.mode) {
            Ok(ApprovalMode::Never) => "bypassPermissions",
            Ok(ApprovalMode::Ask) | Err(_) => "default",
        }
    }

    async fn run_one(
        &self,
        hook: &Hook,
        session_id: &str,
        cwd: &str,
        stdin: &[u8],
        call_id: Option<&str>,
    ) -> Answer {
        let mut invoked = json!({
            "event": hook.event.name(),
            "matcher": hook.matcher,
            "command": hook.command,
        });
        if let Some(id) = call_id {
            invoked["call_id"] = id.into();
        }
        self.audit(session_id, "hook/invoked", invoked).await;
        let prepared = match self.argv(hook, cwd).await {
            Ok(argv) => self.env().await.map(|env| (argv, env)),
            Err(e) => Err(e),
        };
        let outcome = match prepared {
            Ok((argv, env)) => {
                runner::run_async(Spec {
                    argv,
                    cwd: PathBuf::from(cwd),
                    env,
                    stdin: stdin.to_vec(),
                    timeout: hook.timeout,
                    grace: Duration::from_millis(self.config.grace_ms),
                })
                .await
            }
            Err(e) => Outcome {
                spawn_error: Some(e),
                ..Outcome::default()
            },
        };
        let deny = self.config.on_timeout == OnTimeout::Deny;
        let answer = protocol::interpret(hook, &outcome, deny);
        let mut result = json!({
            "event": hook.event.name(),
            "command": hook.command,
            "exit_code": outcome.exit_code,
            "decision": answer.decision(),
            "duration_ms": u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
            "timed_out": outcome.timed_out,
            "stderr": excerpt(&outcome.stderr),
        });
        if let Some(id) = call_id {
            result["call_id"] = id.into();
        }
        if let Some(e) = &answer.error {
            result["error"] = e.as_str().into();
            self.line(e);
        }
        self.audit(session_id, "hook/result", result).await;
        answer
    }

    /// `[shell, -c, command]`, confined by `keel.sandbox` when one is loaded.
    async fn argv(&self, hook: &Hook, cwd: &str) -> Result<Vec<String>, String> {
        let argv = vec![shell().to_owned(), "-c".to_owned(), hook.command.clone()];
        let sandbox = self
            .ctx
            .get_client::<Sandbox>()
            .map_err(|e| format!("the sandbox cannot be reached: {e}"))?;
        let Some(sandbox) = sandbox else {
            return Ok(argv);
        };
        let request = ConfineRequest {
            argv,
            cwd: PathBuf::from(cwd),
            mode: None,
            call: None,
        };
        sandbox
            .confine(request)
            .await
            .map(|c| c.argv)
            .map_err(|e| format!("the sandbox refused to run it ({e})"))
    }

    /// The allow-listed environment ([`ChildEnv`]: the base names and the row's `pass_env`,
    /// never what the credentials row holds), plus the project directory under Claude Code's
    /// name and keel's.
    ///
    /// # Errors
    /// The credentials row cannot say what it holds: the hook is not run.
    async fn env(&self) -> Result<Vec<(OsString, OsString)>, String> {
        let service = self
            .ctx
            .get_client::<Credentials>()
            .map_err(|e| format!("keel.credentials cannot be reached: {e}"))?;
        let held = held_references(service)
            .await
            .map_err(|e| format!("keel.credentials cannot say what it holds: {e}"))?;
        let mut env = ChildEnv::from_process(&self.config.pass_env, &held);
        for key in ["CLAUDE_PROJECT_DIR", "KEEL_PROJECT_DIR"] {
            env.set(key, self.root.clone().into_os_string());
        }
        Ok(env.into_vec())
    }

    /// Appends one audit event; a failure is logged (the hook's answer still counts).
    async fn audit(&self, session_id: &str, kind: &str, data: Value) {
        let event = json!({"type": kind, "data": data, "ignorable": true});
        let appended = match EventInput::from_json(event) {
            Ok(e) => {
                self.sessions
                    .append(AppendEvents {
                        session_id: session_id.to_owned(),
                        events: vec![e],
                    })
                    .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = appended {
            tracing::warn!(session = %session_id, "{kind} could not be logged: {e}");
        }
    }
}

/// `bash` when it is on `PATH`, else `/bin/sh`.
fn shell() -> &'static str {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|d| d.join("bash").is_file()) {
        "bash"
    } else {
        "/bin/sh"
    }
}

fn excerpt(text: &str) -> String {
    match text.char_indices().nth(STDERR_EXCERPT) {
        Some((cut, _)) => format!("{}… ({} more bytes)", &text[..cut], text.len() - cut),
        None => text.to_owned(),
    }
}

/// The working directory a session header names.
pub fn header_cwd(header: &str) -> Option<String> {
    serde_json::from_str::<Value>(header)
        .ok()?
        .get("cwd")?
        .as_str()
        .map(str::to_owned)
}
