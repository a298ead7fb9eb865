//! How the loopback model server behaves besides its script: a [`Personality`]. `OpenAi` (the
//! default) answers every chat-completions request with the next scripted reply, streamed or
//! whole as the request asks, usage included. `LlamaCpp` reproduces what llama-cpp-python
//! 0.3.x's server (`python -m llama_cpp.server --chat_format chatml-function-calling`) does to
//! a client written for OpenAI (issue 11):
//!
//! 1. a missing `tool_choice` is `"none"`: the model answers in text (a scripted tool call is
//!    rendered as text naming the call), so no tool is ever called;
//! 2. streaming with tools and `tool_choice: "auto"` is unsupported: `200` and an empty body
//!    (the server's log says automatic streaming tool choice is not supported);
//! 3. a message with `"content": null` fails its request validation: `500` with the wrapped
//!    FastAPI/pydantic `validation error` in an OpenAI-style error body;
//! 4. a prompt over the context window (`n_ctx` tokens, estimated as four bytes of the
//!    request's `messages` and `tools` a token): streamed, `200` and an empty stream;
//!    not streamed, `400` `context_length_exceeded` with llama-cpp-python's wording;
//! 5. streams carry no usage (`stream_options.include_usage` is ignored); a whole answer does.
//!
//!
//! `RefusesStreamOptions` is an OpenAI-compatible server that validates its request strictly
//! and does not know `stream_options` (older gateways and servers): a body carrying it is
//! refused with `400` naming the field; without it, a stream carries no usage (issue 23 item
//! 19).
//!
//! A refused request (2, 3, 4, and the `stream_options` refusal) consumes no reply: the model
//! never ran.

use serde_json::{Value, json};

use super::error_body;
use super::window::{DEFAULT_BYTES_PER_TOKEN, tokens_at};

/// The default context window of [`Personality::llama_cpp`], in (estimated) tokens.
pub const LLAMA_CPP_N_CTX: u64 = 16_384;

/// What kind of server the loopback model server plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Personality {
    /// OpenAI's chat completions.
    #[default]
    OpenAi,
    /// llama-cpp-python's server with `chatml-function-calling` (issue 11).
    LlamaCpp {
        /// Context window in tokens (estimated: 4 bytes of `messages` + `tools` a token).
        n_ctx: u64,
    },
    /// A server that refuses `stream_options` with `400` (issue 23 item 19).
    RefusesStreamOptions,
}

/// How a served reply is rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shape {
    /// SSE (`stream: true`), else one whole `chat.completion`.
    pub stream: bool,
    /// Whether usage is reported.
    pub usage: bool,
    /// Tool calls are answered as text (the request offered no usable tool choice).
    pub tools_off: bool,
}

/// What the personality makes of a request before any reply is consumed.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Screen {
    /// Serve the next scripted reply in this shape.
    Serve(Shape),
    /// `200`, an SSE head, no body.
    EmptyStream,
    /// This status and JSON body.
    Status(u16, String),
}

impl Personality {
    /// llama-cpp-python with the default context window ([`LLAMA_CPP_N_CTX`]).
    pub fn llama_cpp() -> Personality {
        Personality::LlamaCpp {
            n_ctx: LLAMA_CPP_N_CTX,
        }
    }

    /// The verdict on a chat-completions request body.
    pub(super) fn screen(self, body: &Value) -> Screen {
        let stream = body["stream"].as_bool().unwrap_or(false);
        if self == Personality::RefusesStreamOptions {
            if body.get("stream_options").is_some() {
                return Screen::Status(
                    400,
                    error_body(
                        "Unrecognized request argument supplied: stream_options",
                        "invalid_request_error",
                        "unknown_parameter",
                    ),
                );
            }
            return Screen::Serve(Shape {
                stream,
                usage: !stream,
                tools_off: false,
            });
        }
        let Personality::LlamaCpp { n_ctx } = self else {
            return Screen::Serve(Shape {
                stream,
                usage: true,
                tools_off: false,
            });
        };
        if let Some(i) = null_content(body) {
            return Screen::Status(500, validation_error(i));
        }
        let prompt = estimated_tokens(body);
        if prompt > n_ctx {
            if stream {
                return Screen::EmptyStream;
            }
            return Screen::Status(400, overflow_error(n_ctx, prompt, body));
        }
        let tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
        let choice = &body["tool_choice"];
        let tools_off = !tools || choice.is_null() || *choice == "none";
        if stream && !tools_off && choice.is_string() {
            // "auto" (and anything but a named function): chatml-function-calling raises
            // "Automatic streaming tool choice is not supported" once the head is out.
            return Screen::EmptyStream;
        }
        Screen::Serve(Shape {
            stream,
            usage: !stream,
            tools_off,
        })
    }
}

/// The index of the first message whose `content` is JSON `null`.
fn null_content(body: &Value) -> Option<usize> {
    body["messages"]
        .as_array()?
        .iter()
        .position(|m| m.get("content").is_some_and(Value::is_null))
}

/// Four bytes of the serialised `messages` and `tools` a token ([`tokens_at`] at
/// [`DEFAULT_BYTES_PER_TOKEN`]).
pub fn estimated_tokens(body: &Value) -> u64 {
    tokens_at(body, DEFAULT_BYTES_PER_TOKEN)
}

/// llama-cpp-python's route handler wraps the FastAPI validation error of a `content: null`
/// message in an OpenAI error with HTTP 500.
fn validation_error(index: usize) -> String {
    json!({"error": {
        "message": format!(
            "1 validation error:\n  {{'type': 'string_type', 'loc': ('body', 'messages', {index}, \
             'typed-dict', 'content'), 'msg': 'Input should be a valid string', 'input': None}}\n"
        ),
        "type": "internal_server_error",
        "param": null,
        "code": null,
    }})
    .to_string()
}

/// llama-cpp-python's `context_length_exceeded` wording.
fn overflow_error(n_ctx: u64, prompt: u64, body: &Value) -> String {
    let completion = body["max_tokens"].as_u64();
    let mut e: Value = serde_json::from_str(&error_body(
        &format!(
            "This model's maximum context length is {n_ctx} tokens. However, you requested {} \
             tokens ({prompt} in the messages, {} in the completion). Please reduce the length \
             of the messages or completion.",
            prompt + completion.unwrap_or(0),
            completion.map_or_else(|| "None".to_owned(), |c| c.to_string()),
        ),
        "invalid_request_error",
        "context_length_exceeded",
    ))
    .unwrap_or_default();
    e["error"]["param"] = json!("messages");
    e.to_string()
}

/// The text a model with no tools to call writes instead of calling one.
pub(super) fn calls_as_text(calls: &[(String, String, String)]) -> String {
    calls
        .iter()
        .map(|(_, name, args)| format!("I would call {name} with {args}."))
        .collect::<Vec<_>>()
        .join("\n")
}
