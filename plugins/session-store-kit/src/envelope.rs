//! Shape check of a stored envelope read as plain JSON: exactly the fields of `EventRecord`
//! (`seq`, `time`, `type`, `data`, optional `ignorable`, `surface_op`, `source_event_seqs`)
//! with their types. Loads keep events as `serde_json::Value` (what the JSON contract answers)
//! and check them here, instead of building typed records and converting them back, which
//! costs several times the parse on a 1M-event session. Shared by every session-store backend.

use serde_json::Value;

fn uint(v: &Value, field: &str) -> Result<u64, String> {
    v.as_u64()
        .ok_or_else(|| format!("'{field}' is not an unsigned integer"))
}

/// Checks a `surface_op` value: `"append"` or exactly `{op: "replace", start, end}`.
pub fn surface_op(v: &Value) -> Result<(), String> {
    match v {
        Value::String(s) if s == "append" => Ok(()),
        Value::Object(m) => {
            let ok = m.len() == 3
                && m.get("op").and_then(Value::as_str) == Some("replace")
                && m.get("start").is_some_and(|s| s.as_u64().is_some())
                && m.get("end").is_some_and(|e| e.as_u64().is_some());
            if ok {
                Ok(())
            } else {
                Err(format!("invalid surface_op {v}"))
            }
        }
        other => Err(format!("invalid surface_op {other}")),
    }
}

/// Checks a `source_event_seqs` value: an array of unsigned integers.
pub fn source_event_seqs(v: &Value) -> Result<(), String> {
    let ok = v
        .as_array()
        .is_some_and(|a| a.iter().all(|s| s.as_u64().is_some()));
    if ok {
        Ok(())
    } else {
        Err("'source_event_seqs' is not an array of seqs".into())
    }
}

/// Checks one envelope; returns its `seq`.
pub fn check(v: &Value) -> Result<u64, String> {
    let Value::Object(map) = v else {
        return Err("record is not a JSON object".into());
    };
    let mut seq = None;
    let mut required = 0;
    for (key, value) in map {
        match key.as_str() {
            "seq" => {
                seq = Some(uint(value, "seq")?);
                required += 1;
            }
            "time" => {
                uint(value, "time")?;
                required += 1;
            }
            "type" => {
                if !value.is_string() {
                    return Err("'type' is not a string".into());
                }
                required += 1;
            }
            "data" => required += 1,
            "ignorable" => {
                if !value.is_boolean() {
                    return Err("'ignorable' is not a boolean".into());
                }
            }
            "surface_op" => surface_op(value)?,
            "source_event_seqs" => source_event_seqs(value)?,
            other => return Err(format!("unknown field '{other}'")),
        }
    }
    match seq {
        Some(seq) if required == 4 => Ok(seq),
        _ => Err("missing one of seq, time, type, data".into()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::check;

    #[test]
    fn accepts_every_field_of_the_envelope() {
        let e = json!({ "seq": 3, "time": 1, "type": "tool/result", "data": null, "ignorable": true,
            "surface_op": { "op": "replace", "start": 0, "end": 2 }, "source_event_seqs": [0, 1] });
        assert_eq!(check(&e), Ok(3));
        assert_eq!(
            check(&json!({ "seq": 0, "time": 1, "type": "x", "data": {}, "surface_op": "append" })),
            Ok(0)
        );
    }

    #[test]
    fn refuses_what_event_record_refuses() {
        for bad in [
            json!([]),
            json!({ "seq": 0, "time": 1, "type": "x" }),
            json!({ "seq": -1, "time": 1, "type": "x", "data": 1 }),
            json!({ "seq": 0, "time": 1, "type": 5, "data": 1 }),
            json!({ "seq": 0, "time": 1, "type": "x", "data": 1, "extra": 1 }),
            json!({ "seq": 0, "time": 1, "type": "x", "data": 1, "surface_op": "prepend" }),
            json!({ "seq": 0, "time": 1, "type": "x", "data": 1, "surface_op": { "op": "replace", "start": 0 } }),
            json!({ "seq": 0, "time": 1, "type": "x", "data": 1, "source_event_seqs": [-1] }),
            json!({ "seq": 0, "time": 1, "type": "x", "data": 1, "ignorable": 1 }),
        ] {
            assert!(check(&bad).is_err(), "{bad}");
        }
    }
}
