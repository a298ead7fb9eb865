//! An MCP server's tool list as keel tools (issue 15 item 1): the public names, the schemas,
//! the flags.
//!
//! Names: `mcp__<server>__<tool>`, with every character outside `[A-Za-z0-9_-]` of the tool's
//! name replaced by `_` (what OpenAI's and Anthropic's tool names accept); a name over 64
//! characters, or one that collides with another after replacing, keeps its first part and
//! ends in `_` plus 8 hex digits of the BLAKE3 of the original name, so it stays unique and
//! stable across restarts. The original name is what `tools/call` sends.
//!
//! Schemas: the `inputSchema` goes to the registry as is, after two checks: it must be a JSON
//! Schema object of `"type": "object"` (what a tool's arguments are), and it must compile as
//! a JSON Schema (the meta-schema of its `$schema`, 2020-12 when absent). A tool that fails
//! is an error naming the server and the tool; the caller decides what that costs (at start:
//! the server fails; later: the previous list stays).
//!
//! Flags: `readOnlyHint: true` → not mutating and parallel-safe; anything else (no
//! annotations at all included) → mutating and exclusive, so approval mode `ask` asks.

use std::collections::{BTreeMap, HashSet};

use keel_plugin_api::services::tools::ToolDefinition;
use serde_json::Value;

/// The longest public name (OpenAI's limit).
pub const MAX_NAME: usize = 64;

/// One tool as registered, and how to call it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// The name the model sees.
    pub public: String,
    /// The server's own name for it.
    pub original: String,
    /// What is registered.
    pub definition: ToolDefinition,
}

/// The prefix of a server's tools.
pub fn prefix(server: &str) -> String {
    format!("mcp__{server}__")
}

/// The server a public name belongs to (names cannot hold `__`, so the split is exact).
pub fn server_of(public: &str) -> Option<&str> {
    public
        .strip_prefix("mcp__")?
        .split_once("__")
        .map(|(s, _)| s)
}

fn short_hash(original: &str) -> String {
    blake3::hash(original.as_bytes()).to_hex()[..8].to_owned()
}

/// `mcp__<server>__<tool>`, sanitised; `taken` holds the names already given.
pub fn public_name(server: &str, original: &str, taken: &HashSet<String>) -> String {
    let clean: String = original
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let plain = format!("{}{clean}", prefix(server));
    if plain.len() <= MAX_NAME && !taken.contains(&plain) {
        return plain;
    }
    let keep = MAX_NAME.saturating_sub(9).min(plain.len());
    format!("{}_{}", &plain[..keep], short_hash(original))
}

/// Maps a `tools/list` answer (the tools as JSON) to registered tools.
///
/// # Errors
/// The first tool without a name or with an unusable schema: `tool 'X': why`.
pub fn map_tools(server: &str, listed: &[Value]) -> Result<Vec<McpTool>, String> {
    let mut taken = HashSet::new();
    let mut out = Vec::with_capacity(listed.len());
    for t in listed {
        let original = t
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| "a tool without a name".to_owned())?;
        let schema = t.get("inputSchema").cloned().unwrap_or(Value::Null);
        check_schema(&schema).map_err(|e| format!("tool '{original}': {e}"))?;
        let read_only = t
            .pointer("/annotations/readOnlyHint")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let description = t
            .get("description")
            .and_then(Value::as_str)
            .or_else(|| t.get("title").and_then(Value::as_str))
            .unwrap_or_default();
        let public = public_name(server, original, &taken);
        taken.insert(public.clone());
        out.push(McpTool {
            definition: ToolDefinition {
                name: public.clone(),
                description: description.to_owned(),
                parameters: schema,
                parallel_safe: read_only,
                mutating: !read_only,
                child_only: false,
            },
            public,
            original: original.to_owned(),
        });
    }
    Ok(out)
}

/// A tool's `inputSchema`: an object schema that compiles.
///
/// # Errors
/// Why not, in one line.
pub fn check_schema(schema: &Value) -> Result<(), String> {
    let Some(obj) = schema.as_object() else {
        return Err(format!("inputSchema is not a JSON Schema object: {schema}"));
    };
    if obj.get("type").and_then(Value::as_str) != Some("object") {
        return Err("inputSchema must have \"type\": \"object\"".to_owned());
    }
    jsonschema::validator_for(schema)
        .map(|_| ())
        .map_err(|e| format!("inputSchema is not valid JSON Schema: {e}"))
}

/// The public names of `tools` with their originals, for routing calls.
pub fn routes(tools: &[McpTool]) -> BTreeMap<String, String> {
    tools
        .iter()
        .map(|t| (t.public.clone(), t.original.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // Issue 15 item 2: names models accept, stable and unique.
    #[test]
    fn names_are_sanitised_and_unique() {
        let none = HashSet::new();
        assert_eq!(
            public_name("everything", "get-sum", &none),
            "mcp__everything__get-sum"
        );
        assert_eq!(public_name("e", "a.b c", &none), "mcp__e__a_b_c");
        let long = "x".repeat(80);
        let n = public_name("e", &long, &none);
        assert_eq!(n.len(), MAX_NAME);
        assert_eq!(n, public_name("e", &long, &none), "stable");
        let taken: HashSet<String> = ["mcp__e__a_b".to_owned()].into();
        let other = public_name("e", "a.b", &taken);
        assert_ne!(other, "mcp__e__a_b");
        assert!(other.len() <= MAX_NAME);
        assert_eq!(server_of("mcp__everything__get-sum"), Some("everything"));
        assert_eq!(server_of("read_file"), None);
        // A call under the public name reaches the server under its own name.
        let listed = vec![json!({"name": "a.b c", "inputSchema": {"type": "object"}})];
        let tools = map_tools("e", &listed).unwrap();
        assert_eq!(
            routes(&tools),
            BTreeMap::from([("mcp__e__a_b_c".to_owned(), "a.b c".to_owned())])
        );
    }

    // Issue 15 item 2: flags from annotations; a bad schema names the tool.
    #[test]
    fn flags_follow_read_only_hint_and_bad_schemas_are_named() {
        let listed = vec![
            json!({"name": "echo", "description": "Echo", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}),
            json!({"name": "write", "inputSchema": {"type": "object", "properties": {}}}),
        ];
        let tools = map_tools("s", &listed).unwrap();
        assert!(!tools[0].definition.mutating && tools[0].definition.parallel_safe);
        assert!(tools[1].definition.mutating && !tools[1].definition.parallel_safe);
        for (schema, says) in [
            (json!("nope"), "not a JSON Schema object"),
            (json!({"type": "string"}), "\"type\": \"object\""),
            (
                json!({"type": "object", "properties": {"a": {"type": 12}}}),
                "not valid JSON Schema",
            ),
        ] {
            let e = map_tools("s", &[json!({"name": "bad", "inputSchema": schema})]).unwrap_err();
            assert!(e.starts_with("tool 'bad': ") && e.contains(says), "{e}");
        }
    }
}
