//! The slash commands of `keel chat`: parsed here, run by the chat loop. A message that starts
//! with `/` and names no command is answered with the list (it never reaches the model); `//`
//! sends a message that starts with one `/`.

/// One parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slash {
    /// `/help`.
    Help,
    /// `/exit` (or `/quit`).
    Exit,
    /// `/clear`: close this session and start a new one.
    Clear,
    /// `/sessions`: the stored sessions, newest first.
    Sessions,
    /// `/resume ID`: continue another stored session here.
    Resume(String),
    /// `/fork`: continue in a copy of this session (the original stays as it is).
    Fork,
    /// `/compact`: fit the history to the model's window now.
    Compact,
    /// `/model [NAME]`: show, or switch the model of the next requests.
    Model(Option<String>),
    /// Anything else that starts with `/`.
    Unknown(String),
}

/// What `/help` and an unknown command print.
pub const HELP: &[(&str, &str)] = &[
    ("/help", "this list"),
    (
        "/exit",
        "close the session and leave (also Ctrl-D, or Ctrl-C twice)",
    ),
    ("/clear", "close this session and start a new one"),
    ("/sessions", "the stored sessions, newest first"),
    ("/resume ID", "continue a stored session"),
    ("/fork", "continue in a copy of this session"),
    ("/compact", "fit the history to the model's window now"),
    (
        "/model [NAME]",
        "show the model, or use NAME for the next requests",
    ),
];

/// The command `text` names, or `None` when it is a message for the model (`//x` is the
/// message `/x`).
pub fn parse(text: &str) -> Option<Slash> {
    let trimmed = text.trim();
    let rest = trimmed.strip_prefix('/')?;
    if rest.starts_with('/') {
        return None;
    }
    let mut words = rest.split_whitespace();
    let name = words.next().unwrap_or_default();
    let arg = words.next().map(str::to_owned);
    Some(match (name, arg) {
        ("help", _) => Slash::Help,
        ("exit" | "quit", _) => Slash::Exit,
        ("clear" | "new", _) => Slash::Clear,
        ("sessions", _) => Slash::Sessions,
        ("resume", Some(id)) => Slash::Resume(id),
        ("fork", _) => Slash::Fork,
        ("compact", _) => Slash::Compact,
        ("model", arg) => Slash::Model(arg),
        _ => Slash::Unknown(trimmed.to_owned()),
    })
}

/// A message for the model: `//x` → `/x`.
pub fn message(text: &str) -> String {
    match text.trim_start().strip_prefix("//") {
        Some(rest) => format!("/{rest}"),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_and_unknown_ones_are_kept() {
        assert_eq!(parse("hello"), None);
        assert_eq!(parse(" /help "), Some(Slash::Help));
        assert_eq!(parse("/resume s-1"), Some(Slash::Resume("s-1".into())));
        assert_eq!(parse("/resume"), Some(Slash::Unknown("/resume".into())));
        assert_eq!(parse("/model"), Some(Slash::Model(None)));
        assert_eq!(parse("/model m2"), Some(Slash::Model(Some("m2".into()))));
        assert_eq!(
            parse("/frobnicate"),
            Some(Slash::Unknown("/frobnicate".into()))
        );
        assert_eq!(parse("//etc/passwd is a file"), None);
        assert_eq!(message("//etc"), "/etc");
        assert_eq!(message("plain"), "plain");
    }
}
