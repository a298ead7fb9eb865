//! The long session of issue 14 (its first test; CTX-01, CTX-03, CTX-04, CTX-05, MEM-08): 300
//! steps, each a `read_file` of an 8 KB workspace file with a marker word of its own, then a
//! final answer, through the built `keel`, the shipped bundles (the `context` row with its
//! defaults) and a loopback model server whose window is 16k tokens — the `llm-openai` row
//! says the same window (`context_window = 16384`, `output_reserve = 1024`). Without compaction
//! the history passes the window by step 6; with it every request fits, keeps the tool-call
//! contract, the raw log keeps every original byte, and a later `coldcontext_read` of a sunk
//! result returns it exactly.

use std::time::Instant;

use keel_tests::model_server::{Reply, check_tool_call_contract};
use serde_json::json;

use crate::suite::agent_support::{args, run_json, session_of, stored_events, tool_message};
use crate::suite::context_support::*;

/// Tool-calling steps; request STEPS + 1 gets the final answer.
const STEPS: usize = 300;
/// The server's and the row's window, in tokens.
const WINDOW: u64 = 16_384;
/// The row's output reserve.
const RESERVE: u64 = 1024;
/// Each file's size.
const FILE_BYTES: usize = 8000;

fn marker(i: usize) -> String {
    format!("zqmark{i:03}x")
}

fn path(i: usize) -> String {
    format!("f/{i:03}.txt")
}

/// Issue 14, test 1 (CTX-01/03/04/05, MEM-08): 300 steps of 8 KB under a 16k window.
#[test]
fn a_300_step_session_of_8kb_results_fits_a_16k_window_and_loses_nothing() {
    let mut replies: Vec<Reply> = (0..STEPS)
        .map(|i| read_call(&format!("c{i}"), &path(i)))
        .collect();
    replies.push(Reply::text("read them all"));
    let server = windowed(WINDOW, replies);
    let env = ctx_env(&server, Some((WINDOW, RESERVE)), "");
    let texts: Vec<String> = (0..STEPS)
        .map(|i| marked_text(i as u64 + 1, &marker(i), FILE_BYTES))
        .collect();
    for (i, t) in texts.iter().enumerate() {
        env.file(&format!("work/{}", path(i)), t);
    }
    let started = Instant::now();
    let (run, result) = run_json(&env, "read every file under f/, in order", &[]);
    let wall = started.elapsed();
    eprintln!("context_long: {STEPS} steps took {wall:?} (debug build)");
    run.expect_code(0);
    assert_eq!(result["result"], "read them all", "{result}");
    let id = session_of(&result);

    // Every request fits the window and keeps the tool-call contract; none was refused.
    let reqs = server.completions();
    assert_eq!(reqs.len(), STEPS + 1, "one request per step, no retry");
    assert_eq!(
        server.consumed(),
        reqs.len(),
        "the server refused a request"
    );
    for (n, r) in reqs.iter().enumerate() {
        assert!(
            counted(r) <= WINDOW,
            "request {n} is {} tokens, over the {WINDOW}-token window",
            counted(r)
        );
        if let Err(e) = check_tool_call_contract(r.messages()) {
            panic!("request {n} breaks the tool-call contract: {e}");
        }
        // The task statement stays verbatim at the head of the history.
        assert_eq!(
            r.messages()[1]["content"],
            "read every file under f/, in order",
            "request {n} lost the task statement"
        );
    }
    // Without compaction the history would have passed the window long before the end.
    let raw: usize = texts.iter().map(|t| numbered(t).len()).sum();
    assert!(
        raw as u64 / 4 > 10 * WINDOW,
        "the test must overflow: {raw}"
    );

    // The raw log holds every original result, byte for byte.
    let events = stored_events(&env, &id);
    for (i, t) in texts.iter().enumerate() {
        let original = original_result(&events, &format!("c{i}"));
        assert_eq!(
            original["data"]["content"].as_str(),
            Some(numbered(t).as_str()),
            "the log lost bytes of step {i}'s result"
        );
    }
    // Token accounting (item 1): each model reply logs the usage the server billed (its count
    // of the request), the run's cumulative usage, and the context row's estimate and window;
    // the result line sums the run.
    let replies: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "assistant/message" && !is_replacement(e))
        .collect();
    assert_eq!(replies.len(), reqs.len());
    let (mut total, mut worst) = (0u64, 0f64);
    for (r, e) in reqs.iter().zip(&replies) {
        let d = &e["data"];
        assert_eq!(d["usage"]["input_tokens"], r.prompt_tokens(), "{d}");
        total += r.prompt_tokens();
        assert_eq!(d["cumulative_usage"]["input_tokens"], total, "{d}");
        assert_eq!(d["context"]["window"], WINDOW, "{d}");
        let estimate = d["context"]["estimated_tokens"]
            .as_u64()
            .expect("estimated_tokens");
        let off = (estimate as f64 - r.prompt_tokens() as f64).abs() / r.prompt_tokens() as f64;
        worst = worst.max(off);
    }
    assert_eq!(result["usage"]["input_tokens"], total, "{result}");
    eprintln!(
        "context_long: the estimate was at worst {:.1} % off the server's count",
        worst * 100.0
    );
    // Compaction ran by sinking (the default strategy), with stubs naming cold references to
    // the originals.
    let sinks = replacements(&events, "sink");
    assert!(!sinks.is_empty(), "no sink replacement in the log");
    eprintln!(
        "context_long: {} sink replacements; largest request {} tokens",
        sinks.len(),
        reqs.iter().map(counted).max().unwrap_or(0)
    );
    let result_seqs: Vec<u64> = events
        .iter()
        .filter(|e| e["type"] == "tool/result" && !is_replacement(e))
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    let mut sunk: Vec<u64> = Vec::new();
    for s in &sinks {
        assert_eq!(s["type"], "assistant/message", "{s}");
        let content = s["data"]["message"]["content"].as_str().unwrap_or_default();
        assert!(content.starts_with(STUB), "{content}");
        assert!(content.contains("coldcontext_read"), "{content}");
        for r in cold_refs(content) {
            assert!(
                result_seqs.contains(&r),
                "the stub names cold:{r}, no original: {s}"
            );
        }
        for r in s["data"]["context"]["refs"]
            .as_array()
            .expect("context.refs")
        {
            let r = r.as_u64().unwrap();
            assert!(
                result_seqs.contains(&r),
                "ref {r} is no original result: {s}"
            );
            sunk.push(r);
        }
    }
    // Nothing vanished: each result is either in the last request or sunk by a stub.
    let last = reqs.last().unwrap();
    for i in 0..STEPS {
        let id = format!("c{i}");
        let seq = original_result(&events, &id)["seq"].as_u64().unwrap();
        let visible = last
            .messages()
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["tool_call_id"] == id.as_str());
        assert!(
            visible || sunk.contains(&seq),
            "step {i}'s result is neither sent nor in a stub's refs"
        );
    }
    // The replayed projection is what the last request carried.
    let mut before_answer = replayed(&events);
    assert_eq!(
        before_answer.pop().map(|m| m["content"].clone()),
        Some(json!("read them all"))
    );
    same_history("replay vs the last request", &sent(last), &before_answer);

    // Later: recall a sunk result by reference and find another by its marker word.
    let sunk = cold_refs(
        sinks[0]["data"]["message"]["content"]
            .as_str()
            .unwrap_or_default(),
    );
    let target = *sunk.first().expect("the first stub names a cold reference");
    let original = events
        .iter()
        .find(|e| e["seq"] == target)
        .unwrap_or_else(|| panic!("cold:{target} is no event of the log"));
    assert_eq!(original["type"], "tool/result", "{original}");
    let content = original["data"]["content"].as_str().unwrap().to_owned();
    let step = texts
        .iter()
        .position(|t| numbered(t) == content)
        .expect("the sunk result is one of the files");
    let before = reqs.len();
    server.push(Reply::tool_calls(vec![
        (
            "r1",
            "coldcontext_read",
            args(json!({ "ref": format!("cold:{target}") })),
        ),
        (
            "r2",
            "coldcontext_search",
            args(json!({ "query": marker(step) })),
        ),
    ]));
    server.push(Reply::text("recalled"));
    let run = env.keel(&["resume", &id, "--profile", "t", "what did that file say?"]);
    run.expect_code(0);
    let reqs = server.completions();
    let after = &reqs[reqs.len() - 1];
    assert!(reqs.len() >= before + 2);
    assert!(counted(after) <= WINDOW);
    check_tool_call_contract(after.messages()).unwrap();
    let read = tool_message(after.messages(), "r1");
    assert_eq!(
        read["content"].as_str(),
        Some(numbered(&texts[step]).as_str()),
        "coldcontext_read did not return the sunk result byte for byte"
    );
    let found = tool_message(after.messages(), "r2");
    assert!(
        found["content"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("cold:{target}")),
        "coldcontext_search for {} did not name cold:{target}: {found}",
        marker(step)
    );
    let events = stored_events(&env, &id);
    assert_eq!(
        original_result(&events, "r1")["data"]["content"].as_str(),
        Some(numbered(&texts[step]).as_str()),
        "the recalled result in the log"
    );
}
