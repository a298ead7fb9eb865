//! Forwards the plugin image's `tracing` events to the kernel's subscriber.
//!
//! Each cdylib links its own copy of tracing-core with its own (empty) global dispatcher, so a
//! plugin's `tracing::info!` would vanish. On first link the SDK installs a small subscriber in
//! the plugin image that formats each event and hands it to `HostApi.log`; the kernel re-emits
//! it under the plugin's target with its own filter (`KEEL_LOG`). Panics in the plugin image are
//! routed the same way instead of being printed raw to stderr.

use std::fmt::Write as _;

use abi_stable::std_types::RStr;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Registry;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};

use crate::abi::{FiberId, HostApi_Ref, LogLevel};

struct Forward {
    api: HostApi_Ref,
}

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}

fn level(l: &Level) -> LogLevel {
    match *l {
        Level::ERROR => LogLevel::Error,
        Level::WARN => LogLevel::Warn,
        Level::INFO => LogLevel::Info,
        Level::DEBUG => LogLevel::Debug,
        Level::TRACE => LogLevel::Trace,
    }
}

impl<S: Subscriber> Layer<S> for Forward {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        let meta = event.metadata();
        (self.api.log())(
            FiberId(0),
            level(meta.level()),
            RStr::from_str(meta.target()),
            RStr::from_str(fields.0.trim_start()),
        );
    }
}

/// Installs the forwarder and panic hook in this image (first call wins). Events more verbose
/// than the kernel keeps are dropped here, before any formatting or ABI crossing.
pub(crate) fn install(api: HostApi_Ref, max_log_level: u8) {
    let max = match max_log_level {
        0 => LevelFilter::OFF,
        1 => LevelFilter::ERROR,
        2 => LevelFilter::WARN,
        3 => LevelFilter::INFO,
        4 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    };
    let subscriber = Registry::default().with(Forward { api }.with_filter(max));
    let _ = tracing::subscriber::set_global_default(subscriber);
    std::panic::set_hook(Box::new(move |info| {
        let location = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let message = format!(
            "panic{location}: {}",
            super::ffi::panic_message(info.payload())
        );
        (api.log())(
            FiberId(0),
            LogLevel::Error,
            RStr::from_str("keel::plugin::panic"),
            RStr::from_str(&message),
        );
    }));
}
