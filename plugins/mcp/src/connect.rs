//! Opening one connection (issue 15 items 1 and 4): the stdio child — its program found,
//! its environment scrubbed, its argv confined by `keel.sandbox`, its stderr kept in a bounded
//! log — or the streamable HTTP client with its headers; then the MCP handshake.
//!
//! A stdio server runs under the profile's sandbox mode by default, exactly as `shell` does:
//! the sandbox row's `confine` answers the argv to spawn (bubblewrap: the whole file system
//! read-only, the writable roots of the mode read-write, keel's own files masked, a fresh pid
//! namespace, dying with keel, no network unless the sandbox row allows it). node and any
//! other interpreter on the host still run, since `/` is visible read-only. With `sandbox =
//! "none"` the child is spawned as is, and that is said on stderr at every start. The child
//! leads its own process group, so a stop reaches its whole tree.
//!
//! The environment is the shared allow-list ([`ChildEnv`]: the base names and the server's
//! `pass_env` taken from keel's environment, never a `KEEL_*`, credential-like or held
//! credential name: issue 23 item 1), plus the server's `env` with `${credential:NAME}`
//! resolved through `keel.credentials` (which registers each value with the firewall, so it is
//! scrubbed from anything model-bound) or, without a credentials row, from keel's own
//! environment. The child speaks over [`stdio::Stdio`], which fails a message past 16 MiB at once
//! and keeps the child's exit status for the failure reason (issue 23 items 8 and 17).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use keel_plugin_api::prelude::*;
use keel_plugin_api::services::child_env::{ChildEnv, held_references};
use keel_plugin_api::services::credentials::{self, Credentials};
use keel_plugin_api::services::sandbox::{ConfineRequest, PolicyRequest, Sandbox};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::io::AsyncBufReadExt;

use crate::config::{Piece, SandboxChoice, ServerConfig, Transport, placeholders};
use crate::stdio::{self, Fault};

/// Lines of a server's stderr kept, and the longest line kept.
const LOG_LINES: usize = 200;
const LOG_LINE_BYTES: usize = 1000;

/// A server's stderr: the last [`LOG_LINES`] lines (never keel's stdout).
#[derive(Debug, Default)]
pub struct StderrLog(Mutex<VecDeque<String>>);

impl StderrLog {
    /// Appends a line (cut to [`LOG_LINE_BYTES`]).
    pub fn push(&self, line: &str) {
        let mut end = line.len().min(LOG_LINE_BYTES);
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        let mut q = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if q.len() == LOG_LINES {
            q.pop_front();
        }
        q.push_back(line[..end].to_owned());
    }

    /// The last non-empty line.
    pub fn last(&self) -> Option<String> {
        let q = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        q.iter().rev().find(|l| !l.trim().is_empty()).cloned()
    }

    /// Every kept line.
    pub fn lines(&self) -> Vec<String> {
        let q = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        q.iter().cloned().collect()
    }
}

/// The client side of one connection: says who we are, and passes tool-list changes on.
#[derive(Clone)]
pub struct Handler {
    /// Server name (logs).
    pub server: String,
    /// Notified on `notifications/tools/list_changed`.
    pub changed: Arc<tokio::sync::Notify>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("keel", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "tools/list_changed");
        self.changed.notify_one();
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        tracing::debug!(server = %self.server, progress = params.progress, total = ?params.total, "progress");
    }
}

/// A live connection.
pub type Live = RunningService<RoleClient, Handler>;

/// What a start produced besides the connection.
#[derive(Debug, Clone, Default)]
pub struct Started {
    /// The child's pid (stdio; the runner's when confined).
    pub pid: Option<u32>,
    /// How it is confined, for `keel mcp list`.
    pub confinement: String,
}

/// Resolves `${credential:NAME}` in `value`.
async fn resolve_value(ctx: &Context, value: &str) -> Result<String, String> {
    let mut out = String::new();
    for piece in placeholders(value)? {
        match piece {
            Piece::Text(t) => out.push_str(&t),
            Piece::Credential(name) => {
                let service = ctx.get_client::<Credentials>().ok().flatten();
                let found = credentials::resolve_value(service, &name, None)
                    .await
                    .map_err(|e| format!("credential {name}: {e}"))?;
                let v = found.ok_or_else(|| {
                    format!("credential {name} is not set (`keel secrets`/credentials.toml/env)")
                })?;
                out.push_str(&v);
            }
        }
    }
    Ok(out)
}

async fn resolve_map(
    ctx: &Context,
    map: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for (k, v) in map {
        out.insert(k.clone(), resolve_value(ctx, v).await?);
    }
    Ok(out)
}

/// `command` as a path: a name is looked up on `PATH`, a path is taken relative to `cwd`.
///
/// # Errors
/// Not found, or not executable.
pub fn find_program(command: &str, cwd: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt as _;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if command.contains('/') {
        let p = cwd.join(command);
        return if executable(&p) {
            Ok(p)
        } else {
            Err(format!("command `{command}` is not an executable file"))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(command))
        .find(|p| executable(p))
        .ok_or_else(|| format!("command `{command}` not found on PATH"))
}

/// The child's environment: the allow-list of keel's (never a held credential), plus
/// `explicit` (the resolved `env`, the user's deliberate choice).
async fn child_env(
    ctx: &Context,
    config: &ServerConfig,
    explicit: BTreeMap<String, String>,
) -> Result<Vec<(std::ffi::OsString, std::ffi::OsString)>, String> {
    let service = ctx.get_client::<Credentials>().ok().flatten();
    let held = held_references(service)
        .await
        .map_err(|e| format!("cannot ask keel.credentials what it holds: {e}"))?;
    let mut env = ChildEnv::from_process(&config.pass_env, &held);
    env.extend(explicit);
    Ok(env.into_vec())
}

/// Spawns (stdio) or connects (HTTP) and runs the handshake. The caller bounds the time.
///
/// # Errors
/// One phrase saying what failed (the server's last stderr line when it has one).
pub async fn open(
    ctx: &Context,
    server: &str,
    config: &ServerConfig,
    handler: Handler,
    log: Arc<StderrLog>,
    fault: Arc<Fault>,
) -> Result<(Live, Started), String> {
    match config.transport() {
        Transport::Http => open_http(ctx, config, handler).await,
        Transport::Stdio => open_stdio(ctx, server, config, handler, log, fault).await,
    }
}

async fn open_http(
    ctx: &Context,
    config: &ServerConfig,
    handler: Handler,
) -> Result<(Live, Started), String> {
    let url = config.url.clone().unwrap_or_default();
    let mut headers = HashMap::new();
    for (k, v) in resolve_map(ctx, &config.headers).await? {
        let name =
            http::HeaderName::try_from(k.as_str()).map_err(|e| format!("header {k:?}: {e}"))?;
        let value =
            http::HeaderValue::try_from(v.as_str()).map_err(|e| format!("header {k:?}: {e}"))?;
        headers.insert(name, value);
    }
    reachable(&url).await?;
    install_crypto_provider();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(headers),
    );
    let live = handler
        .serve(transport)
        .await
        .map_err(|e| format!("no MCP handshake with {url}: {}", root_cause(&e)))?;
    Ok((
        live,
        Started {
            pid: None,
            confinement: "not applicable (HTTP)".to_owned(),
        },
    ))
}

/// Makes ring the process default of this library's copy of rustls, which the HTTP transport's
/// reqwest (`rustls-no-provider`) builds its TLS config from; without one it would panic. An
/// `Err` means a provider is already installed (an earlier connection): nothing to do.
fn install_crypto_provider() {
    let _already = rustls::crypto::ring::default_provider().install_default();
}

/// The innermost cause of `e` (the transport wraps an I/O error several layers deep).
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// `host:port` of an `http(s)://` URL.
fn authority(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let auth = rest.split(['/', '?', '#']).next()?;
    let auth = auth.rsplit_once('@').map_or(auth, |(_, a)| a);
    let default = if scheme == "https" { 443 } else { 80 };
    if let Some(v6) = auth.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = after
            .strip_prefix(':')
            .map_or(Some(default), |p| p.parse().ok())?;
        return Some((host.to_owned(), port));
    }
    match auth.rsplit_once(':') {
        Some((h, p)) => Some((h.to_owned(), p.parse().ok()?)),
        None => Some((auth.to_owned(), default)),
    }
}

/// A TCP connect to the URL's host first: "nobody listens" is one plain reason, not the
/// transport's layered error (and its log lines).
async fn reachable(url: &str) -> Result<(), String> {
    let Some((host, port)) = authority(url) else {
        return Err(format!("cannot read host and port from {url}"));
    };
    tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map(drop)
        .map_err(|e| format!("cannot connect to {url}: {e}"))
}

async fn open_stdio(
    ctx: &Context,
    server: &str,
    config: &ServerConfig,
    handler: Handler,
    log: Arc<StderrLog>,
    fault: Arc<Fault>,
) -> Result<(Live, Started), String> {
    let command = config.command.clone().unwrap_or_default();
    let cwd = match &config.cwd {
        Some(c) => c.clone(),
        None => std::env::current_dir().map_err(|e| format!("no working directory: {e}"))?,
    };
    let program = find_program(&command, &cwd)?;
    let explicit = resolve_map(ctx, &config.env).await?;
    let env = child_env(ctx, config, explicit).await?;
    let mut argv = vec![program.to_string_lossy().into_owned()];
    argv.extend(config.args.iter().cloned());
    let (argv, confinement) = confine(ctx, server, config.sandbox, argv, &cwd, &fault).await?;
    let Some((bin, args)) = argv.split_first() else {
        return Err("the sandbox answered an empty argv".to_owned());
    };
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args(args)
        .env_clear()
        .envs(env)
        .current_dir(&cwd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start `{command}`: {e}"))?;
    let stderr = child.stderr.take();
    let transport = stdio::Stdio::new(child, Arc::clone(&fault))
        .map_err(|e| format!("cannot start `{command}`: {e}"))?;
    let pid = transport.id();
    let exit = transport.exit_watch();
    if let Some(stderr) = stderr {
        let log = Arc::clone(&log);
        let name = server.to_owned();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(server = %name, "stderr: {line}");
                log.push(&line);
            }
        });
    }
    match handler.serve(transport).await {
        Ok(live) => Ok((live, Started { pid, confinement })),
        Err(e) => {
            // A server that died before the handshake fails the send, not the receive: wait
            // for the reaper to have its status, then give the stderr reader a moment, since
            // the reason is usually its last line.
            exit.wait().await;
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let ended = fault.get().map(|f| format!("; {f}")).unwrap_or_default();
            let tail = log
                .last()
                .map(|l| format!("; its stderr: {l}"))
                .unwrap_or_default();
            Err(format!(
                "no MCP handshake with `{command}`: {e}{ended}{tail}"
            ))
        }
    }
}

/// The argv to spawn and how it is confined.
async fn confine(
    ctx: &Context,
    server: &str,
    choice: SandboxChoice,
    argv: Vec<String>,
    cwd: &Path,
    fault: &Fault,
) -> Result<(Vec<String>, String), String> {
    if choice == SandboxChoice::None {
        let line = format!(
            "keel: mcp server '{server}' runs unconfined (sandbox = \"none\" in its config)\n"
        );
        tracing::warn!(server, "runs unconfined (sandbox = \"none\")");
        let _ = ctx.write_stderr(&line);
        return Ok((argv, "none (sandbox = \"none\")".to_owned()));
    }
    let Some(sandbox) = ctx.get_client::<Sandbox>().ok().flatten() else {
        return Ok((argv, "none (no sandbox row in the profile)".to_owned()));
    };
    let confined = sandbox
        .confine(ConfineRequest {
            argv,
            cwd: cwd.to_path_buf(),
            mode: None,
            call: None,
        })
        .await
        .map_err(|e| {
            format!(
                "the sandbox refused to confine it: [{}] {}",
                e.code, e.message
            )
        })?;
    // Issue 23 item 17: a start that times out offline says so (`npx -y` waits for a registry
    // it cannot reach without a word).
    let policy = sandbox
        .policy(PolicyRequest {
            cwd: cwd.to_path_buf(),
            mode: Some(confined.mode),
        })
        .await;
    if policy.is_ok_and(|p| !p.network) {
        fault.set_offline();
    }
    let how = if confined.runner == "none" {
        format!("none ({})", confined.mode.as_str())
    } else {
        format!("{} ({})", confined.runner, confined.mode.as_str())
    };
    Ok((confined.argv, how))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authority_reads_host_and_port() {
        assert_eq!(
            authority("http://127.0.0.1:3001/mcp"),
            Some(("127.0.0.1".into(), 3001))
        );
        assert_eq!(
            authority("https://api.example.com/mcp"),
            Some(("api.example.com".into(), 443))
        );
        assert_eq!(authority("http://[::1]:8080/x"), Some(("::1".into(), 8080)));
        assert_eq!(authority("http://u:p@h/x"), Some(("h".into(), 80)));
    }

    #[test]
    fn the_stderr_log_is_bounded_and_keeps_the_last_line() {
        let log = StderrLog::default();
        for i in 0..(LOG_LINES + 5) {
            log.push(&format!("line {i}"));
        }
        log.push("");
        assert_eq!(log.lines().len(), LOG_LINES);
        assert_eq!(
            log.last().as_deref(),
            Some(format!("line {}", LOG_LINES + 4).as_str())
        );
    }
}
