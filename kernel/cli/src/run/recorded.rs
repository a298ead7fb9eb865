//! What a session records of a run's layers beyond its profile, and how `keel resume` applies
//! it again (issue 23 item 3): the non-private `-c` arguments as given and the `--patch` files
//! with their digests ([`ProfileIdentity::overrides`], [`ProfileIdentity::patches`]).
//!
//! A conversation must never go to an endpoint the user did not choose for it: a session
//! created with `-c llm-openai.base_url=…` resumes against that URL without the `-c` repeated.
//! The driver asks for it with a [`Relaunch`] carrying what is missing; the kernel puts the
//! recorded `-c` before the command line's (so an explicit one of the same key wins) and the
//! recorded patches before the command line's, after checking each patch's digest: a file that
//! changed or vanished stops the resume (`RECORDED_PATCH_CHANGED`). Private values are never
//! recorded: a `-c` whose key names one is left out ([`recordable_override`]; `…_ref` keys are
//! references, kept), and a resolved credential never reaches this code.

use std::path::{Path, PathBuf};

use keel_config::{ConfigError, LayerKind, ResolvedProfile};
use keel_kernel::error::Result;
use keel_plugin_api::services::driver::{RecordedPatch, Relaunch, recordable_override};

use crate::ProfileArgs;

/// The recordable `-c` arguments of `args`, in order.
pub fn overrides(args: &ProfileArgs) -> Vec<String> {
    args.overrides
        .iter()
        .filter(|a| recordable_override(a))
        .cloned()
        .collect()
}

/// The `--patch` files `profile` applied: absolute path and digest of the bytes now.
pub fn patches(profile: &ResolvedProfile) -> Vec<RecordedPatch> {
    profile
        .layers
        .iter()
        .filter(|l| l.kind == LayerKind::Patch)
        .filter_map(|l| {
            let path = PathBuf::from(&l.source);
            let path = path.canonicalize().unwrap_or(path);
            let bytes = std::fs::read(&path).ok()?;
            Some(RecordedPatch {
                path: path.display().to_string(),
                digest: blake3::hash(&bytes).to_hex().to_string(),
            })
        })
        .collect()
}

/// `args` with `relaunch`'s recorded layers applied first: recorded `-c` whose key the
/// command line does not set, then the command line's; recorded patches (each checked), then
/// the command line's that are not among them.
pub fn apply(args: &ProfileArgs, relaunch: &Relaunch) -> Result<ProfileArgs> {
    let mut out = args.clone();
    let explicit: Vec<&str> = args.overrides.iter().filter_map(|a| key_of(a)).collect();
    out.overrides = relaunch
        .overrides
        .iter()
        .filter(|a| key_of(a).is_some_and(|k| !explicit.contains(&k)))
        .cloned()
        .chain(args.overrides.iter().cloned())
        .collect();
    let mut patches = Vec::new();
    for recorded in &relaunch.patches {
        check(recorded, &relaunch.reason)?;
        patches.push(PathBuf::from(&recorded.path));
    }
    for own in &args.patches {
        let same = own
            .canonicalize()
            .ok()
            .is_some_and(|p| patches.iter().any(|r| r == &p));
        if !same {
            patches.push(own.clone());
        }
    }
    out.patches = patches;
    Ok(out)
}

/// `ROW.KEY` of a `-c ROW.KEY=VALUE` argument.
fn key_of(arg: &str) -> Option<&str> {
    arg.split_once('=').map(|(k, _)| k.trim())
}

/// Refuses a recorded patch whose file changed or vanished.
fn check(recorded: &RecordedPatch, reason: &str) -> Result<()> {
    let path = Path::new(&recorded.path);
    let what = match std::fs::read(path) {
        Ok(bytes) if blake3::hash(&bytes).to_hex().as_str() == recorded.digest => return Ok(()),
        Ok(_) => "changed",
        Err(_) => "vanished",
    };
    Err(ConfigError::RecordedPatchChanged {
        path: path.to_path_buf(),
        reason: reason.to_owned(),
        what,
        recorded: recorded
            .digest
            .get(..12)
            .unwrap_or(&recorded.digest)
            .to_owned(),
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_override_of_the_same_key_wins() {
        let args = ProfileArgs {
            overrides: vec!["a.url=new".to_owned()],
            ..ProfileArgs::default()
        };
        let relaunch = Relaunch {
            overrides: vec!["a.url=old".to_owned(), "a.model=m".to_owned()],
            ..Relaunch::default()
        };
        let out = apply(&args, &relaunch).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.overrides, ["a.model=m", "a.url=new"]);
    }
}
