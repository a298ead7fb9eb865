//! Ownership rules of the erased values: every value is dropped exactly once, by its own image.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use abi_stable::StableAbi;

use super::*;

#[repr(C)]
#[derive(StableAbi)]
struct Counted {
    drops: *const AtomicUsize,
    value: u32,
}

// SAFETY: test-only; the counter outlives every value.
unsafe impl Send for Counted {}
// SAFETY: as for `Send`: the counter is only read and bumped atomically.
unsafe impl Sync for Counted {}

impl Drop for Counted {
    fn drop(&mut self) {
        // SAFETY: the counter lives for the whole test.
        unsafe { &*self.drops }.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn erased_box_drops_once_and_into_inner_moves_without_dropping() {
    let drops = AtomicUsize::new(0);
    let boxed = ErasedBox::new(Counted {
        drops: &drops,
        value: 7,
    });
    // Constants are not unique by address, so compare layouts structurally.
    assert!(
        crate::host::layouts_compatible(<Counted as StableAbi>::LAYOUT, boxed.layout()).is_ok()
    );
    drop(boxed);
    assert_eq!(drops.load(Ordering::SeqCst), 1);

    let boxed = ErasedBox::new(Counted {
        drops: &drops,
        value: 9,
    });
    // SAFETY: same type.
    let back: Counted = unsafe { boxed.into_inner() };
    assert_eq!(back.value, 9);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "moving out must not drop");
    drop(back);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
}

#[test]
fn shared_ptr_counts_references() {
    let probe = Arc::new(());
    let shared = SharedPtr::new(Arc::clone(&probe));
    assert_eq!(Arc::strong_count(&probe), 2);
    let second = shared.clone();
    drop(shared);
    assert_eq!(
        Arc::strong_count(&probe),
        2,
        "one SharedPtr still holds the value"
    );
    drop(second);
    assert_eq!(Arc::strong_count(&probe), 1);
}

#[test]
fn disposer_dropped_unrun_frees_its_closure() {
    let probe = Arc::new(());
    let held = Arc::clone(&probe);
    let disposer = crate::sdk::test_disposer(move || {
        drop(held);
    });
    assert_eq!(Arc::strong_count(&probe), 2);
    drop(disposer);
    assert_eq!(Arc::strong_count(&probe), 1);
}
