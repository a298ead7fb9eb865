//! The sandbox row's `keel doctor` checks (issue 13 item 2): whether each runner of its chain
//! confines a test command here, probed with the same argv the runner uses ([`bwrap::probe`],
//! [`landlock::probe`]), and which runner the chain chose. The kernel knows none of this; it
//! asks every row serving `keel.doctor.<plugin>` and prints the answers.

use std::path::{Path, PathBuf};

use keel_plugin_api::prelude::*;
use keel_plugin_api::services::doctor::{
    Check, CheckStatus, DoctorProvider, DoctorReport, DoctorRequest,
};
use keel_plugin_api::services::sandbox::Enforcement;

use crate::{RunnerKind, SandboxConfig, State, bwrap, landlock};

/// Serves the checks of one sandbox row.
pub struct SandboxDoctor {
    /// The row's config: which programs, in which order, with or without network.
    pub config: SandboxConfig,
    /// The row's state, for the runner its chain chose.
    pub state: std::sync::Arc<State>,
}

impl DoctorProvider for SandboxDoctor {
    async fn checks(&self, _: DoctorRequest) -> Result<DoctorReport> {
        let c = &self.config;
        let mut checks = vec![bubblewrap(&c.bwrap, c.network)];
        checks.push(landlock_check(
            &landlock::launcher_path(&c.landlock),
            c.network,
        ));
        checks.push(runner(&self.state));
        Ok(DoctorReport { checks })
    }
}

/// `program` as `Command` would find it: a path as given, a bare name on `PATH`.
fn find(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program)).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// bubblewrap with the runner's own argv (its namespaces, the row's network switch).
fn bubblewrap(program: &str, network: bool) -> Check {
    const NAME: &str = "bubblewrap";
    let Some(found) = find(program) else {
        return Check::new(
            NAME,
            CheckStatus::Warn,
            "not installed (apt-get install bubblewrap)",
        );
    };
    let root = std::fs::canonicalize("/tmp").unwrap_or_else(|_| PathBuf::from("/"));
    match bwrap::probe(&found.to_string_lossy(), &root, network) {
        Ok(()) => Check::new(
            NAME,
            CheckStatus::Ok,
            format!("{} confines a test command", found.display()),
        ),
        Err(_) => Check::new(
            NAME,
            CheckStatus::Warn,
            format!(
                "{} is installed but cannot create a sandbox here (user namespaces?)",
                found.display()
            ),
        ),
    }
}

/// What Landlock at `abi` leaves open of what keel asks (the ABI 10 rights; SBX-07).
fn landlock_gaps(abi: u32) -> String {
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

/// The launcher's self-restriction probe: the kernel's Landlock ABI and the enforcement; a
/// partial line names what stays open.
fn landlock_check(launcher: &Path, network: bool) -> Check {
    const NAME: &str = "landlock";
    if !launcher.is_file() {
        return Check::new(
            NAME,
            CheckStatus::Warn,
            format!("{} is not installed", launcher.display()),
        );
    }
    match landlock::probe(launcher, network) {
        Ok((Enforcement::Full, abi)) => Check::new(
            NAME,
            CheckStatus::Ok,
            format!("confines a test process (kernel ABI {abi}), enforcement full"),
        ),
        Ok((_, abi)) => Check::new(
            NAME,
            CheckStatus::Warn,
            format!(
                "confines a test process (kernel ABI {abi}), enforcement partial: {}",
                landlock_gaps(abi)
            ),
        ),
        Err(why) => Check::new(NAME, CheckStatus::Warn, format!("unusable here: {why}")),
    }
}

/// The runner this row's chain uses (its order, `require_full_enforcement`).
fn runner(state: &State) -> Check {
    const NAME: &str = "runner";
    match state.runner.get() {
        Ok(c) if c.kind == RunnerKind::Bwrap => Check::new(
            NAME,
            CheckStatus::Ok,
            "bubblewrap (enforcement full); the chain prefers it to Landlock wherever it works",
        ),
        Ok(c) if c.enforcement == Enforcement::Full => {
            Check::new(NAME, CheckStatus::Ok, "landlock (enforcement full)")
        }
        Ok(_) => Check::new(
            NAME,
            CheckStatus::Warn,
            "landlock (enforcement partial); a working bubblewrap would be preferred",
        ),
        Err(why) => Check::new(
            NAME,
            CheckStatus::Warn,
            format!("none usable: confined commands fail with SANDBOX_UNAVAILABLE ({why})"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 13 item 2 (moved from the kernel's doctor): a partial Landlock names what stays
    // open at each ABI.
    #[test]
    fn landlock_gaps_name_what_stays_open_below_abi_10() {
        assert!(landlock_gaps(7).contains("UDP"));
        assert!(!landlock_gaps(7).contains("TCP"));
        assert!(landlock_gaps(2).contains("TCP and UDP"));
        assert!(landlock_gaps(2).contains("truncating"));
        assert!(landlock_gaps(10).contains("some rights"));
    }

    // Issue 13 item 2: a missing program is "not installed", not a failure of the probe.
    #[test]
    fn a_missing_bubblewrap_is_not_installed() {
        let c = bubblewrap("/nonexistent/bwrap", false);
        assert_eq!(c.status, CheckStatus::Warn);
        assert!(c.detail.contains("not installed"), "{}", c.detail);
        let c = landlock_check(Path::new("/nonexistent/keel-landlock"), false);
        assert!(c.detail.contains("not installed"), "{}", c.detail);
    }
}
