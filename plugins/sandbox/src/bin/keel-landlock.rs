//! `keel-landlock`: the Landlock launcher of the `sandbox` plugin (B10, SBX-04, SBX-07), the
//! Linux runner used where bubblewrap is not (no user namespaces, no setuid helper).
//!
//! Landlock restricts the calling process and everything it later executes, so confinement
//! needs a process of its own between keel and the command: this one. It restricts itself —
//! everything readable, only `--rw` roots and `/dev/null` writable, TCP (and UDP where the
//! kernel can) refused unless `--net`, no signals to processes outside its domain (keel, the
//! user's programs) and, without `--net`, no abstract Unix sockets (SBX-11: the command is a
//! layer apart, as bwrap's PID and network namespaces make it) — then runs the command as its
//! child, which inherits all of it, and stays as its supervisor (B12, no orphans,
//! [`keel_plugin_sandbox::supervise`]): a subreaper that, when the command ends or keel (the
//! `--parent` pid) goes away, kills every descendant — whatever group or session it moved to —
//! and exits with the command's status. With `--unrestricted` it only supervises (the sandbox
//! runs `danger-full-access` commands and bubblewrap itself under it).
//!
//! With `--hide PATH` (keel's home), reading is granted on everything beside the way from `/`
//! to PATH instead of on `/` itself — Landlock only allows, so a path is kept out by never
//! granting it — and the directories on that way are granted for listing only; a symlink is
//! judged by its target. A hidden path inside a `--rw` root cannot be kept out: refused.
//!
//! Usage: `keel-landlock [--parent PID] [--rw PATH]... [--hide PATH]... [--net]
//! [--unrestricted] -- PROGRAM [ARG]...` (`--parent` defaults to the parent at start);
//! `keel-landlock --probe [--net]` restricts itself the same way and prints
//! `{"abi":N,"enforcement":"full"|"partial"}`.
//! Its own failures print one `keel-landlock: …` line and exit 125 (the runner-failure rule
//! the plugin hands to consumers, SBX-09); otherwise the exit code is the command's (128 + N
//! when a signal N ended it, as shells report it).

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use keel_plugin_sandbox::supervise;

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
    parent: Option<i32>,
    rw: Vec<PathBuf>,
    hide: Vec<PathBuf>,
    net: bool,
    probe: bool,
    unrestricted: bool,
    command: Vec<OsString>,
}

fn parse(mut raw: impl Iterator<Item = OsString>) -> Result<Args, String> {
    let mut args = Args {
        parent: None,
        rw: Vec::new(),
        hide: Vec::new(),
        net: false,
        probe: false,
        unrestricted: false,
        command: Vec::new(),
    };
    while let Some(a) = raw.next() {
        match a.to_str() {
            Some("--parent") => {
                let pid = raw.next().ok_or("--parent needs a pid")?;
                let pid = pid
                    .to_str()
                    .and_then(|p| p.parse().ok())
                    .filter(|p| *p > 0)
                    .ok_or_else(|| format!("--parent {}: not a pid", pid.to_string_lossy()))?;
                args.parent = Some(pid);
            }
            Some("--rw") => {
                let path = raw.next().ok_or("--rw needs a path")?;
                args.rw.push(PathBuf::from(path));
            }
            Some("--hide") => {
                let path = raw.next().ok_or("--hide needs a path")?;
                args.hide.push(PathBuf::from(path));
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
    let hidden: Vec<PathBuf> = args
        .hide
        .iter()
        .map(|h| h.canonicalize().unwrap_or_else(|_| h.clone()))
        .collect();
    if let Some((h, r)) = hidden
        .iter()
        .find_map(|h| args.rw.iter().find(|r| h.starts_with(r)).map(|r| (h, r)))
    {
        return Err(format!(
            "cannot keep {} out of reach: it lies inside the writable root {}",
            h.display(),
            r.display()
        ));
    }
    let grants = read_grants(&hidden);
    let status = ruleset
        .create()
        .map_err(|e| fail("cannot create the ruleset", &e))?
        .add_rules(path_beneath_rules(
            &grants.read,
            AccessFs::from_read(REQUESTED),
        ))
        .map_err(|e| fail("cannot allow reading", &e))?
        .add_rules(path_beneath_rules(
            &grants.list,
            BitFlags::from(AccessFs::ReadDir),
        ))
        .map_err(|e| fail("cannot allow listing", &e))?
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

/// What reading is granted on: whole subtrees (`read`) and directories for listing only
/// (`list`: those on the way from `/` to a hidden path).
#[derive(Debug, Default, PartialEq, Eq)]
struct ReadGrants {
    read: Vec<PathBuf>,
    list: Vec<PathBuf>,
}

/// Everything readable except `hidden` (canonical paths): `/` whole when nothing is hidden.
fn read_grants(hidden: &[PathBuf]) -> ReadGrants {
    let mut grants = ReadGrants::default();
    visit(std::path::Path::new("/"), hidden, &mut grants);
    grants
}

fn visit(dir: &std::path::Path, hidden: &[PathBuf], grants: &mut ReadGrants) {
    if hidden.iter().any(|h| h == dir) {
        return;
    }
    if !hidden.iter().any(|h| h.starts_with(dir)) {
        grants.read.push(dir.to_path_buf());
        return;
    }
    grants.list.push(dir.to_path_buf());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            // Judged by its target: one into (or above) a hidden path is never granted; the
            // target is reached on its own way if it is elsewhere in this walk.
            let Ok(real) = path.canonicalize() else {
                continue;
            };
            if !hidden
                .iter()
                .any(|h| real.starts_with(h) || h.starts_with(&real))
            {
                grants.read.push(real);
            }
            continue;
        }
        visit(&path, hidden, grants);
    }
}

fn launch(args: &Args) -> Result<ExitCode, String> {
    if args.probe {
        let (partial, abi) = restrict(args)?;
        let enforcement = if partial { "partial" } else { "full" };
        println!("{{\"abi\":{abi},\"enforcement\":\"{enforcement}\"}}");
        return Ok(ExitCode::SUCCESS);
    }
    // B12: keel may have armed a parent-death SIGKILL before exec (the hooks do; the shell
    // tool does not, issue 25); it would kill this supervisor before it could sweep. The
    // check of `--parent` and the watch below replace it.
    let parent = match args.parent {
        Some(p) => rustix::process::Pid::from_raw(p),
        None => rustix::process::getppid(),
    }
    .ok_or("keel exited before the command started")?;
    supervise::take_over_from(parent)?;
    supervise::become_subreaper()?;
    let signals = supervise::catch_signals()?;
    let code = i32::from(LAUNCHER_FAILURE);
    // The watch thread of a fenced launcher starts before the fence (Landlock binds the threads
    // created after it, and the watch reads /proc); an unfenced one starts it after the command,
    // off the command's path (issue 25: per step with the sandbox off).
    let signals = if args.unrestricted {
        Some(signals)
    } else {
        supervise::watch(parent, code, signals);
        restrict(args)?;
        drop_capabilities()?;
        None
    };
    let Some((program, rest)) = args.command.split_first() else {
        return Err("no command after --".to_owned());
    };
    let mut command = Command::new(program);
    command.args(rest);
    die_with_launcher(&mut command);
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", program.to_string_lossy()))?;
    if let Some(signals) = signals {
        supervise::watch(parent, code, signals);
    }
    let status = child.wait();
    // Nothing the command started outlives it, whatever group or session it moved to.
    supervise::sweep();
    let status =
        status.map_err(|e| format!("cannot wait for {}: {e}", program.to_string_lossy()))?;
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    };
    Ok(ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1)))
}

/// The command gets SIGKILL if this launcher is killed outright (its thread, the main one,
/// lives as long as the launcher).
#[allow(
    unsafe_code,
    reason = "pre_exec is the only way to run prctl in the child before exec"
)]
fn die_with_launcher(cmd: &mut Command) {
    use std::os::unix::process::CommandExt as _;
    let launcher = rustix::process::getpid();
    // SAFETY: the hook runs between fork and exec and makes only the raw prctl(2) and
    // getppid(2) syscalls through rustix (no allocation, no locks): async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
                .map_err(std::io::Error::from)?;
            if rustix::process::getppid() != Some(launcher) {
                return Err(std::io::Error::other("the launcher exited first"));
            }
            Ok(())
        });
    }
}

/// A root keel's confined command would keep root's capabilities, and Landlock fences files,
/// not capabilities: `CAP_SYS_PTRACE` alone reads any process's `/proc/<pid>/environ`, keel's
/// included. Like bwrap, the launcher drops them all before it starts the command — the
/// bounding set first (so no later exec regains one), then the effective, permitted,
/// inheritable and ambient sets. A launcher without capabilities has nothing to drop.
fn drop_capabilities() -> Result<(), String> {
    use rustix::thread::{
        CapabilitySet, CapabilitySets, capabilities, capability_is_in_bounding_set,
        clear_ambient_capability_set, remove_capability_from_bounding_set, set_capabilities,
    };
    let held = capabilities(None).map_err(|e| format!("cannot read capabilities: {e}"))?;
    if held.permitted.is_empty() && held.effective.is_empty() {
        return Ok(());
    }
    for bit in 0..64 {
        let one = CapabilitySet::from_bits_retain(1 << bit);
        if capability_is_in_bounding_set(one).unwrap_or(false) {
            remove_capability_from_bounding_set(one)
                .map_err(|e| format!("cannot drop capability {bit}: {e}"))?;
        }
    }
    let _ = clear_ambient_capability_set();
    let none = CapabilitySet::empty();
    set_capabilities(
        None,
        CapabilitySets {
            effective: none,
            permitted: none,
            inheritable: none,
        },
    )
    .map_err(|e| format!("cannot drop capabilities: {e}"))
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

    // Issue 10 items 2-3: everything beside the way to a hidden path is readable, the way
    // itself only listable, the hidden path and links into it nothing.
    #[test]
    fn read_grants_leave_out_only_the_hidden_path() {
        assert_eq!(read_grants(&[]).read, vec![PathBuf::from("/")]);
        let root = tempfile::tempdir().unwrap();
        let base = root.path().canonicalize().unwrap();
        let home = base.join("home");
        for d in ["home/.keel/secrets", "home/project", "other"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(base.join("home/.bashrc"), "x").unwrap();
        std::os::unix::fs::symlink(home.join(".keel"), home.join("link-in")).unwrap();
        std::os::unix::fs::symlink(&base, home.join("link-up")).unwrap();
        std::os::unix::fs::symlink(base.join("other"), home.join("link-out")).unwrap();
        let hidden = home.join(".keel");
        let g = read_grants(std::slice::from_ref(&hidden));
        assert!(g.list.contains(&PathBuf::from("/")));
        assert!(g.list.contains(&home));
        assert!(g.read.contains(&home.join(".bashrc")));
        assert!(g.read.contains(&home.join("project")));
        assert!(g.read.contains(&base.join("other")));
        for granted in g.read.iter().chain(&g.list) {
            assert!(
                !granted.starts_with(&hidden),
                "{} is granted",
                granted.display()
            );
        }
        for granted in &g.read {
            assert!(
                !hidden.starts_with(granted),
                "{} (an ancestor of the hidden path) is granted whole",
                granted.display()
            );
        }
    }

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
        assert_eq!(
            args(&["--parent", "42", "--", "true"]).unwrap().parent,
            Some(42)
        );
        assert!(args(&["--parent", "x", "--", "true"]).is_err());
        let h = args(&["--hide", "/h", "--", "true"]).unwrap();
        assert_eq!(h.hide, vec![PathBuf::from("/h")]);
        assert_eq!(args(&["--hide"]).err().unwrap(), "--hide needs a path");
        // Flags after `--` belong to the command.
        assert_eq!(args(&["--", "ls", "--rw"]).unwrap().command, ["ls", "--rw"]);
    }
}
