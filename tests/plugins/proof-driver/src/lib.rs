//! Proof plugin: a driver (provides `keel.driver`) that runs a script of steps given as the
//! prompt — `emit:TAG,waterfall,async-waterfall,parallel,serial,disable:ROW,enable:ROW,…` — and
//! prints one JSON line per step on stdout. It lets integration tests drive every dispatch mode
//! and every lifecycle operation through the real `keel` binary and real cdylibs; `relaunch:P`
//! asks the kernel to run the script again under profile P; `wait:ROW:STATE` polls the row
//! status (up to 10 s) until ROW is in STATE and prints that row; `agent-status:TAG` emits the
//! agent loop's `agent/status`, an event this driver uses but does not declare;
//! `file-trust:PATH` asks whether a project file it does not declare is trusted. Commas inside
//! `{…}`, `[…]` or a JSON string do not split steps, so `reload:ROW:{json}` takes any config.
//!
//! It also declares a command the kernel has never heard of, `keel proof-echo`, and a run
//! option, `--proof-level`, so tests can prove the binary builds its grammar from manifests
//! (issue 13 item 2): `proof-echo` prints its arguments as one JSON line, the `options` step
//! prints the run options the binary forwarded.

#![allow(clippy::panic, reason = "the `panic` step panics on purpose")]

use std::io::Write as _;
use std::time::Duration;

use keel_plugin_api::abi::{RString, RVec};
use keel_plugin_api::events::Typed;
use keel_plugin_api::events::agent::{AgentPoint, RunState, Status, StatusData};
use keel_plugin_api::prelude::*;
use keel_plugin_api::sdk::{ControlAnswer, ControlOp, sleep};
use keel_plugin_api::services::command::{
    ArgSpec, Command, CommandInvocation, CommandOutcome, CommandProvider, CommandSpec, service_name,
};
use keel_plugin_api::services::driver::{
    Driver, DriverInterrupt, DriverInvocation, DriverOutcome, DriverProvider, Relaunch,
};
use keel_proof_api::{
    Chain, Counter, LyingLayout, LyingMode, Probe, ProofAsyncWaterfall, ProofEmit, ProofParallel,
    ProofSerial, ProofWaterfall, Undeclared, trace,
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
struct ProofDriver;

fn print(line: Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn outcome<T>(step: &str, r: Result<T>, value: impl FnOnce(T) -> Value) -> Value {
    match r {
        Ok(v) => json!({"step": step, "ok": true, "value": value(v)}),
        Err(e) => json!({"step": step, "ok": false, "code": e.code, "message": e.message}),
    }
}

fn chain_json(c: &Chain) -> Value {
    json!({"value": c.value, "log": c.log.iter().map(|s| s.to_string()).collect::<Vec<_>>()})
}

fn empty_chain() -> Chain {
    Chain {
        value: 0,
        log: RVec::new(),
    }
}

/// Splits a script at top-level commas (not inside brackets, braces or JSON strings).
fn split_steps(script: &str) -> Vec<&str> {
    let (mut steps, mut depth, mut in_string, mut escaped, mut start) =
        (Vec::new(), 0i32, false, false, 0);
    for (i, c) in script.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            ',' if depth <= 0 => {
                steps.push(&script[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    steps.push(&script[start..]);
    steps
        .into_iter()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

async fn step(ctx: Context, step: &str) -> Value {
    let (name, arg) = step.split_once(':').unwrap_or((step, ""));
    let tag = if arg.is_empty() { name } else { arg };
    match name {
        "emit" => outcome(
            step,
            ctx.emit(crate::DISPATCH.proof_emit, &Probe { tag: tag.into() }),
            |()| json!(null),
        ),
        "waterfall" => {
            let mut chain = empty_chain();
            let r = ctx.run_waterfall(crate::DISPATCH.proof_waterfall, &mut chain, |c| {
                c.value += 100;
                c.log.push(RString::from("terminal"));
                trace("terminal waterfall");
                Ok(())
            });
            outcome(step, r, |()| chain_json(&chain))
        }
        "async-waterfall" => {
            let r = ctx
                .run_async_waterfall(
                    crate::DISPATCH.proof_async_waterfall,
                    empty_chain(),
                    |mut c: Chain| async move {
                        c.value += 100;
                        c.log.push(RString::from("terminal"));
                        trace("terminal async-waterfall");
                        Ok(c)
                    },
                )
                .await;
            outcome(step, r, |c| chain_json(&c))
        }
        "parallel" => outcome(
            step,
            ctx.parallel(crate::DISPATCH.proof_parallel, Probe { tag: tag.into() })
                .await,
            |()| json!(null),
        ),
        "serial" => outcome(
            step,
            ctx.serial(crate::DISPATCH.proof_serial, Probe { tag: tag.into() })
                .await,
            |d| d.map(|d| json!(d.by.to_string())).unwrap_or(Value::Null),
        ),
        // The kernel's second line (issue 24 item 7): a plugin built with this SDK cannot name
        // these handles (they are in no set); a foreign one could, so the kernel checks mode,
        // layout and declaration again at run time. The hidden constructor stands in for it.
        "lying-mode" => outcome(
            step,
            ctx.emit(Dispatch::<LyingMode>::__new(), &empty_chain()),
            |()| json!(null),
        ),
        "lying-layout" => outcome(
            step,
            ctx.emit(Dispatch::<LyingLayout>::__new(), &empty_chain()),
            |()| json!(null),
        ),
        // A core event this driver does not own (`#[declared_by("agent-loop")]` in its set): it
        // dispatches only when a loaded row (the agent loop) declares it (issue 13 item 2).
        "agent-status" => outcome(
            step,
            Typed::new(&StatusData {
                status: RunState::Idle,
            })
            .and_then(|data| {
                let point = AgentPoint {
                    session_id: tag.into(),
                    turn: 0,
                    step: 0,
                    data,
                };
                ctx.emit(crate::DISPATCH.status, &point)
            }),
            |()| json!(null),
        ),
        "undeclared" => outcome(
            step,
            ctx.emit(Dispatch::<Undeclared>::__new(), &Probe { tag: tag.into() }),
            |()| json!(null),
        ),
        "counter" => {
            let r = match ctx.get_client::<Counter>() {
                Ok(Some(c)) => c.get().await.and_then(|v| Ok(serde_json::to_value(v)?)),
                Ok(None) => Ok(Value::Null),
                Err(e) => Err(e),
            };
            outcome(step, r, |v| v)
        }
        "status" => outcome(step, ctx.plugin_status(), |v| v),
        "file-trust" => outcome(
            step,
            ctx.project_file_trust(std::path::Path::new(arg)).await,
            |t| json!({"trusted": t.trusted, "state": t.state}),
        ),
        "disable" | "enable" => {
            let row = arg.to_owned();
            let op = if name == "disable" {
                ControlOp::Disable { row }
            } else {
                ControlOp::Enable { row }
            };
            outcome(step, ctx.control(op).await, answer_json)
        }
        "reload" => {
            let (row, config) = arg.split_once(':').unwrap_or((arg, "{}"));
            let config: Value = serde_json::from_str(config).unwrap_or(Value::Null);
            let row = row.to_owned();
            outcome(
                step,
                ctx.control(ControlOp::Reload { row, config }).await,
                answer_json,
            )
        }
        "wait" => {
            let (row, state) = arg.split_once(':').unwrap_or((arg, "active"));
            let mut last = Value::Null;
            for _ in 0..500 {
                last = ctx
                    .plugin_status()
                    .ok()
                    .and_then(|v| v.as_array()?.iter().find(|r| r["row"] == row).cloned())
                    .unwrap_or(Value::Null);
                if last["state"] == state {
                    break;
                }
                sleep(Duration::from_millis(20)).await;
            }
            json!({"step": step, "ok": last["state"] == state, "value": last})
        }
        "sleep" => {
            sleep(Duration::from_millis(arg.parse().unwrap_or(0))).await;
            json!({"step": step, "ok": true})
        }
        "panic" => panic!("driver step panics on purpose"),
        other => json!({"step": other, "ok": false, "code": "PROOF", "message": "unknown step"}),
    }
}

keel_plugin_api::dispatches! {
    /// What the proof driver dispatches.
    pub struct Dispatches {
        pub proof_emit: ProofEmit,
        pub proof_waterfall: ProofWaterfall,
        pub proof_async_waterfall: ProofAsyncWaterfall,
        pub proof_parallel: ProofParallel,
        pub proof_serial: ProofSerial,
        #[declared_by("agent-loop")]
        pub status: Status,
    }
}

impl Plugin for ProofDriver {
    type Dispatches = Dispatches;

    fn manifest(&self) -> Manifest {
        Manifest::new("proof-driver", env!("CARGO_PKG_VERSION"))
            .description("runs a script of dispatch and lifecycle steps, one JSON line each")
            .provides::<Driver>()
            .command(
                CommandSpec::new("proof-echo", "Print the arguments as the plugin got them.")
                    .arg(ArgSpec::positional("word", "A word.").required())
                    .arg(
                        ArgSpec::option("times", "How many.")
                            .value_name("N")
                            .count(),
                    )
                    .subcommand(
                        CommandSpec::new("loud", "Shout it.").arg(ArgSpec::flag("twice", "Twice.")),
                    )
                    .subcommand(CommandSpec::new("quiet", "Whisper it.")),
            )
            .run_option(
                ArgSpec::option("proof_level", "How thorough the proof is.")
                    .values(&["low", "high"])
                    .default_value("low"),
            )
            .optional::<Counter>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        ctx.serve::<Driver, _>(Scripted(ctx))?;
        ctx.serve_named::<Command, _>(&service_name("proof-echo"), Echo(ctx))?;
        Ok(())
    }
}

/// The driver: runs the prompt as a script of steps.
struct Scripted(Context);

impl DriverProvider for Scripted {
    /// This driver takes no interrupt: the kernel's grace and teardown stop it.
    async fn interrupt(&self, _: DriverInterrupt) -> Result<()> {
        Err(Error::coded(
            ProofCode::Proof,
            "the proof driver takes no interrupt",
        ))
    }

    async fn run(&self, invocation: DriverInvocation) -> Result<DriverOutcome> {
        let ctx = self.0;
        let script = invocation.prompt.clone().unwrap_or_default();
        let mut exit_code = 0;
        let mut relaunch = None;
        for s in split_steps(&script) {
            if let Some(code) = s.strip_prefix("exit:") {
                exit_code = code.parse().unwrap_or(1);
                continue;
            }
            if s == "options" {
                print(json!({"step": "options", "ok": true, "value": invocation.options}));
                continue;
            }
            // `relaunch:P`: print the profile this run got, then ask to run again under P.
            if let Some(profile) = s.strip_prefix("relaunch:") {
                print(json!({"step": "relaunch", "ok": true, "value": {
                    "profile": invocation.profile,
                    "identity": invocation.profile_identity,
                    "explicit": invocation.profile_explicit,
                }}));
                relaunch = Some(Relaunch {
                    profile: profile.to_owned(),
                    reason: "the proof script asked".to_owned(),
                    ..Relaunch::default()
                });
                continue;
            }
            print(step(ctx, s).await);
        }
        Ok(DriverOutcome {
            exit_code,
            relaunch,
        })
    }
}

/// `keel proof-echo`: prints `{command, args, profile}` as one JSON line.
struct Echo(Context);

impl CommandProvider for Echo {
    async fn run(&self, invocation: CommandInvocation) -> Result<CommandOutcome> {
        let line = json!({
            "command": invocation.command,
            "args": invocation.args,
            "profile": invocation.profile,
        });
        self.0.write_stdout(&format!("{line}\n"))?;
        Ok(CommandOutcome { exit_code: 0 })
    }
}

keel_plugin_api::export_plugin!(ProofDriver);

/// A control answer as the JSON the steps print: a row answer as the row itself.
fn answer_json(answer: ControlAnswer) -> Value {
    match answer {
        ControlAnswer::Row(row) => serde_json::to_value(row),
        other => serde_json::to_value(other),
    }
    .unwrap_or(Value::Null)
}
