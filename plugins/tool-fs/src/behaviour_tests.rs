//! Behaviour tests of the six tools on real files, with the B11 observation table behind the
//! hooks (FS-01…05). The table here is a test double of the `fs-policy` plugin's (nothing may
//! depend on a plugin crate); the kernel-level suite runs the two plugins together.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use keel_plugin_api::services::tools::{ToolInvocation, ToolResult};
use serde_json::{Value, json};
use std::collections::HashMap;

use crate::content::version_of;
use crate::hooks::{EditDecision, FsHooks, NoPolicy, Observation, WriteDecision};
use crate::tools::{FsConfig, FsTools};
use keel_plugin_api::services::tools::FsCode;

/// The B11 table as hooks, recording every observation.
#[derive(Default)]
struct Policy {
    state: Mutex<HashMap<(String, String), Observation>>,
    seen: Mutex<Vec<(String, Observation)>>,
}

impl FsHooks for Policy {
    fn write_intent(&self, s: &str, t: &str) -> Result<WriteDecision, String> {
        let state = self.state.lock().unwrap();
        Ok(match state.get(&(s.to_owned(), t.to_owned())) {
            None | Some(Observation::Absent) => WriteDecision::CreateIfAbsent,
            Some(Observation::Present { version }) => WriteDecision::ReplaceIfVersion {
                version: version.clone(),
            },
        })
    }
    fn edit_intent(&self, s: &str, t: &str) -> Result<EditDecision, String> {
        let state = self.state.lock().unwrap();
        Ok(match state.get(&(s.to_owned(), t.to_owned())) {
            None => EditDecision::Error {
                code: FsCode::NotObserved,
            },
            Some(Observation::Absent) => EditDecision::Error {
                code: FsCode::NotFound,
            },
            Some(Observation::Present { version }) => EditDecision::Version {
                version: version.clone(),
            },
        })
    }
    fn observed(&self, s: &str, t: &str, o: &Observation) {
        let key = (s.to_owned(), t.to_owned());
        self.state.lock().unwrap().insert(key, o.clone());
        self.seen.lock().unwrap().push((t.to_owned(), o.clone()));
    }
}

struct Fixture {
    dir: tempfile::TempDir,
    policy: Arc<Policy>,
    tools: FsTools,
}

impl Fixture {
    fn new() -> Self {
        Self::with_config(FsConfig::default())
    }

    fn with_config(config: FsConfig) -> Self {
        let policy = Arc::new(Policy::default());
        let tools = FsTools::new(config, policy.clone());
        Fixture {
            dir: tempfile::tempdir().unwrap(),
            policy,
            tools,
        }
    }

    fn root(&self) -> PathBuf {
        fs::canonicalize(self.dir.path()).unwrap()
    }

    fn put(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.root().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, content).unwrap();
        p
    }

    fn call(&self, name: &str, args: Value) -> ToolResult {
        self.tools.execute(&ToolInvocation {
            name: name.into(),
            call_id: "call-1".into(),
            session_id: "s1".into(),
            cwd: self.dir.path().to_string_lossy().into_owned(),
            args,
            timeout_ms: 0,
        })
    }
}

fn code(r: &ToolResult) -> &str {
    assert!(r.is_error, "expected an error, got {r:?}");
    r.error.as_ref().map_or("", |e| e.code.as_str())
}

fn ok(r: ToolResult) -> ToolResult {
    assert!(!r.is_error, "expected success, got {r:?}");
    r
}

// ---- read_file ---------------------------------------------------------------------------

// FS-02: a read numbers lines like cat -n and observes present@version.
#[test]
fn fs02_read_numbers_lines_and_observes_the_version() {
    let f = Fixture::new();
    let p = f.put("a.txt", "one\ntwo\r\nthree");
    let r = ok(f.call("read_file", json!({ "path": "a.txt" })));
    assert_eq!(r.content, "     1\tone\n     2\ttwo\n     3\tthree\n");
    let v = version_of(b"one\ntwo\r\nthree");
    assert_eq!(r.meta.unwrap()["version"], json!(v));
    let seen = f.policy.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![(
            p.to_string_lossy().into_owned(),
            Observation::Present { version: v }
        )]
    );
}

#[test]
fn read_range_notes_the_remaining_lines() {
    let f = Fixture::new();
    let body: String = (1..=10).map(|i| format!("l{i}\n")).collect();
    f.put("a.txt", &body);
    let r = ok(f.call(
        "read_file",
        json!({ "path": "a.txt", "offset": 3, "limit": 2 }),
    ));
    assert_eq!(
        r.content,
        "     3\tl3\n     4\tl4\n[6 more lines; continue with offset=5]"
    );
    // The version is of the whole file, not of the window.
    assert_eq!(
        r.meta.unwrap()["version"],
        json!(version_of(body.as_bytes()))
    );
    let r = ok(f.call("read_file", json!({ "path": "a.txt", "offset": 40 })));
    assert!(r.content.contains("past the end: the file has 10 lines"));
    let r = ok(f.call("read_file", json!({ "path": "a.txt", "offset": 9 })));
    assert_eq!(r.content, "     9\tl9\n    10\tl10\n");
}

#[test]
fn read_missing_is_not_found_and_observes_absent() {
    let f = Fixture::new();
    let r = f.call("read_file", json!({ "path": "nope.txt" }));
    assert_eq!(code(&r), "FS_NOT_FOUND");
    let seen = f.policy.seen.lock().unwrap().clone();
    assert_eq!(seen[0].1, Observation::Absent);
    assert!(seen[0].0.ends_with("/nope.txt"));
}

#[test]
fn read_refuses_binary_directories_and_large_files() {
    let f = Fixture::with_config(FsConfig {
        max_read_bytes: 64,
        ..FsConfig::default()
    });
    fs::write(f.root().join("bin"), b"abc\0def").unwrap();
    assert_eq!(
        code(&f.call("read_file", json!({ "path": "bin" }))),
        "FS_NOT_TEXT"
    );
    fs::write(f.root().join("latin1"), [b'a', 0xe9, b'\n']).unwrap();
    assert_eq!(
        code(&f.call("read_file", json!({ "path": "latin1" }))),
        "FS_NOT_TEXT"
    );
    fs::create_dir(f.root().join("d")).unwrap();
    assert_eq!(
        code(&f.call("read_file", json!({ "path": "d" }))),
        "FS_NOT_REGULAR_FILE"
    );
    let big: String = (1..=50).map(|i| format!("line {i}\n")).collect();
    f.put("big.txt", &big);
    assert_eq!(
        code(&f.call("read_file", json!({ "path": "big.txt" }))),
        "FS_TOO_LARGE"
    );
    // A range is allowed; its output stops at the byte cap with a continuation note.
    let r = ok(f.call("read_file", json!({ "path": "big.txt", "offset": 1 })));
    assert!(r.content.starts_with("     1\tline 1\n"));
    assert!(
        r.content.contains("output limit of 64 bytes reached"),
        "{}",
        r.content
    );
    assert!(r.content.contains("continue with offset="));
}

#[test]
fn read_empty_file() {
    let f = Fixture::new();
    f.put("e", "");
    assert_eq!(
        ok(f.call("read_file", json!({ "path": "e" }))).content,
        "(empty file)"
    );
}

// ---- write_file ---------------------------------------------------------------------------

// FS-04 / FS-05: an unseen target is created; the result carries op, version, before, after.
#[test]
fn fs04_write_creates_an_unseen_target_with_parents() {
    let f = Fixture::new();
    let r = ok(f.call(
        "write_file",
        json!({ "path": "new/dir/x.txt", "content": "hi\r\n" }),
    ));
    assert_eq!(
        fs::read_to_string(f.root().join("new/dir/x.txt")).unwrap(),
        "hi\r\n"
    );
    let target = fs::canonicalize(f.root().join("new/dir/x.txt")).unwrap();
    assert_eq!(
        r.meta.unwrap(),
        json!({ "op": "create", "target": target.to_string_lossy(),
                "version": version_of(b"hi\r\n"), "before": null, "after": "hi\n" })
    );
}

// FS-04: create-if-absent refuses an existing target the session has not read.
#[test]
fn fs04_write_over_an_unread_file_is_not_observed() {
    let f = Fixture::new();
    f.put("a.txt", "keep");
    let r = f.call("write_file", json!({ "path": "a.txt", "content": "x" }));
    assert_eq!(code(&r), "FS_NOT_OBSERVED");
    assert!(r.content.contains("read it with read_file first"));
    assert_eq!(fs::read_to_string(f.root().join("a.txt")).unwrap(), "keep");
}

// FS-04: after a read, the write replaces exactly that version and reports the new one.
#[test]
fn fs04_write_after_read_updates_and_chains() {
    let f = Fixture::new();
    f.put("a.txt", "v1");
    ok(f.call("read_file", json!({ "path": "a.txt" })));
    let r = ok(f.call("write_file", json!({ "path": "a.txt", "content": "v2" })));
    let meta = r.meta.unwrap();
    assert_eq!(meta["op"], "update");
    assert_eq!(meta["before"], "v1");
    // The write's own observation lets the session write again without re-reading.
    ok(f.call("write_file", json!({ "path": "a.txt", "content": "v3" })));
    assert_eq!(fs::read_to_string(f.root().join("a.txt")).unwrap(), "v3");
}

// FS-04: replace-if-version → a changed or deleted target is stale.
#[test]
fn fs04_write_of_a_changed_or_deleted_target_is_stale() {
    let f = Fixture::new();
    let p = f.put("a.txt", "v1");
    ok(f.call("read_file", json!({ "path": "a.txt" })));
    fs::write(&p, "changed elsewhere").unwrap();
    let r = f.call("write_file", json!({ "path": "a.txt", "content": "mine" }));
    assert_eq!(code(&r), "FS_STALE_VERSION");
    assert_eq!(fs::read_to_string(&p).unwrap(), "changed elsewhere");
    ok(f.call("read_file", json!({ "path": "a.txt" })));
    fs::remove_file(&p).unwrap();
    let r = f.call("write_file", json!({ "path": "a.txt", "content": "mine" }));
    assert_eq!(code(&r), "FS_STALE_VERSION");
    assert!(!p.exists());
}

/// Hooks whose decision slot creates the target "meanwhile", then decides create-if-absent.
struct Racer(PathBuf);

impl FsHooks for Racer {
    fn write_intent(&self, _: &str, _: &str) -> Result<WriteDecision, String> {
        fs::write(&self.0, "theirs").unwrap();
        Ok(WriteDecision::CreateIfAbsent)
    }
    fn observed(&self, _: &str, _: &str, _: &Observation) {}
}

// FS-04: publication never replaces a target that appeared after the decision.
#[test]
fn fs04_create_never_replaces_a_target_that_appears_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let p = fs::canonicalize(dir.path()).unwrap().join("x.txt");
    let tools = FsTools::new(FsConfig::default(), Arc::new(Racer(p.clone())));
    let r = tools.execute(&ToolInvocation {
        name: "write_file".into(),
        call_id: "c".into(),
        session_id: "s".into(),
        cwd: dir.path().to_string_lossy().into_owned(),
        args: json!({ "path": "x.txt", "content": "mine" }),
        timeout_ms: 0,
    });
    assert_eq!(code(&r), "FS_NOT_OBSERVED");
    assert_eq!(fs::read_to_string(&p).unwrap(), "theirs");
}

// FS-01: with no policy loaded the terminal's unconditional decision applies.
#[test]
fn fs01_without_a_policy_writes_are_unconditional() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a"), "old").unwrap();
    let tools = FsTools::new(FsConfig::default(), Arc::new(NoPolicy));
    let r = tools.execute(&ToolInvocation {
        name: "write_file".into(),
        call_id: "c".into(),
        session_id: "s".into(),
        cwd: dir.path().to_string_lossy().into_owned(),
        args: json!({ "path": "a", "content": "new" }),
        timeout_ms: 0,
    });
    assert_eq!(ok(r).meta.unwrap()["op"], "update");
    assert_eq!(fs::read_to_string(dir.path().join("a")).unwrap(), "new");
}

#[test]
fn write_over_a_directory_is_not_a_regular_file() {
    let f = Fixture::new();
    fs::create_dir(f.root().join("d")).unwrap();
    let r = f.call("write_file", json!({ "path": "d", "content": "x" }));
    assert_eq!(code(&r), "FS_NOT_REGULAR_FILE");
}

// ---- edit_file ----------------------------------------------------------------------------

// FS-03: edit of an unseen target → FS_NOT_OBSERVED; of one seen absent → FS_NOT_FOUND.
#[test]
fn fs03_edit_needs_a_prior_read() {
    let f = Fixture::new();
    let p = f.put("a.txt", "x");
    let args = json!({ "path": "a.txt", "old_string": "x", "new_string": "y" });
    assert_eq!(code(&f.call("edit_file", args.clone())), "FS_NOT_OBSERVED");
    assert_eq!(fs::read_to_string(&p).unwrap(), "x");
    f.call("read_file", json!({ "path": "gone.txt" }));
    let r = f.call(
        "edit_file",
        json!({ "path": "gone.txt", "old_string": "x", "new_string": "y" }),
    );
    assert_eq!(code(&r), "FS_NOT_FOUND");
    ok(f.call("read_file", json!({ "path": "a.txt" })));
    ok(f.call("edit_file", args));
    assert_eq!(fs::read_to_string(&p).unwrap(), "y");
}

// FS-05: a literal edit returns before and after, LF-normalised; CRLF files keep CRLF.
#[test]
fn fs05_edit_returns_lf_normalised_before_and_after() {
    let f = Fixture::new();
    let p = f.put("a.txt", "fn a() {\r\n    1\r\n}\r\n");
    ok(f.call("read_file", json!({ "path": "a.txt" })));
    let r = ok(f.call(
        "edit_file",
        json!({ "path": "a.txt", "old_string": "{\n    1\n}", "new_string": "{\n    2\n}" }),
    ));
    assert_eq!(
        fs::read_to_string(&p).unwrap(),
        "fn a() {\r\n    2\r\n}\r\n"
    );
    let meta = r.meta.unwrap();
    assert_eq!(meta["before"], "fn a() {\n    1\n}\n");
    assert_eq!(meta["after"], "fn a() {\n    2\n}\n");
    assert_eq!(
        meta["version"],
        json!(version_of(fs::read(&p).unwrap().as_slice()))
    );
    assert_eq!(meta["replacements"], 1);
}

#[test]
fn edit_literal_none_several_and_replace_all() {
    let f = Fixture::new();
    let p = f.put("a.txt", "a.b a.b");
    ok(f.call("read_file", json!({ "path": "a.txt" })));
    let e = |old: &str, all: bool| {
        f.call(
            "edit_file",
            json!({ "path": "a.txt", "old_string": old, "new_string": "X", "replace_all": all }),
        )
    };
    // Literal, not a regex: `a.b` does not match `axb`, `.` is not a wildcard.
    assert_eq!(code(&e("a*b", false)), "FS_EDIT_NOT_FOUND");
    let r = e("a.b", false);
    assert_eq!(code(&r), "FS_AMBIGUOUS_EDIT");
    assert!(r.content.contains("occurs 2 times"));
    assert_eq!(ok(e("a.b", true)).meta.unwrap()["replacements"], 2);
    assert_eq!(fs::read_to_string(&p).unwrap(), "X X");
    let r = f.call(
        "edit_file",
        json!({ "path": "a.txt", "old_string": "", "new_string": "y" }),
    );
    assert_eq!(code(&r), "INVALID_ARGUMENTS");
}

// FS-04: the version is checked before the literal is matched.
#[test]
fn fs04_edit_of_a_changed_file_is_stale_before_matching() {
    let f = Fixture::new();
    let p = f.put("a.txt", "hello");
    ok(f.call("read_file", json!({ "path": "a.txt" })));
    fs::write(&p, "hello world").unwrap();
    let r = f.call(
        "edit_file",
        json!({ "path": "a.txt", "old_string": "zzz", "new_string": "y" }),
    );
    assert_eq!(code(&r), "FS_STALE_VERSION");
    // Its own edit's observation lets the session edit again without re-reading.
    ok(f.call("read_file", json!({ "path": "a.txt" })));
    ok(f.call(
        "edit_file",
        json!({ "path": "a.txt", "old_string": "hello", "new_string": "hi" }),
    ));
    ok(f.call(
        "edit_file",
        json!({ "path": "a.txt", "old_string": "world", "new_string": "all" }),
    ));
    assert_eq!(fs::read_to_string(&p).unwrap(), "hi all");
}

/// Every edit is guarded by the same (initial) version.
struct FixedVersion(String);

impl FsHooks for FixedVersion {
    fn edit_intent(&self, _: &str, _: &str) -> Result<EditDecision, String> {
        Ok(EditDecision::Version {
            version: self.0.clone(),
        })
    }
    fn observed(&self, _: &str, _: &str, _: &Observation) {}
}

// FS-04: version check, match and replace are one critical section: of N concurrent edits
// guarded by the same version, exactly one wins and the rest are stale.
#[test]
fn fs04_concurrent_edits_of_one_version_admit_exactly_one() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.txt");
    fs::write(&p, "x").unwrap();
    let tools = Arc::new(FsTools::new(
        FsConfig::default(),
        Arc::new(FixedVersion(version_of(b"x"))),
    ));
    let cwd = dir.path().to_string_lossy().into_owned();
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let (tools, cwd) = (tools.clone(), cwd.clone());
            std::thread::spawn(move || {
                tools.execute(&ToolInvocation {
                    name: "edit_file".into(),
                    call_id: format!("c{i}"),
                    session_id: "s".into(),
                    cwd,
                    args: json!({ "path": "a.txt", "old_string": "x", "new_string": format!("t{i}") }),
                    timeout_ms: 0,
                })
            })
        })
        .collect();
    let results: Vec<ToolResult> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let wins = results.iter().filter(|r| !r.is_error).count();
    assert_eq!(wins, 1);
    for r in results.iter().filter(|r| r.is_error) {
        assert_eq!(code(r), "FS_STALE_VERSION");
    }
    assert!(tools.locks.with(Path::new("/probe"), || true));
}

// ---- list_dir, glob, grep ----------------------------------------------------------------

#[test]
fn list_dir_sorts_and_marks_directories() {
    let f = Fixture::new();
    f.put("b.txt", "");
    f.put("a/inner", "");
    f.put(".hidden", "");
    let r = ok(f.call("list_dir", json!({ "path": "." })));
    assert_eq!(r.content, ".hidden\na/\nb.txt");
    assert_eq!(
        code(&f.call("list_dir", json!({ "path": "b.txt" }))),
        "FS_NOT_DIRECTORY"
    );
    assert_eq!(
        code(&f.call("list_dir", json!({ "path": "zz" }))),
        "FS_NOT_FOUND"
    );
}

#[test]
fn glob_matches_relative_sorted_and_honours_gitignore() {
    let f = Fixture::new();
    for p in [
        "src/b.rs",
        "src/a.rs",
        "src/deep/c.rs",
        "top.rs",
        "x.txt",
        ".github/ci.yml",
    ] {
        f.put(p, "");
    }
    f.put(".gitignore", "target/\n");
    f.put("target/gen.rs", "");
    f.put(".git/HEAD.rs", "");
    let r = ok(f.call("glob", json!({ "pattern": "**/*.rs" })));
    assert_eq!(r.content, "src/a.rs\nsrc/b.rs\nsrc/deep/c.rs\ntop.rs");
    assert_eq!(
        ok(f.call("glob", json!({ "pattern": "*.rs" }))).content,
        "top.rs"
    );
    assert_eq!(
        ok(f.call("glob", json!({ "pattern": "*.rs", "path": "src" }))).content,
        "a.rs\nb.rs"
    );
    assert_eq!(
        ok(f.call("glob", json!({ "pattern": ".github/*.{yml,yaml}" }))).content,
        ".github/ci.yml"
    );
    let abs = format!("{}/src/*.rs", f.root().display());
    assert_eq!(
        ok(f.call("glob", json!({ "pattern": abs }))).content,
        "a.rs\nb.rs"
    );
    assert_eq!(
        code(&f.call("glob", json!({ "pattern": "[" }))),
        "INVALID_ARGUMENTS"
    );
}

#[test]
fn glob_and_grep_cap_their_output_with_a_note() {
    let f = Fixture::with_config(FsConfig {
        max_results: 2,
        ..FsConfig::default()
    });
    for i in 0..5 {
        f.put(&format!("f{i}.txt"), "hit\nhit\n");
    }
    let r = ok(f.call("glob", json!({ "pattern": "*.txt" })));
    assert_eq!(
        r.content,
        "f0.txt\nf1.txt\n[showing 2 of 5 matches; narrow the pattern]"
    );
    let r = ok(f.call("grep", json!({ "pattern": "hit" })));
    assert_eq!(
        r.content,
        "f0.txt:1:hit\nf0.txt:2:hit\n[showing 2 of 10 matching lines; narrow the pattern, path or glob]"
    );
}

#[test]
fn grep_prints_path_line_text_and_filters() {
    let f = Fixture::new();
    f.put("src/main.rs", "fn main() {\n    run();\n}\n");
    f.put("src/lib.rs", "pub fn run() {}\n");
    f.put("notes.md", "run the thing\n");
    fs::write(f.root().join("blob.bin"), b"run\0run").unwrap();
    let r = ok(f.call("grep", json!({ "pattern": r"\brun\b" })));
    assert_eq!(
        r.content,
        "notes.md:1:run the thing\nsrc/lib.rs:1:pub fn run() {}\nsrc/main.rs:2:    run();"
    );
    let r = ok(f.call("grep", json!({ "pattern": "run", "glob": "*.rs" })));
    assert_eq!(
        r.content,
        "src/lib.rs:1:pub fn run() {}\nsrc/main.rs:2:    run();"
    );
    let r = ok(f.call("grep", json!({ "pattern": "run", "glob": "src/m*.rs" })));
    assert_eq!(r.content, "src/main.rs:2:    run();");
    let r = ok(f.call("grep", json!({ "pattern": "fn", "path": "src/lib.rs" })));
    assert_eq!(r.content, "src/lib.rs:1:pub fn run() {}");
    assert_eq!(
        ok(f.call("grep", json!({ "pattern": "nothing" }))).content,
        "No matches."
    );
    assert_eq!(
        code(&f.call("grep", json!({ "pattern": "(" }))),
        "INVALID_ARGUMENTS"
    );
    assert_eq!(
        code(&f.call("grep", json!({ "pattern": "x", "path": "nope" }))),
        "FS_NOT_FOUND"
    );
}
