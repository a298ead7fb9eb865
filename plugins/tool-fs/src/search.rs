//! `glob` and `grep`: finding files by name and by content.
//!
//! Both walk with the `ignore` crate (the walker of ripgrep): `.gitignore` rules apply even
//! outside a git repository, hidden files are included (models look for `.github/…`), `.git`
//! itself is skipped, and the walk is sorted so results are stable. Output is capped at the
//! row's `max_results` with a note saying how many were left out.

use std::fs;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use ignore::{DirEntry, WalkBuilder};
use keel_plugin_api::services::tools::ToolResult;
use regex::Regex;
use serde::Deserialize;
use serde_json::json;

use crate::content::as_text;
use crate::error::{FsError, FsErrorCode, FsResult};
use keel_plugin_api::services::protected::{Protected, refuse_read};

use crate::path::readable_target;
use crate::tools::{FsTools, Scope};

/// Files above this size are not searched by `grep` (they are counted in a note).
const GREP_MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// Longest matching line shown, in characters.
const GREP_MAX_LINE_CHARS: usize = 500;

/// `glob` arguments.
#[derive(Debug, Deserialize)]
pub struct GlobArgs {
    /// Glob pattern.
    pub pattern: String,
    /// Search root.
    #[serde(default)]
    pub path: Option<String>,
}

/// `grep` arguments.
#[derive(Debug, Deserialize)]
pub struct GrepArgs {
    /// Regular expression.
    pub pattern: String,
    /// File or directory.
    #[serde(default)]
    pub path: Option<String>,
    /// File filter.
    #[serde(default)]
    pub glob: Option<String>,
}

fn matcher(pattern: &str) -> FsResult<GlobMatcher> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| FsError::invalid_args(format!("bad glob pattern: {e}")))
}

/// A directory to search from: resolved, existing, a directory.
fn search_root(scope: Scope<'_>, path: Option<&str>) -> FsResult<PathBuf> {
    let root = readable_target(scope, path.unwrap_or("."))?;
    let meta = fs::metadata(&root).map_err(|e| FsError::io(&root, &e))?;
    if !meta.is_dir() {
        return Err(FsError::fs(
            FsErrorCode::NotDirectory,
            format!("{} is not a directory", root.display()),
        ));
    }
    Ok(root)
}

/// The sorted walk shared by both tools: files only, `.git` and keel's home skipped (links are
/// not followed, so every path walked is under the canonical root), `.gitignore` honoured.
fn walk_files(root: &Path, protected: &[Protected]) -> impl Iterator<Item = DirEntry> {
    let protected = protected.to_vec();
    WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .filter_entry(move |e| {
            e.file_name() != ".git" && refuse_read(&protected, e.path()).is_none()
        })
        .sort_by_file_name(|a, b| a.cmp(b))
        .build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
}

/// Splits an absolute pattern into its literal directory prefix and the glob below it.
fn split_absolute(pattern: &str) -> (PathBuf, String) {
    let mut root = PathBuf::from("/");
    let mut rest: Vec<String> = Vec::new();
    for part in pattern.split('/').filter(|p| !p.is_empty()) {
        if rest.is_empty() && !part.contains(['*', '?', '[', '{']) {
            root.push(part);
        } else {
            rest.push(part.to_owned());
        }
    }
    // A fully literal pattern names a file: match its name inside its directory.
    if rest.is_empty()
        && let Some(name) = root.file_name().map(|n| n.to_string_lossy().into_owned())
    {
        root.pop();
        rest.push(name);
    }
    (root, rest.join("/"))
}

/// `glob`.
///
/// # Errors
/// `INVALID_ARGUMENTS` for a bad pattern; `FS_NOT_FOUND` / `FS_NOT_DIRECTORY` for the root.
pub fn glob(tools: &FsTools, scope: Scope<'_>, args: GlobArgs) -> FsResult<ToolResult> {
    let (root_arg, pattern) = if args.path.is_none() && args.pattern.starts_with('/') {
        let (root, rest) = split_absolute(&args.pattern);
        (Some(root.to_string_lossy().into_owned()), rest)
    } else {
        let p = args.pattern.trim_start_matches("./").to_owned();
        (args.path, p)
    };
    let m = matcher(&pattern)?;
    let root = search_root(scope, root_arg.as_deref())?;
    let mut hits: Vec<String> = walk_files(&root, scope.protected)
        .filter_map(|e| {
            let rel = e.path().strip_prefix(&root).ok()?.to_path_buf();
            m.is_match(&rel).then(|| rel.to_string_lossy().into_owned())
        })
        .collect();
    hits.sort();
    let count = hits.len();
    let cap = tools.config.max_results;
    let mut out = if hits.is_empty() {
        format!("No files under {} match {pattern}", root.display())
    } else {
        hits.truncate(cap);
        hits.join("\n")
    };
    if count > cap {
        out.push_str(&format!(
            "\n[showing {cap} of {count} matches; narrow the pattern]"
        ));
    }
    Ok(ToolResult {
        meta: Some(json!({
            "root": root.to_string_lossy(),
            "matches": count,
            "truncated": count > cap,
        })),
        ..ToolResult::ok(out)
    })
}

/// `grep`.
///
/// # Errors
/// `INVALID_ARGUMENTS` for a bad regex or glob; `FS_NOT_FOUND` for the path.
pub fn grep(tools: &FsTools, scope: Scope<'_>, args: GrepArgs) -> FsResult<ToolResult> {
    let re = Regex::new(&args.pattern)
        .map_err(|e| FsError::invalid_args(format!("bad regular expression: {e}")))?;
    let filter = args.glob.as_deref().map(matcher).transpose()?;
    let by_name = args.glob.as_deref().is_some_and(|g| !g.contains('/'));
    let target = readable_target(scope, args.path.as_deref().unwrap_or("."))?;
    let meta = fs::metadata(&target).map_err(|e| FsError::io(&target, &e))?;

    // (shown path, real path) of every file to search.
    let files: Vec<(String, PathBuf)> = if meta.is_dir() {
        walk_files(&target, scope.protected)
            .filter_map(|e| {
                let rel = e.path().strip_prefix(&target).ok()?.to_path_buf();
                let keep = match &filter {
                    None => true,
                    Some(f) if by_name => f.is_match(e.file_name()),
                    Some(f) => f.is_match(&rel),
                };
                keep.then(|| (rel.to_string_lossy().into_owned(), e.into_path()))
            })
            .collect()
    } else {
        vec![(args.path.unwrap_or_default(), target)]
    };

    let cap = tools.config.max_results;
    let mut lines: Vec<String> = Vec::new();
    let (mut matches, mut searched, mut skipped_large) = (0usize, 0usize, 0usize);
    for (shown, real) in &files {
        if fs::metadata(real).is_ok_and(|m| m.len() > GREP_MAX_FILE_BYTES) {
            skipped_large += 1;
            continue;
        }
        let Ok(bytes) = fs::read(real) else { continue };
        let Some(text) = as_text(&bytes) else {
            continue;
        };
        searched += 1;
        for (i, line) in text.lines().enumerate() {
            if !re.is_match(line) {
                continue;
            }
            matches += 1;
            if lines.len() < cap {
                lines.push(format!("{shown}:{}:{}", i + 1, clip(line)));
            }
        }
    }
    let mut out = if lines.is_empty() {
        String::from("No matches.")
    } else {
        lines.join("\n")
    };
    if matches > cap {
        out.push_str(&format!(
            "\n[showing {cap} of {matches} matching lines; narrow the pattern, path or glob]"
        ));
    }
    if skipped_large > 0 {
        out.push_str(&format!(
            "\n[{skipped_large} files above {GREP_MAX_FILE_BYTES} bytes were not searched]"
        ));
    }
    Ok(ToolResult {
        meta: Some(json!({
            "matches": matches,
            "files_searched": searched,
            "truncated": matches > cap,
        })),
        ..ToolResult::ok(out)
    })
}

fn clip(line: &str) -> String {
    match line.char_indices().nth(GREP_MAX_LINE_CHARS) {
        Some((cut, _)) => format!("{} […]", &line[..cut]),
        None => line.to_owned(),
    }
}
