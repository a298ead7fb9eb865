//! Workspace structure rules (ARCHITECTURE §1.1: the kernel is small and knows no feature).
//!
//! `kernel/` must not depend on any crate under `plugins/`, nor on a proof plugin under
//! `tests/plugins/` — directly, under a rename, or through another workspace crate. Checked twice,
//! independently: from `cargo metadata` (what cargo actually resolves) and from the text of
//! `kernel/Cargo.toml` (what a reviewer reads). A self-test feeds the metadata check a workspace
//! that breaks the rule, so the check cannot pass vacuously.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use keel_tests::workspace_root;
use serde_json::{Value, json};

const KERNEL: &str = "keel-kernel";
/// The kernel and the crates split out of it (issue 13 item 3): the binary, the config layers
/// and the output guard are held to the same rule.
const KERNEL_CRATES: &[(&str, &str)] = &[
    (KERNEL, "kernel"),
    ("keel-cli", "kernel/cli"),
    ("keel-config", "kernel/config"),
    ("keel-output-guard", "kernel/output-guard"),
];
/// Folders whose crates the kernel must never depend on.
const PLUGIN_DIRS: &[&str] = &["plugins", "tests/plugins"];

/// `cargo metadata --format-version 1 --no-deps` for the workspace.
fn metadata(root: &Path) -> Value {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

/// One dependency edge of a workspace package.
#[derive(Debug, Clone)]
struct Dep {
    name: String,
    path: Option<PathBuf>,
    kind: String,
}

/// Workspace packages: name → (crate dir, dependencies).
fn packages(meta: &Value) -> BTreeMap<String, (PathBuf, Vec<Dep>)> {
    let mut out = BTreeMap::new();
    for p in meta["packages"].as_array().expect("packages") {
        let name = p["name"].as_str().expect("package name").to_owned();
        let dir = Path::new(p["manifest_path"].as_str().expect("manifest_path"))
            .parent()
            .expect("manifest dir")
            .to_path_buf();
        let deps = p["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .map(|d| Dep {
                name: d["name"].as_str().expect("dep name").to_owned(),
                path: d["path"].as_str().map(PathBuf::from),
                kind: d["kind"].as_str().unwrap_or("normal").to_owned(),
            })
            .collect();
        out.insert(name, (dir, deps));
    }
    out
}

fn under_plugin_dir(root: &Path, dir: &Path) -> bool {
    PLUGIN_DIRS.iter().any(|p| dir.starts_with(root.join(p)))
}

/// Every way a kernel crate ([`KERNEL_CRATES`]) reaches a plugin crate, as `a -> b -> plugin` chains. Walks all of the
/// kernel's own dependency kinds, and the normal and build dependencies of workspace crates it
/// depends on (their dev-dependencies are never built for the kernel).
fn kernel_plugin_paths(meta: &Value, root: &Path) -> Vec<String> {
    let pkgs = packages(meta);
    let plugin_names: BTreeSet<&str> = pkgs
        .iter()
        .filter(|(_, (dir, _))| under_plugin_dir(root, dir))
        .map(|(name, _)| name.as_str())
        .collect();
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    let roots: BTreeSet<&str> = KERNEL_CRATES.iter().map(|(name, _)| *name).collect();
    let mut stack: Vec<(String, String)> = roots
        .iter()
        .map(|n| ((*n).to_owned(), (*n).to_owned()))
        .collect();
    while let Some((name, chain)) = stack.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let Some((_, deps)) = pkgs.get(&name) else {
            continue;
        };
        for dep in deps {
            if !roots.contains(name.as_str()) && dep.kind == "dev" {
                continue;
            }
            let link = format!("{chain} -> {}", dep.name);
            let is_plugin = plugin_names.contains(dep.name.as_str())
                || dep
                    .path
                    .as_deref()
                    .is_some_and(|p| under_plugin_dir(root, p));
            if is_plugin {
                problems.push(format!("{link} ({} dependency)", dep.kind));
            } else if dep.path.is_some() && pkgs.contains_key(&dep.name) {
                stack.push((dep.name.clone(), link));
            }
        }
    }
    problems.sort();
    problems
}

#[test]
fn the_kernel_depends_on_no_plugin_crate_per_cargo_metadata() {
    let root = workspace_root();
    let meta = metadata(&root);
    let pkgs = packages(&meta);
    for (name, _) in KERNEL_CRATES {
        assert!(pkgs.contains_key(*name), "no {name} in the workspace");
    }
    // Not vacuous: the proof plugins are workspace crates the rule applies to.
    let plugin_crates: Vec<&String> = pkgs
        .iter()
        .filter(|(_, (dir, _))| under_plugin_dir(&root, dir))
        .map(|(name, _)| name)
        .collect();
    assert!(
        plugin_crates
            .iter()
            .any(|n| *n == "keel-plugin-proof-driver"),
        "the proof plugins under tests/plugins/ are missing from the metadata: {plugin_crates:?}"
    );
    assert_eq!(kernel_plugin_paths(&meta, &root), Vec::<String>::new());
    // Not vacuous either: cargo reports path dependencies with their paths (the plugin API).
    let (_, deps) = &pkgs[KERNEL];
    assert!(
        deps.iter()
            .any(|d| d.name == "keel-plugin-api"
                && d.path.as_deref() == Some(&*root.join("plugin-api"))),
        "{deps:?}"
    );
}

#[test]
fn the_metadata_check_catches_direct_renamed_and_transitive_plugin_dependencies() {
    let root = PathBuf::from("/ws");
    let pkg = |name: &str, dir: &str, deps: Value| json!({"name": name, "manifest_path": format!("/ws/{dir}/Cargo.toml"), "dependencies": deps});
    let dep = |name: &str, path: Option<&str>, kind: Option<&str>| json!({"name": name, "path": path.map(|p| format!("/ws/{p}")), "kind": kind, "rename": null});
    let meta = json!({"packages": [
        pkg(KERNEL, "kernel", json!([
            dep("keel-plugin-api", Some("plugin-api"), None),
            dep("helper", Some("helper"), None),
            dep("keel-plugin-proof-driver", Some("tests/plugins/proof-driver"), Some("dev")),
            dep("serde", None, None),
        ])),
        pkg("keel-cli", "kernel/cli", json!([
            dep("keel-kernel", Some("kernel"), None),
            dep("keel-plugin-headless", Some("plugins/headless"), None),
        ])),
        pkg("keel-plugin-headless", "plugins/headless", json!([])),
        pkg("keel-plugin-api", "plugin-api", json!([])),
        pkg("helper", "helper", json!([
            dep("keel-plugin-shell", Some("plugins/shell"), None),
            dep("keel-plugin-agent", Some("plugins/agent"), Some("dev")),
        ])),
        pkg("keel-plugin-shell", "plugins/shell", json!([])),
        pkg("keel-plugin-agent", "plugins/agent", json!([])),
        pkg("keel-plugin-proof-driver", "tests/plugins/proof-driver", json!([])),
    ]});
    assert_eq!(
        kernel_plugin_paths(&meta, &root),
        [
            "keel-cli -> keel-plugin-headless (normal dependency)",
            "keel-kernel -> helper -> keel-plugin-shell (normal dependency)",
            "keel-kernel -> keel-plugin-proof-driver (dev dependency)",
        ]
    );
    // `plugin-api` is not `plugins/`: path matching is by component, not by prefix.
    assert!(!under_plugin_dir(&root, Path::new("/ws/plugin-api")));
}

/// The dependency tables of a manifest: `[dependencies]`, `[dev-dependencies]`,
/// `[build-dependencies]` and their `[target.'cfg'.…]` forms.
fn dependency_tables(manifest: &toml::Table) -> Vec<(String, &toml::Table)> {
    let kinds = ["dependencies", "dev-dependencies", "build-dependencies"];
    let mut out = Vec::new();
    for kind in kinds {
        if let Some(t) = manifest.get(kind).and_then(toml::Value::as_table) {
            out.push((kind.to_owned(), t));
        }
    }
    if let Some(targets) = manifest.get("target").and_then(toml::Value::as_table) {
        for (cfg, t) in targets {
            for kind in kinds {
                if let Some(t) = t.get(kind).and_then(toml::Value::as_table) {
                    out.push((format!("target.{cfg}.{kind}"), t));
                }
            }
        }
    }
    out
}

fn is_plugin_crate_name(name: &str) -> bool {
    name.starts_with("keel-plugin-") && name != "keel-plugin-api"
}

#[test]
fn kernel_manifest_names_no_plugin_crate() {
    let root = workspace_root();
    for (_, dir) in KERNEL_CRATES {
        manifest_names_no_plugin_crate(&root, dir);
    }
}

/// One kernel crate's manifest (`DIR/Cargo.toml`) names no plugin crate and no plugin folder.
fn manifest_names_no_plugin_crate(root: &Path, dir: &str) {
    let file = format!("{dir}/Cargo.toml");
    let text = std::fs::read_to_string(root.join(&file)).expect("kernel manifest");
    // Plain text first: no path into a plugin folder, no plugin crate name, anywhere.
    for (i, line) in text.lines().enumerate() {
        let code = line.split('#').next().unwrap_or_default();
        assert!(
            !code.contains("plugins/"),
            "{file}:{}: points into a plugin folder: {line}",
            i + 1
        );
        let named = code
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .any(|w| is_plugin_crate_name(&w.replace('_', "-")));
        assert!(!named, "{file}:{}: names a plugin crate: {line}", i + 1);
    }
    // Then each dependency, following `workspace = true` into the root manifest.
    let manifest: toml::Table = toml::from_str(&text).expect("a kernel manifest is TOML");
    let root_manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(root.join("Cargo.toml")).expect("root manifest"))
            .expect("Cargo.toml is TOML");
    let workspace_deps = root_manifest
        .get("workspace")
        .and_then(|w| w.get("dependencies"))
        .and_then(toml::Value::as_table);
    let tables = dependency_tables(&manifest);
    assert!(!tables.is_empty(), "{file} has no dependency table");
    for (kind, table) in tables {
        for (key, spec) in table {
            let inherited = spec
                .get("workspace")
                .and_then(toml::Value::as_bool)
                .unwrap_or(false);
            let spec = if inherited {
                workspace_deps
                    .and_then(|w| w.get(key))
                    .unwrap_or_else(|| panic!("{kind}.{key}: not in [workspace.dependencies]"))
            } else {
                spec
            };
            let package = spec
                .get("package")
                .and_then(toml::Value::as_str)
                .unwrap_or(key);
            assert!(
                !is_plugin_crate_name(package),
                "kernel {kind}: {key} is the plugin crate {package}"
            );
            if let Some(path) = spec.get("path").and_then(toml::Value::as_str) {
                // Paths in the root manifest are relative to the root, others to the crate.
                let base = if inherited {
                    root.to_path_buf()
                } else {
                    root.join(dir)
                };
                let resolved = normalize(&base.join(path));
                assert!(
                    !under_plugin_dir(root, &resolved),
                    "kernel {kind}: {key} points into a plugin folder ({})",
                    resolved.display()
                );
            }
        }
    }
}

/// Resolves `.` and `..` without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// LOOP-01: consumers drive the loop through `keel.agent`; no crate may depend on the concrete
/// loop (drivers, tools and tests included), so another loop can replace it row for row.
#[test]
fn loop01_no_crate_depends_on_the_agent_loop_crate() {
    let root = workspace_root();
    let meta = metadata(&root);
    let pkgs = packages(&meta);
    assert!(
        pkgs.contains_key("keel-plugin-agent-loop"),
        "the agent-loop crate is missing from the workspace"
    );
    let dependents: Vec<String> = pkgs
        .iter()
        .filter(|(name, (_, deps))| {
            name.as_str() != "keel-plugin-agent-loop"
                && deps.iter().any(|d| d.name == "keel-plugin-agent-loop")
        })
        .map(|(name, _)| name.clone())
        .collect();
    assert_eq!(dependents, Vec::<String>::new());
}
