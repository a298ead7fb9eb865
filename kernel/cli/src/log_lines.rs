//! How the kernel's and the plugins' `tracing` events reach stderr (issue 23 item 16;
//! ARCHITECTURE §11: every `keel:` line is one line).
//!
//! With `KEEL_LOG` unset — the default — only warnings and errors are printed, each as one
//! line `keel: warning: ROW: message` or `keel: error: ROW: message`: no timestamp, no level
//! column, no module path. ROW is the profile row the event came from (the `row` field the
//! kernel puts on a plugin's line), else `kernel`. The event's other fields follow the message
//! as `key=value`; control characters are escaped, so a quoted body cannot span lines. With
//! `KEEL_LOG` set, its filter applies and tracing's full format is printed, for debugging, each
//! timestamp followed by `+MS` since exec ([`crate::boot`], issue 25 item 1).
//! Rejected: a fixed `fmt` format with the timestamp and target switched off, which still
//! prints the level column, the fields in tracing's order and multi-line messages as they are.

use std::fmt::{self, Write as _};

use keel_plugin_api::sdk::line::one_line;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Installs the process's subscriber, writing through the output guard's redacting stderr:
/// `KEEL_LOG`'s filter and tracing's format when it is set, else [`OneLine`] at `warn`.
pub fn install() {
    let writer = keel_output_guard::redact::RedactingStderr;
    if std::env::var_os("KEEL_LOG").is_some() {
        let filter = tracing_subscriber::EnvFilter::try_from_env("KEEL_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(writer)
            .with_target(true)
            .with_timer(SinceExec)
            .init();
    } else {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
            .with_writer(writer)
            .event_format(OneLine)
            .init();
    }
}

/// tracing's timestamp, then milliseconds since exec: `2026-12-04T02:42:44.491507Z +12.508ms`.
struct SinceExec;

impl FormatTime for SinceExec {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        SystemTime.format_time(w)?;
        write!(
            w,
            " +{:.3}ms",
            crate::boot::since_exec().as_secs_f64() * 1e3
        )
    }
}

/// The default format: `keel: warning: ROW: message key=value…`.
pub struct OneLine;

impl<S, N> FormatEvent<S, N> for OneLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        writeln!(writer, "{}", line(*event.metadata().level(), &fields))
    }
}

/// One event's parts, as [`OneLine`] prints them.
#[derive(Debug, Default)]
struct Fields {
    message: String,
    row: Option<String>,
    rest: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message.push_str(value),
            "row" => self.row = Some(value.to_owned()),
            // The plugin's module path: what the default format leaves out.
            "source" => {}
            name => {
                let _ = write!(self.rest, " {name}={value}");
            }
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "message" => {
                let _ = write!(self.message, "{value:?}");
            }
            "row" => self.row = Some(format!("{value:?}")),
            "source" => {}
            name => {
                let _ = write!(self.rest, " {name}={value:?}");
            }
        }
    }
}

/// The printed line (without its newline).
fn line(level: Level, fields: &Fields) -> String {
    let kind = match level {
        Level::ERROR => "error",
        Level::WARN => "warning",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "trace",
    };
    let row = fields.row.as_deref().unwrap_or("kernel");
    let text = format!("{}{}", fields.message, fields.rest);
    format!("keel: {kind}: {row}: {}", one_line(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_warning_is_one_keel_line_naming_its_row() {
        let fields = Fields {
            message: "model call failed; retrying\nsecond line".to_owned(),
            row: Some("agent-loop".to_owned()),
            rest: " code=SERVER".to_owned(),
        };
        assert_eq!(
            line(Level::WARN, &fields),
            "keel: warning: agent-loop: model call failed; retrying\\nsecond line code=SERVER"
        );
    }

    #[test]
    fn a_kernel_error_without_a_row_says_kernel() {
        let fields = Fields {
            message: "boom".to_owned(),
            ..Fields::default()
        };
        assert_eq!(line(Level::ERROR, &fields), "keel: error: kernel: boom");
    }
}
