//! One `keel chat`: open (or resume) a session, then a loop over one channel of [`Ui`] items
//! and the running turn's `wait_idle`, until the person leaves.
//!
//! - A message starts a turn (`send` followup, then `wait_idle` in flight beside the keys);
//!   typing while a turn runs steers it (`send` steer). In plain mode every line is a
//!   followup: a piped script's lines run in order, each as its own turn.
//! - Ctrl-C stops the running turn (`abort`: the tool tree is stopped, the turn closes
//!   `aborted`, the session stays open and the next message continues it); a second Ctrl-C
//!   within [`TWICE`], or Ctrl-D on an empty line, leaves: exit 0, or 130 when leaving
//!   interrupted a turn.
//! - Leaving closes the session (flushed); the transcript stays in the terminal's scrollback.
//!
//! What the events look like is in [`events`](self::events) (deltas, log events, approvals,
//! the live region); the slash commands and the session's opening and closing in
//! [`commands`](self::commands).

mod commands;
mod events;

use std::collections::{BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use futures::channel::{mpsc, oneshot};
use futures::future::{BoxFuture, Either};
use keel_plugin_api::events::approval::ApprovalQuestion;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::{
    AgentClient, AgentSession, InboxTarget, RunReport, SendMessage,
};
use keel_plugin_api::services::approval::{ApprovalClient, ApprovalMode, ApprovalOutcome};
use keel_plugin_api::services::sandbox::{SandboxClient, SandboxMode};
use keel_plugin_api::services::session::SessionsClient;

use crate::editor::{Action, Editor, Key};
use crate::terminal::Mode;
use crate::transcript::Call;
use crate::ui::Ui;
use crate::view::{Frame, Line, Tone};

/// Two Ctrl-C within this leave the chat.
pub const TWICE: Duration = Duration::from_secs(2);

/// Exit codes (ARCHITECTURE §11).
pub mod exit {
    /// Left normally.
    pub const OK: i32 = 0;
    /// A turn failed to start or the session could not be closed.
    pub const FAILED: i32 = 1;
    /// Usage: bad options, a session that cannot be opened.
    pub const USAGE: i32 = 2;
    /// Leaving interrupted a running turn (as SIGINT would).
    pub const INTERRUPTED: i32 = 130;
}

/// The `/model` override: `(session, model)` for the `agent/request` listener.
pub type ModelOverride = Arc<Mutex<Option<(String, String)>>>;

/// The services and outputs a chat uses.
pub struct Deps {
    /// `keel.agent`.
    pub agent: AgentClient,
    /// `keel.approval`, when a row provides it.
    pub approval: Option<ApprovalClient>,
    /// `keel.sandbox`, when a row provides it.
    pub sandbox: Option<SandboxClient>,
    /// `keel.session`, when a row provides it (`/sessions`, `/fork`).
    pub sessions: Option<SessionsClient>,
    /// Writes to stdout (through the kernel's redactions).
    pub out: Box<dyn Fn(&str) + Send + Sync>,
    /// The `/model` override.
    pub model: ModelOverride,
}

/// `keel chat`'s options.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatArgs {
    /// `--resume ID`.
    #[serde(default)]
    pub resume: Option<String>,
    /// `--sandbox MODE`.
    #[serde(default)]
    pub sandbox: Option<SandboxMode>,
    /// `--approval MODE`.
    #[serde(default)]
    pub approval: Option<ApprovalMode>,
    /// `--ephemeral`.
    #[serde(default)]
    pub ephemeral: bool,
}

/// Where a chat starts.
pub struct Start {
    /// The options.
    pub args: ChatArgs,
    /// Working directory.
    pub cwd: String,
    /// How it draws.
    pub mode: Mode,
    /// Terminal size.
    pub size: (u16, u16),
    /// The model the profile's default provider names.
    pub model: String,
    /// The history file and its entries.
    pub history: Option<(PathBuf, Vec<String>)>,
}

/// One approval question on screen.
struct Asking {
    question: ApprovalQuestion,
    reply: oneshot::Sender<ApprovalOutcome>,
}

/// The chat's state.
pub struct Chat {
    deps: Deps,
    args: ChatArgs,
    cwd: String,
    frame: Option<Frame>,
    editor: Editor,
    history_file: Option<PathBuf>,
    session: String,
    model: String,
    turn: Option<BoxFuture<'static, Result<RunReport>>>,
    /// Ctrl-C stopped the running (or last) turn.
    interrupted: bool,
    last_ctrl_c: Option<Instant>,
    /// The model's text of the step being streamed that is not a whole line yet.
    stream: String,
    /// `(step, attempt)` the deltas shown belong to; `None`: nothing streamed this step.
    streaming: Option<(u64, u32)>,
    /// Plain mode: the last thing written did not end a line.
    open_line: bool,
    calls: Vec<Call>,
    asks: VecDeque<Asking>,
    /// `(tool, reason)` pairs answered "always" in this chat.
    always: BTreeSet<(String, String)>,
    tokens: (u64, u64),
    notice: Option<String>,
    commit: Vec<Line>,
    /// Plain mode: stdin ended; leave once the turn is done.
    eof: bool,
    exit: Option<i32>,
}

impl Chat {
    /// A chat that has not opened its session yet.
    pub fn new(deps: Deps, start: Start) -> Self {
        let frame = match start.mode {
            Mode::Terminal { color } => Some(Frame::new(start.size.0, start.size.1, color)),
            Mode::Plain => None,
        };
        let (history_file, entries) = start.history.unzip();
        Chat {
            deps,
            args: start.args,
            cwd: start.cwd,
            frame,
            editor: Editor::new(entries.unwrap_or_default()),
            history_file,
            session: String::new(),
            model: start.model,
            turn: None,
            interrupted: false,
            last_ctrl_c: None,
            stream: String::new(),
            streaming: None,
            open_line: false,
            calls: Vec::new(),
            asks: VecDeque::new(),
            always: BTreeSet::new(),
            tokens: (0, 0),
            notice: None,
            commit: Vec::new(),
            eof: false,
            exit: None,
        }
    }

    /// Runs the chat over `rx` and answers the exit code.
    pub async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Ui>) -> i32 {
        if let Err((code, line)) = self.open().await {
            self.note(Line::new(Tone::Bad, line));
            self.flush();
            return code;
        }
        self.note(Line::new(
            Tone::Dim,
            format!(
                "keel chat · session {} · {} · /help for commands, Ctrl-D to leave",
                self.session,
                self.model_name()
            ),
        ));
        self.redraw();
        while self.exit.is_none() {
            let wake = match self.turn.as_mut() {
                Some(turn) => match futures::future::select(rx.next(), turn).await {
                    Either::Left((ui, _)) => Either::Left(ui),
                    Either::Right((report, _)) => Either::Right(report),
                },
                None => Either::Left(rx.next().await),
            };
            match wake {
                Either::Left(Some(ui)) => self.on_ui(ui).await,
                // Nobody can send any more (the row is unloading): leave.
                Either::Left(None) => self.leave().await,
                Either::Right(report) => {
                    self.turn = None;
                    self.turn_done(report);
                }
            }
            self.redraw();
        }
        let code = self.exit.unwrap_or(exit::OK);
        self.finish(code).await
    }

    async fn on_ui(&mut self, ui: Ui) {
        match ui {
            Ui::Key(key) => self.on_key(key).await,
            Ui::Resize(w, h) if w > 0 && h > 0 => {
                if let Some(frame) = &mut self.frame {
                    frame.resize(w, h);
                }
            }
            Ui::Resize(..) => {}
            Ui::Line(Some(line)) => self.on_line(line).await,
            Ui::Line(None) => {
                self.eof = true;
                if self.turn.is_none() {
                    self.exit = Some(exit::OK);
                }
            }
            Ui::Delta {
                session,
                step,
                data,
            } => {
                if session == self.session {
                    self.on_delta(step, data);
                }
            }
            Ui::Logged {
                session,
                kind,
                record,
            } => {
                if session == self.session {
                    self.on_logged(&kind, &record);
                } else {
                    self.on_child_logged(&session, &kind, &record);
                }
            }
            Ui::Child {
                parent_session,
                parent_call_id,
                child_session,
            } => {
                if parent_session == self.session
                    && let Some(call) = self.calls.iter_mut().find(|c| c.call_id == parent_call_id)
                {
                    call.child = Some(crate::transcript::Child {
                        session: child_session,
                        ..Default::default()
                    });
                }
            }
            Ui::Ask { question, reply } => self.on_ask(question, reply),
        }
    }

    async fn on_key(&mut self, key: Key) {
        if !self.asks.is_empty() {
            return self.answer_key(key).await;
        }
        self.notice = None;
        match self.editor.key(key) {
            Action::Edited => {}
            Action::Submit(text) => {
                if let Some(file) = &self.history_file
                    && let Err(e) = crate::history::append(file, &text)
                {
                    tracing::debug!("chat history not saved: {e}");
                }
                self.submit(text).await;
            }
            Action::Interrupt { cleared: true } => {}
            Action::Interrupt { cleared: false } => self.ctrl_c().await,
            Action::Eof => self.leave().await,
        }
    }

    /// A line in plain mode: the answer to a question on screen, or a message.
    async fn on_line(&mut self, line: String) {
        if let Some(asking) = self.asks.pop_front() {
            let outcome = self.answer_text(&asking.question, &line);
            let _ = asking.reply.send(outcome);
            self.show_next_ask();
            return;
        }
        if !line.trim().is_empty() {
            self.submit(line).await;
        }
    }

    /// Ctrl-C on an empty line: stop the turn, or (the second time) leave.
    async fn ctrl_c(&mut self) {
        let now = Instant::now();
        let twice = self
            .last_ctrl_c
            .is_some_and(|t| now.duration_since(t) < TWICE);
        self.last_ctrl_c = Some(now);
        if twice {
            return self.leave().await;
        }
        if self.turn.is_some() {
            self.abort().await;
            self.notice = Some("interrupted · Ctrl-C again to leave".to_owned());
        } else {
            self.interrupted = false;
            self.notice = Some("Ctrl-C again (or Ctrl-D) to leave".to_owned());
        }
    }

    /// Stops the running turn.
    async fn abort(&mut self) {
        self.interrupted = true;
        for asking in self.asks.drain(..) {
            let _ = asking.reply.send(ApprovalOutcome::Cancelled);
        }
        if let Err(e) = self
            .deps
            .agent
            .abort(AgentSession::new(&self.session))
            .await
        {
            self.note(Line::new(
                Tone::Bad,
                format!("  abort failed: {} {}", e.code, e.message),
            ));
        }
    }

    /// Leave: a running turn is stopped first (exit 130), else exit 0.
    async fn leave(&mut self) {
        if self.turn.is_some() {
            self.abort().await;
            self.exit = Some(exit::INTERRUPTED);
        } else if self.interrupted && self.last_ctrl_c.is_some_and(|t| t.elapsed() < TWICE) {
            // The second Ctrl-C of a pair whose first stopped a turn.
            self.exit = Some(exit::INTERRUPTED);
        } else {
            self.exit = Some(exit::OK);
        }
    }

    /// A submitted message or command.
    async fn submit(&mut self, text: String) {
        if let Some(slash) = crate::slash::parse(&text) {
            self.echo(&text, false);
            return self.slash(slash).await;
        }
        let content = crate::slash::message(&text);
        // In the terminal, typing while a turn runs steers it; a plain script's lines queue.
        let steer = self.turn.is_some() && self.frame.is_some();
        self.echo(&text, steer);
        let target = if steer {
            InboxTarget::Steer
        } else {
            InboxTarget::Followup
        };
        let sent = self
            .deps
            .agent
            .send(SendMessage {
                session_id: self.session.clone(),
                content,
                target,
                level: None,
            })
            .await;
        if let Err(e) = sent {
            self.note(Line::new(
                Tone::Bad,
                format!("  not sent: {} {}", e.code, e.message),
            ));
            return;
        }
        if self.turn.is_none() {
            self.interrupted = false;
            let agent = self.deps.agent.clone();
            let id = self.session.clone();
            self.turn = Some(Box::pin(async move {
                agent.wait_idle(AgentSession::new(id)).await
            }));
        }
    }

    /// The person's message in the transcript (the terminal echoes it in plain mode).
    fn echo(&mut self, text: &str, steer: bool) {
        if self.frame.is_none() {
            return;
        }
        for (i, line) in text.split('\n').enumerate() {
            let lead = if i == 0 { "› " } else { "  " };
            self.note(Line::new(Tone::User, format!("{lead}{line}")));
        }
        if steer {
            self.note(Line::new(Tone::Dim, "  (steering the running turn)"));
        }
    }

    /// `wait_idle` answered: the agent is idle.
    fn turn_done(&mut self, report: Result<RunReport>) {
        self.end_stream();
        match report {
            Ok(_) if self.interrupted => self.note(Line::new(
                Tone::Dim,
                "  stopped · the session goes on: your next message continues it",
            )),
            Ok(_) => {}
            Err(e) => self.note(Line::new(
                Tone::Bad,
                format!("  the turn failed: {} {}", e.code, e.message),
            )),
        }
        self.calls.clear();
        if self.eof {
            self.exit = Some(exit::OK);
        }
    }

    /// Queues `line` for the scrollback (printed at once in plain mode).
    fn note(&mut self, line: Line) {
        if self.frame.is_some() {
            self.commit.push(line);
        } else {
            let lead = if self.open_line { "\n" } else { "" };
            self.open_line = false;
            (self.deps.out)(&format!("{lead}{}\n", line.text));
        }
    }

    /// Writes what is queued and the live region.
    fn redraw(&mut self) {
        let live = self.live();
        let commit = std::mem::take(&mut self.commit);
        if let Some(frame) = &mut self.frame {
            let bytes = frame.draw(&commit, &live);
            (self.deps.out)(&bytes);
        }
    }

    /// Writes what is queued without the live region (before the loop starts).
    fn flush(&mut self) {
        let commit = std::mem::take(&mut self.commit);
        if let Some(frame) = &mut self.frame {
            let bytes = frame.draw(&commit, &[]);
            (self.deps.out)(&bytes);
        }
    }

    /// Stops a running turn (leaving), closes the session and answers `code`.
    async fn finish(mut self, code: i32) -> i32 {
        if let Some(turn) = self.turn.take() {
            let _ = turn.await;
        }
        self.end_stream();
        let closed = self.close_session().await;
        self.note(Line::new(
            Tone::Dim,
            format!(
                "session {} closed · keel chat --resume {} continues it",
                self.session, self.session
            ),
        ));
        self.flush();
        if let Some(frame) = &mut self.frame {
            let bytes = frame.close();
            (self.deps.out)(&bytes);
        }
        if closed { code } else { exit::FAILED.max(code) }
    }
}
