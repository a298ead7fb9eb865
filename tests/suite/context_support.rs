//! Helpers for the context suites (issue 14: CTX-01…06, MEM-08): a profile whose `llm-openai`
//! row knows its model's window and whose `context` row is configured per test, a loopback
//! model server with a context window, workspace files with unique marker words, what
//! `read_file` makes of them, and readers for what the tests assert on: the original tool
//! results and the replacements in the stored log, the stubs in a request, and the projection
//! replayed from the log beside the messages a request actually carried.

use keel_tests::Env;
use keel_tests::model_server::{ModelServer, Reply, Request, Window};
use serde_json::{Value, json};

use crate::suite::agent_support::{KEY_REF, KEY_VALUE, args, sandbox_usable};

/// What the context plugin's stubs open with (CONTEXT_SPEC: `[keel context: …]`).
pub const STUB: &str = "[keel context:";

/// A loopback model server with a context window of `window` tokens: a request over it is
/// answered 400 `context_length_exceeded` and consumes no reply.
pub fn windowed(window: u64, replies: Vec<Reply>) -> ModelServer {
    ModelServer::start_windowed(Window::new(window), replies)
}

/// The tokens the server measured `r` by against its window, as OpenAI counts: the prompt
/// (4 bytes of `messages` + `tools` JSON a token) plus the request's `max_tokens`, if set.
pub fn counted(r: &Request) -> u64 {
    r.prompt_tokens() + r.body["max_tokens"].as_u64().unwrap_or(0)
}

/// A test profile `t`: the shipped `base` and `agent` bundles (the `context` row among them),
/// `llm-openai` at `server` with `context_window = window` and `output_reserve = reserve` when
/// a window is given, the headless driver, approval `never`, short retry backoffs, and the
/// `context` row's config replaced by `context` (a TOML inline table; empty keeps the shipped
/// row).
pub fn ctx_env(server: &ModelServer, limits: Option<(u64, u64)>, context: &str) -> Env {
    ctx_env_with(server, limits, context, "")
}

/// [`ctx_env`] with `extra` appended verbatim to the profile (more rows).
pub fn ctx_env_with(
    server: &ModelServer,
    limits: Option<(u64, u64)>,
    context: &str,
    extra: &str,
) -> Env {
    let env = Env::new().var(KEY_REF, KEY_VALUE);
    let limits = limits.map_or_else(String::new, |(w, r)| {
        format!(", context_window = {w}, output_reserve = {r}")
    });
    let context = if context.is_empty() {
        String::new()
    } else {
        format!("[[replace]]\nid = \"context\"\nconfig = {context}\n")
    };
    env.profile(
        "t",
        &format!(
            r#"bundles = ["base", "agent"]

[[replace]]
id = "approval"
config = {{ mode = "never" }}

[[replace]]
id = "agent-loop"
config = {{ max_steps = 1000, retry = {{ initial_backoff_ms = 10, max_backoff_ms = 50 }} }}

[[insert]]
id = "llm-openai"
plugin = "llm-openai"
config = {{ base_url = "{base}", model = "test-model", api_key_ref = "{KEY_REF}", timeout_ms = 10000{limits} }}

[[insert]]
id = "driver"
plugin = "headless"

{context}
{unsandboxed}
{extra}
"#,
            base = server.base_url(),
            unsandboxed = if sandbox_usable() {
                ""
            } else {
                "[[disable]]\nid = \"sandbox\"\n"
            },
        ),
    );
    env
}

/// The text of a workspace file of about `bytes` bytes: lines of 80 bytes, ASCII words picked
/// by a small generator seeded with `seed`, and `marker` (a word no other file holds) on its
/// first line and in its middle.
pub fn marked_text(seed: u64, marker: &str, bytes: usize) -> String {
    const WORDS: [&str; 16] = [
        "alpha", "bravo", "copper", "delta", "ember", "fjord", "gravel", "harbor", "iris",
        "juniper", "kettle", "lumen", "meadow", "nickel", "orbit", "prism",
    ];
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let lines = bytes.div_ceil(80).max(2);
    let mut out = String::with_capacity(lines * 80);
    for n in 0..lines {
        let mut line = if n == 0 || n == lines / 2 {
            format!("{marker} ")
        } else {
            String::new()
        };
        while line.len() < 79 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            line.push_str(WORDS[(state % 16) as usize]);
            line.push(' ');
        }
        line.truncate(79);
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// What `read_file` answers for a whole small text file: its lines numbered like `cat -n`.
pub fn numbered(text: &str) -> String {
    text.lines()
        .enumerate()
        .map(|(i, l)| format!("{:>6}\t{l}\n", i + 1))
        .collect()
}

/// A reply calling `read_file` on `path` as call `id`.
pub fn read_call(id: &str, path: &str) -> Reply {
    Reply::tool_calls(vec![(id, "read_file", args(json!({ "path": path })))])
}

/// Whether `e` is a replacement (`surface_op.op == "replace"`).
pub fn is_replacement(e: &Value) -> bool {
    e["surface_op"]["op"] == "replace"
}

/// The original (appended) `tool/result` of `call_id`: exactly one.
pub fn original_result<'a>(events: &'a [Value], call_id: &str) -> &'a Value {
    let hits: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool/result" && !is_replacement(e))
        .filter(|e| e["data"]["call_id"] == call_id)
        .collect();
    assert_eq!(hits.len(), 1, "original tool/result of {call_id}: {hits:?}");
    hits[0]
}

/// The replacements whose `data.context.strategy` is `strategy`.
pub fn replacements<'a>(events: &'a [Value], strategy: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| is_replacement(e) && e["data"]["context"]["strategy"] == strategy)
        .collect()
}

/// The `cold:<seq>` references in `text`, in order.
pub fn cold_refs(text: &str) -> Vec<u64> {
    text.match_indices("cold:")
        .filter_map(|(i, _)| {
            let digits: String = text[i + 5..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        })
        .collect()
}

/// The content strings of `messages` that hold a context stub.
pub fn stubs(messages: &Value) -> Vec<String> {
    messages
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_str())
        .filter(|c| c.contains(STUB))
        .map(str::to_owned)
        .collect()
}

/// A wire message as `{role, content, calls: [[id, name, arguments]…], tool_call_id}`, the
/// shape both sides of a projection comparison are brought to (`null` content is `""`).
fn normal(role: &str, content: &Value, calls: Vec<Value>, tool_call_id: &Value) -> Value {
    json!({
        "role": role,
        "content": if content.is_null() { json!("") } else { content.clone() },
        "calls": calls,
        "tool_call_id": tool_call_id,
    })
}

/// The messages a request carried, system prompt left out, in [`normal`] form.
pub fn sent(r: &Request) -> Vec<Value> {
    r.messages()
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            let calls = m["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| json!([c["id"], c["function"]["name"], c["function"]["arguments"]]))
                .collect();
            normal(
                m["role"].as_str().unwrap_or_default(),
                &m["content"],
                calls,
                &m["tool_call_id"],
            )
        })
        .collect()
}

/// The model history replayed from a stored log, independently of keel (session-format.md,
/// "Projection"): surface events in seq order; a replacement `{start, end}` shadows the visible
/// nodes whose seq lies in `start..=end` and takes the place of the first of them. Asserts the
/// shadowed nodes are a contiguous run and that the replacement lists them in
/// `source_event_seqs`. In [`normal`] form.
pub fn replayed(events: &[Value]) -> Vec<Value> {
    let mut visible: Vec<(u64, Value)> = Vec::new();
    for e in events {
        let seq = e["seq"].as_u64().expect("seq");
        let d = &e["data"];
        let node = match e["type"].as_str().unwrap_or_default() {
            "user/message" => normal("user", &d["content"], Vec::new(), &Value::Null),
            "assistant/message" => {
                let m = &d["message"];
                let calls: Vec<Value> = m["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| json!([c["id"], c["name"], c["arguments"]]))
                    .collect();
                let empty = calls.is_empty() && m["content"].as_str().is_none_or(str::is_empty);
                if empty && !is_replacement(e) {
                    continue;
                }
                normal("assistant", &m["content"], calls, &Value::Null)
            }
            "tool/result" => normal("tool", &d["content"], Vec::new(), &d["call_id"]),
            _ => continue,
        };
        if !is_replacement(e) {
            visible.push((seq, node));
            continue;
        }
        let op = &e["surface_op"];
        let (start, end) = (op["start"].as_u64().unwrap(), op["end"].as_u64().unwrap());
        let hit: Vec<usize> = (0..visible.len())
            .filter(|&i| (start..=end).contains(&visible[i].0))
            .collect();
        assert!(!hit.is_empty(), "replacement {seq} shadows nothing: {e}");
        assert_eq!(
            hit.last().unwrap() - hit[0] + 1,
            hit.len(),
            "replacement {seq} shadows a broken run: {e}"
        );
        let shadowed: Vec<u64> = hit.iter().map(|&i| visible[i].0).collect();
        let listed: Vec<u64> = e["source_event_seqs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .collect();
        assert_eq!(
            listed, shadowed,
            "replacement {seq}: source_event_seqs must list the shadowed visible seqs"
        );
        let at = hit[0];
        visible.drain(at..at + hit.len());
        visible.insert(at, (seq, node));
    }
    visible.into_iter().map(|(_, m)| m).collect()
}

/// Asserts two normalised histories are equal, naming the first difference.
pub fn same_history(what: &str, got: &[Value], want: &[Value]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g, w, "{what}: message {i} differs");
    }
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: {} messages, expected {}",
        got.len(),
        want.len()
    );
}

/// Size of a "big" file: its `read_file` result is about 3,900 tokens, so with a 16k window
/// (threshold 80 % of 16384 − 1024) the request after three reads is under the threshold and
/// the one after the third result is over it.
pub const BIG: usize = 14_000;

/// Writes `work/<name>.txt` for each name, [`BIG`] bytes with the marker `zq<name>mark`;
/// returns the texts.
pub fn big_files(env: &Env, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let text = marked_text(100 + i as u64, &mark(name), BIG);
            env.file(&format!("work/{name}.txt"), &text);
            text
        })
        .collect()
}

/// The marker word of file `name`.
pub fn mark(name: &str) -> String {
    format!("zq{name}mark")
}

/// The content of the message whose role is `role` and whose content holds `needle`, if any.
pub fn has_message(messages: &Value, role: &str, needle: &str) -> bool {
    messages
        .as_array()
        .into_iter()
        .flatten()
        .any(|m| m["role"] == role && m["content"].as_str().is_some_and(|c| c.contains(needle)))
}

/// The last `turn/end` error code in `events` (`""` when the last turn did not end in error).
pub fn last_error_code(events: &[Value]) -> String {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == "turn/end")
        .and_then(|e| e["data"]["reason"]["error"]["code"].as_str())
        .unwrap_or_default()
        .to_owned()
}
