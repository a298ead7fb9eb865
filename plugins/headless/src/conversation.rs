//! The run as a conversation (`--input-format stream-json`, issue 16 item 4): messages keep
//! arriving on stdin while the agent works. Each line is parsed ([`crate::input`]) and sent to
//! `keel.agent`: a user line is a steer (the next step of a running turn, or a new turn when
//! the agent is idle) unless its `keel.target` says otherwise; a `control_request` interrupt
//! aborts the running turn. The run ends when stdin is closed and the agent is idle; with
//! `stream-json` output every idle interval prints its result object as it ends, so a
//! consumer sees each answer without waiting for the end.
//!
//! Lines are read on a std thread of their own (stdin blocks), each held to 16 MiB
//! ([`crate::lines`]: a longer line or one that is not UTF-8 is skipped by number, and input
//! goes on), handed over through a bounded channel;
//! the loop waits on the next line, the agent's idle and the kernel's stop requests at once.

use std::io::BufRead;
use std::pin::Pin;

use futures::channel::mpsc;
use futures::{Future, FutureExt as _, SinkExt as _, StreamExt as _};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::{AgentSession, InboxTarget, RunReport, SendMessage};
use keel_plugin_api::services::driver::DriverInterrupt;
use keel_plugin_api::services::session::SessionRef;

use super::{Run, print_result, to_report};
use crate::format::{self, OutputFormat};
use crate::input::{self, InputLine};
use crate::lines::{self, Line};

/// Opens stdin as lines (run on the reader thread).
pub type LineSource = Box<dyn FnOnce() -> Box<dyn BufRead + Send> + Send>;

/// One line read: its number (from 1) and what it held, or the read error that ended the
/// stream.
type Read = (u64, std::io::Result<Line>);

/// Lines read ahead of the loop at most: with the line cap, what input can hold in memory.
const READ_AHEAD: usize = 2;

/// Starts the reader thread; the channel closes at end of input. Lines are bounded
/// ([`lines::next_line`]) and so is the hand-over, so a flood of input waits on stdin.
fn spawn_reader(source: LineSource) -> std::io::Result<mpsc::Receiver<Read>> {
    let (mut tx, rx) = mpsc::channel(READ_AHEAD);
    std::thread::Builder::new()
        .name("keel-headless-input".to_owned())
        .spawn(move || {
            let mut reader = source();
            let mut n = 0u64;
            loop {
                let read = lines::next_line(&mut *reader);
                n += 1;
                let (item, last) = match read {
                    Ok(None) => return,
                    Ok(Some(line)) => (Ok(line), false),
                    Err(e) => (Err(e), true),
                };
                if futures::executor::block_on(tx.send((n, item))).is_err() || last {
                    return;
                }
            }
        })?;
    Ok(rx)
}

type IdleWait<'a> = Pin<Box<dyn Future<Output = Result<RunReport>> + Send + 'a>>;

impl Run<'_> {
    /// Runs the conversation: `(the last interval's report, a stop request, whether that
    /// report was already printed)`.
    pub(super) async fn converse(
        &mut self,
        id: &str,
        prompt: Option<String>,
        source: LineSource,
    ) -> (RunReport, Option<DriverInterrupt>, bool) {
        let agent = self.services.agent;
        let mut lines = match spawn_reader(source) {
            Ok(rx) => Some(rx),
            Err(e) => {
                self.feed.err(format::error_line(
                    keel_plugin_api::codes::DriverCode::Io.as_str(),
                    &format!("cannot read stdin: {e}"),
                ));
                None
            }
        };
        let mut idle: Option<IdleWait<'_>> = None;
        // A closed stop source (no kernel behind it) is never polled again.
        let mut stops_open = true;
        let mut last: Option<(RunReport, bool)> = None;
        if let Some(p) = prompt
            && self.send(id, p, InboxTarget::Followup, None).await
        {
            idle = Some(Box::pin(agent.wait_idle(AgentSession::new(id))));
        }
        loop {
            if lines.is_none() && idle.is_none() {
                break;
            }
            let next_line = async {
                match lines.as_mut() {
                    Some(rx) => rx.next().await,
                    None => futures::future::pending().await,
                }
            };
            let idle_now = async {
                match idle.as_mut() {
                    Some(wait) => wait.await,
                    None => futures::future::pending().await,
                }
            };
            let interrupts = &mut *self.interrupts;
            let stop_next = async {
                if stops_open {
                    interrupts.next().await
                } else {
                    futures::future::pending().await
                }
            };
            futures::select_biased! {
                stop = stop_next.fuse() => {
                    let Some(stop) = stop else {
                        stops_open = false;
                        continue;
                    };
                    if let Err(e) = agent.abort(AgentSession::new(id)).await {
                        tracing::warn!(session = id, "abort failed: {e}");
                    }
                    let report = to_report(id, agent.wait_idle(AgentSession::new(id)).await);
                    return (report, Some(stop), false);
                }
                answer = idle_now.fuse() => {
                    idle = None;
                    let report = to_report(id, answer);
                    // Each answer as it comes; the last one is the run's result.
                    let printed = self.options.format == OutputFormat::StreamJson;
                    if printed {
                        // The interval's events first: they print once durable.
                        if let Some(sessions) = self.services.sessions
                            && let Err(e) = sessions.flush(SessionRef::new(id)).await
                        {
                            tracing::warn!(session = id, "flush before a result failed: {e}");
                        }
                        print_result(self.feed, self.options.format, &report, self.started);
                    }
                    last = Some((report, printed));
                }
                read = next_line.fuse() => match read {
                    None => lines = None,
                    Some((n, Err(e))) => {
                        self.feed.err(format::error_line(
                            keel_plugin_api::codes::DriverCode::Io.as_str(),
                            &format!("stdin line {n}: {e}; no more input is read"),
                        ));
                        lines = None;
                    }
                    Some((n, Ok(Line::Text(text)))) => {
                        if self.line(id, n, &text).await && idle.is_none() {
                            idle = Some(Box::pin(agent.wait_idle(AgentSession::new(id))));
                        }
                    }
                    Some((n, Ok(refused))) => {
                        let why = refused.refusal().unwrap_or_default();
                        self.feed
                            .err(format::usage_line(&format!("stdin line {n} skipped: {why}")));
                    }
                },
            }
        }
        match last {
            Some((report, printed)) => (report, None, printed),
            // Nothing ever ran (stdin closed without a message).
            None => (
                format::failed_report(
                    id,
                    keel_plugin_api::codes::DriverCode::NoInput.as_str(),
                    "stdin closed before any message was sent; nothing ran",
                ),
                None,
                false,
            ),
        }
    }

    /// Acts on one stdin line; `true` when the agent now has work (someone must wait for it).
    async fn line(&mut self, id: &str, n: u64, text: &str) -> bool {
        match input::parse_line(text) {
            Ok(None) => false,
            Ok(Some(InputLine::User {
                content,
                target,
                level,
            })) => {
                let target = target.unwrap_or(InboxTarget::Steer);
                self.send(id, content, target, level).await && target != InboxTarget::Inject
            }
            Ok(Some(InputLine::Interrupt { request_id })) => {
                if let Err(e) = self.services.agent.abort(AgentSession::new(id)).await {
                    self.feed.err(format::error_line(&e.code, &e.message));
                }
                self.feed.out(input::control_response(&request_id));
                false
            }
            Err(why) => {
                self.feed.err(format::usage_line(&format!(
                    "stdin line {n} skipped: {why}"
                )));
                false
            }
        }
    }

    /// `send`; `false` (and an error line) when the agent refused it.
    async fn send(
        &self,
        id: &str,
        content: String,
        target: InboxTarget,
        level: Option<keel_plugin_api::services::agent::InterruptLevel>,
    ) -> bool {
        let send = SendMessage {
            session_id: id.to_owned(),
            content,
            target,
            level,
        };
        match self.services.agent.send(send).await {
            Ok(_) => true,
            Err(e) => {
                self.feed.err(format::error_line(&e.code, &e.message));
                false
            }
        }
    }
}
