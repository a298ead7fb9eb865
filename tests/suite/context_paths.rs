//! The context manager's paths besides the long session (issue 14; CTX-01…06, MEM-08), each
//! through the built `keel`, the shipped bundles and a loopback model server with a context
//! window: the summarise strategy with a scripted summary, the refusal of a request that cannot
//! fit, the provider's own overflow (one compaction and one retry, then the named end state),
//! a single result over the per-result cap, and `coldcontext_search` / `coldcontext_read`.
//!
//! Sizes: the shipped tools and system prompt are about 2,300 tokens; a [`BIG`] file's
//! `read_file` result about 3,900. Under a 16k window (reserve 1024, threshold 80 %: 12,288
//! tokens) the request after two big results fits and the one after three does not.

use keel_tests::model_server::{Reply, check_tool_call_contract, error_body};
use serde_json::json;

use crate::suite::agent_support::{
    args, contract_holds, run_json, session_of, stored_events, tool_message,
};
use crate::suite::context_support::*;

const WINDOW: u64 = 16_384;
const RESERVE: u64 = 1024;

/// The summarise prompt, a file next to the profile.
const PROMPT: &str = "You condense an agent's working history for its own later use.\n\
                      Keep every file name, marker word and decision; drop the file bodies.\n";

/// Issue 14 item 2, summarise (CTX-02): a prefix becomes a summary written by a side request
/// whose system message is the profile's prompt file; the task statement, every user message
/// and the last step stay verbatim; the log records the replacement as `summarise`.
#[test]
fn summarise_replaces_a_prefix_with_the_side_requests_summary() {
    let summary = "SUMMARY: read a.txt (zqamark) and b.txt (zqbmark); nothing changed.";
    let server = windowed(
        WINDOW,
        vec![
            read_call("a1", "a.txt"),
            read_call("b1", "b.txt"),
            Reply::text("first done"),
            // Turn 2 (resume): one more read, then the compaction's side request, then the answer.
            read_call("c1", "c.txt"),
            Reply::text(summary),
            Reply::text("second done"),
        ],
    );
    let env = ctx_env(
        &server,
        Some((WINDOW, RESERVE)),
        r#"{ strategies = ["summarise", "sink"], keep_recent_steps = 1, summarise = { prompt = "${this_dir}/summarise.md" } }"#,
    );
    env.file("config/profiles/summarise.md", PROMPT);
    let texts = big_files(&env, &["a", "b", "c"]);
    let (run, result) = run_json(&env, "read a.txt and b.txt", &[]);
    run.expect_code(0);
    let id = session_of(&result);
    assert_eq!(server.completions().len(), 3, "turn 1 must not compact");
    let run = env.keel(&["resume", &id, "--profile", "t", "now read c.txt"]);
    run.expect_code(0);
    assert_eq!(run.stdout.trim(), "second done", "{}", run.stderr);

    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 6, "r1-r3, r4, the side request, r5");
    for r in &reqs {
        assert!(counted(r) <= WINDOW);
    }
    let side = &reqs[4];
    assert_eq!(side.messages()[0]["role"], "system", "{}", side.messages());
    assert_eq!(
        side.messages()[0]["content"].as_str(),
        Some(PROMPT),
        "the side request's system message is the prompt file's text"
    );
    assert!(
        side.body.to_string().contains(&mark("a")),
        "the side request carries what it summarises"
    );
    let last = &reqs[5];
    let m = last.messages();
    assert_eq!(m[1]["role"], "user");
    assert_eq!(
        m[1]["content"], "read a.txt and b.txt",
        "the task statement"
    );
    assert!(
        has_message(m, "user", "now read c.txt"),
        "every user message"
    );
    assert!(
        m.as_array()
            .unwrap()
            .iter()
            .any(|x| x["content"].as_str().is_some_and(|c| c.contains(summary))),
        "the summary reached the next request: {m}"
    );
    assert_eq!(
        tool_message(m, "c1")["content"].as_str(),
        Some(numbered(&texts[2]).as_str()),
        "the last step stays verbatim"
    );
    for gone in ["a1", "b1"] {
        assert!(
            !m.as_array()
                .unwrap()
                .iter()
                .any(|x| x["tool_call_id"] == gone),
            "{gone} was summarised but is still sent"
        );
    }

    let events = stored_events(&env, &id);
    let summaries = replacements(&events, "summarise");
    assert_eq!(summaries.len(), 1, "one summarise replacement");
    let content = summaries[0]["data"]["message"]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        content.starts_with("[keel context: summary of"),
        "{content}"
    );
    assert!(content.contains(summary), "{content}");
    // Nothing was lost: the originals stay in the log.
    for (call, text) in [("a1", &texts[0]), ("b1", &texts[1])] {
        assert_eq!(
            original_result(&events, call)["data"]["content"].as_str(),
            Some(numbered(text).as_str())
        );
    }
    let mut replay = replayed(&events);
    replay.pop();
    same_history("replay vs the last request", &sent(last), &replay);
}

/// Issue 14 item 2, refuse (CTX-03): a user message larger than the window ends the turn
/// `CONTEXT_OVERFLOW` (exit 1, named on stderr) and nothing over the window is sent — nothing
/// at all here, and the message stays whole in the log (never a silent cut).
#[test]
fn a_request_that_cannot_fit_ends_context_overflow_and_is_never_sent() {
    let server = windowed(4096, vec![Reply::text("never")]);
    let env = ctx_env(&server, Some((4096, 512)), "");
    let huge = marked_text(7, "zqhugemark", 40_000);
    let (run, result) = run_json(&env, &huge, &[]);
    run.expect_code(1);
    assert!(run.stderr.contains("CONTEXT_OVERFLOW"), "{}", run.stderr);
    assert!(
        server.completions().iter().all(|r| counted(r) <= 4096),
        "a request over the window was sent"
    );
    assert_eq!(server.completions().len(), 0, "nothing is sent for it");
    let events = stored_events(&env, &session_of(&result));
    assert_eq!(last_error_code(&events), "CONTEXT_OVERFLOW");
    let user = events
        .iter()
        .find(|e| e["type"] == "user/message")
        .expect("the user message is logged");
    assert_eq!(user["data"]["content"].as_str(), Some(huge.as_str()));
    assert!(replacements(&events, "sink").is_empty());
}

/// The `llm/retry` events of a server-side overflow (`compact: true`).
fn compact_retries(events: &[serde_json::Value]) -> usize {
    events
        .iter()
        .filter(|e| e["type"] == "llm/retry" && e["data"]["compact"] == true)
        .count()
}

/// Issue 14 item 5 (CTX-03): the row believes in a larger window than the server has; the
/// server refuses with 400 `context_length_exceeded`, keel compacts and retries once, and the
/// retry fits.
#[test]
fn a_server_side_overflow_compacts_and_retries_once() {
    let server = windowed(
        9000,
        vec![
            read_call("a1", "a.txt"),
            read_call("b1", "b.txt"),
            Reply::text("done"),
        ],
    );
    let env = ctx_env(
        &server,
        Some((100_000, RESERVE)),
        "{ keep_recent_steps = 1 }",
    );
    big_files(&env, &["a", "b"]);
    let (run, result) = run_json(&env, "read a.txt then b.txt", &[]);
    run.expect_code(0);
    assert_eq!(result["result"], "done");
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 4, "r1, r2, r3 refused, r3 retried");
    assert_eq!(
        server.consumed(),
        3,
        "the refused request consumed no reply"
    );
    assert!(counted(&reqs[2]) > 9000, "r3 was over the server's window");
    assert!(counted(&reqs[3]) <= 9000, "the retry fits");
    assert!(stubs(reqs[2].messages()).is_empty());
    assert!(
        !stubs(reqs[3].messages()).is_empty(),
        "the retry carries the compaction's stub"
    );
    let events = stored_events(&env, &session_of(&result));
    assert!(!replacements(&events, "sink").is_empty());
    assert_eq!(
        compact_retries(&events),
        1,
        "one llm/retry with compact: true"
    );
    let mut replay = replayed(&events);
    replay.pop();
    same_history("replay vs the retry", &sent(&reqs[3]), &replay);
}

/// Issue 14 item 5 (CTX-03): when the compacted request is refused again there is exactly
/// one retry, then the turn ends `CONTEXT_OVERFLOW` (exit 1) and its message keeps the
/// server's words. The server refuses without stating its window, so keel cannot learn it.
#[test]
fn a_second_server_side_overflow_ends_context_overflow_after_one_retry() {
    let refusal = || {
        Reply::status(
            400,
            error_body(
                "This prompt is too long for the model.",
                "invalid_request_error",
                "context_length_exceeded",
            ),
        )
    };
    let server = windowed(
        1_000_000,
        vec![
            read_call("s1", "s.txt"),
            read_call("b1", "b.txt"),
            refusal(),
            refusal(),
            Reply::text("never"),
        ],
    );
    let env = ctx_env(
        &server,
        Some((100_000, RESERVE)),
        "{ keep_recent_steps = 1 }",
    );
    env.file("work/s.txt", &marked_text(3, "zqsmallmark", 4000));
    big_files(&env, &["b"]);
    let (run, result) = run_json(&env, "read s.txt then b.txt", &[]);
    run.expect_code(1);
    assert!(run.stderr.contains("CONTEXT_OVERFLOW"), "{}", run.stderr);
    let reqs = contract_holds(&server);
    assert_eq!(
        reqs.len(),
        4,
        "r1, r2, r3 refused, exactly one retry refused"
    );
    assert_eq!(server.consumed(), 4);
    assert!(
        stubs(reqs[2].messages()).is_empty() && !stubs(reqs[3].messages()).is_empty(),
        "the retry was compacted first"
    );
    let events = stored_events(&env, &session_of(&result));
    assert_eq!(last_error_code(&events), "CONTEXT_OVERFLOW");
    assert_eq!(compact_retries(&events), 1, "the one retry that went out");
    let end = events.iter().rfind(|e| e["type"] == "turn/end").unwrap();
    let message = end["data"]["reason"]["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("too long for the model"), "{end}");
}

/// Issue 14 item 5: a refusal that states the server's window ("maximum context length is
/// 5000 tokens") overrules a row that claims 100,000. What cannot fit that window after
/// compaction is not sent again: the turn ends `CONTEXT_OVERFLOW` naming the learnt window,
/// with no retry logged.
#[test]
fn a_stated_window_smaller_than_the_rows_overrules_it_and_nothing_doomed_is_sent() {
    let server = windowed(
        5000,
        vec![
            read_call("s1", "s.txt"),
            read_call("b1", "b.txt"),
            Reply::text("never"),
        ],
    );
    let env = ctx_env(
        &server,
        Some((100_000, RESERVE)),
        "{ keep_recent_steps = 1 }",
    );
    env.file("work/s.txt", &marked_text(3, "zqsmallmark", 4000));
    big_files(&env, &["b"]);
    let (run, result) = run_json(&env, "read s.txt then b.txt", &[]);
    run.expect_code(1);
    assert!(run.stderr.contains("CONTEXT_OVERFLOW"), "{}", run.stderr);
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 3, "r1, r2, r3 refused; nothing more was sent");
    assert!(counted(&reqs[2]) > 5000);
    let events = stored_events(&env, &session_of(&result));
    assert_eq!(last_error_code(&events), "CONTEXT_OVERFLOW");
    assert_eq!(compact_retries(&events), 0, "no retry went out");
    let end = events.iter().rfind(|e| e["type"] == "turn/end").unwrap();
    let message = end["data"]["reason"]["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("window is 5000 tokens"), "{end}");
    assert!(message.contains("maximum context length is 5000"), "{end}");
}

/// Issue 14 item 4 (CTX-01, MEM-08): a result over `result_cap_bytes` reaches the model as
/// head + tail + a `cold:` reference; the log keeps it whole; `coldcontext_read` pages it back
/// exactly, each partial page saying which bytes of how many it holds and where to go on.
#[test]
fn a_result_over_the_cap_goes_as_head_and_tail_with_a_cold_reference() {
    let server = windowed(
        WINDOW,
        vec![read_call("b1", "big.txt"), Reply::text("seen")],
    );
    let env = ctx_env(
        &server,
        Some((WINDOW, RESERVE)),
        "{ result_cap_bytes = 4096 }",
    );
    let text = marked_text(11, "zqcapmark", 20_000);
    env.file("work/big.txt", &text);
    let whole = numbered(&text);
    let (run, result) = run_json(&env, "read big.txt", &[]);
    run.expect_code(0);
    let id = session_of(&result);
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 2);
    let events = stored_events(&env, &id);
    let original = original_result(&events, "b1");
    assert_eq!(
        original["data"]["content"].as_str(),
        Some(whole.as_str()),
        "the log keeps the whole result"
    );
    let seq = original["seq"].as_u64().unwrap();
    let shown = tool_message(reqs[1].messages(), "b1")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(shown.len() < 4096 + 1024, "{} bytes went", shown.len());
    assert!(shown.starts_with(&whole[..1500]), "the head: {shown}");
    assert!(
        shown.ends_with(&whole[whole.len() - 700..]) || shown.contains(&whole[whole.len() - 700..]),
        "the tail: {shown}"
    );
    assert!(cold_refs(&shown).contains(&seq), "cold:{seq} in {shown}");
    let caps = replacements(&events, "cap");
    assert_eq!(caps.len(), 1, "one cap replacement");
    assert_eq!(caps[0]["type"], "tool/result");
    assert_eq!(caps[0]["data"]["call_id"], "b1");
    assert_eq!(caps[0]["data"]["context"]["ref"], seq);

    // Read it back in two pages: the first 4096 bytes, then the rest from the offset the first
    // page names. Together they are the result, byte for byte.
    server.push(Reply::tool_calls(vec![
        (
            "r1",
            "coldcontext_read",
            args(json!({ "ref": format!("cold:{seq}"), "limit": 4096 })),
        ),
        (
            "r2",
            "coldcontext_read",
            args(json!({ "ref": format!("cold:{seq}"), "offset": 4096 })),
        ),
    ]));
    server.push(Reply::text("read back"));
    let run = env.keel(&["resume", &id, "--profile", "t", "read the rest"]);
    run.expect_code(0);
    contract_holds(&server);
    let events = stored_events(&env, &id);
    let page = |call: &str| {
        let text = original_result(&events, call)["data"]["content"]
            .as_str()
            .unwrap()
            .to_owned();
        let (body, trailer) = text
            .rsplit_once("\n[keel: bytes ")
            .unwrap_or_else(|| panic!("a partial read ends with its byte range: {text}"));
        (body.to_owned(), trailer.to_owned())
    };
    let (first, trailer) = page("r1");
    assert_eq!(first, whole[..4096], "the first page");
    assert!(
        trailer.starts_with(&format!("0–4096 of {}", whole.len()))
            && trailer.contains(r#""offset":4096"#),
        "{trailer}"
    );
    let (rest, trailer) = page("r2");
    assert!(trailer.contains("the end"), "{trailer}");
    assert_eq!(format!("{first}{rest}"), whole, "the pages are the result");
}

/// Issue 14 item 3 (CTX-04): after a sink, `coldcontext_search` finds a sunk result by its
/// marker word and names its cold reference; an unknown reference is `COLD_REF_UNKNOWN`.
#[test]
fn coldcontext_search_finds_a_sunk_result_by_its_marker_word() {
    let server = windowed(
        WINDOW,
        vec![
            read_call("a1", "a.txt"),
            read_call("b1", "b.txt"),
            read_call("c1", "c.txt"),
            Reply::tool_calls(vec![
                (
                    "s1",
                    "coldcontext_search",
                    args(json!({ "query": mark("a") })),
                ),
                (
                    "u1",
                    "coldcontext_read",
                    args(json!({ "ref": "cold:999999" })),
                ),
            ]),
            Reply::text("done"),
        ],
    );
    let env = ctx_env(&server, Some((WINDOW, RESERVE)), "");
    big_files(&env, &["a", "b", "c"]);
    let (run, result) = run_json(&env, "read a, b and c, then find a again", &[]);
    run.expect_code(0);
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 5);
    assert!(
        !stubs(reqs[3].messages()).is_empty(),
        "the fourth request was compacted"
    );
    assert!(
        !reqs[3]
            .messages()
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["tool_call_id"] == "a1"),
        "a.txt's result was sunk"
    );
    let events = stored_events(&env, &session_of(&result));
    let a_seq = original_result(&events, "a1")["seq"].as_u64().unwrap();
    let found = tool_message(reqs[4].messages(), "s1")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        cold_refs(&found).contains(&a_seq),
        "search for {} must name cold:{a_seq}: {found}",
        mark("a")
    );
    let unknown = original_result(&events, "u1");
    assert_eq!(
        unknown["data"]["error"]["code"], "COLD_REF_UNKNOWN",
        "{unknown}"
    );
    check_tool_call_contract(reqs[4].messages()).unwrap();
}
