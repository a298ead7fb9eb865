//! `cargo xtask dist [--out DIR] [--build-dir DIR]`: a relocatable release layout, locked per
//! shipped profile and per shipped profile with each shipped patch.
//!
//! Layout (ARCHITECTURE §4.1: a binary outside a cargo build dir looks for plugins in `lib/` and
//! for profiles in `share/` beside its `bin/`, and the lock lives next to the binary):
//! `DIR/bin/keel`, `DIR/bin/keel.lock`, `DIR/bin/keel-landlock` (the sandbox's launcher),
//! `DIR/lib/libkeel_plugin_*.so`, `DIR/share/profiles/*.toml` (and `prompts/`, `patches/`),
//! `DIR/share/bundles/*.toml`. `cargo xtask install` lays out the same tree ([`lay_out`]).
//! Decisions: only plugin crates (`keel-plugin-*`) under `plugins/` ship (test plugins under
//! `tests/plugins/` never do; plain support libraries there, like `keel-session-store-kit`, are
//! skipped); their library names come from each `plugins/*/Cargo.toml` package name, not from globbing the
//! target dir, so a stale `.so` from a deleted plugin cannot sneak in. Parts that do not exist yet
//! (no plugin crates, a profile whose plugins are not written) are warnings, not failures, so the
//! layout can be exercised while the product is being built. DIR is removed first, but only when
//! it is empty or looks like an earlier dist (has `bin/keel`), never an ancestor of the repo.
//! The tree is locked as shipped: `keel lock` runs with an empty `KEEL_HOME` and without
//! `KEEL_PLUGIN_PATH` / `KEEL_CONFIG_PATH`, so neither the user's layer nor a developer's search
//! path ends up in the lock. `--build-dir` lays out an existing cargo build dir (`target/debug`)
//! instead of building release: the integration tests use it, so CI needs no release build.

use std::fs;
use std::path::Path;
use std::path::PathBuf;

use crate::build;
use crate::build::Profile;
use crate::shell;
use crate::shell::Failure;
use crate::shell::Result;

/// Executables that plugins find beside the `keel` binary.
const HELPERS: &[&str] = &["keel-landlock"];

/// Where the shipped patches live under `share/profiles/` (`keel run --patch`).
const PATCHES: &str = "patches";

/// What [`lay_out`] shipped and locked.
#[derive(Debug, Default)]
pub struct Tree {
    /// Plugin libraries in `lib/`.
    pub plugins: usize,
    /// Profile names in `share/profiles/`.
    pub profiles: Vec<String>,
    /// Patch names in `share/profiles/patches/`.
    pub patches: Vec<String>,
    /// Bundle names in `share/bundles/`.
    pub bundles: Vec<String>,
    /// Lock entries written (`default`, `default --patch anthropic`, …).
    pub locked: Vec<String>,
    /// Warnings printed.
    pub warnings: usize,
}

/// Entry point for `cargo xtask dist`.
pub fn run(args: &[String]) -> Result {
    let [out, build_dir] = dir_flags("dist", ["--out", "--build-dir"], args)?;
    let out = out.unwrap_or_else(|| shell::root().join("dist"));
    guard_out(&out)?;
    let build_dir = match build_dir {
        Some(dir) => dir,
        None => release()?,
    };
    let tree = lay_out(&build_dir, &out)?;
    println!(
        "dist: {} — bin/keel, {} plugin(s) in lib/, {} profile(s), {} patch(es), {} bundle(s), \
         locked: [{}], {} warning(s)",
        out.display(),
        tree.plugins,
        tree.profiles.len(),
        tree.patches.len(),
        tree.bundles.len(),
        tree.locked.join(", "),
        tree.warnings,
    );
    Ok(())
}

/// Builds the workspace in release; returns the build dir.
pub fn release() -> Result<PathBuf> {
    build::workspace(Profile::Release)?;
    Ok(shell::target_dir().join(Profile::Release.dir()))
}

/// Parses `command`'s arguments: each a `FLAG DIR` or `FLAG=DIR` with FLAG one of `flags`;
/// returns the directories (made absolute) in the order of `flags`. A `--build-dir` must hold a
/// built `keel`.
pub fn dir_flags<const N: usize>(
    command: &str,
    flags: [&str; N],
    args: &[String],
) -> Result<[Option<PathBuf>; N]> {
    let mut dirs: [Option<PathBuf>; N] = std::array::from_fn(|_| None);
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let (flag, value) = match arg.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_owned())),
            None => (arg.as_str(), None),
        };
        let Some(index) = flags.iter().position(|f| *f == flag) else {
            return Err(Failure::usage(format!("`{command}` does not take `{arg}`")));
        };
        let value = match value {
            Some(value) => value,
            None => iter
                .next()
                .ok_or_else(|| Failure::usage(format!("`{flag}` needs a directory")))?
                .clone(),
        };
        let dir = absolute(flag, &value)?;
        if flag == "--build-dir" {
            check_build_dir(&dir)?;
        }
        dirs[index] = Some(dir);
    }
    Ok(dirs)
}

/// `value` of `flag` as an absolute path; an empty one is a usage error.
fn absolute(flag: &str, value: &str) -> Result<PathBuf> {
    if value.is_empty() {
        return Err(Failure::usage(format!("`{flag}` needs a directory")));
    }
    std::path::absolute(value)
        .map_err(|e| Failure::new(format!("cannot resolve {flag} {value}: {e}")))
}

/// A `--build-dir` must hold a built `keel`.
fn check_build_dir(dir: &Path) -> Result {
    let keel = dir.join(format!("keel{}", std::env::consts::EXE_SUFFIX));
    if keel.is_file() {
        Ok(())
    } else {
        Err(Failure::new(format!(
            "--build-dir {}: no keel there (build it first: cargo xtask build)",
            dir.display()
        )))
    }
}

/// Lays out the tree in `out` (removed first; call [`guard_out`] before) from the cargo build
/// dir `build` (`target/release`), then locks every shipped profile, alone and with each
/// shipped patch.
pub fn lay_out(build: &Path, out: &Path) -> Result<Tree> {
    clean(out)?;
    let mut tree = Tree::default();

    let exe = format!("keel{}", std::env::consts::EXE_SUFFIX);
    let keel = out.join("bin").join(&exe);
    copy(&build.join(&exe), &keel)?;
    // Helper executables plugins run beside `keel` (the sandbox's Landlock launcher).
    for helper in HELPERS {
        let name = format!("{helper}{}", std::env::consts::EXE_SUFFIX);
        let built = build.join(&name);
        if built.is_file() {
            copy(&built, &out.join("bin").join(&name))?;
        } else {
            shell::warn(format!("{name} was not built; not shipped"));
            tree.warnings += 1;
        }
    }

    let plugins = plugin_crates(&shell::root().join("plugins"))?;
    if plugins.is_empty() {
        shell::warn("no plugin crates under plugins/ yet; DIR/lib/ is empty");
        tree.warnings += 1;
    }
    for (dir, package) in &plugins {
        let file = library_file(package);
        let built = build.join(&file);
        if built.is_file() {
            copy(&built, &out.join("lib").join(&file))?;
            tree.plugins += 1;
        } else {
            shell::warn(format!(
                "{dir}: package `{package}` produced no {} (is it a workspace member with \
                 crate-type \"cdylib\"?); not shipped",
                shell::relative(&built)
            ));
            tree.warnings += 1;
        }
    }
    fs::create_dir_all(out.join("lib")).map_err(|e| io_failure(&out.join("lib"), &e))?;

    let profiles = out.join("share").join("profiles");
    tree.profiles = copy_tomls("profiles", &profiles, &mut tree.warnings)?;
    tree.bundles = copy_tomls(
        "bundles",
        &out.join("share").join("bundles"),
        &mut tree.warnings,
    )?;
    // Files profiles name beside themselves (`${this_dir}/prompts/…`, issue 14), and patches
    // for `keel run --patch` (`patches/anthropic.toml`, issue 15): shipped, never locked as
    // profiles (each is locked with each profile below).
    for sub in ["prompts", PATCHES] {
        let from = shell::root().join("profiles").join(sub);
        if !from.is_dir() {
            continue;
        }
        let dest = profiles.join(sub);
        fs::create_dir_all(&dest).map_err(|e| io_failure(&dest, &e))?;
        for path in sorted_entries(&from)? {
            if let Some(name) = path.file_name().filter(|_| path.is_file()) {
                copy(&path, &dest.join(name))?;
                let stem = path.file_stem().and_then(|s| s.to_str());
                if let Some(stem) = stem.filter(|_| sub == PATCHES && is_toml(&path)) {
                    tree.patches.push(stem.to_owned());
                }
            }
        }
    }
    lock(&keel, out, &mut tree)?;
    Ok(tree)
}

/// `keel lock --profile P` for every shipped profile, then `keel lock --profile P --patch
/// share/profiles/patches/X.toml` for each shipped patch: a patch that swaps a row changes the
/// graph, and the lock keys such a run by profile and patches (issue 23 item 9). A combination
/// that does not assemble is a warning and stays unlocked (a patched run without an entry is
/// checked against the profile's, which refuses a changed graph).
fn lock(keel: &Path, out: &Path, tree: &mut Tree) -> Result {
    // An empty home: the user's own layer (`~/.keel/config.toml`) is not what ships.
    let home = tempfile::Builder::new()
        .prefix("keel-dist-home-")
        .tempdir()
        .map_err(|e| Failure::new(format!("cannot create a temporary KEEL_HOME: {e}")))?;
    let mut combinations: Vec<(String, Option<String>)> = Vec::new();
    for profile in &tree.profiles {
        combinations.push((profile.clone(), None));
        for patch in &tree.patches {
            combinations.push((profile.clone(), Some(patch.clone())));
        }
    }
    for (profile, patch) in combinations {
        let mut cmd = std::process::Command::new(keel);
        cmd.args(["lock", "--profile", &profile])
            .current_dir(out)
            .env("KEEL_HOME", home.path())
            .env_remove("KEEL_PLUGIN_PATH")
            .env_remove("KEEL_CONFIG_PATH");
        let mut entry = profile.clone();
        if let Some(patch) = &patch {
            cmd.arg("--patch")
                .arg(format!("share/profiles/{PATCHES}/{patch}.toml"));
            entry.push_str(&format!(" --patch {patch}"));
        }
        match shell::run_status(&mut cmd)? {
            0 => tree.locked.push(entry),
            code => {
                shell::warn(format!(
                    "`keel lock --profile {entry}` failed (exit code {code}), usually because \
                     the profile needs plugins that are not built yet or the patch does not \
                     fit the profile; it ships unlocked"
                ));
                tree.warnings += 1;
            }
        }
    }
    Ok(())
}

/// Refuses to delete anything that is not plausibly a dist directory.
pub fn guard_out(out: &Path) -> Result {
    if !out.exists() {
        return Ok(());
    }
    let real = out.canonicalize().map_err(|e| io_failure(out, &e))?;
    let root = shell::root()
        .canonicalize()
        .unwrap_or_else(|_| shell::root());
    if root.starts_with(&real) {
        return Err(Failure::new(format!(
            "refusing to use {} as dist dir: it contains the repository",
            out.display()
        )));
    }
    if !real.is_dir() {
        return Err(Failure::new(format!(
            "refusing to replace {}: it is not a directory",
            out.display()
        )));
    }
    let empty = fs::read_dir(&real)
        .map_err(|e| io_failure(out, &e))?
        .next()
        .is_none();
    let earlier_dist = real.join("bin").join("keel").is_file();
    if empty || earlier_dist {
        Ok(())
    } else {
        Err(Failure::new(format!(
            "refusing to remove {}: it is not empty and has no bin/keel (not an earlier dist)",
            out.display()
        )))
    }
}

fn clean(out: &Path) -> Result {
    if out.exists() {
        println!("removing {}", out.display());
        fs::remove_dir_all(out).map_err(|e| io_failure(out, &e))?;
    }
    fs::create_dir_all(out).map_err(|e| io_failure(out, &e))
}

/// `(dir relative to the root, package name)` of every plugin crate under `plugins/` (package
/// `keel-plugin-*`), sorted by dir. Other crates there are skipped: plain support libraries
/// silently, a misnamed cdylib with a warning.
pub fn plugin_crates(plugins: &Path) -> Result<Vec<(String, String)>> {
    if !plugins.is_dir() {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    for dir in sorted_entries(plugins)? {
        let manifest = dir.join("Cargo.toml");
        if !manifest.is_file() {
            continue;
        }
        let text = fs::read_to_string(&manifest).map_err(|e| io_failure(&manifest, &e))?;
        let name = package_name(&text).ok_or_else(|| {
            Failure::new(format!(
                "{}: no `[package] name`",
                shell::relative(&manifest)
            ))
        })?;
        if !name.starts_with("keel-plugin-") {
            if has_cdylib(&text) {
                shell::warn(format!(
                    "{}: package `{name}` does not follow `keel-plugin-<name>`; the loader will \
                     not find it by plugin name; not shipped",
                    shell::relative(&manifest)
                ));
            }
            // Without a cdylib it is a support library (e.g. `keel-session-store-kit`), not a
            // plugin: nothing to ship, nothing to warn about.
            continue;
        }
        found.push((shell::relative(&dir), name));
    }
    Ok(found)
}

/// The `name` of the `[package]` table of a Cargo manifest (a line-level read, enough for the
/// plain `name = "…"` form every crate here uses).
pub fn package_name(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[package]";
            continue;
        }
        if !in_package {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if key.trim() != "name" {
            continue;
        }
        let value = value.trim();
        let quote = value.chars().next().filter(|c| *c == '"' || *c == '\'')?;
        let inner = &value[1..];
        return inner.find(quote).map(|end| inner[..end].to_owned());
    }
    None
}

/// Whether the `[lib]` table of a Cargo manifest lists `cdylib` in `crate-type` (a line-level
/// read, like [`package_name`]).
pub fn has_cdylib(manifest: &str) -> bool {
    let mut in_lib = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_lib = line == "[lib]";
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if in_lib && key.trim() == "crate-type" && value.contains("cdylib") {
            return true;
        }
    }
    false
}

/// `keel-plugin-foo-bar` → `libkeel_plugin_foo_bar.so` (platform prefix and suffix).
pub fn library_file(package: &str) -> String {
    format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        package.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    )
}

/// Copies `<root>/<dir>/*.toml` into `dest`; returns the file stems, sorted.
fn copy_tomls(dir: &str, dest: &Path, warnings: &mut usize) -> Result<Vec<String>> {
    fs::create_dir_all(dest).map_err(|e| io_failure(dest, &e))?;
    let src = shell::root().join(dir);
    if !src.is_dir() {
        shell::warn(format!("no {dir}/ directory; nothing copied"));
        *warnings += 1;
        return Ok(Vec::new());
    }
    let mut stems = Vec::new();
    for path in sorted_entries(&src)? {
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if !is_toml(&path) || !path.is_file() {
            continue;
        }
        let name = path.file_name().unwrap_or(path.as_os_str());
        copy(&path, &dest.join(name))?;
        stems.push(stem.to_owned());
    }
    if stems.is_empty() {
        shell::warn(format!("{dir}/ has no .toml files yet; nothing copied"));
        *warnings += 1;
    }
    Ok(stems)
}

fn is_toml(path: &Path) -> bool {
    path.extension().is_some_and(|ext| ext == "toml")
}

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut paths = fs::read_dir(dir)
        .map_err(|e| io_failure(dir, &e))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| io_failure(dir, &e))?;
    paths.sort();
    Ok(paths)
}

fn copy(from: &Path, to: &Path) -> Result {
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent).map_err(|e| io_failure(parent, &e))?;
    }
    fs::copy(from, to).map_err(|e| {
        Failure::new(format!(
            "cannot copy {} to {}: {e}",
            shell::relative(from),
            to.display()
        ))
    })?;
    Ok(())
}

fn io_failure(path: &Path, err: &std::io::Error) -> Failure {
    Failure::new(format!("{}: {err}", path.display()))
}

#[cfg(test)]
#[path = "dist_tests.rs"]
mod tests;
