//! The driver seam: `keel run` / `keel resume` assemble the profile and hand the parsed command
//! line to the one row that provides `keel.driver` (headless, acp, …).

use serde::{Deserialize, Serialize};

crate::contract! {
    /// The driver service: the one row that takes control of `keel run` / `keel resume`.
    pub contract Driver = "keel.driver", version 1;
    provider DriverProvider;
    client DriverClient;
    /// Runs the command line; answers the process exit code (or a relaunch).
    fn run(DriverInvocation) -> DriverOutcome;
    /// The kernel owns the process's signals: on SIGINT, SIGTERM or SIGHUP it prints `keel:
    /// interrupted (SIG…)` and calls this, and the run in flight (or the next one, if none
    /// has started yet) stops cleanly — abort the turn, wait for it to close, flush and close
    /// the session — and returns `exit_code`. The kernel waits a grace period for `run` to
    /// return (a second signal cuts it short), then tears the rows down and exits with
    /// `exit_code` either way. A driver without the method answers `UNKNOWN_METHOD` and gets
    /// the same grace.
    fn interrupt(DriverInterrupt) -> ();
}

/// What the kernel passes to the driver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriverInvocation {
    /// `run` or `resume`.
    pub command: String,
    /// Session id for `resume`.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The prompt (`-` already resolved to stdin by the driver if it chooses to).
    #[serde(default)]
    pub prompt: Option<String>,
    /// Working directory (absolute, after `-C`).
    pub cwd: String,
    /// Profile name.
    pub profile: String,
    /// The running profile as a session records it (issue 11 item 7): how `--profile` names it
    /// again and a digest of its assembled config. `None` from a kernel that does not tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_identity: Option<ProfileIdentity>,
    /// Whether `--profile` was given on the command line (`false`: the kernel's default,
    /// `default`, or the profile a [`Relaunch`] chose). Only then does a driver resuming a
    /// session recorded under another profile run it under this one.
    #[serde(default)]
    pub profile_explicit: bool,
    /// The options the driver declared (`Manifest::run_option`), by id, as the command line
    /// gave them or their declared defaults; flags are `true`/`false`. The driver reads them
    /// into its own type.
    #[serde(default)]
    pub options: serde_json::Map<String, serde_json::Value>,
    /// Whether the process's stderr is a terminal. The kernel's output guard puts a pipe in
    /// place of the real descriptor (SEC-03), so a driver's own check would always say no;
    /// `None` from a kernel that does not tell, and the driver checks for itself.
    #[serde(default)]
    pub stderr_is_terminal: Option<bool>,
}

/// A profile as a driver records it with a session, so that `keel resume` can run the session
/// under the profile it was created with (issue 11 item 7).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileIdentity {
    /// What `--profile` takes to select it again: the profile's name, or the absolute path of
    /// its file when it was given as a path.
    pub name: String,
    /// blake3 (lowercase hex) of the assembled config: the canonical JSON (keys sorted, no
    /// whitespace) of `{"kernel": …, "rows": […]}` exactly as `keel config dump --json` shows
    /// them — every layer, `--patch` and `-c` included, launcher-only patches excluded (a dump
    /// never shows those, CFG-08).
    pub digest: String,
    /// The run's non-secret `-c ROW.KEY=VALUE` arguments as given, in order (issue 23 item 3):
    /// `keel resume` applies them again. A `-c` whose key names a secret (`api_key`, `token`,
    /// `password`, `headers`, `env`, …) is never recorded; a `…_ref` key is a reference, kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<String>,
    /// The run's `--patch` files (absolute path and digest), in order: `keel resume` applies
    /// them again, and stops when one changed or vanished (`RECORDED_PATCH_CHANGED`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<RecordedPatch>,
}

/// A `--patch` file as a session records it ([`ProfileIdentity::patches`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedPatch {
    /// The file's absolute path.
    pub path: String,
    /// blake3 (lowercase hex) of its bytes.
    pub digest: String,
}

/// What the driver returns: the process exit code (ARCHITECTURE §11).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriverOutcome {
    /// 0 completed, 1 other turn end, 2 usage/config, 128 + n stopped by signal n (130 SIGINT,
    /// 143 SIGTERM, 129 SIGHUP).
    pub exit_code: i32,
    /// Run the same command line again under another profile (`exit_code` is then ignored):
    /// the headless driver asks for it when `keel resume` without `--profile` meets a session
    /// recorded under another profile, before it did anything. The kernel shuts every row
    /// down, assembles that profile and runs the driver once more with the same invocation
    /// (`profile_explicit: false`); it honours one relaunch per process, never a second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relaunch: Option<Relaunch>,
}

/// A driver's request to run its command under another profile ([`DriverOutcome::relaunch`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Relaunch {
    /// The profile, as `--profile` takes it ([`ProfileIdentity::name`]).
    pub profile: String,
    /// Why, for the error the kernel reports when that profile cannot be assembled (e.g.
    /// `session S was created with it`).
    pub reason: String,
    /// Recorded `-c` arguments to apply before the command line's own (issue 23 item 3): an
    /// explicit `-c` of the same key, later, wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<String>,
    /// Recorded `--patch` files to apply again; the kernel checks each digest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<RecordedPatch>,
}

/// What the kernel passes to `interrupt`: the signal that asks the run to stop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverInterrupt {
    /// `SIGINT`, `SIGTERM` or `SIGHUP`.
    pub signal: String,
    /// What `run` returns once it stopped: 128 + the signal's number.
    pub exit_code: i32,
}

/// Words of a key that name a secret value.
const SECRET_WORDS: &[&str] = &[
    "key",
    "secret",
    "token",
    "password",
    "passwd",
    "credential",
    "credentials",
    "auth",
    "authorization",
    "cookie",
    "bearer",
    "pat",
];

/// Keys whose value is a map that may hold secrets (`Authorization` headers, a child's env).
const SECRET_KEYS: &[&str] = &["headers", "env", "pass_env"];

/// Whether `-c arg` may be recorded in [`ProfileIdentity::overrides`] (issue 23 item 3): its
/// key (the part after `ROW.`, before `=`) names no secret. A malformed argument never got
/// this far (resolution refused it).
pub fn recordable_override(arg: &str) -> bool {
    let Some((path, _)) = arg.split_once('=') else {
        return false;
    };
    let key = path.split_once('.').map_or(path, |(_, key)| key).trim();
    let top = key.split('.').next().unwrap_or(key);
    if SECRET_KEYS.contains(&top) {
        return false;
    }
    let last = key.rsplit('.').next().unwrap_or(key).to_ascii_lowercase();
    let words: Vec<&str> = last.split(['_', '-']).collect();
    if words.last() == Some(&"ref") {
        return true;
    }
    !words.iter().any(|w| SECRET_WORDS.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_never_recorded_references_are() {
        for ok in [
            "llm-openai.base_url=http://x/v1",
            "llm-openai.api_key_ref=LLM_CRED",
            "llm-openai.model=local",
            "agent-loop.max_tokens=100",
        ] {
            assert!(recordable_override(ok), "{ok}");
        }
        for secret in [
            "llm-openai.api_key=sk-1",
            "x.token=abc",
            "x.client_secret=abc",
            "llm-openai.headers={Authorization=\"Bearer x\"}",
            "tool-shell.env={A=\"b\"}",
            "x.password=p",
            "malformed",
        ] {
            assert!(!recordable_override(secret), "{secret}");
        }
    }
}
