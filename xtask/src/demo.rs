//! `cargo xtask demo [TASK]`: the whole pipeline offline, from a fresh debug build.
//!
//! The `demo` profile pairs the `llm-scripted` adapter with a shipped script, so it needs no key
//! and no network. The session's working directory is a scratch folder under the target dir
//! (`-C`), so whatever the scripted agent writes never lands in the repository. Until
//! `profiles/demo.toml` exists the command runs `keel doctor` instead and says so. The exit code
//! is `keel`'s own (ARCHITECTURE §11: 0 completed, 1 otherwise, 2 usage/config, 130 SIGINT).

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
        println!("profiles/demo.toml does not exist yet; running `keel doctor` instead");
        cmd.arg("doctor");
    }

    match shell::run_status(&mut cmd)? {
        0 => Ok(()),
        code => Err(Failure::with_code(
            u8::try_from(code).unwrap_or(1),
            format!("`{}` exited with code {code}", shell::display(&cmd)),
        )),
    }
}
