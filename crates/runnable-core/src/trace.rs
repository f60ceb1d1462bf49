//! The `tracing` spans of runs: one per runnable run (model, tool, chain, ...), with the fields that
//! OpenTelemetry backends and LLM tracing UIs read.
//!
//! Every run opens a span named `weft.run` at debug level with target `weft`, whether or not anybody
//! listens to its events. Its fields follow two conventions at once, so that both kinds of backend show
//! it properly:
//!
//! - OpenTelemetry's GenAI semantic conventions on model and tool spans: `gen_ai.operation.name`,
//!   `gen_ai.request.model`, `gen_ai.provider.name` (and the older `gen_ai.system`),
//!   `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`, `gen_ai.response.finish_reasons`,
//!   `gen_ai.tool.name`;
//! - OpenInference's (Arize Phoenix and others): `openinference.span.kind` (`CHAIN`, `LLM`, `TOOL`,
//!   `AGENT`, ...), `llm.model_name`, `llm.provider`, `llm.token_count.prompt`,
//!   `llm.token_count.completion`, `llm.token_count.total`, `tool.name`.
//!
//! `otel.name` names the span after the run (the model's type, the tool, the chain), and a failed run
//! records `error` and `otel.status_code = "ERROR"`. Prompts, completions, tool arguments and results
//! (`input.value`, `output.value`) are recorded only after [`set_record_content`]`(true)`: they may hold
//! personal data.
//!
//! A span nobody subscribes to costs a few nanoseconds: no field is computed for it.

use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;
use tracing::Span;
use uuid::Uuid;

use crate::events::{RunKind, to_event_value};
use crate::messages::AiMessage;

static RECORD_CONTENT: AtomicBool = AtomicBool::new(false);

/// Whether spans record the content of runs (prompts, completions, tool arguments and results) as
/// `input.value` and `output.value`. Off by default.
pub fn set_record_content(on: bool) {
    RECORD_CONTENT.store(on, Ordering::Relaxed);
}

/// Whether spans record the content of runs (see [`set_record_content`]).
pub fn records_content() -> bool {
    RECORD_CONTENT.load(Ordering::Relaxed)
}

/// The OpenInference span kind of a run kind (`LLM` for models, `TOOL`, `CHAIN`, ...).
pub fn openinference_kind(kind: RunKind) -> &'static str {
    match kind {
        RunKind::Chain => "CHAIN",
        RunKind::Prompt => "CHAIN",
        RunKind::ChatModel | RunKind::Llm => "LLM",
        RunKind::Parser => "CHAIN",
        RunKind::Tool => "TOOL",
        RunKind::Retriever => "RETRIEVER",
    }
}

/// Opens the span of a run named `name` of `kind`; its parent is the current span.
pub(crate) fn run_span(name: &str, kind: RunKind, run_id: Uuid, parent: Option<Uuid>) -> Span {
    let span = tracing::debug_span!(
        target: "weft",
        "weft.run",
        otel.name = name,
        name = name,
        kind = kind.as_str(),
        run_id = %run_id,
        parent_run_id = parent.map(|p| p.to_string()),
        openinference.span.kind = openinference_kind(kind),
        gen_ai.operation.name = tracing::field::Empty,
        gen_ai.request.model = tracing::field::Empty,
        gen_ai.provider.name = tracing::field::Empty,
        gen_ai.system = tracing::field::Empty,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        gen_ai.response.finish_reasons = tracing::field::Empty,
        gen_ai.tool.name = tracing::field::Empty,
        llm.model_name = tracing::field::Empty,
        llm.provider = tracing::field::Empty,
        llm.token_count.prompt = tracing::field::Empty,
        llm.token_count.completion = tracing::field::Empty,
        llm.token_count.total = tracing::field::Empty,
        tool.name = tracing::field::Empty,
        input.value = tracing::field::Empty,
        output.value = tracing::field::Empty,
        error = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
    );
    if kind == RunKind::Tool && !span.is_disabled() {
        span.record("gen_ai.operation.name", "execute_tool");
        span.record("gen_ai.tool.name", name);
        span.record("tool.name", name);
    }
    span
}

/// Records a failure on `span`: `error` (the error's `Display` chain), and the OpenTelemetry status.
///
/// Any span opened with an `error` and `otel.status_code` field takes it (the graph's run and task spans
/// do).
pub fn record_error(span: &Span, error: &(dyn std::error::Error + 'static)) {
    if span.is_disabled() {
        return;
    }
    let text = error_chain(error);
    span.record("error", text.as_str());
    span.record("otel.status_code", "ERROR");
    span.record("otel.status_description", text.as_str());
}

/// An error and its sources, `outer: inner: innermost`, skipping a source whose text its outer error
/// already shows.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let message = error.to_string();
    std::iter::once(message.clone())
        .chain(crate::error::causes(error, &message))
        .collect::<Vec<_>>()
        .join(": ")
}

/// Records `value` as the span's `input.value` when content recording is on.
pub(crate) fn record_input<T: Serialize + ?Sized>(span: &Span, value: &T) {
    record_content(span, "input.value", value);
}

/// Records `value` as the span's `output.value` when content recording is on.
pub(crate) fn record_output<T: Serialize + ?Sized>(span: &Span, value: &T) {
    record_content(span, "output.value", value);
}

fn record_content<T: Serialize + ?Sized>(span: &Span, field: &str, value: &T) {
    if records_content() && !span.is_disabled() {
        let json = to_event_value(value);
        match json.as_str() {
            Some(text) => span.record(field, text),
            None => span.record(field, json.to_string().as_str()),
        };
    }
}

/// Records which model a model run calls (on the current span, the model's run span).
pub(crate) fn record_model(span: &Span, model: &str, provider: &str) {
    if span.is_disabled() {
        return;
    }
    span.record("gen_ai.operation.name", "chat");
    if !model.is_empty() {
        span.record("gen_ai.request.model", model);
        span.record("llm.model_name", model);
    }
    if !provider.is_empty() {
        span.record("gen_ai.provider.name", provider);
        span.record("gen_ai.system", provider);
        span.record("llm.provider", provider);
    }
}

/// Token usage and finish reason as a model run's reply (or its merged chunks so far) reports them.
#[derive(Debug, Default, Clone)]
pub(crate) struct ReplyStats {
    input_tokens: u64,
    output_tokens: u64,
    total_tokens: u64,
    usage: bool,
    finish_reason: Option<String>,
}

impl ReplyStats {
    /// Adds what `message` (a reply or one chunk of it) reports.
    pub(crate) fn add(&mut self, message: &AiMessage) {
        if let Some(usage) = &message.usage_metadata {
            self.usage = true;
            self.input_tokens += usage.input_tokens;
            self.output_tokens += usage.output_tokens;
            self.total_tokens += usage.total_tokens;
        }
        if let Some(reason) = message.response_metadata.get("finish_reason").and_then(|r| r.as_str()) {
            self.finish_reason = Some(reason.to_owned());
        }
    }

    /// Records the usage and finish reason on `span`.
    pub(crate) fn record(&self, span: &Span) {
        if span.is_disabled() {
            return;
        }
        if self.usage {
            span.record("gen_ai.usage.input_tokens", self.input_tokens);
            span.record("gen_ai.usage.output_tokens", self.output_tokens);
            span.record("llm.token_count.prompt", self.input_tokens);
            span.record("llm.token_count.completion", self.output_tokens);
            span.record("llm.token_count.total", self.total_tokens);
        }
        if let Some(reason) = &self.finish_reason {
            // A list in the convention; one reply, one reason.
            span.record("gen_ai.response.finish_reasons", format!("[\"{reason}\"]").as_str());
        }
    }
}

/// Records `error` on `span` when it is an error of a run (never for control flow: an interrupt is not a
/// failure).
pub(crate) fn record_run_error(span: &Span, error: &crate::error::Error) {
    if matches!(error, crate::error::Error::ControlFlow(_)) {
        return;
    }
    record_error(span, error);
}
