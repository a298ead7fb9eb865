//! Validation at the write site (SES-01, SES-02) and on read (SES-09).
//!
//! Owns everything that can be decided about one event or one header without the rest of the
//! log: lossless JSON data (finite numbers, no `-0`, **no duplicate keys**), the surface-field
//! rules of the envelope, id syntax, and the "unsupported, not corrupt" refusals of a reader.
//! State-dependent rules (turn/step balance, replace ranges) live in `invariants` and
//! `projection`.
//!
//! Duplicate keys: `serde_json` silently keeps the last of two equal keys, so a `Value` can no
//! longer tell that the text had two. [`parse_data`] therefore parses raw JSON text with its own
//! visitor that refuses a repeated key; callers that hold raw text (the `data_json` field of the
//! `append` method, backends reading a file) must go through it. `-0` is refused because it
//! does not survive a round trip through most readers (it becomes `0`), i.e. it is not lossless.

use std::collections::HashSet;
use std::fmt;

use keel_plugin_api::services::driver::ProfileIdentity;
use keel_plugin_api::services::session::{
    CORE_TYPES, EventRecord, FORMAT_VERSION, PROFILE_EVENT, SURFACE_TYPES, SessionHeader, SurfaceOp,
};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::error::{Result, SessionError};

/// Deepest nesting accepted in event data (serde_json's own parser stops at 128 too).
pub const MAX_DEPTH: usize = 128;

/// Whether `id` is a valid session id: `[A-Za-z0-9_-]{1,128}`.
pub fn is_valid_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Refuses an invalid session id (`SESSION_INVALID`).
///
/// # Errors
/// When `id` is not `[A-Za-z0-9_-]{1,128}`.
pub fn check_id(id: &str) -> Result<()> {
    if is_valid_id(id) {
        Ok(())
    } else {
        Err(SessionError::invalid(format!(
            "invalid session id {id:?}: must match [A-Za-z0-9_-]{{1,128}}"
        )))
    }
}

/// Whether `kind` is a well-formed event type name: `[A-Za-z0-9_./:-]{1,128}`.
pub fn is_valid_type(kind: &str) -> bool {
    (1..=128).contains(&kind.len())
        && kind
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_./:-".contains(&b))
}

/// Whether `kind` is a surface type (carries `surface_op`).
pub fn is_surface(kind: &str) -> bool {
    SURFACE_TYPES.contains(&kind)
}

/// The event types this reader understands: the core set plus the ones plugins register
/// (row config `event_types`). A type outside this set is readable only when `ignorable`.
#[derive(Debug, Clone, Default)]
pub struct EventTypes {
    extra: HashSet<String>,
}

impl EventTypes {
    /// The core set plus `extra`.
    pub fn with_extra<I: IntoIterator<Item = String>>(extra: I) -> Self {
        EventTypes {
            extra: extra.into_iter().collect(),
        }
    }

    /// Whether `kind` is understood.
    pub fn knows(&self, kind: &str) -> bool {
        CORE_TYPES.contains(&kind) || self.extra.contains(kind)
    }
}

// ---- data ------------------------------------------------------------------------------------

/// Parses raw JSON text as event data, refusing duplicate keys, `-0`, numbers out of range and
/// nesting deeper than [`MAX_DEPTH`] (SES-01).
///
/// # Errors
/// `SESSION_INVALID` naming the defect.
pub fn parse_data(raw: &str) -> Result<Value> {
    let mut de = serde_json::Deserializer::from_str(raw);
    let value = Strict { depth: 0 }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| SessionError::invalid(format!("event data is not lossless JSON: {e}")))?;
    Ok(value)
}

/// Checks an already-parsed value: no `-0`, depth at most [`MAX_DEPTH`]. (`serde_json::Value`
/// cannot hold a non-finite number; duplicate keys are gone by then — see [`parse_data`].)
///
/// # Errors
/// `SESSION_INVALID` naming the JSON pointer of the defect.
pub fn check_value(value: &Value) -> Result<()> {
    fn ok(v: &Value, depth: usize) -> bool {
        match v {
            Value::Number(n) => n
                .as_f64()
                .filter(|_| n.is_f64())
                .is_none_or(|f| f.is_finite() && !(f == 0.0 && f.is_sign_negative())),
            Value::Array(items) => depth < MAX_DEPTH && items.iter().all(|i| ok(i, depth + 1)),
            Value::Object(map) => depth < MAX_DEPTH && map.values().all(|i| ok(i, depth + 1)),
            Value::Null | Value::Bool(_) | Value::String(_) => true,
        }
    }
    if ok(value, 0) {
        return Ok(());
    }
    // Slow path: find the defect again, naming its JSON pointer.
    fn walk(v: &Value, depth: usize, path: &mut String) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(SessionError::invalid(format!(
                "event data nests deeper than {MAX_DEPTH} at {path}"
            )));
        }
        match v {
            Value::Number(n) => {
                if let Some(f) = n.as_f64().filter(|_| n.is_f64())
                    && (!f.is_finite() || (f == 0.0 && f.is_sign_negative()))
                {
                    return Err(SessionError::invalid(format!(
                        "event data holds a non-lossless number ({n}) at {}",
                        if path.is_empty() { "/" } else { path }
                    )));
                }
                Ok(())
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&i.to_string());
                    walk(item, depth + 1, path)?;
                    path.truncate(len);
                }
                Ok(())
            }
            Value::Object(map) => {
                for (k, item) in map {
                    let len = path.len();
                    path.push('/');
                    path.push_str(k);
                    walk(item, depth + 1, path)?;
                    path.truncate(len);
                }
                Ok(())
            }
            Value::Null | Value::Bool(_) | Value::String(_) => Ok(()),
        }
    }
    walk(value, 0, &mut String::new())
}

struct Strict {
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> std::result::Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> std::result::Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> std::result::Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<Value, E> {
        if v == 0.0 && v.is_sign_negative() {
            return Err(E::custom("-0 is not lossless"));
        }
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("non-finite number"))
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> std::result::Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> std::result::Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> std::result::Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Value, A::Error> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            return Err(serde::de::Error::custom("nesting too deep"));
        }
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Strict { depth })? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Value, A::Error> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            return Err(serde::de::Error::custom("nesting too deep"));
        }
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format!("duplicate key {key:?}")));
            }
            let v = map.next_value_seed(Strict { depth })?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

// ---- envelope --------------------------------------------------------------------------------

/// What a writer supplies for one event; the log adds `seq` and `time`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// Event type.
    pub kind: String,
    /// Event data (validated by [`check_new`]).
    pub data: Value,
    /// Readers that do not know `kind` may skip it.
    pub ignorable: bool,
    /// Required on surface types, forbidden elsewhere.
    pub surface_op: Option<SurfaceOp>,
    /// Cited earlier seqs (surface types only).
    pub source_event_seqs: Option<Vec<u64>>,
}

impl NewEvent {
    /// A non-surface event.
    pub fn new(kind: impl Into<String>, data: Value) -> Self {
        NewEvent {
            kind: kind.into(),
            data,
            ignorable: false,
            surface_op: None,
            source_event_seqs: None,
        }
    }

    /// A surface event appended to the history (`surface_op: "append"`).
    pub fn surface(kind: impl Into<String>, data: Value) -> Self {
        NewEvent {
            surface_op: Some(SurfaceOp::Append(
                keel_plugin_api::services::session::AppendTag::Append,
            )),
            ..NewEvent::new(kind, data)
        }
    }

    /// A surface event replacing `start..=end`, citing `sources` (every shadowed seq).
    pub fn replace(
        kind: impl Into<String>,
        data: Value,
        start: u64,
        end: u64,
        sources: Vec<u64>,
    ) -> Self {
        NewEvent {
            surface_op: Some(SurfaceOp::Replace {
                op: keel_plugin_api::services::session::ReplaceTag::Replace,
                start,
                end,
            }),
            source_event_seqs: Some(sources),
            ..NewEvent::new(kind, data)
        }
    }

    /// Marks the event ignorable.
    #[must_use]
    pub fn ignorable(mut self) -> Self {
        self.ignorable = true;
        self
    }
}

/// Checks one new event as it will sit at `seq` (SES-01/02): type syntax and known-ness, data
/// losslessness, core data is an object, and the surface-field rules.
///
/// # Errors
/// `SESSION_INVALID` naming the rule and the seq.
pub fn check_new(ev: &NewEvent, seq: u64, types: &EventTypes) -> Result<()> {
    let kind = ev.kind.as_str();
    if !is_valid_type(kind) {
        return Err(SessionError::rule(
            seq,
            kind,
            "SES-02.type",
            "event type must match [A-Za-z0-9_./:-]{1,128}",
        ));
    }
    if !ev.ignorable && !types.knows(kind) {
        return Err(SessionError::rule(
            seq,
            kind,
            "SES-09.required-type",
            "not a core type: mark it `ignorable` or list it in the session row's `event_types`",
        ));
    }
    check_value(&ev.data)
        .map_err(|e| SessionError::rule(seq, kind, "SES-01.lossless", e.message))?;
    if CORE_TYPES.contains(&kind) && !ev.data.is_object() {
        return Err(SessionError::rule(
            seq,
            kind,
            "SES-02.data",
            "core event data must be a JSON object",
        ));
    }
    if kind == PROFILE_EVENT
        && (!ev.ignorable || serde_json::from_value::<ProfileIdentity>(ev.data.clone()).is_err())
    {
        return Err(SessionError::rule(
            seq,
            kind,
            "SES-02.data",
            "session/profile must be ignorable with data {name, digest} (two strings)",
        ));
    }
    check_surface_fields(
        kind,
        seq,
        ev.surface_op.as_ref(),
        ev.source_event_seqs.as_deref(),
    )
}

fn check_surface_fields(
    kind: &str,
    seq: u64,
    op: Option<&SurfaceOp>,
    sources: Option<&[u64]>,
) -> Result<()> {
    if !is_surface(kind) {
        if op.is_some() || sources.is_some() {
            return Err(SessionError::rule(
                seq,
                kind,
                "SES-02.surface-only",
                "only surface types (user/message, assistant/message, tool/result) carry surface_op or source_event_seqs",
            ));
        }
        return Ok(());
    }
    let Some(op) = op else {
        return Err(SessionError::rule(
            seq,
            kind,
            "SES-02.surface-op",
            "surface events require surface_op (\"append\" or {op:\"replace\",start,end})",
        ));
    };
    if let Some(bad) = sources.and_then(|s| s.iter().find(|&&s| s >= seq)) {
        return Err(SessionError::rule(
            seq,
            kind,
            "SES-02.sources",
            format!("source_event_seqs cites {bad}, which is not an earlier event"),
        ));
    }
    if let SurfaceOp::Replace { start, end, .. } = op {
        if start > end || *end >= seq {
            return Err(SessionError::rule(
                seq,
                kind,
                "SES-03.replace-range",
                format!(
                    "replace range {start}..={end} must be ordered and end before the event itself"
                ),
            ));
        }
        if sources.is_none() {
            return Err(SessionError::rule(
                seq,
                kind,
                "SES-03.replace-sources",
                "a replacement must list every shadowed surface seq in source_event_seqs",
            ));
        }
    }
    Ok(())
}

// ---- read side -------------------------------------------------------------------------------

/// Checks a header read from storage (SES-09): another format version is `SESSION_UNSUPPORTED`,
/// a malformed id or relative cwd is `SESSION_CORRUPT`.
///
/// # Errors
/// As described.
pub fn check_header(h: &SessionHeader) -> Result<()> {
    if h.version != FORMAT_VERSION {
        return Err(SessionError::unsupported(format!(
            "unsupported session format version {} (this keel reads version {FORMAT_VERSION})",
            h.version
        )));
    }
    if !is_valid_id(&h.id) {
        return Err(SessionError::corrupt(format!(
            "header id {:?} is not a valid session id",
            h.id
        )));
    }
    if !h.cwd.starts_with('/') {
        return Err(SessionError::corrupt(format!(
            "header cwd {:?} is not absolute",
            h.cwd
        )));
    }
    Ok(())
}

/// Checks a header read with an unknown shape (raw JSON): a `version` other than
/// [`FORMAT_VERSION`] is `SESSION_UNSUPPORTED` even when the rest would not parse.
///
/// # Errors
/// `SESSION_UNSUPPORTED` for another version; `SESSION_CORRUPT` for a malformed header.
pub fn parse_header(raw: &Value) -> Result<SessionHeader> {
    if let Some(v) = raw.get("version")
        && v.as_u64() != Some(u64::from(FORMAT_VERSION))
    {
        return Err(SessionError::unsupported(format!(
            "unsupported session format version {v} (this keel reads version {FORMAT_VERSION})"
        )));
    }
    let h: SessionHeader = serde_json::from_value(raw.clone())
        .map_err(|e| SessionError::corrupt(format!("malformed session header: {e}")))?;
    check_header(&h)?;
    Ok(h)
}

/// Checks the events read from storage: contiguous seqs from 0 (else `SESSION_CORRUPT`) and
/// every type either understood or `ignorable` (else `SESSION_UNSUPPORTED`, SES-09).
///
/// # Errors
/// As described, naming the first offending seq.
pub fn check_readable(events: &[EventRecord], types: &EventTypes) -> Result<()> {
    for (i, ev) in events.iter().enumerate() {
        if ev.seq != i as u64 {
            return Err(SessionError::corrupt(format!(
                "event at position {i} has seq {} (seqs must be contiguous from 0)",
                ev.seq
            )));
        }
        if !ev.ignorable && !types.knows(&ev.kind) {
            return Err(SessionError::unsupported(format!(
                "seq {}: unknown required event type '{}' (not ignorable); this keel cannot read the session",
                ev.seq, ev.kind
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
