//! The `{{snake}}_greet` tool's logic: plain Rust on typed values, no kernel in sight, so it is
//! unit-tested directly. `tool.rs` makes it a keel tool.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::Config;

keel_plugin_api::error_codes! {
    /// Codes the `{{snake}}_greet` tool returns (in its error results, which the model reads).
    pub enum GreetCode in "{{name}}" {
        /// The `name` argument is empty or only spaces.
        EmptyName = "GREET_EMPTY_NAME", by "the `{{snake}}_greet` tool", retry Changed;
    }
}

/// The tool's arguments. Their JSON Schema, derived from this type, is what the model reads.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GreetArgs {
    /// Who to greet.
    pub name: String,
}

/// Greets `args.name` the way the row's `config` says.
///
/// # Errors
/// [`GreetCode::EmptyName`] when there is no one to greet.
pub fn greet(config: &Config, args: &GreetArgs) -> Result<String, (GreetCode, String)> {
    let name = args.name.trim();
    if name.is_empty() {
        return Err((
            GreetCode::EmptyName,
            "`name` is empty: say who to greet".to_owned(),
        ));
    }
    let bang = "!".repeat(usize::from(config.excitement));
    Ok(format!("{}, {name}{bang}", config.greeting))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(greeting: &str, excitement: u8) -> Config {
        Config {
            greeting: greeting.to_owned(),
            excitement,
        }
    }

    #[test]
    fn greets_with_the_configured_words() {
        let args: GreetArgs = serde_json::from_str(r#"{"name": " Ada "}"#).unwrap();
        assert_eq!(greet(&config("Ahoy", 2), &args).unwrap(), "Ahoy, Ada!!");
    }

    #[test]
    fn an_empty_name_is_a_coded_error() {
        let args = GreetArgs {
            name: "  ".to_owned(),
        };
        let (code, _) = greet(&config("Hi", 1), &args).unwrap_err();
        assert_eq!(code, GreetCode::EmptyName);
    }

    #[test]
    fn unknown_arguments_are_refused() {
        assert!(serde_json::from_str::<GreetArgs>(r#"{"name": "x", "nmae": "y"}"#).is_err());
    }
}
