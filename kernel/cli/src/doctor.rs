//! `keel doctor`: what this installation can do and what is wrong with it, without running a
//! task. Exit 0 when every check passes, 1 when something needs attention.

use std::path::{Path, PathBuf};

use keel_plugin_api::abi::ABI_MAJOR;

use super::ProfileArgs;
use keel_kernel::assemble::{LockState, assemble};
use keel_kernel::error::Result;
use keel_kernel::loader::Located;
use keel_kernel::lock;
use keel_kernel::paths::{Paths, is_plugin_library};

struct Report {
    text: String,
    problems: usize,
}

impl Report {
    fn ok(&mut self, what: &str, detail: impl AsRef<str>) {
        self.text
            .push_str(&format!("ok    {what}: {}\n", detail.as_ref()));
    }
    fn warn(&mut self, what: &str, detail: impl AsRef<str>) {
        self.text
            .push_str(&format!("warn  {what}: {}\n", detail.as_ref()));
    }
    fn fail(&mut self, what: &str, detail: impl AsRef<str>) {
        self.problems += 1;
        self.text
            .push_str(&format!("FAIL  {what}: {}\n", detail.as_ref()));
    }
}

pub(super) fn doctor(paths: &Paths, args: &ProfileArgs) -> Result<i32> {
    let mut r = Report {
        text: String::new(),
        problems: 0,
    };
    let mut sandbox_row = None;
    let mut located = Vec::new();
    r.ok(
        "kernel",
        format!("keel {}, plugin ABI {ABI_MAJOR}", env!("CARGO_PKG_VERSION")),
    );
    r.ok("binary dir", paths.exe_dir.display().to_string());
    r.ok("KEEL_HOME", paths.keel_home.display().to_string());
    for dir in &paths.plugin_path {
        plugin_dir(&mut r, dir);
    }
    match args.resolve(paths) {
        Err(e) => r.fail(&format!("profile '{}'", args.name()), e.to_string()),
        Ok(profile) => {
            let name = profile.name.clone();
            let rows = profile.rows.len();
            match assemble(paths, profile, true) {
                Ok(a) => {
                    r.ok(
                        &format!("profile '{name}'"),
                        format!(
                            "{rows} row{} in {} layer{}, assembly ok",
                            if rows == 1 { "" } else { "s" },
                            a.plan.layers.len(),
                            if a.plan.layers.len() == 1 { "" } else { "s" }
                        ),
                    );
                    lock_state(&mut r, &name, &a.lock);
                    located = a.located.clone();
                    sandbox_row = Some(a.provides("keel.sandbox"));
                    if a.has_driver() {
                        r.ok("driver", "a row provides keel.driver");
                    } else {
                        r.warn(
                            "driver",
                            format!("profile '{name}' has no driver; `keel run` will refuse it"),
                        );
                    }
                }
                Err(e) => r.fail(
                    &format!("profile '{name}'"),
                    format!("error[{}]: {e}", e.code()),
                ),
            }
        }
    }
    lock_libraries(&mut r, paths, &located);
    sandbox(&mut r, sandbox_row);
    print!("{}", r.text);
    Ok(if r.problems == 0 { 0 } else { 1 })
}

/// Which of the three lock states the profile is in (issue 10 item 10).
fn lock_state(r: &mut Report, name: &str, state: &LockState) {
    match state {
        LockState::Locked(p) => r.ok(
            "lock",
            format!(
                "locked by {} (profile '{name}': its libraries and graph)",
                p.display()
            ),
        ),
        LockState::Libraries(p) => r.warn(
            "lock",
            format!(
                "libraries pinned by {}, graph unlocked: no entry for profile '{name}' \
                 (`keel lock --profile {name}` pins it)",
                p.display()
            ),
        ),
        LockState::Unlocked(why) => r.warn("lock", format!("running unlocked: {why}")),
        LockState::NotChecked => {}
    }
}

/// The lock's library table against the search path as it is now: which libraries changed
/// or appeared since the lock, so would be refused by any profile that loads them. Digests
/// only; nothing is opened. Says nothing without a lock (the lock line says "unlocked"), or
/// with one the profile check could not read (it reported `LOCK_FILE`).
fn lock_libraries(r: &mut Report, paths: &Paths, located: &[Located]) {
    const ROW: &str = "lock libraries";
    let path = paths.lock_file();
    let Ok(Some(lock_file)) = lock::read(&path) else {
        return;
    };
    let Some(locked) = &lock_file.libraries else {
        r.warn(
            ROW,
            format!(
                "{} has no library table (written by an older keel): profiles without an \
                 entry of their own are refused until `keel lock` runs again",
                path.display()
            ),
        );
        return;
    };
    let now = match lock::library_table(paths, located) {
        Ok(now) => now,
        Err(e) => {
            r.warn(ROW, e.to_string());
            return;
        }
    };
    let drift = lock::Drift::between(locked, &now);
    let mut detail = if drift.refuses_something() {
        let mut parts = Vec::new();
        if !drift.changed.is_empty() {
            parts.push(format!(
                "changed since the lock: {}",
                drift.changed.join(", ")
            ));
        }
        if !drift.unpinned.is_empty() {
            parts.push(format!(
                "not pinned (added since the lock): {}",
                drift.unpinned.join(", ")
            ));
        }
        format!(
            "{}; any profile that loads one is refused (LOCK_DIGEST), `keel lock` re-pins",
            parts.join("; ")
        )
    } else {
        format!(
            "all {} libraries on the search path pinned by {}",
            now.len(),
            path.display()
        )
    };
    if !drift.gone.is_empty() {
        detail.push_str(&format!(
            " ({} pinned, no longer on the search path)",
            drift.gone.join(", ")
        ));
    }
    if drift.refuses_something() {
        r.warn(ROW, detail);
    } else {
        r.ok(ROW, detail);
    }
}

fn plugin_dir(r: &mut Report, dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        r.warn("plugin path", format!("{} (missing)", dir.display()));
        return;
    };
    // Counted, not opened: opening runs a library's initialisers, and only libraries of the
    // profile, after the lock check, may run (the profile check opens those).
    let found = entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(is_plugin_library))
        .count();
    let libraries = if found == 1 { "library" } else { "libraries" };
    r.ok(
        "plugin path",
        format!("{} ({found} plugin {libraries})", dir.display()),
    );
}

/// Which sandbox runners work here (a real confined `true`, not only a file check), which one
/// the `sandbox` plugin's chain would use, and whether the profile loads a row that uses them.
/// The kernel runs nothing confined itself; the `sandbox` plugin does, and fails closed without
/// a runner. The chain prefers a runner that enforces fully (bubblewrap) to a partial one
/// (Landlock below ABI 10) wherever both work (issue 10 item 14).
fn sandbox(r: &mut Report, sandbox_row: Option<bool>) {
    match sandbox_row {
        Some(true) => r.ok("sandbox", "a row provides keel.sandbox"),
        Some(false) => r.warn(
            "sandbox",
            "no row provides keel.sandbox: tools run unconfined with this profile",
        ),
        None => {}
    }
    let bwrap = bubblewrap(r);
    let landlock = landlock(r);
    const ROW: &str = "sandbox: runner";
    match (bwrap, landlock) {
        (true, _) => r.ok(
            ROW,
            "bubblewrap (enforcement full); the chain prefers it to Landlock wherever it works",
        ),
        (false, Some(Enforcement::Full)) => r.ok(ROW, "landlock (enforcement full)"),
        (false, Some(Enforcement::Partial(gaps))) => r.warn(
            ROW,
            format!(
                "landlock (enforcement partial: {gaps}); a working bubblewrap would be preferred"
            ),
        ),
        (false, None) => r.warn(
            ROW,
            "none usable: confined commands fail with SANDBOX_UNAVAILABLE",
        ),
    }
}

/// bubblewrap as the sandbox plugin finds it (`bwrap` on `PATH`), probed with the plugin's own
/// flags (its namespaces, network off): whether it confines a test command here.
fn bubblewrap(r: &mut Report) -> bool {
    const ROW: &str = "sandbox: bubblewrap";
    let on_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("bwrap"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let fixed = ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"].map(PathBuf::from);
    let Some(p) = on_path.into_iter().chain(fixed).find(|p| p.is_file()) else {
        r.warn(ROW, "not installed (apt-get install bubblewrap)");
        return false;
    };
    let works = std::process::Command::new(&p)
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--die-with-parent",
            "--unshare-pid",
            "--new-session",
            "--unshare-net",
            "--",
            "true",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if works {
        r.ok(ROW, format!("{} confines a test command", p.display()));
    } else {
        r.warn(
            ROW,
            format!(
                "{} is installed but cannot create a sandbox here (user namespaces?)",
                p.display()
            ),
        );
    }
    works
}

/// How completely Landlock enforces keel's policy here.
enum Enforcement {
    Full,
    /// What it leaves open, in words.
    Partial(String),
}

/// What Landlock at `abi` leaves open of what keel asks (the ABI 10 rights; SBX-07).
fn landlock_gaps(abi: u64) -> String {
    let mut gaps = Vec::new();
    if abi < 4 {
        gaps.push(
            "TCP and UDP from a confined command reach the host (no network fence below ABI 4)",
        );
    } else if abi < 10 {
        gaps.push("UDP from a confined command reaches the host (no UDP fence below ABI 10)");
    }
    if abi < 6 {
        gaps.push("signals and abstract Unix sockets are not scoped (below ABI 6)");
    }
    if abi < 3 {
        gaps.push("truncating a read-only file is not fenced (below ABI 3)");
    }
    if gaps.is_empty() {
        gaps.push("some rights keel asks for are not enforced by this kernel");
    }
    gaps.join("; ")
}

/// Landlock through the sandbox plugin's launcher beside this binary: a real self-restriction
/// (`keel-landlock --probe`), with the kernel's ABI and whether it enforces fully (SBX-07); a
/// partial line names what stays open. `None` when it is unusable.
fn landlock(r: &mut Report) -> Option<Enforcement> {
    const ROW: &str = "sandbox: landlock";
    let launcher = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("keel-landlock")));
    let Some(launcher) = launcher.filter(|l| l.is_file()) else {
        r.warn(ROW, "keel-landlock is not installed beside keel");
        return None;
    };
    let out = std::process::Command::new(&launcher)
        .arg("--probe")
        .stdin(std::process::Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let probe: serde_json::Value =
                serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
            let enforcement = probe["enforcement"].as_str().unwrap_or("unknown");
            let detail = format!(
                "confines a test process (kernel ABI {}), enforcement {enforcement}",
                probe["abi"]
            );
            if enforcement == "full" {
                r.ok(ROW, detail);
                Some(Enforcement::Full)
            } else {
                let gaps = landlock_gaps(probe["abi"].as_u64().unwrap_or(0));
                r.warn(ROW, format!("{detail}: {gaps}"));
                Some(Enforcement::Partial(gaps))
            }
        }
        Ok(o) => {
            r.warn(
                ROW,
                format!(
                    "unusable here: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
            );
            None
        }
        Err(e) => {
            r.warn(
                ROW,
                format!("{} could not be started: {e}", launcher.display()),
            );
            None
        }
    }
}
