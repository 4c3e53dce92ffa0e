//! [`OtelTraces`]: the traces port over OpenTelemetry, through the `tracing` spans that
//! `tracing-opentelemetry` turns into OpenTelemetry spans. The context of the span in effect is
//! OpenTelemetry's current context (the bridge makes it so while a span is entered), written and
//! read as a W3C `traceparent`.

use genjobs_domain::ports::Traces;
use genjobs_domain::trace::TraceParent;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Traces exported by the OpenTelemetry tracer the binary installed with the bridge.
#[derive(Debug, Clone, Copy, Default)]
pub struct OtelTraces;

impl Traces for OtelTraces {
    fn are_on(&self) -> bool {
        true
    }

    fn current(&self) -> Option<TraceParent> {
        let context = opentelemetry::Context::current();
        let span = context.span();
        let span = span.span_context();
        if !span.is_valid() {
            return None;
        }
        TraceParent::parse(&format!("00-{}-{}-{:02x}", span.trace_id(), span.span_id(), span.trace_flags().to_u8()))
    }

    fn continue_trace(&self, span: &tracing::Span, parent: &TraceParent) {
        let parts: Vec<&str> = parent.as_str().split('-').collect();
        let [_, trace, id, flags] = parts.as_slice() else { return };
        let (Ok(trace), Ok(id), Ok(flags)) =
            (TraceId::from_hex(trace), SpanId::from_hex(id), u8::from_str_radix(flags, 16))
        else {
            return;
        };
        let remote = SpanContext::new(trace, id, TraceFlags::new(flags), true, TraceState::default());
        if let Err(e) = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote)) {
            tracing::debug!(error = %e, "a span could not continue its trace");
        }
    }
}

#[cfg(test)]
mod tests {
    use genjobs_domain::ports::Traces;
    use genjobs_domain::trace::TraceParent;

    use super::OtelTraces;

    #[test]
    fn without_a_span_in_a_trace_there_is_nothing_to_keep() {
        assert_eq!(OtelTraces.current(), None);
        let parent = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        OtelTraces.continue_trace(&tracing::Span::none(), &parent);
    }
}
