//! `keel secrets set NAME | list [--json] | rm NAME` (ARCHITECTURE §11), as plain Rust over
//! the [`SharedVault`]: `set` reads the value from the given stdin (trailing newlines trimmed;
//! empty is an error, and so is a value too short or too common to be a secret,
//! `SECRET_WEAK`), `list` prints names and aliases only. A change reloads the vault so the
//! running process fills and scrubs the new set. Errors print one line `keel: error[CODE]: …`
//! on stderr with exit code 2; no message ever carries a value.

use std::io::{Read, Write};

use keel_plugin_api::services::command::{ArgSpec, CommandSpec};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{FirewallError, codes};
use crate::store::{SecretValue, alias, validate_name};
use crate::vault::SharedVault;

/// Output streams of a command.
pub struct Io<'a> {
    /// stdin (the value of `set`).
    pub input: &'a mut (dyn Read + Send),
    /// stdout.
    pub out: &'a mut (dyn Write + Send),
    /// stderr.
    pub err: &'a mut (dyn Write + Send),
}

impl std::fmt::Debug for Io<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Io")
    }
}

fn name(n: &str) -> Result<String, FirewallError> {
    validate_name(n)?;
    Ok(n.to_owned())
}

fn read_value(name: &str, input: &mut (dyn Read + Send)) -> Result<SecretValue, FirewallError> {
    let mut bytes = Vec::new();
    input
        .read_to_end(&mut bytes)
        .map_err(|e| FirewallError::io("reading the value from stdin", &e))?;
    let mut text = String::from_utf8(bytes).map_err(|_| {
        FirewallError::new(
            codes::SECRET_NOT_UTF8,
            format!("the value for {name} on stdin is not UTF-8"),
        )
    })?;
    let keep = text.trim_end_matches(['\n', '\r']).len();
    text.truncate(keep);
    if text.is_empty() {
        return Err(FirewallError::new(
            codes::SECRET_EMPTY,
            format!(
                "no value for {name} on stdin (pipe it in: printf %s \"$VALUE\" | keel secrets set {name})"
            ),
        ));
    }
    if crate::weak::is_weak(&text) {
        return Err(FirewallError::new(
            codes::SECRET_WEAK,
            format!(
                "the value for {name} is too short (under {} bytes) or too common to be a secret; \
                 scrubbing it would rewrite every word that contains it (a server that wants no \
                 key needs no secret)",
                crate::weak::MIN_SECRET_BYTES
            ),
        ));
    }
    Ok(SecretValue::new(text))
}

fn set(vault: &SharedVault, n: &str, io: &mut Io<'_>) -> Result<(), FirewallError> {
    let n = name(n)?;
    let value = read_value(&n, io.input)?;
    vault.store().set(&n, &value)?;
    vault.reload()?;
    let _ = writeln!(io.out, "stored secret {n} (the model sees {})", alias(&n));
    Ok(())
}

fn list(vault: &SharedVault, as_json: bool, io: &mut Io<'_>) -> Result<(), FirewallError> {
    let names = vault.store().names()?;
    if as_json {
        let rows: Vec<Value> = names
            .iter()
            .map(|n| json!({"name": n, "alias": alias(n)}))
            .collect();
        let _ = writeln!(io.out, "{}", json!({ "secrets": rows }));
        return Ok(());
    }
    let width = names.iter().map(String::len).max().unwrap_or(0).max(4);
    let _ = writeln!(io.out, "{:<width$}  ALIAS", "NAME");
    for n in &names {
        let _ = writeln!(io.out, "{n:<width$}  {}", alias(n));
    }
    Ok(())
}

fn rm(vault: &SharedVault, n: &str, io: &mut Io<'_>) -> Result<(), FirewallError> {
    let n = name(n)?;
    vault.store().remove(&n)?;
    vault.reload()?;
    let _ = writeln!(io.out, "removed secret {n}");
    Ok(())
}

/// `keel secrets …` as the plugin declares it (issue 13 item 2: a profile without this row
/// has no `secrets` command).
pub fn secrets_spec() -> CommandSpec {
    CommandSpec::new(
        "secrets",
        "Manage secrets: the value of `set` is read from stdin, `list` shows names only.",
    )
    .subcommand(
        CommandSpec::new(
            "set",
            "Store a secret; its value is read from stdin (never from the command line).",
        )
        .arg(
            ArgSpec::positional(
                "name",
                "Secret name (the model sees the alias `sec_<name>`).",
            )
            .required(),
        ),
    )
    .subcommand(
        CommandSpec::new("list", "Secret names and aliases, never values.")
            .arg(ArgSpec::flag("json", "JSON output.")),
    )
    .subcommand(
        CommandSpec::new("rm", "Delete a secret.")
            .arg(ArgSpec::positional("name", "Secret name.").required()),
    )
}

/// `keel secrets …`'s arguments, as [`secrets_spec`] shapes them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum SecretsArgs {
    /// `keel secrets set NAME` (the value comes from stdin).
    Set {
        /// Secret name.
        name: String,
    },
    /// `keel secrets list [--json]`.
    List {
        /// JSON output.
        #[serde(default)]
        json: bool,
    },
    /// `keel secrets rm NAME`.
    Rm {
        /// Secret name.
        name: String,
    },
}

/// `keel secrets …`.
pub fn secrets(vault: &SharedVault, args: &SecretsArgs, io: &mut Io<'_>) -> i32 {
    let r = match args {
        SecretsArgs::Set { name } => set(vault, name, io),
        SecretsArgs::List { json } => list(vault, *json, io),
        SecretsArgs::Rm { name } => rm(vault, name, io),
    };
    match r {
        Ok(()) => 0,
        Err(e) => {
            let line = format!("keel: error[{}]: {}", e.code, e.message);
            let _ = writeln!(io.err, "{}", keel_plugin_api::sdk::one_line(&line));
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SecretStore;

    fn run(vault: &SharedVault, args: Value, stdin: &str) -> (i32, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut input = stdin.as_bytes();
        let args: SecretsArgs = serde_json::from_value(args).unwrap();
        let code = secrets(
            vault,
            &args,
            &mut Io {
                input: &mut input,
                out: &mut out,
                err: &mut err,
            },
        );
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    #[test]
    fn set_list_rm_reload_the_vault_and_never_print_values() {
        let dir = tempfile::tempdir().unwrap();
        let vault = SharedVault::load(SecretStore::new(dir.path())).unwrap();
        let (code, out, err) = run(&vault, json!({"action":"set","name":"GH"}), "ghp_value\r\n");
        assert_eq!((code, err.as_str()), (0, ""));
        assert!(out.contains("sec_GH") && !out.contains("ghp_value"));
        assert_eq!(
            vault.snapshot().fill("sec_GH").as_deref(),
            Some("ghp_value")
        );

        let (code, out, _) = run(&vault, json!({"action":"list","json":false}), "");
        assert_eq!(code, 0);
        assert_eq!(out, "NAME  ALIAS\nGH    sec_GH\n");
        let (_, out, _) = run(&vault, json!({"action":"list","json":true}), "");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v, json!({"secrets":[{"name":"GH","alias":"sec_GH"}]}));

        let (code, _, _) = run(&vault, json!({"action":"rm","name":"GH"}), "");
        assert_eq!(code, 0);
        assert!(vault.snapshot().aliases().is_empty());
    }

    #[test]
    fn errors_exit_2_with_a_code_and_no_value() {
        let dir = tempfile::tempdir().unwrap();
        let vault = SharedVault::load(SecretStore::new(dir.path())).unwrap();
        let cases = [
            (
                json!({"action":"set","name":"X"}),
                "\n",
                codes::SECRET_EMPTY,
            ),
            (
                json!({"action":"set","name":"bad-name"}),
                "v4lue",
                codes::SECRET_NAME_INVALID,
            ),
            (
                json!({"action":"set","name":"W"}),
                "None\n",
                codes::SECRET_WEAK,
            ),
            (
                json!({"action":"set","name":"W"}),
                "v4lue",
                codes::SECRET_WEAK,
            ),
            (
                json!({"action":"rm","name":"NOPE"}),
                "",
                codes::SECRET_NOT_FOUND,
            ),
        ];
        // A set without NAME or an unknown action is not a `SecretsArgs`: the SDK refuses it
        // (`INVALID_ARGUMENTS`) before this code runs.
        for bad in [json!({"action":"set"}), json!({"action":"dance"})] {
            assert!(serde_json::from_value::<SecretsArgs>(bad).is_err());
        }
        for (args, stdin, code) in cases {
            let (exit, out, err) = run(&vault, args, stdin);
            assert_eq!(exit, 2);
            assert!(out.is_empty());
            assert!(err.starts_with(&format!("keel: error[{code}]: ")), "{err}");
            assert!(!err.contains("v4lue"));
        }
        let mut input: &[u8] = &[0xff, 0xfe];
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = secrets(
            &vault,
            &SecretsArgs::Set { name: "B".into() },
            &mut Io {
                input: &mut input,
                out: &mut out,
                err: &mut err,
            },
        );
        assert_eq!(code, 2);
        assert!(
            String::from_utf8(err)
                .unwrap()
                .contains(codes::SECRET_NOT_UTF8.code())
        );
    }
}
