//! Unit tests for layer-file parsing: shapes, file order, ids, and error locations.

use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::test_support::obj;

fn profile(text: &str) -> Result<ParsedLayer, ConfigError> {
    parse_layer(text, Path::new("/cfg/profiles/p.toml"), None)
}

fn bundle(text: &str) -> Result<ParsedLayer, ConfigError> {
    parse_layer(
        text,
        Path::new("/cfg/bundles/b.toml"),
        Some(&LayerKind::Bundle("b".into())),
    )
}

#[test]
fn parses_profile_keys_kernel_and_ops_in_file_order() {
    let text = r#"description = "demo"
bundles = ["base", "headless"]

[kernel]
fault_threshold = 5

[[disable]]
id = "agent-loop"

[[insert]]
id = "agent-loop"
plugin = "agent-loop"
config = { max_steps = 20, nested = { a = [1, 2] } }

[[replace]]
id = "telemetry"

[[insert]]
id = "shell"
plugin = "tools-shell"
"#;
    let parsed = profile(text).unwrap();
    assert_eq!(parsed.description.as_deref(), Some("demo"));
    assert_eq!(
        parsed.bundles,
        vec![
            BundleRef {
                name: "base".into(),
                line: 2
            },
            BundleRef {
                name: "headless".into(),
                line: 2
            },
        ]
    );
    assert_eq!(
        parsed.ops.kernel,
        KernelPatch {
            fault_threshold: Some(5),
            listener_deadline_ms: None,
            activation_deadline_ms: None
        }
    );
    let expected = vec![
        RowOp {
            action: RowAction::Disable {
                id: "agent-loop".into(),
            },
            line: Some(7),
        },
        RowOp {
            action: RowAction::Insert {
                id: "agent-loop".into(),
                plugin: "agent-loop".into(),
                config: obj(json!({ "max_steps": 20, "nested": { "a": [1, 2] } })),
            },
            line: Some(10),
        },
        // `replace` without `config` replaces with an empty table.
        RowOp {
            action: RowAction::Replace {
                id: "telemetry".into(),
                config: obj(json!({})),
            },
            line: Some(15),
        },
        RowOp {
            action: RowAction::Insert {
                id: "shell".into(),
                plugin: "tools-shell".into(),
                config: obj(json!({})),
            },
            line: Some(18),
        },
    ];
    assert_eq!(parsed.ops.ops, expected);
}

#[test]
fn empty_file_is_an_empty_layer() {
    assert_eq!(bundle("").unwrap(), ParsedLayer::default());
}

// Issue 14: a row config names a file shipped beside its layer file with `${this_dir}`.
#[test]
fn this_dir_is_the_directory_of_the_layer_file() {
    let parsed = profile(
        "[[insert]]\nid = \"a\"\nplugin = \"p\"\nconfig = { prompt = \"${this_dir}/prompts/s.md\", list = [\"${this_dir}\"], plain = \"$this_dir\" }\n",
    )
    .unwrap();
    let RowAction::Insert { config, .. } = &parsed.ops.ops[0].action else {
        panic!("not an insert");
    };
    assert_eq!(
        serde_json::Value::Object(config.clone()),
        json!({ "prompt": "/cfg/profiles/prompts/s.md", "list": ["/cfg/profiles"], "plain": "$this_dir" })
    );
}

#[test]
fn datetimes_become_strings_and_floats_stay_numbers() {
    let parsed = bundle(
        "[[insert]]\nid = \"a\"\nplugin = \"p\"\nconfig = { at = 1979-05-27T07:32:00Z, day = 1979-05-27, t = 0.5 }\n",
    )
    .unwrap();
    let RowAction::Insert { config, .. } = &parsed.ops.ops[0].action else {
        panic!("not an insert");
    };
    assert_eq!(
        serde_json::Value::Object(config.clone()),
        json!({ "at": "1979-05-27T07:32:00Z", "day": "1979-05-27", "t": 0.5 })
    );
}

#[test]
fn malformed_toml_names_file_line_and_column_on_one_line() {
    let text = "[[insert]]\nid = \"a\"\nplugin = 'p\n";
    // Our line/column agree with toml's own rendering of the same error.
    let native = toml::from_str::<toml::Table>(text).unwrap_err().to_string();
    assert!(native.contains("line 3, column 12"), "{native}");
    let err = bundle(text).unwrap_err();
    assert_eq!(err.code(), "CONFIG_PARSE");
    let ConfigError::Parse {
        path, line, col, ..
    } = &err
    else {
        panic!("unexpected {err:?}");
    };
    assert_eq!(
        (path.as_path(), *line, *col),
        (Path::new("/cfg/bundles/b.toml"), 3, 12)
    );
    let shown = err.to_string();
    assert!(shown.starts_with("/cfg/bundles/b.toml:3:12: "), "{shown}");
    assert!(!shown.contains('\n'), "{shown:?}");
}

#[test]
fn unknown_top_level_key_is_an_error_with_its_line() {
    let err = profile("bundles = []\n\nbundle = [\"x\"]\n").unwrap_err();
    let shown = err.to_string();
    assert!(
        shown.starts_with("/cfg/profiles/p.toml:3:1: unknown field `bundle`"),
        "{shown}"
    );
}

#[test]
fn unknown_key_inside_an_op_or_kernel_is_an_error_with_its_line() {
    let err = bundle("[[replace]]\nid = \"a\"\nconfg = { x = 1 }\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/cfg/bundles/b.toml:3:1: unknown field `confg`"),
        "{err}"
    );
    let err = bundle("[kernel]\nfault_treshold = 1\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/cfg/bundles/b.toml:2:1: unknown field"),
        "{err}"
    );
    // `plugin` is not allowed in a replace: only the config is replaced.
    let err = bundle("[[replace]]\nid = \"a\"\nplugin = \"p\"\n").unwrap_err();
    assert_eq!(err.code(), "CONFIG_PARSE");
}

#[test]
fn wrong_types_and_missing_fields_are_parse_errors() {
    let err = bundle("[[insert]]\nid = \"a\"\n").unwrap_err();
    assert!(err.to_string().contains("missing field `plugin`"), "{err}");
    let err = bundle("[[insert]]\nid = \"a\"\nplugin = \"p\"\nconfig = 3\n").unwrap_err();
    assert!(
        err.to_string().starts_with("/cfg/bundles/b.toml:4:10: "),
        "{err}"
    );
    let err = bundle("[kernel]\nfault_threshold = -1\n").unwrap_err();
    assert_eq!(err.code(), "CONFIG_PARSE");
}

#[test]
fn invalid_row_id_is_an_error_naming_file_and_line() {
    let err = bundle("\n[[insert]]\nid = \"Agent_Loop\"\nplugin = \"p\"\n").unwrap_err();
    assert_eq!(err.code(), "CONFIG_INVALID_ID");
    assert_eq!(
        err.to_string(),
        "/cfg/bundles/b.toml:3:6: invalid row id 'Agent_Loop': expected [a-z0-9][a-z0-9-]*"
    );
    let err = bundle("[[disable]]\nid = \"\"\n").unwrap_err();
    assert_eq!(err.code(), "CONFIG_INVALID_ID");
    let err = bundle("[[insert]]\nid = \"a\"\nplugin = \"-p\"\n").unwrap_err();
    assert!(
        err.to_string().contains("invalid plugin name '-p'"),
        "{err}"
    );
    let err = profile("bundles = [\"ok\", \"../etc\"]\n").unwrap_err();
    assert!(
        err.to_string()
            .contains("1:18: invalid bundle name '../etc'"),
        "{err}"
    );
}

#[test]
fn bundles_and_description_are_profile_only() {
    let err = bundle("\nbundles = [\"base\"]\n").unwrap_err();
    assert_eq!(err.code(), "CONFIG_PROFILE_ONLY_KEY");
    assert_eq!(
        err.to_string(),
        "/cfg/bundles/b.toml:2:11: `bundles` is only allowed in a profile, not in a bundle:b layer"
    );
    let err = LayerOps::parse(
        "description = \"x\"\n",
        Path::new("/h/config.toml"),
        &LayerKind::User,
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("`description` is only allowed in a profile, not in a user layer")
    );
}

#[test]
fn id_charset() {
    for ok in ["a", "0", "agent-loop", "llm-openai2", "a-"] {
        assert!(is_valid_id(ok), "{ok}");
    }
    for bad in ["", "-a", "A", "a_b", "a.b", "a b", "é"] {
        assert!(!is_valid_id(bad), "{bad}");
    }
}

#[test]
fn line_col_counts_lines_and_characters() {
    let text = "ab\nçd\nef";
    assert_eq!(line_col(text, 0), (1, 1));
    assert_eq!(line_col(text, 3), (2, 1));
    // 'd' is after the two-byte 'ç': byte 5, column 2.
    assert_eq!(line_col(text, 5), (2, 2));
    assert_eq!(line_col(text, 4), (2, 1), "inside a char rounds down");
    assert_eq!(line_col(text, 100), (3, 3), "past the end clamps");
}

#[test]
fn in_memory_ops_are_validated_against_the_layer() {
    let layer = LayerRef::new(LayerKind::Launcher, "presets");
    let ops = LayerOps::default()
        .insert("ok", "p", obj(json!({})))
        .disable("Bad");
    let err = ops.validate_ids(&layer).unwrap_err();
    assert_eq!(
        err.to_string(),
        "launcher (presets): invalid row id 'Bad': expected [a-z0-9][a-z0-9-]*"
    );
}
