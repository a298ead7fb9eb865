//! The file tools' failure vocabulary: the B11 `FsErrorCode` set, exactly, plus the two
//! pipeline codes a provider may also answer with (`INVALID_ARGUMENTS` for arguments that do
//! not fit the schema, `TOOL_FAILED` when the policy seam itself broke).
//!
//! Every failure ends as an error [`ToolResult`] the model reads (`Error [CODE]: message`);
//! messages say what to do next ("read it first"), because the reader is a model.

use std::io;
use std::path::Path;

use keel_plugin_api::services::tools::{ToolResult, codes};

/// B11 `FsErrorCode`: one of these, never anything else, for a file-system failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsErrorCode {
    /// The target does not exist.
    NotFound,
    /// A directory was expected.
    NotDirectory,
    /// The file is not UTF-8 text (NUL bytes or invalid UTF-8).
    NotText,
    /// A regular file was expected (a directory, socket, device …).
    NotRegularFile,
    /// The file is above the read limit and no range was given.
    TooLarge,
    /// The OS refused access.
    PermissionDenied,
    /// The sandbox refused the target (FS-06).
    SandboxDenied,
    /// Any other I/O failure.
    IoError,
    /// The target changed (or vanished) since the session read it.
    StaleVersion,
    /// The target exists but the session has not read it.
    NotObserved,
    /// `old_string` occurs more than once and `replace_all` was not set.
    AmbiguousEdit,
    /// `old_string` does not occur.
    EditNotFound,
    /// The operation was cancelled.
    Aborted,
}

impl FsErrorCode {
    /// Every code, in B11 order.
    pub const ALL: [FsErrorCode; 13] = [
        FsErrorCode::NotFound,
        FsErrorCode::NotDirectory,
        FsErrorCode::NotText,
        FsErrorCode::NotRegularFile,
        FsErrorCode::TooLarge,
        FsErrorCode::PermissionDenied,
        FsErrorCode::SandboxDenied,
        FsErrorCode::IoError,
        FsErrorCode::StaleVersion,
        FsErrorCode::NotObserved,
        FsErrorCode::AmbiguousEdit,
        FsErrorCode::EditNotFound,
        FsErrorCode::Aborted,
    ];

    /// The wire code.
    pub fn as_str(self) -> &'static str {
        match self {
            FsErrorCode::NotFound => "FS_NOT_FOUND",
            FsErrorCode::NotDirectory => "FS_NOT_DIRECTORY",
            FsErrorCode::NotText => "FS_NOT_TEXT",
            FsErrorCode::NotRegularFile => "FS_NOT_REGULAR_FILE",
            FsErrorCode::TooLarge => "FS_TOO_LARGE",
            FsErrorCode::PermissionDenied => "FS_PERMISSION_DENIED",
            FsErrorCode::SandboxDenied => "FS_SANDBOX_DENIED",
            FsErrorCode::IoError => "FS_IO_ERROR",
            FsErrorCode::StaleVersion => "FS_STALE_VERSION",
            FsErrorCode::NotObserved => "FS_NOT_OBSERVED",
            FsErrorCode::AmbiguousEdit => "FS_AMBIGUOUS_EDIT",
            FsErrorCode::EditNotFound => "FS_EDIT_NOT_FOUND",
            FsErrorCode::Aborted => "FS_ABORTED",
        }
    }

    /// Parses a wire code (a policy's `{"kind":"error","code"}` decision).
    pub fn parse(code: &str) -> Option<FsErrorCode> {
        FsErrorCode::ALL.into_iter().find(|c| c.as_str() == code)
    }
}

/// A failed call: a code and a message for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsError {
    /// An [`FsErrorCode`] wire code, `INVALID_ARGUMENTS` or `TOOL_FAILED`.
    pub code: &'static str,
    /// What went wrong and what to do about it.
    pub message: String,
}

impl FsError {
    /// A B11 failure.
    pub fn fs(code: FsErrorCode, message: impl Into<String>) -> Self {
        FsError {
            code: code.as_str(),
            message: message.into(),
        }
    }

    /// Arguments that do not fit the tool's schema.
    pub fn invalid_args(message: impl Into<String>) -> Self {
        FsError {
            code: codes::INVALID_ARGUMENTS,
            message: message.into(),
        }
    }

    /// The decision seam failed (a policy listener errored or answered nonsense). The call
    /// fails closed: nothing was written.
    pub fn policy(message: impl Into<String>) -> Self {
        FsError {
            code: codes::TOOL_FAILED,
            message: message.into(),
        }
    }

    /// Maps an OS error on `path` to the closest B11 code.
    pub fn io(path: &Path, e: &io::Error) -> Self {
        let shown = path.display();
        match e.kind() {
            io::ErrorKind::NotFound => {
                FsError::fs(FsErrorCode::NotFound, format!("{shown} does not exist"))
            }
            io::ErrorKind::PermissionDenied => FsError::fs(
                FsErrorCode::PermissionDenied,
                format!("permission denied: {shown}"),
            ),
            io::ErrorKind::NotADirectory => FsError::fs(
                FsErrorCode::NotDirectory,
                format!("a parent of {shown} is not a directory"),
            ),
            io::ErrorKind::IsADirectory => FsError::fs(
                FsErrorCode::NotRegularFile,
                format!("{shown} is a directory"),
            ),
            _ => FsError::fs(FsErrorCode::IoError, format!("{shown}: {e}")),
        }
    }

    /// The error result the model reads.
    pub fn into_result(self) -> ToolResult {
        ToolResult::error(self.code, self.message)
    }
}

/// Result alias of the tool bodies.
pub type FsResult<T> = Result<T, FsError>;

#[cfg(test)]
mod tests {
    use super::*;

    // B11: the code set is exactly the thirteen FsErrorCode values.
    #[test]
    fn b11_code_set_is_exact_and_round_trips() {
        let wire: Vec<&str> = FsErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(
            wire,
            [
                "FS_NOT_FOUND",
                "FS_NOT_DIRECTORY",
                "FS_NOT_TEXT",
                "FS_NOT_REGULAR_FILE",
                "FS_TOO_LARGE",
                "FS_PERMISSION_DENIED",
                "FS_SANDBOX_DENIED",
                "FS_IO_ERROR",
                "FS_STALE_VERSION",
                "FS_NOT_OBSERVED",
                "FS_AMBIGUOUS_EDIT",
                "FS_EDIT_NOT_FOUND",
                "FS_ABORTED",
            ]
        );
        for c in FsErrorCode::ALL {
            assert_eq!(FsErrorCode::parse(c.as_str()), Some(c));
        }
        assert_eq!(FsErrorCode::parse("FS_WHATEVER"), None);
    }

    #[test]
    fn io_errors_map_to_b11_codes() {
        let p = Path::new("/x");
        let code = |k| FsError::io(p, &io::Error::from(k)).code;
        assert_eq!(code(io::ErrorKind::NotFound), "FS_NOT_FOUND");
        assert_eq!(
            code(io::ErrorKind::PermissionDenied),
            "FS_PERMISSION_DENIED"
        );
        assert_eq!(code(io::ErrorKind::NotADirectory), "FS_NOT_DIRECTORY");
        assert_eq!(code(io::ErrorKind::IsADirectory), "FS_NOT_REGULAR_FILE");
        assert_eq!(code(io::ErrorKind::Other), "FS_IO_ERROR");
    }

    #[test]
    fn error_result_carries_the_code() {
        let r = FsError::fs(FsErrorCode::NotObserved, "read it first").into_result();
        assert!(r.is_error);
        assert_eq!(r.error.map(|e| e.code).as_deref(), Some("FS_NOT_OBSERVED"));
        assert_eq!(r.content, "Error [FS_NOT_OBSERVED]: read it first");
    }
}
