//! The cold tier's tools (CTX-04, MEM-08): `coldcontext_search{query, limit?}` finds sunk
//! messages by their words; `coldcontext_read{ref, offset?, limit?}` returns one of them
//! exactly, as the session log holds it.
//!
//! A read answers the original's bytes and nothing else when they fit the limit, so what sank
//! comes back byte for byte; a partial read ends with one line saying where to go on. Only
//! what a compaction sank can be read (a reference the index does not know is
//! `COLD_REF_UNKNOWN`): the tools are a way back to the model's own history, not a reader of
//! arbitrary log events.

use std::sync::Arc;

use keel_plugin_api::services::context::ContextCode;
use keel_plugin_api::services::tools::{Tool, ToolCall, ToolResult, ToolSet, ToolSpec};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::manager::Manager;
use crate::stub::{self, size};

/// Hits a search answers by default, and at most.
const DEFAULT_HITS: usize = 8;
const MAX_HITS: usize = 50;
/// Bytes a read answers by default.
const DEFAULT_READ: usize = 24 * 1024;

/// `coldcontext_search` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// Words to find.
    query: String,
    /// Most hits (default 8).
    #[serde(default)]
    #[schemars(range(min = 1, max = 50))]
    limit: Option<usize>,
}

/// `coldcontext_read` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// The reference, e.g. cold:42.
    #[serde(rename = "ref")]
    #[schemars(with = "String")]
    reference: serde_json::Value,
    /// First byte (default 0).
    #[serde(default)]
    offset: Option<usize>,
    /// Most bytes (default 24576).
    #[serde(default)]
    #[schemars(range(min = 1))]
    limit: Option<usize>,
}

/// The cold tier's tools over the manager.
pub struct ColdTools(pub Arc<Manager>);

/// `coldcontext_search`.
pub struct ColdSearch(pub Arc<ColdTools>);

/// `coldcontext_read`.
pub struct ColdRead(pub Arc<ColdTools>);

impl Tool for ColdSearch {
    const NAME: &'static str = "coldcontext_search";
    type Args = SearchArgs;

    fn describe(&self) -> ToolSpec {
        ToolSpec::new(
            "Search the cold context: earlier messages and tool results of this session that \
             were moved out of the conversation to fit the model's context window (their stubs \
             say `cold:<n>`). Full-text search over their words; each hit names its reference, \
             what it was, its size and the matching part.",
        )
        .parallel_safe()
    }

    async fn run(&self, args: SearchArgs, call: &ToolCall) -> ToolResult {
        self.0.search(args, call).await
    }
}

impl Tool for ColdRead {
    const NAME: &'static str = "coldcontext_read";
    type Args = ReadArgs;

    fn describe(&self) -> ToolSpec {
        ToolSpec::new(
            "Read one message of the cold context exactly as it was, by its reference \
             (`cold:<n>`). Long ones are read in parts with `offset` (bytes) and `limit`; a \
             partial read ends with a line giving the next offset.",
        )
        .parallel_safe()
    }

    async fn run(&self, args: ReadArgs, call: &ToolCall) -> ToolResult {
        self.0.read(args, call).await
    }
}

/// Both tools, for `ctx.serve_tools`.
pub fn tool_set(manager: Arc<Manager>) -> ToolSet {
    let tools = Arc::new(ColdTools(manager));
    ToolSet::new()
        .with(ColdSearch(Arc::clone(&tools)))
        .with(ColdRead(tools))
}

/// `cold:42`, `42` or 42 → 42.
fn parse_ref(v: &serde_json::Value) -> Option<u64> {
    match v {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) => s.trim().trim_start_matches("cold:").parse().ok(),
        _ => None,
    }
}

impl ColdTools {
    async fn search(&self, args: SearchArgs, call: &ToolCall) -> ToolResult {
        if let Err(e) = self.0.ready(&call.session_id).await {
            return ToolResult::from_error(&e);
        }
        let limit = args.limit.unwrap_or(DEFAULT_HITS).clamp(1, MAX_HITS);
        let hits = {
            let states = self.0.states();
            match states.get(&call.session_id).and_then(|s| s.cold.as_ref()) {
                Some(cold) => cold.search(&args.query, limit),
                None => Ok(Vec::new()),
            }
        };
        match hits {
            Ok(h) if h.is_empty() => ToolResult::ok(format!(
                "No cold context matches {:?}. (Not found is not the same as never said: \
                 only what was moved out of the conversation is searched here.)",
                args.query
            )),
            Ok(h) => ToolResult::ok(
                h.iter()
                    .map(|h| {
                        format!(
                            "cold:{} {} ({}): {}",
                            h.seq,
                            h.what,
                            size(h.bytes),
                            h.snippet.replace('\n', " ")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            Err(e) => ToolResult::error(ContextCode::Index, e.to_string()),
        }
    }

    async fn read(&self, args: ReadArgs, call: &ToolCall) -> ToolResult {
        let Some(seq) = parse_ref(&args.reference) else {
            return ToolResult::error(
                ContextCode::ColdRefUnknown,
                format!("{} is not a cold reference (cold:<n>)", args.reference),
            );
        };
        if let Err(e) = self.0.ready(&call.session_id).await {
            return ToolResult::from_error(&e);
        }
        let known = {
            let states = self.0.states();
            states
                .get(&call.session_id)
                .and_then(|s| s.cold.as_ref())
                .map(|c| c.contains(seq))
        };
        match known {
            Some(Ok(true)) => {}
            Some(Err(e)) => return ToolResult::error(ContextCode::Index, e.to_string()),
            _ => {
                return ToolResult::error(
                    ContextCode::ColdRefUnknown,
                    format!(
                        "cold:{seq} is not in this session's cold context; coldcontext_search finds what is"
                    ),
                );
            }
        }
        let original = match self.0.read(&call.session_id, &[seq]).await {
            Ok(mut evs) if !evs.is_empty() => evs.remove(0),
            Ok(_) => return ToolResult::error(ContextCode::ColdRefUnknown, format!("cold:{seq}")),
            Err(e) => return ToolResult::from_error(&e),
        };
        let text = stub::item_of(&original, &[]).content;
        ToolResult::ok(slice(
            &text,
            seq,
            args.offset.unwrap_or(0),
            args.limit.unwrap_or(DEFAULT_READ),
        ))
    }
}

/// `text[offset..offset+limit]` on char boundaries; a trailer line when it is not all.
fn slice(text: &str, seq: u64, offset: usize, limit: usize) -> String {
    let mut start = offset.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = start.saturating_add(limit.max(1)).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if start == 0 && end == text.len() {
        return text.to_owned();
    }
    if end == text.len() {
        return format!(
            "{}\n[keel: bytes {start}–{end} of {}, the end]",
            &text[start..end],
            text.len()
        );
    }
    format!(
        "{}\n[keel: bytes {start}–{end} of {}; coldcontext_read{{\"ref\":\"cold:{seq}\",\"offset\":{end}}} for more]",
        &text[start..end],
        text.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_whole_read_is_exact_and_a_partial_one_says_where_to_go_on() {
        let text = "héllo wörld";
        assert_eq!(slice(text, 7, 0, 1000), text);
        let part = slice(text, 7, 0, 2);
        assert!(part.starts_with("h\n[keel: bytes 0–1 of 13;"), "{part}");
        assert!(part.contains("\"offset\":1}"), "{part}");
        let rest = slice(text, 7, 7, 1000);
        assert_eq!(rest, "wörld\n[keel: bytes 7–13 of 13, the end]");
    }

    #[test]
    fn references_are_cold_n_or_n() {
        assert_eq!(parse_ref(&json!("cold:42")), Some(42));
        assert_eq!(parse_ref(&json!("42")), Some(42));
        assert_eq!(parse_ref(&json!(42)), Some(42));
        assert_eq!(parse_ref(&json!("x")), None);
    }
}
