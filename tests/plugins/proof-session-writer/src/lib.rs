//! Proof plugin: a driver (provides `keel.driver`, requires `keel.session`) that writes a session
//! the way the agent loop will — turns, steps, assistant messages with 1–3 tool calls, one
//! `tool/call` and one `tool/result` per call — and flushes at the checkpoints of requirements
//! B6: before each model request (before `assistant/message`) and before each tool body (after
//! `tool/call`). It exists for the crash and CLI tests in `tests/suite/sessions*.rs`.
//!
//! After every successful flush it prints `flushed <session_id> <durable_seq>` on stdout and
//! flushes stdout, so a test that SIGKILLs the process knows what was promised durable.
//!
//! The prompt is a whitespace-separated list of `key=value` settings:
//!
//! - `id=ID` — create the session with this id (default: the service picks one);
//! - `turns=N` or `turns=forever` — complete turns to write (default 1);
//! - `steps=K` — tool steps per turn before the final answer step (default 1);
//! - `calls=N` — tool calls per tool step, 1–3 (default: cycles 1, 2, 3 by turn and step);
//! - `bytes=N` — pad each user message to about N bytes (default small);
//! - `stop=step|call` — after the complete turns, open one more turn and stop at a checkpoint:
//!   `step` right after the flush before the model request (an open step, no calls), `call`
//!   right after the flush before the first of three tool bodies (one call started, two not).
//!   The driver then prints `stopped <session_id> <durable_seq>` and waits to be killed.
//!
//! A finished script flushes, closes the session and prints `done <session_id> <durable_seq>`.
//! A failed flush prints `flush-failed <session_id> <CODE>` and fails the run (exit 1).

use std::io::Write as _;
use std::time::Duration;

use keel_plugin_api::prelude::*;
use keel_plugin_api::sdk::sleep;
use keel_plugin_api::services::driver::{
    Driver, DriverInterrupt, DriverInvocation, DriverOutcome, DriverProvider,
};
use keel_plugin_api::services::session::{
    AppendEvents, CreateSession, EventInput, SessionRef, Sessions, SessionsClient,
};
use serde_json::{Value, json};

keel_plugin_api::error_codes! {
    /// This test plugin's own code (a plugin declares its codes like any other).
    enum ProofCode in "proof" {
        /// The fixture failed on purpose.
        Proof = "PROOF", by "this test plugin", retry Never;
    }
}

#[derive(Default)]
struct SessionWriter;

/// Where a `stop=` script parks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    Step,
    Call,
}

struct Script {
    id: Option<String>,
    turns: Option<u64>,
    steps: u64,
    calls: Option<u64>,
    bytes: usize,
    stop: Option<Stop>,
}

fn bad(msg: String) -> Error {
    Error::coded(ProofCode::Proof, msg)
}

fn parse(prompt: &str) -> Result<Script> {
    let mut s = Script {
        id: None,
        turns: Some(1),
        steps: 1,
        calls: None,
        bytes: 0,
        stop: None,
    };
    for word in prompt.split_whitespace() {
        let (key, value) = word
            .split_once('=')
            .ok_or_else(|| bad(format!("setting `{word}` is not key=value")))?;
        let num = || {
            value
                .parse::<u64>()
                .map_err(|_| bad(format!("`{key}` takes a number, not `{value}`")))
        };
        match key {
            "id" => s.id = Some(value.to_owned()),
            "turns" if value == "forever" => s.turns = None,
            "turns" => s.turns = Some(num()?),
            "steps" => s.steps = num()?,
            "calls" => s.calls = Some(num()?.clamp(1, 3)),
            "bytes" => s.bytes = usize::try_from(num()?).unwrap_or(usize::MAX),
            "stop" if value == "step" => s.stop = Some(Stop::Step),
            "stop" if value == "call" => s.stop = Some(Stop::Call),
            _ => return Err(bad(format!("unknown setting `{word}`"))),
        }
    }
    Ok(s)
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn event(kind: &str, data: Value) -> Value {
    json!({"type": kind, "data": data})
}

fn surface(kind: &str, data: Value, sources: &[u64]) -> Value {
    let mut e = json!({"type": kind, "data": data, "surface_op": "append"});
    if !sources.is_empty() {
        e["source_event_seqs"] = json!(sources);
    }
    e
}

/// A turn that reached a `stop=` point: the caller parks.
struct Parked;

struct Writer {
    sessions: SessionsClient,
    id: String,
    durable: u64,
}

impl Writer {
    async fn append(&self, events: Vec<Value>) -> Result<Vec<u64>> {
        let request = AppendEvents {
            session_id: self.id.clone(),
            events: events
                .into_iter()
                .map(EventInput::from_json)
                .collect::<Result<_>>()?,
        };
        Ok(self.sessions.append(request).await?.seqs)
    }

    async fn flush(&mut self) -> Result<()> {
        match self.sessions.flush(SessionRef::new(&self.id)).await {
            Ok(r) => {
                self.durable = r.durable_seq.unwrap_or(self.durable);
                say(&format!("flushed {} {}", self.id, self.durable));
                Ok(())
            }
            Err(e) => {
                say(&format!("flush-failed {} {}", self.id, e.code));
                Err(e)
            }
        }
    }

    /// Writes turn `t`; with `stop`, parks at that checkpoint instead of finishing.
    async fn turn(
        &mut self,
        t: u64,
        script: &Script,
        stop: Option<Stop>,
    ) -> Result<Option<Parked>> {
        let pad = "x".repeat(script.bytes);
        self.append(vec![
            event("turn/start", json!({"turn": t})),
            surface(
                "user/message",
                json!({"id": format!("u-{t}"), "content": format!("do task {t} {pad}")}),
                &[],
            ),
        ])
        .await?;
        for step in 0..=script.steps {
            self.append(vec![event("step/start", json!({"turn": t, "step": step}))])
                .await?;
            // Checkpoint: the prefix before the model request is durable.
            self.flush().await?;
            if stop == Some(Stop::Step) {
                return Ok(Some(Parked));
            }
            let n = match (step < script.steps, stop) {
                (false, _) => 0,
                (true, Some(Stop::Call)) => 3,
                (true, _) => script.calls.unwrap_or(1 + (t + step) % 3),
            };
            let calls: Vec<Value> = (0..n)
                .map(|i| {
                    let name = if i % 2 == 0 {
                        "write_file"
                    } else {
                        "read_file"
                    };
                    let arguments = json!({"path": format!("f{t}-{i}.txt"), "text": "hi"});
                    json!({
                        "id": format!("call-{t}-{step}-{i}"),
                        "name": name,
                        "arguments": arguments.to_string(),
                    })
                })
                .collect();
            let content = if n == 0 {
                format!("task {t} done")
            } else {
                String::new()
            };
            self.append(vec![surface(
                "assistant/message",
                json!({"turn": t, "step": step,
                       "message": {"content": content, "tool_calls": calls}}),
                &[],
            )])
            .await?;
            for call in &calls {
                let call_id = call["id"].clone();
                let seqs = self
                    .append(vec![event(
                        "tool/call",
                        json!({"turn": t, "step": step, "call_id": call_id,
                               "name": call["name"], "arguments": call["arguments"]}),
                    )])
                    .await?;
                // Checkpoint: the call is durable before its side effect.
                self.flush().await?;
                if stop == Some(Stop::Call) {
                    return Ok(Some(Parked));
                }
                self.append(vec![surface(
                    "tool/result",
                    json!({"turn": t, "step": step, "call_id": call_id,
                           "content": format!("ok {}", call_id.as_str().unwrap_or(""))}),
                    &seqs,
                )])
                .await?;
            }
            self.append(vec![event("step/end", json!({"turn": t, "step": step}))])
                .await?;
        }
        self.append(vec![event(
            "turn/end",
            json!({"turn": t, "reason": {"kind": "completed"}}),
        )])
        .await?;
        Ok(None)
    }
}

async fn run(ctx: Context, invocation: DriverInvocation) -> Result<i32> {
    let script = parse(invocation.prompt.as_deref().unwrap_or(""))?;
    let sessions = ctx.client::<Sessions>()?;
    let create = CreateSession {
        cwd: invocation.cwd.clone(),
        id: script.id.clone(),
        ..CreateSession::default()
    };
    let id = sessions.create(create).await?.session_id;
    let mut w = Writer {
        sessions,
        id,
        durable: 0,
    };
    let mut t = 0;
    while script.turns.is_none_or(|n| t < n) {
        w.turn(t, &script, None).await?;
        t += 1;
    }
    if let Some(stop) = script.stop
        && w.turn(t, &script, Some(stop)).await?.is_some()
    {
        say(&format!("stopped {} {}", w.id, w.durable));
        loop {
            sleep(Duration::from_secs(3600)).await;
        }
    }
    w.flush().await?;
    w.sessions.close(SessionRef::new(&w.id)).await?;
    say(&format!("done {} {}", w.id, w.durable));
    Ok(0)
}

impl Plugin for SessionWriter {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new("proof-session-writer", env!("CARGO_PKG_VERSION"))
            .description("writes turns with tool calls to a session, flushing at the checkpoints")
            .provides::<Driver>()
            .requires::<Sessions>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        ctx.serve::<Driver, _>(WriterDriver(ctx))?;
        Ok(())
    }
}

/// The driver: writes the session the invocation describes.
struct WriterDriver(Context);

impl DriverProvider for WriterDriver {
    /// This driver takes no interrupt: the kernel's grace and teardown stop it.
    async fn interrupt(&self, _: DriverInterrupt) -> Result<()> {
        Err(bad("the session writer takes no interrupt".to_owned()))
    }

    async fn run(&self, invocation: DriverInvocation) -> Result<DriverOutcome> {
        let exit_code = run(self.0, invocation).await?;
        Ok(DriverOutcome {
            exit_code,
            relaunch: None,
        })
    }
}

keel_plugin_api::export_plugin!(SessionWriter);
