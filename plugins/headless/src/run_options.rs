//! The options the headless driver adds to `keel run` / `keel resume` (issue 13 item 2), and
//! their check: the ids, help and values the `keel` binary's grammar is built from, and
//! [`Options`], what a run reads of them. Split from `run.rs`, the flow.

use keel_plugin_api::services::approval::ApprovalMode;
use keel_plugin_api::services::command::ArgSpec;
use keel_plugin_api::services::sandbox::SandboxMode;
use serde::Deserialize;
use serde_json::Value;

use crate::format::OutputFormat;
use crate::input::InputFormat;

/// The options this driver adds to `keel run` / `keel resume` (issue 13 item 2): their
/// spelling, help and values are defined here, once; the `keel` binary checks a value against
/// them and forwards it under its id.
pub fn run_options() -> Vec<ArgSpec> {
    let names = |all: &[&str]| all.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    vec![
        ArgSpec::option("output_format", "Output format on stdout.")
            .values(&names(OutputFormat::NAMES))
            .default_value("text"),
        ArgSpec::flag("ephemeral", "Do not persist the session."),
        ArgSpec::option("max_turns", "Stop after N turns.")
            .value_name("N")
            .count(),
        ArgSpec::option("sandbox", "Sandbox mode.")
            .values(&SandboxMode::ALL.map(SandboxMode::as_str)),
        ArgSpec::option("approval", "Approval policy.")
            .values(&ApprovalMode::ALL.map(ApprovalMode::as_str)),
        ArgSpec::option(
            "input_format",
            "Input on stdin: text (the prompt argument, or `-` for all of stdin) or stream-json (user messages, steers and interrupts as JSON lines while the run lasts).",
        )
        .values(&names(InputFormat::NAMES))
        .default_value("text"),
        ArgSpec::flag(
            "include_partial_messages",
            "With --output-format stream-json: also print the model's text and reasoning as it arrives, as Claude Code's stream_event lines.",
        ),
    ]
}

/// The options as the invocation carries them ([`run_options`]' ids).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct GivenOptions {
    #[serde(default)]
    output_format: Option<String>,
    #[serde(default)]
    ephemeral: bool,
    #[serde(default)]
    max_turns: Option<u64>,
    #[serde(default)]
    sandbox: Option<SandboxMode>,
    #[serde(default)]
    approval: Option<ApprovalMode>,
    #[serde(default)]
    input_format: Option<String>,
    #[serde(default)]
    include_partial_messages: bool,
}

/// The run options, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `--output-format`.
    pub format: OutputFormat,
    /// `--ephemeral`.
    pub ephemeral: bool,
    /// `--max-turns`.
    pub max_turns: Option<u64>,
    /// `--approval never|ask`.
    pub approval: Option<String>,
    /// `--sandbox read-only|workspace-write|danger-full-access`.
    pub sandbox: Option<String>,
    /// `--input-format` (issue 16 item 4).
    pub input: InputFormat,
    /// `--include-partial-messages` (issue 26 item 1; stream-json only).
    pub partial: bool,
}

impl Options {
    /// Checks the invocation's options (absent ones take their defaults).
    ///
    /// # Errors
    /// A usage message.
    pub fn parse(o: &serde_json::Map<String, Value>) -> Result<Options, String> {
        let given: GivenOptions = serde_json::from_value(Value::Object(o.clone()))
            .map_err(|e| format!("invalid run options: {e}"))?;
        let format = OutputFormat::parse(&given.output_format.map_or(Value::Null, Value::String))?;
        if given.include_partial_messages && format != OutputFormat::StreamJson {
            return Err(format!(
                "--include-partial-messages needs --output-format stream-json (the output \
                 format is {format})"
            ));
        }
        Ok(Options {
            format,
            partial: given.include_partial_messages,
            ephemeral: given.ephemeral,
            max_turns: given.max_turns,
            approval: given.approval.map(|m| m.as_str().to_owned()),
            sandbox: given.sandbox.map(|m| m.as_str().to_owned()),
            input: InputFormat::parse(given.input_format.as_deref())?,
        })
    }
}
