//! `async` durability hands queued saves to the saver as batches (`Checkpointer::put_batch`): in order,
//! complete when the run returns, and a failed batch fails the run.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_graph::checkpoint::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointError, CheckpointMetadata, Checkpointer,
    InMemorySaver, Intercept, Intercepted, ListOptions, SaveOp,
};
use weft_graph::{
    CompileConfig, CompiledGraph, Durability, END, GraphError, RunOptions, START, State, StateGraph,
};
use weft_runnable_core::RunnableConfig;

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Count {
    n: i64,
    #[state(append)]
    seen: Vec<i64>,
}

/// Makes an in-memory saver's every save wait like I/O does (unless `instant`), recording each batch as
/// its ops, `W` for writes and `P` for a checkpoint; it fails every batch once `fail_after` saves have
/// been stored. Every save reaches it as a batch (none is saved at once).
#[derive(Debug, Default)]
struct Slow {
    batches: Mutex<Vec<String>>,
    stored: AtomicUsize,
    fail_after: Option<usize>,
    instant: bool,
}

/// An in-memory saver slowed down by `slow`.
fn slowed(slow: Slow) -> Arc<Intercepted<Slow>> {
    Arc::new(Intercepted::new(Arc::new(InMemorySaver::new()), slow))
}

#[async_trait]
impl Intercept for Slow {
    async fn put(
        &self,
        inner: &dyn Checkpointer,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig, CheckpointError> {
        tokio::time::sleep(std::time::Duration::from_micros(200)).await;
        self.stored.fetch_add(1, Ordering::SeqCst);
        inner.put(config, checkpoint, metadata, new_versions).await
    }
    async fn put_writes(
        &self,
        inner: &dyn Checkpointer,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<(), CheckpointError> {
        tokio::time::sleep(std::time::Duration::from_micros(200)).await;
        self.stored.fetch_add(1, Ordering::SeqCst);
        inner.put_writes(config, writes, task_id, task_path).await
    }
    fn save_now(&self, _inner: &dyn Checkpointer, op: SaveOp) -> Result<Option<SaveOp>, CheckpointError> {
        Ok(Some(op))
    }
    async fn put_batch(&self, inner: &dyn Checkpointer, ops: Vec<SaveOp>) -> Result<(), CheckpointError> {
        let kinds = ops.iter().map(|op| if matches!(op, SaveOp::Put { .. }) { 'P' } else { 'W' }).collect();
        self.batches.lock().unwrap().push(kinds);
        if self.fail_after.is_some_and(|n| self.stored.load(Ordering::SeqCst) >= n) {
            return Err(CheckpointError::backend("disk full"));
        }
        if !self.instant {
            tokio::time::sleep(std::time::Duration::from_micros(500)).await;
        }
        self.stored.fetch_add(ops.len(), Ordering::SeqCst);
        weft_graph::checkpoint::put_one_by_one(inner, ops).await
    }
}

fn counting_loop(saver: Arc<dyn Checkpointer>, limit: i64) -> CompiledGraph<Count> {
    let mut g = StateGraph::<Count>::new();
    g.add_node("inc", |s: &Count| CountUpdate::new().n(s.n + 1).seen(vec![s.n + 1]));
    g.add_edge(START, "inc");
    g.add_conditional_edges("inc", move |s: &Count| if s.n < limit { "inc" } else { END }, ["inc", END]);
    g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

fn options(durability: Durability) -> RunOptions {
    RunOptions { durability, ..Default::default() }
}

/// What a thread's history says: (step, n, seen) of every checkpoint, newest first, and the writes.
async fn history(saver: &dyn Checkpointer, id: &str) -> Vec<(i64, Value, Value, usize)> {
    let tuples = saver.list(Some(&CheckpointConfig::thread(id)), ListOptions::default()).await.unwrap();
    tuples
        .iter()
        .map(|t| {
            let v = &t.checkpoint.channel_values;
            let get = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
            (t.metadata.step, get("n"), get("seen"), t.pending_writes.len())
        })
        .collect()
}

async fn run_on_this_runtime() {
    let limit = 200;
    let batched = slowed(Slow::default());
    let app = counting_loop(batched.clone(), limit);
    let out =
        app.invoke_with(CountUpdate::new().n(0), &thread("t"), options(Durability::Async)).await.unwrap();
    assert_eq!(out.value.n, limit);
    // Everything is stored when the run returns, in batches, some of many saves.
    let batches = batched.intercept().batches.lock().unwrap().clone();
    assert!(batches.iter().any(|b| b.len() > 1), "queued saves went to the saver one by one: {batches:?}");
    let reference = Arc::new(InMemorySaver::new());
    let app = counting_loop(reference.clone(), limit);
    app.invoke_with(CountUpdate::new().n(0), &thread("t"), options(Durability::Sync)).await.unwrap();
    let (got, want) = (history(batched.as_ref(), "t").await, history(reference.as_ref(), "t").await);
    assert_eq!(got.len(), usize::try_from(limit).unwrap() + 2);
    assert_eq!(got, want, "batched saves read back as saves made one by one");
}

#[tokio::test]
async fn queued_saves_are_batched_in_order_on_one_thread() {
    run_on_this_runtime().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_saves_are_batched_in_order_on_several_threads() {
    run_on_this_runtime().await;
}

#[tokio::test]
async fn a_failed_batch_fails_the_run() {
    let failing = slowed(Slow { fail_after: Some(20), ..Slow::default() });
    let app = counting_loop(failing.clone(), 300);
    let err =
        app.invoke_with(CountUpdate::new().n(0), &thread("t"), options(Durability::Async)).await.unwrap_err();
    assert!(matches!(&err, GraphError::Storage(e) if e.to_string().contains("disk full")), "{err}");
    assert_eq!(err.checkpoint_error_kind(), Some(weft_graph::checkpoint::CheckpointErrorKind::Backend));
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn on_one_thread_a_tasks_writes_are_saved_as_soon_as_it_finishes() {
    // A saver that is done at its first poll, as the in-memory saver is.
    let recording = slowed(Slow { instant: true, ..Slow::default() });
    let app = counting_loop(recording.clone(), 3);
    app.invoke_with(CountUpdate::new().n(0), &thread("t"), options(Durability::Async)).await.unwrap();
    let batches = recording.intercept().batches.lock().unwrap().clone();
    // The input checkpoint, then per step (START's, then three of "inc") the task's writes, saved when
    // the task finishes (a process that dies later in the step keeps them), then the step's checkpoint.
    assert_eq!(batches, ["P", "W", "P", "W", "P", "W", "P", "W", "P"]);
    let reference = Arc::new(InMemorySaver::new());
    let app = counting_loop(reference.clone(), 3);
    app.invoke_with(CountUpdate::new().n(0), &thread("t"), options(Durability::Sync)).await.unwrap();
    let (got, want) = (history(recording.as_ref(), "t").await, history(reference.as_ref(), "t").await);
    assert_eq!(got, want);
}

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Pair {
    #[state(append)]
    done: Vec<String>,
}

#[tokio::test]
async fn writes_of_finished_tasks_are_saved_when_a_run_is_cancelled() {
    let saver = Arc::new(InMemorySaver::new());
    let mut g = StateGraph::<Pair>::new();
    g.add_node("fast", |_: Pair| async move { PairUpdate::new().done(vec!["fast".to_owned()]) });
    g.add_node("slow", |_: Pair| async move {
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        PairUpdate::new().done(vec!["slow".to_owned()])
    });
    g.add_edge(START, "fast");
    g.add_edge(START, "slow");
    let app = g.compile_with(CompileConfig::new().checkpointer(saver.clone())).unwrap();
    let config = thread("t");
    let run = app.invoke_with(PairUpdate::new(), &config, options(Durability::Async));
    // The caller gives up while "slow" still runs: the run's future is dropped.
    let cancelled = tokio::time::timeout(std::time::Duration::from_millis(100), run).await;
    assert!(cancelled.is_err(), "the run should still be waiting for 'slow'");
    // What "fast" wrote is saved against the step's checkpoint, so a resume runs only "slow".
    let mut writes = Vec::new();
    for _ in 0..100 {
        tokio::task::yield_now().await;
        let latest = saver.get_tuple(&CheckpointConfig::thread("t")).await.unwrap().unwrap();
        writes = latest.pending_writes.iter().map(|w| (w.channel.clone(), w.value.clone())).collect();
        if !writes.is_empty() {
            break;
        }
    }
    assert_eq!(writes, vec![("done".to_owned(), serde_json::json!(["fast"]))]);
}

#[tokio::test]
async fn on_one_thread_a_saver_doing_io_gets_one_batch_per_two_steps() {
    // The writer runs while the loop waits at a step boundary for the step before last: it then finds
    // two steps' saves queued and stores them together (one transaction for two supersteps).
    let limit = 100;
    let batched = slowed(Slow::default());
    let app = counting_loop(batched.clone(), limit);
    app.invoke_with(CountUpdate::new().n(0), &thread("t"), options(Durability::Async)).await.unwrap();
    let batches = batched.intercept().batches.lock().unwrap().clone();
    let saves: usize = batches.iter().map(String::len).sum();
    // The input checkpoint, then a write and a checkpoint per step (START's and `limit` of "inc").
    assert_eq!(saves, 1 + 2 * (usize::try_from(limit).unwrap() + 1));
    assert!(
        batches.len() <= usize::try_from(limit).unwrap() / 2 + 3,
        "{} batches: {batches:?}",
        batches.len()
    );
    assert!(batches.iter().skip(2).all(|b| b.len() <= 4), "a batch held more than two steps: {batches:?}");
}
