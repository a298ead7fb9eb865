//! What the tools know about file bytes: content versions (FS-04), text classification
//! (`FS_NOT_TEXT`) and LF normalisation (FS-05).
//!
//! A version is always computed from bytes actually read or written — never fabricated — so
//! the policy's replace-if-version guard compares like with like.

/// Hex characters kept from the blake3 digest (128 bits).
const VERSION_HEX_LEN: usize = 32;

/// The content version of `bytes`: the first 32 hex characters of their blake3 hash (the
/// one definition in `keel_plugin_api::events::fs`, which other rows observe with too).
pub fn version_of(bytes: &[u8]) -> String {
    keel_plugin_api::events::fs::content_version(bytes)
}

/// Incremental [`version_of`] for streamed reads.
#[derive(Debug, Default)]
pub struct Versioner(blake3::Hasher);

impl Versioner {
    /// Feeds the next bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The version of everything fed.
    pub fn finish(&self) -> String {
        let mut hex = self.0.finalize().to_hex().to_string();
        hex.truncate(VERSION_HEX_LEN);
        hex
    }
}

/// `bytes` as text, or `None` when they hold a NUL byte or are not valid UTF-8.
pub fn as_text(bytes: &[u8]) -> Option<&str> {
    if bytes.contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

/// `text` with CRLF line endings turned into LF (FS-05: before/after for diffs).
pub fn lf(text: &str) -> String {
    text.replace("\r\n", "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_is_a_stable_content_hash() {
        let v = version_of(b"hello");
        assert_eq!(v.len(), 32);
        assert!(v.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(v, version_of(b"hello"));
        assert_ne!(v, version_of(b"hello!"));
        let mut s = Versioner::default();
        s.update(b"hel");
        s.update(b"lo");
        assert_eq!(s.finish(), v);
    }

    #[test]
    fn text_rejects_nul_and_invalid_utf8() {
        assert_eq!(as_text(b"ok\n"), Some("ok\n"));
        assert_eq!(as_text(b"a\0b"), None);
        assert_eq!(as_text(&[0xff, 0xfe]), None);
    }

    #[test]
    fn lf_normalises_crlf() {
        assert_eq!(lf("a\r\nb\nc\r\n"), "a\nb\nc\n");
    }
}
