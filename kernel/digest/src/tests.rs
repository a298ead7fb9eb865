//! The cache against the real file system: hits skip reading, any doubt hashes.

use std::fs::{FileTimes, OpenOptions};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
use crate::cache::CACHE_FILE;

const FAKE: &str = "blake3:0000000000000000000000000000000000000000000000000000000000000000";

struct World {
    _dir: tempfile::TempDir,
    home: PathBuf,
    lib: PathBuf,
}

fn world() -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    std::fs::create_dir(&home).expect("mkdir home");
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let lib = dir.path().join("libkeel_plugin_x.so");
    std::fs::write(&lib, b"the library's bytes, version one").expect("write lib");
    World {
        _dir: dir,
        home,
        lib,
    }
}

/// One digest through a fresh cache under `home` with `margin`.
fn digest_with(w: &World, margin: Duration) -> (Opened, Cache) {
    let mut cache = Cache::open(&w.home).with_margin(margin);
    let mut out = open_all(std::slice::from_ref(&w.lib), &mut cache);
    let opened = out.remove(0).expect("digest");
    (opened, cache)
}

/// Waits past `margin` and digests, so the next start meets a settled entry of the real bytes.
fn warm(w: &World, margin: Duration) -> Opened {
    std::thread::sleep(margin + Duration::from_millis(30));
    let (first, _) = digest_with(w, margin);
    assert_eq!(first.digest, digest_file(&w.lib).expect("digest"));
    first
}

const SHORT: Duration = Duration::from_millis(50);

fn cache_file(w: &World) -> PathBuf {
    w.home.join(CACHE_FILE)
}

/// Rewrites the stored entries with `edit`, with a valid checksum: what a writer of the cache
/// could do.
fn forge(w: &World, edit: impl FnOnce(&mut Vec<serde_json::Value>)) {
    let text = std::fs::read_to_string(cache_file(w)).expect("cache file");
    let (_, body) = text.split_once('\n').expect("header");
    let mut entries: Vec<serde_json::Value> = serde_json::from_str(body).expect("json");
    edit(&mut entries);
    let body = serde_json::to_string(&entries).expect("json");
    let sum = blake3::hash(body.as_bytes()).to_hex();
    std::fs::write(
        cache_file(w),
        format!("keel library digests v1 blake3:{sum}\n{body}"),
    )
    .expect("write cache");
}

fn fake_digests(w: &World) {
    forge(w, |entries| {
        for e in entries {
            e["digest"] = FAKE.into();
        }
    });
}

#[test]
fn a_hit_answers_from_the_cache_without_reading_the_file() {
    let w = world();
    let first = warm(&w, SHORT);
    assert!(!first.cached, "nothing was recorded yet");
    let (second, cache) = digest_with(&w, SHORT);
    assert!(second.cached);
    assert_eq!(cache.hits(), 1);
    assert_eq!(second.digest, first.digest);
    // Proof nothing was read: an entry whose digest is not the file's is what comes back.
    fake_digests(&w);
    let (third, _) = digest_with(&w, SHORT);
    assert!(third.cached);
    assert_eq!(third.digest, FAKE);
    // Asked to confirm (before a refusal), the open file is read.
    assert_eq!(third.rehash().expect("rehash"), first.digest);
}

#[test]
fn changed_bytes_with_mtime_put_back_are_hashed_again() {
    let w = world();
    let first = warm(&w, SHORT);
    let before = std::fs::metadata(&w.lib).expect("stat");
    // Same size, mtime restored by utimensat: only ctime (and the bytes) differ.
    std::fs::write(&w.lib, b"the library's bytes, version two").expect("rewrite");
    let mtime = before.modified().expect("mtime");
    OpenOptions::new()
        .write(true)
        .open(&w.lib)
        .and_then(|f| f.set_times(FileTimes::new().set_modified(mtime)))
        .expect("utimensat");
    let after = std::fs::metadata(&w.lib).expect("stat");
    assert_eq!(after.size(), before.size());
    assert_eq!(
        (after.mtime(), after.mtime_nsec()),
        (before.mtime(), before.mtime_nsec())
    );
    let (second, cache) = digest_with(&w, SHORT);
    assert!(!second.cached);
    assert_eq!(cache.hits(), 0);
    assert_ne!(second.digest, first.digest);
    assert_eq!(second.digest, digest_file(&w.lib).expect("digest"));
}

#[test]
fn a_replaced_file_is_hashed_again() {
    let w = world();
    let first = warm(&w, SHORT);
    let new = w.lib.with_extension("new");
    std::fs::write(&new, b"the library's bytes, version two").expect("write");
    std::fs::rename(&new, &w.lib).expect("rename over");
    let (second, _) = digest_with(&w, SHORT);
    assert!(!second.cached);
    assert_ne!(second.digest, first.digest);
}

#[test]
fn racy_entries_are_hashed_again_until_they_settle() {
    let w = world();
    // Recorded right after the file was written: within the margin, so it never answers.
    let (first, _) = digest_with(&w, RACY_MARGIN);
    assert!(!first.cached);
    let (second, _) = digest_with(&w, RACY_MARGIN);
    assert!(!second.cached, "a racy entry answered");
    // With a short margin: racy at first, re-recorded once the file is older, then a hit.
    let margin = Duration::from_millis(100);
    let w = world();
    let (first, _) = digest_with(&w, margin);
    let (second, _) = digest_with(&w, margin);
    assert!(!first.cached && !second.cached);
    std::thread::sleep(margin + Duration::from_millis(30));
    let (third, _) = digest_with(&w, margin);
    assert!(!third.cached, "still the entry recorded within the margin");
    let (fourth, _) = digest_with(&w, margin);
    assert!(fourth.cached, "the re-recorded entry should answer");
}

#[test]
fn an_entry_recorded_in_the_future_does_not_answer() {
    let w = world();
    warm(&w, SHORT);
    fake_digests(&w);
    forge(&w, |entries| {
        for e in entries {
            e["recorded_ns"] = (i64::MAX / 2).into();
        }
    });
    let (opened, _) = digest_with(&w, SHORT);
    assert!(!opened.cached);
    assert_ne!(opened.digest, FAKE);
}

#[test]
fn a_corrupt_cache_falls_back_to_hashing_and_is_rewritten() {
    let w = world();
    let real = warm(&w, SHORT).digest;
    let good = std::fs::read_to_string(cache_file(&w)).expect("cache");
    let body_flipped = good.replacen("\"ino\"", "\"inO\"", 1);
    let other_version = good.replacen("v1", "v2", 1);
    for (bad, why) in [
        (body_flipped.as_str(), "checksum"),
        ("garbage", "header"),
        (other_version.as_str(), "version"),
        ("keel library digests v1 blake3:00\n[]", "checksum"),
    ] {
        std::fs::write(cache_file(&w), bad).expect("corrupt");
        let (opened, cache) = digest_with(&w, SHORT);
        assert!(!opened.cached, "{why}: a corrupt cache answered");
        assert_eq!(opened.digest, real);
        assert!(
            cache.note().is_some_and(|n| n.contains(why)),
            "{why}: {:?}",
            cache.note()
        );
    }
    // A well-formed file with a bad entry is refused whole.
    warm(&w, SHORT);
    forge(&w, |entries| entries[0]["digest"] = "md5:abc".into());
    let (opened, cache) = digest_with(&w, SHORT);
    assert!(!opened.cached);
    assert!(cache.note().is_some_and(|n| n.contains("corrupt")));
    // The fresh digest replaced it: the next start hits.
    std::thread::sleep(SHORT + Duration::from_millis(30));
    digest_with(&w, SHORT);
    let (opened, _) = digest_with(&w, SHORT);
    assert!(opened.cached);
}

#[test]
fn a_cache_someone_else_could_write_is_ignored() {
    let w = world();
    let real = warm(&w, SHORT).digest;
    let file = cache_file(&w);
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").mode() & 0o777;
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().expect("dir")), 0o700);

    // Group-writable file.
    fake_digests(&w);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o620)).expect("chmod");
    let (opened, cache) = digest_with(&w, SHORT);
    assert_eq!(
        (opened.cached, opened.digest.as_str()),
        (false, real.as_str())
    );
    assert!(cache.note().is_some_and(|n| n.contains("writable")));

    // A symlink in place of the file.
    warm(&w, SHORT);
    fake_digests(&w);
    let elsewhere = w.home.join("elsewhere");
    std::fs::rename(&file, &elsewhere).expect("move");
    std::os::unix::fs::symlink(&elsewhere, &file).expect("symlink");
    let (opened, _) = digest_with(&w, SHORT);
    assert_eq!(opened.digest, real);
    // The fresh entry was written in place of the link, never through it.
    assert!(std::fs::symlink_metadata(&file).expect("stat").is_file());
    assert!(
        std::fs::read_to_string(&elsewhere)
            .expect("read")
            .contains(FAKE)
    );

    // World-writable cache directory: not read, not written.
    warm(&w, SHORT);
    fake_digests(&w);
    let dir = file.parent().expect("dir").to_owned();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let before = std::fs::read(&file).expect("cache");
    let (opened, cache) = digest_with(&w, SHORT);
    assert_eq!(opened.digest, real);
    assert!(cache.note().is_some_and(|n| n.contains("cache/")));
    assert_eq!(std::fs::read(&file).expect("cache"), before, "rewritten");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    std::fs::remove_file(&file).expect("rm forged cache");

    // Owned by another user (only root can make one).
    if rustix::process::geteuid().is_root() {
        warm(&w, SHORT);
        fake_digests(&w);
        std::os::unix::fs::chown(&file, Some(65534), Some(65534)).expect("chown");
        let (opened, cache) = digest_with(&w, SHORT);
        assert_eq!(opened.digest, real);
        assert!(
            cache
                .note()
                .is_some_and(|n| n.contains("owned by uid 65534"))
        );
    }

    // A relative $KEEL_HOME (the working directory's) is never used.
    let mut cache = Cache::open(Path::new("relative/home"));
    assert!(cache.note().is_some_and(|n| n.contains("not absolute")));
    let out = open_all(std::slice::from_ref(&w.lib), &mut cache);
    assert!(out[0].as_ref().is_ok_and(|o| !o.cached));
    assert!(!Path::new("relative").exists());
}

#[test]
fn refresh_records_but_never_answers() {
    let w = world();
    warm(&w, SHORT);
    fake_digests(&w);
    let mut cache = Cache::refresh(&w.home).with_margin(SHORT);
    let out = open_all(std::slice::from_ref(&w.lib), &mut cache);
    let opened = out.into_iter().next().expect("one").expect("digest");
    assert!(!opened.cached);
    assert_ne!(opened.digest, FAKE);
    // It replaced the forged entry with the bytes it read.
    std::thread::sleep(SHORT + Duration::from_millis(30));
    let (after, _) = digest_with(&w, SHORT);
    assert_eq!(after.digest, opened.digest);
}

#[test]
fn results_keep_their_order_and_name_missing_files() {
    let w = world();
    let missing = w.lib.with_file_name("libkeel_plugin_gone.so");
    let second = w.lib.with_file_name("libkeel_plugin_y.so");
    std::fs::write(&second, b"another library").expect("write");
    let mut cache = Cache::off();
    let out = open_all(
        &[w.lib.clone(), missing.clone(), second.clone()],
        &mut cache,
    );
    assert_eq!(out.len(), 3);
    assert_eq!(
        out[0].as_ref().map(|o| o.digest.clone()).ok(),
        digest_file(&w.lib).ok()
    );
    assert_eq!(
        out[1].as_ref().map_err(|e| e.path.clone()).err(),
        Some(missing)
    );
    assert_eq!(
        out[2].as_ref().map(|o| o.digest.clone()).ok(),
        digest_file(&second).ok()
    );
}

#[test]
fn the_load_path_is_the_digested_file_even_after_the_path_is_replaced() {
    let w = world();
    let mut cache = Cache::off();
    let opened = open_all(std::slice::from_ref(&w.lib), &mut cache)
        .remove(0)
        .expect("digest");
    // Replaced after the digest, before the load.
    let evil = w.lib.with_extension("evil");
    std::fs::write(&evil, b"something else entirely").expect("write");
    std::fs::rename(&evil, &w.lib).expect("swap");
    let name = opened.load_path();
    assert!(name.starts_with("/proc/self/fd/"), "{}", name.display());
    assert_eq!(
        std::fs::read(&name).expect("read through /proc"),
        b"the library's bytes, version one"
    );
    // The same inode opened again (through another name of it): the first one's descriptor,
    // so the loader answers with what it loaded, and no second descriptor is kept.
    let again = open_all(std::slice::from_ref(&name), &mut cache)
        .remove(0)
        .expect("digest");
    assert_eq!(again.load_path(), name);
}

#[test]
fn files_in_memory_only_storage_are_never_cached() {
    let shm = Path::new("/dev/shm");
    let is_tmpfs = rustix::fs::statfs(shm).is_ok_and(|fs| fs.f_type == 0x0102_1994);
    if !is_tmpfs {
        eprintln!("note: no tmpfs at /dev/shm; nothing to check");
        return;
    }
    let w = world();
    let lib = tempfile::Builder::new()
        .prefix("keel-digest-")
        .tempfile_in(shm)
        .expect("tmpfs file");
    std::fs::write(lib.path(), b"bytes in memory").expect("write");
    let w = World {
        lib: lib.path().to_owned(),
        ..w
    };
    assert!(!cacheable(&std::fs::File::open(&w.lib).expect("open")));
    warm(&w, SHORT);
    let (opened, _) = digest_with(&w, SHORT);
    assert!(!opened.cached);
    // Nothing was recorded for it either, and the loader still gets the open file.
    assert!(!cache_file(&w).exists());
    assert!(opened.load_path().starts_with("/proc/self/fd/"));
}

#[test]
fn the_racy_margin_outlasts_writeback() {
    let read = |name: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/proc/sys/vm/{name}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let margin = racy_margin();
    assert!(margin >= RACY_MARGIN);
    if let (Some(expire), Some(every)) = (
        read("dirty_expire_centisecs"),
        read("dirty_writeback_centisecs"),
    ) {
        assert!(margin > Duration::from_millis((expire + every) * 10));
    }
}
