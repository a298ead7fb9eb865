//! The reporting commands of the `keel` binary: `config dump [--explain] [--json]` (CFG-02,
//! CFG-03, CFG-08), `plugins list [--json]` (ARCHITECTURE §4.2; KRN-03), `doctor` (§4.1) and
//! `--help` (§11). Every assertion reads what the binary printed for a profile built from real
//! files in every layer, and checks it against those files (paths, digests of the libraries).

use std::path::Path;

use keel_tests::{Env, Run, build_dir, plugin_lib};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn json_of(run: &Run) -> Value {
    run.expect_code(0);
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", run.stdout))
}

fn row<'a>(dump: &'a Value, id: &str) -> &'a Value {
    dump["rows"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["id"] == id || r["row"] == id))
        .unwrap_or_else(|| panic!("no row {id:?} in {dump:#}"))
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}

/// Files for a profile that uses every layer kind (CFG-02), one row changed by each.
struct Layered {
    env: Env,
    bundle: String,
    profile: String,
    user: String,
    project: String,
    patch: String,
    cli: &'static str,
}

fn layered() -> Layered {
    let env = Env::new();
    let bundle = env.bundle(
        "trunk",
        r#"[kernel]
fault_threshold = 5

[[insert]]
id = "drv"
plugin = "proof-driver"

[[insert]]
id = "from-bundle"
plugin = "proof-listener"
config = { effects = ["bundle"] }

[[insert]]
id = "by-profile"
plugin = "proof-listener"
config = { effects = ["bundle"], fail_activation = false }

[[insert]]
id = "by-user"
plugin = "proof-listener"
config = { effects = ["bundle"] }

[[insert]]
id = "by-patch"
plugin = "proof-listener"
config = { effects = ["bundle"] }

[[insert]]
id = "by-cli"
plugin = "proof-listener"
config = { effects = ["bundle"] }
"#,
    );
    let profile = env.profile(
        "layered",
        "description = \"every layer kind\"\nbundles = [\"trunk\"]\n\n\
         [[replace]]\nid = \"by-profile\"\nconfig = { effects = [\"profile\"] }\n",
    );
    let user = env.file(
        "home/config.toml",
        "[[replace]]\nid = \"by-user\"\nconfig = { effects = [\"user\"] }\n",
    );
    env.file(
        "work/.keel/config.toml",
        "[[insert]]\nid = \"by-project\"\nplugin = \"proof-listener\"\nconfig = { effects = [\"project\"] }\n",
    );
    let patch = env.file(
        "patches/late.toml",
        "[kernel]\nlistener_deadline_ms = 1234\n\n\
         [[replace]]\nid = \"by-patch\"\nconfig = { effects = [\"patch\"] }\n",
    );
    // keel resolves the project layer from its working directory, as the OS reports it.
    let work = env.work().canonicalize().expect("canonical work dir");
    let project = shown(&work.join(".keel/config.toml"));
    Layered {
        bundle: shown(&bundle),
        profile: shown(&profile),
        user: shown(&user),
        project,
        patch: shown(&patch),
        cli: "by-cli.register_in_disposer=true",
        env,
    }
}

impl Layered {
    fn args<'a>(&'a self, cmd: &[&'a str]) -> Vec<&'a str> {
        let mut args = cmd.to_vec();
        args.extend([
            "--profile",
            "layered",
            "--patch",
            &self.patch,
            "-c",
            self.cli,
        ]);
        args
    }
}

#[test]
fn cfg08_config_dump_round_trips_as_a_profile() {
    let l = layered();
    let first = l.env.keel(&l.args(&["config", "dump"]));
    first.expect_code(0);
    assert!(first.stdout.contains("launcher-only patches are not shown"));
    let before = json_of(&l.env.keel(&l.args(&["config", "dump", "--json"])));
    // The dump is itself a layer: saved as a profile without bundles it gives the same tree.
    l.env.profile("again", &first.stdout);
    // The user and project layers apply to every profile; move them away for the replay.
    std::fs::remove_file(&l.user).expect("rm user layer");
    std::fs::remove_file(&l.project).expect("rm project layer");
    let second = l.env.keel(&["config", "dump", "--profile", "again"]);
    second.expect_code(0);
    // Everything but the header comments (profile name and file, description) is identical.
    let body = |s: &str| {
        s.lines()
            .skip_while(|l| l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(body(&second.stdout), body(&first.stdout));

    let after = json_of(
        &l.env
            .keel(&["config", "dump", "--json", "--profile", "again"]),
    );
    assert_eq!(after["rows"], before["rows"]);
    assert_eq!(after["kernel"], before["kernel"]);
    assert_eq!(
        before["kernel"],
        json!({"fault_threshold": 5, "listener_deadline_ms": 1234, "activation_deadline_ms": 60000})
    );
}

#[test]
fn cfg02_cfg03_cfg08_explain_names_the_layer_kind_and_file_of_every_row_and_key() {
    let l = layered();
    let run = l.env.keel(&l.args(&["config", "dump", "--explain"]));
    run.expect_code(0);
    let text = &run.stdout;
    let has = |line: &str| {
        assert!(
            text.lines().any(|l| l == line),
            "--explain has no line {line:?}:\n{text}"
        );
    };
    let (b, p, u, j, t, c) = (&l.bundle, &l.profile, &l.user, &l.project, &l.patch, l.cli);
    // The layers, in the CFG-02 order.
    has(&format!("# layer 1: bundle:trunk ({b})"));
    has(&format!("# layer 2: profile:layered ({p})"));
    has(&format!("# layer 3: user ({u})"));
    has(&format!("# layer 4: project ({j})"));
    has(&format!("# layer 5: patch ({t})"));
    has(&format!("# layer 6: cli (-c {c})"));
    // Per row and per key.
    has(&format!(
        "# row 'from-bundle': inserted by bundle:trunk ({b})"
    ));
    has(&format!("# key effects: set by bundle:trunk ({b})"));
    has(&format!(
        "# row 'by-profile': inserted by bundle:trunk ({b}); replaced by profile:layered ({p})"
    ));
    has(&format!(
        "# key effects: set by profile:layered ({p}), overrode bundle:trunk ({b})"
    ));
    has(&format!(
        "# row 'by-user': inserted by bundle:trunk ({b}); replaced by user ({u})"
    ));
    has(&format!(
        "# key effects: set by user ({u}), overrode bundle:trunk ({b})"
    ));
    has(&format!("# row 'by-project': inserted by project ({j})"));
    has(&format!("# key effects: set by project ({j})"));
    has(&format!(
        "# row 'by-patch': inserted by bundle:trunk ({b}); replaced by patch ({t})"
    ));
    has(&format!(
        "# key effects: set by patch ({t}), overrode bundle:trunk ({b})"
    ));
    has(&format!(
        "# row 'by-cli': inserted by bundle:trunk ({b}); keys overridden by cli (-c {c})"
    ));
    has(&format!("# key register_in_disposer: set by cli (-c {c})"));
    has(&format!(
        "# kernel fault_threshold: set by bundle:trunk ({b})"
    ));
    has(&format!(
        "# kernel listener_deadline_ms: set by patch ({t})"
    ));

    // The same facts, structured.
    let dump = json_of(
        &l.env
            .keel(&l.args(&["config", "dump", "--explain", "--json"])),
    );
    let layer = |kind: &str, source: &str| json!({"kind": kind, "source": source});
    let kinds: Vec<&Value> = dump["layers"]
        .as_array()
        .expect("layers")
        .iter()
        .map(|l| &l["kind"])
        .collect();
    assert_eq!(
        kinds,
        [
            "bundle:trunk",
            "profile:layered",
            "user",
            "project",
            "patch",
            "cli"
        ]
    );
    let by_profile = row(&dump, "by-profile");
    assert_eq!(
        by_profile["provenance"]["inserted_by"],
        layer("bundle:trunk", b)
    );
    assert_eq!(
        by_profile["provenance"]["replaced_by"],
        json!([layer("profile:layered", p)])
    );
    // CFG-03: a replace swaps the whole config; `fail_activation` from the bundle is gone.
    assert_eq!(by_profile["config"], json!({"effects": ["profile"]}));
    let by_user = row(&dump, "by-user");
    assert_eq!(by_user["provenance"]["keys"][0]["set_by"], layer("user", u));
    let by_project = row(&dump, "by-project");
    assert_eq!(by_project["provenance"]["inserted_by"], layer("project", j));
    let by_patch = row(&dump, "by-patch");
    assert_eq!(
        by_patch["provenance"]["replaced_by"],
        json!([layer("patch", t)])
    );
    // `-c` is the one exception to whole-row replacement: it sets one key and keeps the rest.
    let by_cli = row(&dump, "by-cli");
    assert_eq!(
        by_cli["config"],
        json!({"effects": ["bundle"], "register_in_disposer": true})
    );
    assert_eq!(
        by_cli["provenance"]["overridden_by"],
        json!([layer("cli", &format!("-c {c}"))])
    );
}

#[test]
fn cfg03_a_patch_that_matches_no_row_warns_naming_its_layer() {
    let env = Env::new();
    env.profile("p", "[[insert]]\nid = \"drv\"\nplugin = \"proof-driver\"\n");
    let patch = env.file(
        "patches/stray.toml",
        "[[replace]]\nid = \"nobody\"\nconfig = {}\n",
    );
    let user = env.file("home/config.toml", "[[disable]]\nid = \"ghost\"\n");
    let patch = shown(&patch);
    let user = shown(&user);
    for cmd in [&["config", "dump"][..], &["run"][..]] {
        let mut args = cmd.to_vec();
        args.extend(["--profile", "p", "--patch", &patch, "-c", "absent.key=1"]);
        let run = env.keel(&args);
        run.expect_code(0);
        let warnings: Vec<&str> = run.error_lines();
        assert_eq!(
            warnings,
            [
                format!("keel: warning: user layer {user}: disable of row 'ghost' matches no row"),
                format!(
                    "keel: warning: patch layer {patch}: replace of row 'nobody' matches no row"
                ),
                "keel: warning: cli layer -c absent.key=1: override of row 'absent' matches no row"
                    .to_owned(),
            ],
            "stderr:\n{}",
            run.stderr
        );
    }
}

#[test]
fn krn03_plugins_list_json_shows_rows_versions_digests_layers_and_edges() {
    let env = Env::new();
    env.profile(
        "p",
        "[[insert]]\nid = \"drv\"\nplugin = \"proof-driver\"\n\n\
         [[insert]]\nid = \"cons\"\nplugin = \"proof-consumer\"\n\n\
         [[insert]]\nid = \"prov\"\nplugin = \"proof-provider\"\n\n\
         [[insert]]\nid = \"lone\"\nplugin = \"proof-listener\"\n",
    );
    let list = json_of(&env.keel(&["plugins", "list", "--json", "--profile", "p"]));
    assert_eq!(list["profile"], "p");
    let plugins = [
        ("drv", "proof-driver"),
        ("cons", "proof-consumer"),
        ("prov", "proof-provider"),
        ("lone", "proof-listener"),
    ];
    let ids: Vec<&Value> = list["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| &r["row"])
        .collect();
    assert_eq!(ids, ["drv", "cons", "prov", "lone"]);
    for (id, plugin) in plugins {
        let r = row(&list, id);
        assert_eq!(r["plugin"], plugin);
        assert_eq!(r["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(r["abi"], keel_plugin_api::abi::ABI_MAJOR);
        // The digest is the blake3 of the library file keel found (the dev build here).
        let lib = plugin_lib(plugin);
        assert_eq!(r["library"], shown(&lib));
        let bytes = std::fs::read(&lib).expect("read library");
        assert_eq!(
            r["digest"],
            format!("blake3:{}", blake3::hash(&bytes).to_hex())
        );
    }
    // KRN-03: the provider activates in an earlier layer than its consumer.
    let layer = |id: &str| row(&list, id)["layer"].as_u64().expect("layer");
    assert!(layer("prov") < layer("cons"), "{list:#}");
    assert!(
        layer("prov") < layer("drv"),
        "the driver optionally uses the counter"
    );
    assert_eq!(layer("lone"), 0);
    for (i, members) in list["layers"]
        .as_array()
        .expect("layers")
        .iter()
        .enumerate()
    {
        for id in members.as_array().expect("layer rows") {
            assert_eq!(layer(id.as_str().expect("id")), i as u64);
        }
    }
    assert_eq!(
        list["edges"],
        json!([
            {"consumer": "cons", "provider": "prov", "facility": "proof.counter", "optional": false},
            {"consumer": "drv", "provider": "prov", "facility": "proof.counter", "optional": true},
        ])
    );
    assert!(
        list["graph_digest"]
            .as_str()
            .is_some_and(|d| d.starts_with("blake3:"))
    );
    assert!(
        list["lock"]
            .as_str()
            .is_some_and(|l| l.starts_with("unlocked"))
    );

    // The text form carries the same facts.
    let text = env.keel(&["plugins", "list", "--profile", "p"]);
    text.expect_code(0);
    assert!(
        text.stdout.contains("edge cons -> prov (proof.counter)"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("edge drv -> prov (proof.counter, optional)"),
        "{}",
        text.stdout
    );
    for (id, plugin) in plugins {
        assert!(
            text.stdout
                .lines()
                .any(|l| l.starts_with(id) && l.contains(plugin)),
            "no line for row {id}:\n{}",
            text.stdout
        );
    }
}

/// A healthy profile: the driver, a listener and the sandbox row (its runner probes are its
/// own doctor checks, issue 13 item 2).
fn healthy(env: &Env) {
    env.profile(
        "fine",
        "[[insert]]\nid = \"drv\"\nplugin = \"proof-driver\"\n\n[[insert]]\nid = \"l\"\nplugin = \"proof-listener\"\n\n[[insert]]\nid = \"sandbox\"\nplugin = \"sandbox\"\n",
    );
}

#[test]
fn doctor_reports_abi_plugin_path_lock_and_sandbox_probes() {
    let env = Env::new();
    healthy(&env);
    let extra = env.path().join("extra-plugins");
    std::fs::create_dir_all(&extra).expect("mkdir");
    let run = env.keel_with(
        &["doctor", "--profile", "fine"],
        &[("KEEL_PLUGIN_PATH", extra.as_os_str())],
    );
    run.expect_code(0);
    let out = &run.stdout;
    let line = |prefix: &str| {
        out.lines()
            .find(|l| l.contains(prefix))
            .unwrap_or_else(|| panic!("doctor has no {prefix:?} line:\n{out}"))
    };
    assert!(
        line("kernel:").contains(&format!("plugin ABI {}", keel_plugin_api::abi::ABI_MAJOR)),
        "{out}"
    );
    // The search path, in order: KEEL_PLUGIN_PATH first, then beside the binary.
    let dirs: Vec<&str> = out.lines().filter(|l| l.contains("plugin path:")).collect();
    assert!(dirs[0].contains(&shown(&extra)), "{out}");
    assert!(
        dirs.iter()
            .any(|l| l.starts_with("ok") && l.contains(&shown(&build_dir()))),
        "{out}"
    );
    assert!(
        line("lock:").contains("unlocked"),
        "a dev tree runs unlocked:\n{out}"
    );
    assert!(line("profile 'fine'").starts_with("ok"), "{out}");
    assert!(line("driver:").starts_with("ok"), "{out}");
    for probe in ["sandbox: bubblewrap:", "sandbox: landlock:"] {
        let l = line(probe);
        assert!(l.starts_with("ok") || l.starts_with("warn"), "{l}");
    }
    assert!(!out.lines().any(|l| l.starts_with("FAIL")), "{out}");
    assert_eq!(run.error_lines(), Vec::<&str>::new());
}

#[test]
fn doctor_exits_non_zero_for_a_broken_profile() {
    let env = Env::new();
    env.profile(
        "broken",
        "[[insert]]\nid = \"needy\"\nplugin = \"proof-consumer\"\n",
    );
    for profile in ["broken", "no-such-profile"] {
        let run = env.keel(&["doctor", "--profile", profile]);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
        assert_ne!(
            run.code, 0,
            "doctor passed profile {profile}:\n{}",
            run.stdout
        );
        let fail = run
            .stdout
            .lines()
            .find(|l| l.starts_with("FAIL"))
            .unwrap_or_else(|| panic!("no FAIL line:\n{}", run.stdout));
        assert!(fail.contains(&format!("profile '{profile}'")), "{fail}");
    }
    let run = env.keel(&["doctor", "--profile", "broken"]);
    assert!(
        run.stdout.contains("error[MISSING_PROVIDER]"),
        "{}",
        run.stdout
    );
    // A driverless profile is not broken, but doctor says `keel run` will refuse it.
    env.profile(
        "quiet",
        "[[insert]]\nid = \"l\"\nplugin = \"proof-listener\"\n",
    );
    let run = env.keel(&["doctor", "--profile", "quiet"]);
    run.expect_code(0);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with("warn") && l.contains("no driver")),
        "{}",
        run.stdout
    );
}

#[test]
fn help_lists_the_subcommands_of_the_cli_contract() {
    let env = Env::new();
    let commands = |run: &Run| -> Vec<String> {
        run.expect_code(0);
        run.stdout
            .lines()
            .skip_while(|l| !l.starts_with("Commands:"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .collect()
    };
    // ARCHITECTURE §11 (and §6's `keel trust`). `sessions`, `fork`, `secrets`, `mcp`
    // (issue 15), `chat` and `acp` (issue 26) are grammar only: a plugin of the profile does the work
    // (command seam).
    assert_eq!(
        commands(&env.keel(&["--help"])),
        [
            "run", "resume", "config", "plugins", "sessions", "fork", "secrets", "mcp", "chat",
            "acp", "trust", "lock", "doctor", "help"
        ]
    );
    assert_eq!(
        commands(&env.keel(&["secrets", "--help"])),
        ["set", "list", "rm", "help"]
    );
    assert_eq!(
        commands(&env.keel(&["sessions", "--help"])),
        ["list", "show", "help"]
    );
    assert_eq!(commands(&env.keel(&["config", "--help"])), ["dump", "help"]);
    assert_eq!(
        commands(&env.keel(&["plugins", "--help"])),
        ["list", "help"]
    );
    let run_help = env.keel(&["run", "--help"]);
    run_help.expect_code(0);
    for option in [
        "--profile",
        "-C <DIR>",
        "-c <ROW.KEY=VALUE>",
        "--patch <NAME|FILE>",
        "--output-format",
        "--ephemeral",
        "--max-turns",
        "--sandbox",
        "--approval",
    ] {
        assert!(
            run_help.stdout.contains(option),
            "run --help lacks {option}:\n{}",
            run_help.stdout
        );
    }
    for cmd in [
        &["config", "dump", "--help"][..],
        &["plugins", "list", "--help"][..],
    ] {
        let run = env.keel(cmd);
        run.expect_code(0);
        assert!(run.stdout.contains("--json"), "{cmd:?}:\n{}", run.stdout);
    }
    let version = env.keel(&["--version"]);
    version.expect_code(0);
    assert_eq!(
        version.stdout.trim(),
        format!("keel {}", env!("CARGO_PKG_VERSION"))
    );
}

// The README's main command (`cargo xtask demo`) runs the kernel tour until the demo profile
// ships; this is the same run through the binary, so a broken tour fails the tests, not a
// newcomer.
#[test]
fn the_kernel_tour_runs_every_step() {
    let env = Env::new();
    let tour = keel_tests::workspace_root().join("tests/tour/tour.toml");
    let tour = tour.to_string_lossy().into_owned();
    let run = env.keel(&[
        "run",
        "--profile",
        &tour,
        "emit:hello,waterfall,async-waterfall,parallel,serial,counter,disable:counter,status,counter,enable:counter,counter",
    ]);
    run.expect_code(0);
    let steps = run.steps();
    assert_eq!(steps.len(), 11, "{}", run.stdout);
    assert!(steps.iter().all(|s| s["ok"] == true), "{}", run.stdout);
    assert_eq!(
        env.trace().last().map(String::as_str),
        Some("dispose first-effect")
    );
}
