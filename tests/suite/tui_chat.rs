//! `keel chat` in a real pseudo-terminal against the loopback model server (issue 26 item 2):
//! approvals answered with a key, Ctrl-C stopping a 30 s shell call, steering, bare `keel` on
//! a terminal, `--resume`, a resize mid-turn, and plain text for `NO_COLOR` and a stdout that
//! is not a terminal. Assertions are on the world: files on disk, the session log, the
//! requests the server received, the bytes on the terminal.

use std::io::Write as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use keel_tests::model_server::Reply;
use serde_json::{Value, json};

use crate::suite::agent_support::*;
use crate::suite::tui_support::{Pty, chat_env};

const WAIT: Duration = Duration::from_secs(20);

/// The session id the chat's first line names (`keel chat · session ID · …`).
fn session_in(output: &str) -> String {
    output
        .split("keel chat · session ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("no session line in:\n{output}"))
        .to_owned()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// TOOL-03, TOOL-05: a write the person approves with `y` in the terminal lands on disk, and
/// the approval row's audit pair records the question and the answer.
#[test]
fn a_write_approved_in_the_terminal_lands_on_disk() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "w1",
            "write_file",
            args(json!({"path": "notes.txt", "content": "approved\n"})),
        )]),
        Reply::text("Wrote it."),
    ]);
    let env = chat_env(&server);
    let mut pty = Pty::spawn(&env, &["chat", "--profile", "t", "--approval", "ask"], &[]);
    pty.expect("keel chat · session", WAIT);
    pty.send("write the notes\r");
    pty.expect("approve write_file notes.txt?", WAIT);
    assert!(
        !work_file(&env, "notes.txt").exists(),
        "nothing is written before the answer"
    );
    pty.send("y");
    assert!(wait_for_file(&work_file(&env, "notes.txt"), WAIT));
    assert_eq!(
        std::fs::read_to_string(work_file(&env, "notes.txt")).unwrap(),
        "approved\n"
    );
    let done = pty.expect("✓ write_file notes.txt · ok", WAIT);
    pty.expect_from(done, "· ready", WAIT);
    server.wait_for(2, WAIT);
    pty.send("\x04");
    assert_eq!(pty.wait(WAIT), 0);
    let events = stored_events(&env, &session_in(&pty.output()));
    let asked = of_type(&events, "approval/asked");
    let decided = of_type(&events, "approval/decided");
    assert_eq!(asked.len(), 1, "{events:?}");
    assert_eq!(asked[0]["data"]["tool_name"], "write_file");
    assert_eq!(decided[0]["data"]["outcome"], "allowed-once");
    assert_eq!(last_reason(&events)["kind"], "completed");
}

/// A denial with `n` keeps the file away, and the model is told.
#[test]
fn a_write_denied_in_the_terminal_never_happens() {
    let server = server(vec![
        Reply::tool_calls(vec![(
            "w1",
            "write_file",
            args(json!({"path": "no.txt", "content": "x"})),
        )]),
        Reply::text("Understood."),
    ]);
    let env = chat_env(&server);
    let mut pty = Pty::spawn(&env, &["chat", "--profile", "t", "--approval", "ask"], &[]);
    pty.expect("keel chat · session", WAIT);
    pty.send("write it\r");
    pty.expect("approve write_file no.txt?", WAIT);
    pty.send("n");
    let denied = pty.expect("denied write_file", WAIT);
    pty.expect_from(denied, "· ready", WAIT);
    let reqs = server.wait_for(2, WAIT);
    assert!(!work_file(&env, "no.txt").exists());
    let told = tool_message(reqs[1].messages(), "w1");
    assert!(
        told["content"]
            .as_str()
            .unwrap_or_default()
            .contains("APPROVAL"),
        "{told}"
    );
    pty.send("\x04");
    assert_eq!(pty.wait(WAIT), 0);
    let events = stored_events(&env, &session_in(&pty.output()));
    assert_eq!(
        of_type(&events, "approval/decided")[0]["data"]["outcome"],
        "rejected"
    );
}

/// Issue 26 item 2: Ctrl-C stops a 30 s shell call well inside the grace period, the turn
/// closes `aborted`, and the next message continues the same session (one log, two turns).
#[test]
fn ctrl_c_stops_a_long_shell_call_and_the_session_goes_on() {
    let server = server(vec![
        Reply::tool_calls(vec![("s1", "shell", args(json!({"command": "sleep 30"})))]),
        Reply::text("Continuing."),
    ]);
    let env = chat_env(&server);
    let mut pty = Pty::spawn(
        &env,
        &["chat", "--profile", "t", "--approval", "never"],
        &[],
    );
    pty.expect("keel chat · session", WAIT);
    pty.send("sleep a while\r");
    pty.expect("⋯ shell sleep 30", WAIT);
    let id = session_in(&pty.output());
    let mark = pty.len();
    let pressed = Instant::now();
    pty.send("\x03");
    pty.expect_from(mark, "the session goes on", WAIT);
    let took = pressed.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "the turn closed after {took:?}"
    );
    // The next message is a new turn of the same session.
    pty.turn("go on", WAIT);
    pty.expect_from(mark, "Continuing.", WAIT);
    let reqs = server.wait_for(2, WAIT);
    assert_eq!(reqs.len(), 2);
    pty.send("\x04");
    assert_eq!(pty.wait(WAIT), 0);
    let events = stored_events(&env, &id);
    let ends = of_type(&events, "turn/end");
    assert_eq!(ends.len(), 2, "{events:?}");
    assert_eq!(ends[0]["data"]["reason"]["kind"], "aborted");
    assert_eq!(ends[1]["data"]["reason"]["kind"], "completed");
    let result = of_type(&events, "tool/result");
    assert_eq!(result.len(), 1);
    assert!(
        result[0]["data"]["is_error"].as_bool().unwrap_or(false),
        "{result:?}"
    );
}

/// Ctrl-C twice while a turn runs leaves at once with 130, the session flushed and closed.
#[test]
fn ctrl_c_twice_during_a_turn_leaves_with_130() {
    let server = server(vec![Reply::tool_calls(vec![(
        "s1",
        "shell",
        args(json!({"command": "sleep 30"})),
    )])]);
    let env = chat_env(&server);
    let mut pty = Pty::spawn(
        &env,
        &["chat", "--profile", "t", "--approval", "never"],
        &[],
    );
    pty.expect("keel chat · session", WAIT);
    pty.send("sleep\r");
    pty.expect("⋯ shell sleep 30", WAIT);
    pty.send("\x03");
    std::thread::sleep(Duration::from_millis(100));
    pty.send("\x03");
    assert_eq!(pty.wait(WAIT), 130);
    let events = stored_events(&env, &session_in(&pty.output()));
    assert_eq!(last_reason(&events)["kind"], "aborted");
}

/// ARCHITECTURE §11: `keel` alone on a terminal opens the chat (the profile's row declares
/// it; the kernel names no command), and `keel chat --resume ID` continues that session.
#[test]
fn bare_keel_on_a_terminal_chats_and_resume_continues() {
    let server = server(vec![Reply::text("First."), Reply::text("Second.")]);
    let env = chat_env(&server);
    let mut pty = Pty::spawn(&env, &["--profile", "t"], &[]);
    pty.expect("keel chat · session", WAIT);
    pty.turn("one", WAIT);
    pty.expect("First.", WAIT);
    pty.send("\x04");
    assert_eq!(pty.wait(WAIT), 0);
    let id = session_in(&pty.output());
    let mut again = Pty::spawn(&env, &["chat", "--profile", "t", "--resume", &id], &[]);
    again.expect(&format!("keel chat · session {id}"), WAIT);
    again.turn("two", WAIT);
    again.expect("Second.", WAIT);
    again.send("\x04");
    assert_eq!(again.wait(WAIT), 0);
    let reqs = server.wait_for(2, WAIT);
    // The resumed turn's request carries the first turn's exchange.
    assert!(reqs[1].messages().to_string().contains("First."));
    assert_eq!(of_type(&stored_events(&env, &id), "turn/start").len(), 2);
}

/// Issue 26 item 2: the model's first words are on the terminal while its stream is still
/// open (the server holds the rest until the test releases it); the log keeps one
/// `assistant/message`, no delta.
#[test]
fn the_first_words_are_on_screen_before_the_models_last_chunk() {
    let (reply, hold) = Reply::text_held("Alpha beta gamma delta epsilon zeta.");
    let server = server(vec![reply]);
    let env = chat_env(&server);
    let mut pty = Pty::spawn(&env, &["chat", "--profile", "t"], &[]);
    pty.expect("keel chat · session", WAIT);
    let mark = pty.len();
    pty.send("stream\r");
    hold.wait_reached(WAIT);
    pty.expect_from(mark, "Alpha beta", WAIT);
    assert!(
        !pty.output().contains("zeta."),
        "the rest arrived before the release"
    );
    hold.release();
    let done = pty.expect_from(mark, "zeta.", WAIT);
    pty.expect_from(done, "· ready", WAIT);
    pty.send("\x04");
    assert_eq!(pty.wait(WAIT), 0);
    let events = stored_events(&env, &session_in(&pty.output()));
    let said = of_type(&events, "assistant/message");
    assert_eq!(said.len(), 1);
    assert_eq!(
        said[0]["data"]["message"]["content"],
        "Alpha beta gamma delta epsilon zeta."
    );
    assert!(events.iter().all(|e| e["type"] != "agent/delta"));
}

/// LOOP-02: a message typed while a turn runs steers it: it joins the running turn (one
/// `turn/start`), and the turn's next request carries it.
#[test]
fn typing_while_a_turn_runs_steers_it() {
    let (reply, hold) = Reply::text_held("Working on the first part of it.");
    let server = server(vec![reply, Reply::text("Took the steer.")]);
    let env = chat_env(&server);
    let mut pty = Pty::spawn(&env, &["chat", "--profile", "t"], &[]);
    pty.expect("keel chat · session", WAIT);
    let mark = pty.len();
    pty.send("start\r");
    hold.wait_reached(WAIT);
    pty.expect_from(mark, "Working on", WAIT);
    pty.send("also check the tests\r");
    pty.expect_from(mark, "(steering the running turn)", WAIT);
    hold.release();
    let done = pty.expect_from(mark, "Took the steer.", WAIT);
    pty.expect_from(done, "· ready", WAIT);
    pty.send("\x04");
    assert_eq!(pty.wait(WAIT), 0);
    let reqs = server.wait_for(2, WAIT);
    assert!(
        reqs[1]
            .messages()
            .to_string()
            .contains("also check the tests"),
        "{}",
        reqs[1].messages()
    );
    let events = stored_events(&env, &session_in(&pty.output()));
    assert_eq!(of_type(&events, "turn/start").len(), 1, "{events:?}");
    assert_eq!(last_reason(&events)["kind"], "completed");
}

/// A resize mid-stream keeps the screen whole: after it, the screen a person sees holds the
/// conversation once, wrapped at the new width, and one status line (no stale rows of the
/// old live region), and the chat goes on.
#[test]
fn a_resize_mid_stream_keeps_the_screen_whole() {
    let text = "The quick brown fox jumps over the lazy dog while the stream is held open.";
    let (reply, hold) = Reply::text_held(text);
    let server = server(vec![reply]);
    let env = chat_env(&server);
    let mut pty = Pty::spawn(&env, &["chat", "--profile", "t"], &[]);
    pty.expect("keel chat · session", WAIT);
    let mark = pty.len();
    pty.send("tell me\r");
    hold.wait_reached(WAIT);
    pty.expect_from(mark, "The quick", WAIT);
    let resized_at = pty.len();
    pty.resize(40, 12);
    // The repaint after the resize clears the screen first.
    pty.expect_from(resized_at, "\x1b[2J", WAIT);
    hold.release();
    let done = pty.expect_from(resized_at, "held open.", WAIT);
    pty.expect_from(done, "· ready", WAIT);
    std::thread::sleep(Duration::from_millis(100));
    let screen = pty.screen((80, 24), Some((resized_at, (40, 12))));
    let flat: String = screen.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(text),
        "the answer is not whole on screen:\n{screen}"
    );
    assert_eq!(flat.matches("jumps over").count(), 1, "{screen}");
    assert!(flat.contains("› tell me"), "{screen}");
    assert_eq!(screen.matches("· ready").count(), 1, "{screen}");
    assert_eq!(screen.matches("· working").count(), 0, "{screen}");
    // Wrapped at the new width: the answer takes two rows of 40.
    assert!(
        screen.contains("The quick brown fox jumps over the lazy\ndog"),
        "{screen}"
    );
    pty.send("\x04");
    assert_eq!(pty.wait(WAIT), 0);
}

/// Issue 26 item 2: a child agent is visible while it works: the parent's `agent` call line
/// carries the child's step and its latest tool call, then the call's outcome when it ends.
#[test]
fn a_child_agent_shows_its_step_and_its_latest_call() {
    let server = server(vec![
        Reply::tool_calls(vec![("a1", "agent", args(json!({"task": "look around"})))]),
        Reply::tool_calls(vec![("k1", "shell", args(json!({"command": "sleep 2"})))]),
        Reply::text("Child done."),
        Reply::text("Parent done."),
    ]);
    let env = chat_env(&server);
    let mut pty = Pty::spawn(
        &env,
        &["chat", "--profile", "t", "--approval", "never"],
        &[],
    );
    pty.expect("keel chat · session", WAIT);
    pty.send("delegate\r");
    pty.expect("⋯ agent look around · step 1", WAIT);
    pty.expect("· shell sleep 2", WAIT);
    let done = pty.expect("✓ agent look around · ok", WAIT);
    pty.expect_from(done, "· ready", WAIT);
    pty.send("\x04");
    assert_eq!(pty.wait(WAIT), 0);
    assert_eq!(server.completions().len(), 4);
}

/// NO_COLOR on a terminal: plain lines, not one escape sequence.
#[test]
fn no_color_gives_plain_text_without_escapes() {
    let server = server(vec![Reply::text("Plain answer.")]);
    let env = chat_env(&server);
    let mut pty = Pty::spawn(&env, &["chat", "--profile", "t"], &[("NO_COLOR", "1")]);
    pty.expect("keel chat · session", WAIT);
    pty.send("hello\r");
    pty.expect("Plain answer.", WAIT);
    pty.send("\x04");
    assert_eq!(pty.wait(WAIT), 0);
    let out = pty.output();
    assert!(
        !out.contains('\x1b'),
        "escape sequences under NO_COLOR: {out:?}"
    );
}

/// A stdout that is not a terminal: plain text; each stdin line is a turn, in order.
#[test]
fn a_piped_chat_is_plain_text_turn_by_turn() {
    let server = server(vec![Reply::text("One."), Reply::text("Two.")]);
    let env = chat_env(&server);
    let mut child = env
        .command(&["chat", "--profile", "t"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn keel chat");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"first\nsecond\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains('\x1b'), "{stdout:?}");
    let one = stdout.find("One.").expect("first answer");
    let two = stdout.find("Two.").expect("second answer");
    assert!(one < two, "{stdout}");
    let reqs = server.completions();
    assert_eq!(reqs.len(), 2);
    assert!(reqs[1].messages().to_string().contains("second"));
}

/// Unknown slash commands are answered with the list and never reach the model.
#[test]
fn an_unknown_slash_command_lists_the_commands() {
    let server = server(vec![Reply::text("unused")]);
    let env = chat_env(&server);
    let mut pty = Pty::spawn(&env, &["chat", "--profile", "t"], &[]);
    pty.expect("keel chat · session", WAIT);
    pty.send("/frobnicate\r");
    pty.expect("unknown command /frobnicate", WAIT);
    pty.expect("/resume ID", WAIT);
    pty.send("/exit\r");
    assert_eq!(pty.wait(WAIT), 0);
    assert!(server.completions().is_empty());
}
