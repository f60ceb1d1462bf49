//! The `tracing` spans of graph runs and their tasks, opened whether or not anybody streams the run.
//!
//! A run opens `weft.graph` (debug level, target `weft`) with the graph's name, thread, run id and
//! namespace; when it ends it records the last step, the checkpoint it ended on, its interrupts or its
//! error. Each node task opens `weft.task` under it with the node, step, task id, attempt and the
//! checkpoint the task was planned from. Runs inside a node (models, tools, chains, subgraphs) open their
//! spans under the task's. Field names follow weft's run spans ([`weft_runnable_core::trace`]): `otel.name`,
//! `openinference.span.kind`, `error`, `otel.status_code`.

use tracing::Span;
use uuid::Uuid;
use weft_runnable_core::RunnableConfig;
use weft_runnable_core::trace::{record_error, records_content};

use crate::error::GraphError;
use crate::runtime::Runtime;
use crate::types::Interrupt;

/// Whether anybody may want weft's debug spans: a load of `tracing`'s global level, checked before a task
/// opens its span so that a run nobody traces pays one branch per task.
#[inline]
pub(crate) fn enabled() -> bool {
    tracing::level_enabled!(tracing::Level::DEBUG)
}

/// Opens the span of a run of the graph `name` (its parent: the current span).
pub(crate) fn graph_span(name: &str, agent: bool, config: &RunnableConfig) -> Span {
    tracing::debug_span!(
        target: "weft",
        "weft.graph",
        otel.name = name,
        graph = name,
        openinference.span.kind = if agent { "AGENT" } else { "CHAIN" },
        thread_id = config.configurable_str("thread_id"),
        checkpoint_ns = tracing::field::Empty,
        run_id = tracing::field::Empty,
        step = tracing::field::Empty,
        checkpoint_id = tracing::field::Empty,
        interrupted = tracing::field::Empty,
        interrupts = tracing::field::Empty,
        input.value = tracing::field::Empty,
        output.value = tracing::field::Empty,
        error = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
    )
}

/// Records the id of an unobserved run on its span (an observed run's scope records its own): the
/// config's, else a new one (made only when the span is enabled).
pub(crate) fn record_run_id(span: &Span, config: &RunnableConfig) {
    if span.is_disabled() {
        return;
    }
    let id = config.run_id.unwrap_or_else(Uuid::now_v7);
    span.record("run_id", id.to_string().as_str());
}

/// Records how a run ended: the checkpoint it ended on, its interrupts, or its error (an interrupt is
/// not an error). Its steps are recorded as they start ([`record_step`]).
pub(crate) fn record_graph_end(
    span: &Span,
    checkpoint_id: Option<&str>,
    result: Result<&[Interrupt], &GraphError>,
) {
    if span.is_disabled() {
        return;
    }
    if let Some(id) = checkpoint_id {
        span.record("checkpoint_id", id);
    }
    match result {
        Ok(interrupts) => record_interrupts(span, interrupts),
        Err(e) => record_error(span, e),
    }
}

/// Opens the span of a node's task, from what its runtime knows (its parent: the current span, the run's).
pub(crate) fn task_span(node: &str, rt: &Runtime) -> Span {
    let span = tracing::debug_span!(
        target: "weft",
        "weft.task",
        otel.name = node,
        node = node,
        openinference.span.kind = "CHAIN",
        step = rt.inner.site.step,
        task_id = &*rt.inner.site.task_id,
        attempt = u64::from(rt.inner.site.attempt),
        run_id = tracing::field::Empty,
        thread_id = tracing::field::Empty,
        checkpoint_ns = tracing::field::Empty,
        checkpoint_id = tracing::field::Empty,
        interrupted = tracing::field::Empty,
        interrupts = tracing::field::Empty,
        input.value = tracing::field::Empty,
        output.value = tracing::field::Empty,
        error = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
    );
    if !span.is_disabled() {
        let site = &rt.inner.site;
        match &site.address {
            Some(a) => {
                span.record("thread_id", a.thread_id.as_str());
                span.record("checkpoint_ns", a.checkpoint_ns.as_str());
                if let Some(id) = &a.checkpoint_id {
                    span.record("checkpoint_id", id.as_str());
                }
            }
            None => {
                if let Some(thread) = &site.thread_id {
                    span.record("thread_id", thread.as_str());
                }
                span.record("checkpoint_ns", site.ns.as_str());
            }
        }
    }
    span
}

/// Records the interrupts a task or run paused on (their values only when spans record content).
pub(crate) fn record_interrupts(span: &Span, interrupts: &[Interrupt]) {
    if interrupts.is_empty() || span.is_disabled() {
        return;
    }
    span.record("interrupted", true);
    span.record("interrupts", interrupts.len());
    if records_content() {
        let json = serde_json::to_string(interrupts).unwrap_or_default();
        span.record("output.value", json.as_str());
    }
}

/// Records the step a run has reached.
pub(crate) fn record_step(span: &Span, step: i64) {
    if !span.is_disabled() {
        span.record("step", step);
    }
}

/// Records a run's final state as its `output.value` when spans record content (`state` is called only
/// then).
pub(crate) fn record_output(span: &Span, state: impl FnOnce() -> serde_json::Value) {
    if records_content() && !span.is_disabled() {
        span.record("output.value", state().to_string().as_str());
    }
}
