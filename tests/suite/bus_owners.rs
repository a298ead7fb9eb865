//! Who declares an event (issue 13 item 2): the kernel declares only `kernel/*`; every other
//! event is declared by the manifest of the plugin that owns it. A dispatch of an event no
//! loaded row declares is `UNKNOWN_EVENT`; a listener on one is kept and never runs.

use keel_plugin_api::events::{CATALOG, owner};
use keel_plugin_api::host::load_library;
use keel_plugin_api::sdk::Manifest;
use keel_tests::{Env, plugin_lib, workspace_root};

use super::proof::{LISTENER, failed, ok, only, profile, row_status};

const STATUS_LISTENER: &str = r#"listeners = [{ event = "agent/status", tag = "l" }]"#;

// Issue 13 item 2: without the agent loop in the profile nothing declares `agent/status`, so a
// plugin dispatching it gets UNKNOWN_EVENT naming the event (the kernel no longer pre-declares
// the agent's vocabulary). The row listening to it still activates: its registration carries
// its own mode and types, and the listener simply never runs.
#[test]
fn an_agent_event_no_loaded_row_declares_is_refused_to_a_dispatcher_and_inert_for_a_listener() {
    let env = Env::new();
    profile(&env, "", &[("l", LISTENER, STATUS_LISTENER)]);
    let run = env.drive("p", "agent-status:s1,status");
    run.expect_code(0);
    let (code, message) = failed(&run, "agent-status:s1");
    assert_eq!(code, "UNKNOWN_EVENT", "{message}");
    assert!(
        message.contains("event 'agent/status' is not declared"),
        "{message}"
    );
    assert!(message.contains("only kernel/*"), "{message}");
    let listener = row_status(&run, 1, "l");
    assert_eq!(listener["state"], "active", "{listener}");
    assert!(
        listener["effects"].to_string().contains("agent/status"),
        "the listener is registered: {listener}"
    );
    assert_eq!(only(&env.trace(), "agent-status "), Vec::<String>::new());
}

// Issue 13 item 2: the same script and the same listener, with the shipped agent bundle loaded:
// the agent loop's manifest declares `agent/status`, so the proof driver's dispatch goes
// through and reaches the listener.
#[test]
fn the_agent_loop_row_declares_agent_events_so_the_same_dispatch_reaches_the_listener() {
    let env = Env::new();
    env.profile(
        "p",
        &format!(
            r#"bundles = ["base", "agent"]

[[replace]]
id = "agent-loop"
config = {{ provider = "scripted" }}

[[disable]]
id = "sandbox"

[[insert]]
id = "llm-scripted"
plugin = "llm-scripted"
config = {{ steps = [{{ text = "unused" }}] }}

[[insert]]
id = "driver"
plugin = "proof-driver"

[[insert]]
id = "l"
plugin = "{LISTENER}"
config = {{ {STATUS_LISTENER} }}
"#
        ),
    );
    let run = env.drive("p", "agent-status:s1");
    run.expect_code(0);
    ok(&run, "agent-status:s1");
    assert_eq!(only(&env.trace(), "agent-status "), ["agent-status l s1"]);
}

fn entry_dir(plugin: &str) -> std::path::PathBuf {
    workspace_root().join("plugins").join(plugin)
}

// Issue 13 item 2: every core event outside `kernel/*` is declared, with its mode, by exactly
// the first-party plugin that `docs/events.md` names as its owner (`events::OWNERS`), read from
// the built libraries' real manifests; no other plugin declares it.
#[test]
fn every_core_event_is_declared_by_the_plugin_the_catalog_names_and_no_other() {
    let mut plugins = Vec::new();
    for entry in std::fs::read_dir(workspace_root().join("plugins")).expect("plugins dir") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        let cargo =
            std::fs::read_to_string(entry_dir(&name).join("Cargo.toml")).unwrap_or_default();
        if !cargo
            .lines()
            .any(|l| l.starts_with("crate-type") && l.contains("cdylib"))
        {
            continue; // a plain library (session-store-kit), not a plugin
        }
        let lib = plugin_lib(&name);
        let library = load_library(&lib).expect("load plugin");
        let manifest: Manifest =
            serde_json::from_str(&library.manifest_json(&lib).expect("manifest")).expect("json");
        plugins.push(manifest);
    }
    assert!(
        plugins.iter().any(|m| m.id == "agent-loop"),
        "found the plugins"
    );
    for info in CATALOG {
        let owner = owner(info.name).expect("every event has an owner");
        let declaring: Vec<&str> = plugins
            .iter()
            .filter(|m| m.events.iter().any(|e| e.name == info.name))
            .map(|m| m.id.as_str())
            .collect();
        if owner == "keel" {
            assert_eq!(
                declaring,
                Vec::<&str>::new(),
                "{} is the kernel's",
                info.name
            );
            continue;
        }
        assert_eq!(
            declaring,
            [owner],
            "{} is declared by its owner only",
            info.name
        );
        let decl = plugins
            .iter()
            .find(|m| m.id == owner)
            .and_then(|m| m.events.iter().find(|e| e.name == info.name))
            .expect("declared");
        assert_eq!(decl.mode, info.mode.as_str(), "{}", info.name);
    }
}

// Issue 13 item 2: the kernel binary carries the `kernel/*` vocabulary and no other: no core
// event name of another domain appears anywhere in `keel` (before, the whole catalog was linked
// in to be pre-declared).
#[test]
fn the_keel_binary_names_no_event_but_the_kernel_ones() {
    let bin = std::fs::read(keel_tests::keel_bin()).expect("read keel");
    // Runs of the bytes an event name is made of that hold a `/`: few, so the search is quick.
    let runs: Vec<&[u8]> = bin
        .split(|b| !(b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'/' || *b == b'-'))
        .filter(|run| run.contains(&b'/'))
        .collect();
    let contains = |name: &str| {
        runs.iter()
            .any(|run| run.windows(name.len()).any(|w| w == name.as_bytes()))
    };
    for info in CATALOG {
        let kernel = owner(info.name) == Some("keel");
        assert_eq!(
            contains(info.name),
            kernel,
            "{} in the keel binary",
            info.name
        );
    }
}
