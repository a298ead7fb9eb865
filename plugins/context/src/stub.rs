//! What a compaction appends (CTX-01): the replacement events and the text the model reads in
//! place of what sank, and the cold items the originals become.
//!
//! A stub is short and bounded whatever it replaces: it names how much sank, the newest few
//! cold references with what each was and its size, and the two tools that bring any of it
//! back. Its event keeps the numbers (`data.context`) so a later compaction that swallows it
//! can carry the count on without reading what lies beneath.

use keel_plugin_api::services::session::{EventInput, EventRecord, ReplaceTag, SurfaceOp};
use serde_json::{Value, json};

use crate::cold::ColdItem;

/// Bytes a stub takes, for planning (the text plus its JSON framing).
pub const STUB_BYTES: u64 = 1200;

/// How many cold references a stub lists by name.
const LISTED: usize = 5;

/// `data.context` of an event a compaction appended, if it is one.
pub fn context_of(ev: &EventRecord) -> Option<&Value> {
    ev.data
        .get("context")
        .filter(|c| c.get("strategy").is_some())
}

/// `8.0 KiB`, `312 B`.
pub fn size(bytes: u64) -> String {
    #[allow(clippy::cast_precision_loss, reason = "a size for people")]
    match bytes {
        0..1024 => format!("{bytes} B"),
        1024..1_048_576 => format!("{:.1} KiB", bytes as f64 / 1024.0),
        _ => format!("{:.1} MiB", bytes as f64 / 1_048_576.0),
    }
}

/// What sank in one run: the originals newly sunk and what earlier stubs inside it carried.
#[derive(Debug, Default)]
pub struct Sunk {
    /// Originals, in log order.
    pub items: Vec<ColdItem>,
    /// Messages earlier stubs in the run stood for.
    pub earlier_count: u64,
    /// Their bytes.
    pub earlier_bytes: u64,
}

impl Sunk {
    /// Messages the run stands for.
    pub fn count(&self) -> u64 {
        self.items.len() as u64 + self.earlier_count
    }
    /// Their bytes.
    pub fn bytes(&self) -> u64 {
        self.items
            .iter()
            .map(|i| i.content.len() as u64)
            .sum::<u64>()
            + self.earlier_bytes
    }
}

/// Text of a value as the model saw it: a string as is, anything else as JSON.
pub fn text_of(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Reads one run's events (`events`, the run's nodes in display order) into what sank. A
/// tool result is described by the call that asked for it (found in the same run), a
/// capped result by its original (`originals` looks the originals of cap events up).
pub fn sunk_from(events: &[EventRecord], originals: &[EventRecord]) -> Sunk {
    let mut sunk = Sunk::default();
    let mut calls: Vec<(String, String)> = Vec::new();
    for ev in events {
        if let Some(c) = context_of(ev) {
            if c.get("strategy").and_then(Value::as_str) == Some("cap") {
                if let Some(orig) = originals
                    .iter()
                    .find(|o| Some(o.seq) == c.get("ref").and_then(Value::as_u64))
                {
                    sunk.items.push(item_of(orig, &calls));
                }
            } else {
                sunk.earlier_count += c.get("count").and_then(Value::as_u64).unwrap_or(0);
                sunk.earlier_bytes += c.get("bytes").and_then(Value::as_u64).unwrap_or(0);
            }
            continue;
        }
        if ev.kind == "assistant/message" {
            for c in ev.data["message"]["tool_calls"]
                .as_array()
                .map_or(&[][..], Vec::as_slice)
            {
                calls.push((
                    text_of(c.get("id")),
                    format!(
                        "{} {}",
                        text_of(c.get("name")),
                        clip(&text_of(c.get("arguments")), 80)
                    ),
                ));
            }
            if !text_of(ev.data["message"].get("content")).is_empty() {
                sunk.items.push(item_of(ev, &calls));
            }
        } else {
            sunk.items.push(item_of(ev, &calls));
        }
    }
    sunk
}

/// The cold item of one original event.
pub fn item_of(ev: &EventRecord, calls: &[(String, String)]) -> ColdItem {
    if ev.kind == "assistant/message" {
        return ColdItem {
            seq: ev.seq,
            what: "assistant text".into(),
            content: text_of(ev.data["message"].get("content")),
        };
    }
    let call_id = text_of(ev.data.get("call_id"));
    let what = calls
        .iter()
        .find(|(id, _)| *id == call_id)
        .map_or_else(|| format!("tool result of {call_id}"), |(_, w)| w.clone());
    ColdItem {
        seq: ev.seq,
        what,
        content: text_of(ev.data.get("content")),
    }
}

fn replacement(
    kind: &str,
    data: &Value,
    seqs: &[u64],
) -> keel_plugin_api::prelude::Result<EventInput> {
    let mut ev = EventInput::new(kind, data)?;
    ev.surface_op = Some(SurfaceOp::Replace {
        op: ReplaceTag::Replace,
        start: seqs.iter().copied().min().unwrap_or(0),
        end: seqs.iter().copied().max().unwrap_or(0),
    });
    ev.source_event_seqs = Some(seqs.to_vec());
    Ok(ev)
}

/// The footer every stub ends with: what to call to get it back.
fn listing(sunk: &Sunk) -> String {
    let mut out = String::new();
    let named: Vec<&ColdItem> = sunk.items.iter().rev().take(LISTED).collect();
    if !named.is_empty() {
        out.push_str("\nMost recent:");
        for i in named.iter().rev() {
            out.push_str(&format!(
                "\n- cold:{} {} ({})",
                i.seq,
                i.what,
                size(i.content.len() as u64)
            ));
        }
    }
    let rest = sunk.count().saturating_sub(named.len() as u64);
    if rest > 0 {
        out.push_str(&format!(
            "\n…and {rest} more (coldcontext_search finds them)."
        ));
    }
    out
}

/// The sink stub replacing `seqs` (CTX-02).
///
/// # Errors
/// Encoding errors.
pub fn sink_event(seqs: &[u64], sunk: &Sunk) -> keel_plugin_api::prelude::Result<EventInput> {
    let text = format!(
        "[keel context: {} earlier messages ({}) were moved to cold context to keep this conversation within the model's context window. Nothing was deleted: coldcontext_search{{query}} finds them by their words and coldcontext_read{{ref}} returns any of them exactly.{}]",
        sunk.count(),
        size(sunk.bytes()),
        listing(sunk)
    );
    let refs: Vec<u64> = sunk.items.iter().map(|i| i.seq).collect();
    let data = json!({
        "message": { "content": text },
        "context": { "strategy": "sink", "refs": refs, "count": sunk.count(), "bytes": sunk.bytes() },
    });
    replacement("assistant/message", &data, seqs)
}

/// The summary replacing `seqs`: the model's summary, headed by where the originals are.
///
/// # Errors
/// Encoding errors.
pub fn summary_event(
    seqs: &[u64],
    sunk: &Sunk,
    summary: &str,
) -> keel_plugin_api::prelude::Result<EventInput> {
    let text = format!(
        "[keel context: summary of {} earlier messages ({}). The originals are in cold context: coldcontext_search{{query}} finds them and coldcontext_read{{ref}} returns any of them exactly.{}]\n\n{}",
        sunk.count(),
        size(sunk.bytes()),
        listing(sunk),
        summary.trim()
    );
    let refs: Vec<u64> = sunk.items.iter().map(|i| i.seq).collect();
    let data = json!({
        "message": { "content": text },
        "context": { "strategy": "summarise", "refs": refs, "count": sunk.count(), "bytes": sunk.bytes() },
    });
    replacement("assistant/message", &data, seqs)
}

/// `s[..at]` and `s[from..]` on char boundaries at or inside the asked bounds.
fn head_tail(s: &str, head: usize, tail: usize) -> (&str, &str) {
    let mut h = head.min(s.len());
    while !s.is_char_boundary(h) {
        h -= 1;
    }
    let mut t = s.len().saturating_sub(tail).max(h);
    while !s.is_char_boundary(t) {
        t += 1;
    }
    (&s[..h], &s[t..])
}

/// The capped form of one oversized tool result (item 4): head and tail, with a cold
/// reference for the middle. `None` when it is not over `cap`.
///
/// # Errors
/// Encoding errors.
pub fn cap_event(
    original: &EventRecord,
    cap: usize,
) -> keel_plugin_api::prelude::Result<Option<EventInput>> {
    let content = text_of(original.data.get("content"));
    if content.len() <= cap {
        return Ok(None);
    }
    let (head, tail) = head_tail(&content, cap / 2, cap / 4);
    let omitted = content.len() - head.len() - tail.len();
    let text = format!(
        "{head}\n\n[keel context: {omitted} bytes of this {}-byte result are in cold context; coldcontext_read{{\"ref\":\"cold:{}\",\"offset\":{}}} returns them exactly.]\n\n{tail}",
        content.len(),
        original.seq,
        head.len()
    );
    let mut data = json!({
        "call_id": original.data.get("call_id").cloned().unwrap_or(Value::Null),
        "content": text,
        "context": { "strategy": "cap", "ref": original.seq, "bytes": content.len() },
    });
    if original.data.get("is_error").and_then(Value::as_bool) == Some(true) {
        data["is_error"] = Value::Bool(true);
    }
    replacement("tool/result", &data, &[original.seq]).map(Some)
}

#[cfg(test)]
#[path = "stub_tests.rs"]
mod tests;
