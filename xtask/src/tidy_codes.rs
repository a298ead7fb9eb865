//! The codes rule of `cargo xtask tidy` (issue 24 item 3): no code is a free string.
//!
//! Every code keel's own code returns is a variant of a catalog (`error_codes!` in
//! `plugin-api`), built with `Error::coded` / `PluginError::coded` / `ToolResult::error` and
//! compared with `Error::is` or `==` on variants, so a misspelled code does not compile. What
//! the compiler cannot see is a code spelled as a string literal; this rule reads non-test
//! sources of `kernel/`, `plugin-api/` and `plugins/` and fails on
//!
//! - a string literal spelling any catalog code (`"SESSION_IO"`) outside its declaration
//!   line (`Io = "SESSION_IO", by …`) — wherever it stands: a constructor, a `const`, a `json!`
//!   field, a comparison;
//! - a SCREAMING_SNAKE literal in a code position even when no catalog has it (an invented
//!   code): the argument of `Error::new(` / `Error::received(` / `PluginError::received(` /
//!   `with_code(`, or the value after `code:` / `"code":` / `code ==`.
//!
//! Test code is exempt (`*_tests.rs`, `test_support.rs`-like files, `tests/` folders,
//! `#[cfg(test)]` items): tests compare
//! the wire text on purpose. A literal that is not a code although it spells one (a column
//! heading) carries `// tidy: not a code` on its line or the line before.

use std::collections::BTreeSet;

use keel_plugin_api::codes::CATALOG;

use crate::tidy_kernel::brace_delta;

/// Folders whose non-test sources may hold no free-string code.
pub const CODE_ROOTS: &[&str] = &["kernel", "plugin-api", "plugins"];

/// The marker that exempts one line.
const NOT_A_CODE: &str = "tidy: not a code";

/// What precedes a literal in a code position.
const CODE_POSITIONS: &[&str] = &[
    "Error::new(",
    "Error::received(",
    "PluginError::received(",
    "with_code(",
    "code:",
    "\"code\":",
    "code =",
    "code ==",
    "code !=",
];

/// The free-string codes of one file (`path:line`, message); none for test code.
pub fn problems(rel: &str, text: &str, known: &BTreeSet<&str>) -> Vec<(String, String)> {
    let top = rel.split('/').next().unwrap_or("");
    let file = rel.rsplit('/').next().unwrap_or("");
    if !CODE_ROOTS.contains(&top) || crate::tidy::is_test_file(rel) || file.contains("test") {
        return Vec::new();
    }
    free_codes(text, known)
        .into_iter()
        .map(|(line, message)| (format!("{rel}:{line}"), message))
        .collect()
}

/// Every wire code of every catalog.
pub fn catalog_codes() -> BTreeSet<&'static str> {
    CATALOG
        .iter()
        .flat_map(|set| set.codes.iter().map(|c| c.code))
        .collect()
}

/// `(line number, message)` for each free-string code in the non-test lines of `text`.
pub fn free_codes(text: &str, known: &BTreeSet<&str>) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut previous = "";
    for (n, line) in non_test(text) {
        let code_part = line.split("//").next().unwrap_or("");
        if line.contains(NOT_A_CODE)
            || previous.contains(NOT_A_CODE)
            || code_part.trim_start().starts_with("///")
        {
            previous = line;
            continue;
        }
        for (start, literal) in literals(code_part) {
            if !is_screaming(literal) || is_declaration(code_part, literal) {
                continue;
            }
            let before = code_part[..start].trim_end();
            let positioned = CODE_POSITIONS.iter().any(|p| before.ends_with(p))
                || (before.is_empty()
                    && CODE_POSITIONS
                        .iter()
                        .any(|p| p.ends_with('(') && previous.trim_end().ends_with(p)));
            if known.contains(literal) {
                found.push((
                    n,
                    format!(
                        "free-string code `\"{literal}\"`: use its catalog variant \
                         (`Error::coded(Catalog::Variant, …)`, `e.is(…)`, `Variant.as_str()`)"
                    ),
                ));
            } else if positioned {
                found.push((
                    n,
                    format!(
                        "code `\"{literal}\"` is in no catalog: declare it in an `error_codes!` \
                         set (plugin-api/src/codes/ or the service's module) and use the variant"
                    ),
                ));
            }
        }
        previous = line;
    }
    found
}

/// `(1-based line number, line)` of the lines outside `#[cfg(test)]` items.
pub fn non_test(text: &str) -> Vec<(usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut kept = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != "#[cfg(test)]" {
            kept.push((i + 1, lines[i]));
            i += 1;
            continue;
        }
        i += 1;
        let mut depth: i64 = 0;
        let mut opened = false;
        while i < lines.len() {
            let line = lines[i];
            i += 1;
            depth += brace_delta(line);
            opened |= line.contains('{');
            if (opened && depth <= 0) || (!opened && line.trim_end().ends_with(';')) {
                break;
            }
        }
    }
    kept
}

/// The plain string literals on one line: `(byte offset of the opening quote, contents)`.
fn literals(line: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' => {
                // Skip a char literal ('"', '\"'); a lifetime has no closing quote nearby.
                if bytes.get(i + 2) == Some(&b'\'') {
                    i += 3;
                } else if bytes.get(i + 1) == Some(&b'\\') && bytes.get(i + 3) == Some(&b'\'') {
                    i += 4;
                } else {
                    i += 1;
                }
            }
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                if let Some(text) = line.get(start + 1..i.min(bytes.len())) {
                    out.push((start, text));
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// `FS_NOT_FOUND`, `IO`: upper-case letters, digits and underscores, starting with a letter.
fn is_screaming(text: &str) -> bool {
    text.len() >= 2
        && text.starts_with(|c: char| c.is_ascii_uppercase())
        && text
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// The catalog's own line: `Variant = "CODE", by "…", retry …;`.
fn is_declaration(line: &str, literal: &str) -> bool {
    line.contains(&format!("= \"{literal}\", by \""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> BTreeSet<&'static str> {
        catalog_codes()
    }

    #[test]
    fn test_files_and_other_folders_are_exempt() {
        let planted = "let e = Error::received(\"SESSION_IO\", m);";
        assert_eq!(problems("plugins/x/src/lib.rs", planted, &known()).len(), 1);
        assert!(problems("plugins/x/src/lib_tests.rs", planted, &known()).is_empty());
        assert!(problems("plugins/x/src/test_support.rs", planted, &known()).is_empty());
        assert!(problems("plugins/x/tests/end.rs", planted, &known()).is_empty());
        assert!(problems("xtask/src/main.rs", planted, &known()).is_empty());
    }

    #[test]
    fn the_catalog_is_read() {
        let codes = known();
        assert!(codes.contains("INACTIVE_FIBER") && codes.contains("BUSY"));
    }

    #[test]
    fn a_planted_literal_fails() {
        let planted =
            "//! x\nfn f() -> Error {\n    Error::received(\"SESSION_IO\", \"disk\")\n}\n";
        let found = free_codes(planted, &known());
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, 3);
    }

    #[test]
    fn an_invented_code_in_a_code_position_fails() {
        for planted in [
            "let e = Error::new(\"NO_SUCH_THING\", \"x\");",
            "ToolResult::with_code(\"MADE_UP\", m)",
            "let e = PluginError::received(\n    \"MADE_UP\",\n    m);",
            "json!({ \"kind\": \"error\", \"code\": \"MADE_UP\" })",
            "if failure.code == \"MADE_UP\" {}",
        ] {
            assert!(!free_codes(planted, &known()).is_empty(), "{planted}");
        }
    }

    #[test]
    fn catalogs_tests_comments_and_other_literals_pass() {
        let fine = "\
Io = \"SESSION_IO\", by \"the store\", retry Later;
// a comment naming \"SESSION_IO\"
/// doc naming \"SESSION_IO\"
let path = \"PATH\";
let head = [\"PLUGIN\", \"ROW\"]; // tidy: not a code
#[cfg(test)]
mod tests {
    fn t() { assert_eq!(e.code, \"SESSION_IO\"); }
}
";
        assert_eq!(free_codes(fine, &known()), Vec::new());
    }
}
