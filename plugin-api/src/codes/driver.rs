//! Codes a driver plugin (the headless driver) reports on its output stream or as a failed run.

crate::error_codes! {
    /// Drivers (`keel run` front ends such as `headless`).
    pub enum DriverCode in "driver" {
        /// The driver's own arguments or input lines are not what it takes.
        Usage = "USAGE", by "the headless driver", retry Changed;
        /// The driver could not read its input or write its output.
        Io = "DRIVER_IO", by "the headless driver", retry Later;
        /// The input closed before any message was sent; nothing ran.
        NoInput = "NO_INPUT", by "the headless driver", retry Changed;
        /// The driver is already running a session in this process.
        Busy = "DRIVER_BUSY", by "the headless driver", retry Later;
        /// A service the driver calls answered something the protocol rules out (an agent
        /// `create` without a session id).
        AgentProtocol = "AGENT_PROTOCOL", by "the headless driver", retry Never;
    }
}
