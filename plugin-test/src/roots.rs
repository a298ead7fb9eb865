//! Root modules for plugin types linked into the test binary: the same SDK entry points
//! `export_plugin!` instantiates, behind generic `extern "C"` functions instead of the macro's
//! per-crate statics, so any number of plugin types can be hosted from one binary.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use keel_kernel::loader::PluginLibrary;
use keel_plugin_api::__private::LibHeader;
use keel_plugin_api::abi::{
    AbiResult, EventLayout, FfiFuture, HostCtx, PluginRoot_Ref, RString, RVec,
};
use keel_plugin_api::host::LoadedLibrary;
use keel_plugin_api::prelude::*;
use keel_plugin_api::sdk::export;

use crate::HarnessError;

type Instances = HashMap<TypeId, &'static (dyn Any + Send + Sync)>;

/// The one value of plugin type `P` in this process (as `export_plugin!` keeps one per image).
fn instance<P: Plugin + Default>() -> &'static P {
    static INSTANCES: Mutex<Option<Instances>> = Mutex::new(None);
    let mut guard = INSTANCES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let map = guard.get_or_insert_with(HashMap::new);
    let any: &'static (dyn Any + Send + Sync) = *map
        .entry(TypeId::of::<P>())
        .or_insert_with(|| Box::leak(Box::new(P::default())));
    match any.downcast_ref::<P>() {
        Some(p) => p,
        // Keyed by `TypeId::of::<P>()`: the entry is a `P`. Keep the no-panic rule anyway.
        None => Box::leak(Box::new(P::default())),
    }
}

extern "C" fn manifest<P: Plugin + Default>() -> AbiResult<RString> {
    export::manifest_entry::<P>(instance::<P>)
}

extern "C" fn activate<P: Plugin + Default>(ctx: HostCtx) -> FfiFuture<AbiResult<()>> {
    export::activate_entry::<P>(instance::<P>, ctx)
}

extern "C" fn event_layouts<P: Plugin + Default>() -> RVec<EventLayout> {
    export::event_layouts_entry::<P>(instance::<P>)
}

extern "C" fn shutdown<P: Plugin + Default>() {
    export::shutdown_entry::<P>(instance::<P>);
}

/// The root module of plugin type `P`, as its `cdylib` would export it.
pub fn static_root<P: Plugin + Default>() -> PluginRoot_Ref {
    export::root(
        manifest::<P>,
        activate::<P>,
        event_layouts::<P>,
        shutdown::<P>,
    )
}

/// `P` as the kernel's `PluginLibrary`: manifest read through the root, as the loader does.
pub(crate) fn library<P: Plugin + Default>() -> Result<Arc<PluginLibrary>, HarnessError> {
    static LIBRARIES: Mutex<Option<HashMap<TypeId, Arc<PluginLibrary>>>> = Mutex::new(None);
    let mut guard = LIBRARIES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let map = guard.get_or_insert_with(HashMap::new);
    if let Some(lib) = map.get(&TypeId::of::<P>()) {
        return Ok(Arc::clone(lib));
    }
    let lib = Arc::new(open(std::any::type_name::<P>(), static_root::<P>())?);
    map.insert(TypeId::of::<P>(), Arc::clone(&lib));
    Ok(lib)
}

/// The plugin crate whose `export_plugin!` exported `header`, as the kernel's `PluginLibrary`.
pub(crate) fn exported(
    crate_name: &str,
    header: &'static LibHeader,
) -> Result<Arc<PluginLibrary>, HarnessError> {
    static LIBRARIES: Mutex<Option<HashMap<usize, Arc<PluginLibrary>>>> = Mutex::new(None);
    let mut guard = LIBRARIES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let map = guard.get_or_insert_with(HashMap::new);
    let key = std::ptr::from_ref(header) as usize;
    if let Some(lib) = map.get(&key) {
        return Ok(Arc::clone(lib));
    }
    let path = PathBuf::from(format!("<linked {crate_name}>"));
    let library = LoadedLibrary::linked(header, &path).map_err(|e| HarnessError::Manifest {
        plugin: crate_name.to_owned(),
        reason: e.to_string(),
    })?;
    let lib = Arc::new(wrap(crate_name, path, library)?);
    map.insert(key, Arc::clone(&lib));
    Ok(lib)
}

/// Wraps a root module as the kernel's `PluginLibrary`.
pub(crate) fn open(type_name: &str, root: PluginRoot_Ref) -> Result<PluginLibrary, HarnessError> {
    let path = PathBuf::from(format!("<linked {type_name}>"));
    wrap(type_name, path, LoadedLibrary::from_root(root))
}

fn wrap(
    type_name: &str,
    path: PathBuf,
    library: LoadedLibrary,
) -> Result<PluginLibrary, HarnessError> {
    let failed = |reason: String| HarnessError::Manifest {
        plugin: type_name.to_owned(),
        reason,
    };
    let manifest_json = library
        .manifest_json(&path)
        .map_err(|e| failed(e.to_string()))?;
    let manifest: Manifest =
        serde_json::from_str(&manifest_json).map_err(|e| failed(e.to_string()))?;
    Ok(PluginLibrary::linked(
        manifest,
        manifest_json,
        path,
        library,
    ))
}
