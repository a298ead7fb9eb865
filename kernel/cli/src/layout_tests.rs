//! Unit tests for the layout detection that decides the search path (issue 23 item 8): only a
//! binary in a cargo build dir of a checkout searches the checkout and its own directory.

use std::path::{Path, PathBuf};

use super::*;
use keel_kernel::paths::Paths;

fn mkdirs(root: &Path, dirs: &[&str]) {
    for dir in dirs {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
}

fn touch(root: &Path, files: &[&str]) {
    for file in files {
        let path = root.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "").unwrap();
    }
}

/// `<tmp>/ws`: a checkout with a cargo target dir holding `debug/` and
/// `x86_64-unknown-linux-gnu/release/` build dirs.
fn checkout() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    touch(&ws, &["Cargo.toml", "target/CACHEDIR.TAG"]);
    mkdirs(
        &ws,
        &[
            "profiles",
            "target/debug/.fingerprint",
            "target/debug/deps",
            "target/x86_64-unknown-linux-gnu/release/.fingerprint",
            "target/x86_64-unknown-linux-gnu/release/deps",
            "target/dist/bin",
            "dist/bin",
        ],
    );
    (tmp, ws)
}

#[test]
fn a_cargo_build_dir_of_a_checkout_is_a_checkout_layout() {
    let (_tmp, ws) = checkout();
    let nowhere = Path::new("/nonexistent");
    for dir in ["target/debug", "target/x86_64-unknown-linux-gnu/release"] {
        assert_eq!(
            Layout::of(&ws.join(dir), nowhere),
            Layout::Checkout {
                checkout: ws.clone()
            },
            "{dir}"
        );
    }
}

#[test]
fn a_copy_of_the_binary_outside_a_build_dir_is_a_prefix_layout_even_inside_a_checkout() {
    let (_tmp, ws) = checkout();
    // A dist tree inside the checkout, or inside its target dir, is still a dist tree; so is
    // a plain directory, whatever the binary was built from.
    for prefix in ["dist", "target/dist"] {
        assert_eq!(
            Layout::of(&ws.join(prefix).join("bin"), &ws),
            Layout::Prefix {
                prefix: ws.join(prefix)
            },
            "{prefix}"
        );
    }
    assert_eq!(
        Layout::of(&ws.join("profiles"), &ws),
        Layout::Prefix { prefix: ws.clone() }
    );
}

#[test]
fn a_target_dir_outside_any_checkout_uses_the_checkout_it_was_built_from_only_if_it_exists() {
    let (tmp, ws) = checkout();
    let target = tmp.path().join("shared-target");
    touch(&target, &["CACHEDIR.TAG"]);
    mkdirs(&target, &["release/.fingerprint", "release/deps"]);
    let exe_dir = target.join("release");
    assert_eq!(
        Layout::of(&exe_dir, &ws),
        Layout::Checkout {
            checkout: ws.clone()
        }
    );
    assert_eq!(
        Layout::of(&exe_dir, Path::new("/nonexistent")),
        Layout::Prefix { prefix: target }
    );
}

#[test]
fn the_search_path_follows_the_layout_and_the_variables_come_first() {
    let extra = PathBuf::from("/extra");
    let home = PathBuf::from("/home/u/.keel");
    let dist: Paths = paths(
        PathBuf::from("/opt/keel/bin"),
        &Layout::Prefix {
            prefix: PathBuf::from("/opt/keel"),
        },
        vec![extra.join("plugins")],
        vec![extra.join("config")],
        home.clone(),
    );
    assert_eq!(
        dist.plugin_path,
        [extra.join("plugins"), PathBuf::from("/opt/keel/lib")]
    );
    assert_eq!(
        dist.config_roots,
        [extra.join("config"), PathBuf::from("/opt/keel/share")]
    );
    assert_eq!(dist.lock_file(), PathBuf::from("/opt/keel/bin/keel.lock"));

    let dev = paths(
        PathBuf::from("/ws/target/debug"),
        &Layout::Checkout {
            checkout: PathBuf::from("/ws"),
        },
        Vec::new(),
        Vec::new(),
        home,
    );
    assert_eq!(dev.plugin_path, [PathBuf::from("/ws/target/debug")]);
    assert_eq!(dev.config_roots, [PathBuf::from("/ws")]);
}
