//! A scripted OpenAI chat-completions model server on loopback, for tests that drive the built
//! `keel` binary against a real HTTP endpoint (ARCHITECTURE §12: mocks only at the model).
//!
//! It is a plain HTTP/1.1 server (std only: a `TcpListener` on `127.0.0.1:0` and one thread per
//! connection). A well-formed stream is sent whole with a `Content-Length` and the connection
//! kept alive, as real providers do; faults and errors close it. A
//! test hands [`ModelServer::start`] a script of [`Reply`]s: each `POST …/chat/completions`
//! consumes the next one, streamed as OpenAI SSE (`data: {chunk}` lines, a usage chunk, then
//! `data: [DONE]`), or one of the faults real providers produce (HTTP errors, a context
//! overflow, a cut stream, a garbled line, a stall); a request with `stream: false` gets the
//! reply as one whole `chat.completion`. Past the end of the script the server answers 500
//! saying so. [`ModelServer::start_as`] picks a [`Personality`] other than OpenAI's, e.g. the
//! llama.cpp server's quirks (issue 11); [`ModelServer::start_windowed`] gives OpenAI's a
//! context window ([`Window`], issue 14). Every request, whatever its path, is recorded with its
//! headers (lowercase names), its parsed JSON body and its counted tokens, so tests assert what
//! keel actually sent, and [`check_tool_call_contract`] checks a recorded `messages` array
//! against TOOL-06. `POST …/v1/messages` is answered from the same script as Anthropic's
//! Messages API streams it ([`model_anthropic`](anthropic), issue 15 item 2). [`Reply::held`]
//! keeps a stream open after its first pieces until the test releases its [`Hold`]
//! ([`model_hold`](hold), issue 26 item 1).

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Default usage reported by a streamed reply: prompt tokens.
pub const DEFAULT_INPUT_TOKENS: u64 = 10;
/// Default usage reported by a streamed reply: completion tokens.
pub const DEFAULT_OUTPUT_TOKENS: u64 = 5;

/// The model name the server puts in its chunks.
const MODEL: &str = "keel-mock";

/// One scripted answer to one chat-completions request.
#[derive(Debug, Clone)]
pub struct Reply {
    kind: Kind,
    delay: Option<Duration>,
    usage: (u64, u64),
    /// Whether [`Reply::usage`] set `usage` (a windowed server bills the counted tokens else).
    usage_set: bool,
    headers: Vec<(String, String)>,
    /// What only the Messages endpoint renders (thinking blocks, cached tokens).
    anthropic: anthropic::Extras,
    /// Where the stream waits for the test ([`Reply::held`]).
    hold: Option<hold::Held>,
}

#[derive(Debug, Clone)]
enum Kind {
    /// A well-formed stream: optional text, then tool calls.
    Stream {
        text: Option<String>,
        calls: Vec<(String, String, String)>,
    },
    /// A plain HTTP answer with a JSON body.
    Status { code: u16, body: String },
    /// Some deltas, then the socket closes (no finish, no `[DONE]`).
    Disconnect,
    /// A `data:` line that is not JSON.
    Garbled,
    /// Headers, then silence for the duration, then close.
    Stall(Duration),
    /// `finish_reason: stop` with no content.
    Empty,
    /// A few deltas, then the provider's error event mid-stream (Anthropic's `event: error`,
    /// OpenAI's `data: {"error": …}`), then the socket closes.
    StreamError { kind: String, message: String },
}

impl Reply {
    fn of(kind: Kind) -> Reply {
        Reply {
            kind,
            delay: None,
            usage: (DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS),
            usage_set: false,
            headers: Vec::new(),
            anthropic: anthropic::Extras::default(),
            hold: None,
        }
    }

    /// Streams `text` in several content deltas, `finish_reason: "stop"`.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::of(Kind::Stream {
            text: Some(text.into()),
            calls: Vec::new(),
        })
    }

    /// Streams tool calls `(id, name, arguments JSON string)`: the arguments of each call split
    /// across several chunks, the calls interleaved by `index`, `finish_reason: "tool_calls"`.
    pub fn tool_calls<I, N, A>(calls: Vec<(I, N, A)>) -> Reply
    where
        I: Into<String>,
        N: Into<String>,
        A: Into<String>,
    {
        Reply::text_and_calls("", calls)
    }

    /// Text deltas first (none when `text` is empty), then tool calls as in [`Reply::tool_calls`].
    pub fn text_and_calls<I, N, A>(text: impl Into<String>, calls: Vec<(I, N, A)>) -> Reply
    where
        I: Into<String>,
        N: Into<String>,
        A: Into<String>,
    {
        let text = text.into();
        Reply::of(Kind::Stream {
            text: (!text.is_empty()).then_some(text),
            calls: calls
                .into_iter()
                .map(|(i, n, a)| (i.into(), n.into(), a.into()))
                .collect(),
        })
    }

    /// A non-streamed HTTP answer `code` with `body` (sent as `application/json`).
    pub fn status(code: u16, body: impl Into<String>) -> Reply {
        Reply::of(Kind::Status {
            code,
            body: body.into(),
        })
    }

    /// 429 with `retry-after: <secs>` and an OpenAI `rate_limit_exceeded` error body.
    pub fn rate_limited(retry_after_secs: u64) -> Reply {
        Reply::status(
            429,
            error_body(
                "Rate limit reached for requests",
                "requests",
                "rate_limit_exceeded",
            ),
        )
        .header("retry-after", &retry_after_secs.to_string())
    }

    /// 400 with an OpenAI `context_length_exceeded` error body.
    pub fn context_overflow() -> Reply {
        Reply::status(
            400,
            error_body(
                "This model's maximum context length is 8192 tokens. However, your messages \
                 resulted in 9000 tokens. Please reduce the length of the messages.",
                "invalid_request_error",
                "context_length_exceeded",
            ),
        )
    }

    /// 200 and a few content deltas, then the connection closes without a finish chunk or
    /// `[DONE]`.
    pub fn disconnect_mid_stream() -> Reply {
        Reply::of(Kind::Disconnect)
    }

    /// 200 and one valid delta, then a `data:` line that is not JSON, then `[DONE]`.
    pub fn garbled() -> Reply {
        Reply::of(Kind::Garbled)
    }

    /// 200 headers, then nothing for `silence`, then the connection closes.
    pub fn stall(silence: Duration) -> Reply {
        Reply::of(Kind::Stall(silence))
    }

    /// A well-formed stream with `finish_reason: "stop"` and no content at all.
    pub fn empty() -> Reply {
        Reply::of(Kind::Empty)
    }

    /// Waits `delay` before sending anything (modifier).
    #[must_use]
    pub fn delay(mut self, delay: Duration) -> Reply {
        self.delay = Some(delay);
        self
    }

    /// The usage chunk's `prompt_tokens` / `completion_tokens` (modifier; default
    /// [`DEFAULT_INPUT_TOKENS`] / [`DEFAULT_OUTPUT_TOKENS`], or under a [`Window`] the
    /// request's counted tokens / [`DEFAULT_OUTPUT_TOKENS`]).
    #[must_use]
    pub fn usage(mut self, input_tokens: u64, output_tokens: u64) -> Reply {
        self.usage = (input_tokens, output_tokens);
        self.usage_set = true;
        self
    }

    /// Adds a response header (modifier).
    #[must_use]
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

/// An OpenAI-style error body.
pub fn error_body(message: &str, kind: &str, code: &str) -> String {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}}).to_string()
}

/// One request the server received.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// `POST`, `GET`, …
    pub method: String,
    /// The request target as sent (path and query).
    pub path: String,
    /// Headers, names lowercased (a repeated header keeps its last value).
    pub headers: BTreeMap<String, String>,
    /// The body parsed as JSON (`Null` when empty or not JSON).
    pub body: Value,
    /// When the whole request had been read (benchmarks time steps from these, after the run,
    /// so nothing competes with keel for the CPU while it runs).
    pub at: Instant,
    /// Counted tokens ([`Request::prompt_tokens`]).
    prompt_tokens: u64,
    /// When its answer had been written (`None`: not yet, or never answered).
    pub done: Option<Instant>,
    /// The route that served it ([`ModelServer::start_routed`]; `None`: the default script).
    pub route: Option<String>,
}

impl Request {
    /// The `messages` array of a chat-completions body (`Null` when absent).
    pub fn messages(&self) -> &Value {
        &self.body["messages"]
    }
}

#[derive(Default)]
struct State {
    script: Mutex<Script>,
    arrived: Condvar,
    stop: AtomicBool,
    personality: Personality,
    window: Option<Window>,
    hook: Mutex<Option<Hook>>,
}

/// Sees each chat-completions request before it is answered ([`ModelServer::on_completion`]).
pub type Hook = Arc<dyn Fn(&Request) + Send + Sync>;

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    consumed: usize,
    requests: Vec<Request>,
    routes: Vec<routes::Route>,
}

/// The running server. Dropping it stops accepting connections.
pub struct ModelServer {
    addr: SocketAddr,
    state: Arc<State>,
    acceptor: Option<JoinHandle<()>>,
}

impl ModelServer {
    /// Binds `127.0.0.1:0` and serves `replies` in order, as OpenAI would.
    pub fn start(replies: Vec<Reply>) -> ModelServer {
        ModelServer::start_as(Personality::OpenAi, replies)
    }

    /// [`ModelServer::start`] playing `personality` (e.g. [`Personality::llama_cpp`]).
    pub fn start_as(personality: Personality, replies: Vec<Reply>) -> ModelServer {
        ModelServer::start_with(personality, None, replies)
    }

    fn start_with(
        personality: Personality,
        window: Option<Window>,
        replies: Vec<Reply>,
    ) -> ModelServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the model server");
        let addr = listener.local_addr().expect("model server address");
        let state = Arc::new(State {
            script: Mutex::new(Script {
                replies: replies.into(),
                ..Script::default()
            }),
            personality,
            window,
            ..State::default()
        });
        let shared = Arc::clone(&state);
        let acceptor = std::thread::Builder::new()
            .name("model-server".to_owned())
            .spawn(move || {
                for conn in listener.incoming() {
                    if shared.stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = conn else { continue };
                    let state = Arc::clone(&shared);
                    let _ = std::thread::Builder::new()
                        .name("model-server-conn".to_owned())
                        .spawn(move || serve(stream, &state));
                }
            })
            .expect("spawn the model server");
        ModelServer {
            addr,
            state,
            acceptor: Some(acceptor),
        }
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The OpenAI base URL, `http://127.0.0.1:PORT/v1` (for `llm-openai.base_url`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Appends replies to the script (for a test whose replies name paths it learns only
    /// after the server's address went into the profile).
    pub fn push(&self, reply: Reply) {
        self.lock().replies.push_back(reply);
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.lock().requests.clone()
    }

    /// The chat-completions requests so far (the ones that consumed a reply or hit the end).
    pub fn completions(&self) -> Vec<Request> {
        self.requests().into_iter().filter(is_completion).collect()
    }

    /// Calls `hook` on the connection's thread with each chat-completions request once it is
    /// read and before it is answered, while the client waits: a benchmark reads the client's
    /// `/proc` state at the moment request N arrives (the growth bench, issue 12).
    pub fn on_completion(&self, hook: impl Fn(&Request) + Send + Sync + 'static) {
        *self.state.hook.lock().expect("model server hook") = Some(Arc::new(hook));
    }

    /// How many replies of the script were consumed.
    pub fn consumed(&self) -> usize {
        self.lock().consumed
    }

    /// Waits until at least `n` requests arrived and returns them all; panics after `timeout`.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Request> {
        let deadline = Instant::now() + timeout;
        let mut script = self.lock();
        while script.requests.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "model server: expected {n} requests within {timeout:?}, got {}",
                script.requests.len()
            );
            script = self
                .state
                .arrived
                .wait_timeout(script, left)
                .expect("model server lock")
                .0;
        }
        script.requests.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Script> {
        self.state.script.lock().expect("model server lock")
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept so the acceptor sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}

fn is_completion(r: &Request) -> bool {
    r.method == "POST"
        && r.path
            .split('?')
            .next()
            .unwrap_or("")
            .ends_with("/chat/completions")
}

/// Serves one connection: one request, one response, close.
fn serve(stream: TcpStream, state: &State) {
    let mut stream = stream;
    // Keep-alive: a connection serves requests until a reply closes it or the client leaves.
    while let Some(next) = serve_one(stream, state) {
        stream = next;
    }
}

/// Serves one request; returns the stream when it may serve another.
fn serve_one(stream: TcpStream, state: &State) -> Option<TcpStream> {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    // Each SSE event goes out at once, as a real provider's would (no Nagle wait for the
    // previous segment's ACK): the benchmarks measure keel, not the server's socket options.
    let _ = stream.set_nodelay(true);
    let mut request = read_request(&stream)?;
    let client_closes = request
        .headers
        .get("connection")
        .is_some_and(|v| v.eq_ignore_ascii_case("close"));
    let messages = anthropic::is_messages(&request);
    let completion = is_completion(&request) || messages;
    let hook = state.hook.lock().ok().and_then(|h| h.clone());
    if let Some(hook) = hook.filter(|_| completion) {
        hook(&request);
    }
    // The window's and the personality's verdicts come first: a refused request consumes no
    // reply.
    let screen = if messages {
        anthropic::screen()
    } else {
        window::screen(state.window, &mut request)
            .unwrap_or_else(|| state.personality.screen(&request.body))
    };
    let prompt_tokens = request.prompt_tokens;
    let (reply, index) = {
        let mut script = state.script.lock().expect("model server lock");
        let next = match &screen {
            Screen::Serve(_) if completion => Some(routes::next_reply(&mut script, &mut request)),
            _ => None,
        };
        let index = script.requests.len();
        script.requests.push(request);
        let reply = match next {
            Some(next) => {
                if next.is_some() {
                    script.consumed += 1;
                }
                Some(next)
            }
            _ => None,
        };
        state.arrived.notify_all();
        ((reply, script.consumed), index)
    };
    let how = How {
        messages,
        completion,
        client_closes,
        prompt_tokens,
    };
    let kept = answer(stream, state, reply, screen, &how);
    if let Some(r) = state
        .script
        .lock()
        .expect("model server lock")
        .requests
        .get_mut(index)
    {
        r.done = Some(Instant::now());
    }
    kept
}

/// What [`answer`] needs to know of the request.
struct How {
    messages: bool,
    completion: bool,
    client_closes: bool,
    prompt_tokens: u64,
}

/// Writes the answer; returns the stream when it may serve another request.
fn answer(
    stream: TcpStream,
    state: &State,
    reply: (Option<Option<Reply>>, usize),
    screen: Screen,
    how: &How,
) -> Option<TcpStream> {
    let &How {
        messages,
        completion,
        client_closes,
        prompt_tokens,
    } = how;
    let mut out = stream;
    match reply {
        (None, _) if completion => {
            let _ = match screen {
                Screen::EmptyStream => wire::write_empty_stream(&mut out),
                Screen::Status(code, body) => write_status(&mut out, code, &[], &body),
                Screen::Serve(_) => Ok(()),
            };
        }
        (None, _) => {
            let body = error_body(
                "no such route on the model server",
                "not_found",
                "not_found",
            );
            let _ = write_status(&mut out, 404, &[], &body);
        }
        (Some(None), consumed) => {
            let body = error_body(
                &format!("model server script exhausted after {consumed} replies"),
                "server_error",
                "script_exhausted",
            );
            let _ = write_status(&mut out, 500, &[], &body);
        }
        (Some(Some(mut reply)), _) => {
            window::bill(state.window, &mut reply, prompt_tokens);
            if let Some(d) = reply.delay {
                std::thread::sleep(d);
            }
            // Only a served request consumed a reply.
            let Screen::Serve(shape) = screen else {
                return None;
            };
            let kept = if messages {
                anthropic::respond(&mut out, &reply, client_closes)
            } else {
                respond(&mut out, &reply, shape, client_closes)
            };
            if let Ok(true) = kept {
                return Some(out);
            }
        }
    }
    let _ = out.flush();
    let _ = out.shutdown(Shutdown::Both);
    None
}

#[path = "model_anthropic.rs"]
mod anthropic;
pub use anthropic::anthropic_error_body;

#[path = "model_hold.rs"]
mod hold;
pub use hold::{Hold, MAX_HOLD};

#[path = "model_contract.rs"]
mod contract;
pub use contract::check_tool_call_contract;

#[path = "model_read.rs"]
mod read;
use read::read_request;

#[path = "model_routes.rs"]
mod routes;
pub use routes::first_user_text;

#[path = "model_personality.rs"]
mod personality;
pub use personality::{LLAMA_CPP_N_CTX, Personality, estimated_tokens};
use personality::{Screen, Shape};

#[path = "model_window.rs"]
mod window;
pub use window::{DEFAULT_BYTES_PER_TOKEN, Window, context_length_exceeded, tokens_at};

#[path = "model_wire.rs"]
mod wire;
pub use wire::split_pieces;
use wire::{respond, write_status};

#[cfg(test)]
#[path = "model_server_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "model_hold_tests.rs"]
mod hold_tests;

#[cfg(test)]
#[path = "model_anthropic_tests.rs"]
mod anthropic_tests;

#[cfg(test)]
#[path = "model_personality_tests.rs"]
mod personality_tests;

#[cfg(test)]
#[path = "model_window_tests.rs"]
mod window_tests;
