//! Typed events: the trait every event implements and the per-mode marker traits.
//!
//! The mode is part of an event's public contract (ARCHITECTURE §4.4). Each mode has its own
//! marker trait, so registering or dispatching an event through the wrong mode does not compile
//! in the SDK; the kernel checks the mode again at the ABI, where a foreign plugin could lie.

use abi_stable::StableAbi;

use crate::abi::EventMode;

/// An event: a name, a dispatch mode and a payload type, fixed within an ABI major.
///
/// Declare events with [`declare_event!`](crate::declare_event) rather than by hand.
pub trait Event: 'static {
    /// The event's wire name, `domain/name`.
    const NAME: &'static str;
    /// How listeners are run.
    const MODE: EventMode;
    /// What the dispatcher hands to listeners.
    type Payload: StableAbi + Send + Sync + 'static;
    /// What comes back: `()` for emit, parallel and sync waterfall; the decision for serial; the
    /// chain's result for an async waterfall.
    type Output: StableAbi + Send + 'static;
    /// Catalog entry (name, mode, payload type names, doc), used by `docs/events.md`.
    const INFO: EventInfo;
}

/// Synchronous notification; listener errors and panics are contained (ARCHITECTURE §4.4).
pub trait EmitEvent: Event<Output = ()> {}
/// Synchronous around-middleware over `&mut Payload`.
pub trait WaterfallEvent: Event<Output = ()> {}
/// Asynchronous around-middleware: `Payload` in, `Output` out, `next` re-runnable.
pub trait AsyncWaterfallEvent: Event {}
/// All listeners start, all are awaited; failures come back aggregated.
pub trait ParallelEvent: Event<Output = ()> {}
/// Listeners awaited one at a time until one returns a decision.
pub trait SerialEvent: Event {}

/// One row of the event catalog.
#[derive(Debug, Clone, Copy)]
pub struct EventInfo {
    /// Wire name.
    pub name: &'static str,
    /// Dispatch mode.
    pub mode: EventMode,
    /// Rust path of the payload type.
    pub payload: &'static str,
    /// Rust path of the output type.
    pub output: &'static str,
    /// One-paragraph purpose.
    pub doc: &'static str,
    /// Layout of the payload type as compiled into this crate (the canonical layout).
    pub payload_layout: &'static crate::abi::TypeLayout,
    /// Layout of the output type.
    pub output_layout: &'static crate::abi::TypeLayout,
}

/// Declares an event type.
///
/// ```
/// use keel_plugin_api::declare_event;
/// use keel_plugin_api::abi::RString;
///
/// #[repr(C)]
/// #[derive(keel_plugin_api::abi::StableAbi, Clone, Debug)]
/// pub struct Greeting { pub who: RString }
///
/// declare_event! {
///     /// Someone said hello.
///     pub struct Hello: emit("example/hello") -> Greeting;
/// }
/// ```
///
/// Modes: `emit`, `waterfall`, `parallel` take only a payload; `async_waterfall` and `serial` also
/// take an output type: `pub struct X: serial("a/b") -> Payload => Decision;`.
#[macro_export]
macro_rules! declare_event {
    ($(#[doc = $doc:literal])* $vis:vis struct $ty:ident : emit($name:literal) -> $payload:ty;) => {
        $crate::declare_event!(@base [$($doc)*] $vis $ty, $name, Emit, $payload, ());
        impl $crate::sdk::event::EmitEvent for $ty {}
    };
    ($(#[doc = $doc:literal])* $vis:vis struct $ty:ident : waterfall($name:literal) -> $payload:ty;) => {
        $crate::declare_event!(@base [$($doc)*] $vis $ty, $name, Waterfall, $payload, ());
        impl $crate::sdk::event::WaterfallEvent for $ty {}
    };
    ($(#[doc = $doc:literal])* $vis:vis struct $ty:ident : parallel($name:literal) -> $payload:ty;) => {
        $crate::declare_event!(@base [$($doc)*] $vis $ty, $name, Parallel, $payload, ());
        impl $crate::sdk::event::ParallelEvent for $ty {}
    };
    ($(#[doc = $doc:literal])* $vis:vis struct $ty:ident : async_waterfall($name:literal) -> $payload:ty => $output:ty;) => {
        $crate::declare_event!(@base [$($doc)*] $vis $ty, $name, AsyncWaterfall, $payload, $output);
        impl $crate::sdk::event::AsyncWaterfallEvent for $ty {}
    };
    ($(#[doc = $doc:literal])* $vis:vis struct $ty:ident : serial($name:literal) -> $payload:ty => $output:ty;) => {
        $crate::declare_event!(@base [$($doc)*] $vis $ty, $name, Serial, $payload, $output);
        impl $crate::sdk::event::SerialEvent for $ty {}
    };
    (@base [$($doc:literal)*] $vis:vis $ty:ident, $name:literal, $mode:ident, $payload:ty, $output:ty) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, Copy)]
        $vis struct $ty;
        impl $crate::sdk::event::Event for $ty {
            const NAME: &'static str = $name;
            const MODE: $crate::abi::EventMode = $crate::abi::EventMode::$mode;
            type Payload = $payload;
            type Output = $output;
            const INFO: $crate::sdk::event::EventInfo = $crate::sdk::event::EventInfo {
                name: $name,
                mode: $crate::abi::EventMode::$mode,
                payload: stringify!($payload),
                output: stringify!($output),
                doc: concat!($($doc, "\n"),*),
                payload_layout: <$payload as $crate::abi::StableAbi>::LAYOUT,
                output_layout: <$output as $crate::abi::StableAbi>::LAYOUT,
            };
        }
    };
}
