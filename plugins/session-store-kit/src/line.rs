//! The same envelope check as [`crate::envelope::check`], run straight on one line of JSON text
//! without building a `serde_json::Value` for the record: a cold load of a 1M-event session
//! spends most of its backend time building and dropping those values.
//!
//! [`check_line`] accepts exactly what "parse into `Value`, then `envelope::check`" accepts,
//! with one deliberate difference: a record that repeats an envelope key is checked at every
//! occurrence (a `Value` keeps only the last one), so it can only be stricter. `data` (and
//! every value under it) is walked with [`Syntax`]: full JSON syntax, UTF-8 strings, numbers
//! in `f64` range and serde_json's nesting limit — what a `Value` parse would enforce — without
//! keeping anything.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::envelope;

/// Any JSON value, checked as a `Value` parse would check it, and dropped.
#[derive(Debug, Clone, Copy)]
pub struct Syntax;

impl<'de> Deserialize<'de> for Syntax {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // `deserialize_any` (not `deserialize_ignored_any`): numbers are really parsed, so an
        // out-of-range number is refused as it is by `Value`.
        d.deserialize_any(SyntaxVisitor)
    }
}

struct SyntaxVisitor;

impl<'de> Visitor<'de> for SyntaxVisitor {
    type Value = Syntax;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Syntax, E> {
        Ok(Syntax)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Syntax, E> {
        Ok(Syntax)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Syntax, E> {
        Ok(Syntax)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Syntax, E> {
        Ok(Syntax)
    }
    fn visit_str<E>(self, _: &str) -> Result<Syntax, E> {
        Ok(Syntax)
    }
    fn visit_unit<E>(self) -> Result<Syntax, E> {
        Ok(Syntax)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Syntax, A::Error> {
        while seq.next_element::<Syntax>()?.is_some() {}
        Ok(Syntax)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Syntax, A::Error> {
        while map.next_entry::<Syntax, Syntax>()?.is_some() {}
        Ok(Syntax)
    }
}

/// Checks that `text` is one JSON value (what `serde_json::from_str::<Value>` accepts).
///
/// # Errors
/// serde_json's parse error.
pub fn check_json(text: &str) -> Result<(), serde_json::Error> {
    serde_json::from_str::<Syntax>(text).map(drop)
}

enum Field {
    Seq,
    Time,
    Type,
    Data,
    Ignorable,
    SurfaceOp,
    Sources,
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct FieldVisitor;
        impl Visitor<'_> for FieldVisitor {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an envelope field name")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Field, E> {
                Ok(match key {
                    "seq" => Field::Seq,
                    "time" => Field::Time,
                    "type" => Field::Type,
                    "data" => Field::Data,
                    "ignorable" => Field::Ignorable,
                    "surface_op" => Field::SurfaceOp,
                    "source_event_seqs" => Field::Sources,
                    other => return Err(E::custom(format!("unknown field '{other}'"))),
                })
            }
        }
        d.deserialize_str(FieldVisitor)
    }
}

/// A string, not kept.
struct AnyStr;

impl<'de> Deserialize<'de> for AnyStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = AnyStr;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string ('type')")
            }
            fn visit_str<E>(self, _: &str) -> Result<AnyStr, E> {
                Ok(AnyStr)
            }
        }
        d.deserialize_str(V)
    }
}

/// The checked envelope: only its `seq` is kept.
struct Envelope(u64);

impl<'de> Deserialize<'de> for Envelope {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EnvelopeVisitor)
    }
}

struct EnvelopeVisitor;

impl<'de> Visitor<'de> for EnvelopeVisitor {
    type Value = Envelope;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a record (JSON object)")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
        let custom = <A::Error as de::Error>::custom;
        let (mut seq, mut time, mut kind, mut data) = (None, false, false, false);
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Seq => seq = Some(map.next_value::<u64>()?),
                Field::Time => time = map.next_value::<u64>().map(|_| true)?,
                Field::Type => kind = map.next_value::<AnyStr>().map(|_| true)?,
                Field::Data => data = map.next_value::<Syntax>().map(|_| true)?,
                Field::Ignorable => drop(map.next_value::<bool>()?),
                Field::SurfaceOp => {
                    envelope::surface_op(&map.next_value::<Value>()?).map_err(custom)?
                }
                Field::Sources => {
                    envelope::source_event_seqs(&map.next_value::<Value>()?).map_err(custom)?;
                }
            }
        }
        match seq {
            Some(seq) if time && kind && data => Ok(Envelope(seq)),
            _ => Err(custom("missing one of seq, time, type, data".into())),
        }
    }
}

/// Checks one stored record given as JSON text; returns its `seq`. Errors read
/// `unparsable record: …` (not JSON) or `invalid record: …` (JSON, but not an envelope).
///
/// # Errors
/// As described.
pub fn check_line(line: &[u8]) -> Result<u64, String> {
    match serde_json::from_slice::<Envelope>(line) {
        Ok(Envelope(seq)) => Ok(seq),
        Err(e) if e.is_data() => Err(format!("invalid record: {e}")),
        Err(e) => Err(format!("unparsable record: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{check_json, check_line};
    use crate::envelope;

    /// What the `Value` route says: `Ok(seq)` or whether it failed.
    fn via_value(line: &str) -> Option<u64> {
        serde_json::from_str::<Value>(line)
            .ok()
            .and_then(|v| envelope::check(&v).ok())
    }

    #[test]
    fn agrees_with_the_value_route() {
        let cases = [
            r#"{"seq":3,"time":1,"type":"tool/result","data":{"a":[1,2.5,"x",null,true]},"ignorable":true,"surface_op":{"op":"replace","start":0,"end":2},"source_event_seqs":[0,1]}"#,
            r#"{"seq":0,"time":1,"type":"x","data":{},"surface_op":"append"}"#,
            r#"{"time":1,"seq":7,"data":"\u00e9\n","type":"a\"b"}"#,
            r#"{"s\u0065q":0,"time":1,"type":"x","data":1}"#,
            "",
            "[]",
            "{",
            r#"{"seq":0,"time":1,"type":"x"}"#,
            r#"{"seq":-1,"time":1,"type":"x","data":1}"#,
            r#"{"seq":1.0,"time":1,"type":"x","data":1}"#,
            r#"{"seq":-0,"time":1,"type":"x","data":1}"#,
            r#"{"seq":0,"time":1,"type":5,"data":1}"#,
            r#"{"seq":0,"time":1,"type":"x","data":1,"extra":1}"#,
            r#"{"seq":0,"time":1,"type":"x","data":1,"surface_op":"prepend"}"#,
            r#"{"seq":0,"time":1,"type":"x","data":1,"surface_op":{"op":"replace","start":0}}"#,
            r#"{"seq":0,"time":1,"type":"x","data":1,"source_event_seqs":[-1]}"#,
            r#"{"seq":0,"time":1,"type":"x","data":1,"ignorable":1}"#,
            r#"{"seq":0,"time":1,"type":"x","data":1e400}"#,
            r#"{"seq":0,"time":1,"type":"x","data":[1,]}"#,
            r#"{"seq":0,"time":1,"type":"x","data":"\ud800"}"#,
            r#"{"seq":0,"time":1,"type":"x","data":1} x"#,
            r#"{"seq":0,"time":1,"type":"x","data":1}  "#,
        ];
        for line in cases {
            assert_eq!(check_line(line.as_bytes()).ok(), via_value(line), "{line}");
        }
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        let line = format!(r#"{{"seq":0,"time":1,"type":"x","data":{deep}}}"#);
        assert_eq!(check_line(line.as_bytes()).ok(), via_value(&line));
        assert!(check_line(b"{\"seq\":0,\"time\":1,\"type\":\"x\",\"data\":\"\xff\"}").is_err());
        assert!(check_json(&json!({"a": [1, {"b": null}]}).to_string()).is_ok());
        assert!(check_json("{\"a\":}").is_err());
    }
}
