//! The file tools' failure vocabulary: the B11 `FsErrorCode` set, exactly, plus the two
//! pipeline codes a provider may also answer with (`INVALID_ARGUMENTS` for arguments that do
//! not fit the schema, `TOOL_FAILED` when the policy seam itself broke).
//!
//! Every failure ends as an error [`ToolResult`] the model reads (`Error [CODE]: message`);
//! messages say what to do next ("read it first"), because the reader is a model.

use std::io;
use std::path::Path;

use keel_plugin_api::codes::ContractCode;
use keel_plugin_api::services::tools::{ToolCode, ToolResult};

/// B11 `FsErrorCode`: one of these, never anything else, for a file-system failure. The set
/// is declared in plugin-api ([`FsCode`]) so `docs/errors.md` lists it.
pub use keel_plugin_api::services::tools::FsCode as FsErrorCode;

/// A failed call: a code and a message for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsError {
    /// The wire spelling of an [`FsErrorCode`], `INVALID_ARGUMENTS` or `TOOL_FAILED`.
    pub code: &'static str,
    /// What went wrong and what to do about it.
    pub message: String,
}

impl FsError {
    /// A B11 failure.
    pub fn fs(code: FsErrorCode, message: impl Into<String>) -> Self {
        FsError {
            code: code.code(),
            message: message.into(),
        }
    }

    /// Arguments that do not fit the tool's schema.
    pub fn invalid_args(message: impl Into<String>) -> Self {
        FsError {
            code: ContractCode::InvalidArguments.code(),
            message: message.into(),
        }
    }

    /// The decision seam failed (a policy listener errored or answered nonsense). The call
    /// fails closed: nothing was written.
    pub fn policy(message: impl Into<String>) -> Self {
        FsError {
            code: ToolCode::ToolFailed.code(),
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
        ToolResult::with_code(self.code, self.message)
    }
}

/// Result alias of the tool bodies.
pub type FsResult<T> = Result<T, FsError>;

#[cfg(test)]
mod tests {
    use super::*;
    use keel_plugin_api::codes::ErrorCode;
    use keel_plugin_api::services::tools::FsCode;

    #[test]
    fn codes_parse_back() {
        assert_eq!(FsCode::parse("FS_NOT_FOUND"), Some(FsCode::NotFound));
    }

    // B11: the code set is exactly the thirteen FsErrorCode values.
    #[test]
    fn b11_code_set_is_exact_and_round_trips() {
        let wire: Vec<&str> = FsErrorCode::ALL.iter().map(|c| c.code()).collect();
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
        for &c in FsErrorCode::ALL {
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
