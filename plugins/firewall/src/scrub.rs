//! The outbound scrub (requirements SEC-01, SEC-03): every secret value, and its simple
//! encodings, becomes its alias in text bound for the model or the log; a registered
//! credential's value becomes its `[credential REF]` marker the same way. The encodings are
//! the ones a tool's output plausibly carries: standard and URL-safe base64 with and without
//! padding (of the value, and of the value plus a newline, as `echo $X | base64` prints),
//! the value's base64 inside a longer input at each of the three alignments ([`base64_cores`]),
//! percent-encoding (unreserved or `encodeURIComponent` sets, upper- and lower-case hex, `+`
//! for spaces) and hex (lower and upper case). All patterns are replaced in one
//! leftmost-longest pass, so a replacement is never re-scanned.
//!
//! Limits: values shorter than [`MIN_SCRUB_LEN`] bytes are not scrubbed (they would match
//! everywhere), and a value's base64 inside a longer input only when its alignment-free core
//! has at least [`MIN_BASE64_CORE`] characters (values of 7 bytes or more). The core leaves
//! the one or two characters at each end that mix the value's edge bits with its unknown
//! neighbours: at most 4 bits of its first byte and 4 of its last stay in the text.

use std::collections::{BTreeMap, BTreeSet};

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
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

/// The shortest alignment-free base64 core that is scrubbed, in characters: 48 bits, so a
/// core never matches by chance in ordinary text.
pub const MIN_BASE64_CORE: usize = 8;

/// The base64 of `value` wherever it sits in a longer input (`printf 'x%s' "$V" | base64`):
/// for each alignment (0, 1 or 2 bytes before it, modulo 3) the run of characters that
/// depends on the value's bits alone, whatever its neighbours are, in the standard and the
/// URL-safe alphabet (no padding: the run never reaches the end). Character `j` of an encoding
/// covers bits `6j..6j+6` of the input, so with `k` bytes before the value it is the value's
/// own when `8k <= 6j` and `6j + 6 <= 8(k + len)`. Runs shorter than [`MIN_BASE64_CORE`] are
/// left out.
pub fn base64_cores(value: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for k in 0..3 {
        // Zero neighbours: the run's characters do not depend on them.
        let mut input = vec![0u8; k];
        input.extend_from_slice(value);
        input.extend_from_slice(&[0, 0]);
        let encoded = STANDARD_NO_PAD.encode(&input);
        let first = (8 * k).div_ceil(6);
        let end = 8 * (k + value.len()) / 6;
        if end < first + MIN_BASE64_CORE {
            continue;
        }
        let Some(core) = encoded.get(first..end) else {
            continue;
        };
        out.push(core.replace('+', "-").replace('/', "_"));
        out.push(core.to_owned());
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
    out.extend(base64_cores(value.as_bytes()));
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

/// `text` as it appears between the quotes of a JSON string (serde_json's escaping).
fn json_escaped(text: &str) -> String {
    let quoted = serde_json::Value::String(text.to_owned()).to_string();
    quoted[1..quoted.len() - 1].to_owned()
}

/// One leftmost-longest automaton over `patterns`. A contiguous NFA, not the DFA the builder
/// picks for a few patterns: the matches are the same (the kind is only the automaton's
/// representation), a scan of a long text costs the same (its prefilter does most of it), and
/// building it takes a fifth of the time — 70–85 µs against 275–580 µs for one 40-byte
/// credential's 8 forms, twice per vault (issue 25 item 1: a vault is built at activation and
/// again when the adapter's key is registered, right before the first model request).
fn build(patterns: &[String]) -> Result<Option<AhoCorasick>, FirewallError> {
    if patterns.is_empty() {
        return Ok(None);
    }
    AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostLongest)
        .kind(Some(AhoCorasickKind::ContiguousNFA))
        .build(patterns)
        .map(Some)
        .map_err(|e| {
            FirewallError::new(
                codes::SECRETS_CORRUPT,
                format!("cannot build the scrubber: {e}"),
            )
        })
}

/// Replaces secret values with their aliases (credential values with their markers).
pub struct Scrubber {
    matcher: Option<AhoCorasick>,
    /// Alias of each pattern, by pattern index.
    aliases: Vec<String>,
    /// The patterns as they appear inside a JSON string ([`Scrubber::may_occur_in_json`]).
    in_json: Option<AhoCorasick>,
}

impl std::fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scrubber")
            .field("patterns", &self.aliases.len())
            .finish_non_exhaustive()
    }
}

impl Scrubber {
    /// A scrubber for `secrets`, each value replaced by its alias.
    ///
    /// # Errors
    /// `SECRETS_CORRUPT` if the matcher cannot be built (pathological sizes).
    pub fn new(secrets: &BTreeMap<String, SecretValue>) -> Result<Self, FirewallError> {
        Self::from_entries(secrets.iter().map(|(name, v)| (v.expose(), alias(name))))
    }

    /// A scrubber replacing each `(value, replacement)`'s value and its encodings.
    ///
    /// # Errors
    /// `SECRETS_CORRUPT` if the matcher cannot be built (pathological sizes).
    pub fn from_entries<'v>(
        entries: impl IntoIterator<Item = (&'v str, String)>,
    ) -> Result<Self, FirewallError> {
        let mut patterns = Vec::new();
        let mut aliases = Vec::new();
        for (value, replacement) in entries {
            for e in encodings(value) {
                patterns.push(e);
                aliases.push(replacement.clone());
            }
        }
        let in_json: Vec<String> = patterns.iter().map(|p| json_escaped(p)).collect();
        Ok(Scrubber {
            matcher: build(&patterns)?,
            aliases,
            in_json: build(&in_json)?,
        })
    }

    /// Whether a value may occur in a string of the JSON document `text`: `false` only when
    /// it certainly does not, so the hooks skip parsing a document (a model request holds the
    /// whole history) that has nothing to scrub. Sound for any JSON: without a `\u` or `\/`
    /// escape in `text`, every character of a string has one spelling (serde_json's), so a
    /// value in a string means its escaped form in the text.
    pub fn may_occur_in_json(&self, text: &str) -> bool {
        let Some(m) = self.in_json.as_ref() else {
            return false;
        };
        text.contains("\\u") || text.contains("\\/") || m.is_match(text)
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

    /// The aliases (and credential markers) of the values found in `text`.
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

    /// Issue 10 item 5: `printf 'x%s' "$V" | base64` and `printf 'xy%s' "$V" | base64` put the
    /// value at another alignment; every alignment, both alphabets, padded or not, with
    /// anything after it, is scrubbed, and what is left cannot give the value back.
    #[test]
    fn sec03_base64_at_every_alignment_in_both_alphabets_is_scrubbed() {
        let s = scrubber();
        for prefix in ["", "x", "xy", "xyz", "four"] {
            for suffix in ["", "\n", "!", "\r\ntail bytes"] {
                let input = format!("{prefix}{VALUE}{suffix}");
                for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
                    let encoded = engine.encode(&input);
                    let out = s
                        .scrub(&format!("out: {encoded} end"))
                        .unwrap_or_else(|| panic!("{prefix:?}+{suffix:?}: {encoded}"));
                    assert!(out.contains("sec_TOKEN"), "{out}");
                    // Only the neighbours' characters and at most two per edge remain.
                    let left = out.replace("sec_TOKEN", "").len() - "out:  end".len();
                    let around = (prefix.len() + suffix.len()).div_ceil(3) * 4 + 4 + 2;
                    assert!(left <= around, "{prefix:?}+{suffix:?}: {out}");
                }
            }
        }
    }

    #[test]
    fn base64_cores_need_eight_characters_and_differ_per_alignment() {
        // 6 bytes: only the aligned core is long enough.
        assert_eq!(base64_cores(b"abcdef"), ["YWJjZGVm", "YWJjZGVm"]);
        // 7 bytes: every alignment.
        let cores = base64_cores(b"abcdefg");
        assert_eq!(cores.len(), 6);
        for (k, pair) in cores.chunks(2).enumerate() {
            let input = [&b"\x01\x02"[..k], b"abcdefg"].concat();
            assert!(STANDARD.encode(&input).contains(&pair[1]), "alignment {k}");
            assert!(pair[1].len() >= MIN_BASE64_CORE);
        }
        assert!(base64_cores(b"abcd").is_empty());
        // The URL-safe core differs where the alphabets do.
        let cores = base64_cores(&[0xfb; 9]);
        assert!(
            cores[1].contains('+') || cores[1].contains('/'),
            "{cores:?}"
        );
        assert!(!cores[0].contains('+') && !cores[0].contains('/'));
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

    // Issue 25 item 1 (the contiguous NFA): in a long output, every form of the value, at
    // every position, is replaced on the first scrub, and nothing else changes.
    #[test]
    fn sec03_every_form_is_scrubbed_throughout_a_long_output() {
        let s = scrubber();
        let forms = encodings(VALUE);
        let mut text = String::new();
        let mut expected = String::new();
        for i in 0..2000 {
            let filler = format!("line {i} of output, nothing secret here\n");
            text.push_str(&filler);
            expected.push_str(&filler);
            let form = &forms[i % forms.len()];
            text.push_str(&format!("<{form}>"));
            expected.push_str("<sec_TOKEN>");
        }
        assert_eq!(s.scrub(&text).unwrap(), expected);
    }

    #[test]
    fn the_json_prefilter_never_misses_a_value_in_a_string() {
        let s = scrubber();
        let quoted = "a \"quoted\" value\twith\\escapes";
        let q = Scrubber::from_entries([(quoted, "sec_Q".to_owned())]).unwrap();
        let doc = serde_json::json!({"m": [format!("x {quoted} y")]}).to_string();
        assert!(!doc.contains(quoted), "the raw form is not in the text");
        assert!(q.may_occur_in_json(&doc));
        assert!(s.may_occur_in_json(&serde_json::json!({"c": VALUE}).to_string()));
        assert!(
            s.may_occur_in_json(r#"{"c": "p\u0040ss"}"#),
            "\\u: parse to be sure"
        );
        assert!(!s.may_occur_in_json(r#"{"c": "clean", "d": "line\n"}"#));
        assert!(
            !Scrubber::new(&BTreeMap::new())
                .unwrap()
                .may_occur_in_json(VALUE)
        );
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
