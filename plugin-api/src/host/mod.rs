//! Kernel-side half of the ABI (hidden from plugin authors).
//!
//! The kernel crate forbids `unsafe`; everything it needs that touches raw pointers lives here:
//! opening a library ([`load`]), exposing a safe [`Host`] trait as the `HostApi` table
//! ([`table`]), and calling listeners, terminals and `next` trampolines ([`calls`]). The calls
//! take payloads whose layout the kernel has already checked; that precondition is the one
//! contract between this module and the kernel's bus.

mod calls;
mod codes;
mod load;
mod table;

pub use calls::{
    AsyncChain, ChainFuture, PayloadMut, PayloadRef, SyncChain, async_next, sync_next,
};
pub use codes::{ConfigCode, ControlCode, HostCode, KernelCode};
pub use load::{LoadError, LoadedLibrary, load_library, read_abi_major};
pub use table::{BoxFuture, Host, MAX_KERNELS, install_host};

pub use abi_stable::abi_stability::abi_checking::check_layout_compatibility;

/// Compares two layouts (`expected` = the side that was there first, `found` = the newcomer)
/// and returns the first meaningful line of abi_stable's report on mismatch.
pub fn layouts_compatible(
    expected: &'static crate::abi::TypeLayout,
    found: &'static crate::abi::TypeLayout,
) -> Result<(), String> {
    if std::ptr::eq(expected, found) {
        return Ok(());
    }
    check_layout_compatibility(expected, found).map_err(|e| first_error_line(&e.to_string()))
}

/// Condenses abi_stable's multi-thousand-line reports to one line.
pub fn first_error_line(report: &str) -> String {
    let mut lines = report.lines().map(str::trim).filter(|l| !l.is_empty());
    let interesting = report.lines().map(str::trim).find(|l| {
        l.starts_with("Error:")
            || l.contains("mismatched")
            || l.contains("too many")
            || l.contains("incompatible")
    });
    interesting
        .or_else(|| lines.next())
        .unwrap_or("incompatible layout")
        .chars()
        .take(300)
        .collect()
}

/// Turns a looked-up service into a typed reference after checking its layout.
///
/// # Errors
/// The first line of the layout mismatch.
pub fn service_ref<S: crate::sdk::Service>(
    shared: crate::abi::ErasedShared,
) -> Result<crate::sdk::ServiceRef<S>, String> {
    layouts_compatible(
        <S::Handle as abi_stable::StableAbi>::LAYOUT,
        shared.layout(),
    )?;
    Ok(crate::sdk::ServiceRef::from_shared(shared))
}

/// The fields of a `repr(C)` struct layout as `(name, type)`, for generated docs.
pub fn describe_fields(layout: &'static crate::abi::TypeLayout) -> Vec<(String, String)> {
    layout
        .get_fields()
        .map(|fields| {
            fields
                .iter()
                .map(|f| (f.name().to_owned(), f.full_type().to_string()))
                .collect()
        })
        .unwrap_or_default()
}
