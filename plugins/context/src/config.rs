//! The `context` row's config: when to compact, how far, what stays verbatim, and which
//! strategies run in which order (issue 14 items 2 and 4).

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

/// A compaction strategy, in the order the row lists them: the first one plans the
/// compaction, a later one is the fallback when it fails (a failed summary sinks instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Replace old tool-call groups with a stub naming their cold references (CTX-02).
    Sink,
    /// Replace them with a summary the model writes in a side request (off by default).
    Summarise,
}

/// The summarise strategy's settings.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SummariseConfig {
    /// The summary prompt: an absolute path (a profile names a file beside itself as
    /// `"${this_dir}/summarise.md"`). Read once, at activation.
    pub prompt: PathBuf,
    /// The provider of the side request (default: the request's).
    #[serde(default)]
    pub provider: Option<String>,
    /// The model of the side request (default: the request's, or the provider's default).
    #[serde(default)]
    pub model: Option<String>,
    /// The summary's token cap.
    #[serde(default = "default_summary_tokens")]
    #[schemars(range(min = 1))]
    pub max_tokens: u64,
}

fn default_summary_tokens() -> u64 {
    1024
}

/// The row config.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextConfig {
    /// A request whose estimate passes this share of (window − output reserve) is compacted
    /// before it is sent.
    #[serde(default = "default_threshold")]
    #[schemars(range(min = 0.05, max = 1.0))]
    pub threshold: f64,
    /// A compaction aims for this share of (window − output reserve): lower than the
    /// threshold, so a session compacts every few steps, not every step.
    #[serde(default = "default_target")]
    #[schemars(range(min = 0.05, max = 1.0))]
    pub target: f64,
    /// The newest tool-call groups that stay verbatim (lowered, down to one, only when the
    /// request cannot fit otherwise).
    #[serde(default = "default_keep_recent")]
    #[schemars(range(min = 1))]
    pub keep_recent_steps: usize,
    /// A single tool result larger than this goes to the model as its head and tail with a
    /// cold reference for the rest (item 4).
    #[serde(default = "default_result_cap")]
    #[schemars(range(min = 1024))]
    pub result_cap_bytes: usize,
    /// The strategies, in order.
    #[serde(default = "default_strategies")]
    pub strategies: Vec<Strategy>,
    /// Settings of the summarise strategy (required when it is listed).
    #[serde(default)]
    pub summarise: Option<SummariseConfig>,
    /// Bytes of a request per token before the provider reported usage (an adapter's own
    /// figure wins; reported usage wins over both).
    #[serde(default = "default_bytes_per_token")]
    #[schemars(range(min = 0.5, max = 16.0))]
    pub bytes_per_token: f64,
}

fn default_threshold() -> f64 {
    0.8
}
fn default_target() -> f64 {
    0.5
}
fn default_keep_recent() -> usize {
    4
}
fn default_result_cap() -> usize {
    32 * 1024
}
fn default_strategies() -> Vec<Strategy> {
    vec![Strategy::Sink]
}
fn default_bytes_per_token() -> f64 {
    4.0
}

impl ContextConfig {
    /// What the schema cannot say; the message names the key.
    ///
    /// # Errors
    /// The first inconsistency.
    pub fn check(&self) -> Result<(), String> {
        if self.target > self.threshold {
            return Err(format!(
                "`target` ({}) must not be above `threshold` ({})",
                self.target, self.threshold
            ));
        }
        if self.strategies.is_empty() {
            return Err("`strategies` must name at least one of \"sink\", \"summarise\"".into());
        }
        if self.strategies.contains(&Strategy::Summarise) {
            let Some(s) = &self.summarise else {
                return Err(
                    "`strategies` lists \"summarise\" but there is no `[summarise]` table with its `prompt`"
                        .into(),
                );
            };
            if !s.prompt.is_absolute() {
                return Err(format!(
                    "`summarise.prompt` ({}) must be an absolute path; name a file beside the profile as \"${{this_dir}}/{}\"",
                    s.prompt.display(),
                    s.prompt.display()
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> ContextConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn defaults_sink_at_eighty_percent_down_to_half() {
        let c = parse(json!({}));
        assert_eq!((c.threshold, c.target), (0.8, 0.5));
        assert_eq!(c.strategies, [Strategy::Sink]);
        assert_eq!(c.result_cap_bytes, 32 * 1024);
        assert!(c.check().is_ok());
    }

    #[test]
    fn inconsistent_configs_name_the_key() {
        let e = parse(json!({"threshold": 0.5, "target": 0.7}))
            .check()
            .unwrap_err();
        assert!(e.contains("`target`"), "{e}");
        let e = parse(json!({"strategies": ["summarise"]}))
            .check()
            .unwrap_err();
        assert!(e.contains("[summarise]"), "{e}");
        let e = parse(json!({"strategies": ["summarise"], "summarise": {"prompt": "s.md"}}))
            .check()
            .unwrap_err();
        assert!(e.contains("${this_dir}/s.md"), "{e}");
    }
}
