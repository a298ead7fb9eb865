//! `cargo xtask tidy`: repository rules that no compiler or lint checks.
//!
//! - every `.rs` under `kernel/`, `plugin-api/`, `plugins/`, `xtask/`, `tests/` starts with a `//!`
//!   block saying what it owns (style.md item 9);
//! - no kernel crate (`kernel/Cargo.toml`, `kernel/*/Cargo.toml`) depends on a plugin crate (ARCHITECTURE §1.1: the kernel knows no
//!   feature) — by name, by `package =` rename, by a path into `plugins/`, or through a workspace
//!   dependency that points there;
//! - non-test sources of `kernel/`, `plugin-api/`, `plugins/` stay within [`LINE_BUDGET`] lines
//!   (style.md item 4; `*_tests.rs` and anything under a `tests/` folder are exempt);
//! - the kernel crate stays under its line budget and no kernel crate names a feature
//!   ([`crate::tidy_kernel`]);
//! - no non-test source of `kernel/`, `plugin-api/`, `plugins/` spells a code as a free string
//!   ([`crate::tidy_codes`]);
//! - no non-test plugin source reads a decision with `.get("kind")` ([`crate::tidy_decisions`]);
//! - `plugins/README.md`, `bundles/README.md` and the README's docs list name exactly the
//!   plugin folders, bundles and docs there are ([`crate::tidy_readme`]).
//!
//! Decision: the manifest checks read TOML line by line instead of pulling in a TOML parser —
//! the shapes cargo accepts for a dependency are few and this crate stays dependency-free. The
//! same checks run as a `#[test]` (see `tidy_tests.rs`) so `cargo xtask test` enforces them too.

use std::fs;
use std::path::Path;
use std::path::PathBuf;

use crate::shell;
use crate::shell::Failure;
use crate::shell::Result;
use crate::tidy_kernel::{KERNEL_LINE_BUDGET, feature_words, non_test_lines};

/// Maximum lines of a non-test source file in the kernel, the plugin API and plugins.
pub const LINE_BUDGET: usize = 800;

/// Folders whose `.rs` files must start with `//!`.
const HEADER_ROOTS: &[&str] = &["kernel", "plugin-api", "plugins", "xtask", "tests"];
/// Folders whose non-test `.rs` files are held to [`LINE_BUDGET`].
const BUDGET_ROOTS: &[&str] = &["kernel", "plugin-api", "plugins"];

/// One broken rule: the file (relative to the root) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// File path relative to the workspace root, `/`-separated.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// Entry point for `cargo xtask tidy`.
pub fn run(args: &[String]) -> Result {
    crate::no_more_args("tidy", args)?;
    check_and_report()
}

/// Runs every check on the workspace, prints each problem, fails if there is any.
pub fn check_and_report() -> Result {
    let (checked, problems) = check(&shell::root())?;
    for problem in &problems {
        eprintln!("{}: {}", problem.path, problem.message);
    }
    if problems.is_empty() {
        println!("tidy: ok ({checked} .rs files checked)");
        Ok(())
    } else {
        Err(Failure::new(format!("tidy: {} problem(s)", problems.len())))
    }
}

/// All checks over the tree at `root`: the number of `.rs` files looked at, and the problems.
pub fn check(root: &Path) -> Result<(usize, Vec<Problem>)> {
    let mut problems = Vec::new();
    let mut checked = 0;
    let mut kernel_lines = 0;
    let codes = crate::tidy_codes::catalog_codes();
    for top in HEADER_ROOTS {
        for file in rust_files(&root.join(top))? {
            checked += 1;
            let text = fs::read_to_string(&file)
                .map_err(|e| Failure::new(format!("{}: {e}", file.display())))?;
            let rel = relative(root, &file);
            if !has_module_doc(&text) {
                problems.push(Problem {
                    path: rel.clone(),
                    message: "first non-empty line must be a `//!` doc saying what the file \
                              owns and why"
                        .to_owned(),
                });
            }
            if BUDGET_ROOTS.contains(top)
                && !rel.starts_with("plugin-api/")
                && !is_test_file(&rel)
                && let Some(message) = hand_written_dispatch(&text)
            {
                problems.push(Problem {
                    path: rel.clone(),
                    message,
                });
            }
            if rel.starts_with("kernel/") && !is_test_file(&rel) {
                for (line, word) in feature_words(&text) {
                    problems.push(Problem {
                        path: format!("{rel}:{line}"),
                        message: format!(
                            "names `{word}`: the kernel knows no feature (issue 13 item 2)"
                        ),
                    });
                }
                if rel.starts_with("kernel/src/") {
                    kernel_lines += non_test_lines(&text);
                }
            }
            for (path, message) in crate::tidy_codes::problems(&rel, &text, &codes) {
                problems.push(Problem { path, message });
            }
            for (path, message) in crate::tidy_decisions::problems(&rel, &text) {
                problems.push(Problem { path, message });
            }
            let lines = text.lines().count();
            if BUDGET_ROOTS.contains(top) && !is_test_file(&rel) && lines > LINE_BUDGET {
                problems.push(Problem {
                    path: rel,
                    message: format!(
                        "{lines} lines, over the {LINE_BUDGET}-line budget for non-test code; \
                         split it by noun"
                    ),
                });
            }
        }
    }
    if kernel_lines > KERNEL_LINE_BUDGET {
        problems.push(Problem {
            path: "kernel/src".to_owned(),
            message: format!(
                "{kernel_lines} non-test lines, over the kernel's {KERNEL_LINE_BUDGET}-line \
                 budget (issue 13 item 3): move what is not loader, lock, graph, fibers, \
                 services, bus or runtime into its own crate or a plugin"
            ),
        });
    }
    let workspace = fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    for dir in kernel_crate_dirs(root)? {
        let manifest = root.join(&dir).join("Cargo.toml");
        let text = fs::read_to_string(&manifest)
            .map_err(|e| Failure::new(format!("{}: {e}", manifest.display())))?;
        for message in kernel_plugin_deps(&text, &workspace) {
            problems.push(Problem {
                path: format!("{dir}/Cargo.toml"),
                message,
            });
        }
    }
    problems.extend(crate::tidy_readme::check(root)?);
    Ok((checked, problems))
}

/// Issue 12: services are typed contracts (`keel_plugin_api::contract!`); a provider that
/// matches method names or answers `UNKNOWN_METHOD` itself is the string protocol coming back.
pub fn hand_written_dispatch(text: &str) -> Option<String> {
    const SIGNS: &[(&str, &str)] = &[
        ("\"UNKNOWN_METHOD\"", "answers UNKNOWN_METHOD by hand"),
        ("match method.as_str()", "matches method names by hand"),
        ("match method {", "matches method names by hand"),
        ("CallHandle", "uses the removed CallHandle"),
    ];
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    SIGNS
        .iter()
        .find(|(sign, _)| code.contains(sign))
        .map(|(_, what)| {
            format!("{what}: declare the service with `contract!` and implement its provider trait")
        })
}

/// Whether the first non-empty line is an inner doc comment.
pub fn has_module_doc(text: &str) -> bool {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .is_some_and(|line| line.starts_with("//!"))
}

/// `*_tests.rs` files and anything with a `tests` folder in its path are test code.
pub fn is_test_file(rel: &str) -> bool {
    let mut parts: Vec<&str> = rel.split('/').collect();
    let file = parts.pop().unwrap_or("");
    file.ends_with("_tests.rs") || parts.contains(&"tests")
}

/// A dependency entry of a Cargo manifest: the dependency's key and one line of its spec (the
/// whole `key = …` line, or a line inside a `[dependencies.NAME]` table).
#[derive(Debug)]
struct DepEntry<'a> {
    key: String,
    spec: &'a str,
}

/// Every dependency entry in `[*dependencies]` tables and `[*dependencies.NAME]` tables.
fn dep_entries(manifest: &str) -> Vec<DepEntry<'_>> {
    let mut entries = Vec::new();
    // `Some(None)`: inside a plain dependency table; `Some(Some(name))`: inside `[dependencies.name]`.
    let mut section: Option<Option<String>> = None;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            let header = header
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("");
            section = dep_section(header.trim());
            if let Some(Some(name)) = &section {
                entries.push(DepEntry {
                    key: name.clone(),
                    spec: "",
                });
            }
            continue;
        }
        let Some((key, _)) = line.split_once('=') else {
            continue;
        };
        match &section {
            Some(None) => entries.push(DepEntry {
                key: bare_key(key),
                spec: line,
            }),
            Some(Some(name)) => entries.push(DepEntry {
                key: name.clone(),
                spec: line,
            }),
            None => {}
        }
    }
    entries
}

/// `None` when `header` is not a dependency table; `Some(None)` for a plain one
/// (`dependencies`, `target.'cfg(unix)'.dev-dependencies`, `workspace.dependencies`);
/// `Some(Some(name))` for a single-dependency table (`dependencies.foo`).
fn dep_section(header: &str) -> Option<Option<String>> {
    for kind in ["dependencies", "dev-dependencies", "build-dependencies"] {
        if header == kind || header.ends_with(&format!(".{kind}")) {
            return Some(None);
        }
        let prefix = format!("{kind}.");
        let nested = format!(".{kind}.");
        if let Some(name) = header.strip_prefix(&prefix) {
            return Some(Some(bare_key(name)));
        }
        if let Some((_, name)) = header.split_once(&nested) {
            return Some(Some(bare_key(name)));
        }
    }
    None
}

/// `"keel-plugin-x".workspace ` → `keel-plugin-x`.
fn bare_key(key: &str) -> String {
    let key = key.trim();
    let key = key.split('.').next().unwrap_or(key);
    key.trim_matches(|c| c == '"' || c == '\'').to_owned()
}

/// The value of `package = "…"` inside a dependency line, if any.
fn renamed_package(line: &str) -> Option<&str> {
    line.match_indices("package").find_map(|(at, word)| {
        let rest = line[at + word.len()..].trim_start().strip_prefix('=')?;
        let rest = rest.trim_start();
        let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
        let inner = &rest[1..];
        inner.find(quote).map(|end| &inner[..end])
    })
}

fn is_plugin_crate(name: &str) -> bool {
    name.starts_with("keel-plugin-") && name != "keel-plugin-api"
}

fn points_into_plugins(spec: &str, from_workspace_root: bool) -> bool {
    let needle = if from_workspace_root {
        ["\"plugins/", "'plugins/", "\"./plugins/", "'./plugins/"]
    } else {
        [
            "\"../plugins",
            "'../plugins",
            "\"../../plugins",
            "'../../plugins",
        ]
    };
    needle.iter().any(|n| spec.contains(n))
}

/// Reasons `kernel` (manifest text) depends on a plugin crate; `workspace` is the root manifest,
/// used to resolve `foo.workspace = true` entries.
pub fn kernel_plugin_deps(kernel: &str, workspace: &str) -> Vec<String> {
    let plugin_workspace_deps: Vec<String> = dep_entries(workspace)
        .into_iter()
        .filter(|dep| {
            is_plugin_crate(&dep.key)
                || renamed_package(dep.spec).is_some_and(is_plugin_crate)
                || points_into_plugins(dep.spec, true)
        })
        .map(|dep| dep.key)
        .collect();

    let mut reasons = Vec::new();
    for dep in dep_entries(kernel) {
        let why = if is_plugin_crate(&dep.key) {
            Some("is a plugin crate".to_owned())
        } else if let Some(package) = renamed_package(dep.spec).filter(|p| is_plugin_crate(p)) {
            Some(format!("renames plugin crate `{package}`"))
        } else if points_into_plugins(dep.spec, false) {
            Some("has a path into plugins/".to_owned())
        } else if dep.spec.contains("workspace") && plugin_workspace_deps.contains(&dep.key) {
            Some("is a workspace dependency on a plugin crate".to_owned())
        } else {
            None
        };
        if let Some(why) = why {
            let reason = format!(
                "dependency `{}` {why}; the kernel must not depend on any crate under plugins/",
                dep.key
            );
            if !reasons.contains(&reason) {
                reasons.push(reason);
            }
        }
    }
    reasons
}

/// `kernel` and each `kernel/*` folder with a `Cargo.toml`, relative to `root`; sorted.
fn kernel_crate_dirs(root: &Path) -> Result<Vec<String>> {
    let kernel = root.join("kernel");
    let mut dirs = Vec::new();
    if kernel.join("Cargo.toml").is_file() {
        dirs.push("kernel".to_owned());
    }
    if kernel.is_dir() {
        let entries = fs::read_dir(&kernel)
            .map_err(|e| Failure::new(format!("{}: {e}", kernel.display())))?;
        for entry in entries.flatten() {
            if entry.path().join("Cargo.toml").is_file() {
                dirs.push(format!("kernel/{}", entry.file_name().to_string_lossy()));
            }
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// Every `.rs` file under `dir`, skipping `target` folders and not following symlinks; sorted.
fn rust_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    if !dir.is_dir() {
        return Ok(files);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        let entries = fs::read_dir(&current)
            .map_err(|e| Failure::new(format!("{}: {e}", current.display())))?;
        for entry in entries {
            let entry = entry.map_err(|e| Failure::new(format!("{}: {e}", current.display())))?;
            let path = entry.path();
            let kind = entry
                .file_type()
                .map_err(|e| Failure::new(format!("{}: {e}", path.display())))?;
            if kind.is_dir() {
                if entry.file_name() != "target" {
                    stack.push(path);
                }
            } else if kind.is_file() && path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
#[path = "tidy_tests.rs"]
mod tests;
