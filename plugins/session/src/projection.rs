//! The surface projection (SES-03, SES-12): model history derived from the log, incrementally.
//!
//! `user/message` → `{"role":"user","content"}`; `assistant/message` →
//! `{"role":"assistant","content","reasoning_blocks"?,"tool_calls"?:[{id,name,arguments}]}`
//! (`reasoning_blocks`: the signed blocks a provider wants back verbatim, issue 15 item 2; an
//! empty message — no content and no calls — projects to nothing); `tool/result` →
//! `{"role":"tool","tool_call_id","content","is_error"?}`. Every other type is not surface and
//! never projected (`assistant/chunk` included).
//!
//! **Replacement.** A surface event with `{op:"replace",start:S,end:E}` shadows every *visible*
//! surface node whose seq is in `S..=E` and takes the position of the first of them; old events
//! stay in the log untouched (SES-03). It must list each node it shadows in
//! `source_event_seqs`, shadow at least one visible node, and shadow a contiguous run of the
//! projection. To keep the tool-call contract a property of every projection, a replacement
//! never splits a call group (an assistant message with calls plus its results): a run covers
//! whole groups, and only whole *complete* ones; a `tool/result` replacement substitutes
//! exactly one result of the same `call_id`; a replacement assistant message carries no calls.
//!
//! **Incremental structure (why not "rebuild from the shadowed point").** Each visible node has
//! an *anchor*: its own seq for an append, the first shadowed node's anchor for a replacement.
//! Anchors are unique among visible nodes and sort in display order. The visible sequence is
//! kept in two parts, every anchor of the first below every anchor of the second:
//! - `head`, an ordered map `anchor → node` plus `anchor_of`, a map `seq → anchor` to find what
//!   a range shadows — the part replacements have touched or reached;
//! - `tail`, a plain vector of appended nodes (anchor = seq, strictly increasing) since then.
//!
//! An append is one `Vec::push`: O(1) amortised, contiguous, no tree walk — the hot path of
//! every turn, and its cost does not depend on the length of the history (a tree insert did:
//! O(log n) cache-missing node visits). A replacement first moves the tail's nodes with
//! `seq ≤ end` into the maps (binary search, then one ordered insert each; a node moves at most
//! once, so this is amortised O(log n) per appended node), then does `k` removals and one
//! insert, O((k+1)·log n) however old the shadowed range is; nothing is ever rebuilt.
//! Messages are rendered on first read, straight from the event's data into JSON text, and kept
//! as a [`Frozen`] document: every later read of the history (each model request) clones
//! reference counts only — no message is encoded twice, whatever the length of the session
//! (issue 12 item 2). Reading the history for a request walks the visible nodes only (map, then
//! vector) — proportional to the context, not to the log (shadowed history costs nothing after
//! its replacement).
//!
//! **Tool-call contract** (ARCHITECTURE §7): see [`crate::contract`].

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use keel_plugin_api::sdk::Frozen;
use keel_plugin_api::services::session::{EventRecord, SurfaceNode, SurfaceOp, SurfaceRole};
use serde::Serialize;
use serde_json::Value;

use crate::error::{Result, SessionError};
use crate::invariants::str_field;
use crate::validate::is_surface;

pub use crate::contract::{Tail, check_contract};

/// What a visible node is, for the group rules.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NodeKind {
    User,
    Assistant { calls: Vec<String> },
    Tool { call_id: String },
}

#[derive(Debug, Clone)]
struct Node {
    seq: u64,
    kind: NodeKind,
    /// The log's own event (shared, immutable).
    event: Arc<EventRecord>,
    /// Rendered and frozen on first read, then shared.
    message: OnceLock<Frozen>,
}

impl Node {
    fn message(&self) -> Result<&Frozen> {
        if let Some(frozen) = self.message.get() {
            return Ok(frozen);
        }
        let frozen = Frozen::freeze(&render(&self.event)).map_err(|e| {
            SessionError::invalid(format!("seq {}: cannot render: {}", self.seq, e.message))
        })?;
        Ok(self.message.get_or_init(|| frozen))
    }
}

/// What to reverse when a staged batch fails after some events were applied.
#[derive(Debug, Default)]
pub struct Undo {
    cursor: u64,
    removed: Vec<(u64, Node)>,
    inserted: Option<(u64, u64)>,
}

/// The cached, incrementally maintained projection of one log.
#[derive(Debug, Clone, Default)]
pub struct Projection {
    /// Visible nodes replacements have reached, by anchor.
    head: BTreeMap<u64, Node>,
    /// `seq → anchor` for the nodes of `head`.
    anchor_of: BTreeMap<u64, u64>,
    /// Appended nodes after every anchor of `head`, in order (anchor = seq).
    tail: Vec<Node>,
    cursor: u64,
}

fn is_empty_content(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(_) => false,
    }
}

/// Checks what the projection needs from one surface event and classifies it; `Ok(None)` for
/// an empty assistant message (projects to nothing).
fn classify(ev: &EventRecord) -> Result<Option<NodeKind>> {
    let d = &ev.data;
    let bad = |msg: &str| Err(SessionError::rule(ev.seq, &ev.kind, "SES-02.data", msg));
    match ev.kind.as_str() {
        "user/message" => match d.get("content") {
            Some(_) => Ok(Some(NodeKind::User)),
            None => bad("user/message needs data.content"),
        },
        "assistant/message" => {
            let Some(message) = d.get("message").filter(|m| m.is_object()) else {
                return bad("assistant/message needs data.message (object)");
            };
            let calls: &[Value] = message
                .get("tool_calls")
                .and_then(Value::as_array)
                .map_or(&[], Vec::as_slice);
            if is_empty_content(message.get("content")) && calls.is_empty() {
                return Ok(None);
            }
            let mut ids = Vec::with_capacity(calls.len());
            for c in calls {
                let Some(id) = c.get("id").and_then(Value::as_str) else {
                    return bad("every tool call needs a string id");
                };
                ids.push(id.to_owned());
            }
            Ok(Some(NodeKind::Assistant { calls: ids }))
        }
        "tool/result" => match str_field(d, "call_id") {
            Some(call_id) => Ok(Some(NodeKind::Tool {
                call_id: call_id.to_owned(),
            })),
            None => bad("tool/result needs data.call_id"),
        },
        _ => Ok(None),
    }
}

const NULL: &Value = &Value::Null;

/// A model message borrowing from its event's data: serialised straight into the frozen text,
/// no intermediate copy of the content. The tag comes first, so the fields keep their order:
/// `{"role","content","tool_calls"?}`, `{"role","tool_call_id","content","is_error"?}`.
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Message<'a> {
    User {
        content: &'a Value,
    },
    Assistant {
        content: &'a Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_blocks: Option<&'a Value>,
        #[serde(skip_serializing_if = "<[_]>::is_empty")]
        tool_calls: Vec<Call<'a>>,
    },
    Tool {
        tool_call_id: &'a Value,
        content: &'a Value,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

#[derive(Serialize)]
struct Call<'a> {
    id: &'a Value,
    name: &'a Value,
    arguments: &'a Value,
}

fn field<'a>(v: Option<&'a Value>, key: &str) -> &'a Value {
    v.and_then(|v| v.get(key)).unwrap_or(NULL)
}

/// Renders a classified surface event as a model message.
fn render(ev: &EventRecord) -> Message<'_> {
    let d = Some(&ev.data);
    match ev.kind.as_str() {
        "user/message" => Message::User {
            content: field(d, "content"),
        },
        "assistant/message" => {
            let message = ev.data.get("message");
            let calls: &[Value] = message
                .and_then(|m| m.get("tool_calls"))
                .and_then(Value::as_array)
                .map_or(&[], Vec::as_slice);
            Message::Assistant {
                content: field(message, "content"),
                reasoning_blocks: message
                    .and_then(|m| m.get("reasoning_blocks"))
                    .filter(|b| b.as_array().is_some_and(|a| !a.is_empty())),
                tool_calls: calls
                    .iter()
                    .map(|c| Call {
                        id: field(Some(c), "id"),
                        name: field(Some(c), "name"),
                        arguments: field(Some(c), "arguments"),
                    })
                    .collect(),
            }
        }
        _ => Message::Tool {
            tool_call_id: field(d, "call_id"),
            content: field(d, "content"),
            is_error: ev.data.get("is_error").and_then(Value::as_bool) == Some(true),
        },
    }
}

impl Projection {
    /// The projection of an empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// The seq of the next event this projection expects (events applied so far).
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// Number of visible messages.
    pub fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// Whether no message is visible.
    pub fn is_empty(&self) -> bool {
        self.head.is_empty() && self.tail.is_empty()
    }

    /// The visible nodes in display order.
    fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.head.values().chain(self.tail.iter())
    }

    /// The visible messages in order, frozen (each rendered and encoded on its first read).
    pub fn iter(&self) -> impl Iterator<Item = Result<&Frozen>> {
        self.nodes().map(Node::message)
    }

    /// The visible messages, parsed, with the seq of the event each came from (tests).
    pub fn iter_with_seqs(&self) -> impl Iterator<Item = (u64, Value)> {
        self.nodes().map(|n| {
            let value = n.message().and_then(parse).unwrap_or(Value::Null);
            (n.seq, value)
        })
    }

    /// The model history, shared: reference counts only, no message encoded again.
    ///
    /// # Errors
    /// `SESSION_INVALID` when a message cannot be rendered (never for a validated log).
    pub fn shared(&self) -> Result<Vec<Frozen>> {
        self.iter().map(|m| m.cloned()).collect()
    }

    /// The visible history with what each message is (issue 14: a context manager plans a
    /// compaction from it). Same cost as [`Projection::shared`].
    ///
    /// # Errors
    /// As [`Projection::shared`].
    pub fn surface(&self) -> Result<Vec<SurfaceNode>> {
        self.nodes()
            .map(|n| {
                Ok(SurfaceNode {
                    seq: n.seq,
                    replacement: matches!(n.event.surface_op, Some(SurfaceOp::Replace { .. })),
                    role: match &n.kind {
                        NodeKind::User => SurfaceRole::User,
                        NodeKind::Assistant { calls } => SurfaceRole::Assistant {
                            calls: calls.clone(),
                        },
                        NodeKind::Tool { call_id } => SurfaceRole::Tool {
                            call_id: call_id.clone(),
                        },
                    },
                    message: n.message()?.clone(),
                })
            })
            .collect()
    }

    /// The model history as owned, parsed copies (tests and cold readers; mutating them cannot
    /// change the log, SES-01).
    pub fn messages(&self) -> Vec<Value> {
        self.iter()
            .map(|m| m.and_then(parse).unwrap_or(Value::Null))
            .collect()
    }

    /// Applies the next event (seq must equal [`Projection::cursor`]). On error nothing changed.
    ///
    /// # Errors
    /// `SESSION_INVALID` for a replacement that breaks the rules of the module doc or a surface
    /// event whose data lacks what the projection needs; `SESSION_SEQ` for an out-of-order seq.
    pub fn apply(&mut self, ev: &Arc<EventRecord>) -> Result<Undo> {
        if ev.seq != self.cursor {
            return Err(SessionError::new(
                keel_plugin_api::services::session::StoreError::Seq,
                format!("projection expected seq {}, got {}", self.cursor, ev.seq),
            ));
        }
        let mut undo = Undo {
            cursor: self.cursor,
            ..Undo::default()
        };
        if is_surface(&ev.kind) {
            let kind = classify(ev)?;
            match &ev.surface_op {
                Some(SurfaceOp::Replace { start, end, .. }) => {
                    self.replace(ev, *start, *end, kind, &mut undo)?;
                }
                _ => {
                    if let Some(kind) = kind {
                        self.insert(ev.seq, kind, ev, &mut undo);
                    }
                }
            }
        }
        self.cursor = ev.seq + 1;
        Ok(undo)
    }

    /// Reverses one [`Projection::apply`] (undo the newest first).
    pub fn undo(&mut self, undo: Undo) {
        if let Some((anchor, seq)) = undo.inserted {
            if self.tail.last().is_some_and(|n| n.seq == seq) {
                self.tail.pop();
            } else {
                self.head.remove(&anchor);
                self.anchor_of.remove(&seq);
            }
        }
        for (anchor, node) in undo.removed {
            self.place(anchor, node);
        }
        self.cursor = undo.cursor;
    }

    fn insert(&mut self, anchor: u64, kind: NodeKind, ev: &Arc<EventRecord>, undo: &mut Undo) {
        let seq = ev.seq;
        let node = Node {
            seq,
            kind,
            event: ev.clone(),
            message: OnceLock::new(),
        };
        self.place(anchor, node);
        undo.inserted = Some((anchor, seq));
    }

    /// Puts a node at `anchor`: pushed on the tail when it is an append after every anchor,
    /// otherwise into the maps (after moving the tail's nodes up to `anchor` there).
    fn place(&mut self, anchor: u64, node: Node) {
        let after_all = self.tail.last().map_or_else(
            || self.head.last_key_value().is_none_or(|(a, _)| *a < anchor),
            |n| n.seq < anchor,
        );
        if after_all && node.seq == anchor {
            self.tail.push(node);
            return;
        }
        self.settle_through(anchor);
        self.anchor_of.insert(node.seq, anchor);
        self.head.insert(anchor, node);
    }

    /// Moves the tail's nodes with `seq ≤ through` into the maps (a node moves at most once).
    fn settle_through(&mut self, through: u64) {
        let n = self.tail.partition_point(|node| node.seq <= through);
        for node in self.tail.drain(..n) {
            self.anchor_of.insert(node.seq, node.seq);
            self.head.insert(node.seq, node);
        }
    }

    fn replace(
        &mut self,
        ev: &Arc<EventRecord>,
        start: u64,
        end: u64,
        kind: Option<NodeKind>,
        undo: &mut Undo,
    ) -> Result<()> {
        let fail = |rule: &str, msg: String| Err(SessionError::rule(ev.seq, &ev.kind, rule, msg));
        // Representation only (the visible sequence is unchanged): everything the range can
        // shadow is now in the maps, and the tail holds only nodes after it.
        self.settle_through(end);
        let mut anchors: Vec<(u64, u64)> = self
            .anchor_of
            .range(start..=end)
            .map(|(s, a)| (*a, *s))
            .collect();
        anchors.sort_unstable();
        let (Some(&(first, _)), Some(&(last, _))) = (anchors.first(), anchors.last()) else {
            return fail(
                "SES-03.replace-shadows",
                format!("range {start}..={end} shadows no visible surface event"),
            );
        };
        let sources = ev.source_event_seqs.as_deref().unwrap_or_default();
        if let Some((_, s)) = anchors.iter().find(|(_, s)| !sources.contains(s)) {
            return fail(
                "SES-03.replace-sources",
                format!("shadows seq {s} but does not list it in source_event_seqs"),
            );
        }
        if self.head.range(first..=last).count() != anchors.len() {
            return fail(
                "SES-03.replace-contiguous",
                format!("range {start}..={end} does not shadow a contiguous run of the history"),
            );
        }
        let run: Vec<&Node> = self.head.range(first..=last).map(|(_, n)| n).collect();
        match kind.as_ref() {
            Some(NodeKind::Tool { call_id }) => {
                let ok = matches!(run.as_slice(),
                    [Node { kind: NodeKind::Tool { call_id: old }, .. }] if old == call_id);
                if !ok {
                    return fail(
                        "K.replace-group",
                        format!(
                            "a tool/result replacement must shadow exactly the result of '{call_id}'"
                        ),
                    );
                }
            }
            Some(NodeKind::Assistant { calls }) if !calls.is_empty() => {
                return fail(
                    "K.replace-group",
                    "a replacement assistant message cannot carry tool calls".into(),
                );
            }
            _ => self.check_whole_groups(ev, &run, last)?,
        }
        for (anchor, seq) in &anchors {
            self.anchor_of.remove(seq);
            if let Some(node) = self.head.remove(anchor) {
                undo.removed.push((*anchor, node));
            }
        }
        if let Some(kind) = kind {
            self.insert(first, kind, ev, undo);
        }
        Ok(())
    }

    /// A run (not a tool substitution) must cover whole, complete call groups.
    fn check_whole_groups(&self, ev: &EventRecord, run: &[&Node], last: u64) -> Result<()> {
        let fail = |msg: &str| Err(SessionError::rule(ev.seq, &ev.kind, "K.replace-group", msg));
        if matches!(run.first().map(|n| &n.kind), Some(NodeKind::Tool { .. })) {
            return fail("the range starts inside a tool-call group");
        }
        let after = self
            .head
            .range((std::ops::Bound::Excluded(last), std::ops::Bound::Unbounded))
            .map(|(_, n)| n)
            .chain(self.tail.first())
            .next();
        if matches!(after.map(|n| &n.kind), Some(NodeKind::Tool { .. })) {
            return fail("the range ends inside a tool-call group");
        }
        let mut i = 0;
        while i < run.len() {
            if let NodeKind::Assistant { calls } = &run[i].kind {
                let answered = run[i + 1..]
                    .iter()
                    .take_while(|n| matches!(n.kind, NodeKind::Tool { .. }))
                    .count();
                if answered != calls.len() {
                    return fail("the range holds a tool-call group whose results are not all in");
                }
                i += answered;
            }
            i += 1;
        }
        Ok(())
    }
}

fn parse(frozen: &Frozen) -> Result<Value> {
    frozen
        .parse()
        .map_err(|e| SessionError::invalid(format!("projected message: {}", e.message)))
}

/// Derives the frozen model history of a whole log from scratch (a session that is not live).
///
/// # Errors
/// As [`Projection::apply`].
pub fn derive_frozen(events: &[EventRecord]) -> Result<Vec<Frozen>> {
    let mut p = Projection::new();
    for ev in events {
        p.apply(&Arc::new(ev.clone()))?;
    }
    p.shared()
}

/// Derives the model history of a whole log from scratch (tests, cold readers).
///
/// # Errors
/// As [`Projection::apply`].
pub fn derive_messages(events: &[EventRecord]) -> Result<Vec<Value>> {
    let mut p = Projection::new();
    for ev in events {
        p.apply(&Arc::new(ev.clone()))?;
    }
    Ok(p.messages())
}

/// The human transcript: every appended (not replacing) surface event, shadowed or not, in log
/// order — the second read model over the same log (SES-03).
pub fn transcript(events: &[EventRecord]) -> impl Iterator<Item = &EventRecord> {
    events
        .iter()
        .filter(|e| is_surface(&e.kind) && !matches!(e.surface_op, Some(SurfaceOp::Replace { .. })))
}

#[cfg(test)]
#[path = "projection_tests.rs"]
mod tests;
