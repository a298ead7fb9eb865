//! TOOL-06 as the model server sees it: a recorded OpenAI `messages` array checked for the
//! tool-call contract (every call answered, in order, right after its batch). Split from
//! `model_server.rs`, whose requests it reads, to keep that file about the server.

use serde_json::Value;

/// TOOL-06 over an OpenAI wire `messages` array: every assistant message that declares
/// `tool_calls` is immediately followed by exactly one `role: "tool"` message per call id, in
/// call order, and no tool message appears anywhere else. Pairing is by position within each
/// batch, so a call id may repeat in a later batch (servers that number calls per response
/// send `call_0` every time, issue 11 item 10), never within one.
///
/// # Errors
/// A sentence naming the first violation and its index.
pub fn check_tool_call_contract(messages: &Value) -> Result<(), String> {
    let list = messages
        .as_array()
        .ok_or_else(|| format!("messages is not an array: {messages}"))?;
    let mut i = 0;
    while i < list.len() {
        let m = &list[i];
        let role = m["role"].as_str().unwrap_or("");
        if role == "tool" {
            return Err(format!(
                "message {i} is a tool message ({}) outside a tool-call batch",
                m["tool_call_id"]
            ));
        }
        let calls = m["tool_calls"].as_array().filter(|c| !c.is_empty());
        i += 1;
        let Some(calls) = calls.filter(|_| role == "assistant") else {
            continue;
        };
        for (k, call) in calls.iter().enumerate() {
            let id = call["id"]
                .as_str()
                .ok_or_else(|| format!("message {}: tool call {k} has no id", i - 1))?;
            if calls[..k].iter().any(|c| c["id"] == id) {
                return Err(format!(
                    "message {}: tool call id {id} repeats within the batch",
                    i - 1 - k
                ));
            }
            let Some(next) = list.get(i) else {
                return Err(format!(
                    "message {}: tool call {id} has no tool message (the array ends)",
                    i - 1
                ));
            };
            if next["role"] != "tool" {
                return Err(format!(
                    "message {i} (role {}) sits inside the tool-call batch of message {}; \
                     expected the tool message for {id}",
                    next["role"],
                    i - 1 - k
                ));
            }
            if next["tool_call_id"] != id {
                return Err(format!(
                    "message {i} answers {} but call {k} of the batch is {id}",
                    next["tool_call_id"]
                ));
            }
            i += 1;
        }
    }
    Ok(())
}
