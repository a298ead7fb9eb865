//! The right to dispatch (issue 24 item 7): [`Dispatch<E>`], the [`EventSet`] a plugin
//! dispatches, the [`dispatches!`](crate::dispatches) macro that writes one, and the five
//! dispatch methods of [`Context`], each of which takes the handle.
//!
//! Why a handle: an event is dispatchable only when a loaded row declares it, and before SDK 3
//! the declaration (`Manifest::declares::<E>()`) and the dispatch (`ctx.emit::<E>(..)`) were
//! two unrelated lines, so a forgotten declaration compiled and failed at run time with
//! `UNKNOWN_EVENT`. Now the plugin's [`Plugin::Dispatches`](super::Plugin::Dispatches) set is
//! both: the SDK adds its events to the manifest, and `export_plugin!` defines
//! `crate::DISPATCH`, a value of exactly that set, whose fields are the only handles the
//! plugin can name. An event outside the set has no field, a plugin whose set is `()` has no
//! field at all, and a dispatch without a handle does not type-check. The kernel still refuses
//! an undeclared event at run time (`UNKNOWN_EVENT`): a foreign plugin need not use this SDK.
//!
//! The handle is zero-sized and `Copy`; passing it costs nothing, and the manifest JSON the
//! kernel receives is what `declares::<E>()` wrote (an SDK change, not an ABI change).

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;

use abi_stable::StableAbi;
use abi_stable::std_types::RStr;

use super::context::Context;
use super::error::{Result, from_abi};
use super::event::{
    AsyncWaterfallEvent, EmitEvent, Event, ParallelEvent, SerialEvent, WaterfallEvent,
};
use super::ffi::{self};
use super::manifest::Manifest;
use crate::abi::ErasedBox;

/// The right to dispatch event `E`: a field of the plugin's [`EventSet`], reached as
/// `crate::DISPATCH.<field>` (see [`dispatches!`](crate::dispatches)).
pub struct Dispatch<E: Event>(PhantomData<fn() -> E>);

impl<E: Event> Dispatch<E> {
    /// For the SDK's macros and keel's own test fixtures (the ones that prove the kernel's
    /// run-time refusal of an undeclared event). A plugin gets its handles from its set.
    #[doc(hidden)]
    pub const fn __new() -> Self {
        Dispatch(PhantomData)
    }

    /// The event's wire name.
    pub fn name(self) -> &'static str {
        E::NAME
    }
}

impl<E: Event> Clone for Dispatch<E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E: Event> Copy for Dispatch<E> {}

impl<E: Event> fmt::Debug for Dispatch<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Dispatch({})", E::NAME)
    }
}

/// The events a plugin dispatches: its [`Plugin::Dispatches`](super::Plugin::Dispatches).
/// `()` is the empty set (a plugin that only listens and serves). Written by
/// [`dispatches!`](crate::dispatches), never by hand.
pub trait EventSet: Copy + Send + Sync + 'static {
    /// The set's value, with every handle (what `crate::DISPATCH` is).
    #[doc(hidden)]
    const HANDLES: Self;

    /// Adds the declarations of the events this plugin owns to its manifest, in field order.
    #[doc(hidden)]
    fn declare(manifest: Manifest) -> Manifest;
}

impl EventSet for () {
    const HANDLES: Self = ();

    fn declare(manifest: Manifest) -> Manifest {
        manifest
    }
}

/// Declares the events a plugin dispatches: a struct of [`Dispatch`] handles, one field per
/// event, and its [`EventSet`] impl. Name it as the plugin's `type Dispatches`; the SDK adds
/// the events to the manifest, and `export_plugin!` defines `crate::DISPATCH`, the value whose
/// fields are the handles: `ctx.emit(crate::DISPATCH.noted, &note)`.
///
/// A field marked `#[declared_by("plugin")]` is an event another plugin owns and declares
/// (the hooks row reports `fs/observed`, which `tool-fs` declares): the handle exists, the
/// manifest does not declare it, and the kernel dispatches it only while its owner is loaded
/// (`UNKNOWN_EVENT` otherwise). Doc comments on a field go before that attribute.
///
/// ```
/// use keel_plugin_api::abi::RString;
/// use keel_plugin_api::declare_event;
/// use keel_plugin_api::prelude::*;
///
/// #[repr(C)]
/// #[derive(StableAbi, Clone, Debug)]
/// pub struct Note { pub text: RString }
///
/// declare_event! {
///     /// A note was written.
///     pub struct Noted: emit("notes/noted") -> Note;
/// }
///
/// keel_plugin_api::dispatches! {
///     /// What `notes` dispatches.
///     pub struct Dispatches {
///         /// Every note written.
///         pub noted: Noted,
///     }
/// }
///
/// #[derive(Default)]
/// struct Notes;
///
/// impl Plugin for Notes {
///     type Dispatches = Dispatches;
///     fn manifest(&self) -> Manifest {
///         Manifest::new("notes", "0.1.0")
///     }
///     async fn activate(&self, ctx: Context) -> Result<()> {
///         ctx.emit(crate::DISPATCH.noted, &Note { text: "hello".into() })
///     }
/// }
///
/// keel_plugin_api::export_plugin!(Notes);
///
/// fn main() {
///     // The SDK declares the set's events in the manifest the kernel receives.
///     let manifest = keel_plugin_api::sdk::export::full_manifest(&Notes);
///     assert_eq!(manifest.events[0].name, "notes/noted");
/// }
/// ```
///
/// An event outside the set cannot be dispatched: there is no handle for it.
///
/// ```compile_fail,E0609
/// # use keel_plugin_api::abi::RString;
/// # use keel_plugin_api::declare_event;
/// # use keel_plugin_api::prelude::*;
/// # #[repr(C)]
/// # #[derive(StableAbi, Clone, Debug)]
/// # pub struct Note { pub text: RString }
/// # declare_event! { pub struct Noted: emit("notes/noted") -> Note; }
/// declare_event! {
///     /// Not in the set below.
///     pub struct Erased: emit("notes/erased") -> Note;
/// }
/// keel_plugin_api::dispatches! {
///     pub struct Dispatches { pub noted: Noted }
/// }
/// # #[derive(Default)]
/// # struct Notes;
/// impl Plugin for Notes {
///     type Dispatches = Dispatches;
///     fn manifest(&self) -> Manifest {
///         Manifest::new("notes", "0.1.0")
///     }
///     async fn activate(&self, ctx: Context) -> Result<()> {
///         ctx.emit(crate::DISPATCH.erased, &Note { text: "gone".into() })
///     }
/// }
/// keel_plugin_api::export_plugin!(Notes);
/// # fn main() {}
/// ```
///
/// Nor can a set the plugin does not name as its `Dispatches` (here the plugin still says
/// `()`, so `crate::DISPATCH` has no fields), nor can anything be dispatched without a handle:
///
/// ```compile_fail,E0609
/// # use keel_plugin_api::abi::RString;
/// # use keel_plugin_api::declare_event;
/// # use keel_plugin_api::prelude::*;
/// # #[repr(C)]
/// # #[derive(StableAbi, Clone, Debug)]
/// # pub struct Note { pub text: RString }
/// # declare_event! { pub struct Noted: emit("notes/noted") -> Note; }
/// keel_plugin_api::dispatches! {
///     pub struct Dispatches { pub noted: Noted }
/// }
/// # #[derive(Default)]
/// # struct Notes;
/// impl Plugin for Notes {
///     type Dispatches = ();
///     fn manifest(&self) -> Manifest {
///         Manifest::new("notes", "0.1.0")
///     }
///     async fn activate(&self, ctx: Context) -> Result<()> {
///         ctx.emit(crate::DISPATCH.noted, &Note { text: "undeclared".into() })
///     }
/// }
/// keel_plugin_api::export_plugin!(Notes);
/// # fn main() {}
/// ```
///
/// ```compile_fail,E0061
/// # use keel_plugin_api::abi::RString;
/// # use keel_plugin_api::declare_event;
/// # use keel_plugin_api::prelude::*;
/// # #[repr(C)]
/// # #[derive(StableAbi, Clone, Debug)]
/// # pub struct Note { pub text: RString }
/// # declare_event! { pub struct Noted: emit("notes/noted") -> Note; }
/// fn announce(ctx: Context) -> Result<()> {
///     ctx.emit::<Noted>(&Note { text: "no handle".into() })
/// }
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! dispatches {
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[doc = $fdoc:literal])*
                $(#[declared_by($owner:literal)])?
                $fvis:vis $field:ident : $event:ty
            ),* $(,)?
        }
    ) => {
        $(#[$attr])*
        #[derive(Clone, Copy, Debug)]
        $vis struct $name {
            $(
                $(#[doc = $fdoc])*
                $fvis $field: $crate::sdk::Dispatch<$event>,
            )*
        }

        impl $crate::sdk::EventSet for $name {
            const HANDLES: Self = $name {
                $( $field: $crate::sdk::Dispatch::__new(), )*
            };

            fn declare(manifest: $crate::sdk::Manifest) -> $crate::sdk::Manifest {
                $( let manifest = $crate::dispatches!(@declare manifest, $event $(, $owner)?); )*
                manifest
            }
        }
    };
    (@declare $manifest:ident, $event:ty) => {
        $manifest.__declares::<$event>()
    };
    (@declare $manifest:ident, $event:ty, $owner:literal) => {
        $manifest
    };
}

fn rstr(s: &str) -> RStr<'_> {
    RStr::from_str(s)
}

impl Context {
    /// Emits: every listener runs; their failures are contained and reported by the kernel.
    ///
    /// # Errors
    /// Only for misuse: unknown event, mode or layout mismatch.
    pub fn emit<E: EmitEvent>(&self, _right: Dispatch<E>, payload: &E::Payload) -> Result<()> {
        // SAFETY: `payload` outlives the synchronous call; the layout names its type.
        from_abi(unsafe {
            (self.api.emit())(
                self.fiber,
                rstr(E::NAME),
                <E::Payload as StableAbi>::LAYOUT,
                (payload as *const E::Payload).cast::<()>(),
            )
        })
    }

    /// Runs a sync waterfall over `payload`, ending in `terminal` (the default behaviour).
    ///
    /// # Errors
    /// The first error a listener or the terminal returns (panics become `PANIC`).
    pub fn run_waterfall<E: WaterfallEvent>(
        &self,
        _right: Dispatch<E>,
        payload: &mut E::Payload,
        mut terminal: impl FnMut(&mut E::Payload) -> Result<()>,
    ) -> Result<()> {
        let terminal = ffi::sync_terminal::<E::Payload, _>(&mut terminal);
        // SAFETY: `payload` and `terminal` outlive the synchronous dispatch.
        from_abi(unsafe {
            (self.api.waterfall())(
                self.fiber,
                rstr(E::NAME),
                <E::Payload as StableAbi>::LAYOUT,
                (payload as *mut E::Payload).cast::<()>(),
                terminal,
            )
        })
    }

    /// Runs an async waterfall, ending in `terminal`.
    ///
    /// # Errors
    /// The first error a listener or the terminal returns.
    pub async fn run_async_waterfall<E, F, Fut>(
        &self,
        _right: Dispatch<E>,
        payload: E::Payload,
        terminal: F,
    ) -> Result<E::Output>
    where
        E: AsyncWaterfallEvent,
        F: Fn(E::Payload) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<E::Output>> + Send + 'static,
    {
        let fut = (self.api.async_waterfall())(
            self.fiber,
            rstr(E::NAME),
            <E::Output as StableAbi>::LAYOUT,
            ErasedBox::new(payload),
            ffi::async_terminal::<E, F, Fut>(terminal),
        );
        let out = from_abi(fut.await)?;
        // SAFETY: the kernel checked the output's layout against E::Output.
        Ok(unsafe { out.into_inner::<E::Output>() })
    }

    /// Runs a parallel event: all listeners start, all are awaited.
    ///
    /// # Errors
    /// `AGGREGATE` listing every failed listener in registration order.
    pub async fn parallel<E: ParallelEvent>(
        &self,
        _right: Dispatch<E>,
        payload: E::Payload,
    ) -> Result<()> {
        let fut = (self.api.parallel())(self.fiber, rstr(E::NAME), ErasedBox::new(payload));
        from_abi(fut.await)
    }

    /// Runs a serial event until a listener decides.
    ///
    /// # Errors
    /// The first listener error.
    pub async fn serial<E: SerialEvent>(
        &self,
        _right: Dispatch<E>,
        payload: E::Payload,
    ) -> Result<Option<E::Output>> {
        let fut = (self.api.serial())(
            self.fiber,
            rstr(E::NAME),
            <E::Output as StableAbi>::LAYOUT,
            ErasedBox::new(payload),
        );
        let out = from_abi(fut.await)?;
        // SAFETY: the kernel checked the decision's layout against E::Output.
        Ok(out
            .into_option()
            .map(|b| unsafe { b.into_inner::<E::Output>() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::fs::Observed;
    use crate::events::session::{SessionCreated, SessionEvent};

    crate::dispatches! {
        /// A set with an owned event and one another plugin declares.
        pub struct Set {
            /// Declared by this plugin.
            pub created: SessionCreated,
            pub event: SessionEvent,
            /// Declared by its owner.
            #[declared_by("tool-fs")]
            pub observed: Observed,
        }
    }

    #[test]
    fn a_set_declares_its_own_events_in_field_order_and_not_the_borrowed_one() {
        let manifest = <Set as EventSet>::declare(Manifest::new("x", "0.1.0"));
        let names: Vec<&str> = manifest.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["session/created", "session/event"]);
        let layouts: Vec<&str> = manifest.event_layouts.iter().map(|l| l.name).collect();
        assert_eq!(layouts, names);
        assert_eq!(manifest.events[0].mode, "emit");
        assert_eq!(Set::HANDLES.event.name(), "session/event");
        assert_eq!(Set::HANDLES.observed.name(), "fs/observed");
        assert_eq!(
            format!("{:?}", Set::HANDLES.created),
            "Dispatch(session/created)"
        );
        assert_eq!(std::mem::size_of::<Set>(), 0);
    }

    #[test]
    fn the_empty_set_declares_nothing() {
        let manifest = <() as EventSet>::declare(Manifest::new("x", "0.1.0"));
        assert!(manifest.events.is_empty());
    }
}
