//! Traces over OTLP: with `OTEL_EXPORTER_OTLP_ENDPOINT` set, the spans of `tracing` are exported
//! to `<endpoint>/v1/traces` as OTLP/HTTP (protobuf, or JSON with
//! `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`) by the OpenTelemetry SDK's batch processor, which
//! honours the `OTEL_BSP_*` variables (its default delay is 5 s, so a span leaves within 10 s of
//! its end) and `OTEL_SERVICE_NAME` (else `genjobs`). Without the endpoint nothing of this is
//! installed and no span is made for export. JSON log lines then carry the `trace_id` of the span
//! they were written in.

use clap::{Args, ValueEnum};
use opentelemetry::trace::{TraceContextExt, TracerProvider};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// How spans are encoded over OTLP/HTTP.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum OtlpProtocol {
    /// Protocol buffers (`application/x-protobuf`).
    #[default]
    #[value(name = "http/protobuf")]
    HttpProtobuf,
    /// JSON (`application/json`).
    #[value(name = "http/json")]
    HttpJson,
}

/// Where spans are exported to, and how.
#[derive(Debug, Clone, Default, Args)]
pub struct TraceArgs {
    /// Base URL of an OTLP/HTTP collector: spans go to `<endpoint>/v1/traces` [default: no
    /// traces]; OTEL_SERVICE_NAME and OTEL_BSP_* are honoured.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", help_heading = "Service")]
    pub otlp_endpoint: Option<String>,
    /// How spans are encoded over OTLP/HTTP.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_PROTOCOL", value_enum, default_value_t, help_heading = "Service")]
    pub otlp_protocol: OtlpProtocol,
}

/// Spans exported over OTLP: where and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceExport {
    /// The collector's base URL.
    pub endpoint: String,
    /// The encoding.
    pub protocol: OtlpProtocol,
}

impl TraceArgs {
    /// The export these settings ask for; `None` without an endpoint.
    #[must_use]
    pub fn export(&self) -> Option<TraceExport> {
        let endpoint = self.otlp_endpoint.as_deref().map(str::trim).filter(|e| !e.is_empty())?;
        Some(TraceExport { endpoint: endpoint.to_owned(), protocol: self.otlp_protocol })
    }
}

/// The tracer exporting to `export`, and its provider, which flushes what it holds when shut down.
///
/// # Errors
/// When the exporter cannot be built (an endpoint that is not a URL).
pub fn tracer(export: &TraceExport) -> Result<(SdkTracerProvider, SdkTracer), String> {
    let protocol = match export.protocol {
        OtlpProtocol::HttpProtobuf => Protocol::HttpBinary,
        OtlpProtocol::HttpJson => Protocol::HttpJson,
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(format!("{}/v1/traces", export.endpoint.trim_end_matches('/')))
        .with_protocol(protocol)
        .build()
        .map_err(|e| format!("cannot export traces to {}: {e}", export.endpoint))?;
    let resource = match std::env::var_os("OTEL_SERVICE_NAME") {
        Some(_) => Resource::builder().build(),
        None => Resource::builder().with_service_name("genjobs").build(),
    };
    let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build();
    let tracer = provider.tracer("genjobs");
    Ok((provider, tracer))
}

/// JSON log lines as `inner` writes them, with the `trace_id` of the span in effect added.
pub struct WithTraceId<F>(pub F);

impl<S, N, F> FormatEvent<S, N> for WithTraceId<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> std::fmt::Result {
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        let context = opentelemetry::Context::current();
        let span = context.span();
        let trace_id = span.span_context().is_valid().then(|| span.span_context().trace_id().to_string());
        match (trace_id, serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(line.trim_end())) {
            (Some(trace_id), Ok(mut fields)) => {
                fields.insert("trace_id".to_owned(), serde_json::Value::String(trace_id));
                writeln!(writer, "{}", serde_json::Value::Object(fields))
            }
            _ => writer.write_str(&line),
        }
    }
}
