//! Codes of the service-contract layer itself: what any typed call can answer before or after
//! the provider's own logic runs.

crate::error_codes! {
    /// Contract calls (`sdk::contract`): dispatch, argument and answer decoding, panics.
    pub enum ContractCode in "contract" {
        /// The provider does not have the method: its contract version is older than the
        /// caller's. The message names the caller and the provider with their versions.
        UnknownMethod = "UNKNOWN_METHOD", by "the SDK, on either side of a contract call", retry Never;
        /// The request is not what the method takes (was also spelled `INVALID_ARGS` before
        /// SDK 2; the two are merged under this spelling).
        InvalidArguments = "INVALID_ARGUMENTS", by "the SDK when decoding a request; providers validating one", retry Changed;
        /// The provider's answer is not what the method returns.
        InvalidAnswer = "INVALID_ANSWER", by "the SDK when decoding an answer", retry Never;
        /// A value could not be encoded or parsed as JSON.
        InvalidJson = "INVALID_JSON", by "the SDK (`Frozen`, `Payload`)", retry Never;
        /// The provider panicked; the panic was caught at the boundary.
        Panic = "PANIC", by "the SDK's FFI shims", retry Never;
        /// No active provider for a required service.
        ServiceUnavailable = "SERVICE_UNAVAILABLE", by "`Context::client`", retry Later;
        /// A row config the plugin cannot use: it does not deserialise into the plugin's config
        /// type, or a value passed the schema but is unusable (an HTTP header that cannot be
        /// sent).
        Config = "CONFIG", by "`Context::config`; plugins at activation", retry Changed;
        /// A plugin-specific failure with no code of its own.
        Plugin = "PLUGIN", by "`Error::msg`", retry Never;
        /// An I/O error with no more specific code.
        Io = "IO", by "any plugin (`From<std::io::Error>`)", retry Later;
    }
}
