//! The `mcp` row's config (issue 15 item 1): `servers = { NAME = { … } }`, one entry per MCP
//! server, stdio (`command`, `args`, `env`, `cwd`) or streamable HTTP (`url`, `headers`).
//!
//! Secrets are never literal values in a profile: a value of `env` or `headers` may hold
//! `${credential:NAME}` placeholders, resolved through `keel.credentials` when the server is
//! connected (each time: a rotated value applies at the next restart). Everything here is
//! checked before anything starts, so a typo is one line naming the row and the server.
//! The whole row is guarded (`guard_row`): a project layer that adds a server — a command keel
//! would run, a URL it would send headers to — needs `keel trust`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

/// The row config.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// The servers, by name (`[A-Za-z0-9_-]+`, no `__`): their tools are `mcp__NAME__TOOL`.
    #[serde(default)]
    pub servers: BTreeMap<String, ServerConfig>,
}

/// How a stdio server is confined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxChoice {
    /// Under the profile's sandbox mode (`keel.sandbox` `confine`), like `shell`.
    #[default]
    Inherit,
    /// Unconfined: the escape hatch, said on stderr at start and in `keel mcp list`.
    None,
}

/// One server.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// stdio: the program (a name looked up on `PATH`, or a path).
    #[serde(default)]
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// stdio: variables set in the server's environment (explicit: they win); values may
    /// hold `${credential:NAME}`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// stdio: names passed through from keel's environment beside the base allow-list
    /// (`HOME`, `PATH`, …; an entry ending in `*` is a prefix). A `KEEL_*`, credential-like or
    /// held credential name never passes (issue 23 item 1).
    #[serde(default)]
    #[schemars(inner(regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]*\*?$")))]
    pub pass_env: Vec<String>,
    /// stdio: working directory (absolute; default: keel's).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// streamable HTTP: the endpoint (`http://` or `https://`).
    #[serde(default)]
    pub url: Option<String>,
    /// streamable HTTP: headers sent with every request; values may hold
    /// `${credential:NAME}` (`Authorization = "Bearer ${credential:GITHUB_TOKEN}"`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// `false`: configured but not started (`keel mcp list` says `disabled`).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// `true` (default): a failure to start before the first request refuses the run (exit 2).
    /// `false`: the failure is one stderr line, the run goes on without the server's tools
    /// and the server is retried with backoff.
    #[serde(default = "yes")]
    pub required: bool,
    /// How long the start (spawn or connect, handshake, first tool list) may take, ms.
    #[serde(default = "default_startup_timeout_ms")]
    #[schemars(range(min = 1))]
    pub startup_timeout_ms: u64,
    /// Deadline of one tool call, ms (0: only the pipeline's `default_timeout_ms`).
    #[serde(default)]
    pub call_timeout_ms: u64,
    /// stdio: `inherit` (default) or `none`.
    #[serde(default)]
    pub sandbox: SandboxChoice,
    /// First restart delay after a crash, ms; doubles per failed attempt.
    #[serde(default = "default_restart_backoff_ms")]
    #[schemars(range(min = 1))]
    pub restart_backoff_ms: u64,
    /// Longest restart delay, ms.
    #[serde(default = "default_max_restart_backoff_ms")]
    #[schemars(range(min = 1))]
    pub max_restart_backoff_ms: u64,
}

fn yes() -> bool {
    true
}
fn default_startup_timeout_ms() -> u64 {
    30_000
}
fn default_restart_backoff_ms() -> u64 {
    500
}
fn default_max_restart_backoff_ms() -> u64 {
    30_000
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking JSON-RPC lines on stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
}

impl ServerConfig {
    /// stdio or HTTP (after [`McpConfig::check`]).
    pub fn transport(&self) -> Transport {
        if self.url.is_some() {
            Transport::Http
        } else {
            Transport::Stdio
        }
    }

    /// The restart delay after `attempt` failed attempts (1-based).
    pub fn backoff_ms(&self, attempt: u32) -> u64 {
        let shift = attempt.saturating_sub(1).min(20);
        self.restart_backoff_ms
            .saturating_mul(1u64 << shift)
            .min(self.max_restart_backoff_ms.max(self.restart_backoff_ms))
    }

    fn check(&self, name: &str) -> Result<(), String> {
        let at = |m: String| format!("server '{name}': {m}");
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => {
                return Err(at("give `command` (stdio) or `url` (HTTP), not both".into()));
            }
            (None, None) => {
                return Err(at(
                    "give `command` (stdio) or `url` (streamable HTTP)".into()
                ));
            }
            (Some(c), None) => {
                if c.trim().is_empty() {
                    return Err(at("`command` is empty".into()));
                }
                if !self.headers.is_empty() {
                    return Err(at("`headers` is for HTTP servers (`url`)".into()));
                }
                if let Some(cwd) = &self.cwd
                    && !cwd.is_absolute()
                {
                    return Err(at(format!(
                        "`cwd` must be absolute, not {} (use ${{this_dir}}/…)",
                        cwd.display()
                    )));
                }
            }
            (None, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(at(format!(
                        "`url` must be http:// or https://, not {url:?}"
                    )));
                }
                if !self.args.is_empty()
                    || !self.env.is_empty()
                    || !self.pass_env.is_empty()
                    || self.cwd.is_some()
                {
                    return Err(at(
                        "`args`, `env`, `pass_env` and `cwd` are for stdio servers (`command`)"
                            .into(),
                    ));
                }
                if self.sandbox == SandboxChoice::None {
                    return Err(at("`sandbox` is for stdio servers (`command`)".into()));
                }
            }
        }
        for (key, map) in [("env", &self.env), ("headers", &self.headers)] {
            for (k, v) in map {
                placeholders(v).map_err(|e| at(format!("`{key}.{k}`: {e}")))?;
            }
        }
        keel_plugin_api::services::child_env::check_pass_env(&self.pass_env).map_err(at)?;
        for a in &self.args {
            if a.contains("${credential:") {
                return Err(at(
                    "`args` may not hold credentials (any process can read them); use `env`".into(),
                ));
            }
        }
        Ok(())
    }
}

impl McpConfig {
    /// Every server's keys, before anything starts.
    ///
    /// # Errors
    /// One line naming the server and the key.
    pub fn check(&self) -> Result<(), String> {
        for (name, server) in &self.servers {
            check_name(name)?;
            server.check(name)?;
        }
        Ok(())
    }
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !name.contains("__")
        && name.len() <= 32;
    if ok {
        Ok(())
    } else {
        Err(format!(
            "server name {name:?}: use 1-32 of A-Z a-z 0-9 _ - without `__` (tools are mcp__NAME__TOOL)"
        ))
    }
}

/// One piece of a value: literal text or a credential reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Verbatim.
    Text(String),
    /// `${credential:NAME}`.
    Credential(String),
}

/// Splits a value into text and `${credential:NAME}` references (`NAME` as
/// `[A-Z_][A-Z0-9_]*`).
///
/// # Errors
/// An unterminated placeholder or a bad name.
pub fn placeholders(value: &str) -> Result<Vec<Piece>, String> {
    const OPEN: &str = "${credential:";
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(i) = rest.find(OPEN) {
        if i > 0 {
            out.push(Piece::Text(rest[..i].to_owned()));
        }
        let after = &rest[i + OPEN.len()..];
        let Some(end) = after.find('}') else {
            return Err(format!("unterminated `{OPEN}…}}`"));
        };
        let name = &after[..end];
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !valid {
            return Err(format!(
                "credential reference {name:?} is not a name like GITHUB_TOKEN"
            ));
        }
        out.push(Piece::Credential(name.to_owned()));
        rest = &after[end + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest.to_owned()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> McpConfig {
        let v: serde_json::Value = toml::from_str(toml_text).unwrap();
        serde_json::from_value(v).unwrap()
    }

    // Issue 15 item 1: the keys are checked before anything starts, naming the server.
    #[test]
    fn bad_servers_are_named() {
        for (text, says) in [
            ("[servers.a]\n", "give `command`"),
            ("[servers.a]\ncommand='x'\nurl='http://h'\n", "not both"),
            ("[servers.a]\nurl='ftp://h'\n", "http:// or https://"),
            ("[servers.a]\nurl='http://h'\nargs=['x']\n", "for stdio"),
            ("[servers.a]\ncommand='x'\nheaders={A='b'}\n", "for HTTP"),
            ("[servers.a]\ncommand='x'\ncwd='rel'\n", "absolute"),
            (
                "[servers.a]\ncommand='x'\nenv={T='${credential:lower}'}\n",
                "not a name",
            ),
            (
                "[servers.a]\ncommand='x'\nenv={T='${credential:X'}\n",
                "unterminated",
            ),
            (
                "[servers.a]\ncommand='x'\nargs=['${credential:X}']\n",
                "may not hold",
            ),
            ("[servers.'a__b']\ncommand='x'\n", "without `__`"),
        ] {
            let e = parse(text).check().unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
        let ok = parse("[servers.e-1]\ncommand='node'\nenv={T='Bearer ${credential:GH_TOKEN}!'}\n");
        ok.check().unwrap();
    }

    #[test]
    fn placeholders_split_text_and_references() {
        assert_eq!(
            placeholders("Bearer ${credential:TOK}").unwrap(),
            vec![
                Piece::Text("Bearer ".into()),
                Piece::Credential("TOK".into())
            ]
        );
        assert_eq!(
            placeholders("plain").unwrap(),
            vec![Piece::Text("plain".into())]
        );
    }

    // cargo mutants: the defaults a bare server gets, every stdio key refused beside `url`,
    // names with `_`, and references at the edges of a value.
    #[test]
    fn defaults_http_only_keys_and_reference_edges() {
        let bare = parse("[servers.a_b]\ncommand='x'\n");
        bare.check().unwrap();
        let a = &bare.servers["a_b"];
        assert!(a.enabled && a.required);
        assert_eq!(
            (
                a.startup_timeout_ms,
                a.restart_backoff_ms,
                a.max_restart_backoff_ms
            ),
            (30_000, 500, 30_000)
        );
        for extra in ["env={A='b'}", "cwd='/tmp'", "sandbox='none'"] {
            let text = format!("[servers.a]\nurl='http://h'\n{extra}\n");
            let e = parse(&text).check().unwrap_err();
            assert!(e.contains("stdio"), "{text}: {e}");
        }
        parse("[servers.a]\nurl='https://h'\nheaders={A='${credential:_T1}'}\n")
            .check()
            .unwrap();
        assert_eq!(
            placeholders("${credential:A}-${credential:B_2}x").unwrap(),
            vec![
                Piece::Credential("A".into()),
                Piece::Text("-".into()),
                Piece::Credential("B_2".into()),
                Piece::Text("x".into()),
            ]
        );
        assert!(placeholders("${credential:}").is_err(), "an empty name");
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let s =
            parse("[servers.a]\ncommand='x'\nrestart_backoff_ms=100\nmax_restart_backoff_ms=350\n");
        let a = &s.servers["a"];
        assert_eq!(
            [
                a.backoff_ms(1),
                a.backoff_ms(2),
                a.backoff_ms(3),
                a.backoff_ms(9)
            ],
            [100, 200, 350, 350]
        );
    }
}
