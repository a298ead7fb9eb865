//! The kernel rules of `cargo xtask tidy` (issue 13 item 3): the kernel crate stays small enough
//! to read in an afternoon, and no kernel crate names a feature.
//!
//! - **Size**: the non-test lines of `kernel/src` (every physical line, comments and blank lines
//!   included, minus `*_tests.rs` files and `#[cfg(test)]` items) stay under
//!   [`KERNEL_LINE_BUDGET`]. Counting every line keeps the rule independent of how a reader
//!   counts: `wc -l` over the same files can only give more.
//! - **Feature words**: no non-test file under `kernel/` (the kernel, the `keel` binary, the
//!   config layers, the output guard) contains [`FEATURE_WORDS`], in code or in comments: the
//!   sandbox, the firewall and secrets are plugins, Claude Code's settings are the hooks row's
//!   (issue 24 item 4), and a kernel that names them has started
//!   to know them. The words are matched case-insensitively, as `grep -i` would.

/// The most non-test lines `kernel/src` may hold.
pub const KERNEL_LINE_BUDGET: usize = 4_000;

/// Words that name a feature the kernel must not know.
pub const FEATURE_WORDS: &[&str] = &[
    "bwrap",
    "bubblewrap",
    "landlock",
    "sandbox",
    "secret",
    "firewall",
    "claude",
];

/// Lines of `text` outside `#[cfg(test)]` items (the one filter, [`crate::tidy_codes::non_test`]:
/// an item is the attribute, the line that follows it, and — when that line opens a block —
/// everything to the brace that closes it).
pub fn non_test_lines(text: &str) -> usize {
    crate::tidy_codes::non_test(text).len()
}

/// Net `{` minus `}` on a line, outside string and char literals and `//` comments (good
/// enough for rustfmt-formatted code, which is all tidy reads).
pub(crate) fn brace_delta(line: &str) -> i64 {
    let mut delta = 0;
    let mut in_str = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if in_str => {
                chars.next();
            }
            '"' => in_str = !in_str,
            '\'' if !in_str => {
                // A char literal such as '{' (a lifetime has no closing quote two chars on).
                let mut ahead = chars.clone();
                if let (Some(_), Some('\'')) = (ahead.next(), ahead.next()) {
                    chars.next();
                    chars.next();
                }
            }
            '/' if !in_str && chars.peek() == Some(&'/') => break,
            '{' if !in_str => delta += 1,
            '}' if !in_str => delta -= 1,
            _ => {}
        }
    }
    delta
}

/// Each `(line number, word)` of [`FEATURE_WORDS`] in `text`, case-insensitively.
pub fn feature_words(text: &str) -> Vec<(usize, &'static str)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let lower = line.to_ascii_lowercase();
        for word in FEATURE_WORDS {
            if lower.contains(word) {
                found.push((n + 1, *word));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 13 item 3: test items do not count, whether a block or a one-line item.
    #[test]
    fn cfg_test_items_are_not_counted() {
        let text = "//! doc\nfn a() {\n    let s = \"}\";\n}\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() { let c = '{'; }\n}\n#[cfg(test)]\nmod support;\nfn b() {}\n";
        assert_eq!(non_test_lines(text), 5);
    }

    // Issue 13 item 2: code or comment, any case.
    #[test]
    fn feature_words_are_found_in_code_and_comments() {
        let text = "fn a() {}\n// the Sandbox plugin\nlet bwrap = 1;\n";
        assert_eq!(feature_words(text), [(2, "sandbox"), (3, "bwrap")]);
        assert!(feature_words("fn kernel() {}\n").is_empty());
    }
}
