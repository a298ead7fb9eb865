//! Which profile `keel resume` runs a session under (issue 11 item 7).
//!
//! `keel run` records the running profile with the session it creates (`keel.agent` `create`
//! passes [`ProfileIdentity`] on to `keel.session`, which logs it as the session's
//! `session/profile` event). `keel resume ID` reads it back (`keel.session` `profile`) before it
//! does anything else — before the prompt is read, before any credential check — and:
//!
//! - without `--profile`, when the session was created under another profile, asks the kernel
//!   to run the same command line again under that one ([`Relaunch`]; the kernel does so once);
//! - with a `--profile` that differs, runs under it and says so in one stderr line;
//! - under the recorded profile whose assembled config changed since (another digest), runs and
//!   says that too (not fatal);
//! - with the session's recorded `-c` arguments or `--patch` files not in force (issue 23 item
//!   3: a session created with `-c llm-openai.base_url=…` must not resume against the default
//!   endpoint), asks the kernel to run again with them applied ([`Relaunch::overrides`],
//!   [`Relaunch::patches`]; the kernel puts them before the command line's and checks each
//!   patch's digest); an explicit `-c` of a recorded key with another value wins, said in one
//!   line;
//! - for a session that records no profile (created before keel recorded it, or by a driver
//!   that does not), or a kernel that does not tell its profile, runs as before.

use keel_plugin_api::services::driver::{DriverInvocation, ProfileIdentity, Relaunch};
use keel_plugin_api::services::session::{SessionRef, SessionsClient};

/// What the driver does with a resume, given the session's recorded profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Go on under the running profile, saying the line on stderr first when there is one.
    Proceed(Option<String>),
    /// Ask the kernel to run the command again under the recorded profile.
    Relaunch(Relaunch),
}

/// How much of a digest a note shows.
const SHOWN_DIGEST: usize = 12;

fn short(digest: &str) -> &str {
    digest.get(..SHOWN_DIGEST).unwrap_or(digest)
}

/// The decision for `inv` given `recorded`, the profile session `inv.session_id` was created
/// with (`None`: it records none).
pub fn decide(inv: &DriverInvocation, recorded: Option<&ProfileIdentity>) -> Decision {
    let (Some(recorded), Some(running), "resume") = (
        recorded,
        inv.profile_identity.as_ref(),
        inv.command.as_str(),
    ) else {
        return Decision::Proceed(None);
    };
    let session = inv.session_id.as_deref().unwrap_or_default();
    let reason = format!("session {session} was created with it");
    let layers = |profile: &str| Relaunch {
        profile: profile.to_owned(),
        reason: reason.clone(),
        overrides: recorded.overrides.clone(),
        patches: recorded.patches.clone(),
    };
    if recorded.name != running.name {
        if !inv.profile_explicit {
            return Decision::Relaunch(layers(&recorded.name));
        }
        return Decision::Proceed(Some(format!(
            "keel: resuming session {session} (recorded with profile {}, digest {}) under profile {} (--profile)",
            recorded.name,
            short(&recorded.digest),
            running.name
        )));
    }
    let (missing, overridden) = compare(recorded, running);
    if missing {
        return Decision::Relaunch(layers(&recorded.name));
    }
    if !overridden.is_empty() {
        return Decision::Proceed(Some(format!(
            "keel: resuming session {session} with {} given on the command line instead of the recorded {}",
            overridden
                .iter()
                .map(|(now, _)| format!("-c {now}"))
                .collect::<Vec<_>>()
                .join(", "),
            overridden
                .iter()
                .map(|(_, then)| format!("-c {then}"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    if recorded.digest != running.digest {
        return Decision::Proceed(Some(format!(
            "keel: resuming session {session} under profile {}, whose config changed since the session recorded it (digest {} then, {} now)",
            running.name,
            short(&recorded.digest),
            short(&running.digest)
        )));
    }
    Decision::Proceed(None)
}

/// Whether some recorded layer is not in force in `running` (a recorded `-c` whose key the run
/// does not set, a recorded patch it did not apply with that digest), and the recorded `-c`
/// that an explicit one of the same key replaced (`(now, then)`).
fn compare(recorded: &ProfileIdentity, running: &ProfileIdentity) -> (bool, Vec<(String, String)>) {
    let key = |arg: &str| arg.split_once('=').map(|(k, _)| k.trim().to_owned());
    let mut missing = false;
    let mut overridden = Vec::new();
    for then in &recorded.overrides {
        let now = running
            .overrides
            .iter()
            .rev()
            .find(|a| key(a).is_some() && key(a) == key(then));
        match now {
            None => missing = true,
            Some(now) if now != then => overridden.push((now.clone(), then.clone())),
            Some(_) => {}
        }
    }
    missing |= recorded
        .patches
        .iter()
        .any(|p| !running.patches.contains(p));
    (missing, overridden)
}

/// The profile session `id` records, read through `keel.session` `profile`; `None` when it
/// records none or cannot be read here (the resume itself then reports why, as before).
pub async fn recorded(sessions: &SessionsClient, id: &str) -> Option<ProfileIdentity> {
    match sessions.profile(SessionRef::new(id)).await {
        Ok(answer) => answer.profile,
        Err(e) => {
            tracing::debug!(
                session = id,
                "no recorded profile: [{}] {}",
                e.code,
                e.message
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    fn id(name: &str, digest: &str) -> ProfileIdentity {
        ProfileIdentity {
            name: name.into(),
            digest: digest.into(),
            ..ProfileIdentity::default()
        }
    }

    fn inv(command: &str, running: Option<ProfileIdentity>, explicit: bool) -> DriverInvocation {
        DriverInvocation {
            command: command.into(),
            session_id: Some("S".into()),
            prompt: Some("go".into()),
            cwd: "/w".into(),
            profile: running.as_ref().map(|r| r.name.clone()).unwrap_or_default(),
            profile_identity: running,
            profile_explicit: explicit,
            options: Default::default(),
            stderr_is_terminal: Some(false),
        }
    }

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    // Issue 11 item 7: without --profile, a session recorded under another profile relaunches.
    #[test]
    fn item7_resume_without_profile_relaunches_under_the_recorded_one() {
        let d = decide(
            &inv("resume", Some(id("default", B)), false),
            Some(&id("headless", A)),
        );
        assert_eq!(
            d,
            Decision::Relaunch(Relaunch {
                profile: "headless".into(),
                reason: "session S was created with it".into(),
                ..Relaunch::default()
            })
        );
    }

    #[test]
    fn item7_an_explicit_other_profile_runs_and_says_so_in_one_line() {
        let d = decide(
            &inv("resume", Some(id("default", B)), true),
            Some(&id("headless", A)),
        );
        assert_eq!(
            d,
            Decision::Proceed(Some(
                "keel: resuming session S (recorded with profile headless, digest aaaaaaaaaaaa) under profile default (--profile)".into()
            ))
        );
    }

    #[test]
    fn item7_a_changed_config_of_the_same_profile_is_said_not_fatal() {
        for explicit in [false, true] {
            let Decision::Proceed(Some(line)) = decide(
                &inv("resume", Some(id("headless", B)), explicit),
                Some(&id("headless", A)),
            ) else {
                panic!("expected a note");
            };
            assert!(
                line.contains("config changed")
                    && line.contains("aaaaaaaaaaaa then, bbbbbbbbbbbb now"),
                "{line}"
            );
        }
    }

    #[test]
    fn item7_same_profile_no_record_an_old_kernel_or_run_change_nothing() {
        let same = id("headless", A);
        let none = Decision::Proceed(None);
        assert_eq!(
            decide(&inv("resume", Some(same.clone()), false), Some(&same)),
            none
        );
        assert_eq!(
            decide(&inv("resume", Some(id("default", B)), false), None),
            none
        );
        assert_eq!(decide(&inv("resume", None, false), Some(&same)), none);
        assert_eq!(
            decide(&inv("run", Some(id("default", B)), false), Some(&same)),
            none
        );
    }

    // Issue 23 item 3: recorded `-c` not in force relaunches with them; once in force, the
    // resume proceeds; an explicit other value of the same key wins and is said.
    #[test]
    fn item3_recorded_overrides_are_applied_again_and_an_explicit_one_wins() {
        let mut recorded = id("headless", A);
        recorded.overrides = vec!["llm-openai.base_url=http://a/v1".into()];
        let d = decide(
            &inv("resume", Some(id("headless", B)), false),
            Some(&recorded),
        );
        let Decision::Relaunch(r) = d else {
            panic!("expected a relaunch: {d:?}");
        };
        assert_eq!(r.profile, "headless");
        assert_eq!(r.overrides, recorded.overrides);

        let mut applied = recorded.clone();
        applied.digest = A.into();
        assert_eq!(
            decide(&inv("resume", Some(applied), false), Some(&recorded)),
            Decision::Proceed(None)
        );

        let mut other = id("headless", B);
        other.overrides = vec!["llm-openai.base_url=http://c/v1".into()];
        let Decision::Proceed(Some(line)) =
            decide(&inv("resume", Some(other), false), Some(&recorded))
        else {
            panic!("expected a note");
        };
        assert!(
            line.contains("-c llm-openai.base_url=http://c/v1")
                && line.contains("recorded -c llm-openai.base_url=http://a/v1"),
            "{line}"
        );
    }
}
