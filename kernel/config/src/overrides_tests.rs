//! Unit tests for `-c ROW.KEY=VALUE` parsing and key setting.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn value_of(arg: &str) -> Value {
    Override::parse(arg).unwrap().value
}

#[test]
fn values_are_toml_when_they_parse() {
    assert_eq!(value_of("r.k=5"), json!(5));
    assert_eq!(value_of("r.k=-2.5"), json!(-2.5));
    assert_eq!(value_of("r.k=true"), json!(true));
    assert_eq!(value_of("r.k=\"s p\""), json!("s p"));
    assert_eq!(value_of("r.k='lit'"), json!("lit"));
    assert_eq!(value_of("r.k=[1, \"a\"]"), json!([1, "a"]));
    assert_eq!(
        value_of("r.k={a=1, b={c=true}}"),
        json!({ "a": 1, "b": { "c": true } })
    );
    assert_eq!(value_of("r.k=1979-05-27"), json!("1979-05-27"));
}

#[test]
fn unparsable_values_are_plain_strings() {
    assert_eq!(value_of("r.k=gpt-4o"), json!("gpt-4o"));
    assert_eq!(value_of("r.k=hello world"), json!("hello world"));
    assert_eq!(value_of("r.k="), json!(""));
    // Everything after the first '=' is the value, dots and '=' included.
    assert_eq!(
        value_of("llm.base_url=http://127.0.0.1:8080/v1?a=b"),
        json!("http://127.0.0.1:8080/v1?a=b")
    );
    // Text that would smuggle in a second TOML key stays one string.
    assert_eq!(value_of("r.k=1\nother = 2"), json!("1\nother = 2"));
}

#[test]
fn row_splits_at_the_first_dot_and_key_may_be_dotted() {
    let ov = Override::parse("agent-loop.limits.max_steps=3").unwrap();
    assert_eq!(ov.row, "agent-loop");
    assert_eq!(ov.path, vec!["limits".to_owned(), "max_steps".to_owned()]);
    assert_eq!(ov.top_key(), "limits");
    assert_eq!(ov.source(), "-c agent-loop.limits.max_steps=3");
}

#[test]
fn malformed_arguments_are_errors_quoting_the_argument() {
    for (arg, reason) in [
        ("agent-loop.max_steps", "missing '='"),
        ("agent-loop=3", "missing '.'"),
        (".max_steps=3", "empty row id"),
        ("agent-loop.=3", "empty key"),
        ("agent-loop.a..b=3", "empty segment"),
    ] {
        let err = Override::parse(arg).unwrap_err();
        assert_eq!(err.code(), "CONFIG_BAD_OVERRIDE");
        let shown = err.to_string();
        assert!(
            shown.starts_with(&format!("bad override '-c {arg}': ")),
            "{shown}"
        );
        assert!(shown.contains(reason), "{shown}");
    }
}

#[test]
fn set_path_creates_intermediate_tables() {
    let mut config = json!({ "keep": 1 });
    set_path(
        &mut config,
        &["a".into(), "b".into(), "c".into()],
        json!(true),
    )
    .unwrap();
    set_path(&mut config, &["keep".into()], json!(2)).unwrap();
    assert_eq!(config, json!({ "keep": 2, "a": { "b": { "c": true } } }));
}

#[test]
fn set_path_through_a_scalar_is_an_error() {
    let mut config = json!({ "a": { "b": 5 } });
    let err = set_path(&mut config, &["a".into(), "b".into(), "c".into()], json!(1)).unwrap_err();
    assert_eq!(err, "key 'a.b' is not a table");
    assert_eq!(config, json!({ "a": { "b": 5 } }), "unchanged on error");
}
