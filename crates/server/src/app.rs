//! What every route and worker shares: the graphs, the records, the checkpointer and store, the run
//! channels and the limits.

use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Map, Value};
use tokio::sync::Semaphore;
use weft_graph::Checkpointer;
use weft_graph::store::Store;

use crate::error::{ApiError, ApiResult};
use crate::graphs::{GraphRegistry, default_assistant_id};
use crate::model::{Assistant, Thread};
use crate::runs::channel::Channels;
use crate::storage::RecordsLock;
use crate::webhook::Webhooks;

/// Limits of one server.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The largest request body, in bytes.
    pub(crate) body_bytes: usize,
    /// How long a stream stays quiet before a heartbeat (`/wait` and `/join`: a newline).
    pub(crate) keep_alive: std::time::Duration,
    /// How long open requests may take to end after a shutdown.
    pub(crate) shutdown_grace: std::time::Duration,
    /// How long a run may take before it ends as `timeout`; none: no limit.
    pub(crate) run_timeout: Option<std::time::Duration>,
    /// How long a run may go without progress (no step, event or save) before it ends as an error;
    /// none: no watchdog.
    pub(crate) run_watchdog: Option<std::time::Duration>,
    /// How many runs execute at once (the permits of [`App::run_slots`]).
    pub(crate) concurrent_runs: usize,
    /// How many events a v2 protocol stream keeps for a `since` replay (`LSD_PROTOCOL_V2_BUFFER_SIZE`).
    pub(crate) protocol_buffer: usize,
}

/// The server's shared state.
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) graphs: GraphRegistry,
    pub(crate) records: RecordsLock,
    pub(crate) checkpointer: Arc<dyn Checkpointer>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) channels: Channels,
    /// The listeners of whole threads (`GET /threads/{thread_id}/stream`).
    pub(crate) thread_taps: crate::runs::taps::ThreadTaps,
    /// One permit per run that may execute at once.
    pub(crate) run_slots: Arc<Semaphore>,
    pub(crate) limits: Limits,
    /// The limits of connections.
    pub(crate) connections: crate::conn::ConnLimits,
    /// Authentication and authorization; none: every request is allowed.
    pub(crate) auth: Option<Arc<dyn crate::auth::Auth>>,
    /// Calls the webhooks of runs that end.
    pub(crate) webhooks: Arc<Webhooks>,
    /// Wakes the cron scheduler when a cron is made, changed or deleted.
    pub(crate) cron_wake: tokio::sync::Notify,
    /// Counts of finished runs and their latencies (`GET /metrics`).
    pub(crate) metrics: crate::metrics::RunMetrics,
    /// Every run's control: a shutdown drains them all (each stops at its next superstep boundary, saved,
    /// and goes on at the next start), and no run starts after it.
    pub(crate) drain: weft_graph::RunControl,
    /// Thread TTLs: the default of new threads and the sweeper's settings.
    pub(crate) thread_ttl: crate::retention::ThreadTtlConfig,
    /// Store TTLs: the store is built with them; the server sweeps the store at their interval.
    pub(crate) store_ttl: crate::store_ttl::StoreTtlConfig,
    /// A SQLite file's lock, held while the server lives: one process per file.
    pub(crate) _writer: Option<crate::storage::WriterLock>,
    /// Scaled out: the run queue in PostgreSQL and this instance's worker, Redis.
    #[cfg(feature = "scale")]
    pub(crate) scale: Option<Arc<crate::scale::Scale>>,
}

/// Now, as the API writes times.
pub(crate) fn now() -> String {
    weft_graph::time::format_rfc3339(SystemTime::now())
}

/// A new time-ordered id (UUID v7).
pub(crate) fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Whether `s` is a UUID.
pub(crate) fn is_uuid(s: &str) -> bool {
    uuid::Uuid::parse_str(s).is_ok()
}

/// A UUID as LangGraph stores it (lower case with hyphens, whether it came upper case, as `urn:uuid:…`,
/// in braces or without hyphens); anything else as it is.
pub(crate) fn canonical_id(s: &str) -> String {
    uuid::Uuid::parse_str(s).map_or_else(|_| s.to_owned(), |id| id.hyphenated().to_string())
}

/// `value`'s object, or an empty one.
pub(crate) fn object(value: Option<&Value>) -> Map<String, Value> {
    value.and_then(Value::as_object).cloned().unwrap_or_default()
}

/// LangGraph's JSONB merge: the keys of each later object replace the earlier ones'.
pub(crate) fn merge(objects: &[&Map<String, Value>]) -> Map<String, Value> {
    let mut out = Map::new();
    for object in objects {
        for (k, v) in object.iter() {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

/// Whether `target` contains `filter` (JSONB `@>`): every key of `filter` is in `target` with a value that
/// contains the filter's (objects recursively, lists by element, other values by equality).
pub(crate) fn contains(target: &Value, filter: &Value) -> bool {
    match (target, filter) {
        (Value::Object(t), Value::Object(f)) => {
            f.iter().all(|(k, fv)| t.get(k).is_some_and(|tv| contains(tv, fv)))
        }
        (Value::Array(t), Value::Array(f)) => f.iter().all(|fv| t.iter().any(|tv| contains(tv, fv))),
        (t, f) => t == f,
    }
}

impl App {
    /// Whether this is one instance of a scaled-out server (feature `scale`, PostgreSQL and Redis).
    pub(crate) fn is_scaled(&self) -> bool {
        #[cfg(feature = "scale")]
        return self.scale.is_some();
        #[cfg(not(feature = "scale"))]
        false
    }

    /// The assistant id a run or request names: a graph id stands for its default assistant.
    pub(crate) fn resolve_assistant_id(&self, id: &str) -> String {
        if self.graphs.get(id).is_some() { default_assistant_id(id) } else { id.to_owned() }
    }

    /// `Invalid assistant: …` (LangGraph's 422 for an assistant that is neither a UUID nor a graph).
    pub(crate) fn invalid_assistant(&self, id: &str) -> ApiError {
        ApiError::unprocessable(format!(
            "Invalid assistant: '{id}'. Must be either:\n- A valid assistant UUID, or\n- One of the registered graphs: {}",
            self.graphs.ids()
        ))
    }

    /// The assistant, or a 404.
    pub(crate) async fn assistant(&self, assistant_id: &str) -> ApiResult<Assistant> {
        let records = self.records.read().await?;
        records.assistants.get(assistant_id).cloned().ok_or_else(|| ApiError::not_found("Not Found"))
    }

    /// The thread, or LangGraph's 404.
    pub(crate) async fn thread(&self, thread_id: &str) -> ApiResult<Thread> {
        let mut records = self.records.read().await?;
        records.thread(thread_id).await?.cloned().ok_or_else(|| ApiError::thread_not_found(thread_id))
    }

    /// The thread, when the caller may do `action` on it; else LangGraph's 404, as for a thread that does
    /// not exist.
    pub(crate) async fn thread_for(
        &self,
        caller: &crate::api::guard::Caller,
        action: crate::auth::Action,
        thread_id: &str,
    ) -> ApiResult<Thread> {
        let mut value = serde_json::json!({"thread_id": thread_id});
        let access = self.authorize(caller, crate::auth::Resource::Threads, action, &mut value).await?;
        let thread = self.thread(thread_id).await?;
        if access.allows(&thread.metadata) { Ok(thread) } else { Err(ApiError::thread_not_found(thread_id)) }
    }
}

/// Checks a path id is a UUID, with LangGraph's 422 text (`Invalid thread ID: must be a UUID`).
pub(crate) fn require_uuid(id: &str, what: &str) -> ApiResult<()> {
    if is_uuid(id) {
        Ok(())
    } else {
        Err(ApiError::unprocessable(format!("Invalid {what} ID: must be a UUID")))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn containment_is_jsonbs() {
        assert!(contains(&json!({"a": 1, "b": {"c": 2, "d": 3}}), &json!({"b": {"c": 2}})));
        assert!(contains(&json!({"tags": ["x", "y"]}), &json!({"tags": ["y"]})));
        assert!(!contains(&json!({"a": 1}), &json!({"a": 2})));
        assert!(!contains(&json!({}), &json!({"a": null})));
    }
}
