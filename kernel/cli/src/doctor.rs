//! `keel doctor`: what this installation can do and what is wrong with it, without running a
//! task. Exit 0 when every check passes, 1 when something needs attention.
//!
//! The kernel checks what it owns (ABI, search path, assembly, lock); everything else is the
//! rows' to say through the doctor seam (`keel.doctor.<plugin>`, issue 13 item 2): a row that
//! confines tools probes its own runners, and the kernel only prints the answers.

use std::collections::BTreeSet;
use std::path::Path;

use keel_plugin_api::abi::ABI_MAJOR;
use keel_plugin_api::services::doctor::{CheckStatus, Doctor, DoctorRequest, PREFIX};

use super::ProfileArgs;
use keel_kernel::assemble::{Assembly, LockState, assemble};
use keel_kernel::error::Result;
use keel_kernel::loader::Located;
use keel_kernel::lock;
use keel_kernel::paths::{Paths, is_plugin_library};
use keel_kernel::runtime::Kernel;

struct Report {
    text: String,
    problems: usize,
}

impl Report {
    fn add(&mut self, status: CheckStatus, what: &str, detail: impl AsRef<str>) {
        let label = match status {
            CheckStatus::Ok => "ok   ",
            CheckStatus::Warn => "warn ",
            CheckStatus::Fail => "FAIL ",
        };
        self.problems += usize::from(status == CheckStatus::Fail);
        self.text
            .push_str(&format!("{label} {what}: {}\n", detail.as_ref()));
    }
    fn ok(&mut self, what: &str, detail: impl AsRef<str>) {
        self.add(CheckStatus::Ok, what, detail);
    }
    fn warn(&mut self, what: &str, detail: impl AsRef<str>) {
        self.add(CheckStatus::Warn, what, detail);
    }
    fn fail(&mut self, what: &str, detail: impl AsRef<str>) {
        self.add(CheckStatus::Fail, what, detail);
    }
}

pub(super) fn doctor(paths: &Paths, args: &ProfileArgs) -> Result<i32> {
    let mut r = Report {
        text: String::new(),
        problems: 0,
    };
    let mut assembly = None;
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
                    if !a.idle.is_empty() {
                        let idle: Vec<&str> = a.idle.iter().map(String::as_str).collect();
                        r.ok(
                            "idle rows",
                            format!(
                                "{}: no work for their config; checked, opened when they get some",
                                idle.join(", ")
                            ),
                        );
                    }
                    if a.has_driver() {
                        r.ok("driver", "a row provides keel.driver");
                    } else {
                        r.warn(
                            "driver",
                            format!("profile '{name}' has no driver; `keel run` will refuse it"),
                        );
                    }
                    assembly = Some(a);
                }
                Err(e) => r.fail(
                    &format!("profile '{name}'"),
                    format!("error[{}]: {e}", e.code()),
                ),
            }
        }
    }
    let located = assembly.as_ref().map_or(&[][..], |a: &Assembly| &a.located);
    lock_libraries(&mut r, paths, located);
    if let Some(a) = &assembly {
        row_checks(&mut r, paths, a);
    }
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
    let mut cache = keel_kernel::loader::DigestCache::open(&paths.keel_home);
    let now = match lock::library_table(paths, located, &mut cache) {
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

/// The checks rows contribute: every row whose plugin provides a `keel.doctor.<plugin>` service
/// starts, with the rows it requires and nothing else of the profile, answers its checks (one
/// line each, `<row>: <check>`), and is shut down.
fn row_checks(r: &mut Report, paths: &Paths, a: &Assembly) {
    let doctors = |plugin: &str| {
        a.libraries.get(plugin).into_iter().flat_map(|l| {
            l.manifest
                .provides
                .iter()
                .filter(|p| p.name.starts_with(PREFIX))
        })
    };
    let mut needed: BTreeSet<&str> = (a.profile.rows.iter())
        .filter(|row| doctors(&row.plugin).next().is_some())
        .map(|row| row.id.as_str())
        .collect();
    let mut seen = BTreeSet::new();
    let services: Vec<&str> = (a.profile.rows.iter())
        .filter(|row| needed.contains(row.id.as_str()))
        .flat_map(|row| doctors(&row.plugin).map(|p| p.name.as_str()))
        .filter(|name| seen.insert(*name))
        .collect();
    if services.is_empty() {
        return;
    }
    while let Some(e) = a.plan.edges.iter().find(|e| {
        !e.optional && needed.contains(e.consumer.as_str()) && !needed.contains(e.provider.as_str())
    }) {
        needed.insert(&e.provider);
    }
    let rows = (a.row_specs().into_iter())
        .filter(|s| needed.contains(s.id.as_str()))
        .collect();
    const ROW: &str = "row checks";
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return r.fail(ROW, format!("cannot start the kernel runtime: {e}")),
    };
    let handle = runtime.handle().clone();
    runtime.block_on(async {
        let home = paths.keel_home.clone();
        let kernel = match Kernel::new(handle, a.profile.kernel, home, rows) {
            Ok(k) => k,
            Err(e) => return r.fail(ROW, format!("error[{}]: {e}", e.code())),
        };
        if let Err(e) = kernel.start().await {
            r.fail(ROW, format!("error[{}]: {e}", e.code()));
        }
        for service in services {
            let (row, client) = match kernel.seam::<Doctor>(service) {
                Ok(Some(found)) => found,
                Ok(None) => continue, // not active: `start` said why
                Err(e) => {
                    r.fail(ROW, format!("error[{}]: {e}", e.code()));
                    continue;
                }
            };
            match client.checks(DoctorRequest::default()).await {
                Ok(report) => {
                    for c in report.checks {
                        r.add(c.status, &format!("{row}: {}", c.name), c.detail);
                    }
                }
                Err(e) => r.fail(&row, format!("error[{}]: {}", e.code, e.message)),
            }
        }
        kernel.shutdown().await;
    });
}
