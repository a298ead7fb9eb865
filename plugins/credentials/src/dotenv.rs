//! The two `.env` layers (`dotenv-cwd`, `dotenv-home`): read per call, parsed by `dotenvy`'s
//! iterator API, which yields pairs and never sets the process environment (SEC-09).
//!
//! Syntax is dotenvy's: `KEY=VALUE`, optional single/double quotes, `#` comments, an optional
//! `export ` prefix; `$VAR`/`${VAR}` substitution reads (never writes) the environment. The first
//! occurrence of a key wins, as with dotenvy's own loader. A missing file is an empty layer;
//! an unreadable or malformed one is `CREDENTIALS_FILE` naming the file and line, never quoting
//! the line (it may hold a secret).

use std::path::Path;

use keel_plugin_api::sdk::Error;
use keel_plugin_api::services::credentials::CredentialCode;

/// The `(key, value)` pairs of the `.env` at `path`, in file order (empty when it is missing).
///
/// # Errors
/// `CREDENTIALS_FILE` when the file cannot be read or does not parse.
pub fn read(path: &Path) -> Result<Vec<(String, String)>, Error> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(Error::coded(
                CredentialCode::File,
                format!("cannot read {}: {e}", path.display()),
            ));
        }
    };
    let mut pairs = Vec::new();
    for item in dotenvy::from_read_iter(text.as_bytes()) {
        match item {
            Ok(pair) => pairs.push(pair),
            Err(dotenvy::Error::LineParse(line, index)) => {
                let at =
                    line_number(&text, &line).map_or_else(String::new, |n| format!(" line {n}"));
                return Err(Error::coded(
                    CredentialCode::File,
                    format!(
                        "{}:{at}: malformed .env entry (column {})",
                        path.display(),
                        index + 1
                    ),
                ));
            }
            Err(e) => {
                // Other dotenvy errors (I/O, a substitution) carry no file content.
                return Err(Error::coded(
                    CredentialCode::File,
                    format!("{}: {e}", path.display()),
                ));
            }
        }
    }
    Ok(pairs)
}

/// The first non-empty value of `key` in `pairs` (first occurrence wins; empty is absent).
pub fn lookup(pairs: &[(String, String)], key: &str) -> Option<String> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .filter(|v| !v.is_empty())
}

/// The 1-based line on which the (trimmed) logical line `line` starts.
fn line_number(text: &str, line: &str) -> Option<usize> {
    let first = line.lines().next()?.trim();
    text.lines().position(|l| l.trim() == first).map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) -> std::path::PathBuf {
        let p = dir.join(".env");
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn b13_parses_quotes_comments_and_export() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "# comment\nA=plain\nexport B=\"double quoted\"\nC='single'\n\nD= # empty\n",
        );
        let pairs = read(&p).unwrap();
        assert_eq!(lookup(&pairs, "A").as_deref(), Some("plain"));
        assert_eq!(lookup(&pairs, "B").as_deref(), Some("double quoted"));
        assert_eq!(lookup(&pairs, "C").as_deref(), Some("single"));
        assert_eq!(lookup(&pairs, "D"), None, "empty is absent (SEC-07)");
        assert_eq!(lookup(&pairs, "E"), None);
    }

    #[test]
    fn missing_file_is_an_empty_layer() {
        let d = tempfile::tempdir().unwrap();
        assert!(read(&d.path().join(".env")).unwrap().is_empty());
    }

    #[test]
    fn sec_11_malformed_env_names_file_and_line_not_the_value() {
        let d = tempfile::tempdir().unwrap();
        let p = write(d.path(), "A=1\n# c\nB C=sk-secret-value\n");
        let e = read(&p).unwrap_err();
        assert_eq!(e.code, CredentialCode::File.code());
        let m = &e.message;
        assert!(m.contains(&p.display().to_string()), "{m}");
        assert!(m.contains("line 3"), "{m}");
        assert!(!m.contains("sk-secret-value"), "{m}");
    }
}
