//! Resident children's error codes (issue 16 item 2; SUB-01…04, SUB-06, MEM-07). The
//! `subagent` row serves the `resident_*`, `memory_*` and `notify_parent` tools; this is the
//! vocabulary of their failures, kept apart from the one-shot `agent` tool's codes because a
//! resident child has a name, a store and a teardown the one-shot child does not.

crate::error_codes! {
    /// Resident children (`subagent` row: `resident_*`, `memory_*`, `notify_parent`).
    pub enum ResidentCode in "resident" {
        /// No resident child of that name is live for this parent session.
        Unknown = "RESIDENT_UNKNOWN", by "`resident_send`/`resident_view`/`resident_promote`/`resident_stop`", retry Changed;
        /// A resident child of that name is already live for this parent session.
        Exists = "RESIDENT_EXISTS", by "`resident_start`", retry Changed;
        /// The named child profile is not in the `subagent` row's `agents`.
        Profile = "RESIDENT_PROFILE", by "`resident_start`", retry Changed;
        /// A cap of the `subagent` row (`max_depth`, `resident.max_children`) refuses the child.
        Limit = "RESIDENT_LIMIT", by "`resident_start`", retry Changed;
        /// The calling session is not a live resident child (memory and `notify_parent` are a
        /// resident child's tools).
        NotResident = "RESIDENT_NOT_CHILD", by "`memory_write`/`memory_read`/`notify_parent`", retry Never;
        /// `resident_promote`: a key is not in the child's temp memory; nothing was promoted.
        NoSuchKey = "RESIDENT_NO_KEY", by "`resident_promote`", retry Changed;
        /// A memory or residual store failed (SQLite's words and the file in the message).
        Store = "RESIDENT_STORE", by "the `subagent` row's stores", retry Never;
    }
}
