//! Traces: OpenTelemetry spans exported over OTLP/HTTP (protobuf) to a
//! collector, off unless an endpoint is configured.
//!
//! The spans are the process's own `tracing` spans whose target is one of
//! Parley's crates (a request, a job, an agent run with its model and tool
//! calls), bridged by `tracing-opentelemetry`; log events are not sent, so
//! nothing a log line says reaches the collector. A call's turns are timed
//! after the fact ([`timed_span`]), from the moments the speech loop noted.
//!
//! What a span carries is chosen where it is opened: ids, names, routes,
//! models, counts and durations — never message text, prompts, tool
//! arguments or secrets.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

pub use opentelemetry::KeyValue;
use opentelemetry::global;
use opentelemetry::propagation::Extractor;
use opentelemetry::trace::{Span as _, TraceContextExt, Tracer as _, TracerProvider as _};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

/// Where and how traces go (`[traces]` in the configuration).
#[derive(Debug, Clone)]
pub struct TraceConfig {
    /// The collector's OTLP/HTTP base URL (`http://127.0.0.1:4318`); spans
    /// are posted to its `/v1/traces`.
    pub endpoint: String,
    pub service_name: String,
    /// The share of new traces kept (0 to 1); a trace a caller started
    /// (`traceparent`) follows the caller's choice.
    pub sample_ratio: f64,
    /// Sent with every export (a collector's API key).
    pub headers: HashMap<String, String>,
}

/// The running exporter: flush it before the process ends.
#[derive(Clone)]
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// Starts exporting, and gives the layer that turns Parley's `tracing`
    /// spans into OpenTelemetry spans. Also installs the exporter as the
    /// process's OpenTelemetry provider (for [`timed_span`]) and the W3C
    /// trace-context propagator (for [`continue_trace`]).
    pub fn start<S>(config: &TraceConfig) -> Result<(Traces, impl Layer<S> + use<S>), String>
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    {
        let endpoint = config.endpoint.trim_end_matches('/');
        let endpoint =
            if endpoint.ends_with("/v1/traces") { endpoint.to_owned() } else { format!("{endpoint}/v1/traces") };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(endpoint)
            .with_timeout(Duration::from_secs(10))
            .with_headers(config.headers.clone())
            .build()
            .map_err(|e| format!("traces.endpoint: {e}"))?;
        let sampler = Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(config.sample_ratio)));
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_sampler(sampler)
            .with_resource(Resource::builder().with_service_name(config.service_name.clone()).build())
            .build();
        global::set_tracer_provider(provider.clone());
        global::set_text_map_propagator(TraceContextPropagator::new());
        let layer = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("parley"))
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
                meta.is_span() && meta.target().starts_with("parley")
            }));
        Ok((Traces { provider }, layer))
    }

    /// Sends what is buffered; blocks (call it off the async threads).
    pub fn flush(&self) {
        if let Err(e) = self.provider.force_flush() {
            tracing::warn!(error = %e, "could not send the last traces");
        }
    }

    /// Sends what is buffered and stops; blocks.
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "could not send the last traces");
        }
    }
}

/// Makes `span` continue the trace a caller started (a W3C `traceparent`
/// header), when traces are on and the header is well formed.
pub fn continue_trace(span: &tracing::Span, headers: &http::HeaderMap) {
    if !headers.contains_key("traceparent") {
        return;
    }
    let parent = global::get_text_map_propagator(|p| p.extract(&Headers(headers)));
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
}

struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// One phase of a [`timed_span`], in order: it starts where the one
/// before it ended.
pub struct Phase {
    pub name: &'static str,
    pub ms: i64,
}

/// Records a span that already happened, from `start` to `start + total_ms`,
/// as a child of the current `tracing` span, with `phases` as its children
/// laid end to end from its start. A no-op when traces are off.
pub fn timed_span(name: &'static str, start: SystemTime, total_ms: i64, attributes: Vec<KeyValue>, phases: &[Phase]) {
    let tracer = global::tracer("parley");
    let parent = tracing::Span::current().context();
    let at = |ms: i64| start + Duration::from_millis(ms.max(0) as u64);
    let span = tracer
        .span_builder(name)
        .with_start_time(start)
        .with_attributes(attributes.clone())
        .start_with_context(&tracer, &parent);
    let turn = parent.with_span(span);
    let mut offset = 0;
    for phase in phases {
        let mut child = tracer
            .span_builder(phase.name)
            .with_start_time(at(offset))
            .with_attributes(attributes.clone())
            .start_with_context(&tracer, &turn);
        offset += phase.ms;
        child.end_with_timestamp(at(offset));
    }
    turn.span().end_with_timestamp(at(total_ms));
}
