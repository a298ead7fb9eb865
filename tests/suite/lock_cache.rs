//! The digest cache through the binary (issue 25 item 2): a warm `$KEEL_HOME/cache` answers a
//! start without reading the libraries, and the lock still refuses a library changed under it
//! — even one changed with its mtime put back — before it is opened. A cache someone else could
//! write is not believed; a cached digest the lock refuses is read again before any refusal.
//!
//! Each test waits once for keel's racy margin (`keel_digest::racy_margin`, ~40 s: the
//! kernel's writeback delay): entries recorded sooner after a library was written never answer.

use std::fs::{FileTimes, OpenOptions};
use std::io::{Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use keel_tests::{Env, Run};

use crate::suite::lock::{
    CONSUMER, DRIVER, PROVIDER, digest, dlopened, lib, lock_path, locked, refused_before_opening,
};

const RUN: &[&str] = &["run", "--profile", "p", "counter"];

const FAKE: &str = "blake3:0000000000000000000000000000000000000000000000000000000000000000";

fn cache_file(env: &Env) -> PathBuf {
    env.home().join("cache/library-digests")
}

/// A run with the digest log on.
fn run_logged(env: &Env) -> Run {
    env.keel_with(
        RUN,
        &[("KEEL_LOG", std::ffi::OsStr::new("keel::digest=debug"))],
    )
}

/// `(cached, hashed)` from each of the run's `library digests` lines.
fn counts(run: &Run) -> Vec<(usize, usize)> {
    let field = |line: &str, name: &str| -> usize {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line}"))
    };
    run.stderr
        .lines()
        .filter(|l| l.contains("library digests"))
        .map(|l| (field(l, "cached"), field(l, "hashed")))
        .collect()
}

/// A locked tree whose three libraries the cache answers for; `None` (said on stderr) where
/// the tree is in memory-only storage, which the cache never trusts.
fn warm() -> Option<Env> {
    let env = locked(&format!("{DRIVER}{PROVIDER}{CONSUMER}"));
    let provider = std::fs::File::open(lib(&env, "proof-provider")).expect("open");
    if !keel_digest::cacheable(&provider) {
        eprintln!("note: the test tree is on tmpfs, where the digest cache never answers");
        return None;
    }
    std::fs::set_permissions(env.home(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    std::thread::sleep(keel_digest::racy_margin() + Duration::from_millis(300));
    // `keel lock` hashed everything right after the copy (racy entries); this run hashes once
    // more and records settled ones.
    env.keel(RUN).expect_code(0);
    let run = run_logged(&env);
    run.expect_code(0);
    assert_eq!(counts(&run), [(3, 0)], "a warm start still hashed");
    let meta = std::fs::metadata(cache_file(&env)).expect("the cache under $KEEL_HOME");
    assert_eq!(meta.mode() & 0o777, 0o600);
    env.clear_trace();
    Some(env)
}

/// Changes one byte of `path`, keeping its size, and puts its mtime back. The byte is in the
/// compiler's `.comment` note (never mapped), so the file still loads where a test lets it.
fn tamper_keeping_mtime(path: &Path) {
    let before = std::fs::metadata(path).expect("stat");
    let bytes = std::fs::read(path).expect("read");
    let at = bytes
        .windows(13)
        .position(|w| w == b"rustc version")
        .expect("a .comment naming rustc");
    let mut f = OpenOptions::new().write(true).open(path).expect("open");
    f.seek(SeekFrom::Start(at as u64)).expect("seek");
    f.write_all(b"R").expect("write");
    f.set_times(FileTimes::new().set_modified(before.modified().expect("mtime")))
        .expect("utimensat");
    let after = std::fs::metadata(path).expect("stat");
    assert_eq!(
        (after.len(), after.mtime(), after.mtime_nsec()),
        (before.len(), before.mtime(), before.mtime_nsec())
    );
}

/// Rewrites the cache as a writer of it could: the entry for `path` now says `digest`.
fn forge(env: &Env, path: &Path, digest: &str) {
    let text = std::fs::read_to_string(cache_file(env)).expect("cache");
    let (_, body) = text.split_once('\n').expect("header");
    let mut entries: Vec<serde_json::Value> = serde_json::from_str(body).expect("json");
    let shown = path.display().to_string();
    let entry = entries
        .iter_mut()
        .find(|e| e["path"] == shown.as_str())
        .expect("an entry for the library");
    entry["digest"] = digest.into();
    let body = serde_json::to_string(&entries).expect("json");
    let sum = blake3::hash(body.as_bytes()).to_hex();
    let file = cache_file(env);
    std::fs::write(
        &file,
        format!("keel library digests v1 blake3:{sum}\n{body}"),
    )
    .expect("write");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

#[test]
fn issue25_a_tampered_library_is_refused_even_with_a_warm_cache() {
    let Some(env) = warm() else {
        return;
    };
    // A corrupt cache costs a hash, not a start, and is written afresh.
    let text = std::fs::read_to_string(cache_file(&env)).expect("cache");
    std::fs::write(cache_file(&env), text.replacen("\"ino\"", "\"inO\"", 1)).expect("corrupt");
    let run = run_logged(&env);
    run.expect_code(0);
    assert_eq!(counts(&run), [(0, 3)]);
    let run = run_logged(&env);
    run.expect_code(0);
    assert_eq!(counts(&run), [(3, 0)]);
    env.clear_trace();

    let provider = lib(&env, "proof-provider");
    let locked_digest = digest(&provider);
    tamper_keeping_mtime(&provider);
    let found_digest = digest(&provider);
    assert_ne!(locked_digest, found_digest);
    let (run, opened) = dlopened(&env, RUN);
    let line = run.one_error("LOCK_DIGEST");
    refused_before_opening(
        &env,
        line,
        &[
            "'proof-provider'",
            &provider.display().to_string(),
            &locked_digest,
            &found_digest,
            &lock_path(&env).display().to_string(),
        ],
        &opened,
    );
    // The other two came from the cache; the changed one was read (and, refused, all three
    // were read again).
    let run = run_logged(&env);
    run.one_error("LOCK_DIGEST");
    assert_eq!(counts(&run), [(2, 1), (0, 3)]);
}

#[test]
fn issue25_a_forged_cache_is_believed_only_where_only_you_can_write_it() {
    let Some(env) = warm() else {
        return;
    };
    let provider = lib(&env, "proof-provider");

    // Group-writable: nothing in it is used; every library is read.
    forge(&env, &provider, FAKE);
    std::fs::set_permissions(cache_file(&env), std::fs::Permissions::from_mode(0o660))
        .expect("chmod");
    let run = run_logged(&env);
    run.expect_code(0);
    assert_eq!(counts(&run), [(0, 3)]);

    // Owned by someone else (only root can make such a file): the same.
    if rustix::process::geteuid().is_root() {
        forge(&env, &provider, FAKE);
        std::os::unix::fs::chown(cache_file(&env), Some(65534), Some(65534)).expect("chown");
        let run = run_logged(&env);
        run.expect_code(0);
        assert_eq!(counts(&run), [(0, 3)]);
    }

    // Control: 0600 and yours, the forged entry is believed — which is why the cache lives
    // where no confined tool can write (docs/security.md, "The digest cache"). A digest the
    // lock refuses is read again before any refusal: the genuine file runs, and the entry is
    // put right.
    forge(&env, &provider, FAKE);
    let run = run_logged(&env);
    run.expect_code(0);
    assert_eq!(counts(&run), [(3, 0), (0, 3)]);
    let run = run_logged(&env);
    run.expect_code(0);
    assert_eq!(counts(&run), [(3, 0)]);
    assert!(
        !std::fs::read_to_string(cache_file(&env))
            .expect("cache")
            .contains(FAKE)
    );
}
