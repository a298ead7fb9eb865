//! `cargo xtask dist [--out DIR]`: a relocatable release layout, locked per shipped profile.
//!
//! Layout (ARCHITECTURE §4.1: the kernel looks for plugins in `lib/` beside its binary, and the
//! lock lives next to the binary):
//! `DIR/bin/keel`, `DIR/bin/keel.lock`, `DIR/bin/keel-landlock` (the sandbox's launcher), `DIR/lib/libkeel_plugin_*.so`, `DIR/share/profiles/*.toml` (and `prompts/`, `patches/`),
//! `DIR/share/bundles/*.toml`.
//! Decisions: only plugin crates (`keel-plugin-*`) under `plugins/` ship (test plugins under
//! `tests/plugins/` never do; plain support libraries there, like `keel-session-store-kit`, are
//! skipped); their library names come from each `plugins/*/Cargo.toml` package name, not from globbing the
//! target dir, so a stale `.so` from a deleted plugin cannot sneak in. Parts that do not exist yet
//! (no plugin crates, a profile whose plugins are not written) are warnings, not failures, so the
//! layout can be exercised while the product is being built. DIR is removed first, but only when
//! it is empty or looks like an earlier dist (has `bin/keel`), never an ancestor of the repo.

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

/// Entry point for `cargo xtask dist`.
pub fn run(args: &[String]) -> Result {
    let out = parse_out(args)?;
    guard_out(&out)?;
    build::workspace(Profile::Release)?;

    let release = shell::target_dir().join(Profile::Release.dir());
    clean(&out)?;
    let mut warnings = 0usize;

    let exe = format!("keel{}", std::env::consts::EXE_SUFFIX);
    let keel = out.join("bin").join(&exe);
    copy(&release.join(&exe), &keel)?;
    // Helper executables plugins run beside `keel` (the sandbox's Landlock launcher).
    for helper in HELPERS {
        let name = format!("{helper}{}", std::env::consts::EXE_SUFFIX);
        let built = release.join(&name);
        if built.is_file() {
            copy(&built, &out.join("bin").join(&name))?;
        } else {
            shell::warn(format!("{name} was not built; not shipped"));
            warnings += 1;
        }
    }

    let plugins = plugin_crates(&shell::root().join("plugins"))?;
    if plugins.is_empty() {
        shell::warn("no plugin crates under plugins/ yet; DIR/lib/ is empty");
        warnings += 1;
    }
    let mut shipped = 0usize;
    for (dir, package) in &plugins {
        let file = library_file(package);
        let built = release.join(&file);
        if built.is_file() {
            copy(&built, &out.join("lib").join(&file))?;
            shipped += 1;
        } else {
            shell::warn(format!(
                "{dir}: package `{package}` produced no {} (is it a workspace member with \
                 crate-type \"cdylib\"?); not shipped",
                shell::relative(&built)
            ));
            warnings += 1;
        }
    }
    fs::create_dir_all(out.join("lib")).map_err(|e| io_failure(&out.join("lib"), &e))?;

    let profiles = copy_tomls(
        "profiles",
        &out.join("share").join("profiles"),
        &mut warnings,
    )?;
    let bundles = copy_tomls("bundles", &out.join("share").join("bundles"), &mut warnings)?;
    // Files profiles name beside themselves (`${this_dir}/prompts/…`, issue 14), and patches
    // for `keel run --patch` (`patches/anthropic.toml`, issue 15): shipped, never locked as
    // profiles.
    for sub in ["prompts", "patches"] {
        let from = shell::root().join("profiles").join(sub);
        if !from.is_dir() {
            continue;
        }
        let dest = out.join("share").join("profiles").join(sub);
        fs::create_dir_all(&dest).map_err(|e| io_failure(&dest, &e))?;
        for path in sorted_entries(&from)? {
            if let Some(name) = path.file_name().filter(|_| path.is_file()) {
                copy(&path, &dest.join(name))?;
            }
        }
    }

    let mut locked = Vec::new();
    for profile in &profiles {
        let mut cmd = std::process::Command::new(&keel);
        cmd.args(["lock", "--profile", profile])
            .current_dir(&out)
            .env_remove("KEEL_PLUGIN_PATH");
        match shell::run_status(&mut cmd)? {
            0 => locked.push(profile.as_str()),
            code => {
                shell::warn(format!(
                    "`keel lock --profile {profile}` failed (exit code {code}), usually because \
                     the profile needs plugins that are not built yet; it ships unlocked"
                ));
                warnings += 1;
            }
        }
    }

    println!(
        "dist: {} — bin/{exe}, {shipped} plugin(s) in lib/, {} profile(s), {} bundle(s), \
         locked: [{}], {warnings} warning(s)",
        out.display(),
        profiles.len(),
        bundles.len(),
        locked.join(", "),
    );
    Ok(())
}

fn parse_out(args: &[String]) -> Result<PathBuf> {
    let mut out = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let value = match arg.as_str() {
            "--out" => iter
                .next()
                .ok_or_else(|| Failure::usage("`--out` needs a directory"))?
                .clone(),
            other => match other.strip_prefix("--out=") {
                Some(value) => value.to_owned(),
                None => return Err(Failure::usage(format!("`dist` does not take `{other}`"))),
            },
        };
        out = Some(value);
    }
    match out {
        None => Ok(shell::root().join("dist")),
        Some(dir) if dir.is_empty() => Err(Failure::usage("`--out` needs a directory")),
        Some(dir) => std::path::absolute(&dir)
            .map_err(|e| Failure::new(format!("cannot resolve --out {dir}: {e}"))),
    }
}

/// Refuses to delete anything that is not plausibly a dist directory.
fn guard_out(out: &Path) -> Result {
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
        let is_toml = path.extension().is_some_and(|ext| ext == "toml");
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if !is_toml || !path.is_file() {
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
