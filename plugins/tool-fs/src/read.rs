//! `read_file` and `list_dir`: the tools that look without changing anything.
//!
//! `read_file` streams the file once: every byte feeds the version hash (so the version is of
//! what was actually read, FS-04), each line is checked for text, and only the requested range
//! is kept. It reports `fs/observed` present@version, or absent when the file is missing, which
//! is what lets the policy allow a later write or edit (FS-02, FS-03).

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader};
use std::path::Path;

use keel_plugin_api::services::tools::ToolResult;
use serde::Deserialize;
use serde_json::json;

use crate::content::Versioner;
use crate::error::{FsError, FsErrorCode, FsResult};
use crate::hooks::Observation;
use crate::path::{readable_target, target_key};
use crate::tools::{FsTools, Scope};

/// Longest line shown, in characters; longer lines are cut with a marker.
const MAX_LINE_CHARS: usize = 2000;

/// `read_file` arguments.
#[derive(Debug, Deserialize)]
pub struct ReadArgs {
    /// Target path.
    pub path: String,
    /// First line (1-based).
    #[serde(default)]
    pub offset: Option<u64>,
    /// Line count.
    #[serde(default)]
    pub limit: Option<u64>,
}

/// `list_dir` arguments.
#[derive(Debug, Deserialize)]
pub struct ListArgs {
    /// Directory path.
    pub path: String,
}

/// The requested lines of one streamed read.
struct Window {
    text: String,
    first: u64,
    last: u64,
    total: u64,
    /// The output cap stopped the window early at this line.
    cut_at: Option<u64>,
    version: String,
}

/// `read_file`.
///
/// # Errors
/// `FS_NOT_FOUND`, `FS_NOT_REGULAR_FILE`, `FS_TOO_LARGE`, `FS_NOT_TEXT`, OS errors.
pub fn read_file(tools: &FsTools, scope: Scope<'_>, args: ReadArgs) -> FsResult<ToolResult> {
    if args.limit == Some(0) {
        return Err(FsError::invalid_args("limit must be at least 1"));
    }
    let target = readable_target(scope, &args.path)?;
    let key = target_key(&target);
    let observe_absent = || {
        tools
            .hooks
            .observed(scope.session_id, &key, &Observation::Absent)
    };
    // The session's editor, when it holds the file, is what the agent reads (issue 26 item 3).
    let from_editor = tools.hooks.editor_read(scope.session_id, &target);
    let size = match &from_editor {
        Some(Some(text)) => text.len() as u64,
        Some(None) => {
            observe_absent();
            let e = io::Error::from(io::ErrorKind::NotFound);
            return Err(FsError::io(&target, &e));
        }
        None => disk_size(&target, observe_absent)?,
    };
    let ranged = args.offset.is_some() || args.limit.is_some();
    let max = tools.config.max_read_bytes;
    if !ranged && size > max {
        return Err(FsError::fs(
            FsErrorCode::TooLarge,
            format!(
                "{} is {} bytes, above the {max}-byte limit; read it in parts with offset and limit",
                target.display(),
                size
            ),
        ));
    }
    let first = args.offset.unwrap_or(1).max(1);
    let window = match &from_editor {
        Some(Some(text)) => stream_window(&mut text.as_bytes(), first, args.limit, max),
        _ => File::open(&target)
            .map_err(WindowError::from)
            .and_then(|f| stream_window(&mut BufReader::new(f), first, args.limit, max)),
    };
    let window = match window {
        Ok(w) => w,
        Err(WindowError::NotText { version }) => {
            // The bytes were read: the observation is real even though they are not text.
            let obs = Observation::Present { version };
            tools.hooks.observed(scope.session_id, &key, &obs);
            return Err(FsError::fs(
                FsErrorCode::NotText,
                format!("{} is not UTF-8 text (binary content)", target.display()),
            ));
        }
        Err(WindowError::Io(e)) => {
            if e.kind() == io::ErrorKind::NotFound {
                observe_absent();
            }
            return Err(FsError::io(&target, &e));
        }
    };
    let obs = Observation::Present {
        version: window.version.clone(),
    };
    tools.hooks.observed(scope.session_id, &key, &obs);
    let mut out = window.text;
    if window.total == 0 {
        out.push_str("(empty file)");
    } else if first > window.total {
        out.push_str(&format!(
            "[offset {first} is past the end: the file has {} lines]",
            window.total
        ));
    } else if let Some(next) = window.cut_at {
        out.push_str(&format!(
            "[output limit of {max} bytes reached; {} more lines, continue with offset={next}]",
            window.total - next + 1
        ));
    } else if window.last < window.total {
        out.push_str(&format!(
            "[{} more lines; continue with offset={}]",
            window.total - window.last,
            window.last + 1
        ));
    }
    Ok(ToolResult {
        meta: Some(json!({
            "version": window.version,
            "total_lines": window.total,
            "first_line": window.first,
            "last_line": window.last,
        })),
        ..ToolResult::ok(out)
    })
}

/// The size of the regular file `target` on disk; `observe_absent` runs when it does not exist.
fn disk_size(target: &Path, observe_absent: impl Fn()) -> FsResult<u64> {
    let meta = match fs::metadata(target) {
        Ok(m) => m,
        Err(e) => {
            if e.kind() == io::ErrorKind::NotFound {
                observe_absent();
            }
            return Err(FsError::io(target, &e));
        }
    };
    if meta.is_dir() {
        return Err(FsError::fs(
            FsErrorCode::NotRegularFile,
            format!("{} is a directory; use list_dir", target.display()),
        ));
    }
    if !meta.is_file() {
        return Err(FsError::fs(
            FsErrorCode::NotRegularFile,
            format!("{} is not a regular file", target.display()),
        ));
    }
    Ok(meta.len())
}

enum WindowError {
    NotText { version: String },
    Io(io::Error),
}

impl From<io::Error> for WindowError {
    fn from(e: io::Error) -> Self {
        WindowError::Io(e)
    }
}

/// Reads the whole file once, hashing every byte and keeping lines `first..first+limit`,
/// numbered, until `max_bytes` of output.
fn stream_window(
    reader: &mut dyn BufRead,
    first: u64,
    limit: Option<u64>,
    max_bytes: u64,
) -> Result<Window, WindowError> {
    let mut version = Versioner::default();
    let mut line = Vec::new();
    let mut text = String::new();
    let (mut total, mut last, mut cut_at) = (0u64, 0u64, None);
    let mut not_text = false;
    let end = limit.map_or(u64::MAX, |l| first.saturating_add(l));
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        version.update(&line);
        total += 1;
        if not_text {
            continue;
        }
        let Some(s) = crate::content::as_text(&line) else {
            not_text = true;
            continue;
        };
        if total < first || total >= end || cut_at.is_some() {
            continue;
        }
        let shown = s.strip_suffix('\n').unwrap_or(s);
        let shown = shown.strip_suffix('\r').unwrap_or(shown);
        let rendered = render_line(total, shown);
        if last >= first && (text.len() + rendered.len()) as u64 > max_bytes {
            cut_at = Some(total);
            continue;
        }
        text.push_str(&rendered);
        last = total;
    }
    let version = version.finish();
    if not_text {
        return Err(WindowError::NotText { version });
    }
    Ok(Window {
        text,
        first: first.min(total.max(1)),
        last,
        total,
        cut_at,
        version,
    })
}

fn render_line(n: u64, line: &str) -> String {
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!("{n:>6}\t{} [line truncated]\n", &line[..cut]),
        None => format!("{n:>6}\t{line}\n"),
    }
}

/// `list_dir`.
///
/// # Errors
/// `FS_NOT_FOUND`, `FS_NOT_DIRECTORY`, OS errors.
pub fn list_dir(tools: &FsTools, scope: Scope<'_>, args: ListArgs) -> FsResult<ToolResult> {
    let target = readable_target(scope, &args.path)?;
    let meta = fs::metadata(&target).map_err(|e| FsError::io(&target, &e))?;
    if !meta.is_dir() {
        return Err(FsError::fs(
            FsErrorCode::NotDirectory,
            format!("{} is not a directory", target.display()),
        ));
    }
    let mut names = Vec::new();
    for entry in fs::read_dir(&target).map_err(|e| FsError::io(&target, &e))? {
        let entry = entry.map_err(|e| FsError::io(&target, &e))?;
        let mut name = entry.file_name().to_string_lossy().into_owned();
        // Follow symlinks so a link to a directory lists as one.
        if fs::metadata(entry.path()).is_ok_and(|m| m.is_dir()) {
            name.push('/');
        }
        names.push(name);
    }
    names.sort();
    let count = names.len();
    let cap = tools.config.max_results;
    let mut out = if names.is_empty() {
        String::from("(empty directory)")
    } else {
        names
            .iter()
            .take(cap)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    };
    if count > cap {
        out.push_str(&format!("\n[showing {cap} of {count} entries]"));
    }
    Ok(ToolResult {
        meta: Some(json!({ "entries": count, "truncated": count > cap })),
        ..ToolResult::ok(out)
    })
}
