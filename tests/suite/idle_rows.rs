//! Idle rows and the manifest cache through the binary (issue 25 item 3): an `mcp` row without
//! servers and a `hooks` row without hooks are checked but not opened or activated at start;
//! a reload that gives one work opens and activates it; a library changed in place before
//! its idle row wakes is refused then, and one changed before a start is refused at start
//! even with a warm manifest cache; a corrupt cache falls back to opening; a graph mismatch
//! involving an idle row refuses to start with the same error, cached or not.
//!
//! What is opened is read from keel's own `keel::boot` lines (`library opened`, `manifest
//! from the cache`, `row idle`), and the row states from the proof driver's `status` step
//! (the kernel's control answer), never from anything a plugin says about itself.

use keel_tests::{Env, Run};
use serde_json::Value;

use crate::suite::agent_support::sandbox_usable;
use crate::suite::lock::{append_byte, lib, lock_path};
use crate::suite::proof::{failed, ok};

const LOG: &str = "keel::boot=debug";

/// A hook that would run on every tool call: work for the `hooks` row.
const HOOK: &str = r#"{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"true"}]}]}}"#;

/// The shipped `base` and `agent` bundles with the proof driver as the driver: `mcp` (no
/// servers) and `hooks` (no hooks) are idle.
fn agent_profile() -> Env {
    let env = Env::new().var("KEEL_LOG", LOG);
    env.profile(
        "p",
        &format!(
            r#"bundles = ["base", "agent"]

[[replace]]
id = "approval"
config = {{ mode = "never" }}

[[insert]]
id = "llm-openai"
plugin = "llm-openai"
config = {{ base_url = "http://127.0.0.1:9/v1", model = "m", api_key_ref = "KEEL_TEST_UNUSED" }}

[[insert]]
id = "driver"
plugin = "proof-driver"
{}
"#,
            if sandbox_usable() {
                ""
            } else {
                "\n[[disable]]\nid = \"sandbox\"\n"
            }
        ),
    );
    env
}

/// The plugins of a relocated tree: the least that `mcp` needs (`tools`, which needs the
/// session registry and a store).
const SMALL: &[&str] = &["proof-driver", "session", "session-jsonl", "tools", "mcp"];

fn small_rows(with_tools: bool) -> String {
    let tools = if with_tools {
        "[[insert]]\nid = \"tools\"\nplugin = \"tools\"\n"
    } else {
        ""
    };
    format!(
        r#"[[insert]]
id = "driver"
plugin = "proof-driver"

[[insert]]
id = "session"
plugin = "session"

[[insert]]
id = "session-store"
plugin = "session-jsonl"

{tools}
[[insert]]
id = "mcp"
plugin = "mcp"
config = {{ servers = {{}} }}
"#
    )
}

/// A relocated, locked tree with the small profile.
fn small_tree() -> Env {
    let env = Env::new().relocate(SMALL).var("KEEL_LOG", LOG);
    env.profile("p", &small_rows(true));
    env.keel(&["lock", "--profile", "p"]).expect_code(0);
    env
}

/// The `plugin=` of each `keel::boot` line containing `what`.
fn plugins_in(run: &Run, what: &str) -> Vec<String> {
    run.stderr
        .lines()
        .filter(|l| l.contains(" keel::boot: ") && l.contains(what))
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("plugin="))
                .map(str::to_owned)
        })
        .collect()
}

/// The state of `row` in the `index`-th step's status answer.
fn state(run: &Run, index: usize, row: &str) -> Value {
    let steps = run.steps();
    let rows = steps[index]["value"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    rows.iter()
        .find(|r| r["row"] == row)
        .map(|r| r["state"].clone())
        .unwrap_or_else(|| panic!("no row {row} in step {index}: {}", steps[index]))
}

fn manifest_cache(env: &Env) -> std::path::PathBuf {
    env.home().join("cache/library-manifests")
}

// issue 25 item 3; ARCHITECTURE §4.3 (reload). The `headless` rows with the proof driver: on a
// cold start every library is opened once to read its manifest (nothing cached yet); on a warm
// one, mcp's and hooks' libraries are never opened, their rows are `idle`, and a reload that
// gives hooks a hook opens its library and activates it, while a reload that gives mcp still
// nothing keeps it idle. `plugins list` and `doctor` say idle; `keel mcp list` wakes mcp.
#[test]
fn issue25_item3_idle_rows_are_not_opened_until_a_reload_gives_them_work() {
    let env = agent_profile();
    let cold = env.drive("p", "status");
    cold.expect_code(0);
    assert!(plugins_in(&cold, "library opened").contains(&"mcp".to_owned()));
    let script = format!(
        "status,reload:mcp:{{\"servers\":{{}}}},reload:hooks:{HOOK},status,wait:hooks:active"
    );
    let run = env.drive("p", &script);
    run.expect_code(0);
    let opened = plugins_in(&run, "library opened");
    let cached = plugins_in(&run, "manifest from the cache");
    for idle in ["mcp", "hooks"] {
        assert!(cached.contains(&idle.to_owned()), "{idle}:\n{}", run.stderr);
        assert!(
            plugins_in(&run, "row idle").contains(&idle.to_owned()),
            "{idle} not idle:\n{}",
            run.stderr
        );
        assert_eq!(state(&run, 0, idle), "idle", "{}", run.stdout);
    }
    assert!(
        !opened.contains(&"mcp".to_owned()),
        "mcp opened:\n{}",
        run.stderr
    );
    // Only hooks, and only once its reload gave it work.
    assert_eq!(
        plugins_in(&run, "idle row woken"),
        ["hooks"],
        "{}",
        run.stderr
    );
    assert_eq!(
        opened.iter().filter(|p| *p == "hooks").count(),
        1,
        "{}",
        run.stderr
    );
    // Rows that start are opened at start, as before.
    for eager in ["session", "tools", "agent-loop", "proof-driver"] {
        assert!(
            opened.contains(&eager.to_owned()),
            "{eager}:\n{}",
            run.stderr
        );
    }
    assert_eq!(ok(&run, "reload:mcp:{\"servers\":{}}")["state"], "idle");
    assert_eq!(ok(&run, &format!("reload:hooks:{HOOK}"))["state"], "active");
    assert_eq!(state(&run, 3, "mcp"), "idle");
    assert_eq!(state(&run, 3, "hooks"), "active");

    // `keel plugins list` and `keel doctor` say idle, not failed.
    let list = env.keel(&["plugins", "list", "--profile", "p"]);
    list.expect_code(0);
    for idle in ["mcp", "hooks"] {
        assert!(
            list.stdout.contains(&format!("idle {idle}: no work")),
            "{}",
            list.stdout
        );
    }
    let json = env.keel(&["plugins", "list", "--profile", "p", "--json"]);
    let v: Value = serde_json::from_str(&json.stdout).expect("json");
    let idle: Vec<&str> = v["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| r["idle"] == true)
        .filter_map(|r| r["row"].as_str())
        .collect();
    assert_eq!(idle, ["mcp", "hooks"]);
    // A command an idle row serves wakes it: `keel mcp list` opens mcp and answers.
    let list = env.keel(&["mcp", "list", "--json", "--profile", "p"]);
    list.expect_code(0);
    let v: Value = serde_json::from_str(list.stdout.trim()).expect("mcp list json");
    assert_eq!(v["servers"], serde_json::json!([]), "{}", list.stdout);
    assert_eq!(
        plugins_in(&list, "idle row woken"),
        ["mcp"],
        "{}",
        list.stderr
    );
    let doctor = env.keel(&["doctor", "--profile", "p"]);
    assert!(
        doctor.stdout.contains("idle rows")
            && doctor.stdout.contains("idle rows: hooks, mcp: no work"),
        "{}",
        doctor.stdout
    );
}

// issue 25 item 3, docs/security.md "The manifest cache and idle rows": an idle row's library
// written in place after keel started (and checked it) is refused when the row wakes — read
// again, `LOCK_DIGEST`, never opened — and the row stays idle with its last good config.
#[test]
fn issue25_item3_a_library_changed_after_start_is_refused_when_its_idle_row_wakes() {
    let env = small_tree();
    env.drive("p", "status").expect_code(0);
    let mcp = lib(&env, "mcp");
    let server = r#"{"servers":{"x":{"command":"true"}}}"#;
    let script = format!("status,sleep:3000,reload:mcp:{server},status");
    // The library is written once the driver printed its first step: keel has started (and
    // checked the lock) and the row is idle; the reload comes after.
    let mut child = env
        .command(&["run", "--profile", "p", &script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn keel");
    let stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    append_byte(&mcp);
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().expect("wait");
    let run = Run {
        code: status.code().unwrap_or(-1),
        stdout: std::iter::once(first)
            .chain(rest)
            .collect::<Vec<_>>()
            .join("\n"),
        stderr: errors.join().expect("stderr"),
    };
    run.expect_code(0);
    assert_eq!(state(&run, 0, "mcp"), "idle");
    let (code, message) = failed(&run, &format!("reload:mcp:{server}"));
    assert_eq!(code, "RELOAD_FAILED", "{message}");
    assert!(
        message.contains("LOCK_DIGEST") && message.contains("changed since keel started"),
        "{message}"
    );
    assert!(message.contains(&mcp.display().to_string()), "{message}");
    assert!(
        !plugins_in(&run, "library opened").contains(&"mcp".to_owned()),
        "{}",
        run.stderr
    );
    assert_eq!(state(&run, 3, "mcp"), "idle");

    // The next start refuses it before anything runs, warm manifest cache or not.
    let refused = env.drive("p", "status");
    let line = refused.one_error("LOCK_DIGEST");
    assert!(line.contains("'mcp'"), "{line}");
    assert!(
        line.contains(&lock_path(&env).display().to_string()),
        "{line}"
    );
    assert!(
        plugins_in(&refused, "library opened").is_empty(),
        "{}",
        refused.stderr
    );
    assert!(plugins_in(&refused, "manifest from the cache").is_empty());
}

// issue 25 item 3: any doubt about the manifest cache falls back to opening. A store whose
// checksum fails is not used at all (every library opened, the run succeeds, the store is
// written afresh); an entry that does not parse, in a store whose checksum was made to match,
// costs only its own library an open.
#[test]
fn issue25_item3_a_corrupt_manifest_cache_falls_back_to_opening() {
    let env = small_tree();
    env.drive("p", "status").expect_code(0);
    let warm = env.drive("p", "status");
    warm.expect_code(0);
    assert_eq!(
        plugins_in(&warm, "manifest from the cache").len(),
        SMALL.len()
    );
    assert_eq!(plugins_in(&warm, "library opened").len(), SMALL.len() - 1);

    let file = manifest_cache(&env);
    let text = std::fs::read_to_string(&file).expect("cache");
    assert!(text.contains("\"host\""));
    std::fs::write(&file, text.replacen("\"host\"", "\"hosT\"", 1)).expect("corrupt");
    let run = env.drive("p", "status");
    run.expect_code(0);
    assert!(plugins_in(&run, "manifest from the cache").is_empty());
    assert_eq!(plugins_in(&run, "library opened").len(), SMALL.len());
    assert_eq!(state(&run, 0, "mcp"), "idle");

    // A well-formed store with one entry that is not a manifest.
    let text = std::fs::read_to_string(&file).expect("rewritten cache");
    let (_, body) = text.split_once('\n').expect("header");
    let mut stored: Value = serde_json::from_str(body).expect("json");
    let digest = crate::suite::lock::digest(&lib(&env, "mcp"));
    stored["entries"][&digest] = "not a manifest".into();
    let body = serde_json::to_string(&stored).expect("json");
    let sum = blake3::hash(body.as_bytes()).to_hex();
    std::fs::write(
        &file,
        format!("keel library manifests v1 blake3:{sum}\n{body}"),
    )
    .expect("write");
    let run = env.drive("p", "status");
    run.expect_code(0);
    let opened = plugins_in(&run, "library opened");
    assert_eq!(opened.len(), SMALL.len(), "{}", run.stderr);
    let cached = plugins_in(&run, "manifest from the cache");
    assert_eq!(cached.len(), SMALL.len() - 1, "{}", run.stderr);
    assert!(plugins_in(&run, "library opened").contains(&"mcp".to_owned()));
    assert!(!plugins_in(&run, "manifest from the cache").contains(&"mcp".to_owned()));
    assert_eq!(state(&run, 0, "mcp"), "idle");
}

// issue 25 item 3; KRN-03: the facility graph still checks an idle row. Without `tools`, the
// idle mcp row's requirement has no provider: the start is refused with the same error from a
// cached manifest as from an opened library.
#[test]
fn issue25_item3_a_graph_mismatch_with_an_idle_row_refuses_to_start_cached_or_not() {
    let env = Env::new().var("KEEL_LOG", LOG);
    env.profile("p", &small_rows(true));
    env.drive("p", "status").expect_code(0);
    env.profile("p", &small_rows(false));
    let warm = env.drive("p", "status");
    let warm_line = warm.one_error("MISSING_PROVIDER").to_owned();
    assert!(
        plugins_in(&warm, "manifest from the cache").contains(&"mcp".to_owned()),
        "{}",
        warm.stderr
    );
    assert!(
        warm_line.contains("row 'mcp'") && warm_line.contains("keel.tools"),
        "{warm_line}"
    );
    std::fs::remove_file(manifest_cache(&env)).expect("rm cache");
    let cold = env.drive("p", "status");
    assert_eq!(cold.one_error("MISSING_PROVIDER"), warm_line);
    assert!(plugins_in(&cold, "library opened").contains(&"mcp".to_owned()));
}

// issue 25 item 3: the cache keeps only "this config passed this library's schema"; a config
// that does not pass is refused with a warm cache exactly as without one.
#[test]
fn issue25_item3_config_verdicts_spare_valid_configs_only() {
    let env = Env::new().var("KEEL_LOG", LOG);
    env.profile("p", &small_rows(true));
    env.drive("p", "status").expect_code(0);
    let text = std::fs::read_to_string(manifest_cache(&env)).expect("cache");
    let (_, body) = text.split_once('\n').expect("header");
    let stored: Value = serde_json::from_str(body).expect("json");
    assert_eq!(
        stored["valid"].as_array().map(Vec::len),
        Some(SMALL.len()),
        "{stored}"
    );
    env.profile(
        "p",
        &small_rows(true).replace("servers = {}", "servers = 5"),
    );
    let line = env.drive("p", "status").one_error("ROW_CONFIG").to_owned();
    assert!(
        line.contains("row 'mcp'") && line.contains("/servers"),
        "{line}"
    );
    std::fs::remove_file(manifest_cache(&env)).expect("rm cache");
    assert_eq!(env.drive("p", "status").one_error("ROW_CONFIG"), line);
}
