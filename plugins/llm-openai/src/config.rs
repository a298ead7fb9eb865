//! The adapter row's config (ARCHITECTURE §11): its serde type and the JSON Schema the kernel
//! validates the row against before activation. Both deny unknown keys, so a typo fails the row
//! instead of being ignored.

use keel_llm_http_kit::defaults;
use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Default credential reference.
pub const DEFAULT_KEY_REF: &str = "OPENAI_API_KEY";
/// Default provider name registered with `keel.llm`.
pub const DEFAULT_PROVIDER: &str = "openai";
/// Default idle-stream watchdog (the HTTP kit's, shared by every adapter).
pub const DEFAULT_TIMEOUT_MS: u64 = defaults::TIMEOUT_MS;
/// Default TCP/TLS connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = defaults::CONNECT_TIMEOUT_MS;
/// Default first-byte deadline (request sent → response head).
pub const DEFAULT_FIRST_BYTE_TIMEOUT_MS: u64 = defaults::FIRST_BYTE_TIMEOUT_MS;

/// The row config.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// API root, e.g. `https://api.openai.com/v1`; `/chat/completions` is appended.
    #[schemars(regex(pattern = "^https?://"))]
    pub base_url: String,
    /// The row's model; registered as the provider's default model.
    #[schemars(length(min = 1))]
    pub model: String,
    /// Name of the credential (an environment-variable-style reference), never the key. Empty
    /// (`""`): a server that wants no key; requests carry no `Authorization` header and no
    /// credential is resolved (issue 23 item 2).
    #[serde(default = "default_key_ref")]
    #[schemars(regex(pattern = "^([A-Za-z_][A-Za-z0-9_]*)?$"))]
    pub api_key_ref: String,
    /// Provider name this row registers with `keel.llm`.
    #[serde(default = "default_provider")]
    #[schemars(length(min = 1))]
    pub provider: String,
    /// Output cap used when the call config has none.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u64>,
    /// Temperature used when the call config has none.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub temperature: Option<f64>,
    /// Extra request headers (they may override `User-Agent`, never `Authorization`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Idle watchdog: once the response head has arrived, the longest wait for the next
    /// stream event (or error-body chunk).
    #[serde(default = "defaults::timeout_ms")]
    #[schemars(range(min = 1))]
    pub timeout_ms: u64,
    /// Connect timeout (TCP and TLS), part of the first-byte wait.
    #[serde(default = "defaults::connect_timeout_ms")]
    #[schemars(range(min = 1))]
    pub connect_timeout_ms: u64,
    /// First-byte deadline: the longest wait from sending the request (connecting included)
    /// to the response head.
    #[serde(default = "defaults::first_byte_timeout_ms")]
    #[schemars(range(min = 1))]
    pub first_byte_timeout_ms: u64,
    /// `tool_choice` sent with every request that offers tools (never without tools). Default
    /// `"auto"`: some servers (llama-cpp-python) read a missing `tool_choice` as `"none"` and
    /// the model then never calls a tool (issue 11 item 1).
    #[serde(default = "ToolChoice::auto")]
    #[schemars(schema_with = "tool_choice_schema")]
    pub tool_choice: ToolChoice,
    /// Whether requests stream: `true`, `false` or `"auto"` (default; see [`StreamMode`]).
    #[serde(default)]
    #[schemars(schema_with = "stream_schema")]
    pub stream: StreamMode,
    /// The model's context window in tokens, over the table of defaults (`limits`).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub context_window: Option<u64>,
    /// Tokens kept free for the answer when no `max_tokens` is set (`limits`).
    #[serde(default)]
    pub output_reserve: Option<u64>,
    /// Bytes of request per token for this model, for the context manager's estimate.
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub bytes_per_token: Option<f64>,
}

/// The row's `tool_choice`: a mode, or one named function the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum ToolChoice {
    /// `"auto"`, `"none"` or `"required"`.
    Mode(ToolChoiceMode),
    /// `{"type": "function", "function": {"name": …}}`.
    Function(NamedFunction),
}

/// The string forms of `tool_choice`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoiceMode {
    /// The model decides.
    Auto,
    /// No tool call.
    None,
    /// At least one tool call.
    Required,
}

impl ToolChoiceMode {
    /// The wire string.
    pub const fn as_str(self) -> &'static str {
        match self {
            ToolChoiceMode::Auto => "auto",
            ToolChoiceMode::None => "none",
            ToolChoiceMode::Required => "required",
        }
    }
}

/// `{"type": "function", "function": {"name": …}}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedFunction {
    /// Always `"function"`.
    #[serde(rename = "type")]
    pub kind: FunctionKind,
    /// The function.
    pub function: FunctionName,
}

/// The only `type` a named tool choice has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FunctionKind {
    /// `"function"`.
    Function,
}

/// `{"name": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionName {
    /// The tool's name (one of the offered tools).
    pub name: String,
}

impl ToolChoice {
    /// `"auto"`, the default.
    pub fn auto() -> Self {
        ToolChoice::Mode(ToolChoiceMode::Auto)
    }

    /// The wire value.
    pub fn to_json(&self) -> Value {
        match self {
            ToolChoice::Mode(m) => json!(m.as_str()),
            ToolChoice::Function(f) => {
                json!({ "type": "function", "function": { "name": f.function.name } })
            }
        }
    }

    /// The function a named choice forces, if it is one.
    pub fn function_name(&self) -> Option<&str> {
        match self {
            ToolChoice::Function(f) => Some(&f.function.name),
            _ => None,
        }
    }
}

/// The row's `stream` key (issue 11 item 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamMode {
    /// `true`: every request streams. An empty stream is still asked once more without
    /// streaming, to learn its real error (or take its answer).
    Always,
    /// `false`: no request streams.
    Never,
    /// `"auto"` (default): requests stream; when a stream comes back empty while tools were
    /// offered and the same request answers without streaming, the row stops streaming for
    /// the rest of the run.
    #[default]
    Auto,
}

impl<'de> Deserialize<'de> for StreamMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Bool(true) => Ok(StreamMode::Always),
            Value::Bool(false) => Ok(StreamMode::Never),
            Value::String(s) if s == "auto" => Ok(StreamMode::Auto),
            other => Err(serde::de::Error::custom(format!(
                "stream: expected true, false or \"auto\", got {other}"
            ))),
        }
    }
}

fn default_key_ref() -> String {
    DEFAULT_KEY_REF.to_owned()
}

fn default_provider() -> String {
    DEFAULT_PROVIDER.to_owned()
}

/// The JSON Schema the kernel validates the row against: derived from [`Config`], with
/// `tool_choice` and `stream` spelled by hand so a bad value is told what it should be.
pub fn schema() -> Value {
    schemars::schema_for!(Config).to_value()
}

// if/then/else rather than oneOf, so a bad value is told what it should be.
fn tool_choice_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": ["string", "object"],
        "if": { "type": "string" },
        "then": { "enum": ["auto", "none", "required"] },
        "else": {
            "properties": {
                "type": { "const": "function" },
                "function": {
                    "type": "object",
                    "properties": { "name": { "type": "string", "minLength": 1 } },
                    "required": ["name"],
                    "additionalProperties": false
                }
            },
            "required": ["type", "function"],
            "additionalProperties": false
        }
    })
}

fn stream_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "enum": [true, false, "auto"] })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_the_optional_keys() {
        let c: Config =
            serde_json::from_value(json!({"base_url": "http://x/v1", "model": "m"})).unwrap();
        assert_eq!(c.api_key_ref, "OPENAI_API_KEY");
        assert_eq!(c.provider, "openai");
        assert_eq!(c.timeout_ms, 300_000);
        assert_eq!(c.connect_timeout_ms, 10_000);
        assert_eq!(c.first_byte_timeout_ms, 90_000);
        assert!(c.headers.is_empty());
    }

    // Issue 10 item 15: a dead endpoint fails within minutes, not 3 × 300 s. The deadlines
    // nest (connect within first byte), the first-byte one is minutes, and it is its own key.
    #[test]
    fn the_first_byte_deadline_is_minutes_and_configurable() {
        const MINUTE: u64 = 60_000;
        let d: Config =
            serde_json::from_value(json!({"base_url": "http://x/v1", "model": "m"})).unwrap();
        assert!(d.connect_timeout_ms < d.first_byte_timeout_ms);
        assert!((MINUTE..=2 * MINUTE).contains(&d.first_byte_timeout_ms));
        assert!(d.first_byte_timeout_ms < d.timeout_ms);
        // Three attempts (the loop's default 2 retries) stay under five minutes.
        assert!(3 * d.first_byte_timeout_ms < 5 * MINUTE);
        let c: Config = serde_json::from_value(
            json!({"base_url": "http://x/v1", "model": "m", "first_byte_timeout_ms": 250}),
        )
        .unwrap();
        assert_eq!((c.first_byte_timeout_ms, c.timeout_ms), (250, 300_000));
        assert_eq!(
            schema()["properties"]["first_byte_timeout_ms"]["minimum"],
            json!(1)
        );
    }

    // Issue 11 items 1 and 2: `tool_choice` defaults to "auto" and takes the three modes or
    // one named function; `stream` defaults to "auto" and takes true/false/"auto". Anything
    // else is refused by the type and by the schema the kernel checks first.
    #[test]
    fn tool_choice_and_stream_keys() {
        let parse = |extra: Value| -> Result<Config, serde_json::Error> {
            let mut v = json!({"base_url": "http://x/v1", "model": "m"});
            for (k, val) in extra.as_object().unwrap() {
                v[k] = val.clone();
            }
            serde_json::from_value(v)
        };
        let d = parse(json!({})).unwrap();
        assert_eq!(d.tool_choice.to_json(), json!("auto"));
        assert_eq!(d.stream, StreamMode::Auto);
        for mode in ["auto", "none", "required"] {
            let c = parse(json!({"tool_choice": mode})).unwrap();
            assert_eq!(c.tool_choice.to_json(), json!(mode));
            assert_eq!(c.tool_choice.function_name(), None);
        }
        let named = json!({"type": "function", "function": {"name": "write_file"}});
        let c = parse(json!({"tool_choice": named})).unwrap();
        assert_eq!(c.tool_choice.to_json(), named);
        assert_eq!(c.tool_choice.function_name(), Some("write_file"));
        assert_eq!(
            parse(json!({"stream": true})).unwrap().stream,
            StreamMode::Always
        );
        assert_eq!(
            parse(json!({"stream": false})).unwrap().stream,
            StreamMode::Never
        );
        assert_eq!(
            parse(json!({"stream": "auto"})).unwrap().stream,
            StreamMode::Auto
        );
        for bad in [
            json!({"tool_choice": "sometimes"}),
            json!({"tool_choice": {"type": "function", "function": {}}}),
            json!({"tool_choice": {"type": "tool", "function": {"name": "x"}}}),
            json!({"stream": "yes"}),
            json!({"stream": 1}),
        ] {
            assert!(parse(bad.clone()).is_err(), "{bad} was accepted");
        }
        let props = &schema()["properties"];
        assert_eq!(props["stream"]["enum"], json!([true, false, "auto"]));
        assert_eq!(
            props["tool_choice"]["then"],
            json!({"enum": ["auto", "none", "required"]})
        );
    }

    // Issue 14 item 1: the limit keys are optional, and the schema the kernel checks before
    // activation refuses a zero window and a bytes_per_token that is not above 0.
    #[test]
    fn limit_keys_are_optional_and_bounded_in_the_schema() {
        let d: Config =
            serde_json::from_value(json!({"base_url": "http://x/v1", "model": "m"})).unwrap();
        assert_eq!(
            (d.context_window, d.output_reserve, d.bytes_per_token),
            (None, None, None)
        );
        let c: Config = serde_json::from_value(json!({
            "base_url": "http://x/v1", "model": "m",
            "context_window": 16000, "output_reserve": 500, "bytes_per_token": 3.5
        }))
        .unwrap();
        assert_eq!(
            (c.context_window, c.output_reserve, c.bytes_per_token),
            (Some(16000), Some(500), Some(3.5))
        );
        let props = &schema()["properties"];
        assert_eq!(props["context_window"]["minimum"], json!(1));
        assert_eq!(props["bytes_per_token"]["exclusiveMinimum"], json!(0));
    }

    #[test]
    fn unknown_keys_are_refused() {
        let r: Result<Config, _> =
            serde_json::from_value(json!({"base_url": "http://x", "model": "m", "api_key": "k"}));
        assert!(r.is_err());
        assert_eq!(schema()["additionalProperties"], json!(false));
    }
}
