//! `cargo xtask demo [TASK]`: keel's main job, offline, from a fresh debug build.
//!
//! The `demo` profile pairs the `llm-scripted` adapter with a shipped script, so it needs no key
//! and no network. The session's working directory is a scratch folder under the target dir
//! (`-C`), so whatever the scripted agent writes never lands in the repository. Until
//! `profiles/demo.toml` exists (the agent plugins arrive in a later issue) the command runs the
//! *kernel tour* instead: `keel plugins list` and `keel run` of `tests/tour/tour.toml`, whose
//! driver dispatches every event mode and takes a provider away and back, printing one JSON line
//! per step, then the trace the plugins wrote. Everything runs with `KEEL_HOME` under the target
//! dir. The exit code is `keel`'s own (ARCHITECTURE §11).

use std::fs;

use crate::build;
use crate::build::Profile;
use crate::shell;
use crate::shell::Failure;
use crate::shell::Result;

const DEFAULT_TASK: &str = "Create hello.txt containing a short greeting, then say what you did.";

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
    let mut cmd = std::process::Command::new(&keel);
    cmd.current_dir(shell::root());

    if shell::root().join("profiles").join("demo.toml").is_file() {
        let scratch = shell::target_dir().join("xtask-demo");
        if scratch.exists() {
            fs::remove_dir_all(&scratch)
                .map_err(|e| Failure::new(format!("{}: {e}", scratch.display())))?;
        }
        fs::create_dir_all(&scratch)
            .map_err(|e| Failure::new(format!("{}: {e}", scratch.display())))?;
        println!(
            "working directory for the demo session: {}",
            scratch.display()
        );
        cmd.arg("run")
            .arg("--profile")
            .arg("demo")
            .arg("-C")
            .arg(&scratch)
            .arg(&task);
    } else {
        return tour(&keel);
    }

    match shell::run_status(&mut cmd)? {
        0 => Ok(()),
        code => Err(Failure::with_code(
            u8::try_from(code).unwrap_or(1),
            format!("`{}` exited with code {code}", shell::display(&cmd)),
        )),
    }
}

/// The tour's profile, relative to the workspace root (the README's main command runs it).
pub const TOUR_PROFILE: &str = "tests/tour/tour.toml";

/// The steps the tour's driver runs, one JSON line each.
const TOUR: &str = "emit:hello,waterfall,async-waterfall,parallel,serial,counter,\
                    disable:counter,status,counter,enable:counter,counter";

/// The kernel tour (until the `demo` profile ships).
fn tour(keel: &std::path::Path) -> Result {
    let scratch = shell::target_dir().join("xtask-demo");
    if scratch.exists() {
        fs::remove_dir_all(&scratch)
            .map_err(|e| Failure::new(format!("{}: {e}", scratch.display())))?;
    }
    fs::create_dir_all(scratch.join("home"))
        .map_err(|e| Failure::new(format!("{}: {e}", scratch.display())))?;
    let profile = shell::root().join(TOUR_PROFILE);
    let trace = scratch.join("trace");
    println!(
        "profiles/demo.toml arrives with the agent plugins; running the kernel tour instead\n"
    );
    let command = |args: &[&str]| {
        let mut cmd = std::process::Command::new(keel);
        cmd.args(args)
            .current_dir(&scratch)
            .env("KEEL_HOME", scratch.join("home"))
            .env("KEEL_PROOF_TRACE", &trace)
            .env_remove("KEEL_PLUGIN_PATH");
        cmd
    };
    let profile_arg = profile.display().to_string();
    let status = shell::run_status(&mut command(&[
        "plugins",
        "list",
        "--profile",
        &profile_arg,
    ]))?;
    if status != 0 {
        return Err(Failure::with_code(
            u8::try_from(status).unwrap_or(1),
            "`keel plugins list` failed".to_owned(),
        ));
    }
    println!();
    let status = shell::run_status(&mut command(&["run", "--profile", &profile_arg, TOUR]))?;
    println!("\nwhat the plugins did, in order ({}):", trace.display());
    if let Ok(text) = fs::read_to_string(&trace) {
        for line in text.lines() {
            println!("  {line}");
        }
    }
    match status {
        0 => Ok(()),
        code => Err(Failure::with_code(
            u8::try_from(code).unwrap_or(1),
            format!("`keel run` exited with code {code}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_tour_profile_exists() {
        let path = crate::shell::root().join(super::TOUR_PROFILE);
        assert!(
            path.is_file(),
            "{} is missing: `cargo xtask demo` would fail",
            path.display()
        );
    }
}
