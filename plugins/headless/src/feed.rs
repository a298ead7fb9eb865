//! The run's output thread: every stdout and stderr line of a headless run goes through one
//! std thread, so stream-json lines stay in order, a slow reader of stdout never blocks the
//! kernel's workers, and each line is flushed as it is written (ARCHITECTURE §11).
//!
//! Session events arrive from the `session/event` listener through a [`Hub`]; the run
//! attaches the hub before it creates its session, because the session id is only known
//! once `create` answers. Until [`Feed::start_session`] names it, notices are buffered; then
//! only that session's events pass, re-ordered by seq ([`Order`]) and never duplicated.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use futures::channel::oneshot;

use crate::format;

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
    Start {
        session_id: String,
        first_seq: Option<u64>,
        init: Option<String>,
    },
    Out(String),
    Err(String),
    Finish(oneshot::Sender<()>),
}

/// Forwards `session/event` notices to the run that is attached, if any.
#[derive(Default)]
pub struct Hub {
    tx: Mutex<Option<mpsc::Sender<Msg>>>,
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

    fn attach(&self, tx: mpsc::Sender<Msg>) {
        if let Ok(mut slot) = self.tx.lock() {
            *slot = Some(tx);
        }
    }

    /// Stops forwarding.
    pub fn detach(&self) {
        if let Ok(mut slot) = self.tx.lock() {
            *slot = None;
        }
    }
}

/// What the feed prints of the session's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedOptions {
    /// One `{"type":"event",…}` stdout line per event.
    pub stream_json: bool,
    /// Short progress lines on stderr.
    pub progress: bool,
}

impl FeedOptions {
    /// Whether the feed needs the session's events at all.
    pub fn wants_events(self) -> bool {
        self.stream_json || self.progress
    }
}

/// Seq re-ordering and de-duplication for one session.
#[derive(Debug, Default)]
pub struct Order {
    next: Option<u64>,
    pending: BTreeMap<u64, Notice>,
}

impl Order {
    /// Starts expecting `first` (or the lowest seq seen, when `None`).
    pub fn new(first: Option<u64>) -> Order {
        Order {
            next: first,
            pending: BTreeMap::new(),
        }
    }

    /// Takes a notice; returns the ones now printable, in seq order.
    pub fn push(&mut self, n: Notice) -> Vec<Notice> {
        if self.next.is_some_and(|next| n.seq < next) {
            return Vec::new(); // already printed
        }
        self.pending.entry(n.seq).or_insert(n);
        let next = match self.next {
            Some(next) => next,
            None => {
                let lowest = self.pending.keys().next().copied().unwrap_or(0);
                self.next = Some(lowest);
                lowest
            }
        };
        let mut ready = Vec::new();
        let mut at = next;
        while let Some(n) = self.pending.remove(&at) {
            ready.push(n);
            at += 1;
        }
        self.next = Some(at);
        ready
    }

    /// Everything still held back (after a gap), in seq order.
    pub fn drain(&mut self) -> Vec<Notice> {
        let rest: Vec<Notice> = std::mem::take(&mut self.pending).into_values().collect();
        if let Some(last) = rest.last() {
            self.next = Some(last.seq + 1);
        }
        rest
    }
}

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
            hub.attach(tx.clone());
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

    /// Feeds notices read back from the log (a run finished from outside, when the listener
    /// no longer runs); seqs already printed are dropped as usual.
    pub fn replay(&self, notices: impl IntoIterator<Item = Notice>) {
        for n in notices {
            let _ = self.tx.send(Msg::Notice(n));
        }
    }

    /// Queues a stdout line.
    pub fn out(&self, line: String) {
        let _ = self.tx.send(Msg::Out(line));
    }

    /// Queues a stderr line.
    pub fn err(&self, line: String) {
        let _ = self.tx.send(Msg::Err(line));
    }

    /// Detaches from the hub, prints what is still held back, and waits until every queued
    /// line is written. Later calls return at once.
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
}

impl Pump {
    fn out(&mut self, line: &str) {
        if self.stdout_ok {
            self.stdout_ok = self.sink.out(line);
        }
    }

    fn event(&mut self, n: &Notice) {
        if self.options.stream_json {
            self.out(&format::event_line(&n.record));
        }
        if self.options.progress
            && let Some(line) = format::progress_line(&n.kind, &n.record)
        {
            self.sink.err(&line);
        }
    }
}

fn pump(rx: mpsc::Receiver<Msg>, sink: Box<dyn Sink>, options: FeedOptions) {
    let mut p = Pump {
        sink,
        options,
        stdout_ok: true,
    };
    let mut session: Option<(String, Order)> = None;
    let mut early: Vec<Notice> = Vec::new();
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Notice(n) => match &mut session {
                Some((id, order)) if *id == n.session_id => {
                    for n in order.push(n) {
                        p.event(&n);
                    }
                }
                Some(_) => {}
                None => early.push(n),
            },
            Msg::Start {
                session_id,
                first_seq,
                init,
            } => {
                if let Some(init) = init {
                    p.out(&init);
                }
                let mut order = Order::new(first_seq);
                for n in std::mem::take(&mut early) {
                    if n.session_id == session_id {
                        for n in order.push(n) {
                            p.event(&n);
                        }
                    }
                }
                session = Some((session_id, order));
            }
            Msg::Out(line) => p.out(&line),
            Msg::Err(line) => p.sink.err(&line),
            Msg::Finish(done) => {
                if let Some((_, order)) = &mut session {
                    for n in order.drain() {
                        p.event(&n);
                    }
                }
                let _ = done.send(());
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::testing::Captured;

    fn notice(session: &str, seq: u64) -> Notice {
        Notice {
            session_id: session.to_owned(),
            seq,
            kind: "turn/start".to_owned(),
            record: format!(r#"{{"seq":{seq},"time":0,"type":"turn/start","data":{{}}}}"#),
        }
    }

    fn seqs(v: &[Notice]) -> Vec<u64> {
        v.iter().map(|n| n.seq).collect()
    }

    #[test]
    fn order_releases_contiguous_runs_and_drops_duplicates() {
        let mut o = Order::new(Some(0));
        assert_eq!(seqs(&o.push(notice("s", 1))), Vec::<u64>::new());
        assert_eq!(seqs(&o.push(notice("s", 0))), vec![0, 1]);
        assert_eq!(
            seqs(&o.push(notice("s", 1))),
            Vec::<u64>::new(),
            "duplicate"
        );
        assert_eq!(seqs(&o.push(notice("s", 3))), Vec::<u64>::new());
        assert_eq!(
            seqs(&o.push(notice("s", 3))),
            Vec::<u64>::new(),
            "duplicate"
        );
        assert_eq!(seqs(&o.drain()), vec![3], "a gap is released at the end");
        assert_eq!(seqs(&o.push(notice("s", 2))), Vec::<u64>::new(), "late");
        assert_eq!(seqs(&o.push(notice("s", 4))), vec![4]);
    }

    #[test]
    fn order_without_a_known_start_begins_at_the_lowest_seen() {
        let mut o = Order::new(None);
        assert_eq!(seqs(&o.push(notice("s", 7))), vec![7]);
        assert_eq!(seqs(&o.push(notice("s", 9))), Vec::<u64>::new());
        assert_eq!(seqs(&o.push(notice("s", 8))), vec![8, 9]);
    }

    #[test]
    fn surf01_feed_prints_init_then_the_sessions_events_in_order_then_the_end() {
        let hub = Arc::new(Hub::default());
        let sink = Captured::default();
        let lines = Arc::clone(&sink.0);
        let feed = Feed::start(
            Box::new(sink),
            FeedOptions {
                stream_json: true,
                progress: false,
            },
            &hub,
        )
        .unwrap();
        hub.notice(|| notice("s", 1));
        hub.notice(|| notice("other", 0));
        hub.notice(|| notice("s", 0));
        feed.start_session("s", Some(0), Some("INIT".to_owned()));
        hub.notice(|| notice("s", 3));
        hub.notice(|| notice("s", 2));
        hub.notice(|| notice("s", 2));
        feed.out("RESULT".to_owned());
        feed.err("ERR".to_owned());
        futures::executor::block_on(feed.finish());
        hub.notice(|| notice("s", 4)); // detached: ignored
        let got: Vec<String> = lines
            .lock()
            .unwrap()
            .iter()
            .map(|(s, l)| {
                let l = serde_json::from_str::<serde_json::Value>(l)
                    .map(|v| format!("event {}", v["event"]["seq"]))
                    .unwrap_or_else(|_| l.clone());
                format!("{s} {l}")
            })
            .collect();
        assert_eq!(
            got,
            vec![
                "o INIT",
                "o event 0",
                "o event 1",
                "o event 2",
                "o event 3",
                "o RESULT",
                "e ERR"
            ]
        );
    }

    #[test]
    fn text_feed_does_not_listen() {
        let hub = Arc::new(Hub::default());
        let sink = Captured::default();
        let lines = Arc::clone(&sink.0);
        let feed = Feed::start(
            Box::new(sink),
            FeedOptions {
                stream_json: false,
                progress: false,
            },
            &hub,
        )
        .unwrap();
        hub.notice(|| panic!("no notice is built when nobody listens"));
        feed.start_session("s", Some(0), None);
        feed.out("text".to_owned());
        futures::executor::block_on(feed.finish());
        assert_eq!(*lines.lock().unwrap(), vec![('o', "text".to_owned())]);
    }

    #[test]
    fn progress_goes_to_stderr_only() {
        let hub = Arc::new(Hub::default());
        let sink = Captured::default();
        let lines = Arc::clone(&sink.0);
        let feed = Feed::start(
            Box::new(sink),
            FeedOptions {
                stream_json: false,
                progress: true,
            },
            &hub,
        )
        .unwrap();
        feed.start_session("s", Some(0), None);
        hub.notice(|| notice("s", 0));
        futures::executor::block_on(feed.finish());
        assert_eq!(
            *lines.lock().unwrap(),
            vec![('e', "› turn started".to_owned())]
        );
    }
}
