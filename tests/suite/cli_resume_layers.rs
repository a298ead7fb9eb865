//! `keel resume` applies the run's own layers again (issue 23 item 3): a session records its
//! non-secret `-c` arguments and its `--patch` files (path and digest) with its profile, and a
//! resume without them sends the conversation where the run sent it — never to the profile's
//! default endpoint. An explicit `-c` of a recorded key wins, said in one line; a recorded
//! patch that changed or vanished stops the resume with `RECORDED_PATCH_CHANGED`. Profile `t`
//! points at server `b` (the default the user did not choose); `-c` points the run at `a`.

use keel_tests::model_server::{ModelServer, Reply};

use crate::suite::agent_support::*;
use crate::suite::sessions_support::jsonl_file;

/// The recorded `session/profile` event's data.
fn recorded_profile(env: &keel_tests::Env, id: &str) -> serde_json::Value {
    let events = stored_events(env, id);
    let profile = events
        .iter()
        .find(|e| e["type"] == "session/profile")
        .unwrap_or_else(|| panic!("no session/profile in {:?}", types(&events)));
    profile["data"].clone()
}

fn base(server: &ModelServer) -> String {
    format!("llm-openai.base_url={}", server.base_url())
}

// Issue 23 item 3: run with `-c llm-openai.base_url=<a>`, resume without `-c` (once relaunched
// from the default profile, once under an explicit `--profile t`): `a` gets every resumed
// request, `b` none; a secret `-c` is never recorded; an explicit `-c` to `c` wins, said once.
#[test]
fn issue23_item3_resume_applies_the_recorded_overrides_and_an_explicit_one_wins() {
    let a = server(vec![
        Reply::text("secret"),
        Reply::text("one"),
        Reply::text("two"),
        Reply::text("three"),
    ]);
    let b = server(vec![Reply::text("wrong")]);
    let c = server(vec![Reply::text("four")]);
    let env = agent_env(&b, "");
    // A `-c` naming a secret (here a header) is never recorded.
    let secret = "llm-openai.headers={X-Token=\"sk-never-recorded-9c1d\"}";
    let (run, result) = run_json(&env, "zeroth", &["-c", &base(&a), "-c", secret]);
    run.expect_code(0);
    let other = session_of(&result);
    assert_eq!(
        recorded_profile(&env, &other)["overrides"],
        serde_json::json!([base(&a)])
    );
    let log = std::fs::read_to_string(jsonl_file(&env, &other)).unwrap();
    assert!(
        !log.contains("sk-never-recorded"),
        "a secret -c was recorded"
    );

    let (run, result) = run_json(&env, "first", &["-c", &base(&a)]);
    run.expect_code(0);
    let id = session_of(&result);
    assert_eq!(
        recorded_profile(&env, &id)["overrides"],
        serde_json::json!([base(&a)])
    );

    let run = env.keel(&["resume", &id, "--output-format", "json", "second"]);
    run.expect_code(0);
    let run2 = env.keel(&[
        "resume",
        &id,
        "--profile",
        "t",
        "--output-format",
        "json",
        "third",
    ]);
    run2.expect_code(0);
    assert_eq!(a.completions().len(), 4, "{}\n{}", run.stderr, run2.stderr);
    assert_eq!(
        b.completions().len(),
        0,
        "the default endpoint got the conversation"
    );
    for r in [&run, &run2] {
        assert!(!r.stderr.contains("config changed since"), "{}", r.stderr);
    }

    let run = env.keel(&[
        "resume",
        &id,
        "-c",
        &base(&c),
        "--output-format",
        "json",
        "fourth",
    ]);
    run.expect_code(0);
    assert_eq!(c.completions().len(), 1, "{}", run.stderr);
    assert_eq!(a.completions().len(), 4);
    let said: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("keel: resuming session"))
        .collect();
    assert_eq!(said.len(), 1, "{}", run.stderr);
    assert!(
        said[0].contains(&format!("-c {}", base(&c)))
            && said[0].contains(&format!("recorded -c {}", base(&a))),
        "{}",
        said[0]
    );
}

// Issue 23 item 3: a `--patch` file is recorded with its digest and applied again on resume;
// once it changed, and once it vanished, the resume stops with RECORDED_PATCH_CHANGED naming
// the file, before any request.
#[test]
fn issue23_item3_a_recorded_patch_is_applied_again_and_a_changed_one_stops_the_resume() {
    let a = server(vec![Reply::text("one"), Reply::text("two")]);
    let b = server(vec![]);
    let env = agent_env(&b, "");
    let text = std::fs::read_to_string(env.path().join("config/profiles/t.toml")).unwrap();
    let start = text.find("[[insert]]\nid = \"llm-openai\"").unwrap();
    let row = &text[start..];
    let row = &row[..row.find("\n\n").unwrap_or(row.len())];
    let patch = env.file(
        "patches/local.toml",
        &row.replace("[[insert]]", "[[replace]]")
            .replace("plugin = \"llm-openai\"\n", "")
            .replace(&b.base_url(), &a.base_url()),
    );
    let shown = patch.display().to_string();
    let (run, result) = run_json(&env, "first", &["--patch", &shown]);
    run.expect_code(0);
    assert_eq!(a.completions().len(), 1, "{}", run.stderr);
    let id = session_of(&result);
    let recorded = recorded_profile(&env, &id);
    let canonical = patch.canonicalize().unwrap().display().to_string();
    assert_eq!(
        recorded["patches"][0]["path"],
        canonical.as_str(),
        "{recorded}"
    );

    let run = env.keel(&["resume", &id, "--output-format", "json", "second"]);
    run.expect_code(0);
    assert_eq!(a.completions().len(), 2, "{}", run.stderr);
    assert_eq!(b.completions().len(), 0);

    std::fs::write(
        &patch,
        format!("{}\n# edited\n", std::fs::read_to_string(&patch).unwrap()),
    )
    .unwrap();
    let run = env.keel(&["resume", &id, "third"]);
    let line = run.one_error("RECORDED_PATCH_CHANGED");
    assert!(
        line.contains(&canonical) && line.contains("changed"),
        "{line}"
    );
    std::fs::remove_file(&patch).unwrap();
    let run = env.keel(&["resume", &id, "third"]);
    let line = run.one_error("RECORDED_PATCH_CHANGED");
    assert!(
        line.contains(&canonical) && line.contains("vanished"),
        "{line}"
    );
    assert_eq!(a.completions().len() + b.completions().len(), 2);
}
