//! One headless run (SURF-01, SURF-02, ARCHITECTURE §11), over the `keel.agent` client and
//! the `keel.approval` handle only, so the whole flow is tested with in-process fakes:
//!
//! 1. options and the prompt (`-` reads stdin) — a missing or empty prompt is a usage error
//!    (exit 2); `resume` never invents one;
//! 2. `create {cwd, ephemeral, max_turns?, profile?}` (the running profile, recorded with the
//!    session: see [`crate::profile`]) or `resume {session_id, max_turns?}` — a failure
//!    (`CREDENTIAL_MISSING`, `SESSION_NOT_FOUND`, `SESSION_UNSUPPORTED`, …) exits 2 before any
//!    model request; `SESSION_LOCKED` (another keel holds the session) exits 1;
//! 3. `set_mode` on `keel.approval` when `--approval` is given and an approval row exists;
//! 4. `send {target: "followup"}`, then `wait_idle` — a stop request meanwhile (the kernel's
//!    `interrupt`, on SIGINT, SIGTERM or SIGHUP) calls `abort`;
//! 5. `close` (stops the loop, flushes, closes), then the output and the exit code (after a
//!    stop request, its code: 128 + the signal's number).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::FutureExt as _;
use futures::channel::oneshot;
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::{
    AgentClient, AgentSession, CreateAgent, InboxTarget, ResumeAgent, RunReport, SendMessage,
};
use keel_plugin_api::services::approval::{self, ApprovalClient};
use keel_plugin_api::services::driver::{DriverInterrupt, DriverInvocation};
use keel_plugin_api::services::sandbox::{self, SandboxClient};
use keel_plugin_api::services::session::{SessionLog, SessionRef, SessionsClient};

use crate::feed::{Feed, FeedOptions, Hub, Notice, Sink};
use crate::format::{self, OutputFormat, exit};
use crate::input::InputFormat;
use crate::interrupt::Interrupts;

#[path = "conversation.rs"]
mod conversation;

pub use conversation::LineSource;

#[path = "run_options.rs"]
mod options;

pub use options::{Options, run_options};

/// Where the prompt comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptSource {
    /// Given on the command line.
    Text(String),
    /// `-`: read all of stdin.
    Stdin,
}

/// The prompt source for `run` / `resume`.
///
/// # Errors
/// A usage message: unknown command, no session id for `resume`, a missing or blank prompt.
pub fn prompt_source(inv: &DriverInvocation) -> Result<PromptSource, String> {
    let how = "pass it as an argument, or `-` to read it from stdin";
    match inv.command.as_str() {
        "run" => {}
        "resume" => {
            if inv.session_id.as_deref().is_none_or(str::is_empty) {
                return Err("keel resume needs a session id".to_owned());
            }
        }
        other => {
            return Err(format!(
                "the headless driver runs `run` and `resume`, not {other:?}"
            ));
        }
    }
    match inv.prompt.as_deref() {
        Some("-") => Ok(PromptSource::Stdin),
        Some(p) if !p.trim().is_empty() => Ok(PromptSource::Text(p.to_owned())),
        Some(_) => Err("the prompt is empty".to_owned()),
        None if inv.command == "resume" => Err(format!(
            "keel resume needs a prompt to continue the session ({how}); none is assumed"
        )),
        None => Err(format!("keel run needs a prompt: {how}")),
    }
}

/// The one run in flight (a driver runs once per process; a second concurrent call is
/// refused) and its open session, which the plugin's disposer finishes if the kernel stops the
/// run from outside ([`finish_stopped`]).
#[derive(Default)]
pub struct Active {
    running: AtomicBool,
    open: Mutex<Option<Open>>,
}

/// A session a run has opened and not yet closed, with what is needed to finish its output.
pub struct Open {
    /// Session id.
    pub session_id: String,
    feed: Arc<Feed>,
    format: OutputFormat,
    started: Instant,
}

impl Active {
    fn try_begin(&self) -> bool {
        self.running
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    fn end(&self) {
        self.running.store(false, Ordering::SeqCst);
    }

    fn set_open(&self, open: Option<Open>) {
        if let Ok(mut s) = self.open.lock() {
            *s = open;
        }
    }

    /// Takes the open session, if a run left one (then it was stopped from outside).
    pub fn take_open(&self) -> Option<Open> {
        self.open.lock().ok().and_then(|mut s| s.take())
    }
}

/// The services a run calls.
#[derive(Clone, Copy)]
pub struct Services<'a> {
    /// `keel.agent`.
    pub agent: &'a AgentClient,
    /// `keel.approval`, when a row provides it.
    pub approval: Option<&'a ApprovalClient>,
    /// `keel.sandbox`, when a row provides it.
    pub sandbox: Option<&'a SandboxClient>,
    /// `keel.session`, when a row provides it (a conversation flushes before each result).
    pub sessions: Option<&'a SessionsClient>,
    /// The tools and model `system/init` names (issue 23 item 13); `None`: nothing known.
    pub describe: Option<&'a format::InitInfo>,
}

/// Reads all of stdin (run on a thread of its own).
pub type StdinReader = Box<dyn FnOnce() -> std::io::Result<String> + Send>;

/// Everything a run needs besides its services.
pub struct RunEnv {
    /// The `session/event` forwarder.
    pub hub: Arc<Hub>,
    /// The in-flight marker shared with the disposer.
    pub active: Arc<Active>,
    /// stdout/stderr.
    pub sink: Box<dyn Sink>,
    /// Progress lines on stderr (stderr is a terminal).
    pub progress: bool,
    /// Stop requests (the kernel's `interrupt`).
    pub interrupts: Interrupts,
    /// For `-`.
    pub stdin: StdinReader,
    /// For `--input-format stream-json`: stdin as lines.
    pub lines: LineSource,
}

/// Runs one invocation and returns the exit code.
pub async fn run(inv: &DriverInvocation, services: Services<'_>, env: RunEnv) -> i32 {
    let started = Instant::now();
    let RunEnv {
        hub,
        active,
        mut sink,
        progress,
        mut interrupts,
        stdin,
        lines,
    } = env;
    let options = match Options::parse(&inv.options) {
        Ok(o) => o,
        Err(m) => {
            sink.err(&format::usage_line(&m));
            return exit::USAGE;
        }
    };
    if !active.try_begin() {
        sink.err(&format::error_line(
            keel_plugin_api::codes::DriverCode::Busy.as_str(),
            "the headless driver is already running a session in this process",
        ));
        return exit::USAGE;
    }
    let feed_options = FeedOptions {
        stream_json: options.format == OutputFormat::StreamJson,
        progress,
        partial: options.partial,
    };
    let code = match Feed::start(sink, feed_options, &hub) {
        Ok(feed) => {
            let feed = Arc::new(feed);
            let mut run = Run {
                inv,
                options: &options,
                services,
                feed: &feed,
                active: &active,
                interrupts: &mut interrupts,
                started,
            };
            let code = run.drive(stdin, lines).await;
            feed.finish().await;
            code
        }
        Err(e) => {
            // The sink went with the thread that could not start: say it on stderr directly.
            crate::feed::StdSink(None).err(&format::error_line(
                keel_plugin_api::codes::DriverCode::Io.as_str(),
                &format!("cannot start the output thread: {e}"),
            ));
            exit::USAGE
        }
    };
    active.end();
    code
}

struct Run<'a> {
    inv: &'a DriverInvocation,
    options: &'a Options,
    services: Services<'a>,
    feed: &'a Arc<Feed>,
    active: &'a Active,
    interrupts: &'a mut Interrupts,
    started: Instant,
}

impl Run<'_> {
    async fn drive(&mut self, stdin: StdinReader, lines: LineSource) -> i32 {
        let prompt = match self.input_prompt(stdin).await {
            Ok(Ok(p)) => p,
            Ok(Err(stop)) => return stop.exit_code,
            Err(m) => {
                self.feed.err(format::usage_line(&m));
                return exit::USAGE;
            }
        };
        let (session_id, first_seq) = match self.open().await {
            Ok(opened) => opened,
            Err(e) => {
                self.feed.err(format::error_line(&e.code, &e.message));
                return format::open_failure_exit(&e.code);
            }
        };
        self.active.set_open(Some(Open {
            session_id: session_id.clone(),
            feed: Arc::clone(self.feed),
            format: self.options.format,
            started: self.started,
        }));
        let init = if self.options.format == OutputFormat::StreamJson {
            let info = self.init_info(&session_id).await;
            self.feed.set_model(info.model.clone());
            Some(format::init_line(
                &session_id,
                &self.inv.profile,
                &self.inv.cwd,
                &info,
            ))
        } else {
            None
        };
        self.feed.start_session(&session_id, first_seq, init);
        self.session(&session_id, prompt, lines).await
    }

    /// What `system/init` says of the run: the tools and model the adapter found, and the
    /// approval mode this session runs under (`--approval`, else the row's).
    async fn init_info(&self, session_id: &str) -> format::InitInfo {
        let mut info = self.services.describe.cloned().unwrap_or_default();
        info.approval = match (&self.options.approval, self.services.approval) {
            (Some(mode), _) => mode.clone(),
            (None, Some(approval)) => approval
                .mode(approval::ModeRequest {
                    session_id: Some(session_id.to_owned()),
                })
                .await
                .map(|a| a.mode.as_str().to_owned())
                .unwrap_or_default(),
            (None, None) => String::new(),
        };
        info
    }

    /// The prompt: with `--input-format stream-json` it is optional (the messages come on
    /// stdin) and `-` is refused (stdin is the message stream).
    async fn input_prompt(
        &mut self,
        stdin: StdinReader,
    ) -> Result<Result<Option<String>, DriverInterrupt>, String> {
        if self.options.input == InputFormat::Text {
            return self.prompt(stdin).await.map(|r| r.map(Some));
        }
        match self.inv.prompt.as_deref() {
            Some("-") => Err(
                "`-` reads the prompt from stdin, which --input-format stream-json reads as message lines; give the first prompt as an argument or as the first line"
                    .to_owned(),
            ),
            _ if self.inv.command == "resume"
                && self.inv.session_id.as_deref().is_none_or(str::is_empty) =>
            {
                Err("keel resume needs a session id".to_owned())
            }
            Some(p) if p.trim().is_empty() => Err("the prompt is empty".to_owned()),
            Some(p) => Ok(Ok(Some(p.to_owned()))),
            None => Ok(Ok(None)),
        }
    }

    /// The prompt, or `Ok(Err(stop))` when a stop request came before it was read.
    async fn prompt(
        &mut self,
        stdin: StdinReader,
    ) -> Result<Result<String, DriverInterrupt>, String> {
        match prompt_source(self.inv)? {
            PromptSource::Text(p) => Ok(Ok(p)),
            PromptSource::Stdin => {
                let (tx, rx) = oneshot::channel();
                std::thread::Builder::new()
                    .name("keel-headless-stdin".to_owned())
                    .spawn(move || {
                        let _ = tx.send(stdin());
                    })
                    .map_err(|e| format!("cannot read stdin: {e}"))?;
                let read = futures::select! {
                    r = rx.fuse() => r,
                    stop = self.interrupts.next().fuse() => {
                        return match stop {
                            Some(stop) => Ok(Err(stop)),
                            // No interrupt source: nothing to race.
                            None => Err("the interrupt source closed while reading stdin".to_owned()),
                        };
                    }
                };
                let text = read
                    .map_err(|_| "stdin reader stopped".to_owned())?
                    .map_err(|e| format!("cannot read the prompt from stdin: {e}"))?;
                if text.trim().is_empty() {
                    return Err("the prompt read from stdin is empty".to_owned());
                }
                Ok(Ok(text))
            }
        }
    }

    /// `create` or `resume`: the session id and, for a new session, its first seq.
    async fn open(&self) -> Result<(String, Option<u64>)> {
        let agent = self.services.agent;
        let max_turns = self.options.max_turns;
        if self.inv.command == "resume" {
            let session_id = self.inv.session_id.clone().unwrap_or_default();
            let resumed = agent
                .resume(ResumeAgent {
                    session_id: session_id.clone(),
                    max_turns,
                })
                .await?;
            let id = Some(resumed.session_id).filter(|s| !s.is_empty());
            return Ok((id.unwrap_or(session_id), None));
        }
        let created = agent
            .create(CreateAgent {
                cwd: self.inv.cwd.clone(),
                session_id: None,
                ephemeral: self.options.ephemeral,
                max_turns,
                // Recorded with the session, so `keel resume` runs it under the same profile.
                profile: self.inv.profile_identity.clone(),
                lineage: None,
                overrides: None,
            })
            .await?;
        if created.session_id.is_empty() {
            return Err(Error::coded(
                keel_plugin_api::codes::DriverCode::AgentProtocol,
                "keel.agent create answered without a session_id",
            ));
        }
        Ok((created.session_id, Some(0)))
    }

    async fn session(&mut self, id: &str, prompt: Option<String>, lines: LineSource) -> i32 {
        let agent = self.services.agent;
        if let (Some(mode), Some(approval)) = (&self.options.approval, self.services.approval) {
            let set = approval
                .set_mode(approval::SetModeRequest {
                    session_id: id.to_owned(),
                    mode: mode.clone(),
                })
                .await;
            if let Err(e) = set {
                self.feed.err(format::error_line(&e.code, &e.message));
                self.close(id).await;
                return exit::USAGE;
            }
        }
        if let Some(mode) = &self.options.sandbox {
            // The sandbox row's mode for this run (the driver is one-shot: one session per
            // process). A confined mode without a sandbox row is refused, never run unconfined.
            let set = match self.services.sandbox {
                Some(sandbox) => sandbox
                    .set_mode(sandbox::SetModeRequest { mode: mode.clone() })
                    .await
                    .map(|_| ()),
                None if mode == "danger-full-access" => Ok(()),
                None => Err(Error::coded(
                    keel_plugin_api::services::sandbox::SandboxCode::Unavailable,
                    format!("--sandbox {mode} needs a sandbox row in the profile; nothing was run"),
                )),
            };
            if let Err(e) = set {
                self.feed.err(format::error_line(&e.code, &e.message));
                self.close(id).await;
                return exit::USAGE;
            }
        }
        if let Some(stop) = self.interrupts.pending() {
            self.close(id).await;
            return stop.exit_code;
        }
        let (report, stopped, printed) = if self.options.input == InputFormat::StreamJson {
            self.converse(id, prompt, lines).await
        } else {
            let send = SendMessage {
                session_id: id.to_owned(),
                content: prompt.unwrap_or_default(),
                target: InboxTarget::Followup,
                level: None,
            };
            if let Err(e) = agent.send(send).await {
                self.feed.err(format::error_line(&e.code, &e.message));
                self.close(id).await;
                return exit::TURN_FAILED;
            }
            let (report, stopped) = self.wait(id).await;
            (report, stopped, false)
        };
        let closed = self.close(id).await;
        if !printed {
            print_result(self.feed, self.options.format, &report, self.started);
        }
        if let Some(stop) = stopped {
            // The kernel printed `keel: interrupted (SIG…)` when the signal came.
            return stop.exit_code;
        }
        if let Some(line) = format::turn_failure_line(&report) {
            self.feed.err(line);
        }
        if closed {
            format::exit_code(&report)
        } else {
            exit::TURN_FAILED
        }
    }

    /// `wait_idle`, aborting the turn on the first stop request. `(report, the request)`.
    async fn wait(&mut self, id: &str) -> (RunReport, Option<DriverInterrupt>) {
        let agent = self.services.agent;
        let wait = agent.wait_idle(AgentSession::new(id)).fuse();
        futures::pin_mut!(wait);
        // Biased: `wait_idle` is always in flight before a stop request is looked at.
        let (answer, stopped) = futures::select_biased! {
            r = wait => (r, None),
            stop = self.interrupts.next().fuse() => {
                if stop.is_some()
                    && let Err(e) = agent.abort(AgentSession::new(id)).await
                {
                    tracing::warn!(session = id, "abort failed: {e}");
                }
                // The turn closes (the loop stops its tool bodies) and `wait_idle` answers.
                (wait.await, stop)
            }
        };
        (to_report(id, answer), stopped)
    }

    async fn close(&self, id: &str) -> bool {
        self.active.set_open(None);
        close(self.services.agent, self.feed, id).await
    }
}

/// `wait_idle`'s answer as a report; a failure (a malformed answer is the SDK's
/// `INVALID_ANSWER`) reads as an error turn.
fn to_report(id: &str, answer: Result<RunReport>) -> RunReport {
    answer.unwrap_or_else(|e| format::failed_report(id, &e.code, &e.message))
}

/// `close`; `false` (and an error line) when it failed: durability is then not known.
async fn close(agent: &AgentClient, feed: &Feed, id: &str) -> bool {
    match agent.close(AgentSession::new(id)).await {
        Ok(_) => true,
        Err(e) => {
            feed.err(format::error_line(
                &e.code,
                &format!("closing session {id} failed: {}", e.message),
            ));
            false
        }
    }
}

/// The stdout part of the outcome, per format.
fn print_result(feed: &Feed, output: OutputFormat, report: &RunReport, started: Instant) {
    match output {
        OutputFormat::Text => {
            if let Some(text) = format::text_output(report) {
                feed.out(text);
            }
        }
        OutputFormat::Json | OutputFormat::StreamJson => {
            let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            feed.out(format::result_object(report, duration_ms).to_string());
        }
    }
}

/// Finishes a run the kernel stopped from outside (when the run did not return within the
/// kernel's grace after a signal, or a second signal came, the kernel drops the driver's
/// future, then unloads the rows, this one before `keel.agent`): aborts the turn, waits for
/// the loop to close it, closes (flushes) the session, prints the result as the run would
/// have, and drains the output. The kernel prints `keel: interrupted (SIG…)` and exits
/// 128 + the signal's number itself.
///
/// The kernel no longer delivers `session/event` (nor `session/durable`) to a row it is
/// unloading, so for stream-json the events committed meanwhile (the turn's closers) are read
/// back from `keel.session` `inspect` (which commits nothing) when `sessions` is given — only
/// after a successful close, so what is read back is stored.
pub async fn finish_stopped(agent: &AgentClient, sessions: Option<&SessionsClient>, open: Open) {
    let id = open.session_id.as_str();
    if let Err(e) = agent.abort(AgentSession::new(id)).await {
        tracing::warn!(session = id, "abort at teardown failed: {e}");
    }
    let report = to_report(id, agent.wait_idle(AgentSession::new(id)).await);
    let closed = close(agent, &open.feed, id).await;
    // Read back only once closed (flushed): then what `inspect` answers is stored.
    if let (true, OutputFormat::StreamJson, Some(sessions)) = (closed, open.format, sessions) {
        match sessions.inspect(SessionRef::new(id)).await {
            Ok(log) => open.feed.replay(notices_of(id, &log)),
            Err(e) => tracing::warn!(session = id, "cannot read the session back: {e}"),
        }
    }
    print_result(&open.feed, open.format, &report, open.started);
    open.feed.finish().await;
}

/// The events of a `keel.session` `load`/`inspect` answer as feed notices.
fn notices_of(id: &str, log: &SessionLog) -> Vec<Notice> {
    log.events
        .iter()
        .filter_map(|e| {
            Some(Notice {
                session_id: id.to_owned(),
                seq: e.seq,
                kind: e.kind.clone(),
                record: serde_json::to_string(e).ok()?,
            })
        })
        .collect()
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
