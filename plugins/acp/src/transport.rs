//! The ACP connection's bytes: one JSON-RPC message per line on stdin and stdout.
//!
//! stdin is read on a thread of its own (a blocking read must not hold the kernel's runtime)
//! and handed to the connection as lines; a line that is not UTF-8 is passed on lossily (the
//! connection answers it as a parse error) and a line over [`MAX_LINE`] is replaced by one
//! that is not JSON, so the client gets an error and the server stays up. stdout goes through
//! the kernel's writers (`Context::write_stdout`, redacted like all output, SEC-03); nothing
//! else of this plugin writes to stdout — tracing goes to stderr.

use std::io::BufRead as _;

use futures::channel::mpsc;
use futures::{Sink, Stream};
use keel_plugin_api::prelude::Context;

/// The longest line read as a message (64 MiB): a longer one is answered as a parse error.
pub const MAX_LINE: usize = 64 << 20;

/// stdin as lines, read on the thread `keel-acp-stdin` until end of input.
///
/// # Errors
/// When the thread cannot start.
pub fn stdin_lines() -> std::io::Result<impl Stream<Item = std::io::Result<String>> + Send> {
    let (tx, rx) = mpsc::unbounded();
    std::thread::Builder::new()
        .name("keel-acp-stdin".to_owned())
        .spawn(move || {
            let stdin = std::io::stdin();
            let mut input = stdin.lock();
            for line in read_lines(&mut input) {
                if tx.unbounded_send(Ok(line)).is_err() {
                    return;
                }
            }
        })?;
    Ok(rx)
}

/// The lines of `input` (without their `\n` or `\r\n`), capped at [`MAX_LINE`]; a read error
/// ends the input like its end.
pub fn read_lines(input: &mut dyn std::io::BufRead) -> impl Iterator<Item = String> + '_ {
    let mut buf = Vec::new();
    std::iter::from_fn(move || {
        buf.clear();
        let mut limited = std::io::Read::take(&mut *input, MAX_LINE as u64 + 1);
        match limited.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => None,
            Ok(_) => {
                if buf.len() > MAX_LINE && buf.last() != Some(&b'\n') {
                    // Skip the rest of the over-long line, then answer it as garbage.
                    let mut rest = Vec::new();
                    let _ = input.read_until(b'\n', &mut rest);
                    return Some("{\"over-long line\"".to_owned());
                }
                while matches!(buf.last(), Some(b'\n' | b'\r')) {
                    buf.pop();
                }
                Some(String::from_utf8_lossy(&buf).into_owned())
            }
        }
    })
}

/// stdout as a sink of lines, each written with its newline through the kernel's writer.
pub fn stdout_lines(ctx: Context) -> impl Sink<String, Error = std::io::Error> + Send {
    futures::sink::unfold(ctx, async |ctx, line: String| {
        ctx.write_stdout(&format!("{line}\n"))
            .map_err(|e| std::io::Error::other(e.message))?;
        Ok::<_, std::io::Error>(ctx)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_trimmed_and_kept_when_not_utf8() {
        let mut input: &[u8] = b"{\"a\":1}\r\n\xff\xfe\nlast";
        let lines: Vec<String> = read_lines(&mut input).collect();
        assert_eq!(lines, ["{\"a\":1}", "\u{fffd}\u{fffd}", "last"]);
    }
}
