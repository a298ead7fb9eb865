//! The loopback model server's context window (issue 14 item 1): a [`Window`] the OpenAI
//! personality enforces as OpenAI does, so a long-session test can prove that every request
//! keel sent fitted, and that one that did not was refused the way a real provider refuses it.
//!
//! Tokens are counted as [`tokens_at`] counts them: the bytes of the JSON text of the request's
//! `messages` plus `tools` (the same estimate as the llama.cpp personality's `n_ctx`), divided
//! by the window's bytes per token (default [`DEFAULT_BYTES_PER_TOKEN`]). Every recorded
//! request carries its count ([`Request::prompt_tokens`]).
//!
//! Over the window (the prompt, plus the request's `max_tokens` when it sets one, as OpenAI
//! counts): `400` with OpenAI's `context_length_exceeded` body naming both numbers, and no
//! scripted reply is consumed. A served reply reports the counted tokens as `prompt_tokens`
//! unless its [`Reply::usage`] was set.

use serde_json::{Value, json};

use super::{ModelServer, Personality, Reply, Request, Screen, error_body};

/// The default bytes a token of a [`Window`].
pub const DEFAULT_BYTES_PER_TOKEN: f64 = 4.0;

/// A context window for the OpenAI personality ([`ModelServer::start_windowed`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// The window, in counted tokens.
    pub tokens: u64,
    /// Bytes of `messages` + `tools` JSON a token.
    pub bytes_per_token: f64,
}

impl Window {
    /// A window of `tokens`, at [`DEFAULT_BYTES_PER_TOKEN`].
    pub fn new(tokens: u64) -> Window {
        Window {
            tokens,
            bytes_per_token: DEFAULT_BYTES_PER_TOKEN,
        }
    }

    /// The same window counted at `bytes_per_token` (modifier).
    #[must_use]
    pub fn bytes_per_token(mut self, bytes_per_token: f64) -> Window {
        self.bytes_per_token = bytes_per_token;
        self
    }
}

/// The tokens of a chat-completions `body`: the JSON text of its `messages` plus its `tools`
/// (when present), `bytes_per_token` bytes a token, rounded down.
pub fn tokens_at(body: &Value, bytes_per_token: f64) -> u64 {
    let len = |v: Option<&Value>| v.map_or(0, |v| v.to_string().len());
    let bytes = len(body.get("messages")) + len(body.get("tools"));
    // Exact: a request's size is far below 2^52 bytes, and the quotient is not negative.
    (bytes as f64 / bytes_per_token).floor() as u64
}

/// OpenAI's `400` body for a request over the window: `prompt` counted tokens, `completion`
/// the request's `max_tokens` if it set one.
pub fn context_length_exceeded(window: u64, prompt: u64, completion: Option<u64>) -> String {
    let asked = match completion {
        None => format!("your messages resulted in {prompt} tokens"),
        Some(c) => format!(
            "you requested {} tokens ({prompt} in the messages, {c} in the completion)",
            prompt + c
        ),
    };
    let mut e: Value = serde_json::from_str(&error_body(
        &format!(
            "This model's maximum context length is {window} tokens. However, {asked}. Please \
             reduce the length of the messages."
        ),
        "invalid_request_error",
        "context_length_exceeded",
    ))
    .unwrap_or_default();
    e["error"]["param"] = json!("messages");
    e.to_string()
}

impl ModelServer {
    /// [`ModelServer::start`] with a context window: a request over `window` is refused with
    /// OpenAI's `400 context_length_exceeded` and consumes no reply.
    pub fn start_windowed(window: Window, replies: Vec<Reply>) -> ModelServer {
        ModelServer::start_with(Personality::OpenAi, Some(window), replies)
    }

    /// The window the server enforces, if any.
    pub fn window(&self) -> Option<Window> {
        self.state.window
    }
}

impl Request {
    /// The request's tokens as the server counted them ([`tokens_at`], at its window's bytes
    /// per token, else [`DEFAULT_BYTES_PER_TOKEN`]).
    pub fn prompt_tokens(&self) -> u64 {
        self.prompt_tokens
    }
}

/// Counts `request` (recording the count on it) and, under a window, refuses it when it does
/// not fit; `None` leaves the verdict to the personality.
pub(super) fn screen(window: Option<Window>, request: &mut Request) -> Option<Screen> {
    let per_token = window.map_or(DEFAULT_BYTES_PER_TOKEN, |w| w.bytes_per_token);
    request.prompt_tokens = tokens_at(&request.body, per_token);
    let window = window?;
    let completion = request.body["max_tokens"].as_u64();
    let total = request.prompt_tokens + completion.unwrap_or(0);
    (total > window.tokens).then(|| {
        let body = context_length_exceeded(window.tokens, request.prompt_tokens, completion);
        Screen::Status(400, body)
    })
}

/// Under a window, a reply without explicit usage reports the counted prompt tokens.
pub(super) fn bill(window: Option<Window>, reply: &mut Reply, prompt_tokens: u64) {
    if window.is_some() && !reply.usage_set {
        reply.usage.0 = prompt_tokens;
    }
}
