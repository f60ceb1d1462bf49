//! OpenTelemetry export of weft's traces: graph runs, node tasks, model and tool calls, over OTLP
//! (HTTP/protobuf) to any OpenTelemetry backend: Arize Phoenix, Jaeger, Langfuse, an OpenTelemetry
//! collector.
//!
//! One call sets it up and installs the global `tracing` subscriber:
//!
//! ```no_run
//! # fn main() -> Result<(), weft_integrations::otel::OtelError> {
//! // Phoenix listens for OTLP on its web port (6006 by default).
//! let _otel = weft_integrations::otel::init("http://127.0.0.1:6006")?;
//! // ... run graphs; the guard flushes the last spans when dropped.
//! # Ok(()) }
//! ```
//!
//! Spans carry OpenTelemetry's GenAI attributes (`gen_ai.request.model`, `gen_ai.usage.input_tokens`,
//! ...) and OpenInference's (`openinference.span.kind`, `llm.token_count.prompt`, ...), described in
//! [`weft_runnable_core::trace`]. Prompts and completions are exported only with
//! [`OtelConfig::record_content`]. To add the export to a subscriber of your own, use [`layer`].

use std::fmt;

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{Layer, Registry};

/// Why the export could not be set up or flushed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtelError {
    /// The endpoint is not an `http://` or `https://` URL.
    #[error(
        "invalid OTLP endpoint {endpoint:?}: expected an http:// or https:// URL such as http://127.0.0.1:6006"
    )]
    InvalidEndpoint {
        /// The endpoint given.
        endpoint: String,
    },
    /// The OTLP exporter could not be built.
    #[error("cannot build the OTLP exporter for {endpoint}")]
    Exporter {
        /// The traces URL.
        endpoint: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A global `tracing` subscriber was already installed: use [`layer`] to add the export to it.
    #[error("a global tracing subscriber is already installed; add weft::otel::layer to it instead")]
    AlreadyInstalled,
    /// Flushing or shutting down the exporter failed.
    #[error("cannot flush the spans to {endpoint}")]
    Flush {
        /// The traces URL.
        endpoint: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Settings of the export.
#[derive(Debug, Clone)]
pub struct OtelConfig {
    /// The backend's OTLP/HTTP address: a base URL (`http://127.0.0.1:6006`, to which `/v1/traces` is added)
    /// or the full traces URL (ending in `/v1/traces`).
    pub endpoint: String,
    /// The `service.name` of the spans (default `weft`).
    pub service_name: String,
    /// The project the spans go to in Phoenix (`openinference.project.name`), when set.
    pub project: Option<String>,
    /// Whether spans carry prompts, completions, tool arguments and results (`input.value`,
    /// `output.value`). Off by default: they may hold personal data.
    pub record_content: bool,
}

impl OtelConfig {
    /// Export to `endpoint` with the defaults.
    pub fn new(endpoint: impl Into<String>) -> Self {
        Self {
            endpoint: endpoint.into(),
            service_name: "weft".to_owned(),
            project: None,
            record_content: false,
        }
    }

    /// Sets the `service.name`.
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = name.into();
        self
    }

    /// Sends the spans to this Phoenix project.
    pub fn project(mut self, project: impl Into<String>) -> Self {
        self.project = Some(project.into());
        self
    }

    /// Records prompts, completions, tool arguments and results on spans.
    pub fn record_content(mut self, on: bool) -> Self {
        self.record_content = on;
        self
    }

    /// The URL spans are posted to.
    pub fn traces_url(&self) -> Result<String, OtelError> {
        let endpoint = self.endpoint.trim();
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) || endpoint.len() < 9 {
            return Err(OtelError::InvalidEndpoint { endpoint: self.endpoint.clone() });
        }
        let base = endpoint.trim_end_matches('/');
        Ok(if base.ends_with("/v1/traces") { base.to_owned() } else { format!("{base}/v1/traces") })
    }
}

/// Keeps the export running; dropping it (or [`shutdown`](OtelGuard::shutdown)) flushes the spans not yet
/// sent.
pub struct OtelGuard {
    provider: Option<SdkTracerProvider>,
    endpoint: String,
}

impl fmt::Debug for OtelGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtelGuard").field("endpoint", &self.endpoint).finish_non_exhaustive()
    }
}

impl OtelGuard {
    /// Sends the spans finished so far.
    pub fn flush(&self) -> Result<(), OtelError> {
        match &self.provider {
            Some(p) => p.force_flush().map_err(|e| self.flush_error(e)),
            None => Ok(()),
        }
    }

    /// Sends the remaining spans and stops the export.
    pub fn shutdown(mut self) -> Result<(), OtelError> {
        match self.provider.take() {
            Some(p) => p.shutdown().map_err(|e| self.flush_error(e)),
            None => Ok(()),
        }
    }

    fn flush_error(&self, e: impl std::error::Error + Send + Sync + 'static) -> OtelError {
        OtelError::Flush { endpoint: self.endpoint.clone(), source: Box::new(e) }
    }
}

impl Drop for OtelGuard {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take() {
            if let Err(e) = p.shutdown() {
                tracing::warn!(endpoint = %self.endpoint, error = %e, "cannot flush the last spans");
            }
        }
    }
}

/// Exports weft's spans to the OTLP/HTTP `endpoint` (see [`OtelConfig::endpoint`]) and installs the
/// global `tracing` subscriber. Keep the guard until the program ends.
pub fn init(endpoint: &str) -> Result<OtelGuard, OtelError> {
    init_with(OtelConfig::new(endpoint))
}

/// [`init`] with settings.
pub fn init_with(config: OtelConfig) -> Result<OtelGuard, OtelError> {
    let (layer, guard) = layer(&config)?;
    Registry::default().with(layer).try_init().map_err(|_| OtelError::AlreadyInstalled)?;
    Ok(guard)
}

/// The export as a `tracing` layer (weft's spans only, target `weft` at debug level), to add to a
/// subscriber of your own; keep the guard until the program ends.
pub fn layer<S>(config: &OtelConfig) -> Result<(impl Layer<S> + Send + Sync + use<S>, OtelGuard), OtelError>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    let endpoint = config.traces_url()?;
    // The exporter's HTTP client uses rustls with the ring provider (as the `openai` feature does); a
    // provider the program installed first is kept.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(endpoint.clone())
        .build()
        .map_err(|e| OtelError::Exporter { endpoint: endpoint.clone(), source: Box::new(e) })?;
    let mut resource = Resource::builder().with_service_name(config.service_name.clone());
    if let Some(project) = &config.project {
        resource = resource.with_attribute(KeyValue::new("openinference.project.name", project.clone()));
    }
    let provider =
        SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource.build()).build();
    let tracer = provider.tracer("weft");
    weft_runnable_core::trace::set_record_content(config.record_content);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_tracked_inactivity(false)
        .with_location(false)
        .with_threads(false)
        .with_filter(Targets::new().with_target("weft", Level::DEBUG));
    Ok((layer, OtelGuard { provider: Some(provider), endpoint }))
}

/// The export's error met in `main` converts with `?`, kept whole (`Error::downcast_custom`).
impl From<OtelError> for weft_runnable_core::Error {
    fn from(err: OtelError) -> Self {
        Self::custom(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_gets_the_traces_path() {
        let url = |e: &str| OtelConfig::new(e).traces_url();
        assert_eq!(url("http://127.0.0.1:6006").unwrap(), "http://127.0.0.1:6006/v1/traces");
        assert_eq!(url("http://127.0.0.1:6006/").unwrap(), "http://127.0.0.1:6006/v1/traces");
        assert_eq!(url("https://collector:4318/v1/traces").unwrap(), "https://collector:4318/v1/traces");
    }

    #[test]
    fn an_endpoint_that_is_not_a_url_is_a_clear_error() {
        for bad in ["", "127.0.0.1:6006", "grpc://x:4317", "http://"] {
            let err = OtelConfig::new(bad).traces_url().unwrap_err();
            assert!(matches!(err, OtelError::InvalidEndpoint { .. }), "{bad}: {err}");
            assert!(err.to_string().contains("expected an http:// or https:// URL"), "{err}");
        }
    }
}
