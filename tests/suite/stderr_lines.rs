//! One stderr line per failure (ARCHITECTURE §11; issue 11 item 9): text keel quotes from
//! outside — a provider's error body, a name on the command line — is escaped onto its
//! `keel: …` line (newlines as `\n`, terminal escapes as `\u{…}`), and the session log keeps
//! the provider's text as it came. Warnings and errors the kernel and plugins log are one
//! `keel: warning: ROW: …` / `keel: error: ROW: …` line each at the default level, tracing's
//! format only with `KEEL_LOG` (issue 23 item 16).

use std::time::Duration;

use keel_tests::Run;
use keel_tests::model_server::{Reply, error_body};
use serde_json::Value;

use crate::suite::agent_support::*;

/// A safety net for hangs, far above any run here.
const LIMIT: Duration = Duration::from_secs(60);

/// The stderr lines that start `keel:` and are not log lines (a retry's
/// `keel: warning: ROW: …` is a line of its own, issue 23 item 16); asserts there is exactly one and that no other
/// stderr line carries `piece` (a fragment of the quoted text that followed a newline).
fn the_one_keel_line(run: &Run, piece: &str) -> String {
    let keel: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("keel:") && !keel_tests::is_log_line(l))
        .collect();
    assert_eq!(keel.len(), 1, "one keel: line expected:\n{}", run.stderr);
    let quoting: Vec<&str> = run.stderr.lines().filter(|l| l.contains(piece)).collect();
    assert_eq!(
        quoting, keel,
        "the quoted text spilled onto other lines:\n{}",
        run.stderr
    );
    let line = keel[0].to_owned();
    assert!(!line.contains('\u{1b}'), "a raw terminal escape: {line:?}");
    line
}

/// Runs one turn against `replies` (every one failing), expecting exit 1; returns the run and
/// the stored `turn/end` reason and events.
fn failing_turn(replies: Vec<Reply>) -> (Run, Value, Vec<Value>) {
    let server = server(replies);
    let env = agent_env(&server, "");
    let run = env.keel_within(
        &["run", "--profile", "t", "--output-format", "json", "hello"],
        LIMIT,
    );
    run.expect_code(1);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    let result: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let events = stored_events(&env, &session_of(&result));
    (run, last_reason(&events), events)
}

/// Issue 11 item 9: a 500 whose JSON error message holds newlines and a clear-screen escape,
/// retried twice (B14), ends the turn with one `keel: turn ended error SERVER: …` line; the
/// session's `turn/end` holds the message with its newlines.
#[test]
fn issue11_item9_a_multiline_provider_error_is_one_stderr_line_and_whole_in_the_log() {
    let message = "line one\nline two\r\n\u{1b}[2Jcleared\n";
    let reply = || Reply::status(500, error_body(message, "server_error", "x"));
    let (run, reason, events) = failing_turn(vec![reply(), reply(), reply()]);
    let line = the_one_keel_line(&run, "line two");
    assert_eq!(
        line,
        "keel: turn ended error SERVER: openai returned HTTP 500: line one\\nline two\\r\\n\
         \\u{001b}[2Jcleared"
    );
    assert_eq!(reason["error"]["code"], "SERVER", "{reason}");
    assert_eq!(
        reason["error"]["message"],
        format!("openai returned HTTP 500: {message}"),
        "the log keeps the text as it came"
    );
    let retries = events.iter().filter(|e| e["type"] == "llm/retry").count();
    assert_eq!(retries, 2, "{}", run.stderr);
}

/// Issue 11 item 9: a gateway's HTML page (not JSON) as the error body: one line too.
#[test]
fn issue11_item9_a_multiline_html_error_page_is_one_stderr_line() {
    let page = "<html>\n<head><title>502 Bad Gateway</title></head>\n<body>upstream gone</body>\n</html>\n";
    let reply = || Reply::status(502, page);
    let (run, reason, _) = failing_turn(vec![reply(), reply(), reply()]);
    let line = the_one_keel_line(&run, "upstream gone");
    assert!(
        line.starts_with(
            "keel: turn ended error SERVER: openai returned HTTP 502: <html>\\n<head>"
        ),
        "{line}"
    );
    let stored = reason["error"]["message"].as_str().unwrap();
    assert!(
        stored.contains("<html>\n<head><title>502 Bad Gateway</title></head>\n<body>"),
        "{stored:?}"
    );
}

/// Issue 11 item 9, the kernel's own lines: an error quoting what was typed (a profile name
/// with a newline) is one `keel: error[CODE]: …` line, exit 2 as before.
#[test]
fn issue11_item9_a_kernel_error_quoting_a_newline_is_one_line() {
    let server = server(vec![]);
    let env = agent_env(&server, "");
    let run = env.keel(&["run", "--profile", "no\nsuch", "hello"]);
    run.expect_code(2);
    let line = the_one_keel_line(&run, "such");
    assert!(
        line.starts_with("keel: error[CONFIG_UNKNOWN_PROFILE]: unknown profile 'no\\nsuch'"),
        "{line}"
    );
    assert!(server.requests().is_empty());
}

/// Issue 11 item 9 with SEC-03: a stored secret holding a newline, echoed in a provider's error
/// body, stays redacted on the escaped stderr line (the kernel's redactions also match a
/// needle's escaped form) — neither half of it reaches stderr.
#[test]
fn issue11_item9_sec03_a_multiline_secret_echoed_in_an_error_stays_redacted_on_the_line() {
    let value = "hunter2-first-half\nhunter2-second-half";
    let server = server(vec![Reply::status(
        400,
        error_body(
            &format!("the token {value} is not allowed here"),
            "invalid_request_error",
            "x",
        ),
    )]);
    let env = agent_env(&server, "");
    set_secret(&env, "PEM_KEY", value);
    let run = env.keel_within(
        &["run", "--profile", "t", "--output-format", "json", "hello"],
        LIMIT,
    );
    run.expect_code(1);
    let line = the_one_keel_line(&run, "is not allowed here");
    assert!(line.contains("BAD_REQUEST"), "{line}");
    for half in ["hunter2-first-half", "hunter2-second-half"] {
        assert!(!run.stderr.contains(half), "{half} leaked:\n{}", run.stderr);
    }
}

/// Whether `line` looks like tracing's full format: a timestamp first, or a level column and a
/// module path (`WARN keel::plugin:`).
fn tracing_format(line: &str) -> bool {
    let stamped = line.len() > 10
        && line.as_bytes()[4] == b'-'
        && line.as_bytes()[..4].iter().all(u8::is_ascii_digit);
    let levelled = [" WARN ", " ERROR ", " INFO "]
        .iter()
        .any(|level| line.contains(level));
    stamped || levelled || line.contains("keel::plugin")
}

/// Issue 23 item 16: a retry (the mock server answers 500 once) is one
/// `keel: warning: ROW: …` line at the default level — no timestamp, level column or module
/// path on any stderr line; with `KEEL_LOG=info`, tracing's format is back.
#[test]
fn issue23_item16_a_retry_warning_is_one_keel_line_and_tracing_only_with_keel_log() {
    let once = || {
        server(vec![
            Reply::status(500, error_body("busy", "server_error", "x")),
            Reply::text("Recovered."),
        ])
    };
    let server = once();
    let env = agent_env(&server, "");
    let run = env.keel_within(&["run", "--profile", "t", "hello"], LIMIT);
    run.expect_code(0);
    assert_eq!(server.requests().len(), 2, "no retry:\n{}", run.stderr);
    let warnings = run.log_lines();
    assert!(
        warnings
            .iter()
            .any(|l| l.starts_with("keel: warning: agent-loop: model call failed; retrying")),
        "no retry warning naming its row:\n{}",
        run.stderr
    );
    let tracing: Vec<&str> = run.stderr.lines().filter(|l| tracing_format(l)).collect();
    assert!(tracing.is_empty(), "tracing-format lines: {tracing:?}");

    let server = once();
    let env = agent_env(&server, "").var("KEEL_LOG", "info");
    let run = env.keel_within(&["run", "--profile", "t", "hello"], LIMIT);
    run.expect_code(0);
    assert!(
        run.stderr
            .lines()
            .any(|l| tracing_format(l) && l.contains("model call failed; retrying")),
        "no tracing-format retry line with KEEL_LOG=info:\n{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("keel: warning: agent-loop"),
        "{}",
        run.stderr
    );
}
