//! Sandbox escalation through the binary (SBX-08, B10): `danger-full-access` only after an
//! approved escalation, for that one call; a rejected or unanswerable one runs nothing; a
//! request that does not widen never prompts; malformed requests are refused. The approver is
//! the `proof-approver` plugin on the `approval/answer` seam, which records every question.

use serde_json::{Value, json};

use keel_tests::Env;
use keel_tests::model_server::{ModelServer, Reply};

use crate::suite::agent_support::*;

fn outside(name: &str) -> std::path::PathBuf {
    outside_workspace("escalate", name)
}

/// Removes the files and says which existed.
fn existed(paths: &[&std::path::Path]) -> Vec<bool> {
    paths
        .iter()
        .map(|p| {
            let was = p.exists();
            let _ = std::fs::remove_file(p);
            was
        })
        .collect()
}

/// The profile `t` plus an approver answering `outcome` (none when `None`).
fn env_with_approver(server: &ModelServer, outcome: Option<&str>) -> (Env, std::path::PathBuf) {
    let row = outcome.map_or_else(String::new, |o| {
        format!(
            "[[insert]]\nid = \"approver\"\nplugin = \"proof-approver\"\nconfig = {{ outcome = \"{o}\", record = \"RECORD\" }}\n"
        )
    });
    let env = agent_env(server, &row);
    let record = env.work().join("approver-questions.jsonl");
    // The row names the record inside this env's workspace.
    let profile = env.path().join("config/profiles/t.toml");
    let text = std::fs::read_to_string(&profile).unwrap();
    std::fs::write(
        &profile,
        text.replace("RECORD", &record.display().to_string()),
    )
    .unwrap();
    (env, record)
}

fn questions(record: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn escalate(command: &str) -> String {
    args(json!({
        "command": command,
        "sandbox_permissions": "danger-full-access",
        "justification": "the build cache lives in $HOME",
    }))
}

#[test]
fn sbx08_danger_full_access_only_after_an_approved_escalation_for_one_call() {
    if !sandbox_usable() {
        eprintln!("skipped: bubblewrap is not usable on this machine");
        return;
    }
    let (plain, granted, after, file) = (
        outside("plain"),
        outside("granted"),
        outside("after"),
        outside("file"),
    );
    let write = |p: &std::path::Path| format!("echo x > {}", p.display());
    let server = server(vec![
        Reply::tool_calls(vec![(
            "e1",
            "shell",
            args(json!({"command": write(&plain)})),
        )]),
        Reply::tool_calls(vec![("e2", "shell", escalate(&write(&granted)))]),
        Reply::tool_calls(vec![(
            "e3",
            "shell",
            args(json!({"command": write(&after)})),
        )]),
        Reply::tool_calls(vec![(
            "e4",
            "write_file",
            args(json!({"path": file.display().to_string(), "content": "x",
                "sandbox_permissions": "danger-full-access", "justification": "a dotfile"})),
        )]),
        Reply::text("done"),
    ]);
    let (env, record) = env_with_approver(&server, Some("allowed-once"));
    let (run, result) = run_json(&env, "escalate", &[]);
    run.expect_code(0);
    assert_eq!(
        existed(&[&plain, &granted, &after, &file]),
        vec![false, true, false, true],
        "only the two approved calls may write outside the workspace"
    );

    // The denial told the model how to escalate (B10 markers).
    let reqs = contract_holds(&server);
    let denied = tool_message(reqs[1].messages(), "e1")["content"].to_string();
    assert!(
        denied.contains("[sandbox: file access denied under workspace-write mode]")
            && denied.contains("sandbox_permissions"),
        "{denied}"
    );
    // The grant was for e2 alone: e3 ran confined again.
    let e3 = tool_message(reqs[3].messages(), "e3")["content"].to_string();
    assert!(e3.contains("SHELL_EXIT"), "{e3}");

    // The approver was asked exactly twice, with the B10 reason.
    let asked = questions(&record);
    let ids: Vec<&str> = asked.iter().filter_map(|q| q["call_id"].as_str()).collect();
    assert_eq!(ids, vec!["e2", "e4"]);
    assert_eq!(
        asked[0]["reason"],
        "escalate sandbox to danger-full-access: the build cache lives in $HOME"
    );

    // Approved before anything ran: the audit pair precedes the call's result in the log.
    let events = stored_events(&env, &session_of(&result));
    let at = |ty: &str, call: &str| {
        events
            .iter()
            .position(|e| {
                e["type"] == ty
                    && (e["data"]["call_id"] == call
                        || e["data"]["id"]
                            .as_str()
                            .is_some_and(|_| ty == "approval/decided"))
            })
            .unwrap_or_else(|| panic!("no {ty} for {call}"))
    };
    let asked_e2 = at("approval/asked", "e2");
    let decided = events
        .iter()
        .position(|e| e["type"] == "approval/decided" && e["data"]["outcome"] == "allowed-once")
        .unwrap();
    let result_e2 = at("tool/result", "e2");
    assert!(
        asked_e2 < decided && decided < result_e2,
        "{:?}",
        types(&events)
    );
}

#[test]
fn sbx08_a_rejected_or_unanswered_escalation_runs_nothing() {
    if !sandbox_usable() {
        eprintln!("skipped: bubblewrap is not usable on this machine");
        return;
    }
    for (outcome, says, code) in [
        (Some("rejected"), "rejected", "APPROVAL_REJECTED"),
        (None, "unavailable", "APPROVAL_UNAVAILABLE"),
    ] {
        let target = outside(says);
        let server = server(vec![
            Reply::tool_calls(vec![(
                "x1",
                "shell",
                escalate(&format!("echo x > {}", target.display())),
            )]),
            Reply::text("done"),
        ]);
        let (env, record) = env_with_approver(&server, outcome);
        let (run, _) = run_json(&env, "escalate", &[]);
        run.expect_code(0);
        assert_eq!(existed(&[&target]), vec![false], "{says}: it ran");
        let reqs = contract_holds(&server);
        let content = tool_message(reqs[1].messages(), "x1")["content"].to_string();
        // The pipeline's one ask carried the escalation's reason (TOOL-03: one question).
        assert!(
            content.contains(code)
                && content.contains("escalate sandbox to danger-full-access: the build cache"),
            "{says}: {content}"
        );
        assert_eq!(questions(&record).len(), usize::from(outcome.is_some()));
    }
}

#[test]
fn sbx08_no_prompt_without_widening_and_malformed_requests_are_refused() {
    if !sandbox_usable() {
        eprintln!("skipped: bubblewrap is not usable on this machine");
        return;
    }
    let target = outside("same");
    let server = server(vec![
        Reply::tool_calls(vec![
            // Not wider than workspace-write: no prompt, runs confined (inside: fine).
            (
                "n1",
                "shell",
                args(json!({"command": "echo in > inside.txt",
                    "sandbox_permissions": "workspace-write", "justification": "same mode"})),
            ),
            (
                "n2",
                "shell",
                args(json!({"command": format!("echo x > {}", target.display()),
                    "sandbox_permissions": "workspace-write", "justification": "same mode"})),
            ),
            // Without its justification.
            (
                "n3",
                "shell",
                args(
                    json!({"command": "echo y > lone.txt", "sandbox_permissions": "danger-full-access"}),
                ),
            ),
        ]),
        Reply::text("done"),
    ]);
    let (env, record) = env_with_approver(&server, Some("allowed-once"));
    let (run, _) = run_json(&env, "no widening", &[]);
    run.expect_code(0);
    assert!(questions(&record).is_empty(), "{:?}", questions(&record));
    assert_eq!(
        std::fs::read_to_string(work_file(&env, "inside.txt")).unwrap(),
        "in\n"
    );
    assert_eq!(existed(&[&target]), vec![false]);
    assert!(!work_file(&env, "lone.txt").exists());
    let reqs = contract_holds(&server);
    let lone = tool_message(reqs[1].messages(), "n3")["content"].to_string();
    assert!(lone.contains("must come together"), "{lone}");
}

/// TOOL-03 + SBX-08: in approval mode `ask`, where the shell call needs approval anyway, the
/// escalation is still one question, carrying the escalation's reason.
#[test]
fn sbx08_an_escalation_in_ask_mode_is_one_question() {
    if !sandbox_usable() {
        eprintln!("skipped: bubblewrap is not usable on this machine");
        return;
    }
    let target = outside("ask-mode");
    let server = server(vec![
        Reply::tool_calls(vec![(
            "q1",
            "shell",
            escalate(&format!("echo x > {}", target.display())),
        )]),
        Reply::text("done"),
    ]);
    let (env, record) = env_with_approver(&server, Some("allowed-once"));
    let (run, _) = run_json(&env, "escalate", &["--approval", "ask"]);
    run.expect_code(0);
    assert_eq!(existed(&[&target]), vec![true], "the approved call ran");
    let asked = questions(&record);
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("escalate sandbox to danger-full-access"),
        "{asked:?}"
    );
}
