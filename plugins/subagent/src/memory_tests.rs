//! MEM-07 at the storage layer: the child writes only temp, reads temp ∪ main with temp
//! shadowing, cannot write main through its handle, cannot see another child's temp; only
//! promote writes main; residuals keep their order and leave only when forgotten.

use keel_plugin_api::services::agent::{InterruptLevel, PendingInput};

use super::residual::Saved;
use super::*;

fn root() -> (tempfile::TempDir, MemoryRoot) {
    let dir = tempfile::tempdir().unwrap();
    let root = MemoryRoot::new(dir.path().join("resident"));
    (dir, root)
}

#[test]
fn mem07_a_child_reads_temp_over_main_and_writes_only_temp() {
    let (_d, root) = root();
    let a = root.open_child("p1", "c1").unwrap();
    a.write("plan", "temp plan").unwrap();
    a.write("note", "n").unwrap();
    root.promote("p1", &a, &["plan".to_owned()]).unwrap();
    a.write("plan", "newer temp plan").unwrap();
    let records = a.read(None).unwrap();
    let plan: Vec<&Record> = records.iter().filter(|r| r.key == "plan").collect();
    assert_eq!(
        plan.len(),
        1,
        "temp shadows main on the same key: {records:?}"
    );
    assert_eq!(plan[0].text, "newer temp plan");
    assert_eq!(plan[0].level, Level::Temp);
    // A second child of the same parent sees main, not the first child's temp.
    let b = root.open_child("p1", "c2").unwrap();
    let seen = b.read(None).unwrap();
    assert_eq!(
        seen,
        vec![Record {
            key: "plan".into(),
            text: "temp plan".into(),
            level: Level::Main
        }]
    );
    assert_eq!(b.read(Some("NOTHING")).unwrap(), vec![]);
    assert_eq!(
        a.read(Some("NEWER")).unwrap().len(),
        1,
        "query is case-insensitive"
    );
}

#[test]
fn mem07_main_is_read_only_to_the_child_at_the_storage_layer() {
    let (_d, root) = root();
    let c = root.open_child("p", "c").unwrap();
    let before = std::fs::read(root.main_path("p")).unwrap();
    let e = c.write_main("k", "v").unwrap_err();
    assert_eq!(e.code, "RESIDENT_STORE");
    assert!(
        e.message.contains("readonly")
            || e.message.contains("read-only")
            || e.message.contains("read only"),
        "{e}"
    );
    c.write("k", "v").unwrap();
    assert_eq!(
        std::fs::read(root.main_path("p")).unwrap(),
        before,
        "main unchanged"
    );
    assert!(c.read(None).unwrap().iter().all(|r| r.level == Level::Temp));
}

#[test]
fn mem07_promote_is_all_or_nothing_and_names_the_missing_keys() {
    let (_d, root) = root();
    let c = root.open_child("p", "c").unwrap();
    c.write("a", "1").unwrap();
    let e = root
        .promote("p", &c, &["a".to_owned(), "zz".to_owned()])
        .unwrap_err();
    assert_eq!(e.code, "RESIDENT_NO_KEY");
    assert!(e.message.contains("zz"), "{e}");
    let other = root.open_child("p", "d").unwrap();
    assert_eq!(other.read(None).unwrap(), vec![], "nothing reached main");
    assert_eq!(root.promote("p", &c, &["a".to_owned()]).unwrap(), 1);
    assert_eq!(other.read(None).unwrap().len(), 1);
}

#[test]
fn remove_closes_the_handles_and_deletes_the_temp_file() {
    let (_d, root) = root();
    let c = root.open_child("p", "c/../x").unwrap();
    assert_eq!(root.open_handles(), 2);
    let path = c.temp_path().to_path_buf();
    assert!(path.starts_with(root.temp_dir()), "{}", path.display());
    assert!(path.exists());
    c.remove();
    c.remove();
    assert_eq!(root.open_handles(), 0);
    assert!(!path.exists());
    assert!(
        c.write("k", "v").is_err(),
        "a stopped child's memory refuses"
    );
}

/// A pid that was a process and is no more: a child that ran and was reaped.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[test]
fn sub04_crash_leftovers_dead_pids_temp_dirs_are_swept_live_ones_kept() {
    let (_d, root) = root();
    // This process's own store (a live child of ours).
    let mine = root.open_child("p", "c-live").unwrap();
    let temp = root.temp_dir().parent().unwrap().to_path_buf();
    let dead = dead_pid();
    let dead_dir = temp.join(dead.to_string());
    std::fs::create_dir_all(&dead_dir).unwrap();
    std::fs::write(dead_dir.join("c-old.db"), b"left by a SIGKILL").unwrap();
    std::fs::write(dead_dir.join("c-old.db-wal"), b"").unwrap();
    // pid 1 is alive in every pid namespace; a name that is not a pid is not ours to judge.
    let init_dir = temp.join("1");
    let odd_dir = temp.join("not-a-pid");
    for d in [&init_dir, &odd_dir] {
        std::fs::create_dir_all(d).unwrap();
    }
    let removed = root.sweep_dead_temp();
    if std::path::Path::new("/proc/self").exists() {
        assert_eq!(removed, vec![dead_dir.clone()]);
        assert!(!dead_dir.exists());
    } else {
        assert!(removed.is_empty(), "no /proc: nothing can be judged dead");
    }
    assert!(mine.temp_path().exists(), "this process's own store stays");
    assert!(init_dir.exists() && odd_dir.exists());
    mine.remove();
}

#[test]
fn the_sweep_never_removes_the_current_pid_nor_a_live_one() {
    let dir = tempfile::tempdir().unwrap();
    for n in ["10", "11", "12"] {
        std::fs::create_dir_all(dir.path().join(n).join("x")).unwrap();
    }
    let removed = sweep::sweep_with(dir.path(), 10, |pid| pid == 11);
    assert_eq!(removed, vec![dir.path().join("12")]);
    assert!(dir.path().join("10/x").exists());
    assert!(dir.path().join("11/x").exists());
    assert!(sweep::sweep_with(&dir.path().join("absent"), 10, |_| false).is_empty());
}

#[test]
fn file_stems_never_leave_the_directory_and_never_collide() {
    assert_eq!(file_stem("abc-1_2"), "abc-1_2");
    assert_eq!(file_stem("../x"), "%2E%2E%2Fx");
    assert_ne!(file_stem("a/b"), file_stem("a%2Fb"));
}

fn input(id: &str, level: Option<InterruptLevel>) -> PendingInput {
    PendingInput {
        id: id.into(),
        content: format!("content of {id}"),
        level,
        suspended: false,
    }
}

#[test]
fn sub02_residuals_keep_their_order_state_and_level_until_forgotten() {
    let (_d, root) = root();
    let store = root.residuals("p");
    assert_eq!(store.list("r", &[Saved::Keep]).unwrap().len(), 0);
    assert!(!store.path().exists(), "listing creates nothing");
    store
        .save(
            "r",
            Saved::Keep,
            &[input("m1", Some(InterruptLevel::L3)), input("m2", None)],
        )
        .unwrap();
    store.save("r", Saved::Park, &[input("m3", None)]).unwrap();
    store
        .save("other", Saved::Keep, &[input("m4", None)])
        .unwrap();
    let kept = store.list("r", &[Saved::Keep]).unwrap();
    let ids: Vec<&str> = kept.iter().map(|(_, _, i)| i.id.as_str()).collect();
    assert_eq!(ids, ["m1", "m2"]);
    assert_eq!(kept[0].2.level, Some(InterruptLevel::L3));
    assert_eq!(kept[1].2.content, "content of m2");
    let all = store.list("r", &[Saved::Keep, Saved::Park]).unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[2].1, Saved::Park);
    store.forget(kept[0].0).unwrap();
    assert_eq!(store.list("r", &[Saved::Keep]).unwrap().len(), 1);
    assert_eq!(store.list("other", &[Saved::Keep]).unwrap().len(), 1);
}

/// MEM-07: temp ∪ main — a main record whose key temp does not hold is read beside the temp
/// records (only the same key is shadowed), each with its level.
#[test]
fn mem07_a_child_reads_main_records_beside_its_own_temp_records() {
    let (_d, root) = root();
    let a = root.open_child("p", "a").unwrap();
    a.write("plan", "main plan").unwrap();
    a.write("zeta", "main z").unwrap();
    root.promote("p", &a, &[]).unwrap();
    let b = root.open_child("p", "b").unwrap();
    b.write("note", "temp note").unwrap();
    b.write("plan", "temp plan").unwrap();
    let seen: Vec<(String, String, Level)> = b
        .read(None)
        .unwrap()
        .into_iter()
        .map(|r| (r.key, r.text, r.level))
        .collect();
    let expect = [
        ("note", "temp note", Level::Temp),
        ("plan", "temp plan", Level::Temp),
        ("zeta", "main z", Level::Main),
    ]
    .map(|(k, t, l)| (k.to_owned(), t.to_owned(), l));
    assert_eq!(seen, expect);
}

/// The `updated_ms` stamp of a record in `path`.
fn stamp(path: &std::path::Path, key: &str) -> i64 {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    conn.query_row(
        "SELECT updated_ms FROM memory WHERE key = ?1",
        params![key],
        |r| r.get(0),
    )
    .unwrap()
}

/// MEM-01 (metadata in SQLite): a child's write and a promotion stamp the record on disk with
/// the wall-clock time of that write, in ms since the epoch.
#[test]
fn mem01_a_record_on_disk_carries_the_time_of_its_last_write() {
    // 2020-09-13: any stamp of this code's writes is later.
    const PAST: i64 = 1_600_000_000_000;
    let (_d, root) = root();
    let c = root.open_child("p", "c").unwrap();
    c.write("k", "v").unwrap();
    let written = stamp(c.temp_path(), "k");
    assert!(written > PAST && written <= now_ms(), "{written}");
    root.promote("p", &c, &["k".to_owned()]).unwrap();
    let promoted = stamp(&root.main_path("p"), "k");
    assert!(promoted > PAST && promoted <= now_ms(), "{promoted}");
}
