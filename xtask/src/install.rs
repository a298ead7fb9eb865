//! `cargo xtask install [--prefix DIR] [--build-dir DIR]`: puts `keel` where a user can type it
//! (issue 23 item 14).
//!
//! Layout: the dist tree ([`crate::dist::lay_out`]: binary, `keel-landlock`, plugins, shipped
//! profiles, bundles and patches, locked) in `PREFIX/lib/keel/`, and `PREFIX/bin/keel` a
//! symlink to its `bin/keel`. The kernel resolves its own path through `/proc/self/exe`, so the
//! installed binary searches `PREFIX/lib/keel/lib` and `PREFIX/lib/keel/share` and reads the
//! lock beside the real binary, exactly as in a dist tree; nothing new to search, and one
//! `rm -r PREFIX/lib/keel PREFIX/bin/keel` uninstalls. Rejected: spreading the tree over
//! `PREFIX/bin`, `PREFIX/lib/keel` and `PREFIX/share/keel`, which would put `keel.lock` in
//! `PREFIX/bin` and give the kernel a third layout to search.
//!
//! Re-installing replaces the tree (only one that looks like an earlier install, see
//! [`crate::dist::guard_out`]) and the link (only a symlink; a regular file there is not ours),
//! and locks again: entries `keel lock` wrote for the user's own profiles are gone, which the
//! command says. `PREFIX` defaults to `~/.local`; the command ends by saying where `keel` is and
//! whether `PREFIX/bin` is on `PATH`.

use std::fs;
use std::path::Path;
use std::path::PathBuf;

use crate::dist;
use crate::shell;
use crate::shell::Failure;
use crate::shell::Result;

/// Entry point for `cargo xtask install`.
pub fn run(args: &[String]) -> Result {
    let [prefix, build_dir] = dist::dir_flags("install", ["--prefix", "--build-dir"], args)?;
    let prefix = match prefix {
        Some(prefix) => prefix,
        None => std::env::var_os("HOME")
            .filter(|home| !home.is_empty())
            .map(|home| PathBuf::from(home).join(".local"))
            .ok_or_else(|| Failure::usage("HOME is not set: pass `--prefix DIR`"))?,
    };
    let tree = prefix.join("lib").join("keel");
    let exe = format!("keel{}", std::env::consts::EXE_SUFFIX);
    let link = prefix.join("bin").join(&exe);
    dist::guard_out(&tree)?;
    guard_link(&link)?;
    let relocking = tree.join("bin").join("keel.lock").is_file();
    let build_dir = match build_dir {
        Some(dir) => dir,
        None => dist::release()?,
    };

    let shipped = dist::lay_out(&build_dir, &tree)?;
    let target = tree.join("bin").join(&exe);
    place_link(&target, &link)?;
    // The installed command, through the link, as a user will run it.
    shell::run(std::process::Command::new(&link).arg("--version"))?;

    println!(
        "installed {} -> {}\n  plugins: {} in {}\n  profiles: {} in {} (patches: {})\n  \
         locked: [{}] in {}",
        link.display(),
        target.display(),
        shipped.plugins,
        tree.join("lib").display(),
        shipped.profiles.join(", "),
        tree.join("share").display(),
        shipped.patches.join(", "),
        shipped.locked.join(", "),
        tree.join("bin").join("keel.lock").display(),
    );
    if relocking {
        println!(
            "  the lock was written anew: re-run `keel lock --profile NAME` for profiles of \
             your own that were locked before"
        );
    }
    println!("{}", path_advice(&prefix.join("bin"), &exe, &link));
    if shipped.warnings > 0 {
        println!("{} warning(s) above", shipped.warnings);
    }
    Ok(())
}

/// `PREFIX/bin/keel` may be replaced only when it is absent or a symlink (what install makes).
fn guard_link(link: &Path) -> Result {
    match fs::symlink_metadata(link) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Failure::new(format!("{}: {e}", link.display()))),
        Ok(meta) if meta.file_type().is_symlink() => Ok(()),
        Ok(_) => Err(Failure::new(format!(
            "refusing to replace {}: it is not a symlink (not an earlier `cargo xtask install`); \
             remove it or pass another --prefix",
            link.display()
        ))),
    }
}

#[cfg(unix)]
fn place_link(target: &Path, link: &Path) -> Result {
    let io = |e: std::io::Error| Failure::new(format!("{}: {e}", link.display()));
    if let Some(dir) = link.parent() {
        fs::create_dir_all(dir).map_err(io)?;
    }
    // Beside the link, then renamed over it: there is never a moment without `keel`.
    let tmp = link.with_extension("keel-install-tmp");
    let _ = fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp).map_err(io)?;
    fs::rename(&tmp, link).map_err(io)
}

#[cfg(not(unix))]
fn place_link(_target: &Path, link: &Path) -> Result {
    Err(Failure::new(format!(
        "cannot link {}: install supports Unix only",
        link.display()
    )))
}

/// Whether `bin` is on `PATH`, and whether `keel` there is the one a shell finds first.
fn path_advice(bin: &Path, exe: &str, link: &Path) -> String {
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let ours = canonical(bin);
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|d| !d.as_os_str().is_empty())
        .collect();
    let first = dirs.iter().find(|d| d.join(exe).is_file());
    match (dirs.iter().any(|d| canonical(d) == ours), first) {
        (true, Some(first)) if canonical(first) == ours => {
            format!("{} is on PATH: type `keel`", bin.display())
        }
        (true, Some(first)) => format!(
            "{} is on PATH, but {} comes first: run {} or reorder PATH",
            bin.display(),
            first.join(exe).display(),
            link.display()
        ),
        _ => format!(
            "{} is not on PATH: add `export PATH=\"{}:$PATH\"` to your shell's profile, or run {}",
            bin.display(),
            bin.display(),
            link.display()
        ),
    }
}
