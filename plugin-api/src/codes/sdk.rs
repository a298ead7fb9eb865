//! Codes the SDK itself returns inside a plugin process, outside any contract call: its
//! runtime, its link to the kernel's host table, host functions an older kernel lacks.

crate::error_codes! {
    /// The SDK's plugin-side machinery (`sdk::runtime`, `sdk::link`, `sdk::output`).
    pub enum SdkCode in "sdk" {
        /// The plugin's async runtime could not be built or its lock was poisoned.
        Runtime = "RUNTIME", by "the SDK (plugin runtime)", retry Never;
        /// A task on the plugin runtime was cancelled before it finished.
        Cancelled = "CANCELLED", by "the SDK (plugin runtime)", retry Later;
        /// The kernel's host table lacks the function (an older kernel within the major).
        Unsupported = "UNSUPPORTED", by "the SDK (host calls)", retry Never;
        /// A host call was made before the kernel activated any fiber of this plugin.
        NotLinked = "NOT_LINKED", by "the SDK (host calls)", retry Never;
        /// A plugin reached a state its own logic rules out (a bug in the plugin).
        Internal = "INTERNAL", by "any plugin", retry Never;
    }
}
