//! The kernel's own codes: what `keel` prints as `error[CODE]` (exit code 2) when it stops
//! before or while handing control to a driver or a command. Declared here, beside the loader
//! that returns some of them, so the kernel (which never depends on a plugin) and
//! `docs/errors.md` share one list.

crate::error_codes! {
    /// Configuration layers, profiles, bundles, overrides and project trust (the kernel's
    /// config assembly). Each message names the file and line, or the argument, at fault.
    pub enum ConfigCode in "config" {
        /// A layer file exists but could not be read.
        Io = "CONFIG_IO", by "the kernel (config)", retry Later;
        /// Malformed TOML or a shape error (unknown key, missing field, wrong type) in a
        /// layer file.
        Parse = "CONFIG_PARSE", by "the kernel (config)", retry Changed;
        /// `bundles` or `description` in a layer that is not a profile.
        ProfileOnlyKey = "CONFIG_PROFILE_ONLY_KEY", by "the kernel (config)", retry Changed;
        /// A row id, plugin name or bundle name outside `[a-z0-9][a-z0-9-]*`.
        InvalidId = "CONFIG_INVALID_ID", by "the kernel (config)", retry Changed;
        /// A profile name found in none of the config roots, or a profile path that does not
        /// exist.
        UnknownProfile = "CONFIG_UNKNOWN_PROFILE", by "the kernel (config)", retry Changed;
        /// A bundle named by a profile found in none of the config roots.
        UnknownBundle = "CONFIG_UNKNOWN_BUNDLE", by "the kernel (config)", retry Changed;
        /// The same bundle listed twice in one profile.
        DuplicateBundle = "CONFIG_DUPLICATE_BUNDLE", by "the kernel (config)", retry Changed;
        /// An `insert` of an id that is already a live row.
        DuplicateRow = "CONFIG_DUPLICATE_ROW", by "the kernel (config)", retry Changed;
        /// A malformed `-c ROW.KEY=VALUE` argument, or one that cannot be applied.
        BadOverride = "CONFIG_BAD_OVERRIDE", by "the kernel (config)", retry Changed;
        /// A `--patch FILE` that does not exist, or a `--patch NAME` in no config root.
        MissingPatch = "CONFIG_MISSING_PATCH", by "the kernel (config)", retry Changed;
        /// `$KEEL_HOME/trusted-projects.json` is unreadable, malformed or of another format.
        TrustFile = "TRUST_FILE", by "the kernel (project trust)", retry Changed;
        /// The project layer changes security-relevant config and is not trusted as it is
        /// now (`keel trust`, or `--trust-project` for one run).
        ProjectUntrusted = "PROJECT_UNTRUSTED", by "the kernel (project trust)", retry Changed;
        /// A row asked whether a project file is trusted that its plugin's manifest does not
        /// declare (`Manifest::trusts_project_files`); names the row and the path.
        UndeclaredTrustFile = "UNDECLARED_TRUST_FILE", by "the kernel (project trust)", retry Never;
        /// A file a keel run changed in the project's `.keel/`, a project file a plugin
        /// declares (`Manifest::trusts_project_files`) or a workspace `--patch` file, offered
        /// to `--trust-project` or `--patch` before `keel trust`.
        ProjectTainted = "PROJECT_TAINTED", by "the kernel (project trust)", retry Changed;
        /// A `--patch` file a resumed session recorded changed or vanished since.
        RecordedPatchChanged = "RECORDED_PATCH_CHANGED", by "the kernel (`keel resume`)", retry Changed;
    }
}

crate::error_codes! {
    /// Loading plugins, assembling rows, the lock, and the hand-off to a driver or command
    /// (the kernel).
    pub enum KernelCode in "kernel" {
        /// A row's config does not match its plugin's schema; names the row, the JSON
        /// pointer and the layer that set it.
        RowConfig = "ROW_CONFIG", by "the kernel (assembly, `reload`)", retry Changed;
        /// No library for a plugin name on the search path.
        UnknownPlugin = "UNKNOWN_PLUGIN", by "the kernel (assembly)", retry Changed;
        /// A library could not be opened.
        PluginOpen = "PLUGIN_OPEN", by "the loader", retry Never;
        /// A library exports no keel plugin.
        NotAPlugin = "NOT_A_PLUGIN", by "the loader", retry Never;
        /// A plugin built for another ABI major; names both versions.
        AbiMismatch = "ABI_MISMATCH", by "the loader", retry Never;
        /// A plugin's root module layout is incompatible with this kernel's.
        AbiLayout = "ABI_LAYOUT", by "the loader", retry Never;
        /// A manifest is unreadable, or names another plugin id than the row's plugin.
        PluginManifest = "PLUGIN_MANIFEST", by "the loader; the kernel (assembly)", retry Never;
        /// A required facility has no provider in the profile.
        MissingProvider = "MISSING_PROVIDER", by "the kernel (assembly)", retry Changed;
        /// Two rows provide an exclusive facility.
        DuplicateProvider = "DUPLICATE_PROVIDER", by "the kernel (assembly, `provide`)", retry Changed;
        /// The rows' dependencies form a cycle.
        DependencyCycle = "DEPENDENCY_CYCLE", by "the kernel (assembly)", retry Changed;
        /// `keel run` on a profile without a row providing `keel.driver`.
        NoDriver = "NO_DRIVER", by "the kernel (`keel run`, `keel resume`)", retry Changed;
        /// A plugin command on a profile without a row providing `keel.command.<name>`.
        NoCommand = "NO_COMMAND", by "the kernel (`keel sessions`, `fork`, `secrets`)", retry Changed;
        /// A plugin file changed since `keel lock`.
        LockDigest = "LOCK_DIGEST", by "the kernel (lock check)", retry Changed;
        /// The assembly graph differs from the lock.
        LockGraph = "LOCK_GRAPH", by "the kernel (lock check)", retry Changed;
        /// The lock file is unreadable or malformed.
        LockFile = "LOCK_FILE", by "the kernel (lock check)", retry Changed;
        /// A row failed to activate or stayed pending at boot.
        Activation = "ACTIVATION", by "the kernel (boot)", retry Never;
        /// Two plugins declare one event with different modes or payload types; the message
        /// names both plugins and the field that differs. Nothing activated.
        EventDeclarationConflict = "EVENT_DECLARATION_CONFLICT", by "the kernel (boot)", retry Never;
        /// The driver or command row failed or answered nonsense; the message carries its
        /// code.
        Driver = "DRIVER", by "the kernel (hand-off)", retry Never;
        /// A driver asked for a second relaunch in one process.
        RelaunchRefused = "RELAUNCH_REFUSED", by "the kernel (`keel resume`)", retry Never;
        /// A provider's handle is not of the type its service's consumers expect.
        ServiceLayout = "SERVICE_LAYOUT", by "the kernel (service lookup)", retry Never;
    }
}

crate::error_codes! {
    /// Host calls: what the kernel (or the SDK's side of the host table) answers a plugin's
    /// call into it — fibers, registrations, events, redaction, and the kernel's own panics.
    pub enum HostCode in "host" {
        /// The calling fiber was disposed (its row unloaded or reloaded) or is not yet active
        /// for this kind of call; the message names the row.
        InactiveFiber = "INACTIVE_FIBER", by "the kernel (host calls)", retry Never;
        /// A row provided a service its manifest does not declare.
        UndeclaredService = "UNDECLARED_SERVICE", by "the kernel (`provide`)", retry Never;
        /// A row asked for a service its manifest neither requires nor optionally uses.
        UndeclaredRequirement = "UNDECLARED_REQUIREMENT", by "the kernel (service lookup)", retry Never;
        /// A row asked to undo a registration it does not hold.
        UnknownRegistration = "UNKNOWN_REGISTRATION", by "the kernel (`unregister`)", retry Never;
        /// No loaded row's manifest declares the event.
        UnknownEvent = "UNKNOWN_EVENT", by "the kernel (event bus)", retry Never;
        /// A plugin dispatched a `kernel/*` event; those are the kernel's own.
        EventReserved = "EVENT_RESERVED", by "the kernel (event bus)", retry Never;
        /// An event was used in a mode (broadcast, serial, waterfall) other than its declared
        /// one, or a listener of the wrong mode was called.
        EventMode = "EVENT_MODE", by "the kernel (event bus); the SDK's listener shims", retry Never;
        /// A payload or decision is not of the event's declared type; names the event and row.
        EventLayout = "EVENT_LAYOUT", by "the kernel (event bus)", retry Never;
        /// Several listeners of one broadcast failed; the message lists each row's code.
        Aggregate = "AGGREGATE", by "the kernel (event bus)", retry Never;
        /// A listener or call exceeded its deadline.
        Timeout = "TIMEOUT", by "the kernel (event bus deadlines)", retry Later;
        /// A redaction pair was refused (empty, or too many for the row).
        Redact = "REDACT", by "the kernel (`redact`)", retry Changed;
        /// The kernel panicked while serving a host call; the panic was caught at the boundary.
        KernelPanic = "KERNEL_PANIC", by "the host table", retry Never;
        /// A host call was made in a process with no kernel installed (a unit test without
        /// the harness).
        NoHost = "NO_HOST", by "the host table", retry Never;
    }
}

crate::error_codes! {
    /// The kernel's control call (`Context::control`): status, enable, disable, reload, project
    /// file trust, asked by a command plugin.
    pub enum ControlCode in "control" {
        /// The request is not a control operation this kernel knows, or its answer could not
        /// be built.
        Control = "CONTROL", by "the kernel (control)", retry Changed;
        /// Another control operation is running; control operations run one at a time.
        Busy = "BUSY", by "the kernel (control)", retry Later;
        /// The operation names a row the running configuration does not have.
        UnknownRow = "UNKNOWN_ROW", by "the kernel (control)", retry Changed;
        /// A reloaded row failed to activate; the message carries the row's code.
        ReloadFailed = "RELOAD_FAILED", by "the kernel (control `reload`)", retry Never;
    }
}
