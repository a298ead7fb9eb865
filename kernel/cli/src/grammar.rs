//! The part of the command line plugins declare: their commands (`keel sessions …`) and the
//! driver's options of `keel run` / `keel resume` (`--output-format`, `--max-turns`, …).
//!
//! A plugin describes them in its manifest ([`CommandSpec`], [`ArgSpec`]); this module turns
//! the specs of the assembled profile into clap commands and arguments, and the parsed
//! matches back into the JSON object the plugin reads. So clap still checks every value and
//! prints every help page, while the grammar of a feature lives only in the plugin that owns
//! it: the binary knows no command name, option or value list of its own beyond the kernel's.

use clap::builder::PossibleValuesParser;
use clap::{Arg, ArgAction, ArgMatches, Args as _};
use keel_plugin_api::services::command::{ArgKind, ArgSpec, CommandSpec, ValueType};
use serde_json::{Map, Value};

use super::ProfileArgs;

/// Where plugin commands sit in `keel --help`: after the kernel's `run`, `resume`, `config`
/// and `plugins`, before `trust`, `lock` and `doctor`, in profile row order.
pub(super) const PLUGIN_ORDER: usize = 10;

/// The clap command for `spec`; its leaves also take the profile options (`--profile`, `-C`,
/// `-c`, `--patch`, `--trust-project`), as every command that assembles a profile does.
pub(super) fn command(spec: &CommandSpec, order: usize) -> clap::Command {
    let mut cmd = clap::Command::new(spec.name.clone());
    cmd = spec.args.iter().fold(cmd, |cmd, a| cmd.arg(arg(a)));
    if spec.subcommands.is_empty() {
        cmd = ProfileArgs::augment_args(cmd);
    } else {
        for (i, sub) in spec.subcommands.iter().enumerate() {
            cmd = cmd.subcommand(command(sub, i));
        }
        cmd = cmd.subcommand_required(true);
    }
    // After the profile options, whose derive would otherwise set its own about.
    if spec.about.contains('\n') {
        cmd = cmd.long_about(spec.about.clone());
    }
    cmd.about(help_text(first_line(&spec.about)))
        .display_order(order)
}

/// Ids the kernel's own arguments use: a declared argument may not take them.
const RESERVED_IDS: &[&str] = &[
    "profile",
    "dir",
    "overrides",
    "patches",
    "trust_project",
    "prompt",
    "help",
    "version",
];

/// Why `spec`, a command a plugin declares, cannot join the command line: a name that is not
/// `[a-z][a-z0-9-]*`, one of `taken` (the kernel's commands), or arguments that clash.
pub(super) fn check_command(spec: &CommandSpec, taken: &[&str]) -> Result<(), String> {
    if !is_word(&spec.name, '-') {
        return Err(format!(
            "command name {:?} is not [a-z][a-z0-9-]*",
            spec.name
        ));
    }
    if taken.contains(&spec.name.as_str()) {
        return Err(format!("command `{}` is the kernel's", spec.name));
    }
    check_args(&spec.args, &[]).map_err(|e| format!("`{}`: {e}", spec.name))?;
    let mut seen = Vec::new();
    for sub in &spec.subcommands {
        if seen.contains(&sub.name.as_str()) {
            return Err(format!("`{}` declares `{}` twice", spec.name, sub.name));
        }
        seen.push(sub.name.as_str());
        check_command(sub, &["help"]).map_err(|e| format!("`{}` {e}", spec.name))?;
        if sub
            .args
            .iter()
            .any(|a| spec.args.iter().any(|b| a.id == b.id))
        {
            return Err(format!(
                "`{} {}` repeats an argument id of `{}`",
                spec.name, sub.name, spec.name
            ));
        }
    }
    Ok(())
}

/// Why `args` cannot be arguments of one command: an id that is not `[a-z][a-z0-9_]*`, taken
/// by the kernel ([`RESERVED_IDS`]) or by `others`, or given twice.
pub(super) fn check_args(args: &[ArgSpec], others: &[&str]) -> Result<(), String> {
    let mut seen: Vec<&str> = others.to_vec();
    for arg in args {
        if !is_word(&arg.id, '_') {
            return Err(format!("argument id {:?} is not [a-z][a-z0-9_]*", arg.id));
        }
        if RESERVED_IDS.contains(&arg.id.as_str()) || seen.contains(&arg.id.as_str()) {
            return Err(format!("argument id `{}` is taken", arg.id));
        }
        seen.push(&arg.id);
    }
    Ok(())
}

fn is_word(text: &str, joiner: char) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == joiner)
}

/// The clap argument for `spec`.
pub(super) fn arg(spec: &ArgSpec) -> Arg {
    let mut arg = Arg::new(spec.id.clone()).help(help_text(&spec.help));
    arg = match spec.kind {
        ArgKind::Positional => arg.required(spec.required),
        ArgKind::Flag => return arg.long(spec.long()).action(ArgAction::SetTrue),
        ArgKind::Option => arg.long(spec.long()).required(spec.required),
    };
    arg = arg.value_name(
        spec.value_name
            .clone()
            .unwrap_or_else(|| spec.id.to_ascii_uppercase()),
    );
    if let Some(default) = &spec.default {
        arg = arg.default_value(default.clone());
    }
    match spec.value_type {
        ValueType::Count => arg.value_parser(clap::value_parser!(u64)),
        ValueType::String if !spec.values.is_empty() => {
            arg.value_parser(PossibleValuesParser::new(spec.values.clone()))
        }
        ValueType::String => arg,
    }
}

/// The values `specs` took in `matches`, by id: flags as booleans, counts as numbers, others
/// as strings; an option not given (and without a default) is left out.
pub(super) fn values(specs: &[ArgSpec], matches: &ArgMatches) -> Map<String, Value> {
    let mut out = Map::new();
    for spec in specs {
        let value = match (spec.kind, spec.value_type) {
            (ArgKind::Flag, _) => Some(Value::Bool(matches.get_flag(&spec.id))),
            (_, ValueType::Count) => matches.get_one::<u64>(&spec.id).map(|n| Value::from(*n)),
            (_, ValueType::String) => matches
                .get_one::<String>(&spec.id)
                .map(|s| Value::String(s.clone())),
        };
        if let Some(value) = value {
            out.insert(spec.id.clone(), value);
        }
    }
    out
}

/// The arguments of a parsed plugin command: its own values, and the chosen subcommand's
/// name as `"action"` with that subcommand's values beside them (nested subcommands are
/// flattened the same way, the innermost `action` winning). Also answers the leaf's matches,
/// which hold the profile options.
pub(super) fn invocation_args<'m>(
    spec: &CommandSpec,
    matches: &'m ArgMatches,
) -> (Map<String, Value>, &'m ArgMatches) {
    let mut args = values(&spec.args, matches);
    let Some((name, sub_matches)) = matches.subcommand() else {
        return (args, matches);
    };
    let Some(sub) = spec.subcommands.iter().find(|s| s.name == name) else {
        return (args, matches);
    };
    let (inner, leaf) = invocation_args(sub, sub_matches);
    args.insert("action".to_owned(), Value::String(name.to_owned()));
    args.extend(inner);
    (args, leaf)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// Help as clap's derive writes it from a doc comment: a one-line text loses its final period
/// (`Approval policy.` shows as `Approval policy`), so declared help reads like the kernel's own.
fn help_text(text: &str) -> String {
    match text.strip_suffix('.') {
        Some(short) if !text.contains('\n') && !short.ends_with('.') => short.to_owned(),
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sessions() -> CommandSpec {
        CommandSpec::new("sessions", "Inspect stored sessions.")
            .subcommand(
                CommandSpec::new("list", "List them.").arg(ArgSpec::flag("json", "JSON output.")),
            )
            .subcommand(
                CommandSpec::new("show", "Show one.")
                    .arg(ArgSpec::positional("session_id", "Session id.").required())
                    .arg(ArgSpec::option("at", "Up to.").value_name("SEQ").count()),
            )
    }

    fn parse(spec: &CommandSpec, argv: &[&str]) -> Result<Map<String, Value>, clap::Error> {
        let root = clap::Command::new("keel").subcommand(command(spec, 0));
        let m = root.try_get_matches_from(argv)?;
        let (_, sub) = m.subcommand().unwrap();
        Ok(invocation_args(spec, sub).0)
    }

    // Issue 13 item 2: the spec decides the shape the plugin reads, values typed.
    #[test]
    fn a_declared_command_parses_into_the_shape_its_plugin_reads() {
        let spec = sessions();
        assert_eq!(
            parse(&spec, &["keel", "sessions", "show", "s1", "--at", "7"]).unwrap(),
            *json!({"action": "show", "session_id": "s1", "at": 7})
                .as_object()
                .unwrap()
        );
        assert_eq!(
            parse(&spec, &["keel", "sessions", "list", "--profile", "p"]).unwrap(),
            *json!({"action": "list", "json": false})
                .as_object()
                .unwrap()
        );
    }

    // Issue 13 item 2: a declared grammar that would clash with the kernel's, or with itself,
    // is refused with a reason (clap would panic on it).
    #[test]
    fn clashing_declarations_are_refused() {
        let taken = ["run", "help"];
        assert!(check_command(&sessions(), &taken).is_ok());
        for bad in [
            CommandSpec::new("run", "Shadow the kernel."),
            CommandSpec::new("Bad Name", "x"),
            CommandSpec::new("x", "x").arg(ArgSpec::flag("profile", "x")),
            CommandSpec::new("x", "x")
                .arg(ArgSpec::flag("a", "x"))
                .arg(ArgSpec::flag("a", "y")),
            CommandSpec::new("x", "x")
                .subcommand(CommandSpec::new("s", "x"))
                .subcommand(CommandSpec::new("s", "y")),
            CommandSpec::new("x", "x")
                .arg(ArgSpec::flag("a", "x"))
                .subcommand(CommandSpec::new("s", "x").arg(ArgSpec::flag("a", "y"))),
        ] {
            assert!(check_command(&bad, &taken).is_err(), "{bad:?}");
        }
        assert!(check_args(&[ArgSpec::flag("prompt", "x")], &[]).is_err());
        assert!(check_args(&[ArgSpec::flag("level", "x")], &[]).is_ok());
    }

    // Usage errors stay clap's: a bad count, a missing positional, a value not on the list.
    #[test]
    fn values_are_checked_by_the_spec() {
        let spec = sessions();
        assert!(parse(&spec, &["keel", "sessions", "show", "s1", "--at", "x"]).is_err());
        assert!(parse(&spec, &["keel", "sessions", "show"]).is_err());
        assert!(parse(&spec, &["keel", "sessions"]).is_err());
        let mode = ArgSpec::option("level", "Level.").values(&["low", "high"]);
        let cmd = clap::Command::new("run").arg(arg(&mode));
        assert!(
            cmd.clone()
                .try_get_matches_from(["run", "--level", "x"])
                .is_err()
        );
        let m = cmd
            .try_get_matches_from(["run", "--level", "high"])
            .unwrap();
        assert_eq!(values(&[mode], &m)["level"], "high");
    }
}
