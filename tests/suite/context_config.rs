//! Bad input to the `context` row (issue 14; "bad input gets a clear error"): a summary prompt
//! that cannot be read, a target above the threshold, a share out of range. Each refuses the
//! run before any request (exit 2) with one line naming the row and the key or the file, and
//! no session is written.

use crate::suite::sessions_support::files_under;

fn refused(overrides: &[&str], says: &[&str]) {
    refused_in(&keel_tests::Env::new(), overrides, says);
}

fn refused_in(env: &keel_tests::Env, overrides: &[&str], says: &[&str]) {
    let mut args = vec!["run", "--profile", "demo"];
    for o in overrides {
        args.extend(["-c", o]);
    }
    args.push("tidy the notes");
    let run = env.keel(&args);
    run.expect_code(2);
    for s in says {
        assert!(
            run.stderr.contains(s),
            "stderr does not say {s:?}:\n{}",
            run.stderr
        );
    }
    assert_eq!(run.stderr.lines().count(), 1, "one line: {}", run.stderr);
    assert!(
        !files_under(&env.home())
            .iter()
            .any(|p| p.to_string_lossy().contains("sessions/")),
        "nothing ran, so no session was written"
    );
}

#[test]
fn an_unreadable_summary_prompt_is_refused_naming_the_file() {
    refused(
        &[
            r#"context.strategies=["summarise", "sink"]"#,
            r#"context.summarise={prompt="/nonexistent/keel/summarise.md"}"#,
        ],
        &[
            "row 'context'",
            "/nonexistent/keel/summarise.md",
            "cannot read the summary prompt",
        ],
    );
}

/// The summary prompt goes to the model verbatim: a file in `$KEEL_HOME` (credentials, the
/// secrets store) is refused even when it exists.
#[test]
fn a_summary_prompt_inside_keel_home_is_refused() {
    let env = keel_tests::Env::new();
    let creds = env.home().join("credentials.toml");
    std::fs::create_dir_all(env.home()).unwrap();
    std::fs::write(&creds, "OPENAI_API_KEY = \"sk-never-to-a-model\"\n").unwrap();
    let prompt = format!("context.summarise={{prompt=\"{}\"}}", creds.display());
    refused_in(
        &env,
        &[r#"context.strategies=["summarise"]"#, &prompt],
        &["row 'context'", "inside keel's home"],
    );
}

#[test]
fn a_relative_summary_prompt_is_refused_pointing_at_this_dir() {
    refused(
        &[
            r#"context.strategies=["summarise"]"#,
            r#"context.summarise={prompt="summarise.md"}"#,
        ],
        &["`summarise.prompt`", "${this_dir}/summarise.md"],
    );
}

#[test]
fn a_target_above_the_threshold_and_a_share_over_one_are_refused_naming_the_key() {
    refused(
        &["context.target=0.9"],
        &["row 'context'", "`target` (0.9)", "`threshold` (0.8)"],
    );
    refused(&["context.threshold=7"], &["row 'context'", "/threshold"]);
}

/// An untrusted project layer (a cloned repository's `.keel/config.toml`) may not choose the
/// file sent to the model as the summary prompt: `summarise` is a guarded key, and the run
/// stops before any request, naming the layer and the key.
#[test]
fn an_untrusted_project_layer_cannot_choose_the_summary_prompt() {
    let env = keel_tests::Env::new();
    let layer = env.file(
        "work/.keel/config.toml",
        "[[replace]]\nid = \"context\"\nconfig = { strategies = [\"summarise\"], summarise = { prompt = \"/etc/hostname\" } }\n",
    );
    let run = env.keel(&["run", "--profile", "demo", "tidy the notes"]);
    run.expect_code(2);
    let line = run.one_error("PROJECT_UNTRUSTED");
    assert!(line.contains(&layer.display().to_string()), "{line}");
    assert!(line.contains("context.summarise"), "{line}");
}
