//! FS-06 containment through the hooks seam: a fence standing in for `keel.sandbox`'s
//! `check_path` (nothing may depend on the sandbox plugin crate; the kernel-level suite runs
//! the two together). Writes outside are `FS_SANDBOX_DENIED` with the marker, and a symlinked
//! ancestor swapped between the first check and the write is caught by the fresh re-check.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use keel_plugin_api::services::tools::{ToolInvocation, ToolResult};
use serde_json::{Value, json};

use crate::error::{FsError, FsErrorCode, FsResult};
use crate::hooks::{EditDecision, FsHooks, Observation, WriteDecision};
use crate::tools::{FsConfig, FsTools, Scope};

const MARKER: &str = "[sandbox: file access denied under workspace-write mode]";

/// Writes allowed only under `root`; `decide` performs one pending link swap (the race).
struct Fence {
    root: PathBuf,
    swap: Mutex<Option<(PathBuf, PathBuf)>>,
}

impl Fence {
    fn swap_once(&self) {
        if let Some((link, to)) = self.swap.lock().unwrap().take() {
            std::fs::remove_file(&link).unwrap();
            std::os::unix::fs::symlink(to, link).unwrap();
        }
    }
}

impl FsHooks for Fence {
    fn write_intent(&self, _s: &str, _t: &str) -> Result<WriteDecision, String> {
        self.swap_once();
        Ok(WriteDecision::Unconditional)
    }
    fn edit_intent(&self, _s: &str, _t: &str) -> Result<EditDecision, String> {
        self.swap_once();
        Ok(EditDecision::Unconditional)
    }
    fn observed(&self, _s: &str, _t: &str, _o: &Observation) {}
    fn check_write(&self, _scope: Scope<'_>, target: &Path) -> FsResult<()> {
        if target.starts_with(&self.root) {
            Ok(())
        } else {
            Err(FsError::fs(
                FsErrorCode::SandboxDenied,
                format!("{MARKER} writing {} is not allowed", target.display()),
            ))
        }
    }
}

struct Fixture {
    ws: tempfile::TempDir,
    outside: tempfile::TempDir,
    fence: Arc<Fence>,
    tools: FsTools,
}

fn fixture() -> Fixture {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let fence = Arc::new(Fence {
        root: std::fs::canonicalize(ws.path()).unwrap(),
        swap: Mutex::new(None),
    });
    let tools = FsTools::new(FsConfig::default(), fence.clone());
    Fixture {
        ws,
        outside,
        fence,
        tools,
    }
}

impl Fixture {
    fn call(&self, name: &str, args: Value) -> ToolResult {
        self.tools.execute(&ToolInvocation {
            name: name.into(),
            call_id: "c1".into(),
            session_id: "s1".into(),
            cwd: self.ws.path().to_string_lossy().into_owned(),
            args,
            timeout_ms: 0,
        })
    }
}

fn code(r: &ToolResult) -> Option<&str> {
    r.error.as_ref().map(|e| e.code.as_str())
}

// FS-06: inside the workspace writes work; absolute, `../` and symlinked escapes are denied
// with FS_SANDBOX_DENIED and the shared marker, and nothing is written.
#[test]
fn fs06_writes_outside_the_workspace_are_denied() {
    let f = fixture();
    let ok = f.call("write_file", json!({ "path": "a.txt", "content": "x" }));
    assert!(!ok.is_error, "{ok:?}");
    let escape = f.outside.path().join("e.txt");
    let abs = f.call(
        "write_file",
        json!({ "path": escape.to_string_lossy(), "content": "x" }),
    );
    assert_eq!(code(&abs), Some("FS_SANDBOX_DENIED"), "{abs:?}");
    assert!(abs.content.contains(MARKER), "{}", abs.content);
    let up = f.call(
        "write_file",
        json!({ "path": "../keel-up.txt", "content": "x" }),
    );
    assert_eq!(code(&up), Some("FS_SANDBOX_DENIED"));
    std::os::unix::fs::symlink(f.outside.path(), f.ws.path().join("out")).unwrap();
    let link = f.call("write_file", json!({ "path": "out/e.txt", "content": "x" }));
    assert_eq!(code(&link), Some("FS_SANDBOX_DENIED"));
    assert!(!escape.exists());
    // edit_file is fenced the same way.
    std::fs::write(f.outside.path().join("o.txt"), "old").unwrap();
    let edit = f.call(
        "edit_file",
        json!({ "path": "out/o.txt", "old_string": "old", "new_string": "new" }),
    );
    assert_eq!(code(&edit), Some("FS_SANDBOX_DENIED"));
    assert_eq!(
        std::fs::read_to_string(f.outside.path().join("o.txt")).unwrap(),
        "old"
    );
}

// FS-06 TOCTOU: the link `d` points inside at the first check, is swapped to point outside
// before the write; the fresh re-check in the critical section catches it.
#[test]
fn fs06_symlink_swapped_between_check_and_write_is_caught() {
    let f = fixture();
    let inside = f.ws.path().join("real");
    std::fs::create_dir(&inside).unwrap();
    let link = f.ws.path().join("d");
    std::os::unix::fs::symlink(&inside, &link).unwrap();
    *f.fence.swap.lock().unwrap() = Some((link, f.outside.path().to_path_buf()));
    let r = f.call("write_file", json!({ "path": "d/f.txt", "content": "x" }));
    assert_eq!(code(&r), Some("FS_SANDBOX_DENIED"), "{r:?}");
    assert!(!f.outside.path().join("f.txt").exists());
    assert!(!inside.join("f.txt").exists());
}

// Issue 10 items 1-2: keel's home is neither read nor written by any file tool (a walk from
// above it skips it, a link into it leads nowhere); the project's .keel is read, never written.
#[test]
fn keel_files_are_out_of_the_file_tools_reach() {
    let mut f = fixture();
    let home = f.ws.path().join("home");
    std::fs::create_dir_all(home.join("secrets")).unwrap();
    std::fs::write(home.join("credentials.toml"), "K = \"sk-hidden-1234\"\n").unwrap();
    std::fs::create_dir_all(f.ws.path().join(".keel")).unwrap();
    std::fs::write(f.ws.path().join(".keel/config.toml"), "# layer\n").unwrap();
    std::os::unix::fs::symlink(&home, f.ws.path().join("link")).unwrap();
    f.tools = FsTools::new(FsConfig::default(), f.fence.clone()).with_keel_home(home.clone());

    for (tool, args) in [
        ("read_file", json!({"path": "home/credentials.toml"})),
        ("read_file", json!({"path": "link/credentials.toml"})),
        ("list_dir", json!({"path": "home/secrets"})),
        ("grep", json!({"pattern": "sk-", "path": "home"})),
        (
            "write_file",
            json!({"path": "home/config.toml", "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": ".keel/config.toml", "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": ".keel/other.toml", "content": "x"}),
        ),
        (
            "edit_file",
            json!({"path": ".keel/config.toml", "old_string": "layer", "new_string": "x"}),
        ),
    ] {
        let r = f.call(tool, args.clone());
        assert_eq!(code(&r), Some("FS_SANDBOX_DENIED"), "{tool} {args}: {r:?}");
        assert!(r.content.contains("keel's own files"), "{}", r.content);
    }
    // A search from above finds nothing inside the home.
    let r = f.call("grep", json!({"pattern": "sk-hidden"}));
    assert!(!r.content.contains("sk-hidden"), "{}", r.content);
    let r = f.call("glob", json!({"pattern": "**/*.toml"}));
    assert!(!r.content.contains("credentials"), "{}", r.content);
    assert!(r.content.contains(".keel/config.toml"), "{}", r.content);
    // Reading the project layer is fine; nothing was written.
    let r = f.call("read_file", json!({"path": ".keel/config.toml"}));
    assert!(!r.is_error, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(f.ws.path().join(".keel/config.toml")).unwrap(),
        "# layer\n"
    );
    assert!(!home.join("config.toml").exists());
}
