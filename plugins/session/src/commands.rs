//! The CLI commands this plugin provides (ARCHITECTURE §11): `keel sessions list [--json]`,
//! `keel sessions show ID [--json]`, `keel fork ID [--at SEQ]`. Plain Rust over
//! [`SessionManager`], writing to the given stdout/stderr, returning the exit code.
//!
//! `show` loads the session, so a crashed one is recovered (closers committed) and stderr says
//! `recovered crashed session: appended N closers`; a torn tail the load cut is said too
//! (`keel: cut the torn tail of FILE: line N, B bytes: REASON`, and `truncated` with `--json`):
//! nothing on disk changes unsaid. A session live (here or in another process) with a turn
//! open is shown without repair. `list` names every file it could not read (stderr, or
//! `unreadable` with `--json`). Errors print one line `keel: error[CODE]: …` on stderr (every
//! stderr line passes [`one_line`]: a path or a backend's reason may hold newlines); the
//! exit code is 2 for bad input (unknown id, invalid id or boundary, boundary inside an open
//! turn, existing child) and 1 for everything else (unsupported format, corruption, I/O,
//! locks).

use std::io::Write;

use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::prelude::*;
use keel_plugin_api::sdk::one_line;
use keel_plugin_api::services::command::{
    ArgSpec, CommandInvocation, CommandOutcome, CommandProvider, CommandSpec,
};
use keel_plugin_api::services::session::{EventRecord, StoreError};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::SessionError;
use crate::fork::Boundary;
use crate::sessions::SessionManager;

/// `keel sessions …` as the plugin declares it (issue 13 item 2: the kernel knows no command).
pub fn sessions_spec() -> CommandSpec {
    let json = || ArgSpec::flag("json", "JSON output.");
    CommandSpec::new("sessions", "Inspect stored sessions.")
        .subcommand(
            CommandSpec::new("list", "Sessions under $KEEL_HOME, newest first.").arg(json()),
        )
        .subcommand(
            CommandSpec::new(
                "show",
                "One session's events (a crashed session is recovered on read, and says so).",
            )
            .arg(ArgSpec::positional("session_id", "Session id.").required())
            .arg(json()),
        )
}

/// `keel fork …` as the plugin declares it.
pub fn fork_spec() -> CommandSpec {
    CommandSpec::new("fork", "Fork a session at a closed prefix.")
        .arg(ArgSpec::positional("session_id", "Session to fork.").required())
        .arg(
            ArgSpec::option("at", "Inclusive seq boundary (default: the last event).")
                .value_name("SEQ")
                .count(),
        )
}

/// `keel sessions …`'s arguments, as [`sessions_spec`] shapes them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum SessionsArgs {
    /// `keel sessions list [--json]`.
    List {
        /// JSON output.
        #[serde(default)]
        json: bool,
    },
    /// `keel sessions show ID [--json]`.
    Show {
        /// Session id.
        session_id: String,
        /// JSON output.
        #[serde(default)]
        json: bool,
    },
}

/// `keel fork ID [--at SEQ]`'s arguments, as [`fork_spec`] shapes them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ForkArgs {
    /// The session to fork.
    pub session_id: String,
    /// Inclusive seq boundary (`None`: the last event).
    #[serde(default)]
    pub at: Option<u64>,
}

/// Output streams of a command.
pub struct Io<'a> {
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

fn exit_code(e: &SessionError) -> i32 {
    let bad_input = [
        StoreError::Invalid,
        StoreError::NotFound,
        StoreError::OpenTurn,
        StoreError::Exists,
    ];
    if bad_input.iter().any(|k| e.is(*k)) {
        2
    } else {
        1
    }
}

fn fail(io: &mut Io<'_>, e: &SessionError) -> i32 {
    let line = format!("keel: error[{}]: {}", e.code(), e.message);
    let _ = writeln!(io.err, "{}", one_line(&line));
    exit_code(e)
}

/// `YYYY-MM-DDTHH:MM:SSZ` for epoch ms (UTC).
pub fn iso_time(ms: u64) -> String {
    keel_plugin_api::civil_time::utc_timestamp(i64::try_from(ms / 1000).unwrap_or(i64::MAX))
}

/// `keel sessions …`.
pub async fn sessions(mgr: &SessionManager, args: &SessionsArgs, io: &mut Io<'_>) -> i32 {
    let r = match args {
        SessionsArgs::List { json } => list(mgr, *json, io).await,
        SessionsArgs::Show { session_id, json } => show(mgr, session_id, *json, io).await,
    };
    match r {
        Ok(()) => 0,
        Err(e) => fail(io, &e),
    }
}

async fn list(mgr: &SessionManager, as_json: bool, io: &mut Io<'_>) -> Result<(), SessionError> {
    let listed = mgr.list().await?;
    let mut rows = listed.sessions;
    let updated = |r: &Value| r.get("updated_at").and_then(Value::as_u64).unwrap_or(0);
    rows.sort_by_key(|r| std::cmp::Reverse(updated(r)));
    if as_json {
        let out = json!({ "sessions": rows, "unreadable": listed.unreadable });
        let _ = writeln!(io.out, "{out}");
        return Ok(());
    }
    for u in &listed.unreadable {
        let text = |k: &str| u.get(k).and_then(Value::as_str).unwrap_or("?");
        let line = format!(
            "keel: warning[{}]: not listed, cannot read {}: {}",
            text("code"),
            text("path"),
            text("reason")
        );
        let _ = writeln!(io.err, "{}", one_line(&line));
    }
    let _ = writeln!(
        io.out,
        "{:<32} {:<20} {:>8}  {:<20} {:<16} CWD",
        "ID", "UPDATED", "EVENTS", "CREATED", "PARENT"
    );
    for r in &rows {
        let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("-").to_owned();
        let created = r.get("created_at").and_then(Value::as_u64).unwrap_or(0);
        let _ = writeln!(
            io.out,
            "{:<32} {:<20} {:>8}  {:<20} {:<16} {}",
            s("id"),
            iso_time(updated(r)),
            r.get("events").and_then(Value::as_u64).unwrap_or(0),
            iso_time(created),
            s("parent_session"),
            s("cwd"),
        );
    }
    Ok(())
}

/// `cut the torn tail of FILE: line N, B bytes (the record seq S would have had): REASON`
/// (JSONL) or `…: R row(s) from seq S: REASON` (SQLite), from the store's `truncated` report.
pub fn cut_line(torn: &Value) -> String {
    let num = |k: &str| torn.get(k).and_then(Value::as_u64);
    let text = |k: &str| torn.get(k).and_then(Value::as_str).unwrap_or("?");
    let seq = num("seq").map_or_else(|| "?".to_owned(), |s| s.to_string());
    let what = match (num("line"), num("bytes"), num("rows")) {
        (Some(line), Some(bytes), _) => {
            format!("line {line}, {bytes} bytes (the record seq {seq} would have had)")
        }
        (_, _, Some(1)) => format!("1 row from seq {seq}"),
        (_, _, Some(rows)) => format!("{rows} rows from seq {seq}"),
        _ => format!("the records from seq {seq}"),
    };
    format!(
        "cut the torn tail of {}: {what}: {}",
        text("path"),
        text("reason")
    )
}

fn summary(e: &EventRecord) -> String {
    let mut text = e.data.to_string();
    if text.chars().count() > 120 {
        text = text.chars().take(117).collect::<String>() + "...";
    }
    text
}

async fn show(
    mgr: &SessionManager,
    id: &str,
    as_json: bool,
    io: &mut Io<'_>,
) -> Result<(), SessionError> {
    let snap = match mgr.load(id).await {
        Ok(s) => s,
        Err(e) if e.is(StoreError::Locked) => {
            let line = format!(
                "keel: session '{id}' is live with an open turn; showing it without repair"
            );
            let _ = writeln!(io.err, "{}", one_line(&line));
            mgr.inspect(id).await?
        }
        Err(e) => return Err(e),
    };
    // What this load cut: only a committing load repairs (`inspect` cuts nothing).
    let cut = snap.truncated.as_ref().filter(|_| snap.committed);
    if let Some(torn) = cut {
        let _ = writeln!(
            io.err,
            "{}",
            one_line(&format!("keel: {}", cut_line(&serde_json::json!(torn))))
        );
    }
    if snap.committed && !snap.recovered.is_empty() {
        let _ = writeln!(
            io.err,
            "recovered crashed session: appended {} closers",
            snap.recovered.len()
        );
    }
    if as_json {
        let out = json!({
            "header": snap.header,
            "events": snap.events,
            "recovered": snap.recovered,
            "truncated": cut,
        });
        let _ = writeln!(io.out, "{out}");
        return Ok(());
    }
    let h = &snap.header;
    let _ = writeln!(
        io.out,
        "session {} (format {}, created {}, cwd {}{})",
        h.id,
        h.version,
        iso_time(h.created_at),
        h.cwd,
        h.parent_session
            .as_ref()
            .map(|p| format!(
                ", forked from {p} after {} events",
                h.seed_length.unwrap_or(0)
            ))
            .unwrap_or_default()
    );
    for e in &snap.events {
        let _ = writeln!(
            io.out,
            "{:>6}  {}  {:<18} {}",
            e.seq,
            iso_time(e.time),
            e.kind,
            summary(e)
        );
    }
    Ok(())
}

/// `keel fork ID [--at SEQ]`: prints the child id.
pub async fn fork(mgr: &SessionManager, args: &ForkArgs, io: &mut Io<'_>) -> i32 {
    let at = args.at.map_or(Boundary::Last, Boundary::At);
    let r = mgr
        .fork(
            &args.session_id,
            at,
            None,
            crate::fork::ChildLineage::default(),
        )
        .await;
    match r {
        Ok(child) => {
            let _ = writeln!(io.out, "{}", child.id);
            0
        }
        Err(e) => fail(io, &e),
    }
}

/// Serves `keel.command.sessions` or `keel.command.fork` (one value per name).
pub struct Command {
    ctx: Context,
    mgr: std::sync::Arc<SessionManager>,
    fork: bool,
}

impl Command {
    /// `keel sessions` over `mgr`.
    pub fn sessions(ctx: Context, mgr: std::sync::Arc<SessionManager>) -> Self {
        Command {
            ctx,
            mgr,
            fork: false,
        }
    }

    /// `keel fork` over `mgr`.
    pub fn fork(ctx: Context, mgr: std::sync::Arc<SessionManager>) -> Self {
        Command {
            ctx,
            mgr,
            fork: true,
        }
    }
}

impl CommandProvider for Command {
    async fn run(
        &self,
        request: CommandInvocation,
    ) -> keel_plugin_api::sdk::Result<CommandOutcome> {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut io = Io {
            out: &mut out,
            err: &mut err,
        };
        let bad = |e: serde_json::Error| {
            Error::coded(
                ContractCode::InvalidArguments,
                format!("`keel {}`: {e}", request.command),
            )
        };
        let exit_code = match (request.command.as_str(), self.fork) {
            ("sessions", false) => {
                let args = request.parse_args::<SessionsArgs>().map_err(bad)?;
                sessions(&self.mgr, &args, &mut io).await
            }
            ("fork", true) => {
                let args = request.parse_args::<ForkArgs>().map_err(bad)?;
                fork(&self.mgr, &args, &mut io).await
            }
            (other, fork) => {
                let serves = if fork { "fork" } else { "sessions" };
                return Err(Error::coded(
                    ContractCode::InvalidArguments,
                    format!("keel.command.{serves} does not run `keel {other}`"),
                ));
            }
        };
        // Through the kernel's output redactions (SEC-03).
        let _ = self.ctx.write_stdout(&String::from_utf8_lossy(&out));
        let _ = self.ctx.write_stderr(&String::from_utf8_lossy(&err));
        Ok(CommandOutcome { exit_code })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_time_is_utc_civil_time() {
        assert_eq!(iso_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso_time(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(iso_time(1_700_000_000_123), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn cut_line_says_what_was_cut() {
        let jsonl = json!({"seq": 24, "reason": "no newline", "path": "/h/s.jsonl",
            "line": 26, "bytes": 31});
        assert_eq!(
            cut_line(&jsonl),
            "cut the torn tail of /h/s.jsonl: line 26, 31 bytes (the record seq 24 would have \
             had): no newline"
        );
        let sqlite = json!({"seq": 9, "reason": "bad data", "path": "/h/s.sqlite3", "rows": 2});
        assert_eq!(
            cut_line(&sqlite),
            "cut the torn tail of /h/s.sqlite3: 2 rows from seq 9: bad data"
        );
    }

    #[test]
    fn exit_codes_split_bad_input_from_failures() {
        assert_eq!(exit_code(&SessionError::not_found("x")), 2);
        assert_eq!(exit_code(&SessionError::open_turn("x")), 2);
        assert_eq!(exit_code(&SessionError::corrupt("x")), 1);
        assert_eq!(exit_code(&SessionError::unsupported("x")), 1);
        let locked = SessionError::new(StoreError::Locked, "x");
        assert_eq!(exit_code(&locked), 1, "a lock conflict is not bad input");
    }
}
