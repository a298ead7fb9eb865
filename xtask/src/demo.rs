//! `cargo xtask demo [TASK]`: keel's main job, offline, from a fresh debug build.
//!
//! The `demo` profile pairs the `llm-scripted` adapter with a script shipped inside the profile,
//! so it needs no key and no network; everything else is the real pipeline (the loop, the
//! session log and its checkpoints, the tool pipeline, the fs observation policy, the shell
//! tool's process group). The session works in a scratch folder under the target dir (`-C`),
//! with its own `KEEL_HOME` beside it, so nothing lands in the repository or in `~/.keel`. After
//! the run the command lists the files the agent left and the stored session, and prints the
//! commands to look closer. The exit code is `keel`'s own (ARCHITECTURE §11).

use std::fs;
use std::path::Path;

use crate::build;
use crate::build::Profile;
use crate::shell;
use crate::shell::Failure;
use crate::shell::Result;

const DEFAULT_TASK: &str = "Keep notes on what keel is, then count them with a script.";

/// Entry point for `cargo xtask demo`.
pub fn run(args: &[String]) -> Result {
    let task = match args {
        [] => DEFAULT_TASK.to_owned(),
        [task] if !task.starts_with('-') => task.clone(),
        [other, ..] => return Err(Failure::usage(format!("`demo` does not take `{other}`"))),
    };
    build::workspace(Profile::Debug)?;

    let keel = shell::target_dir()
        .join(Profile::Debug.dir())
        .join(format!("keel{}", std::env::consts::EXE_SUFFIX));
    let scratch = shell::target_dir().join("xtask-demo");
    if scratch.exists() {
        fs::remove_dir_all(&scratch)
            .map_err(|e| Failure::new(format!("{}: {e}", scratch.display())))?;
    }
    let work = scratch.join("work");
    let home = scratch.join("home");
    for dir in [&work, &home] {
        fs::create_dir_all(dir).map_err(|e| Failure::new(format!("{}: {e}", dir.display())))?;
    }
    println!("demo workspace: {}\n", work.display());
    let command = |args: &[&str]| {
        let mut cmd = std::process::Command::new(&keel);
        cmd.args(args)
            .current_dir(&work)
            .env("KEEL_HOME", &home)
            .env_remove("KEEL_PLUGIN_PATH");
        cmd
    };
    let status = shell::run_status(&mut command(&["run", "--profile", "demo", &task]))?;

    println!("\nfiles the agent left in {}:", work.display());
    list_files(&work);
    println!("\nthe stored session:");
    let _ = shell::run_status(&mut command(&["sessions", "list", "--profile", "demo"]));
    println!(
        "\nlook closer: KEEL_HOME={} {} sessions show <ID> --profile demo",
        home.display(),
        keel.display()
    );
    match status {
        0 => Ok(()),
        code => Err(Failure::with_code(
            u8::try_from(code).unwrap_or(1),
            format!("`keel run --profile demo` exited with code {code}"),
        )),
    }
}

fn list_files(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut names: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    names.sort();
    for path in names {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let text = fs::read_to_string(&path).unwrap_or_default();
        println!("--- {}", name.unwrap_or_default());
        for line in text.lines() {
            println!("    {line}");
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_demo_profile_exists() {
        let path = crate::shell::root().join("profiles").join("demo.toml");
        assert!(
            path.is_file(),
            "{} is missing: `cargo xtask demo` would fail",
            path.display()
        );
    }
}
