//! `system-prompt`: provides `keel.system-prompt` (LOOP-14). Method `"assemble"` takes
//! `{session_id?, cwd, tools?: [name]}` and answers `{text}`.
//!
//! It starts from the row config (`sections`: `[{id, order, text, complete?}]`, default one
//! base section; `variables`: a string table), adds the built-in variables (`cwd`, `date` in
//! UTC, `os`, `tools`) under the config's (so a profile can pin `date`), runs the
//! `system-prompt/assemble` waterfall so other plugins add or replace sections and variables,
//! and hands the result to [`assemble`], the SDK-free rules. Errors: `PROMPT_CONFLICT` (more
//! than one effective `complete` section), `INVALID_ARGUMENTS` (a foreign listener left
//! sections or variables that are not the typed shape).

pub mod assemble;

use std::collections::BTreeMap;

use keel_plugin_api::events::Typed;
use keel_plugin_api::events::prompt::{Assemble, PromptAssembly};
use keel_plugin_api::prelude::*;
use keel_plugin_api::services::prompt::{
    AssembleRequest, AssembledPrompt, PromptSection, SystemPrompt, SystemPromptProvider,
};
use schemars::JsonSchema;
use serde::Deserialize;

pub use assemble::{PromptError, Variables};

/// The row config.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The starting sections; absent → [`assemble::default_sections`].
    #[serde(default)]
    pub sections: Option<Vec<PromptSection>>,
    /// Extra `{{name}}` values; they win over the built-ins.
    #[serde(default)]
    pub variables: BTreeMap<String, String>,
}

/// What `assemble` takes.
pub type AssembleArgs = AssembleRequest;

impl Config {
    /// The sections and variables assembly starts from, before the waterfall.
    pub fn start(&self, args: &AssembleArgs, now_secs: i64) -> (Vec<PromptSection>, Variables) {
        let sections = self
            .sections
            .clone()
            .unwrap_or_else(assemble::default_sections);
        let mut vars = assemble::builtins(&args.cwd, &args.tools, now_secs);
        vars.extend(self.variables.clone());
        (sections, vars)
    }
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn assemble_call(ctx: Context, config: &Config, args: AssembleArgs) -> Result<AssembledPrompt> {
    let (sections, vars) = config.start(&args, now_secs());
    let mut payload = PromptAssembly {
        session_id: args.session_id.as_str().into(),
        sections: Typed::new(&sections)?,
        variables: Typed::new(&vars)?,
    };
    ctx.run_waterfall(crate::DISPATCH.assemble, &mut payload, |_| Ok(()))?;
    let sections = payload.sections.into_inner()?;
    let vars = payload.variables.into_inner()?;
    let text =
        assemble::assemble(sections, &vars).map_err(|e| Error::coded(e.code(), e.message()))?;
    Ok(AssembledPrompt { text })
}

/// The provider: the row config and the fiber's context.
struct Assembler {
    ctx: Context,
    config: Config,
}

impl SystemPromptProvider for Assembler {
    async fn assemble(&self, request: AssembleRequest) -> Result<AssembledPrompt> {
        assemble_call(self.ctx, &self.config, request)
    }
}

/// The plugin value.
#[derive(Default)]
struct SystemPromptPlugin;

keel_plugin_api::dispatches! {
    /// What the system-prompt row dispatches: the assembly waterfall.
    pub struct Dispatches {
        pub assemble: Assemble,
    }
}

impl Plugin for SystemPromptPlugin {
    type Dispatches = Dispatches;

    fn manifest(&self) -> Manifest {
        Manifest::new("system-prompt", env!("CARGO_PKG_VERSION"))
            .description("assembles the system prompt from sections, tools and variables")
            .provides::<SystemPrompt>()
            .config_type::<Config>()
            // Replacing the system prompt (or what is substituted into it) needs trust (issue
            // 23 item 6).
            .guard_keys(&["sections", "variables"])
    }

    async fn activate(&self, ctx: Context) -> Result<()> {
        let config: Config = ctx.config()?;
        ctx.serve::<SystemPrompt, _>(Assembler { ctx, config })?;
        Ok(())
    }
}

keel_plugin_api::export_plugin!(SystemPromptPlugin);

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn args(cwd: &str, tools: &[&str]) -> AssembleArgs {
        serde_json::from_value(json!({"session_id": "s", "cwd": cwd, "tools": tools})).unwrap()
    }

    #[test]
    fn loop14_config_variables_win_over_builtins() {
        let config: Config = serde_json::from_value(json!({
            "sections": [{"id": "x", "order": 0, "text": "{{date}} {{team}} {{cwd}}"}],
            "variables": {"date": "2000-01-01", "team": "core"}
        }))
        .unwrap();
        let (sections, vars) = config.start(&args("/w", &[]), 1_700_000_000);
        assert_eq!(
            assemble::assemble(sections, &vars),
            Ok("2000-01-01 core /w".to_owned())
        );
    }

    #[test]
    fn loop14_no_sections_in_config_means_the_default_base() {
        let (sections, vars) = Config::default().start(&args("/w", &["shell"]), 0);
        assert_eq!(sections, assemble::default_sections());
        assert_eq!(vars["tools"], "shell");
        let empty: Config = serde_json::from_value(json!({"sections": []})).unwrap();
        assert_eq!(empty.start(&args("/w", &[]), 0).0, vec![]);
    }

    #[test]
    fn config_rejects_unknown_keys_and_args_need_cwd() {
        assert!(serde_json::from_value::<Config>(json!({"section": []})).is_err());
        assert!(serde_json::from_value::<AssembleArgs>(json!({"tools": []})).is_err());
        let a: AssembleArgs = serde_json::from_value(json!({"cwd": "/w"})).unwrap();
        assert_eq!((a.session_id.as_str(), a.tools.len()), ("", 0));
    }
}
