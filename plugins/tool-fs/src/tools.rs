//! The six tools as the model sees them (ARCHITECTURE §8: names and argument names are a
//! public contract) and the dispatcher from a [`ToolInvocation`] to the right body.
//!
//! [`FsTools`] holds everything a body needs — config, the decision/observation hooks, the
//! per-target locks — and is plain Rust, so tests drive it directly with real files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_plugin_api::services::protected::{Protected, protected_paths};
use keel_plugin_api::services::sandbox::{
    EscalationRequest, JUSTIFICATION_ARG, SANDBOX_PERMISSIONS_ARG, SandboxMode,
    escalation_parameters,
};
use keel_plugin_api::services::tools::{ToolCode, ToolDefinition, ToolInvocation, ToolResult};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::error::{FsError, FsResult};
use crate::hooks::FsHooks;
use crate::mutate::{self, TargetLocks};
use crate::{read, search};

/// The row config.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FsConfig {
    /// A whole-file `read_file` above this size is refused with `FS_TOO_LARGE`; it also caps
    /// the text one ranged read returns.
    #[serde(default = "default_max_read_bytes")]
    #[schemars(range(min = 1))]
    pub max_read_bytes: u64,
    /// Most entries `list_dir` and `glob` return, and most lines `grep` returns.
    #[serde(default = "default_max_results")]
    #[schemars(range(min = 1))]
    pub max_results: usize,
}

fn default_max_read_bytes() -> u64 {
    262_144
}

fn default_max_results() -> usize {
    500
}

impl Default for FsConfig {
    fn default() -> Self {
        FsConfig {
            max_read_bytes: default_max_read_bytes(),
            max_results: default_max_results(),
        }
    }
}

/// Who is calling and where relative paths start.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// Owner session (observation state is keyed by it).
    pub session_id: &'a str,
    /// The session's working root.
    pub cwd: &'a Path,
    /// The call (an escalation grant is per call, SBX-08).
    pub call_id: &'a str,
    /// The sandbox mode the call asks for (`sandbox_permissions`), when it names one.
    pub mode: Option<SandboxMode>,
    /// keel's own paths, which no call reads or writes (whatever the sandbox mode).
    pub protected: &'a [Protected],
}

/// The file tools: config, hooks and locks shared by every call.
pub struct FsTools {
    pub(crate) config: FsConfig,
    pub(crate) hooks: Arc<dyn FsHooks>,
    pub(crate) locks: TargetLocks,
    /// `$KEEL_HOME`: hidden from every call (ARCHITECTURE §9).
    pub(crate) keel_home: Option<PathBuf>,
}

impl std::fmt::Debug for FsTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FsTools")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl FsTools {
    /// Tools deciding and observing through `hooks`.
    pub fn new(config: FsConfig, hooks: Arc<dyn FsHooks>) -> Self {
        FsTools {
            config,
            hooks,
            locks: TargetLocks::default(),
            keel_home: None,
        }
    }

    /// Keeps `keel_home` out of every call's reach (and the project's `.keel/` read-only).
    #[must_use]
    pub fn with_keel_home(mut self, keel_home: PathBuf) -> Self {
        self.keel_home = Some(keel_home);
        self
    }

    /// Runs one call. Never fails: every failure is an error result with a code.
    pub fn execute(&self, call: &ToolInvocation) -> ToolResult {
        let mode = match EscalationRequest::from_args(&call.args) {
            Ok(e) => e.map(|e| e.mode),
            Err(message) => return FsError::invalid_args(message).into_result(),
        };
        let protected = protected_paths(self.keel_home.as_deref(), Path::new(&call.cwd));
        let scope = Scope {
            session_id: &call.session_id,
            cwd: Path::new(&call.cwd),
            call_id: &call.call_id,
            mode,
            protected: &protected,
        };
        let mut args = call.args.clone();
        // Read here and by the sandbox; the tools' own argument types do not carry them.
        if let Some(obj) = args.as_object_mut() {
            obj.remove(SANDBOX_PERMISSIONS_ARG);
            obj.remove(JUSTIFICATION_ARG);
        }
        let args = &args;
        let outcome = match call.name.as_str() {
            "read_file" => parse(args).and_then(|a| read::read_file(self, scope, a)),
            "list_dir" => parse(args).and_then(|a| read::list_dir(self, scope, a)),
            "write_file" => parse(args).and_then(|a| mutate::write_file(self, scope, a)),
            "edit_file" => parse(args).and_then(|a| mutate::edit_file(self, scope, a)),
            "glob" => parse(args).and_then(|a| search::glob(self, scope, a)),
            "grep" => parse(args).and_then(|a| search::grep(self, scope, a)),
            other => Err(FsError {
                code: ToolCode::UnknownTool.code(),
                message: format!("this provider has no tool named '{other}'"),
            }),
        };
        outcome.unwrap_or_else(FsError::into_result)
    }
}

fn parse<T: DeserializeOwned>(args: &serde_json::Value) -> FsResult<T> {
    serde_json::from_value(args.clone()).map_err(|e| FsError::invalid_args(e.to_string()))
}

fn tool(name: &str, description: &str, parameters: serde_json::Value) -> ToolDefinition {
    ToolDefinition {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters,
        parallel_safe: false,
        mutating: false,
        child_only: false,
    }
}

/// The six definitions, as registered with `keel.tools`. The mutating ones accept the
/// sandbox's escalation arguments (SBX-08: shell and file tools share the vocabulary).
pub fn definitions() -> Vec<ToolDefinition> {
    let mut defs = base_definitions();
    for def in defs.iter_mut().filter(|d| d.mutating) {
        if let (Some(props), serde_json::Value::Object(extra)) = (
            def.parameters["properties"].as_object_mut(),
            escalation_parameters(),
        ) {
            props.extend(extra);
        }
    }
    defs
}

fn base_definitions() -> Vec<ToolDefinition> {
    let path_desc = "File path, absolute or relative to the working directory.";
    vec![
        ToolDefinition {
            parallel_safe: true,
            ..tool(
                "read_file",
                "Read a UTF-8 text file. Lines come back numbered like `cat -n` (line number, \
                 tab, text); the numbers are not part of the file. Files above the size limit \
                 must be read in ranges with `offset` (first line, 1-based) and `limit` (line \
                 count); a note says when more lines remain. Binary files are refused. Read a \
                 file before you edit or overwrite it.",
                json!({
                    "type": "object",
                    "properties": {
                        "path": { "type": "string", "description": path_desc },
                        "offset": { "type": "integer", "minimum": 1,
                                    "description": "First line to return (1-based). Default 1." },
                        "limit": { "type": "integer", "minimum": 1,
                                   "description": "Number of lines to return. Default: to the end." }
                    },
                    "required": ["path"],
                    "additionalProperties": false
                }),
            )
        },
        ToolDefinition {
            mutating: true,
            child_only: false,
            ..tool(
                "write_file",
                "Write a whole file, creating it and its parent directories if needed. To \
                 replace an existing file you must have read its current version with \
                 read_file first (otherwise FS_NOT_OBSERVED); if it changed since you read it \
                 the write fails with FS_STALE_VERSION and you should read it again. Prefer \
                 edit_file for changes to part of a file.",
                json!({
                    "type": "object",
                    "properties": {
                        "path": { "type": "string", "description": path_desc },
                        "content": { "type": "string", "description": "The complete new file content." }
                    },
                    "required": ["path", "content"],
                    "additionalProperties": false
                }),
            )
        },
        ToolDefinition {
            mutating: true,
            child_only: false,
            ..tool(
                "edit_file",
                "Replace an exact literal string in a text file (no regex, whitespace \
                 matters). Read the file with read_file first. `old_string` must occur exactly \
                 once unless `replace_all` is true: include enough surrounding lines to make \
                 it unique (FS_AMBIGUOUS_EDIT otherwise; FS_EDIT_NOT_FOUND when it does not \
                 occur). Do not include the line-number prefixes read_file shows.",
                json!({
                    "type": "object",
                    "properties": {
                        "path": { "type": "string", "description": path_desc },
                        "old_string": { "type": "string", "minLength": 1,
                                        "description": "Exact text to replace." },
                        "new_string": { "type": "string", "description": "Replacement text." },
                        "replace_all": { "type": "boolean",
                                         "description": "Replace every occurrence. Default false." }
                    },
                    "required": ["path", "old_string", "new_string"],
                    "additionalProperties": false
                }),
            )
        },
        ToolDefinition {
            parallel_safe: true,
            ..tool(
                "list_dir",
                "List a directory's entries, sorted by name; directories end with `/`.",
                json!({
                    "type": "object",
                    "properties": {
                        "path": { "type": "string", "description": "Directory, absolute or relative to the working directory." }
                    },
                    "required": ["path"],
                    "additionalProperties": false
                }),
            )
        },
        ToolDefinition {
            parallel_safe: true,
            ..tool(
                "glob",
                "Find files whose path matches a glob pattern, relative to `path` (default: \
                 the working directory). `*` and `?` stay within one path segment, `**` crosses \
                 directories, `{a,b}` alternates: `*.rs` matches only at the top level, \
                 `**/*.rs` everywhere. Skips .git and files ignored by .gitignore. Results are \
                 sorted relative paths, capped with a note.",
                json!({
                    "type": "object",
                    "properties": {
                        "pattern": { "type": "string", "minLength": 1, "description": "Glob, e.g. `src/**/*.rs`." },
                        "path": { "type": "string", "description": "Directory to search from. Default: the working directory." }
                    },
                    "required": ["pattern"],
                    "additionalProperties": false
                }),
            )
        },
        ToolDefinition {
            parallel_safe: true,
            ..tool(
                "grep",
                "Search file contents with a regular expression (Rust regex syntax, matched \
                 per line). Prints `path:line:text` for each matching line, capped with a \
                 note. Searches `path` (a file or a directory, default: the working \
                 directory) recursively, skipping binary files, .git and .gitignore'd files. \
                 `glob` narrows the files: `*.rs` matches file names, a pattern with `/` \
                 matches paths relative to `path`.",
                json!({
                    "type": "object",
                    "properties": {
                        "pattern": { "type": "string", "minLength": 1, "description": "Regular expression, e.g. `fn\\s+main`." },
                        "path": { "type": "string", "description": "File or directory to search. Default: the working directory." },
                        "glob": { "type": "string", "description": "Only search files matching this glob, e.g. `*.py`." }
                    },
                    "required": ["pattern"],
                    "additionalProperties": false
                }),
            )
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::NoPolicy;

    // ARCHITECTURE §8: the names, argument names and flags are the public contract.
    #[test]
    fn definitions_match_the_public_contract() {
        let defs = definitions();
        let shape: Vec<(&str, Vec<&str>, bool, bool)> = defs
            .iter()
            .map(|d| {
                let props = d.parameters["properties"].as_object().unwrap();
                (
                    d.name.as_str(),
                    props.keys().map(String::as_str).collect(),
                    d.parallel_safe,
                    d.mutating,
                )
            })
            .collect();
        assert_eq!(
            shape,
            vec![
                ("read_file", vec!["path", "offset", "limit"], true, false),
                // SBX-08: the mutating tools take the sandbox's escalation arguments.
                (
                    "write_file",
                    vec!["path", "content", "sandbox_permissions", "justification"],
                    false,
                    true
                ),
                (
                    "edit_file",
                    vec![
                        "path",
                        "old_string",
                        "new_string",
                        "replace_all",
                        "sandbox_permissions",
                        "justification"
                    ],
                    false,
                    true
                ),
                ("list_dir", vec!["path"], true, false),
                ("glob", vec!["pattern", "path"], true, false),
                ("grep", vec!["pattern", "path", "glob"], true, false),
            ]
        );
    }

    #[test]
    fn unknown_tool_and_bad_arguments_are_error_results() {
        let tools = FsTools::new(FsConfig::default(), Arc::new(NoPolicy));
        let call = |name: &str, args| ToolInvocation {
            name: name.into(),
            call_id: "c".into(),
            session_id: "s".into(),
            cwd: "/".into(),
            args,
            timeout_ms: 0,
        };
        let r = tools.execute(&call("shell", json!({})));
        assert_eq!(r.error.unwrap().code, "UNKNOWN_TOOL");
        let r = tools.execute(&call("read_file", json!({ "path": 3 })));
        assert_eq!(r.error.unwrap().code, "INVALID_ARGUMENTS");
    }
}
