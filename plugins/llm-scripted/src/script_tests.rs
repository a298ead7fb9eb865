//! Script loading: both file formats, relative paths, and malformed scripts failing with the file
//! named and the problem stated.

use super::*;
use serde_json::json;

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

const TOML_SCRIPT: &str = r#"
[[steps]]
reasoning = "look first"
tool_calls = [
  { name = "read_file", arguments = { path = "a.txt" } },
  { name = "glob", arguments = '{"pattern":"*.rs"}' },
]
usage = { input_tokens = 10, output_tokens = 4 }

[[steps]]
text = "done"
delay_ms = 5
"#;

#[test]
fn toml_file_loads_with_tables_and_raw_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(&dir, "demo.toml", TOML_SCRIPT);
    let s = load_file(&p).unwrap();
    assert!(s.source.contains("demo.toml"), "{}", s.source);
    assert_eq!(s.steps.len(), 2);
    let calls = &s.steps[0].tool_calls;
    assert_eq!(calls[0].raw_arguments(), r#"{"path":"a.txt"}"#);
    assert_eq!(calls[1].raw_arguments(), r#"{"pattern":"*.rs"}"#);
    assert_eq!(
        s.steps[0].usage,
        Some(ScriptUsage {
            input_tokens: 10,
            output_tokens: 4
        })
    );
    assert_eq!(s.steps[1].delay_ms, Some(5));
}

#[test]
fn json_file_loads_as_object_or_bare_array() {
    let dir = tempfile::tempdir().unwrap();
    let steps = json!([{"text": "hi", "finish": "length"}, {"error": {"code": "SERVER", "message": "boom"}}]);
    let a = write(&dir, "a.json", &json!({"steps": steps}).to_string());
    let b = write(&dir, "b.json", &steps.to_string());
    let sa = load_file(&a).unwrap();
    let sb = load_file(&b).unwrap();
    assert_eq!(sa.steps, sb.steps);
    assert_eq!(sa.steps[0].finish, Some(Finish::Length));
    assert_eq!(sa.steps[1].error.as_ref().unwrap().code.as_str(), "SERVER");
}

#[test]
fn relative_paths_resolve_against_the_working_dir() {
    // The crate dir is the test's working dir; a path relative to it must load.
    let dir = tempfile::tempdir_in(".").unwrap();
    let p = write(&dir, "rel.toml", "[[steps]]\ntext = \"x\"\n");
    let rel = p.strip_prefix(std::env::current_dir().unwrap()).unwrap();
    assert!(rel.is_relative());
    let s = load_file(rel).unwrap();
    assert!(std::path::Path::new(s.source.trim_start_matches("script ")).is_absolute());
}

fn error_for(name: &str, text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let p = write(&dir, name, text);
    let e = load_file(&p).unwrap_err();
    assert!(e.contains(name), "the error must name the file: {e}");
    e
}

#[test]
fn malformed_scripts_name_the_file_and_the_problem() {
    assert!(error_for("missing.toml", "").contains("missing field `steps`"));
    assert!(error_for("typo.toml", "[[steps]]\ntxt = \"x\"\n").contains("txt"));
    assert!(error_for("bad.json", "{\"steps\": [").contains("not a valid JSON script"));
    assert!(error_for("empty.toml", "steps = []\n").contains("has no steps"));
    assert!(
        error_for(
            "both.toml",
            "[[steps]]\nfinish = \"stop\"\nerror = { code = \"SERVER\", message = \"y\" }\n"
        )
        .contains("step 0: `error` and `finish` are exclusive")
    );
    assert!(
        error_for(
            "args.toml",
            "[[steps]]\ntool_calls = [{ name = \"glob\", arguments = 3 }]\n"
        )
        .contains("`arguments` must be a string or a table/object")
    );
    assert!(error_for("finish.toml", "[[steps]]\nfinish = \"later\"\n").contains("later"));
    // Issue 12 item 3: a scripted failure must use an LLM code, named when it does not.
    assert!(
        error_for(
            "code.toml",
            "[[steps]]\nerror = { code = \"NOPE\", message = \"y\" }\n"
        )
        .contains("unknown llm code `NOPE`")
    );
    assert!(
        error_for("noname.json", r#"[{"tool_calls": [{"name": ""}]}]"#).contains("empty `name`")
    );
}

#[test]
fn missing_file_is_named() {
    let e = load_file(std::path::Path::new("surely/not/here.toml")).unwrap_err();
    assert!(e.contains("cannot read script"), "{e}");
    assert!(e.contains("surely/not/here.toml"), "{e}");
}

#[test]
fn inline_steps_are_checked_too() {
    let e = from_inline(vec![]).unwrap_err();
    assert_eq!(e, "inline steps has no steps");
}
