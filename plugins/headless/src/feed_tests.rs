//! Tests of the output thread: order, de-duplication, the durability gate, stdout/stderr.

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

/// What a [`Captured`] sink holds: `('o', line)` for stdout, `('e', line)` for stderr.
type Lines = Arc<std::sync::Mutex<Vec<(char, String)>>>;

/// The captured lines as `"o INIT"`, `"o event 3"`, `"e ERR"`.
fn shown(lines: &Lines) -> Vec<String> {
    lines
        .lock()
        .unwrap()
        .iter()
        .map(|(s, l)| {
            let l = serde_json::from_str::<serde_json::Value>(l)
                .map(|v| format!("event {}", v["event"]["seq"]))
                .unwrap_or_else(|_| l.clone());
            format!("{s} {l}")
        })
        .collect()
}

fn stream_feed(hub: &Arc<Hub>) -> (Feed, Lines) {
    let sink = Captured::default();
    let lines = Arc::clone(&sink.0);
    let options = FeedOptions {
        stream_json: true,
        progress: false,
        partial: false,
    };
    (Feed::start(Box::new(sink), options, hub).unwrap(), lines)
}

#[test]
fn surf01_feed_prints_init_then_the_sessions_events_in_order_then_the_end() {
    let hub = Arc::new(Hub::default());
    let (feed, lines) = stream_feed(&hub);
    hub.notice(|| notice("s", 1));
    hub.notice(|| notice("other", 0));
    hub.notice(|| notice("s", 0));
    hub.durable(|| "other".to_owned(), 0);
    hub.durable(|| "s".to_owned(), 1);
    feed.start_session("s", Some(0), Some("INIT".to_owned()));
    hub.notice(|| notice("s", 3));
    hub.notice(|| notice("s", 2));
    hub.notice(|| notice("s", 2));
    hub.durable(|| "s".to_owned(), 3);
    feed.out("RESULT".to_owned());
    feed.err("ERR".to_owned());
    futures::executor::block_on(feed.finish());
    hub.notice(|| notice("s", 4)); // detached: ignored
    assert_eq!(
        shown(&lines),
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
            partial: false,
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
            partial: false,
        },
        &hub,
    )
    .unwrap();
    feed.start_session("s", Some(0), None);
    hub.notice(|| notice("s", 0));
    hub.durable(|| "s".to_owned(), 0);
    futures::executor::block_on(feed.finish());
    assert_eq!(
        *lines.lock().unwrap(),
        vec![('e', "› turn started".to_owned())]
    );
}

// Issue 10 item 6 (SES-04): an event is printed only once storage covers its seq, whichever of
// the two feeds comes first; what never became durable is never printed, not even at the end.
#[test]
fn ses04_an_event_is_printed_only_once_durable() {
    let hub = Arc::new(Hub::default());
    let (feed, lines) = stream_feed(&hub);
    feed.start_session("s", Some(0), Some("INIT".to_owned()));
    hub.notice(|| notice("s", 0));
    hub.notice(|| notice("s", 1));
    hub.notice(|| notice("s", 2));
    feed.out("MARK held".to_owned());
    hub.durable(|| "s".to_owned(), 0);
    feed.out("MARK 0 durable".to_owned());
    hub.durable(|| "s".to_owned(), 4); // ahead of its notices: 1, 2 and the next two pass
    hub.durable(|| "s".to_owned(), 2); // stale: changes nothing
    hub.notice(|| notice("s", 4));
    hub.notice(|| notice("s", 3));
    hub.notice(|| notice("s", 5)); // never durable
    hub.durable(|| "other".to_owned(), 9);
    feed.out("RESULT".to_owned());
    futures::executor::block_on(feed.finish());
    assert_eq!(
        shown(&lines),
        vec![
            "o INIT",
            "o MARK held",
            "o event 0",
            "o MARK 0 durable",
            "o event 1",
            "o event 2",
            "o event 3",
            "o event 4",
            "o RESULT",
        ]
    );
}

// A run finished from outside replays what it read back from storage: that counts as durable.
#[test]
fn replayed_notices_count_as_durable() {
    let hub = Arc::new(Hub::default());
    let (feed, lines) = stream_feed(&hub);
    feed.start_session("s", None, None);
    hub.notice(|| notice("s", 7)); // appended, never reported durable
    feed.replay([notice("s", 7), notice("s", 8)]);
    futures::executor::block_on(feed.finish());
    assert_eq!(shown(&lines), vec!["o event 7", "o event 8"]);
}

fn lineage(parent: &str, call: &str) -> Lineage {
    Lineage {
        parent_session: parent.to_owned(),
        parent_call_id: call.to_owned(),
    }
}

/// The captured stdout lines as `"<session or root>/<parent call or ->/<seq>"`.
fn tree(lines: &Lines) -> Vec<String> {
    lines
        .lock()
        .unwrap()
        .iter()
        .filter(|(s, _)| *s == 'o')
        .map(|(_, l)| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            format!(
                "{}/{}/{}",
                v["session_id"].as_str().unwrap_or("root"),
                v["parent_call_id"].as_str().unwrap_or("-"),
                v["event"]["seq"]
            )
        })
        .collect()
}

// Issue 16 item 1: a child's events (and a grandchild's) are printed with the child's session
// id and the parent's call, each through its own durability gate; events held before the child
// was named are not lost; a session outside the run's tree is never printed.
#[test]
fn issue16_children_of_the_run_are_followed_with_their_lineage() {
    let hub = Arc::new(Hub::default());
    let (feed, lines) = stream_feed(&hub);
    feed.start_session("root", Some(0), None);
    hub.notice(|| notice("root", 0));
    hub.durable(|| "root".to_owned(), 0);
    // The child's first event comes before `subagent/started` names it.
    hub.notice(|| notice("kid", 0));
    hub.follow(|| ("kid".to_owned(), lineage("root", "call_1")));
    hub.notice(|| notice("kid", 1));
    hub.durable(|| "kid".to_owned(), 0);
    // A grandchild under the child, and a stranger whose "parent" is not in the tree.
    hub.follow(|| ("grandkid".to_owned(), lineage("kid", "call_9")));
    hub.follow(|| ("stranger".to_owned(), lineage("elsewhere", "call_2")));
    hub.notice(|| notice("grandkid", 0));
    hub.notice(|| notice("stranger", 0));
    hub.durable(|| "grandkid".to_owned(), 0);
    hub.durable(|| "stranger".to_owned(), 0);
    // Not durable: never printed.
    hub.notice(|| notice("kid", 2));
    hub.durable(|| "kid".to_owned(), 1);
    futures::executor::block_on(feed.finish());
    assert_eq!(
        tree(&lines),
        vec![
            "root/-/0",
            "kid/call_1/0",
            "grandkid/call_9/0",
            "kid/call_1/1",
        ]
    );
    let first_child_line = lines.lock().unwrap()[1].1.clone();
    let v: serde_json::Value = serde_json::from_str(&first_child_line).unwrap();
    assert_eq!(v["parent_session"], "root");
    assert_eq!(v["type"], "event");
}
