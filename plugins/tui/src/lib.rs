//! `tui`: the interactive terminal driver (issue 26 item 2, ARCHITECTURE §11): `keel chat
//! [--resume ID]`, and bare `keel` on a terminal (its command declares `on_bare_terminal`; the
//! kernel knows no command by name). It provides `keel.command.chat`, requires `keel.agent`,
//! and uses `keel.approval`, `keel.sandbox`, `keel.session` and `keel.llm` when rows provide
//! them.
//!
//! This file is only the SDK adapter: the command's grammar, the listeners that feed the
//! running chat (`agent/delta`, `session/event`, `approval/answer`, and `agent/request` for
//! `/model`), and the command's `run`. The job lives in SDK-light modules:
//!
//! - [`chat`]: the session and the loop (messages, steers, Ctrl-C, leaving, slash commands);
//! - [`view`]: the inline viewport (scrollback lines, the live region redrawn in place);
//! - [`editor`]: the input line (multi-line editing, history browsing);
//! - [`terminal`]: the mode (viewport or plain text), raw mode and the input thread;
//! - [`transcript`]: how log events read on screen (compact tool calls);
//! - [`history`], [`slash`], [`ui`]: the history file, the commands, the loop's channel.
//!
//! With no chat running every listener returns at once, so the row costs `keel run` one
//! lock per event (issue 26's budget for a row with nothing to do).

pub mod chat;
pub mod editor;
pub mod history;
pub mod slash;
pub mod terminal;
pub mod transcript;
pub mod ui;
pub mod view;

use std::sync::{Arc, Mutex};

use futures::channel::oneshot;
use keel_plugin_api::events::Typed;
use keel_plugin_api::events::agent::{AgentPoint, Delta, DeltaData, Request};
use keel_plugin_api::events::approval::{Answer, ApprovalQuestion};
use keel_plugin_api::events::session::{SessionEvent, SessionEventNotice};
use keel_plugin_api::events::subagent::{ChildPoint, ChildStarted, ChildStartedData};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::agent::{AgentClient, AgentService};
use keel_plugin_api::services::approval::{Approval, ApprovalMode, ApprovalOutcome, AskAnswer};
use keel_plugin_api::services::command::{
    ArgSpec, Command, CommandInvocation, CommandOutcome, CommandProvider, CommandSpec, service_name,
};
use keel_plugin_api::services::llm::{Llm, LlmCallConfig};
use keel_plugin_api::services::sandbox::{Sandbox, SandboxMode};
use keel_plugin_api::services::session::Sessions;

use crate::chat::{Chat, ChatArgs, Deps, ModelOverride, Start};
use crate::terminal::{Input, Mode, RawMode};
use crate::ui::{Tap, Ui};

/// The command's name.
pub const COMMAND: &str = "chat";

/// `keel chat`'s grammar: `--resume`, and the session options `keel run` has.
pub fn spec() -> CommandSpec {
    CommandSpec::new(
        COMMAND,
        "Chat with the agent in this terminal (also `keel` alone on a terminal).\n\nFinished lines go to the terminal's scrollback; only the line being written, running tools, approval questions, the status line and the input line are redrawn. Enter sends (and steers a running turn), Alt-Enter or a trailing \\ adds a line, Ctrl-C stops the turn, Ctrl-C twice or Ctrl-D leaves; /help lists the commands. NO_COLOR, TERM=dumb or a stdout that is not a terminal give plain text.",
    )
    .on_bare_terminal()
    .arg(ArgSpec::option("resume", "Continue this stored session.").value_name("SESSION_ID"))
    .arg(ArgSpec::option("sandbox", "Sandbox mode.").values(&SandboxMode::ALL.map(SandboxMode::as_str)))
    .arg(ArgSpec::option("approval", "Approval policy.").values(&ApprovalMode::ALL.map(ApprovalMode::as_str)))
    .arg(ArgSpec::flag("ephemeral", "Do not persist the session."))
}

/// The command's provider.
struct ChatCommand {
    ctx: Context,
    agent: AgentClient,
    tap: Tap,
    model: ModelOverride,
}

impl CommandProvider for ChatCommand {
    async fn run(&self, inv: CommandInvocation) -> Result<CommandOutcome> {
        let ctx = self.ctx;
        let args: ChatArgs = inv.parse_args().map_err(|e| {
            Error::coded(
                keel_plugin_api::codes::ContractCode::InvalidArguments,
                format!("`keel {}`: {e}", inv.command),
            )
        })?;
        let terminal = inv.terminal.unwrap_or_default();
        let mode = terminal::mode(
            terminal.stdin,
            terminal.stdout,
            std::env::var("TERM").ok().as_deref(),
            std::env::var("NO_COLOR").ok().as_deref(),
        );
        let history = ctx.keel_home().ok().map(|home| {
            let file = history::path(&home);
            let entries = history::load(&file);
            (file, entries)
        });
        let deps = Deps {
            agent: self.agent.clone(),
            approval: ctx.get_client::<Approval>()?,
            sandbox: ctx.get_client::<Sandbox>()?,
            sessions: ctx.get_client::<Sessions>()?,
            out: Box::new(move |text: &str| {
                let _ = ctx.write_stdout(text);
            }),
            model: Arc::clone(&self.model),
        };
        let start = Start {
            args,
            cwd: inv.cwd.clone(),
            mode,
            size: terminal::size(),
            model: default_model(ctx).await,
            history,
        };
        let rx = self.tap.open();
        let code = match mode {
            Mode::Terminal { .. } => {
                // Restored on every way out, a future the kernel drops at SIGTERM included.
                let _screen = Screen::take(ctx);
                let _input = Input::keys(self.tap.clone());
                Chat::new(deps, start).run(rx).await
            }
            Mode::Plain => {
                let _input = Input::lines(self.tap.clone());
                Chat::new(deps, start).run(rx).await
            }
        };
        self.tap.close();
        Ok(CommandOutcome { exit_code: code })
    }
}

/// The terminal while a chat draws on it: raw mode, bracketed paste, the hidden cursor; all
/// three undone on drop.
struct Screen {
    ctx: Context,
    _raw: Option<RawMode>,
}

impl Screen {
    fn take(ctx: Context) -> Screen {
        let raw = RawMode::enable()
            .map_err(|e| tracing::warn!("raw mode is not available: {e}"))
            .ok();
        let _ = ctx.write_stdout("\x1b[?25l\x1b[?2004h");
        Screen { ctx, _raw: raw }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = self.ctx.write_stdout("\x1b[?2004l\x1b[?25h");
    }
}

/// The default provider's model, for the status line.
async fn default_model(ctx: Context) -> String {
    if let Ok(Some(llm)) = ctx.get_client::<Llm>()
        && let Ok(list) = llm.providers().await
        && let Some(model) = list.providers.into_iter().find_map(|p| p.default_model)
    {
        return model;
    }
    "model".to_owned()
}

/// The row config: none.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Config {}

/// The plugin value.
#[derive(Default)]
struct Tui;

impl Plugin for Tui {
    type Dispatches = ();

    fn manifest(&self) -> Manifest {
        Manifest::new("tui", env!("CARGO_PKG_VERSION"))
            .description("interactive terminal driver: `keel chat`, and `keel` alone on a terminal")
            .command(spec())
            .requires::<AgentService>()
            .optional::<Approval>()
            .optional::<Sandbox>()
            .optional::<Sessions>()
            .optional::<Llm>()
            .config_type::<Config>()
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let agent = ctx.client::<AgentService>()?;
        let tap = Tap::default();
        let model: ModelOverride = Arc::new(Mutex::new(None));
        let t = tap.clone();
        ctx.on::<Delta>(
            ListenerOptions::default(),
            move |p: &AgentPoint<DeltaData>| {
                if let Some(tx) = t.sender() {
                    let _ = tx.unbounded_send(Ui::Delta {
                        session: p.session_id.to_string(),
                        step: p.step,
                        data: p.data.get()?,
                    });
                }
                Ok(())
            },
        )?;
        let t = tap.clone();
        ctx.on::<SessionEvent>(ListenerOptions::default(), move |n: &SessionEventNotice| {
            if let Some(tx) = t.sender()
                && matches!(
                    n.kind.as_str(),
                    "assistant/message" | "tool/call" | "tool/result" | "turn/end"
                )
            {
                let _ = tx.unbounded_send(Ui::Logged {
                    session: n.session_id.to_string(),
                    kind: n.kind.to_string(),
                    record: serde_json::from_str(n.record.as_str())?,
                });
            }
            Ok(())
        })?;
        let t = tap.clone();
        ctx.on::<ChildStarted>(
            ListenerOptions::default(),
            move |c: &ChildPoint<ChildStartedData>| {
                t.send(Ui::Child {
                    parent_session: c.parent_session.to_string(),
                    parent_call_id: c.parent_call_id.to_string(),
                    child_session: c.child_session.to_string(),
                });
                Ok(())
            },
        )?;
        let t = tap.clone();
        ctx.on_serial::<Answer, _, _>(ListenerOptions::default(), move |question| {
            let sender = t.sender();
            let parsed = question.get();
            async move {
                let Some(tx) = sender else {
                    return Ok(None);
                };
                let question: ApprovalQuestion = parsed?;
                let (reply, answer) = oneshot::channel();
                if tx.unbounded_send(Ui::Ask { question, reply }).is_err() {
                    return Ok(None);
                }
                // The chat dropping the question (it ended) cancels it.
                let outcome = answer.await.unwrap_or(ApprovalOutcome::Cancelled);
                Typed::new(&AskAnswer { outcome }).map(Some)
            }
        })?;
        let m = Arc::clone(&model);
        ctx.async_waterfall::<Request, _, _>(
            ListenerOptions::default(),
            move |mut point, next| {
                let chosen = m
                    .lock()
                    .ok()
                    .and_then(|m| m.clone())
                    .filter(|(session, _)| *session == point.session_id.as_str())
                    .map(|(_, model)| model);
                async move {
                    if let Some(model) = chosen {
                        let mut config: LlmCallConfig = point.data.get()?;
                        config.model = model;
                        point.data = Typed::new(&config)?;
                    }
                    next.run(point).await
                }
            },
        )?;
        ctx.serve_named::<Command, _>(
            &service_name(COMMAND),
            ChatCommand {
                ctx,
                agent,
                tap,
                model,
            },
        )?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(Tui);
