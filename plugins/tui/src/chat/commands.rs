//! Opening and closing the chat's session, and the slash commands. `--resume ID` and
//! `/resume ID` go through `keel.agent` `resume` (the session's crash closers are committed
//! first, as for `keel resume`); `/clear` closes the session and creates a new one; `/fork`
//! copies this session with `keel.session` `fork` and continues in the copy.

use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::{AgentSession, CreateAgent, ResumeAgent};
use keel_plugin_api::services::approval::SetModeRequest;
use keel_plugin_api::services::sandbox;
use keel_plugin_api::services::session::{ForkSession, SessionCode, SessionRef};

use super::{Chat, exit};
use crate::slash::{HELP, Slash};
use crate::view::{Line, Tone};

impl Chat {
    /// Opens the session the options name (or a new one) and applies `--approval` and
    /// `--sandbox`. `Err((exit code, line))` when it cannot.
    pub(super) async fn open(&mut self) -> std::result::Result<(), (i32, String)> {
        let opened = match self.args.resume.clone() {
            Some(id) => self.resume(&id).await,
            None => self.create().await,
        };
        if let Err(e) = opened {
            let code = if e.code == SessionCode::Locked.as_str() {
                exit::FAILED
            } else {
                exit::USAGE
            };
            return Err((code, format!("keel: error[{}]: {}", e.code, e.message)));
        }
        if let Err(e) = self.apply_modes().await {
            let _ = self.close_session().await;
            return Err((
                exit::USAGE,
                format!("keel: error[{}]: {}", e.code, e.message),
            ));
        }
        Ok(())
    }

    async fn create(&mut self) -> Result<()> {
        let created = self
            .deps
            .agent
            .create(CreateAgent {
                cwd: self.cwd.clone(),
                session_id: None,
                ephemeral: self.args.ephemeral,
                max_turns: None,
                profile: None,
                lineage: None,
                overrides: None,
            })
            .await?;
        self.session = created.session_id;
        Ok(())
    }

    async fn resume(&mut self, id: &str) -> Result<()> {
        let resumed = self
            .deps
            .agent
            .resume(ResumeAgent {
                session_id: id.to_owned(),
                max_turns: None,
            })
            .await?;
        self.session = Some(resumed.session_id)
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| id.to_owned());
        Ok(())
    }

    /// `--approval` and `--sandbox` for the session (as `keel run` applies them).
    async fn apply_modes(&mut self) -> Result<()> {
        if let (Some(mode), Some(approval)) = (self.args.approval, &self.deps.approval) {
            approval
                .set_mode(SetModeRequest {
                    session_id: self.session.clone(),
                    mode: mode.as_str().to_owned(),
                })
                .await?;
        }
        if let Some(mode) = self.args.sandbox {
            match &self.deps.sandbox {
                Some(s) => {
                    s.set_mode(sandbox::SetModeRequest {
                        mode: mode.as_str().to_owned(),
                    })
                    .await?;
                }
                None if mode.as_str() == "danger-full-access" => {}
                None => {
                    return Err(Error::coded(
                        sandbox::SandboxCode::Unavailable,
                        format!(
                            "--sandbox {} needs a sandbox row in the profile; nothing was run",
                            mode.as_str()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Closes (flushes) the session; `false` with a line when it failed.
    pub(super) async fn close_session(&mut self) -> bool {
        if self.session.is_empty() {
            return true;
        }
        match self
            .deps
            .agent
            .close(AgentSession::new(&self.session))
            .await
        {
            Ok(()) => true,
            Err(e) => {
                self.note(Line::new(
                    Tone::Bad,
                    format!(
                        "closing session {} failed: {} {}",
                        self.session, e.code, e.message
                    ),
                ));
                false
            }
        }
    }

    /// Runs a slash command.
    pub(super) async fn slash(&mut self, slash: Slash) {
        let busy = self.turn.is_some();
        match slash {
            Slash::Help => self.help(None),
            Slash::Unknown(text) => self.help(Some(&text)),
            Slash::Exit => self.leave().await,
            Slash::Model(None) => {
                let model = self.model_name();
                self.note(Line::new(Tone::Dim, format!("  model: {model}")));
            }
            Slash::Model(Some(model)) => {
                if let Ok(mut m) = self.deps.model.lock() {
                    *m = Some((self.session.clone(), model.clone()));
                }
                self.note(Line::new(
                    Tone::Dim,
                    format!("  the next requests use model {model}"),
                ));
            }
            Slash::Compact => self.note(Line::new(
                Tone::Dim,
                "  the context row compacts before each request once the history nears the window; a compaction on request is not built yet",
            )),
            Slash::Sessions => self.sessions().await,
            Slash::Clear | Slash::Resume(_) | Slash::Fork if busy => self.note(Line::new(
                Tone::Dim,
                "  a turn is running: Ctrl-C stops it first",
            )),
            Slash::Clear => {
                let old = self.session.clone();
                self.switch(|chat| Box::pin(chat.create())).await;
                self.note(Line::new(
                    Tone::Dim,
                    format!("  session {old} closed · new session {}", self.session),
                ));
            }
            Slash::Resume(id) => {
                self.switch(move |chat| Box::pin(async move { chat.resume(&id).await }))
                    .await;
                self.note(Line::new(
                    Tone::Dim,
                    format!("  continuing session {}", self.session),
                ));
            }
            Slash::Fork => self.fork().await,
        }
    }

    /// Closes this session and opens another with `open`; on failure a new session is
    /// created so the chat always has one.
    async fn switch<F>(&mut self, open: F)
    where
        F: for<'a> FnOnce(&'a mut Chat) -> futures::future::BoxFuture<'a, Result<()>>,
    {
        self.close_session().await;
        self.calls.clear();
        self.stream.clear();
        self.streaming = None;
        self.tokens = (0, 0);
        if let Err(e) = open(self).await {
            self.note(Line::new(Tone::Bad, format!("  {} {}", e.code, e.message)));
            if let Err(e) = self.create().await {
                self.note(Line::new(
                    Tone::Bad,
                    format!("  no session: {} {}", e.code, e.message),
                ));
                self.exit = Some(exit::FAILED);
                return;
            }
        }
        if let Err(e) = self.apply_modes().await {
            self.note(Line::new(Tone::Bad, format!("  {} {}", e.code, e.message)));
        }
    }

    fn help(&mut self, unknown: Option<&str>) {
        if let Some(text) = unknown {
            self.note(Line::new(
                Tone::Bad,
                format!("  unknown command {text}; the commands are:"),
            ));
        }
        for (name, what) in HELP {
            self.note(Line::new(Tone::Dim, format!("  {name:<14} {what}")));
        }
        self.note(Line::new(
            Tone::Dim,
            "  Enter sends (steers while a turn runs) · Alt-Enter or a trailing \\ adds a line · Ctrl-C stops the turn",
        ));
    }

    async fn sessions(&mut self) {
        let Some(sessions) = self.deps.sessions.clone() else {
            return self.note(Line::new(Tone::Dim, "  no session row in this profile"));
        };
        match sessions.list().await {
            Ok(mut listing) => {
                listing
                    .sessions
                    .sort_by_key(|s| std::cmp::Reverse(s.updated_at));
                let roots: Vec<_> = listing
                    .sessions
                    .into_iter()
                    .filter(|s| s.header.parent_session.is_none() || s.header.origin.is_none())
                    .take(10)
                    .collect();
                if roots.is_empty() {
                    self.note(Line::new(Tone::Dim, "  no stored sessions"));
                }
                for s in roots {
                    let here = if s.header.id == self.session {
                        " (this one)"
                    } else {
                        ""
                    };
                    self.note(Line::new(
                        Tone::Dim,
                        format!(
                            "  {} · {} events · {}{here}",
                            s.header.id,
                            s.events,
                            keel_plugin_api::civil_time::utc_timestamp(
                                i64::try_from(s.updated_at / 1000).unwrap_or(0)
                            )
                        ),
                    ));
                }
            }
            Err(e) => self.note(Line::new(Tone::Bad, format!("  {} {}", e.code, e.message))),
        }
    }

    async fn fork(&mut self) {
        let Some(sessions) = self.deps.sessions.clone() else {
            return self.note(Line::new(Tone::Dim, "  no session row in this profile"));
        };
        let parent = self.session.clone();
        if let Err(e) = sessions.flush(SessionRef::new(&parent)).await {
            return self.note(Line::new(Tone::Bad, format!("  {} {}", e.code, e.message)));
        }
        let forked = sessions
            .fork(ForkSession {
                session_id: parent.clone(),
                at: None,
                child_id: None,
                origin: None,
                delegation_depth: None,
                parent_call_id: None,
            })
            .await;
        match forked {
            Ok(child) => {
                let id = child.session_id;
                self.switch(move |chat| Box::pin(async move { chat.resume(&id).await }))
                    .await;
                self.note(Line::new(
                    Tone::Dim,
                    format!("  forked {parent} · continuing in {}", self.session),
                ));
            }
            Err(e) => self.note(Line::new(Tone::Bad, format!("  {} {}", e.code, e.message))),
        }
    }
}
