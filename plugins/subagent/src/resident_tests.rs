//! SUB-04: the registry's one cleanup leaves no residue. N create/destroy cycles — one child at
//! a time and N children at once — bring the registry size, the open SQLite handles and the
//! temp directory back to their baseline.

use super::registry::{Registry, Resident};
use crate::memory::MemoryRoot;

const N: usize = 50;

fn entries(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

fn spawn(root: &MemoryRoot, reg: &Registry, parent: &str, i: usize) -> String {
    let child = format!("{parent}-child-{i}");
    let memory = root.open_child(parent, &child).unwrap();
    memory.write("k", &format!("v{i}")).unwrap();
    let r = Resident::new(parent, &format!("r{i}"), &child, 1, None, memory);
    reg.insert(r).unwrap();
    child
}

#[test]
fn sub04_n_create_destroy_cycles_leave_no_residue() {
    let dir = tempfile::tempdir().unwrap();
    let root = MemoryRoot::new(dir.path().join("resident"));
    let reg = Registry::default();
    let temp_parent = root.temp_dir().parent().unwrap().to_path_buf();
    let baseline = (reg.len(), root.open_handles(), entries(&temp_parent));
    for i in 0..N {
        let child = spawn(&root, &reg, "p", i);
        assert_eq!(reg.len(), 1);
        assert_eq!(root.open_handles(), 2, "temp + the read-only main handle");
        assert!(reg.cleanup(&child).is_some());
        assert!(reg.cleanup(&child).is_none(), "cleanup is idempotent");
        assert_eq!(
            (reg.len(), root.open_handles(), entries(&temp_parent)),
            baseline,
            "cycle {i}"
        );
    }
    // N at once, two parents, torn down in another order.
    let mut children: Vec<String> = (0..N)
        .map(|i| spawn(&root, &reg, if i % 2 == 0 { "p" } else { "q" }, i))
        .collect();
    assert_eq!(reg.len(), N);
    assert_eq!(reg.of_parent("q").len(), N / 2);
    assert_eq!(root.open_handles(), 2 * N);
    assert_eq!(entries(&root.temp_dir()), N);
    children.reverse();
    for c in &children {
        assert!(reg.by_child(c).is_some());
        reg.cleanup(c);
        assert!(reg.by_child(c).is_none());
    }
    assert_eq!(
        (reg.len(), root.open_handles(), entries(&temp_parent)),
        baseline
    );
    assert!(reg.is_empty());
}

#[test]
fn sub04_a_name_is_taken_once_per_parent_and_freed_by_cleanup() {
    let dir = tempfile::tempdir().unwrap();
    let root = MemoryRoot::new(dir.path().join("resident"));
    let reg = Registry::default();
    let first = Resident::new("p", "r", "c1", 1, None, root.open_child("p", "c1").unwrap());
    reg.insert(first).unwrap();
    let again = Resident::new("p", "r", "c2", 1, None, root.open_child("p", "c2").unwrap());
    let e = reg.insert(again).unwrap_err();
    assert_eq!(e.code, "RESIDENT_EXISTS");
    assert_eq!(
        root.open_handles(),
        2,
        "the refused child's handles are closed"
    );
    let other_parent = Resident::new("q", "r", "c3", 1, None, root.open_child("q", "c3").unwrap());
    reg.insert(other_parent).unwrap();
    assert_eq!(reg.get("p", "r").unwrap().child, "c1");
    assert_eq!(reg.get("q", "r").unwrap().child, "c3");
    reg.cleanup("c1");
    assert!(!reg.contains("p", "r"));
    assert!(reg.contains("q", "r"));
    reg.cleanup("c3");
    assert_eq!(root.open_handles(), 0);
}

#[test]
fn a_stop_is_claimed_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = MemoryRoot::new(dir.path().join("resident"));
    let r = Resident::new("p", "r", "c", 1, None, root.open_child("p", "c").unwrap());
    assert!(r.claim_stop());
    assert!(!r.claim_stop());
    r.memory.remove();
}

/// SUB-01: a resident child's last answer survives the report being handed to one waiter: a
/// fresh (non-empty) answer replaces it, an empty one reads the last remembered.
#[test]
fn sub01_the_last_result_is_the_last_fresh_answer() {
    let dir = tempfile::tempdir().unwrap();
    let root = MemoryRoot::new(dir.path().join("resident"));
    let r = Resident::new("p", "r", "c", 1, None, root.open_child("p", "c").unwrap());
    assert_eq!(r.last_result(""), "", "nothing answered yet");
    assert_eq!(r.last_result("first"), "first");
    assert_eq!(r.last_result(""), "first", "remembered");
    assert_eq!(r.last_result("second"), "second");
    assert_eq!(r.last_result(""), "second");
    r.memory.remove();
}

/// SUB-04 (the plural stop paths): `of_parent` lists exactly that parent's children and
/// `all` every live one, which is what the parent-closing and row-unloading paths clean up;
/// the registry is empty only once every child is cleaned up.
#[test]
fn sub04_the_plural_stop_paths_see_exactly_the_live_children() {
    let dir = tempfile::tempdir().unwrap();
    let root = MemoryRoot::new(dir.path().join("resident"));
    let reg = Registry::default();
    assert!(reg.is_empty() && reg.all().is_empty());
    let p = spawn(&root, &reg, "p", 0);
    let q = spawn(&root, &reg, "q", 1);
    let children = |v: Vec<std::sync::Arc<Resident>>| -> Vec<String> {
        v.iter().map(|r| r.child.clone()).collect()
    };
    assert_eq!(children(reg.of_parent("p")), [p.as_str()]);
    assert_eq!(children(reg.of_parent("q")), [q.as_str()]);
    assert_eq!(children(reg.all()), [p.as_str(), q.as_str()]);
    assert!(!reg.is_empty());
    reg.cleanup(&p);
    assert!(!reg.is_empty(), "q's child is still live");
    assert_eq!(children(reg.all()), [q.as_str()]);
    reg.cleanup(&q);
    assert!(reg.is_empty() && reg.all().is_empty());
    assert_eq!(root.open_handles(), 0);
}
