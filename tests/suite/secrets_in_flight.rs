//! Secrets in flight through the binary (issue 10 items 2, 4, 5, 9): the adapter key keel
//! resolves is scrubbed like a secret wherever a tool shows it (SEC-01/03); keel's own
//! environment holds no credential while it runs (SEC-09); a secret's base64 at any alignment
//! is scrubbed (SEC-03); a secret with shell metacharacters reaches the program byte for byte
//! and none of it runs (SEC-02).
//!
//! Each test greps every channel the value could leave by: stdout, stderr at trace level,
//! every request body the model server received and the session files — for the value and
//! for any base64 that decodes to it.

use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use keel_tests::Env;
use keel_tests::model_server::{ModelServer, Reply};
use serde_json::json;

use crate::suite::agent_support::*;

/// Whether `text` carries `value`: as is, or as base64 in either alphabet, at any alignment
/// (the middle of the value is looked for, so two edge bytes mixed with neighbours do not
/// hide a leak).
fn carries(text: &str, value: &str) -> bool {
    if text.contains(value) {
        return true;
    }
    let middle = &value.as_bytes()[2..value.len() - 2];
    let lenient = GeneralPurpose::new(
        &alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true),
    );
    let is_b64 = |c: char| c.is_ascii_alphanumeric() || "+/-_".contains(c);
    text.split(|c: char| !is_b64(c))
        .filter(|t| t.len() >= 8)
        .any(|token| {
            let standard = token.replace('-', "+").replace('_', "/");
            (0..4).any(|off| {
                let t = &standard[off..];
                lenient
                    .decode(&t[..t.len() / 4 * 4])
                    .is_ok_and(|bytes| bytes.windows(middle.len()).any(|w| w == middle))
            })
        })
}

/// Every channel of a finished run: stdout, stderr, each request body, each session file.
fn channels(env: &Env, server: &ModelServer, stdout: &str, stderr: &str) -> Vec<(String, String)> {
    let mut out = vec![
        ("stdout".to_owned(), stdout.to_owned()),
        ("stderr".to_owned(), stderr.to_owned()),
    ];
    for (i, r) in server.requests().iter().enumerate() {
        out.push((format!("request {i} body"), r.body.to_string()));
    }
    let stored = crate::suite::sessions_support::files_under(&env.home().join("sessions"));
    assert!(!stored.is_empty(), "no session files to check");
    for p in stored {
        let bytes = std::fs::read(&p).unwrap();
        out.push((
            p.display().to_string(),
            String::from_utf8_lossy(&bytes).into_owned(),
        ));
    }
    out
}

fn assert_nowhere(channels: &[(String, String)], value: &str) {
    for (name, text) in channels {
        assert!(
            !carries(text, value),
            "the value leaked into {name}:\n{text}"
        );
    }
}

/// `keel run` at trace level, stream-json.
fn run_traced(env: &Env, prompt: &str) -> keel_tests::Run {
    env.keel_with(
        &[
            "run",
            "--profile",
            "t",
            "--output-format",
            "stream-json",
            prompt,
        ],
        &[("KEEL_LOG", std::ffi::OsStr::new("trace"))],
    )
}

/// Where the adapter key comes from.
#[derive(Debug, Clone, Copy)]
enum KeySource {
    Env,
    File,
    WorkspaceDotenv,
}

/// Issue 10 item 2 (SEC-01/03): the adapter key, from each layer, sits in a workspace file
/// the model has a tool print (`read_file`, `cat`, and base64 at two alignments), and the
/// model then repeats it. No request body, no output stream and no session file carries it;
/// the tool result and stdout carry `[credential KEEL_TEST_MODEL_KEY]`; every request still
/// authenticates with the key.
#[test]
fn sec01_sec03_the_resolved_adapter_key_is_scrubbed_from_every_channel() {
    for source in [KeySource::Env, KeySource::File, KeySource::WorkspaceDotenv] {
        adapter_key_is_scrubbed(source);
    }
}

fn adapter_key_is_scrubbed(source: KeySource) {
    let marker = format!("[credential {KEY_REF}]");
    let server = server(vec![
        Reply::tool_calls(vec![
            ("k1", "read_file", args(json!({"path": "leak.txt"}))),
            (
                "k2",
                "shell",
                args(json!({"command": "cat leak.txt; echo; base64 leak.txt; \
                    printf 'x%s' \"$(cat leak.txt)\" | base64"})),
            ),
        ]),
        Reply::text(format!("the key is {KEY_VALUE}")),
    ]);
    let mut env = agent_env(&server, "");
    env.file("work/leak.txt", KEY_VALUE);
    match source {
        KeySource::Env => {}
        KeySource::File => {
            use std::os::unix::fs::PermissionsExt as _;
            env.vars.retain(|(k, _)| k != KEY_REF);
            let path = env.home().join("credentials.toml");
            std::fs::write(&path, format!("{KEY_REF} = \"{KEY_VALUE}\"\n")).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        KeySource::WorkspaceDotenv => {
            env.vars.retain(|(k, _)| k != KEY_REF);
            env.file("work/.env", &format!("{KEY_REF}={KEY_VALUE}\n"));
        }
    }
    let run = run_traced(&env, "print the file");
    run.expect_code(0);
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 2, "{source:?}");
    for r in &reqs {
        assert_eq!(
            r.headers.get("authorization").map(String::as_str),
            Some(format!("Bearer {KEY_VALUE}").as_str()),
            "{source:?}: the request did not authenticate with the key"
        );
    }
    assert_nowhere(
        &channels(&env, &server, &run.stdout, &run.stderr),
        KEY_VALUE,
    );
    for id in ["k1", "k2"] {
        let m = tool_message(reqs[1].messages(), id)["content"].to_string();
        assert!(m.contains(&marker), "{source:?} {id}: {m}");
    }
    assert!(
        run.stdout.contains(&format!("the key is {marker}")),
        "{source:?}: {}",
        run.stdout
    );
}

/// Issue 10 item 4 (SEC-09): while a run is in flight, keel's own environment, as
/// `/proc/<pid>/environ` shows it, holds neither the adapter key nor another credential-like
/// variable it inherited; a plain variable is still there (the read is real). Both requests,
/// before and after the shell call, authenticate with the key.
#[test]
fn sec09_keel_holds_no_credential_in_its_environment_while_it_runs() {
    const OTHER: &str = "tok-unused-5521-value";
    const PLAIN: &str = "plain-marker-7781";
    let server = server(vec![
        Reply::tool_calls(vec![(
            "w1",
            "shell",
            args(json!({"command":
                "touch started; for i in $(seq 600); do [ -f ready ] && break; sleep 0.1; done"})),
        )]),
        Reply::text("done"),
    ]);
    let env = agent_env(&server, "")
        .var("EXTRA_SERVICE_TOKEN", OTHER)
        .var("KEEL_TEST_PLAIN_MARKER", PLAIN);
    let child = env
        .command(&["run", "--profile", "t", "--output-format", "json", "wait"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = wait_for_file(&work_file(&env, "started"), Duration::from_secs(30));
    let environ = std::fs::read(format!("/proc/{}/environ", child.id()));
    std::fs::write(work_file(&env, "ready"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(started, "the shell call never started");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let environ =
        String::from_utf8_lossy(&environ.expect("read /proc/<keel>/environ")).into_owned();
    assert!(environ.contains(PLAIN), "the read is real: {environ:?}");
    assert!(
        !environ.contains(KEY_VALUE),
        "the adapter key is in keel's environment"
    );
    assert!(
        !environ.contains(OTHER),
        "a credential-like variable is in keel's environment"
    );
    let reqs = contract_holds(&server);
    assert_eq!(reqs.len(), 2);
    for r in &reqs {
        assert_eq!(
            r.headers.get("authorization").map(String::as_str),
            Some(format!("Bearer {KEY_VALUE}").as_str())
        );
    }
}

/// Issue 10 item 5 (SEC-03): a secret's base64 with one, two and three bytes before it (and
/// the URL-safe alphabet) reaches no channel; each output is the alias instead.
#[test]
fn sec03_a_secrets_base64_at_any_alignment_reaches_no_channel() {
    const VALUE: &str = "b64-secret-7d41-value";
    let server = server(vec![
        Reply::tool_calls(vec![(
            "b1",
            "shell",
            args(json!({"command":
                "printf 'x%s' sec_B64 | base64; printf 'xy%s' sec_B64 | base64; \
                 printf 'xyz%s!' sec_B64 | base64 | tr '+/' '-_'"})),
        )]),
        Reply::text("done"),
    ]);
    let env = agent_env(&server, "");
    set_secret(&env, "B64", VALUE);
    let run = run_traced(&env, "encode it");
    run.expect_code(0);
    let reqs = contract_holds(&server);
    let content = tool_message(reqs[1].messages(), "b1")["content"].to_string();
    assert!(content.contains("exit code: 0"), "{content}");
    assert_eq!(content.matches("sec_B64").count(), 3, "{content}");
    assert_nowhere(&channels(&env, &server, &run.stdout, &run.stderr), VALUE);
}

/// Issue 10 item 9 (SEC-02): a secret holding `'`, `"`, `` ` ``, `$(…)`, `;`, spaces and a
/// newline reaches the program exactly, unquoted, in double and in single quotes; nothing in
/// it runs; the outputs carry the alias. An alias in a quoted heredoc is refused before
/// anything runs.
#[test]
fn sec02_a_hostile_secret_reaches_the_program_byte_for_byte_and_runs_nothing() {
    const VALUE: &str = "it's \"quoted\" `touch tick` $(touch pwned); touch semi\nline two";
    let server = server(vec![
        Reply::tool_calls(vec![
            (
                "h1",
                "shell",
                args(json!({"command":
                    "printf '%s' sec_HOSTILE > bare.txt; printf '%s' \"sec_HOSTILE\" > dq.txt; \
                     printf '%s' 'sec_HOSTILE' > sq.txt; cat bare.txt"})),
            ),
            (
                "h2",
                "shell",
                args(json!({"command": "cat > heredoc.txt <<'EOF'\nsec_HOSTILE\nEOF"})),
            ),
        ]),
        Reply::text("done"),
    ]);
    let env = agent_env(&server, "");
    set_secret(&env, "HOSTILE", VALUE);
    let run = run_traced(&env, "use the secret");
    run.expect_code(0);
    for file in ["bare.txt", "dq.txt", "sq.txt"] {
        assert_eq!(
            std::fs::read_to_string(work_file(&env, file)).unwrap(),
            VALUE,
            "{file}"
        );
    }
    for ran in ["pwned", "tick", "semi", "heredoc.txt"] {
        assert!(
            !work_file(&env, ran).exists(),
            "{ran} exists: part of the value ran"
        );
    }
    let reqs = contract_holds(&server);
    let h1 = tool_message(reqs[1].messages(), "h1")["content"].to_string();
    assert!(
        h1.contains("exit code: 0") && h1.contains("sec_HOSTILE"),
        "{h1}"
    );
    let h2 = tool_message(reqs[1].messages(), "h2")["content"].to_string();
    assert!(
        h2.contains("SECRET_UNFILLABLE") && h2.contains("quoted heredoc"),
        "{h2}"
    );
    assert_nowhere(&channels(&env, &server, &run.stdout, &run.stderr), VALUE);
}
