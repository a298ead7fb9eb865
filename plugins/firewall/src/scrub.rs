//! The outbound scrub (requirements SEC-01, SEC-03): every secret value, and its simple
//! encodings, becomes its alias in text bound for the model or the log. The encodings are the
//! ones a tool's output plausibly carries: standard and URL-safe base64 with and without
//! padding (of the value, and of the value plus a newline, as `echo $X | base64` prints),
//! percent-encoding (unreserved or `encodeURIComponent` sets, upper- and lower-case hex, `+`
//! for spaces) and hex (lower and upper case). All patterns are replaced in one
//! leftmost-longest pass, so a replacement is never re-scanned.
//!
//! Limits: values shorter than [`MIN_SCRUB_LEN`] bytes are not scrubbed (they would match
//! everywhere); base64 is matched at the value's own alignment only, so a value embedded in a
//! longer base64 blob (`user:pass` in a Basic header) is not found.

use std::collections::{BTreeMap, BTreeSet};

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};

use crate::error::{FirewallError, codes};
use crate::store::{SecretValue, alias};

/// Values shorter than this (in bytes) are not scrubbed.
pub const MIN_SCRUB_LEN: usize = 4;

fn hex(bytes: &[u8], upper: bool) -> String {
    let digits: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(digits[usize::from(b >> 4)]));
        out.push(char::from(digits[usize::from(b & 15)]));
    }
    out
}

fn percent(value: &str, keep: &[u8], upper: bool, plus_for_space: bool) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for &b in value.as_bytes() {
        if b.is_ascii_alphanumeric() || keep.contains(&b) {
            out.push(char::from(b));
        } else if b == b' ' && plus_for_space {
            out.push('+');
        } else {
            out.push('%');
            out.push_str(&hex(&[b], upper));
        }
    }
    out
}

/// The raw value and the encoded forms that are scrubbed (deduplicated; empty for a value
/// shorter than [`MIN_SCRUB_LEN`]).
pub fn encodings(value: &str) -> Vec<String> {
    if value.len() < MIN_SCRUB_LEN {
        return Vec::new();
    }
    let mut out = vec![value.to_owned()];
    let with_newline = format!("{value}\n");
    for bytes in [value.as_bytes(), with_newline.as_bytes()] {
        for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
            out.push(engine.encode(bytes));
        }
    }
    for upper in [true, false] {
        out.push(percent(value, b"-._~", upper, false));
        out.push(percent(value, b"-._~!*'()", upper, false));
        out.push(percent(value, b"-._~", upper, true));
        out.push(hex(value.as_bytes(), upper));
    }
    let mut seen = BTreeSet::new();
    out.retain(|e| seen.insert(e.clone()));
    out
}

/// Replaces secret values with their aliases.
pub struct Scrubber {
    matcher: Option<AhoCorasick>,
    /// Alias of each pattern, by pattern index.
    aliases: Vec<String>,
}

impl std::fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scrubber")
            .field("patterns", &self.aliases.len())
            .finish_non_exhaustive()
    }
}

impl Scrubber {
    /// A scrubber for `secrets`.
    ///
    /// # Errors
    /// `SECRETS_CORRUPT` if the matcher cannot be built (pathological sizes).
    pub fn new(secrets: &BTreeMap<String, SecretValue>) -> Result<Self, FirewallError> {
        let mut patterns = Vec::new();
        let mut aliases = Vec::new();
        for (name, value) in secrets {
            for e in encodings(value.expose()) {
                patterns.push(e);
                aliases.push(alias(name));
            }
        }
        let matcher = if patterns.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&patterns)
                    .map_err(|e| {
                        FirewallError::new(
                            codes::SECRETS_CORRUPT,
                            format!("cannot build the scrubber: {e}"),
                        )
                    })?,
            )
        };
        Ok(Scrubber { matcher, aliases })
    }

    /// `text` with every occurrence replaced by its alias, or `None` when nothing matched.
    pub fn scrub(&self, text: &str) -> Option<String> {
        let m = self.matcher.as_ref()?;
        let mut out = String::new();
        let mut last = 0;
        let mut any = false;
        for hit in m.find_iter(text) {
            any = true;
            out.push_str(&text[last..hit.start()]);
            out.push_str(&self.aliases[hit.pattern().as_usize()]);
            last = hit.end();
        }
        if !any {
            return None;
        }
        out.push_str(&text[last..]);
        Some(out)
    }

    /// The aliases of the secrets found in `text`.
    pub fn findings(&self, text: &str) -> BTreeSet<String> {
        let Some(m) = self.matcher.as_ref() else {
            return BTreeSet::new();
        };
        m.find_iter(text)
            .map(|hit| self.aliases[hit.pattern().as_usize()].clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALUE: &str = "p@ss w/rd+K3y???";

    fn scrubber() -> Scrubber {
        let mut s = BTreeMap::new();
        s.insert("TOKEN".to_owned(), SecretValue::new(VALUE));
        s.insert("PIN".to_owned(), SecretValue::new("123"));
        s.insert(
            "LONG".to_owned(),
            SecretValue::new(format!("{VALUE}-extended")),
        );
        Scrubber::new(&s).unwrap()
    }

    fn check(encoded: &str) {
        assert!(!encoded.is_empty());
        let text = format!("before {encoded} after");
        let out = scrubber().scrub(&text).unwrap();
        assert_eq!(out, "before sec_TOKEN after", "{encoded}");
    }

    #[test]
    fn sec03_raw_value_is_scrubbed_and_clean_text_is_untouched() {
        check(VALUE);
        assert_eq!(scrubber().scrub("nothing here"), None);
        let out = scrubber().scrub(&format!("{VALUE}{VALUE}")).unwrap();
        assert_eq!(out, "sec_TOKENsec_TOKEN");
    }

    #[test]
    fn sec03_base64_forms_are_scrubbed() {
        for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
            check(&engine.encode(VALUE));
            check(&engine.encode(format!("{VALUE}\n")));
        }
        // The standard and URL-safe alphabets differ for this value.
        assert_ne!(STANDARD.encode(VALUE), URL_SAFE.encode(VALUE));
    }

    #[test]
    fn sec03_percent_encoded_forms_are_scrubbed() {
        check("p%40ss%20w%2Frd%2BK3y%3F%3F%3F");
        check("p%40ss%20w%2frd%2bK3y%3f%3f%3f");
        check("p%40ss+w%2Frd%2BK3y%3F%3F%3F");
    }

    #[test]
    fn sec03_hex_forms_are_scrubbed() {
        check(&hex(VALUE.as_bytes(), false));
        check(&hex(VALUE.as_bytes(), true));
        assert_eq!(hex(b"\x01\xab", false), "01ab");
    }

    #[test]
    fn the_longest_value_wins_and_short_values_are_not_scrubbed() {
        let out = scrubber()
            .scrub(&format!("{VALUE}-extended and 123"))
            .unwrap();
        assert_eq!(out, "sec_LONG and 123");
        assert!(encodings("abc").is_empty());
        assert_eq!(encodings("abcd")[0], "abcd");
    }

    #[test]
    fn findings_name_aliases_only() {
        let s = scrubber();
        let found = s.findings(&format!("x {} y {VALUE}", hex(VALUE.as_bytes(), true)));
        assert_eq!(found.into_iter().collect::<Vec<_>>(), ["sec_TOKEN"]);
        assert!(s.findings("clean").is_empty());
        assert_eq!(Scrubber::new(&BTreeMap::new()).unwrap().scrub(VALUE), None);
    }
}
