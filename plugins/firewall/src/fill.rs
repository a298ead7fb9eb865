//! The inbound fill (requirements SEC-02): an alias the model wrote becomes the value inside
//! `tools/execute`, after the arguments were logged. An alias is the token `sec_NAME` where
//! `NAME` is a whole run of `[A-Za-z0-9_]` naming a stored secret and the character before
//! `sec_` is not a letter or digit; an unknown alias is left as it is.

use serde_json::Value;

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `text` with every known alias replaced by `lookup(name)`, or `None` when nothing changed.
pub fn fill_str<'v>(text: &str, lookup: impl Fn(&str) -> Option<&'v str>) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut copied = 0;
    let mut from = 0;
    let mut changed = false;
    while let Some(found) = text[from..].find("sec_") {
        let start = from + found;
        let name_start = start + 4;
        let name_end = bytes[name_start..]
            .iter()
            .position(|&b| !is_name_byte(b))
            .map_or(bytes.len(), |n| name_start + n);
        let boundary = start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
        let value = (boundary && name_end > name_start)
            .then(|| lookup(&text[name_start..name_end]))
            .flatten();
        if let Some(value) = value {
            out.push_str(&text[copied..start]);
            out.push_str(value);
            copied = name_end;
            changed = true;
        }
        from = name_end.max(name_start);
    }
    if !changed {
        return None;
    }
    out.push_str(&text[copied..]);
    Some(out)
}

/// Applies `f` to every string value (not keys) in `value`; true when any changed.
pub fn map_strings(value: &mut Value, f: &mut impl FnMut(&str) -> Option<String>) -> bool {
    match value {
        Value::String(s) => match f(s) {
            Some(new) => {
                *s = new;
                true
            }
            None => false,
        },
        // Every element is visited (no short circuit).
        Value::Array(items) => {
            let mut changed = false;
            for v in items {
                changed |= map_strings(v, f);
            }
            changed
        }
        Value::Object(map) => {
            let mut changed = false;
            for v in map.values_mut() {
                changed |= map_strings(v, f);
            }
            changed
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn lookup(name: &str) -> Option<&'static str> {
        match name {
            "TOKEN" => Some("t0k3n"),
            "A_B" => Some("ab"),
            _ => None,
        }
    }

    #[test]
    fn sec02_known_aliases_are_filled_where_they_stand() {
        let f = |s: &str| fill_str(s, lookup);
        assert_eq!(f("sec_TOKEN").as_deref(), Some("t0k3n"));
        assert_eq!(
            f("curl -H 'Authorization: Bearer sec_TOKEN' x?k=sec_A_B&t=$sec_TOKEN/").as_deref(),
            Some("curl -H 'Authorization: Bearer t0k3n' x?k=ab&t=$t0k3n/")
        );
        assert_eq!(f("_sec_TOKEN").as_deref(), Some("_t0k3n"));
    }

    #[test]
    fn sec02_unknown_or_partial_aliases_are_left_alone() {
        let f = |s: &str| fill_str(s, lookup);
        assert_eq!(f("sec_OTHER sec_ sec_TOKENS xsec_TOKEN sec_"), None);
        assert_eq!(f("no aliases"), None);
        assert_eq!(f("sec_OTHER sec_TOKEN").as_deref(), Some("sec_OTHER t0k3n"));
    }

    #[test]
    fn strings_are_mapped_inside_nested_json_but_keys_are_not() {
        let mut v = json!({"sec_TOKEN": ["sec_TOKEN", {"x": "a sec_A_B"}], "n": 1});
        let changed = map_strings(&mut v, &mut |s| fill_str(s, lookup));
        assert!(changed);
        assert_eq!(v, json!({"sec_TOKEN": ["t0k3n", {"x": "a ab"}], "n": 1}));
        let mut same = json!({"a": "b"});
        assert!(!map_strings(&mut same, &mut |s| fill_str(s, lookup)));
    }
}
