//! `keel-landlock`: the Landlock launcher of the `sandbox` plugin (B10, SBX-04, SBX-07), the
//! Linux runner used where bubblewrap is not (no user namespaces, no setuid helper).
//!
//! Landlock restricts the calling process and everything it later executes, so confinement
//! needs a process of its own between keel and the command: this one. It restricts itself —
//! everything readable, only `--rw` roots and `/dev/null` writable, TCP (and UDP where the
//! kernel can) refused unless `--net`, no signals to processes outside its domain (keel, the
//! user's programs) and, without `--net`, no abstract Unix sockets (SBX-11: the command is a
//! layer apart, as bwrap's PID and network namespaces make it) — then runs the command as its
//! child, which inherits all of it, and stays as its supervisor (B12, no orphans): it exits with the command's status,
//! and if keel goes away first (killed outright), it kills the command's whole process group,
//! grandchildren included, instead of leaving them to PID 1. With `--unrestricted` it only
//! supervises (the sandbox uses that for `danger-full-access`).
//!
//! Usage: `keel-landlock [--rw PATH]... [--net] [--unrestricted] -- PROGRAM [ARG]...`;
//! `keel-landlock --probe [--net]` restricts itself the same way and prints
//! `{"abi":N,"enforcement":"full"|"partial"}`.
//! Its own failures print one `keel-landlock: …` line and exit 125 (the runner-failure rule
//! the plugin hands to consumers, SBX-09); otherwise the exit code is the command's (128 + N
//! when a signal N ended it, as shells report it).

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};

/// Exit code of the launcher's own failures.
const LAUNCHER_FAILURE: u8 = 125;

/// The newest ABI this launcher knows: requested best effort, so older kernels enforce what
/// they can and the status says `partial`.
const REQUESTED: ABI = ABI::V10;

struct Args {
    rw: Vec<PathBuf>,
    net: bool,
    probe: bool,
    unrestricted: bool,
    command: Vec<OsString>,
}

/// How often the supervisor checks that keel is still its parent.
const PARENT_POLL: Duration = Duration::from_millis(50);

fn parse(mut raw: impl Iterator<Item = OsString>) -> Result<Args, String> {
    let mut args = Args {
        rw: Vec::new(),
        net: false,
        probe: false,
        unrestricted: false,
        command: Vec::new(),
    };
    while let Some(a) = raw.next() {
        match a.to_str() {
            Some("--rw") => {
                let path = raw.next().ok_or("--rw needs a path")?;
                args.rw.push(PathBuf::from(path));
            }
            Some("--net") => args.net = true,
            Some("--probe") => args.probe = true,
            Some("--unrestricted") => args.unrestricted = true,
            Some("--") => {
                args.command = raw.collect();
                break;
            }
            _ => return Err(format!("unexpected argument {}", a.to_string_lossy())),
        }
    }
    if !args.probe && args.command.is_empty() {
        return Err("no command after --".to_owned());
    }
    Ok(args)
}

/// Restricts this process; `Ok(partial)` when the kernel enforces only part of the request.
fn restrict(args: &Args) -> Result<(bool, i32), String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("{what}: {e}");
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(REQUESTED))
        .map_err(|e| fail("cannot handle file access", &e))?;
    if !args.net {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(REQUESTED))
            .map_err(|e| fail("cannot handle network access", &e))?;
    }
    // Scopes arrived in ABI 6; best effort leaves them out before that (and says `partial`).
    let scopes = if args.net {
        BitFlags::from(Scope::Signal)
    } else {
        Scope::from_all(REQUESTED)
    };
    ruleset = ruleset
        .scope(scopes)
        .map_err(|e| fail("cannot scope signals and abstract sockets", &e))?;
    let mut writable = vec![PathBuf::from("/dev/null")];
    writable.extend(args.rw.iter().cloned());
    let status = ruleset
        .create()
        .map_err(|e| fail("cannot create the ruleset", &e))?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(REQUESTED)))
        .map_err(|e| fail("cannot allow reading /", &e))?
        .add_rules(path_beneath_rules(&writable, AccessFs::from_all(REQUESTED)))
        .map_err(|e| fail("cannot allow the writable roots", &e))?
        .restrict_self()
        .map_err(|e| fail("cannot restrict itself", &e))?;
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => effective_abi as i32,
        LandlockStatus::NotEnabled => {
            return Err("Landlock is disabled in this kernel (not in the lsm= list)".to_owned());
        }
        LandlockStatus::NotImplemented => {
            return Err("this kernel has no Landlock support".to_owned());
        }
    };
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok((false, abi)),
        RulesetStatus::PartiallyEnforced => Ok((true, abi)),
        RulesetStatus::NotEnforced => Err("the ruleset is not enforced".to_owned()),
    }
}

fn launch(args: &Args) -> Result<ExitCode, String> {
    let keel = rustix::process::getppid();
    // keel's shell tool armed a parent-death SIGKILL before exec; it would kill this supervisor
    // before it could kill the group. The watch below replaces it.
    if !args.probe {
        rustix::process::set_parent_process_death_signal(None)
            .map_err(|e| format!("cannot clear the parent-death signal: {e}"))?;
        if keel.is_none_or(|p| p.as_raw_nonzero().get() == 1) {
            return Err("keel exited before the command started".to_owned());
        }
    }
    if !args.unrestricted || args.probe {
        let (partial, abi) = restrict(args)?;
        if args.probe {
            let enforcement = if partial { "partial" } else { "full" };
            println!("{{\"abi\":{abi},\"enforcement\":\"{enforcement}\"}}");
            return Ok(ExitCode::SUCCESS);
        }
    }
    let Some((program, rest)) = args.command.split_first() else {
        return Err("no command after --".to_owned());
    };
    let mut child = Command::new(program)
        .args(rest)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", program.to_string_lossy()))?;
    watch_parent(keel, child.id());
    let status = child
        .wait()
        .map_err(|e| format!("cannot wait for {}: {e}", program.to_string_lossy()))?;
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    };
    Ok(ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1)))
}

/// B12: when keel is no longer this process's parent (it died, even by SIGKILL), kill this
/// process group — the command and everything it started (keel's shell tool made this process
/// the group's leader) — so nothing is left to PID 1. A launcher that does not lead its group
/// (started by hand) kills only its command.
fn watch_parent(keel: Option<rustix::process::Pid>, child: u32) {
    let spawned = std::thread::Builder::new()
        .name("keel-landlock-watch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(PARENT_POLL);
                if rustix::process::getppid() != keel {
                    let group = rustix::process::getpgrp();
                    if group == rustix::process::getpid() {
                        let _ = rustix::process::kill_process_group(
                            group,
                            rustix::process::Signal::KILL,
                        );
                    } else if let Some(pid) = i32::try_from(child)
                        .ok()
                        .and_then(rustix::process::Pid::from_raw)
                    {
                        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                    }
                    std::process::exit(i32::from(LAUNCHER_FAILURE));
                }
            }
        });
    if let Err(e) = spawned {
        eprintln!("keel-landlock: no parent watch, orphans possible: {e}");
    }
}

fn main() -> ExitCode {
    let result = parse(std::env::args_os().skip(1)).and_then(|a| launch(&a));
    match result {
        Ok(code) => code,
        Err(why) => {
            eprintln!("keel-landlock: {why}");
            ExitCode::from(LAUNCHER_FAILURE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Args, String> {
        parse(list.iter().map(OsString::from))
    }

    #[test]
    fn arguments_parse_and_bad_ones_are_named() {
        let a = args(&["--rw", "/w", "--rw", "/tmp", "--", "sh", "-c", "x"]).unwrap();
        assert_eq!(a.rw, vec![PathBuf::from("/w"), PathBuf::from("/tmp")]);
        assert!(!a.net && !a.probe && !a.unrestricted);
        assert!(
            args(&["--unrestricted", "--", "true"])
                .unwrap()
                .unrestricted
        );
        assert_eq!(a.command, ["sh", "-c", "x"]);
        assert!(args(&["--probe", "--net"]).unwrap().net);
        assert_eq!(args(&["--rw"]).err().unwrap(), "--rw needs a path");
        assert_eq!(args(&["--rw", "/w"]).err().unwrap(), "no command after --");
        assert!(args(&["--bogus"]).err().unwrap().contains("--bogus"));
        // Flags after `--` belong to the command.
        assert_eq!(args(&["--", "ls", "--rw"]).unwrap().command, ["ls", "--rw"]);
    }
}
