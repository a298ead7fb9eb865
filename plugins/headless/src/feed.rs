//! The run's output thread: every stdout and stderr line of a headless run goes through one
//! std thread, so stream-json lines stay in order, a slow reader of stdout never blocks the
//! kernel's workers, and each line is flushed as it is written (ARCHITECTURE §11).
//!
//! Session events arrive from the `session/event` listener through a [`Hub`]; the run
//! attaches the hub before it creates its session, because the session id is only known
//! once `create` answers. Until [`Feed::start_session`] names it, notices are buffered; then
//! only that session's events pass, re-ordered by seq ([`Order`], in `feed_gate.rs`) and never
//! duplicated. With `--include-partial-messages` the model's pieces (`agent/delta`) pass too,
//! printed at once as Claude Code's `stream_event` lines ([`crate::partial`]).
//!
//! `session/event` comes at append time, before the event is stored (write-behind, SES-04).
//! Printing it then would let a crash lose an event a consumer already saw, and after
//! recovery its seq would hold another event. So each event waits in a [`Gate`] until the
//! `session/durable` feed (also through the hub) says storage covers its seq: only durable
//! events are printed, and at the end of the run — after the session was closed, which
//! flushes — everything durable is printed before the result line; what never became
//! durable is never printed.

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use futures::channel::oneshot;

use crate::partial::{Partial, Piece};
use crate::{claude, format, partial};

/// Where lines go. The real one is stdout/stderr; tests capture.
pub trait Sink: Send + 'static {
    /// Writes one stdout line (and flushes). `false` when stdout is gone (closed pipe).
    fn out(&mut self, line: &str) -> bool;
    /// Writes one stderr line.
    fn err(&mut self, line: &str);
}

/// The process's stdout and stderr, through the kernel's output redactions (SEC-03) when a
/// kernel context is at hand.
#[derive(Debug, Default)]
pub struct StdSink(pub Option<keel_plugin_api::prelude::Context>);

impl Sink for StdSink {
    fn out(&mut self, line: &str) -> bool {
        let text = format!("{line}\n");
        match self.0 {
            Some(ctx) => ctx.write_stdout(&text).is_ok(),
            None => keel_plugin_api::sdk::write_stream(1, &text).is_ok(),
        }
    }

    fn err(&mut self, line: &str) {
        let text = format!("{line}\n");
        let _ = match self.0 {
            Some(ctx) => ctx.write_stderr(&text),
            None => keel_plugin_api::sdk::write_stream(2, &text).map_err(Into::into),
        };
    }
}

/// One committed session event, as the feed receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// Session id.
    pub session_id: String,
    /// Seq.
    pub seq: u64,
    /// Event type.
    pub kind: String,
    /// The envelope JSON.
    pub record: String,
}

enum Msg {
    Notice(Notice),
    /// The session is durable up to this seq.
    Durable {
        session_id: String,
        seq: u64,
    },
    Start {
        session_id: String,
        first_seq: Option<u64>,
        init: Option<String>,
    },
    /// A child session of a followed one started (`subagent/started`).
    Follow {
        child_session: String,
        lineage: Lineage,
    },
    /// The model name Claude Code's `assistant` lines carry.
    Model(String),
    /// A piece of a streaming step (`agent/delta`), printed at once, never gated.
    Delta(Piece),
    Out(String),
    Err(String),
    Finish(oneshot::Sender<()>),
}

/// Forwards `session/event` notices to the run that is attached, if any.
#[derive(Default)]
pub struct Hub {
    tx: Mutex<Option<mpsc::Sender<Msg>>>,
    /// The attached run prints the model's pieces (`--include-partial-messages`).
    partial: std::sync::atomic::AtomicBool,
}

impl Hub {
    /// Delivers a notice (a no-op when no run listens).
    pub fn notice(&self, notice: impl FnOnce() -> Notice) {
        if let Ok(slot) = self.tx.lock()
            && let Some(tx) = slot.as_ref()
        {
            let _ = tx.send(Msg::Notice(notice()));
        }
    }

    /// A piece of a streaming step (a no-op when no run listens).
    pub fn delta(&self, piece: impl FnOnce() -> Option<Piece>) {
        if !self.partial.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        if let Ok(slot) = self.tx.lock()
            && let Some(tx) = slot.as_ref()
            && let Some(piece) = piece()
        {
            let _ = tx.send(Msg::Delta(piece));
        }
    }

    /// Storage covers `session_id` up to `seq` (a no-op when no run listens).
    pub fn durable(&self, session_id: impl FnOnce() -> String, seq: u64) {
        if let Ok(slot) = self.tx.lock()
            && let Some(tx) = slot.as_ref()
        {
            let _ = tx.send(Msg::Durable {
                session_id: session_id(),
                seq,
            });
        }
    }

    fn attach(&self, tx: mpsc::Sender<Msg>, partial: bool) {
        if let Ok(mut slot) = self.tx.lock() {
            *slot = Some(tx);
        }
        self.partial
            .store(partial, std::sync::atomic::Ordering::Relaxed);
    }

    /// A child session started under `lineage.parent_session`: when that is the run's own
    /// session or a child it follows, the child's events are printed too (issue 16).
    pub fn follow(&self, child_session: impl FnOnce() -> (String, Lineage)) {
        if let Ok(slot) = self.tx.lock()
            && let Some(tx) = slot.as_ref()
        {
            let (child_session, lineage) = child_session();
            let _ = tx.send(Msg::Follow {
                child_session,
                lineage,
            });
        }
    }

    /// Stops forwarding.
    pub fn detach(&self) {
        if let Ok(mut slot) = self.tx.lock() {
            *slot = None;
        }
        self.partial
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }
}

/// What the feed prints of the session's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedOptions {
    /// One `{"type":"event",…}` stdout line per event.
    pub stream_json: bool,
    /// Short progress lines on stderr.
    pub progress: bool,
    /// With `stream_json`: Claude Code's `stream_event` lines for the model's pieces
    /// (`--include-partial-messages`, [`crate::partial`]).
    pub partial: bool,
}

impl FeedOptions {
    /// Whether the feed needs the session's events at all.
    pub fn wants_events(self) -> bool {
        self.stream_json || self.progress
    }
}

#[path = "feed_gate.rs"]
mod gate;
pub use gate::{Gate, Order};

/// The output thread of one run.
pub struct Feed {
    tx: mpsc::Sender<Msg>,
    hub: Option<Arc<Hub>>,
}

impl Feed {
    /// Starts the thread writing to `sink`; when `options` want events, attaches `hub` to it.
    ///
    /// # Errors
    /// When the thread cannot be spawned.
    pub fn start(
        sink: Box<dyn Sink>,
        options: FeedOptions,
        hub: &Arc<Hub>,
    ) -> std::io::Result<Feed> {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("keel-headless-out".to_owned())
            .spawn(move || pump(rx, sink, options))?;
        let hub = options.wants_events().then(|| {
            hub.attach(tx.clone(), options.stream_json && options.partial);
            Arc::clone(hub)
        });
        Ok(Feed { tx, hub })
    }

    /// Names the run's session: buffered and later notices of other sessions are dropped.
    /// `first_seq` is where the session's events start when known (a new session: 0);
    /// `init` is printed on stdout before any event.
    pub fn start_session(&self, session_id: &str, first_seq: Option<u64>, init: Option<String>) {
        let _ = self.tx.send(Msg::Start {
            session_id: session_id.to_owned(),
            first_seq,
            init,
        });
    }

    /// Feeds notices read back from storage (a run finished from outside, when the listeners
    /// no longer run): they count as durable. Seqs already printed are dropped as usual.
    pub fn replay(&self, notices: impl IntoIterator<Item = Notice>) {
        let mut last: Option<(String, u64)> = None;
        for n in notices {
            last = Some((n.session_id.clone(), n.seq));
            let _ = self.tx.send(Msg::Notice(n));
        }
        if let Some((session_id, seq)) = last {
            let _ = self.tx.send(Msg::Durable { session_id, seq });
        }
    }

    /// Names the model for Claude Code's `assistant` lines (issue 23 item 13).
    pub fn set_model(&self, model: String) {
        let _ = self.tx.send(Msg::Model(model));
    }

    /// Queues a stdout line.
    pub fn out(&self, line: String) {
        let _ = self.tx.send(Msg::Out(line));
    }

    /// Queues a stderr line.
    pub fn err(&self, line: String) {
        let _ = self.tx.send(Msg::Err(line));
    }

    /// Detaches from the hub, prints what is still held back and durable, and waits until
    /// every queued line is written. Later calls return at once.
    pub async fn finish(&self) {
        if let Some(hub) = &self.hub {
            hub.detach();
        }
        let (done, wait) = oneshot::channel();
        if self.tx.send(Msg::Finish(done)).is_ok() {
            let _ = wait.await;
        }
    }
}

struct Pump {
    sink: Box<dyn Sink>,
    options: FeedOptions,
    stdout_ok: bool,
    /// The run's session: every Claude Code line names it.
    root: String,
    model: String,
    partial: Partial,
}

impl Pump {
    fn out(&mut self, line: &str) {
        if self.stdout_ok {
            self.stdout_ok = self.sink.out(line);
        }
    }

    fn piece(&mut self, piece: &Piece, child: Option<&Lineage>) {
        let origin = partial::Origin {
            session_id: root_or(&self.root, &piece.session_id),
            parent_tool_use_id: child.map(|l| l.parent_call_id.as_str()),
            model: &self.model,
        };
        for line in self.partial.piece(piece, origin) {
            self.out(&line);
        }
    }

    fn event(&mut self, n: &Notice, child: Option<&Lineage>) {
        if self.options.stream_json && self.options.partial {
            // The step's streamed message closes before its answer's lines.
            let origin = partial::Origin {
                session_id: root_or(&self.root, &n.session_id),
                parent_tool_use_id: child.map(|l| l.parent_call_id.as_str()),
                model: &self.model,
            };
            for line in self.partial.event(&n.session_id, &n.record, origin) {
                self.out(&line);
            }
        }
        if self.options.stream_json {
            let line = match child {
                None => format::event_line(&n.record),
                Some(l) => format::child_event_line(
                    &n.record,
                    &n.session_id,
                    &l.parent_session,
                    &l.parent_call_id,
                ),
            };
            self.out(&line);
            // Claude Code's counterpart, for consumers written against it (issue 23 item 13).
            let origin = claude::Origin {
                session_id: if self.root.is_empty() {
                    &n.session_id
                } else {
                    &self.root
                },
                parent_tool_use_id: child.map(|l| l.parent_call_id.as_str()),
                model: &self.model,
            };
            for line in claude::message_lines(&n.record, origin) {
                self.out(&line);
            }
        }
        // Progress lines stay the root's: a child's tool calls would read as the run's own.
        if child.is_none()
            && self.options.progress
            && let Some(line) = format::progress_line(&n.kind, &n.record)
        {
            self.sink.err(&line);
        }
    }
}

/// The run's session once it is named, else `session_id` (every Claude Code line names the run's).
fn root_or<'a>(root: &'a str, session_id: &'a str) -> &'a str {
    if root.is_empty() { session_id } else { root }
}

/// Where a followed child session hangs in the tree (issue 16).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lineage {
    /// The delegating session.
    pub parent_session: String,
    /// The parent's call that started the child.
    pub parent_call_id: String,
}

/// The sessions one run prints: its own, and every child it (transitively) delegated to.
/// Notices of a session not known yet are held (a child's first events are appended before
/// `subagent/started` names it) and dropped at the end if it never is.
#[derive(Default)]
struct Streams {
    root: Option<(String, Gate)>,
    children: HashMap<String, (Lineage, Gate)>,
    early: HashMap<String, (Vec<Notice>, Option<u64>)>,
}

impl Streams {
    fn gate(&mut self, session_id: &str) -> Option<(Option<&Lineage>, &mut Gate)> {
        if let Some((id, gate)) = &mut self.root
            && id == session_id
        {
            return Some((None, gate));
        }
        self.children
            .get_mut(session_id)
            .map(|(lineage, gate)| (Some(&*lineage), gate))
    }

    fn notice(&mut self, p: &mut Pump, n: Notice) {
        match self.gate(&n.session_id) {
            Some((lineage, gate)) => {
                let lineage = lineage.cloned();
                for n in gate.push(n) {
                    p.event(&n, lineage.as_ref());
                }
            }
            None => self
                .early
                .entry(n.session_id.clone())
                .or_default()
                .0
                .push(n),
        }
    }

    fn durable(&mut self, p: &mut Pump, session_id: String, seq: u64) {
        match self.gate(&session_id) {
            Some((lineage, gate)) => {
                let lineage = lineage.cloned();
                for n in gate.durable(seq) {
                    p.event(&n, lineage.as_ref());
                }
            }
            None => {
                let d = &mut self.early.entry(session_id).or_default().1;
                *d = Some(d.map_or(seq, |d| d.max(seq)));
            }
        }
    }

    /// A new stream: what was held for it goes through its gate.
    fn open(
        &mut self,
        p: &mut Pump,
        session_id: &str,
        lineage: Option<Lineage>,
        first: Option<u64>,
    ) {
        let mut gate = Gate::new(first);
        let mut ready = Vec::new();
        if let Some((held, durable)) = self.early.remove(session_id) {
            for n in held {
                ready.extend(gate.push(n));
            }
            if let Some(seq) = durable {
                ready.extend(gate.durable(seq));
            }
        }
        for n in &ready {
            p.event(n, lineage.as_ref());
        }
        match lineage {
            None => self.root = Some((session_id.to_owned(), gate)),
            Some(l) => {
                self.children.insert(session_id.to_owned(), (l, gate));
            }
        }
    }

    /// Whether `session_id` is printed (the root or a followed child).
    fn follows(&self, session_id: &str) -> bool {
        self.root.as_ref().is_some_and(|(id, _)| id == session_id)
            || self.children.contains_key(session_id)
    }

    fn finish(&mut self, p: &mut Pump) {
        if let Some((_, gate)) = &mut self.root {
            for n in gate.finish() {
                p.event(&n, None);
            }
        }
        let mut children: Vec<_> = self.children.iter_mut().collect();
        children.sort_by(|a, b| a.0.cmp(b.0));
        for (_, (lineage, gate)) in children {
            for n in gate.finish() {
                p.event(&n, Some(lineage));
            }
        }
    }
}

fn pump(rx: mpsc::Receiver<Msg>, sink: Box<dyn Sink>, options: FeedOptions) {
    let mut p = Pump {
        sink,
        options,
        stdout_ok: true,
        root: String::new(),
        model: String::new(),
        partial: Partial::default(),
    };
    let mut streams = Streams::default();
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Notice(n) => streams.notice(&mut p, n),
            Msg::Durable { session_id, seq } => streams.durable(&mut p, session_id, seq),
            Msg::Start {
                session_id,
                first_seq,
                init,
            } => {
                if let Some(init) = init {
                    p.out(&init);
                }
                p.root.clone_from(&session_id);
                streams.open(&mut p, &session_id, None, first_seq);
                // Only the run's own tree is ever printed: what was held for other sessions
                // goes, and children are named from now on.
                streams.early.clear();
            }
            Msg::Follow {
                child_session,
                lineage,
            } => {
                if streams.follows(&lineage.parent_session) && !streams.follows(&child_session) {
                    streams.open(&mut p, &child_session, Some(lineage), None);
                }
            }
            Msg::Model(model) => p.model = model,
            Msg::Delta(piece) if p.options.partial => {
                if let Some((lineage, _)) = streams.gate(&piece.session_id) {
                    let lineage = lineage.cloned();
                    p.piece(&piece, lineage.as_ref());
                }
            }
            Msg::Delta(_) => {}
            Msg::Out(line) => p.out(&line),
            Msg::Err(line) => p.sink.err(&line),
            Msg::Finish(done) => {
                streams.finish(&mut p);
                let _ = done.send(());
                return;
            }
        }
    }
}

#[cfg(test)]
#[path = "feed_tests.rs"]
mod tests;
