//! The runner chain (SBX-04, SBX-06, SBX-07): which confinement backend this host can use,
//! found by really confining a trivial command with each in the configured order (bubblewrap,
//! then Landlock); a runner that enforces fully beats a partial one wherever it is listed. The
//! probe runs once, on a thread of its own from activation on, and is
//! awaited only by the first call that needs it, so it costs boot nothing (each probe spawns a
//! process: ~10 ms).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;

use keel_plugin_api::services::sandbox::{Confined, Enforcement, Policy};
use serde::Deserialize;

use crate::{PLUGIN_ID, bwrap, landlock};

/// A backend of the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunnerKind {
    /// bubblewrap: namespaces and bind mounts; full enforcement.
    Bwrap,
    /// Landlock through `keel-landlock`; full or partial by the kernel's ABI.
    Landlock,
}

impl RunnerKind {
    /// The name in `confine` / `status` answers.
    pub fn as_str(self) -> &'static str {
        match self {
            RunnerKind::Bwrap => bwrap::RUNNER,
            RunnerKind::Landlock => landlock::RUNNER,
        }
    }
}

/// The usable runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    /// Which backend.
    pub kind: RunnerKind,
    /// Its program (the bwrap binary or the launcher).
    pub program: String,
    /// How completely it enforces a policy here (SBX-07).
    pub enforcement: Enforcement,
}

impl Chosen {
    /// The `confine` answer for `command` under `policy`.
    pub fn confined(&self, policy: &Policy, command: &[String]) -> Confined {
        match self.kind {
            RunnerKind::Bwrap => bwrap::confined(&self.program, policy, command),
            RunnerKind::Landlock => {
                landlock::confined(&self.program, self.enforcement, policy, command)
            }
        }
    }
}

/// The paths a runner keeps out of reach in every mode, for [`Confined::shielded`]: keel's
/// own (hidden and read-only) and the user's private ones.
pub fn shielded(policy: &Policy) -> Vec<PathBuf> {
    policy
        .protected
        .iter()
        .map(|p| p.path.clone())
        .chain(policy.private.iter().cloned())
        .collect()
}

/// Tries each `(kind, program)` in order and picks the first that confines a test command
/// fully; a runner that enforces only part of the policy here (Landlock below the ABI keel
/// asks for: no UDP fence below ABI 10) is used only when no link of the chain enforces fully,
/// whatever the order, so bubblewrap is preferred wherever it works (issue 10 item 14). With
/// `require_full`, a partial runner is never used (SBX-07: a consumer that needs an absolute
/// boundary refuses `partial`). With nothing usable: every link's reason, joined.
///
/// # Errors
/// Why no runner of the chain is usable.
pub fn choose(
    chain: &[(RunnerKind, String)],
    network: bool,
    require_full: bool,
) -> Result<Chosen, String> {
    let root = std::fs::canonicalize("/tmp").unwrap_or_else(|_| PathBuf::from("/"));
    let mut why = Vec::new();
    let mut partial = None;
    for (kind, program) in chain {
        let probed = match kind {
            RunnerKind::Bwrap => bwrap::probe(program, &root, network).map(|()| Enforcement::Full),
            RunnerKind::Landlock => {
                landlock::probe(Path::new(program), network).map(|(enforcement, _abi)| enforcement)
            }
        };
        match probed {
            Ok(Enforcement::Full) => {
                return Ok(Chosen {
                    kind: *kind,
                    program: program.clone(),
                    enforcement: Enforcement::Full,
                });
            }
            Ok(_) if require_full => why.push(format!(
                "{}: enforcement is partial on this kernel and the row sets \
                 require_full_enforcement",
                kind.as_str()
            )),
            // Kept, but a later link that enforces fully wins.
            Ok(enforcement) => {
                partial.get_or_insert(Chosen {
                    kind: *kind,
                    program: program.clone(),
                    enforcement,
                });
            }
            Err(e) => why.push(format!("{}: {e}", kind.as_str())),
        }
    }
    if let Some(chosen) = partial {
        return Ok(chosen);
    }
    if why.is_empty() {
        return Err("the runner chain is empty".to_owned());
    }
    Err(why.join("; "))
}

/// The chain's verdict, probed in the background.
#[derive(Debug, Clone)]
pub struct Runner {
    verdict: Arc<OnceLock<Result<Chosen, String>>>,
    probe: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl Runner {
    /// A verdict known already (tests).
    pub fn ready(verdict: Result<Chosen, String>) -> Runner {
        let cell = OnceLock::new();
        let _ = cell.set(verdict);
        Runner {
            verdict: Arc::new(cell),
            probe: Arc::default(),
        }
    }

    /// Starts probing `chain` in the background ([`choose`]).
    pub fn spawn(chain: Vec<(RunnerKind, String)>, network: bool, require_full: bool) -> Runner {
        let verdict: Arc<OnceLock<Result<Chosen, String>>> = Arc::default();
        let slot = Arc::clone(&verdict);
        let spawned = std::thread::Builder::new()
            .name(format!("keel-{PLUGIN_ID}-probe"))
            .spawn(move || {
                let result = choose(&chain, network, require_full);
                match &result {
                    Ok(c) => tracing::debug!(runner = c.kind.as_str(), enforcement = ?c.enforcement, "sandbox runner chosen"),
                    Err(why) => tracing::warn!(reason = %why, "no usable sandbox runner: confined commands will fail with SANDBOX_UNAVAILABLE"),
                }
                let _ = slot.set(result);
            });
        let handle = match spawned {
            Ok(h) => Some(h),
            Err(e) => {
                let _ = verdict.set(Err(format!("the probe thread could not start: {e}")));
                None
            }
        };
        Runner {
            verdict,
            probe: Arc::new(Mutex::new(handle)),
        }
    }

    /// The verdict, waiting for the probe if it still runs.
    pub fn get(&self) -> &Result<Chosen, String> {
        if self.verdict.get().is_none() {
            let handle = self
                .probe
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            if let Some(h) = handle {
                let _ = h.join();
            }
        }
        self.verdict
            .get_or_init(|| Err("the runner probe did not finish".to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // SBX-06: a chain with nothing usable names every link's reason.
    #[test]
    fn sbx06_an_unusable_chain_says_why_for_each_runner() {
        let chain = [
            (RunnerKind::Bwrap, "/nonexistent/bwrap".to_owned()),
            (
                RunnerKind::Landlock,
                "/nonexistent/keel-landlock".to_owned(),
            ),
        ];
        let why = choose(&chain, false, false).unwrap_err();
        assert!(why.contains("bwrap: /nonexistent/bwrap"), "{why}");
        assert!(
            why.contains("landlock: /nonexistent/keel-landlock"),
            "{why}"
        );
        assert!(choose(&[], false, false).is_err());
    }

    /// A fake runner program: a shell script that prints `stdout` and exits `code`.
    fn fake(dir: &Path, name: &str, stdout: &str, code: i32) -> String {
        use std::os::unix::fs::PermissionsExt as _;
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!("#!/bin/sh\nprintf '%s' '{stdout}'\nexit {code}\n"),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.to_string_lossy().into_owned()
    }

    // Issue 10 item 14, SBX-07: a partial runner listed first loses to a later full one (a
    // Landlock below ABI 10 lets UDP out; bubblewrap's network namespace does not), and is
    // used only when nothing enforces fully; `require_full` never uses it.
    #[test]
    fn a_full_runner_beats_a_partial_one_listed_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let partial = fake(
            dir.path(),
            "landlock",
            r#"{"abi":7,"enforcement":"partial"}"#,
            0,
        );
        let good_bwrap = fake(dir.path(), "bwrap-ok", "", 0);
        let broken_bwrap = fake(dir.path(), "bwrap-broken", "", 1);
        let chain = |bwrap: &str| {
            [
                (RunnerKind::Landlock, partial.clone()),
                (RunnerKind::Bwrap, bwrap.to_owned()),
            ]
        };

        let chosen = choose(&chain(&good_bwrap), false, false).unwrap();
        assert_eq!(
            (chosen.kind, chosen.enforcement),
            (RunnerKind::Bwrap, Enforcement::Full)
        );
        let chosen = choose(&chain(&broken_bwrap), false, false).unwrap();
        assert_eq!(
            (chosen.kind, chosen.enforcement),
            (RunnerKind::Landlock, Enforcement::Partial)
        );
        let why = choose(&chain(&broken_bwrap), false, true).unwrap_err();
        assert!(why.contains("landlock: enforcement is partial"), "{why}");
        assert!(why.contains("bwrap: "), "{why}");
    }
}
