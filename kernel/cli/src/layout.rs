//! Where this `keel` runs from, and so where it looks for plugins and profiles (ARCHITECTURE
//! §4.1; issue 23 item 8): the kernel is handed the result as its [`Paths`].
//!
//! A binary in a cargo build dir of a checkout (`<checkout>/target/<profile>/keel`) searches
//! `KEEL_PLUGIN_PATH`, then its own directory, for plugins, and `KEEL_CONFIG_PATH`, then the
//! checkout, for profiles and bundles. Every other binary — a `cargo xtask dist` tree, an
//! install (`~/.local/bin/keel` links to `~/.local/lib/keel/bin/keel`; the link is resolved),
//! a copy anywhere — searches `KEEL_PLUGIN_PATH`, then `lib/` beside its `bin/`, and
//! `KEEL_CONFIG_PATH`, then `share/` there: never a target dir or a checkout, so a shipped tree
//! runs what it ships and an unknown profile names only its own roots. Rejected: deciding by
//! the checkout path compiled into the binary (what keel did before), which made every dist and
//! install built on a machine search that machine's checkout.

use std::path::{Path, PathBuf};

use keel_kernel::paths::Paths;

/// Where the running binary lives, which decides the search path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// A cargo build dir of a checkout (`<checkout>/target/<profile>/`, or
    /// `target/<triple>/<profile>/`): plugins beside the binary, profiles in the checkout.
    Checkout {
        /// The checkout: holds `Cargo.toml` and `profiles/`.
        checkout: PathBuf,
    },
    /// Anything else: `<prefix>/bin/keel` with `<prefix>/lib/` and `<prefix>/share/`.
    Prefix {
        /// The directory above `bin/`.
        prefix: PathBuf,
    },
}

impl Layout {
    /// The layout of a binary in `exe_dir` (canonical). `built_from` is the checkout the binary
    /// was compiled in, used only when the binary sits in a cargo build dir whose target dir is
    /// not inside a checkout (`CARGO_TARGET_DIR` elsewhere).
    ///
    /// A cargo build dir is recognised exactly: it holds cargo's `.fingerprint/` and `deps/`,
    /// and the target dir one or two levels up holds cargo's `CACHEDIR.TAG`. A copy of the
    /// binary anywhere else, even inside a checkout or a target dir (`target/dist/bin/`), is a
    /// prefix layout.
    pub fn of(exe_dir: &Path, built_from: &Path) -> Layout {
        let build_dir = exe_dir.join(".fingerprint").is_dir() && exe_dir.join("deps").is_dir();
        let target = exe_dir
            .ancestors()
            .skip(1)
            .take(2)
            .find(|dir| dir.join("CACHEDIR.TAG").is_file())
            .filter(|_| build_dir);
        let checkout = target.and_then(|target| {
            target
                .parent()
                .filter(|dir| is_checkout(dir))
                .map(Path::to_path_buf)
                .or_else(|| is_checkout(built_from).then(|| built_from.to_path_buf()))
        });
        match checkout {
            Some(checkout) => Layout::Checkout { checkout },
            None => Layout::Prefix {
                prefix: exe_dir.parent().unwrap_or(exe_dir).to_path_buf(),
            },
        }
    }
}

/// A keel checkout: a cargo workspace with the shipped `profiles/`.
fn is_checkout(dir: &Path) -> bool {
    dir.join("Cargo.toml").is_file() && dir.join("profiles").is_dir()
}

/// The paths of this process, from the environment and the executable's location (symlinks
/// resolved).
pub fn discover() -> Paths {
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.canonicalize().ok())
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."));
    let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let built_from = built_from.canonicalize().unwrap_or(built_from);
    let layout = Layout::of(&exe_dir, &built_from);
    let keel_home = std::env::var_os("KEEL_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".keel")))
        .unwrap_or_else(|| PathBuf::from(".keel"));
    paths(
        exe_dir,
        &layout,
        split_path_var("KEEL_PLUGIN_PATH"),
        split_path_var("KEEL_CONFIG_PATH"),
        keel_home,
    )
}

/// The paths of a binary in `exe_dir` with `layout`; the `extra_*` directories (from
/// `KEEL_PLUGIN_PATH` / `KEEL_CONFIG_PATH`) come first.
pub fn paths(
    exe_dir: PathBuf,
    layout: &Layout,
    extra_plugins: Vec<PathBuf>,
    extra_config: Vec<PathBuf>,
    keel_home: PathBuf,
) -> Paths {
    let mut plugin_path = extra_plugins;
    let mut config_roots = extra_config;
    match layout {
        Layout::Checkout { checkout } => {
            plugin_path.push(exe_dir.clone());
            config_roots.push(checkout.clone());
        }
        Layout::Prefix { prefix } => {
            plugin_path.push(prefix.join("lib"));
            config_roots.push(prefix.join("share"));
        }
    }
    Paths {
        exe_dir,
        plugin_path,
        config_roots,
        keel_home,
    }
}

fn split_path_var(var: &str) -> Vec<PathBuf> {
    std::env::var_os(var)
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
#[path = "layout_tests.rs"]
mod tests;
