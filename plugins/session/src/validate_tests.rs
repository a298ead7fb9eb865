//! Unit tests of `validate` (SES-01, SES-02, SES-09).

use super::*;
use keel_plugin_api::services::session::StoreError;
use serde_json::json;

#[test]
fn ses01_duplicate_keys_are_refused_in_raw_text() {
    let e = parse_data(r#"{"a":1,"b":{"c":1,"c":2}}"#).unwrap_err();
    assert!(e.is(StoreError::Invalid));
    assert!(e.message.contains("duplicate key \"c\""), "{e}");
    assert_eq!(
        parse_data(r#"{"a":[1,{"b":null}]}"#).unwrap(),
        json!({"a":[1,{"b":null}]})
    );
}

#[test]
fn ses01_negative_zero_and_out_of_range_numbers_are_refused() {
    assert!(parse_data("-0").is_err());
    assert!(parse_data(r#"{"x":-0.0}"#).is_err());
    assert!(parse_data("1e400").is_err());
    assert!(parse_data("not json").is_err());
    assert!(parse_data("{} trailing").is_err());
    assert!(check_value(&json!({"x": [-0.0]})).is_err());
    assert!(check_value(&json!({"x": [0.0, -1.5, 1]})).is_ok());
}

#[test]
fn ses01_depth_is_bounded() {
    let deep = "[".repeat(200) + &"]".repeat(200);
    assert!(parse_data(&deep).is_err());
}

#[test]
fn ids_and_types() {
    assert!(is_valid_id("abc-DEF_09"));
    assert!(!is_valid_id(""));
    assert!(!is_valid_id("a/b"));
    assert!(!is_valid_id(&"x".repeat(129)));
    assert!(check_id("../etc").is_err());
    assert!(is_valid_type("approval/asked"));
    assert!(!is_valid_type("has space"));
}

#[test]
fn ses02_surface_fields_only_on_surface_types_and_required_there() {
    let t = EventTypes::default();
    let mut ev = NewEvent::new("turn/start", json!({"turn":0}));
    assert!(check_new(&ev, 0, &t).is_ok());
    ev.source_event_seqs = Some(vec![]);
    let e = check_new(&ev, 0, &t).unwrap_err();
    assert!(e.message.contains("SES-02.surface-only"), "{e}");
    let bare = NewEvent::new("user/message", json!({"id":"u","content":"hi"}));
    let e = check_new(&bare, 3, &t).unwrap_err();
    assert!(e.message.contains("SES-02.surface-op") && e.message.contains("seq 3"));
    let ok = NewEvent::surface("user/message", json!({"id":"u","content":"hi"}));
    assert!(check_new(&ok, 3, &t).is_ok());
    let future = NewEvent::replace("user/message", json!({"content":"x"}), 0, 3, vec![0]);
    assert!(check_new(&future, 3, &t).is_err());
    let no_sources = NewEvent {
        source_event_seqs: None,
        ..NewEvent::replace("user/message", json!({"content":"x"}), 0, 1, vec![])
    };
    assert!(check_new(&no_sources, 3, &t).is_err());
}

#[test]
fn ses09_unknown_required_types_are_refused_ignorable_ones_pass() {
    let t = EventTypes::with_extra(["approval/asked".to_owned()]);
    assert!(check_new(&NewEvent::new("plug/x", json!(1)), 0, &t).is_err());
    assert!(check_new(&NewEvent::new("plug/x", json!(1)).ignorable(), 0, &t).is_ok());
    assert!(check_new(&NewEvent::new("approval/asked", json!({})), 0, &t).is_ok());
    let rec = |seq, kind: &str, ignorable| EventRecord {
        seq,
        time: 0,
        kind: kind.into(),
        data: json!({}),
        ignorable,
        surface_op: None,
        source_event_seqs: None,
    };
    let e = check_readable(&[rec(0, "plug/x", false)], &t).unwrap_err();
    assert!(e.is(StoreError::Unsupported), "{e}");
    assert!(check_readable(&[rec(0, "plug/x", true)], &t).is_ok());
    let e = check_readable(&[rec(1, "turn/start", false)], &t).unwrap_err();
    assert!(e.is(StoreError::Corrupt));
}

#[test]
fn ses09_other_header_version_is_unsupported_not_corrupt() {
    let e = parse_header(&json!({"type":"session","version":1,"id":"a","created_at":0,"cwd":"/"}))
        .unwrap_err();
    assert!(e.is(StoreError::Unsupported), "{e}");
    let e = parse_header(&json!({"version":7})).unwrap_err();
    assert!(e.is(StoreError::Unsupported));
    let e =
        parse_header(&json!({"type":"session","version":0,"id":"a","created_at":0,"cwd":"rel"}))
            .unwrap_err();
    assert!(e.is(StoreError::Corrupt));
    assert!(
        parse_header(&json!({"type":"session","version":0,"id":"a","created_at":0,"cwd":"/w"}))
            .is_ok()
    );
}
