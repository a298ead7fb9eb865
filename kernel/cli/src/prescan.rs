//! The profile options read before the command line is parsed: the grammar of `keel run` and
//! of plugin commands depends on the profile they name (`--profile`, `-C`, `-c`, `--patch`,
//! `--trust-project`), so these are picked out of the raw arguments first. clap then parses the
//! whole line against the profile's grammar and checks them again.
//!
//! The scan stops at `--`; a value that merely looks like one of these options (a prompt
//! `"--profile"` before `--`) is read as the option, which clap would also do.

use std::ffi::OsString;
use std::path::PathBuf;

use super::ProfileArgs;

/// The profile options in `argv` (`argv[0]` is the program), and the command: the first word
/// before `--` that is neither an option nor a profile option's value.
pub(super) fn profile_args(argv: &[OsString]) -> (ProfileArgs, Option<String>) {
    let mut out = ProfileArgs::default();
    let mut word = None;
    let mut args = argv.iter().skip(1);
    while let Some(arg) = args.next() {
        let Some(text) = arg.to_str() else {
            continue;
        };
        let mut next = || args.next().cloned();
        match text {
            "--" => break,
            "--trust-project" => out.trust_project = true,
            "--profile" => out.profile = next().map(|v| v.to_string_lossy().into_owned()),
            "-C" => out.dir = next().map(PathBuf::from),
            "-c" => out
                .overrides
                .extend(next().map(|v| v.to_string_lossy().into_owned())),
            "--patch" => out.patches.extend(next().map(PathBuf::from)),
            _ => {
                if word.is_none() && !text.starts_with('-') {
                    word = Some(text.to_owned());
                } else if let Some(v) = text.strip_prefix("--profile=") {
                    out.profile = Some(v.to_owned());
                } else if let Some(v) = text.strip_prefix("--patch=") {
                    out.patches.push(PathBuf::from(v));
                } else if let Some(v) = text.strip_prefix("-C").filter(|v| !v.is_empty()) {
                    out.dir = Some(PathBuf::from(v.strip_prefix('=').unwrap_or(v)));
                } else if let Some(v) = text.strip_prefix("-c").filter(|v| !v.is_empty()) {
                    out.overrides
                        .push(v.strip_prefix('=').unwrap_or(v).to_owned());
                }
            }
        }
    }
    (out, word)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(args: &[&str]) -> ProfileArgs {
        let argv: Vec<OsString> = std::iter::once("keel")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect();
        profile_args(&argv).0
    }

    // Issue 13 item 2: every spelling clap accepts for the profile options, anywhere before `--`.
    #[test]
    fn profile_options_are_found_in_every_spelling() {
        let a = scan(&[
            "sessions",
            "list",
            "--profile=p",
            "-Cdir",
            "-c",
            "a.b=1",
            "-cx.y=2",
            "--patch",
            "f.toml",
            "--patch=g.toml",
            "--trust-project",
        ]);
        assert_eq!(a.profile.as_deref(), Some("p"));
        assert_eq!(a.dir, Some(PathBuf::from("dir")));
        assert_eq!(a.overrides, ["a.b=1", "x.y=2"]);
        assert_eq!(
            a.patches,
            [PathBuf::from("f.toml"), PathBuf::from("g.toml")]
        );
        assert!(a.trust_project);
        let b = scan(&["run", "--profile", "q", "--", "--profile", "r"]);
        assert_eq!(b.profile.as_deref(), Some("q"));
        assert_eq!(scan(&["run", "task"]).profile, None);
        let words = |args: &[&str]| {
            let argv: Vec<OsString> = std::iter::once("keel")
                .chain(args.iter().copied())
                .map(OsString::from)
                .collect();
            profile_args(&argv).1
        };
        assert_eq!(
            words(&["--profile", "p", "-c", "a.b=1", "sessions", "list"]).as_deref(),
            Some("sessions")
        );
        assert_eq!(words(&["--help"]), None);
    }
}
