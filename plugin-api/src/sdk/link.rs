//! The plugin image's link to the kernel: the checked `HostApi` table, set on first activation.
//!
//! This is the plugin side of the asymmetry rule: the kernel hands over its table opaquely with
//! its layout, and the plugin checks *its own* expectation (possibly older, fewer fields)
//! against it. A kernel that appended functions passes; one that changed or removed any fails
//! with a one-line reason instead of undefined behaviour.

use std::sync::OnceLock;

use abi_stable::StableAbi;
use abi_stable::abi_stability::abi_checking::check_layout_compatibility;
use abi_stable::prefix_type::{PrefixRef, WithMetadata_};

use super::error::{Error, Result};
use crate::abi::{ABI_MAJOR, HostApi_Prefix, HostApi_Ref, HostCtx};

static HOST: OnceLock<HostApi_Ref> = OnceLock::new();

/// Checks and stores the kernel's table; idempotent.
pub(crate) fn link(ctx: &HostCtx) -> Result<HostApi_Ref> {
    if let Some(api) = HOST.get() {
        return Ok(*api);
    }
    if ctx.abi != ABI_MAJOR {
        return Err(Error::coded(
            crate::host::KernelCode::AbiMismatch,
            format!("plugin ABI {ABI_MAJOR}, kernel ABI {}", ctx.abi),
        ));
    }
    if let Err(errors) =
        check_layout_compatibility(<HostApi_Ref as StableAbi>::LAYOUT, ctx.api_layout)
    {
        let report = errors.to_string();
        let reason = if report.contains("too many fields") {
            "this plugin was built for a newer kernel (it expects host functions this kernel lacks); \
             upgrade keel or rebuild the plugin against this kernel's keel-plugin-api"
                .to_owned()
        } else {
            crate::host::first_error_line(&report)
        };
        return Err(Error::coded(
            crate::host::KernelCode::AbiMismatch,
            format!("the kernel's host API is incompatible with this plugin: {reason}"),
        ));
    }
    // SAFETY: the kernel created `api` with `HostApi_Ref::to_raw_ptr` from a leaked table, and the
    // layout check above proved the prefix we read is compatible.
    let api = HostApi_Ref(unsafe {
        PrefixRef::from_raw(
            ctx.api
                .cast::<WithMetadata_<HostApi_Prefix, HostApi_Prefix>>(),
        )
    });
    let _ = HOST.set(api);
    super::tracing_forward::install(api, ctx.max_log_level);
    Ok(api)
}

/// The linked table, once any fiber of this plugin was activated.
pub(crate) fn host() -> Result<HostApi_Ref> {
    HOST.get().copied().ok_or_else(|| {
        Error::coded(
            crate::codes::SdkCode::NotLinked,
            "the kernel has not activated this plugin yet; host calls are unavailable",
        )
    })
}
