//! JSON log lines written straight into the `fmt` layer's buffer (one per thread, kept between
//! events), the same bytes as `tracing-subscriber`'s own JSON format with flattened fields and no
//! spans: `{"timestamp":…,"level":…,<the event's fields>,"target":…}`. That format made a string
//! of the timestamp, and went through serde's writer adapter a few bytes at a time, on every
//! request's line.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_log::NormalizeEvent;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The format of the process's JSON log lines, timed by `T`.
#[derive(Debug, Clone)]
pub struct JsonLines<T = SystemTime> {
    timer: T,
}

impl JsonLines {
    /// Lines with the stock timestamps (RFC 3339, UTC, microseconds).
    #[must_use]
    pub const fn new() -> Self {
        Self { timer: SystemTime }
    }
}

impl Default for JsonLines {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> JsonLines<T> {
    /// Lines whose timestamps `timer` writes.
    pub const fn with_timer(timer: T) -> Self {
        Self { timer }
    }
}

impl<S, N, T> FormatEvent<S, N> for JsonLines<T>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    T: FormatTime,
{
    fn format_event(&self, _: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        // An event of the `log` crate says its own target, as the stock format shows it.
        let normalized = event.normalized_metadata();
        let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());
        writer.write_str("{\"timestamp\":\"")?;
        self.timer.format_time(&mut writer)?;
        write!(writer, "\",\"level\":\"{}\"", meta.level())?;
        let mut fields = Fields { out: &mut writer, result: Ok(()) };
        event.record(&mut fields);
        fields.result?;
        writer.write_str(",\"target\":")?;
        string(&mut writer, meta.target())?;
        writer.write_str("}\n")
    }
}

/// Writes each field as `,"name":value`, as serde_json writes the value.
struct Fields<'w, 'a> {
    out: &'w mut Writer<'a>,
    result: fmt::Result,
}

impl Fields<'_, '_> {
    fn entry(&mut self, field: &Field, value: impl FnOnce(&mut Writer<'_>) -> fmt::Result) {
        if self.result.is_ok() {
            self.result = entry(self.out, field, value);
        }
    }
}

fn entry(out: &mut Writer<'_>, field: &Field, value: impl FnOnce(&mut Writer<'_>) -> fmt::Result) -> fmt::Result {
    out.write_char(',')?;
    string(out, field.name())?;
    out.write_char(':')?;
    value(out)
}

impl Visit for Fields<'_, '_> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        // serde_json writes a number that is not finite as null.
        self.entry(field, |out| match serde_json::Number::from_f64(value) {
            Some(number) => write!(out, "{number}"),
            None => out.write_str("null"),
        });
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.entry(field, |out| write!(out, "{value}"));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.entry(field, |out| write!(out, "{value}"));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.entry(field, |out| write!(out, "{value}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.entry(field, |out| string(out, value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.entry(field, |out| {
            out.write_char('"')?;
            write!(Escaped(out), "{value:?}")?;
            out.write_char('"')
        });
    }
}

/// `text` as a JSON string.
fn string(out: &mut Writer<'_>, text: &str) -> fmt::Result {
    out.write_char('"')?;
    Escaped(out).write_str(text)?;
    out.write_char('"')
}

/// Writes what it is given escaped as serde_json escapes the inside of a string: the quote, the
/// backslash and control characters; nothing else.
struct Escaped<'w, 'a>(&'w mut Writer<'a>);

impl fmt::Write for Escaped<'_, '_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let mut plain = 0;
        for (i, byte) in text.bytes().enumerate() {
            let escape = match byte {
                b'"' => "\\\"",
                b'\\' => "\\\\",
                b'\n' => "\\n",
                b'\r' => "\\r",
                b'\t' => "\\t",
                0x08 => "\\b",
                0x0c => "\\f",
                0x00..=0x1f => "",
                _ => continue,
            };
            self.0.write_str(&text[plain..i])?;
            match escape {
                "" => write!(self.0, "\\u{byte:04x}")?,
                escape => self.0.write_str(escape)?,
            }
            plain = i + 1;
        }
        self.0.write_str(&text[plain..])
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex, PoisonError};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    /// Every timestamp the same, so that two formats' lines can be compared whole.
    #[derive(Clone, Copy)]
    struct Fixed;

    impl FormatTime for Fixed {
        fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
            w.write_str("2026-11-29T06:00:00.123456Z")
        }
    }

    /// What the lines written while it lives say.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Self;

        fn make_writer(&'a self) -> Self {
            self.clone()
        }
    }

    impl Captured {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
        }
    }

    /// The events of `log` formatted by `format`.
    fn lines_of<F>(format: F, log: impl Fn()) -> String
    where
        F: FormatEvent<tracing_subscriber::Registry, tracing_subscriber::fmt::format::DefaultFields>
            + Send
            + Sync
            + 'static,
    {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(captured.clone())
            .event_format(format)
            .finish();
        tracing::subscriber::with_default(subscriber, log);
        captured.text()
    }

    /// Events with every kind of value, in a span: what the stock format makes of them.
    fn events() {
        let error = io::Error::other("disk \"full\"\n");
        let span = tracing::info_span!("outer", job = "j1");
        let _entered = span.enter();
        tracing::info!(
            request_id = %"0123abcd",
            user_id = Some("u_1"),
            job_id = None::<&str>,
            method = %"GET",
            path = "/api/v1/jobs/j\"1",
            status = 200_u16,
            millis = 3_u64,
            "request"
        );
        tracing::warn!(below = -7_i64, ratio = 0.25, whole = 1.0, huge = 1e300, nan = f64::NAN, yes = true, "numbers");
        tracing::error!(error = &error as &(dyn std::error::Error + 'static), big = 1_u128 << 100, "an error: {}", 42);
        tracing::info!(some = ?Some(4), range = ?(1..4), text = "tab\tnul\u{0}bell\u{7}del\u{7f}é😀\\", "debug");
        tracing::debug!(target: "genjobs::elsewhere", "no fields but the message");
        tracing::info!(message = "a message field", after = 2);
    }

    #[test]
    fn lines_are_the_bytes_of_the_stock_json_format() {
        let stock =
            tracing_subscriber::fmt::format().json().flatten_event(true).with_current_span(false).with_span_list(false);
        let expected = lines_of(stock.with_timer(Fixed), events);
        let ours = lines_of(JsonLines::with_timer(Fixed), events);
        assert_eq!(ours, expected);
        assert_eq!(ours.lines().count(), 6, "{ours}");
    }

    #[test]
    fn a_request_line_reads_as_it_always_has() {
        let line = lines_of(JsonLines::with_timer(Fixed), || {
            tracing::info!(
                request_id = %"0123abcd",
                user_id = Some("u_1"),
                job_id = None::<&str>,
                method = %"GET",
                path = "/api/v1/jobs/j1",
                status = 200_u16,
                millis = 3_u64,
                "request"
            );
        });
        assert_eq!(
            line,
            "{\"timestamp\":\"2026-11-29T06:00:00.123456Z\",\"level\":\"INFO\",\"message\":\"request\",\
             \"request_id\":\"0123abcd\",\"user_id\":\"u_1\",\"method\":\"GET\",\"path\":\"/api/v1/jobs/j1\",\
             \"status\":200,\"millis\":3,\"target\":\"genjobs::logs::json_lines::tests\"}\n"
        );
    }

    #[test]
    fn the_timestamp_is_the_stock_one() {
        let line = lines_of(JsonLines::new(), || tracing::info!("now"));
        let value: serde_json::Value = serde_json::from_str(&line).expect("JSON");
        let timestamp = value["timestamp"].as_str().expect("a timestamp");
        assert_eq!(timestamp.len(), "2026-11-29T06:00:00.123456Z".len(), "{timestamp}");
        assert!(timestamp.ends_with('Z') && timestamp.as_bytes()[10] == b'T', "{timestamp}");
    }
}
