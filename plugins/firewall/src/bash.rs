//! The fill for bash source (issue 10 item 9, SEC-02): in `shell`'s `command` an alias does
//! not become the value as text — a `'`, `"`, `` ` ``, `$(…)` or `;` in a value would break
//! the command or run — but a quoted expansion of the environment variable of the same name
//! (`sec_NAME`), which the tool sets to the value. bash expands a variable once and never
//! parses the result, so the program receives the exact bytes and nothing in them runs.
//!
//! The expansion must suit the alias's quoting context, which a small scanner tracks:
//!
//! | context | rewrite |
//! |---|---|
//! | unquoted (also inside `$(…)`, `` `…` ``, `$((…))`) | `"${sec_NAME}"` |
//! | `"…"` (and `$"…"`), an unquoted heredoc's body | `${sec_NAME}` |
//! | `'…'` | `'"${sec_NAME}"'` (close, expand, reopen) |
//! | `$'…'` | `'"${sec_NAME}"$'` |
//! | a quoted heredoc's body (`<<'EOF'`, `<<"EOF"`, `<<\EOF`) | refused: it cannot expand |
//!
//! An alias right after `$` or `${` is already an expansion of that variable and is left as
//! it is, as is every name that is not a stored secret and everything in a comment. The
//! scanner is not a full bash parser (a `case` pattern's `)` inside `$(…)`, arithmetic
//! outside `$((…))`), but a misjudged context can only quote the expansion wrongly (a split
//! word, or the literal text `${sec_NAME}`): the value itself is never in the source.

/// Why an alias cannot be filled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The alias is in the body of a heredoc whose delimiter is quoted, where bash expands
    /// nothing.
    QuotedHeredoc {
        /// The alias.
        alias: String,
        /// The heredoc's delimiter.
        delimiter: String,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::QuotedHeredoc { alias, delimiter } => write!(
                f,
                "{alias} is in the body of a quoted heredoc (<<'{delimiter}'), where bash \
                 expands nothing, so the secret cannot be passed there; nothing was run. Use an \
                 unquoted delimiter (<<{delimiter}) or pass {alias} outside the heredoc"
            ),
        }
    }
}

/// A quoting context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// Unquoted: the top level, `$(…)` (closing at depth 0), `` `…` ``, `$((…))`.
    Unquoted(Closer),
    /// `"…"`.
    Double,
    /// `'…'`.
    Single,
    /// `$'…'`.
    AnsiC,
}

/// What ends an unquoted frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closer {
    /// The end of the command.
    End,
    /// `)` at paren depth 0 (`$(…)`); the depth of nested `(`.
    Paren(u32),
    /// `))` (`$((…))`), where `<<` is a shift; the depth of nested `(`.
    Arith(u32),
    /// `` ` ``.
    Backtick,
}

/// A heredoc whose body starts at the next unquoted newline.
#[derive(Debug, Clone)]
struct Heredoc {
    delimiter: String,
    quoted: bool,
    strip_tabs: bool,
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The result of a rewrite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewritten {
    /// The command with each known alias replaced by its expansion.
    pub command: String,
    /// The secret names used, each once, in order of first use.
    pub names: Vec<String>,
}

/// The scanner's state over one command.
struct Scan<'a, F> {
    text: &'a str,
    bytes: &'a [u8],
    known: F,
    out: String,
    copied: usize,
    names: Vec<String>,
}

impl<F: Fn(&str) -> bool> Scan<'_, F> {
    /// If a known alias starts at `i` (after a non-alphanumeric byte, not after `$`/`${`),
    /// its end and name.
    fn alias_at(&self, i: usize) -> Option<(usize, &str)> {
        if !self.bytes[i..].starts_with(b"sec_") {
            return None;
        }
        let before = |n: usize| i.checked_sub(n).map(|j| self.bytes[j]);
        if before(1).is_some_and(|b| b.is_ascii_alphanumeric() || b == b'$')
            || (before(1) == Some(b'{') && before(2) == Some(b'$'))
        {
            return None;
        }
        let start = i + 4;
        let end = self.bytes[start..]
            .iter()
            .position(|&b| !is_name_byte(b))
            .map_or(self.bytes.len(), |n| start + n);
        let name = &self.text[start..end];
        (end > start && (self.known)(name)).then_some((end, name))
    }

    /// Replaces `[i, end)` (the alias `name`) with `expansion` built around `${sec_NAME}`.
    fn replace(&mut self, i: usize, end: usize, name: &str, before: &str, after: &str) {
        self.out.push_str(&self.text[self.copied..i]);
        self.out.push_str(before);
        self.out.push_str("${sec_");
        self.out.push_str(name);
        self.out.push('}');
        self.out.push_str(after);
        self.copied = end;
        if !self.names.iter().any(|n| n == name) {
            self.names.push(name.to_owned());
        }
    }

    /// Reads a heredoc operator's delimiter word starting at `i`; returns it and its end.
    fn delimiter(&self, mut i: usize) -> (Heredoc, usize) {
        let strip_tabs = self.bytes.get(i) == Some(&b'-');
        if strip_tabs {
            i += 1;
        }
        while matches!(self.bytes.get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        let mut word = Vec::new();
        let mut quoted = false;
        let mut quote: Option<u8> = None;
        while let Some(&b) = self.bytes.get(i) {
            match quote {
                Some(q) if b == q => {
                    quote = None;
                }
                Some(_) => word.push(b),
                None => match b {
                    b'\'' | b'"' => {
                        quoted = true;
                        quote = Some(b);
                    }
                    b'\\' => {
                        quoted = true;
                        i += 1;
                        if let Some(&n) = self.bytes.get(i) {
                            word.push(n);
                        }
                    }
                    b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'<' | b'>' | b'(' | b')' => break,
                    _ => word.push(b),
                },
            }
            i += 1;
        }
        let delimiter = String::from_utf8_lossy(&word).into_owned();
        (
            Heredoc {
                delimiter,
                quoted,
                strip_tabs,
            },
            i,
        )
    }

    /// Scans the bodies of `pending` starting at `i` (just after a newline); returns the index
    /// after the last body.
    fn bodies(&mut self, pending: &[Heredoc], mut i: usize) -> Result<usize, Refusal> {
        for doc in pending {
            while i < self.bytes.len() {
                let line_end = self.bytes[i..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(self.bytes.len(), |n| i + n);
                let line = &self.text[i..line_end];
                let line = if doc.strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    line
                };
                if line == doc.delimiter {
                    i = (line_end + 1).min(self.bytes.len());
                    break;
                }
                let mut j = i;
                while j < line_end {
                    if let Some((end, name)) = self.alias_at(j) {
                        if doc.quoted {
                            return Err(Refusal::QuotedHeredoc {
                                alias: format!("sec_{name}"),
                                delimiter: doc.delimiter.clone(),
                            });
                        }
                        let name = name.to_owned();
                        self.replace(j, end, &name, "", "");
                        j = end;
                    } else if self.bytes[j] == b'\\' {
                        j += 2;
                    } else {
                        j += 1;
                    }
                }
                i = (line_end + 1).min(self.bytes.len());
            }
        }
        Ok(i)
    }
}

/// `command` with every alias whose name `known` accepts rewritten into a quoted expansion
/// of its variable, or `None` when there is none.
///
/// # Errors
/// [`Refusal`] when an alias stands where no expansion can reach.
pub fn rewrite(command: &str, known: impl Fn(&str) -> bool) -> Result<Option<Rewritten>, Refusal> {
    if !command.contains("sec_") {
        return Ok(None);
    }
    let mut s = Scan {
        text: command,
        bytes: command.as_bytes(),
        known,
        out: String::with_capacity(command.len() + 16),
        copied: 0,
        names: Vec::new(),
    };
    let mut stack = vec![Frame::Unquoted(Closer::End)];
    let mut pending: Vec<Heredoc> = Vec::new();
    let mut i = 0;
    let n = s.bytes.len();
    while i < n {
        let frame = *stack.last().unwrap_or(&Frame::Unquoted(Closer::End));
        let b = s.bytes[i];
        let next = s.bytes.get(i + 1).copied();
        if let Some((end, name)) = s.alias_at(i) {
            let name = name.to_owned();
            let (before, after) = match frame {
                Frame::Unquoted(_) => ("\"", "\""),
                Frame::Double => ("", ""),
                Frame::Single => ("'\"", "\"'"),
                Frame::AnsiC => ("'\"", "\"$'"),
            };
            s.replace(i, end, &name, before, after);
            i = end;
            continue;
        }
        match frame {
            Frame::Single => {
                if b == b'\'' {
                    stack.pop();
                }
                i += 1;
            }
            Frame::AnsiC => match b {
                b'\\' => i += 2,
                b'\'' => {
                    stack.pop();
                    i += 1;
                }
                _ => i += 1,
            },
            Frame::Double => match (b, next) {
                (b'\\', Some(b'$' | b'`' | b'"' | b'\\' | b'\n')) => i += 2,
                (b'"', _) => {
                    stack.pop();
                    i += 1;
                }
                (b'$', Some(b'(')) => {
                    let (frame, len) = substitution(&s.bytes[i..]);
                    stack.push(frame);
                    i += len;
                }
                (b'`', _) => {
                    stack.push(Frame::Unquoted(Closer::Backtick));
                    i += 1;
                }
                _ => i += 1,
            },
            Frame::Unquoted(closer) => {
                match (b, next) {
                    (b'\\', _) => i += 2,
                    (b'\'', _) => {
                        stack.push(Frame::Single);
                        i += 1;
                    }
                    (b'"', _) => {
                        stack.push(Frame::Double);
                        i += 1;
                    }
                    (b'$', Some(b'\'')) => {
                        stack.push(Frame::AnsiC);
                        i += 2;
                    }
                    (b'$', Some(b'"')) => {
                        stack.push(Frame::Double);
                        i += 2;
                    }
                    (b'$', Some(b'(')) => {
                        let (frame, len) = substitution(&s.bytes[i..]);
                        stack.push(frame);
                        i += len;
                    }
                    (b'`', _) => {
                        if closer == Closer::Backtick {
                            stack.pop();
                        } else {
                            stack.push(Frame::Unquoted(Closer::Backtick));
                        }
                        i += 1;
                    }
                    (b'(', _) => {
                        if let Some(Frame::Unquoted(Closer::Paren(d) | Closer::Arith(d))) =
                            stack.last_mut()
                        {
                            *d += 1;
                        }
                        i += 1;
                    }
                    (b')', _) => {
                        match stack.last_mut() {
                            Some(Frame::Unquoted(Closer::Paren(0))) => {
                                stack.pop();
                            }
                            Some(Frame::Unquoted(Closer::Arith(0))) if next == Some(b')') => {
                                stack.pop();
                                i += 1;
                            }
                            Some(Frame::Unquoted(Closer::Paren(d) | Closer::Arith(d))) => {
                                *d = d.saturating_sub(1);
                            }
                            _ => {}
                        }
                        i += 1;
                    }
                    (b'#', _)
                        if i == 0
                            || matches!(
                                s.bytes[i - 1],
                                b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(' | b')'
                            ) =>
                    {
                        // A comment, to the end of the line (the newline is scanned).
                        i = s.bytes[i..]
                            .iter()
                            .position(|&c| c == b'\n')
                            .map_or(n, |p| i + p);
                    }
                    (b'<', Some(b'<')) if !matches!(closer, Closer::Arith(_)) => {
                        if s.bytes.get(i + 2) == Some(&b'<') {
                            i += 3; // a here-string: its word is scanned as usual
                        } else {
                            let (doc, end) = s.delimiter(i + 2);
                            if !doc.delimiter.is_empty() {
                                pending.push(doc);
                            }
                            i = end;
                        }
                    }
                    (b'\n', _) if !pending.is_empty() => {
                        let docs = std::mem::take(&mut pending);
                        i = s.bodies(&docs, i + 1)?;
                    }
                    _ => i += 1,
                }
            }
        }
    }
    if s.names.is_empty() {
        return Ok(None);
    }
    s.out.push_str(&command[s.copied..]);
    Ok(Some(Rewritten {
        command: s.out,
        names: s.names,
    }))
}

/// At `$(`: the frame it opens (a command substitution, or `$((` arithmetic) and how many
/// bytes the opener takes.
fn substitution(at: &[u8]) -> (Frame, usize) {
    if at.get(2) == Some(&b'(') {
        (Frame::Unquoted(Closer::Arith(0)), 3)
    } else {
        (Frame::Unquoted(Closer::Paren(0)), 2)
    }
}

#[cfg(test)]
#[path = "bash_tests.rs"]
mod tests;
