//! `async` durability overlaps one step's saves with the next step, no more: a run never starts superstep
//! N+2 while a save of superstep N is unconfirmed, and a failed save stops the run at the next step
//! boundary with the saver's error. The same holds for a run that leaves its last step's saves to its
//! caller (`EndState::with_last_saves`), which hands back exactly those.
#![allow(clippy::unwrap_used, missing_docs)]

use std::error::Error as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_graph::checkpoint::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointError, CheckpointMetadata, Checkpointer,
    InMemorySaver, Intercept, Intercepted, SaveOp,
};
use weft_graph::{
    CompileConfig, CompiledGraph, Durability, END, EndState, GraphError, RunOptions, START, State, StateGraph,
};
use weft_runnable_core::RunnableConfig;

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Count {
    n: i64,
}

/// Makes an in-memory saver's batches take `delay` (as I/O does); it records the newest step whose
/// checkpoint it has stored, and refuses every batch from the one holding step `fail_from`'s checkpoint.
/// Every save reaches it as a batch (none is saved at once).
#[derive(Debug)]
struct Backend {
    delay: Duration,
    stored_step: AtomicI64,
    fail_from: Option<i64>,
    failed: AtomicUsize,
}

impl Backend {
    fn new(delay: Duration, fail_from: Option<i64>) -> Arc<Intercepted<Self>> {
        let backend =
            Self { delay, stored_step: AtomicI64::new(i64::MIN), fail_from, failed: AtomicUsize::new(0) };
        Arc::new(Intercepted::new(Arc::new(InMemorySaver::new()), backend))
    }

    /// Stores a batch, after `delay`, unless it fails.
    async fn save(&self, inner: &dyn Checkpointer, ops: Vec<SaveOp>) -> Result<(), CheckpointError> {
        tokio::time::sleep(self.delay).await;
        let steps = ops.iter().filter_map(|op| match op {
            SaveOp::Put { metadata, .. } => Some(metadata.step),
            SaveOp::Writes { .. } => None,
        });
        let newest = steps.max();
        if let (Some(fail), Some(step)) = (self.fail_from, newest) {
            if step >= fail || self.failed.load(Ordering::SeqCst) > 0 {
                self.failed.fetch_add(1, Ordering::SeqCst);
                return Err(CheckpointError::backend("connection refused"));
            }
        }
        weft_graph::checkpoint::put_one_by_one(inner, ops).await?;
        if let Some(step) = newest {
            self.stored_step.fetch_max(step, Ordering::SeqCst);
        }
        Ok(())
    }
}

#[async_trait]
impl Intercept for Backend {
    async fn put(
        &self,
        inner: &dyn Checkpointer,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig, CheckpointError> {
        let op = SaveOp::Put {
            config: Arc::new(config.clone()),
            checkpoint: checkpoint.clone(),
            metadata,
            new_versions,
            appends: Default::default(),
            expected_head: Default::default(),
        };
        self.save(inner, vec![op]).await?;
        Ok(CheckpointConfig { checkpoint_id: Some(checkpoint.id), ..config.clone() })
    }
    async fn put_writes(
        &self,
        inner: &dyn Checkpointer,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<(), CheckpointError> {
        tokio::time::sleep(self.delay).await;
        inner.put_writes(config, writes, task_id, task_path).await
    }
    fn save_now(&self, _inner: &dyn Checkpointer, op: SaveOp) -> Result<Option<SaveOp>, CheckpointError> {
        Ok(Some(op))
    }
    async fn put_batch(&self, inner: &dyn Checkpointer, ops: Vec<SaveOp>) -> Result<(), CheckpointError> {
        self.save(inner, ops).await
    }
}

/// A loop of "inc" (step k runs the k-th "inc") that records, for each execution, its step and the
/// newest step whose checkpoint the backend had stored when it started.
fn counting_loop(
    backend: Arc<Intercepted<Backend>>,
    limit: i64,
    starts: Arc<std::sync::Mutex<Vec<(i64, i64)>>>,
) -> CompiledGraph<Count> {
    let mut g = StateGraph::<Count>::new();
    let seen = Arc::clone(&backend);
    g.add_node("inc", move |s: Count| {
        let (seen, starts) = (Arc::clone(&seen), Arc::clone(&starts));
        async move {
            let step = s.n + 1;
            starts.lock().unwrap().push((step, seen.intercept().stored_step.load(Ordering::SeqCst)));
            // Work that takes a little time, so that saves and steps overlap.
            tokio::time::sleep(Duration::from_millis(1)).await;
            CountUpdate::new().n(step)
        }
    });
    g.add_edge(START, "inc");
    g.add_conditional_edges("inc", move |s: &Count| if s.n < limit { "inc" } else { END }, ["inc", END]);
    g.compile_with(CompileConfig::new().checkpointer(backend)).unwrap()
}

fn thread() -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", "t").with_recursion_limit(1000)
}

fn asynchronous() -> RunOptions {
    RunOptions { durability: Durability::Async, ..Default::default() }
}

/// `async` durability, leaving the last step's saves to the caller (in the slot returned) or not.
fn options(hand_back: bool) -> (RunOptions, Option<EndState>) {
    let slot = hand_back.then(EndState::with_last_saves);
    (RunOptions { end_state: slot.clone(), ..asynchronous() }, slot)
}

async fn never_two_steps_ahead(hand_back: bool) {
    let backend = Backend::new(Duration::from_millis(4), None);
    let starts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let app = counting_loop(Arc::clone(&backend), 40, Arc::clone(&starts));
    let (options, slot) = options(hand_back);
    let out = app.invoke_with(CountUpdate::new().n(0), &thread(), options).await.unwrap();
    assert_eq!(out.value.n, 40);
    let starts = starts.lock().unwrap().clone();
    assert_eq!(starts.len(), 40);
    for &(step, stored) in &starts {
        assert!(
            stored >= step - 2,
            "step {step} started with only step {stored}'s checkpoint stored: {starts:?}"
        );
    }
    // Saves still overlap execution: some steps start before the previous step's checkpoint is stored.
    assert!(
        starts.iter().any(|&(step, stored)| stored < step - 1),
        "every step waited for the previous checkpoint (sync behaviour): {starts:?}"
    );
    let stored = backend.intercept().stored_step.load(Ordering::SeqCst);
    let Some(slot) = slot else {
        assert_eq!(stored, 40, "every checkpoint is stored when the run ends");
        return;
    };
    // The last step's checkpoint (and the writes of its task) are handed back, not stored; every one
    // before it is.
    assert_eq!(stored, 39, "the checkpoint before the last is stored");
    let saves = slot.take_saves();
    let steps: Vec<i64> = saves
        .iter()
        .filter_map(|op| match op {
            SaveOp::Put { metadata, .. } => Some(metadata.step),
            SaveOp::Writes { .. } => None,
        })
        .collect();
    assert_eq!(steps, [40], "{saves:?}");
    assert!(matches!(saves.first(), Some(SaveOp::Writes { .. })), "the task's writes come first: {saves:?}");
    let handed = slot.take().unwrap();
    backend.put_batch(saves).await.unwrap();
    assert_eq!(backend.intercept().stored_step.load(Ordering::SeqCst), 40);
    assert_eq!(handed.values["n"], Value::from(40));
    let head = backend.get_tuple(&CheckpointConfig::thread("t")).await.unwrap().unwrap();
    assert_eq!(handed.config.and_then(|c| c.checkpoint_id), Some(head.checkpoint.id));
}

#[tokio::test]
async fn a_step_never_starts_two_steps_ahead_of_an_unconfirmed_checkpoint_on_one_thread() {
    never_two_steps_ahead(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_never_starts_two_steps_ahead_of_an_unconfirmed_checkpoint_on_several_threads() {
    never_two_steps_ahead(false).await;
}

#[tokio::test]
async fn a_run_leaving_its_last_saves_never_starts_two_steps_ahead_on_one_thread() {
    never_two_steps_ahead(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_leaving_its_last_saves_never_starts_two_steps_ahead_on_several_threads() {
    never_two_steps_ahead(true).await;
}

async fn failed_save_stops_the_run(hand_back: bool) {
    let fail_from = 10;
    let backend = Backend::new(Duration::from_millis(2), Some(fail_from));
    let starts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let app = counting_loop(Arc::clone(&backend), 200, Arc::clone(&starts));
    let (options, slot) = options(hand_back);
    let err = app.invoke_with(CountUpdate::new().n(0), &thread(), options).await.unwrap_err();
    // The saver's own error, kept whole as the source.
    assert!(
        matches!(&err, GraphError::Storage(CheckpointError::Backend { message, .. }) if message == "connection refused"),
        "{err}"
    );
    assert_eq!(err.source().map(ToString::to_string).as_deref(), Some("backend error: connection refused"));
    // Step `fail_from`'s checkpoint failed: the step after it may have overlapped the save, no later one ran.
    let ran = starts.lock().unwrap().iter().map(|&(step, _)| step).max().unwrap();
    assert!(ran <= fail_from + 1, "ran up to step {ran} after the save of step {fail_from} failed");
    // What was stored before the failure stays (a batch fails whole: it may have held the step before).
    let latest = backend.inner().get_tuple(&CheckpointConfig::thread("t")).await.unwrap().unwrap();
    let step = latest.metadata.step;
    assert!((fail_from - 2..fail_from).contains(&step), "latest stored checkpoint is step {step}");
    assert_eq!(latest.checkpoint.channel_values.get("n"), Some(&Value::from(step)));
    if let Some(slot) = slot {
        assert!(slot.take().is_none() && slot.take_saves().is_empty(), "a failed run hands nothing back");
    }
}

#[tokio::test]
async fn a_failed_save_stops_the_run_at_the_next_step_boundary_on_one_thread() {
    failed_save_stops_the_run(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_save_stops_the_run_at_the_next_step_boundary_on_several_threads() {
    failed_save_stops_the_run(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_save_stops_a_run_leaving_its_last_saves_at_the_next_step_boundary() {
    failed_save_stops_the_run(true).await;
}

#[tokio::test]
async fn sync_durability_waits_for_every_save() {
    let backend = Backend::new(Duration::from_millis(1), None);
    let starts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let app = counting_loop(Arc::clone(&backend), 10, Arc::clone(&starts));
    let options = RunOptions { durability: Durability::Sync, ..Default::default() };
    app.invoke_with(CountUpdate::new().n(0), &thread(), options).await.unwrap();
    for &(step, stored) in starts.lock().unwrap().iter() {
        assert_eq!(
            stored,
            step - 1,
            "in sync mode step {step} starts once step {}'s checkpoint is stored",
            step - 1
        );
    }
}
