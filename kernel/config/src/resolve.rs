//! Resolving a profile: finding its file and bundles in the config roots and applying every layer
//! in the CFG-02 order over an empty tree.
//!
//! Order: bundles (as the profile lists them) → the profile's own operations → the user layer
//! (`$KEEL_HOME/config.toml`) → the project layer (`<project>/.keel/config.toml`) → `--patch`
//! files → `-c` overrides. Launcher-only patches come later, through
//! [`ResolvedProfile::apply_launcher_patch`]. All `-c` arguments are parsed before any file is
//! read, so a malformed one is reported first.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::error::{ConfigError, Tainted};
use super::layer::{ParsedLayer, parse_layer};
use super::model::{ConfigSources, LayerKind, LayerRef, ProjectLayer, ResolvedProfile};
use super::overrides::Override;
use super::taint;
use super::trust::{self, TrustState};

/// Resolves `profile` (a name looked up as `profiles/<name>.toml` in each root, or a path when it
/// contains `/` or ends in `.toml`) and applies all layers from `sources`.
pub fn resolve_profile(
    profile: &str,
    sources: &ConfigSources,
) -> Result<ResolvedProfile, ConfigError> {
    let overrides = sources
        .overrides
        .iter()
        .map(|arg| Override::parse(arg))
        .collect::<Result<Vec<_>, _>>()?;

    let (name, path) = locate_profile(profile, &sources.roots)?;
    let parsed = parse_layer(&read(&path)?, &path, None)?;
    let mut resolved = ResolvedProfile::empty(name.clone(), path.clone());
    resolved.kernel.trust_project = sources.trust_project;
    resolved.description = parsed.description.clone();

    // 1. Bundles, in the order the profile lists them.
    let mut seen = HashSet::new();
    for bundle in &parsed.bundles {
        if !seen.insert(bundle.name.as_str()) {
            return Err(ConfigError::DuplicateBundle {
                bundle: bundle.name.clone(),
                profile: path,
                line: bundle.line,
            });
        }
        let candidates = candidates(&sources.roots, "bundles", &bundle.name);
        let Some(bundle_path) = candidates.iter().find(|p| p.is_file()) else {
            return Err(ConfigError::UnknownBundle {
                bundle: bundle.name.clone(),
                profile: path,
                line: bundle.line,
                searched: searched(&candidates),
            });
        };
        let kind = LayerKind::Bundle(bundle.name.clone());
        let ops = parse_layer(&read(bundle_path)?, bundle_path, Some(&kind))?.ops;
        resolved.apply_layer(layer_ref(kind, bundle_path), &ops)?;
        resolved.bundles.push(bundle.name.clone());
    }

    // 2. The profile's own operations.
    let ParsedLayer { ops, .. } = parsed;
    resolved.apply_layer(layer_ref(LayerKind::Profile(name), &path), &ops)?;

    // Issue 23 item 6: `--trust-project` vouches for the checkout, not for what a keel run
    // wrote into it since.
    if let (true, Some(home), Some(dir)) = (
        sources.trust_project,
        &sources.keel_home,
        &sources.project_dir,
    ) && let Some((path, by)) = taint::tainted_under(home, dir)?
    {
        return Err(tainted(path, by, "--trust-project", dir));
    }

    // 3. User layer, 4. project layer (each only if present; the same file is applied once).
    let user = sources
        .keel_home
        .as_ref()
        .map(|home| home.join("config.toml"));
    let project = sources
        .project_dir
        .as_ref()
        .map(|dir| dir.join(".keel").join("config.toml"));
    let mut optional = vec![(LayerKind::User, user.clone())];
    if !same_file(user.as_deref(), project.as_deref()) {
        optional.push((LayerKind::Project, project));
    }
    for (kind, file) in optional {
        let Some(file) = file.filter(|f| f.exists()) else {
            continue;
        };
        if kind != LayerKind::Project {
            apply_file(&mut resolved, kind, &file)?;
            continue;
        }
        // Read once: the digest the trust check compares is of exactly the bytes applied.
        let text = read(&file)?;
        let before = resolved.row_states();
        let ops = parse_layer(&text, &file, Some(&kind))?.ops;
        resolved.apply_layer(layer_ref(kind, &file), &ops)?;
        let dir = sources.project_dir.clone().unwrap_or_default();
        let dir = dir.canonicalize().unwrap_or(dir);
        let digest = blake3::hash(text.as_bytes()).to_hex().to_string();
        let trust = match (&sources.keel_home, sources.trust_project) {
            (_, true) => TrustState::Vouched,
            (Some(home), false) => trust::state(home, &dir, &digest)?,
            (None, false) => TrustState::Untrusted,
        };
        resolved.project = Some(ProjectLayer {
            dir,
            digest,
            before,
            after: resolved.row_states(),
            path: file,
            trust,
        });
    }

    // 5. `--patch` files, which must exist; a bare name is looked up like a profile.
    for patch in &sources.patches {
        let patch = locate_patch(patch, sources)?;
        if let Some(home) = &sources.keel_home
            && let Some(by) = taint::tainted_by(home, &patch)?
        {
            let dir = sources
                .project_dir
                .clone()
                .filter(|d| {
                    d.canonicalize()
                        .is_ok_and(|d| patch.canonicalize().is_ok_and(|p| p.starts_with(d)))
                })
                .or_else(|| patch.parent().map(Path::to_path_buf))
                .unwrap_or_default();
            return Err(tainted(patch, by, "--patch", &dir));
        }
        let Some(dir) = inside(&patch, sources) else {
            apply_file(&mut resolved, LayerKind::Patch, &patch)?;
            continue;
        };
        // A patch the workspace holds is the model's to write: like the project layer, it may
        // change guarded settings only when vouched for (issue 23 item 6).
        let text = read(&patch)?;
        let before = resolved.row_states();
        let ops = parse_layer(&text, &patch, Some(&LayerKind::Patch))?.ops;
        resolved.apply_layer(layer_ref(LayerKind::Patch, &patch), &ops)?;
        let trust = if sources.trust_project {
            TrustState::Vouched
        } else {
            TrustState::UntrustedPatch
        };
        resolved.workspace_patches.push(ProjectLayer {
            dir,
            digest: blake3::hash(text.as_bytes()).to_hex().to_string(),
            before,
            after: resolved.row_states(),
            path: patch,
            trust,
        });
    }

    // 6. `-c` overrides.
    for ov in &overrides {
        resolved.apply_override(ov)?;
    }
    Ok(resolved)
}

/// The workspace (canonical) when `file` lies inside it and not in a config root or
/// `$KEEL_HOME` (a shipped or user patch, even one run from the checkout or the dist tree).
fn inside(file: &Path, sources: &ConfigSources) -> Option<PathBuf> {
    let workspace = sources.project_dir.as_deref()?.canonicalize().ok()?;
    let file = file.canonicalize().ok()?;
    let mut known = sources.roots.iter().chain(sources.keel_home.iter());
    let configured = known.any(|r| r.canonicalize().is_ok_and(|r| file.starts_with(r)));
    (file.starts_with(&workspace) && !configured).then_some(workspace)
}

fn tainted(path: PathBuf, by: String, what: &'static str, dir: &Path) -> ConfigError {
    ConfigError::ProjectTainted(Box::new(Tainted {
        path: path.canonicalize().unwrap_or(path),
        by,
        what,
        dir: dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf()),
    }))
}

/// Finds the profile file and its name.
/// Whether `--profile` names a file (it contains `/` or ends in `.toml`) rather than a profile
/// looked up in the config roots.
pub fn names_a_file(profile: &str) -> bool {
    profile.contains('/') || profile.ends_with(".toml")
}

fn locate_profile(profile: &str, roots: &[PathBuf]) -> Result<(String, PathBuf), ConfigError> {
    if names_a_file(profile) {
        let path = PathBuf::from(profile);
        if !path.is_file() {
            return Err(ConfigError::ProfileNotFound { path });
        }
        let name = path
            .file_stem()
            .map_or_else(|| profile.to_owned(), |s| s.to_string_lossy().into_owned());
        return Ok((name, path));
    }
    let candidates = candidates(roots, "profiles", profile);
    match candidates.iter().find(|p| p.is_file()) {
        Some(path) => Ok((profile.to_owned(), path.clone())),
        None => Err(ConfigError::UnknownProfile {
            profile: profile.to_owned(),
            searched: searched(&candidates),
        }),
    }
}

/// The file a `--patch` argument names (issue 23 item 15). A path (it contains `/` or ends in
/// `.toml`) is itself and must exist. A bare name is `profiles/patches/<name>.toml` in each
/// config root in order, then in the user config root `$KEEL_HOME` — the shipped and the user's
/// patches, found from any directory, as `--profile` finds profiles.
pub fn locate_patch(patch: &Path, sources: &ConfigSources) -> Result<PathBuf, ConfigError> {
    let text = patch.to_string_lossy();
    if names_a_file(&text) || text.is_empty() {
        if !patch.exists() {
            return Err(ConfigError::MissingPatch {
                path: patch.to_path_buf(),
            });
        }
        return Ok(patch.to_path_buf());
    }
    let mut roots = sources.roots.clone();
    roots.extend(sources.keel_home.iter().cloned());
    let candidates = candidates(&roots, "profiles/patches", &text);
    match candidates.iter().find(|p| p.is_file()) {
        Some(path) => Ok(path.clone()),
        None => Err(ConfigError::UnknownPatch {
            patch: text.into_owned(),
            searched: searched(&candidates),
        }),
    }
}

/// `<root>/<dir>/<name>.toml` for each root, in order.
fn candidates(roots: &[PathBuf], dir: &str, name: &str) -> Vec<PathBuf> {
    roots
        .iter()
        .map(|root| root.join(dir).join(format!("{name}.toml")))
        .collect()
}

/// The candidates for an error message.
fn searched(candidates: &[PathBuf]) -> String {
    if candidates.is_empty() {
        return "no config roots".to_owned();
    }
    candidates
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn apply_file(
    resolved: &mut ResolvedProfile,
    kind: LayerKind,
    file: &Path,
) -> Result<(), ConfigError> {
    let ops = parse_layer(&read(file)?, file, Some(&kind))?.ops;
    resolved.apply_layer(layer_ref(kind, file), &ops)
}

fn layer_ref(kind: LayerKind, path: &Path) -> LayerRef {
    LayerRef::new(kind, path.display().to_string())
}

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|err| ConfigError::Io {
        path: path.to_path_buf(),
        message: err.to_string(),
    })
}

/// True when both paths exist and are the same file (e.g. `KEEL_HOME` is `<project>/.keel`).
fn same_file(a: Option<&Path>, b: Option<&Path>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => match (a.canonicalize(), b.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
#[path = "resolve_tests.rs"]
mod tests;
