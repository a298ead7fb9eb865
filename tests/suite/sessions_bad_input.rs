//! Bad session input through the binary (issue 3 acceptance; SES-06, SES-08, SES-09, SES-10):
//! each case gives a clear one-line error — or, for a torn last line, a recovery — and leaves
//! the original data untouched (file bytes compared before and after).
//!
//! Cases: a truncated last line (recovered, not an error), garbage in the middle (corrupt,
//! naming file and line), a wrong header version and an unknown required event type
//! (unsupported, not corrupt), an SQLite file of another application or another schema version
//! (unsupported, naming the file), a read-only `$KEEL_HOME`, and a full disk during flush (a
//! 256 KiB tmpfs; skipped with a printed reason where mounting is not permitted).

use std::path::{Path, PathBuf};
use std::process::Command;

use keel_tests::Run;

use super::sessions_support::{
    Backend, check_recovered, crash_at, env_for, events, files_under, jsonl_file, seq_of, show,
    snapshot, write, writer_log,
};

/// Asserts a refusal: non-zero exit, nothing on stdout, no panic, exactly one `keel:` line,
/// containing every word of `words` (case-insensitive) and none of `not`. Returns the line.
fn refused(run: &Run, words: &[&str], not: &[&str]) -> String {
    assert!(
        !run.stderr.contains("panicked"),
        "keel panicked:\n{}",
        run.stderr
    );
    assert_ne!(
        run.code, 0,
        "expected a refusal:\n{}\n{}",
        run.stdout, run.stderr
    );
    assert_eq!(run.stdout.trim(), "", "a refusal printed on stdout");
    let errors = run.error_lines();
    assert_eq!(errors.len(), 1, "expected one error line:\n{}", run.stderr);
    let line = errors[0].to_owned();
    let lower = line.to_lowercase();
    for w in words {
        assert!(
            lower.contains(&w.to_lowercase()),
            "`{w}` missing from: {line}"
        );
    }
    for w in not {
        assert!(
            !lower.contains(&w.to_lowercase()),
            "`{w}` must not be in: {line}"
        );
    }
    line
}

/// Rewrites line `n` (1-based) of a file.
fn edit_line(path: &Path, n: usize, f: impl FnOnce(&str) -> String) {
    let text = std::fs::read_to_string(path).expect("read log");
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[n - 1] = f(&lines[n - 1]);
    std::fs::write(path, lines.join("\n") + "\n").expect("write log");
}

fn append_bytes(path: &Path, bytes: &str) {
    let mut text = std::fs::read(path).expect("read log");
    text.extend_from_slice(bytes.as_bytes());
    std::fs::write(path, text).expect("write log");
}

// SES-06 / B3: a torn last line (a crash mid-write) is cut on load — not an error — and every
// complete line before it is kept byte for byte; the session loads in full.
#[test]
fn jsonl_truncated_last_line_is_recovered() {
    let env = env_for(Backend::Jsonl);
    write(&env, "id=torn turns=2");
    let file = jsonl_file(&env, "torn");
    let complete = std::fs::read(&file).expect("read");
    append_bytes(&file, r#"{"seq":24,"time":1,"type":"turn/st"#);
    let (_, log) = events(&env, "torn");
    assert_eq!(log.len(), writer_log(2).len());
    check_recovered(&log, log.len() as u64 - 1).unwrap_or_else(|e| panic!("{e}"));
    let after = std::fs::read(&file).expect("read");
    assert_eq!(
        after, complete,
        "the torn line is cut and nothing else changes"
    );

    // A crashed session whose torn tail is cut first, then closed.
    let flushed = crash_at(&env, "torn-open", 1, "call");
    let file = jsonl_file(&env, "torn-open");
    let complete = std::fs::read(&file).expect("read");
    append_bytes(&file, r#"{"seq":99,"ti"#);
    let (_, log) = events(&env, "torn-open");
    check_recovered(&log, flushed).unwrap_or_else(|e| panic!("{e}"));
    let after = std::fs::read(&file).expect("read");
    assert!(
        after.starts_with(&complete),
        "recovery rewrote complete events"
    );
}

// B3: garbage before the last committed `turn/end` is corruption: refused, naming the file and
// the line, and the file is left as it was.
#[test]
fn jsonl_garbage_in_the_middle_is_corrupt() {
    let env = env_for(Backend::Jsonl);
    write(&env, "id=bad turns=2");
    let file = jsonl_file(&env, "bad");
    edit_line(&file, 5, |_| "garbage, not JSON".to_owned());
    let before = snapshot(&env);
    let (run, _) = show(&env, "bad");
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let line = refused(&run, &["corrupt", &name], &["unsupported"]);
    assert!(
        line.contains(&format!("{name}:5")) || line.to_lowercase().contains("line 5"),
        "the refusal must name line 5: {line}"
    );
    assert_eq!(before, snapshot(&env), "a refused load changed the files");
}

// SES-09: another header version is "unsupported format", never corruption.
#[test]
fn ses_09_wrong_header_version_is_unsupported() {
    let env = env_for(Backend::Jsonl);
    write(&env, "id=future turns=1");
    let file = jsonl_file(&env, "future");
    edit_line(&file, 1, |l| {
        l.replacen(r#""version":0"#, r#""version":7"#, 1)
    });
    assert!(
        std::fs::read_to_string(&file)
            .unwrap_or_default()
            .contains(r#""version":7"#)
    );
    let before = snapshot(&env);
    let (run, _) = show(&env, "future");
    refused(&run, &["unsupported"], &["corrupt"]);
    assert_eq!(before, snapshot(&env));
}

// SES-09: an unknown event type without `ignorable` is refused as unsupported; the same type
// marked `ignorable: true` is skipped by readers and the session loads.
#[test]
fn ses_09_unknown_required_event_type_is_unsupported() {
    let env = env_for(Backend::Jsonl);
    write(&env, "id=alien turns=1");
    let file = jsonl_file(&env, "alien");
    let next = writer_log(1).len();
    let clean = std::fs::read(&file).expect("read");
    append_bytes(
        &file,
        &format!("{{\"seq\":{next},\"time\":1,\"type\":\"x-vendor/thing\",\"data\":{{}}}}\n"),
    );
    let before = snapshot(&env);
    let (run, _) = show(&env, "alien");
    refused(&run, &["unsupported", "x-vendor/thing"], &["corrupt"]);
    assert_eq!(before, snapshot(&env));

    std::fs::write(&file, clean).expect("restore");
    append_bytes(
        &file,
        &format!(
            "{{\"seq\":{next},\"time\":1,\"type\":\"x-vendor/thing\",\"data\":{{}},\
             \"ignorable\":true}}\n"
        ),
    );
    let (_, log) = events(&env, "alien");
    assert_eq!(log.len(), next + 1, "an ignorable unknown event is kept");
}

/// The SQLite database under `$KEEL_HOME` (the one file starting with the SQLite magic).
fn sqlite_file(home: &Path) -> PathBuf {
    let dbs: Vec<PathBuf> = files_under(home)
        .into_iter()
        .filter(|p| std::fs::read(p).is_ok_and(|b| b.starts_with(b"SQLite format 3\0")))
        .collect();
    assert_eq!(
        dbs.len(),
        1,
        "expected one SQLite database under {}: {dbs:?}",
        home.display()
    );
    dbs[0].clone()
}

// SES-10: a database of another application, or of another schema version, is refused as
// unsupported, naming the file, and never migrated or touched.
#[test]
fn ses_10_foreign_or_other_version_sqlite_is_unsupported() {
    let env = env_for(Backend::Sqlite);
    write(&env, "id=s turns=1");
    let db = sqlite_file(&env.home());
    let name = db
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    {
        let c = rusqlite::Connection::open(&db).expect("open");
        let v: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .expect("version");
        c.execute_batch(&format!("PRAGMA user_version = {}", v + 1))
            .expect("bump");
    }
    let before = snapshot(&env);
    for args in [
        &["sessions", "show", "s", "--json"][..],
        &["sessions", "list"][..],
    ] {
        let mut a = args.to_vec();
        a.extend(["--profile", "w"]);
        refused(&env.keel(&a), &["unsupported", &name], &["corrupt"]);
    }
    assert_eq!(before, snapshot(&env), "SES-10: refused, not migrated");

    // Another application's database at the same place.
    let other = env_for(Backend::Sqlite);
    let foreign = other
        .home()
        .join(db.strip_prefix(env.home()).expect("under home"));
    std::fs::create_dir_all(foreign.parent().expect("parent")).expect("mkdir");
    {
        let c = rusqlite::Connection::open(&foreign).expect("create");
        c.execute_batch("PRAGMA application_id = 1234; CREATE TABLE notes(x TEXT);")
            .expect("foreign schema");
    }
    let before = snapshot(&other);
    let run = other.keel(&["sessions", "list", "--profile", "w"]);
    refused(&run, &["unsupported", &name], &["corrupt"]);
    assert_eq!(before, snapshot(&other));
}

/// Whether this process runs as root (permission bits do not stop root).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(2))
            == Some("0")
    })
}

fn sh(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

/// A mount (or a permission change) undone on drop.
struct Undo(Vec<String>);

impl Drop for Undo {
    fn drop(&mut self) {
        let args: Vec<&str> = self.0.iter().map(String::as_str).collect();
        let _ = sh(&args);
    }
}

/// Makes `dir` read-only: a read-only bind mount as root, `chmod -R a-w` otherwise.
fn read_only(dir: &Path) -> Result<Undo, String> {
    let d = dir.to_string_lossy().into_owned();
    if is_root() {
        sh(&["mount", "--bind", &d, &d])?;
        let undo = Undo(vec!["umount".into(), d.clone()]);
        sh(&["mount", "-o", "remount,bind,ro", &d, &d])?;
        Ok(undo)
    } else {
        sh(&["chmod", "-R", "a-w", &d])?;
        Ok(Undo(vec!["chmod".into(), "-R".into(), "u+w".into(), d]))
    }
}

// A read-only `$KEEL_HOME`: writing a new session fails with one clear line saying why;
// reading works or fails with one clear line; nothing stored is lost or changed. Both backends.
#[test]
fn read_only_keel_home_fails_clearly_and_loses_nothing() {
    for backend in [Backend::Jsonl, Backend::Sqlite] {
        let env = env_for(backend);
        write(&env, "id=kept turns=2");
        let before = snapshot(&env);
        let guard = match read_only(&env.home()) {
            Ok(g) => g,
            Err(why) => {
                eprintln!(
                    "skipped read-only KEEL_HOME ({backend:?}): cannot make it read-only: {why}"
                );
                return;
            }
        };
        let run = env.keel(&["run", "--profile", "w", "id=new turns=1"]);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
        assert_ne!(
            run.code, 0,
            "{backend:?}: a write to a read-only home succeeded"
        );
        let errors = run.error_lines();
        assert_eq!(
            errors.len(),
            1,
            "{backend:?}: one clear line:\n{}",
            run.stderr
        );
        // The line carries the I/O code and names the file or directory it could not write.
        let home = env.home().display().to_string();
        assert!(
            errors[0].contains("SESSION_IO") && errors[0].contains(&home),
            "{backend:?}: the error must name the code and the path: {}",
            errors[0]
        );
        // Reading may need the writer lock (recovery commits): it works, or fails the same way.
        for args in [
            &["sessions", "list"][..],
            &["sessions", "show", "kept", "--json"][..],
        ] {
            let mut a = args.to_vec();
            a.extend(["--profile", "w"]);
            let r = env.keel(&a);
            assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
            assert!(
                r.code == 0 || r.error_lines().len() == 1,
                "{backend:?} {args:?}: {}",
                r.stderr
            );
        }
        drop(guard);
        assert_eq!(
            before,
            snapshot(&env),
            "{backend:?}: the read-only home changed"
        );
        let (_, log) = events(&env, "kept");
        assert_eq!(log.len(), writer_log(2).len());
    }
}

fn copy_tree(from: &Path, to: &Path) {
    for f in files_under(from) {
        let dest = to.join(f.strip_prefix(from).expect("under"));
        std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
        std::fs::copy(&f, &dest).expect("copy");
    }
}

// SES-04/SES-05: the disk fills during a flush: the flush fails (the writer stops, exit 1, one
// clear line), and every event that was reported durable before is intact and loads.
#[test]
fn ses_05_disk_full_during_flush_loses_no_flushed_event() {
    for backend in [Backend::Jsonl, Backend::Sqlite] {
        let env = env_for(backend);
        let home = env.home().to_string_lossy().into_owned();
        if let Err(why) = sh(&["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", &home]) {
            eprintln!(
                "skipped disk-full ({backend:?}): cannot mount a tmpfs ({why}); the backends' \
                 failing-writer unit tests cover it"
            );
            return;
        }
        let unmount = Undo(vec!["umount".into(), home.clone()]);
        let run = env.keel(&["run", "--profile", "w", "id=full turns=forever bytes=3000"]);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
        assert_eq!(
            run.code, 1,
            "{backend:?}: a failed flush fails the run:\n{}",
            run.stderr
        );
        assert!(
            run.stdout
                .lines()
                .any(|l| l.starts_with("flush-failed full ")),
            "{backend:?}: the flush did not fail:\n{}",
            run.stdout
        );
        assert_eq!(
            run.error_lines().len(),
            1,
            "{backend:?}: one clear line:\n{}",
            run.stderr
        );
        let flushed = run
            .stdout
            .lines()
            .filter(|l| l.starts_with("flushed "))
            .map(|l| seq_of(l).1)
            .max()
            .unwrap_or_else(|| panic!("{backend:?}: nothing was flushed before the disk filled"));

        // Loading on the full disk works or fails with one clear line.
        let (r, _) = show(&env, "full");
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
        assert!(
            r.code == 0 || r.error_lines().len() == 1,
            "{backend:?}: {}",
            r.stderr
        );

        // On a disk with room, every flushed event is there and the tail closes.
        let copy = env_for(backend);
        copy_tree(&env.home(), &copy.home());
        drop(unmount);
        let (_, log) = events(&copy, "full");
        check_recovered(&log, flushed).unwrap_or_else(|e| panic!("{backend:?}: {e}"));
    }
}
