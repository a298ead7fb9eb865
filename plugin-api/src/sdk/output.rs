//! What plugins print, and what the kernel must never print (SEC-03).
//!
//! A secret can reach the terminal two ways a plugin controls: its own tracing lines and the
//! text it writes to stdout/stderr. The kernel owns both streams (tracing is forwarded to its
//! subscriber), so it holds the redactions: each plugin may register `(needle, replacement)`
//! pairs, and the kernel applies all of them to every line it writes. Plugins that print go
//! through [`Context::write_stdout`] / [`Context::write_stderr`] so their output passes the
//! same redactions.

use abi_stable::std_types::{RStr, RString};

use super::context::Context;
use super::error::{Error, Result, from_abi};

impl Context {
    /// Replaces this plugin's output redactions (SEC-03): every `needle` is replaced by its
    /// `replacement` in each tracing line the kernel writes and in everything written through
    /// [`Context::write_stdout`] / [`Context::write_stderr`], for as long as the plugin is
    /// loaded. A host table without the function (not a keel kernel of this SDK's era) gives
    /// `UNSUPPORTED`.
    ///
    /// # Errors
    /// `UNSUPPORTED`; the kernel's refusal (disposed fiber).
    pub fn redact(&self, pairs: &[(String, String)]) -> Result<()> {
        let Some(redact) = self.api.redact() else {
            return Err(Error::coded(
                crate::codes::SdkCode::Unsupported,
                "this kernel's host table has no redact function",
            ));
        };
        let text = serde_json::to_string(pairs)?;
        from_abi(redact(self.fiber, RString::from(text)))
    }

    /// Writes to the process's stdout through the kernel's redactions. Plugins that print
    /// (drivers, commands) use this rather than `std::io::stdout`, so a secret never reaches
    /// the terminal (SEC-03). Falls back to a direct write when the host table lacks the
    /// function.
    ///
    /// # Errors
    /// The stream's I/O error.
    pub fn write_stdout(&self, text: &str) -> Result<()> {
        self.write_output(1, text)
    }

    /// [`Context::write_stdout`] for stderr.
    ///
    /// # Errors
    /// The stream's I/O error.
    pub fn write_stderr(&self, text: &str) -> Result<()> {
        self.write_output(2, text)
    }

    fn write_output(&self, stream: u8, text: &str) -> Result<()> {
        match self.api.write_output() {
            Some(write) => from_abi(write(self.fiber, stream, RStr::from(text))),
            None => write_stream(stream, text)
                .map_err(|e| Error::coded(crate::codes::ContractCode::Io, e.to_string())),
        }
    }
}

/// Writes `text` to stdout (`1`) or stderr (anything else) and flushes.
///
/// # Errors
/// The stream's I/O error.
pub fn write_stream(stream: u8, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    if stream == 1 {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.flush()
    } else {
        let mut err = std::io::stderr().lock();
        err.write_all(text.as_bytes())?;
        err.flush()
    }
}
