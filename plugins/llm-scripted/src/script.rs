//! The replay script: its file formats (TOML or JSON), its step type, and the checks that make a
//! malformed script fail the row at activation instead of misbehaving mid-session.
//!
//! A script is a list of steps; step *n* answers the model call whose history holds *n*
//! assistant messages (see `replay`).

use std::path::{Path, PathBuf};

use keel_plugin_api::services::llm::LlmCode;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// How a step ends when it does not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Finish {
    /// Normal end (or `tool-calls` when the step has calls).
    Stop,
    /// The output cap was hit (`max-tokens`).
    Length,
}

/// A scripted failure: the step ends with `finish{error{code, message}}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScriptError {
    /// An LLM code, e.g. `RATE_LIMIT` (an unknown one is refused when the script loads).
    pub code: LlmCode,
    /// Message.
    pub message: String,
}

/// Token usage to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScriptUsage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
}

/// One scripted tool call.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScriptCall {
    /// Tool name.
    #[schemars(length(min = 1))]
    pub name: String,
    /// A string (sent raw) or a table/object (serialised to JSON); absent means `{}`.
    #[serde(default)]
    #[schemars(schema_with = "string_or_object")]
    pub arguments: Option<Value>,
}

fn string_or_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": ["string", "object"] })
}

impl ScriptCall {
    /// The raw argument text the model "produced".
    pub fn raw_arguments(&self) -> String {
        match &self.arguments {
            None => "{}".to_owned(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        }
    }
}

/// One model answer.
#[derive(Debug, Clone, PartialEq, Deserialize, Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// Assistant text.
    #[serde(default)]
    pub text: Option<String>,
    /// Reasoning text.
    #[serde(default)]
    pub reasoning: Option<String>,
    /// Tool calls, in order.
    #[serde(default)]
    pub tool_calls: Vec<ScriptCall>,
    /// How it ends (default `stop`).
    #[serde(default)]
    pub finish: Option<Finish>,
    /// A failure instead of a normal finish.
    #[serde(default)]
    pub error: Option<ScriptError>,
    /// Usage to report before the finish.
    #[serde(default)]
    pub usage: Option<ScriptUsage>,
    /// Wait this long before answering.
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// Wait this long between the streamed pieces (words) of the reasoning and the text, so a
    /// driver shows the first words before the answer ends (issue 26 item 1; default none).
    #[serde(default)]
    pub piece_delay_ms: Option<u64>,
}

/// A loaded, checked script.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    /// Where it came from, for messages (`script /path/x.toml` or `inline steps`).
    pub source: String,
    /// The steps.
    pub steps: Vec<Step>,
}

/// A file's top level: `steps = [...]` (TOML or JSON); a JSON file may also be a bare array.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StepsTable {
    steps: Vec<Step>,
}

/// Loads and checks a script file. Relative paths resolve against the working directory.
///
/// # Errors
/// A message naming the file and what is wrong with it.
pub fn load_file(path: &Path) -> Result<Script, String> {
    let shown = absolute(path);
    let source = format!("script {}", shown.display());
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {source}: {e}"))?;
    let is_json = match path.extension().and_then(|e| e.to_str()) {
        Some("json") => true,
        Some("toml") => false,
        _ => matches!(text.trim_start().chars().next(), Some('{' | '[')),
    };
    let steps = if is_json && text.trim_start().starts_with('[') {
        serde_json::from_str::<Vec<Step>>(&text)
            .map_err(|e| format!("{source} is not a valid JSON script: {e}"))?
    } else if is_json {
        serde_json::from_str::<StepsTable>(&text)
            .map_err(|e| format!("{source} is not a valid JSON script: {e}"))?
            .steps
    } else {
        toml::from_str::<StepsTable>(&text)
            .map_err(|e| format!("{source} is not a valid TOML script: {e}"))?
            .steps
    };
    check(Script { source, steps })
}

/// Checks inline steps from the row config.
///
/// # Errors
/// A message naming the step and what is wrong with it.
pub fn from_inline(steps: Vec<Step>) -> Result<Script, String> {
    check(Script {
        source: "inline steps".to_owned(),
        steps,
    })
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The rules serde cannot express.
fn check(script: Script) -> Result<Script, String> {
    let source = &script.source;
    if script.steps.is_empty() {
        return Err(format!("{source} has no steps"));
    }
    for (i, step) in script.steps.iter().enumerate() {
        let at = |what: &str| format!("{source}: step {i}: {what}");
        if step.error.is_some() && step.finish.is_some() {
            return Err(at("`error` and `finish` are exclusive"));
        }
        if let Some(e) = &step.error
            && e.message.trim().is_empty()
        {
            return Err(at("`error` needs a non-empty `message`"));
        }
        for (k, call) in step.tool_calls.iter().enumerate() {
            if call.name.trim().is_empty() {
                return Err(at(&format!("tool call {k} has an empty `name`")));
            }
            match &call.arguments {
                None | Some(Value::String(_) | Value::Object(_)) => {}
                Some(other) => {
                    return Err(at(&format!(
                        "tool call {k} (`{}`): `arguments` must be a string or a table/object, \
                         not {other}",
                        call.name
                    )));
                }
            }
        }
    }
    Ok(script)
}

#[cfg(test)]
#[path = "script_tests.rs"]
mod tests;
