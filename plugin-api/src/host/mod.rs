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
/// and on mismatch says which type and which field differ and how ([`describe_mismatch`]).
pub fn layouts_compatible(
    expected: &'static crate::abi::TypeLayout,
    found: &'static crate::abi::TypeLayout,
) -> Result<(), String> {
    if std::ptr::eq(expected, found) {
        return Ok(());
    }
    check_layout_compatibility(expected, found).map_err(|e| describe_mismatch(&e))
}

/// One line naming the type, the path of fields down to the first difference, and the
/// difference: `type AgentPoint, field turn: mismatched type …` (issue 24 item 7 — abi_stable's
/// own first line, `Error:mismatched type`, named neither).
pub fn describe_mismatch(
    errors: &abi_stable::abi_stability::abi_checking::AbiInstabilityErrors,
) -> String {
    use abi_stable::type_layout::TLFieldOrFunction;
    let top = errors.interface.full_type().to_string();
    let Some(first) = errors
        .errors
        .iter()
        .find(|e| !e.errs.is_empty())
        .or_else(|| errors.errors.first())
    else {
        return format!("type {top}: incompatible layout");
    };
    let path: Vec<String> = first
        .stack_trace
        .iter()
        .map(|step| match &step.expected {
            TLFieldOrFunction::Field(f) => f.name().to_owned(),
            TLFieldOrFunction::Function(f) => format!("{}()", f.name),
        })
        .collect();
    let inner = first
        .stack_trace
        .last()
        .map(|step| match (&step.expected, &step.found) {
            (TLFieldOrFunction::Field(e), TLFieldOrFunction::Field(f)) => {
                format!(" (expected {}, found {})", e.full_type(), f.full_type())
            }
            _ => String::new(),
        });
    let what = first_error_line(&first.to_string());
    let what = what.trim_start_matches("Error:").trim();
    let field = if path.is_empty() {
        String::new()
    } else {
        format!(", field {}", path.join("."))
    };
    let line = format!("type {top}{field}{}: {what}", inner.unwrap_or_default());
    line.chars().take(400).collect()
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

#[cfg(test)]
mod mismatch_tests {
    use abi_stable::StableAbi;
    use abi_stable::std_types::RString;

    mod old {
        #[repr(C)]
        #[derive(abi_stable::StableAbi)]
        pub struct Point {
            pub session_id: super::RString,
            pub turn: u64,
        }
    }
    mod new {
        #[repr(C)]
        #[derive(abi_stable::StableAbi)]
        pub struct Point {
            pub session_id: super::RString,
            pub turn: u32,
        }
    }

    #[test]
    fn a_mismatch_names_the_type_and_the_field() {
        let e = super::layouts_compatible(
            <old::Point as StableAbi>::LAYOUT,
            <new::Point as StableAbi>::LAYOUT,
        )
        .unwrap_err();
        assert!(e.contains("type Point"), "{e}");
        assert!(e.contains("field turn"), "{e}");
        assert!(e.contains("u64") && e.contains("u32"), "{e}");
        assert!(!e.contains("0 error"), "{e}");
    }
}
