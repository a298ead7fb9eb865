//! The digest cache through the binary (issue 25 item 2): a warm `$KEEL_HOME/cache` answers a
//! start without reading the libraries, and the lock still refuses a library changed under it
//! — even one changed with its mtime put back — before it is opened. A cache someone else could
//! write is not believed; a cached digest the lock refuses is read again before the refusal.

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

/// keel's racy margin (`keel_digest::RACY_MARGIN`) and a little more: entries recorded sooner
/// after a library was written never answer.
const PAST_THE_MARGIN: Duration = Duration::from_millis(2_300);

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

/// `(cached, hashed)` from the run's `library digests` line.
fn counts(run: &Run) -> (usize, usize) {
    let line = run
        .stderr
        .lines()
        .find(|l| l.contains("library digests"))
        .unwrap_or_else(|| panic!("no digest line:\n{}", run.stderr));
    let field = |name: &str| -> usize {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line}"))
    };
    (field("cached"), field("hashed"))
}

/// A locked tree whose three libraries the cache answers for.
fn warm() -> Env {
    let env = locked(&format!("{DRIVER}{PROVIDER}{CONSUMER}"));
    std::fs::set_permissions(env.home(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    std::thread::sleep(PAST_THE_MARGIN);
    // `keel lock` hashed everything right after the copy (racy entries); this run hashes once
    // more and records settled ones.
    env.keel(RUN).expect_code(0);
    let run = run_logged(&env);
    run.expect_code(0);
    assert_eq!(counts(&run), (3, 0), "a warm start still hashed");
    let meta = std::fs::metadata(cache_file(&env)).expect("the cache under $KEEL_HOME");
    assert_eq!(meta.mode() & 0o777, 0o600);
    env.clear_trace();
    env
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

/// Rewrites the cache as a writer of it could: every entry for `path` now says `digest`.
fn forge(env: &Env, path: &Path, digest: &str) {
    let text = std::fs::read_to_string(cache_file(env)).expect("cache");
    let (_, body) = text.split_once('\n').expect("header");
    let mut entries: Vec<serde_json::Value> = serde_json::from_str(body).expect("json");
    let shown = path.display().to_string();
    for e in entries.iter_mut().filter(|e| e["path"] == shown.as_str()) {
        e["digest"] = digest.into();
        // Make the forged entry settled for the file as it is now.
        let meta = std::fs::metadata(path).expect("stat");
        e["key"]["ino"] = meta.ino().into();
        e["key"]["size"] = meta.size().into();
        e["key"]["mtime_ns"] = (meta.mtime() * 1_000_000_000 + meta.mtime_nsec()).into();
        e["key"]["ctime_ns"] = (meta.ctime() * 1_000_000_000 + meta.ctime_nsec()).into();
    }
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
    let env = warm();
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
    // The other two still came from the cache; the changed one was read.
    let run = run_logged(&env);
    run.one_error("LOCK_DIGEST");
    assert_eq!(counts(&run), (2, 1));
}

#[test]
fn issue25_a_forged_cache_is_believed_only_where_only_you_can_write_it() {
    let env = warm();
    let provider = lib(&env, "proof-provider");
    let locked_digest = digest(&provider);
    tamper_keeping_mtime(&provider);
    std::thread::sleep(PAST_THE_MARGIN);

    // Group-writable: the forged entry vouching for the tampered file is not believed.
    forge(&env, &provider, &locked_digest);
    std::fs::set_permissions(cache_file(&env), std::fs::Permissions::from_mode(0o660))
        .expect("chmod");
    env.keel(RUN).one_error("LOCK_DIGEST");
    assert!(env.trace().is_empty(), "a plugin ran: {:?}", env.trace());

    // Owned by someone else (only root can make such a file): not believed either.
    if rustix::process::geteuid().is_root() {
        forge(&env, &provider, &locked_digest);
        std::os::unix::fs::chown(cache_file(&env), Some(65534), Some(65534)).expect("chown");
        env.keel(RUN).one_error("LOCK_DIGEST");
        assert!(env.trace().is_empty(), "a plugin ran: {:?}", env.trace());
    }

    // Control: the same forgery, 0600 and yours, is believed — which is why the cache lives
    // where no tool can write (docs/security.md, "The digest cache").
    forge(&env, &provider, &locked_digest);
    env.keel(RUN).expect_code(0);
}

#[test]
fn issue25_a_cached_digest_the_lock_refuses_is_read_again_first() {
    let env = warm();
    let provider = lib(&env, "proof-provider");
    // An entry that lies the other way (corruption, or a writer of the cache) about the
    // genuine file: the bytes are read before any refusal, and they match the lock.
    forge(
        &env,
        &provider,
        "blake3:0000000000000000000000000000000000000000000000000000000000000000",
    );
    let run = run_logged(&env);
    run.expect_code(0);
    // And the entry was put right: the next start hits.
    std::thread::sleep(Duration::from_millis(50));
    let run = run_logged(&env);
    run.expect_code(0);
    assert_eq!(counts(&run), (3, 0));
}

#[test]
fn issue25_a_corrupt_cache_costs_a_hash_not_a_start() {
    let env = warm();
    let text = std::fs::read_to_string(cache_file(&env)).expect("cache");
    std::fs::write(cache_file(&env), text.replacen("\"ino\"", "\"inO\"", 1)).expect("corrupt");
    let run = run_logged(&env);
    run.expect_code(0);
    assert_eq!(counts(&run), (0, 3));
}
