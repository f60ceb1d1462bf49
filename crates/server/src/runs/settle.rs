//! A thread's values, interrupts and status, kept in step with its checkpoints and its runs.

use std::sync::Arc;

use serde_json::{Map, Value};
use weft_graph::JsonSnapshot;
use weft_runnable_core::RunnableConfig;

use super::wire::{interrupt_record, state_values};
use crate::app::{App, now};
use crate::error::{ApiError, ApiResult};
use crate::model::{Thread, ThreadStatus};
use crate::storage::{Change, Key};

/// A config addressing the thread's latest checkpoint.
pub(crate) fn thread_config(thread_id: &str) -> RunnableConfig {
    let mut config = RunnableConfig::default();
    config.configurable.insert("thread_id".into(), Value::String(thread_id.to_owned()));
    config
}

/// The state at the thread's latest checkpoint, read through its graph; `None` when the thread has no
/// graph yet.
pub(crate) async fn latest_state(app: &App, thread: &Thread) -> ApiResult<Option<JsonSnapshot>> {
    let Some(graph) = thread.graph_id().and_then(|id| app.graphs.get(id)) else { return Ok(None) };
    let snapshot = graph.stateful.get_state_json(&thread_config(&thread.thread_id), false).await?;
    Ok(Some(snapshot))
}

/// The status of a thread: busy while it has pending or running runs, else as its last run left it.
pub(crate) fn status(active: bool, error: bool, paused: bool) -> ThreadStatus {
    if active {
        ThreadStatus::Busy
    } else if error {
        ThreadStatus::Error
    } else if paused {
        ThreadStatus::Interrupted
    } else {
        ThreadStatus::Idle
    }
}

/// Copies a state into the thread: its values and its unanswered interrupts by task (`{task id: [{id,
/// value}]}`). A thread without a checkpoint keeps what it has.
pub(crate) fn apply_state(thread: &mut Thread, snapshot: JsonSnapshot) {
    if snapshot.config.is_none() {
        return;
    }
    thread.values = Some(state_values(snapshot.values));
    let mut interrupts = Map::new();
    for task in snapshot.tasks.iter().filter(|t| !t.interrupts.is_empty()) {
        interrupts.insert(task.id.clone(), task.interrupts.iter().map(interrupt_record).collect());
    }
    thread.interrupts = interrupts;
    let stamp = now();
    thread.state_updated_at = stamp.clone();
    thread.updated_at = stamp;
}

/// Re-reads the thread's state and sets its values and status from it and its runs (after a cancel or a
/// state update). A thread that is gone is left alone. The state is read under the records' lock: a run
/// that ends meanwhile (a rolled-back one puts the thread's state back first) then records its end before
/// or after this, never between a stale read and its write.
pub(crate) async fn settle_thread(app: &Arc<App>, thread_id: &str) -> ApiResult<()> {
    let mut records = app.records.lock(Key::Thread(thread_id)).await?;
    let Some(mut thread) = records.thread(thread_id).await?.cloned() else { return Ok(()) };
    let snapshot = latest_state(app, &thread).await?;
    let paused = snapshot.as_ref().is_some_and(|s| !s.next.is_empty());
    if let Some(snapshot) = snapshot {
        apply_state(&mut thread, snapshot);
    }
    let active = records.active_runs(thread_id).next().is_some();
    // As in LangGraph, only a run's failure marks a thread `error`; anything else settles it afresh.
    thread.error = None;
    thread.status = status(active, false, paused);
    thread.updated_at = now();
    records.commit(vec![Change::Thread(thread)]).await.map_err(ApiError::from)
}
