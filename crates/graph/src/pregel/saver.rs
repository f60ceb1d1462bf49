//! Checkpoint saving for one run: addresses, durability, and the background queue of `async` mode.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::checkpoint::{
    ChannelAppends, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointError, CheckpointMetadata,
    Checkpointer,
};
use crate::compiled::Durability;
use crate::error::{GraphError, GraphResult};

/// Writes of one task held back: task id, task path, writes.
type DeferredWrites = (String, String, Vec<(String, Value)>);
type SaveOp = BoxFuture<'static, Result<(), CheckpointError>>;
type SaveQueue =
    (tokio::sync::mpsc::UnboundedSender<SaveOp>, tokio::task::JoinHandle<Result<(), CheckpointError>>);

/// Saves of one run, in order. In `async` mode saves go to a background task; `finish` waits for them. On
/// a current-thread runtime (where that task cannot run in parallel anyway) a save is first polled in
/// place, and only one that is not done then goes to the background task (and so do the saves after it,
/// until the queue is empty).
pub(crate) struct RunSaver {
    pub(crate) checkpointer: Arc<dyn Checkpointer>,
    pub(crate) thread: CheckpointConfig,
    /// The checkpoint new tasks are planned from (parent of the next put).
    pub(crate) current: Option<String>,
    pub(crate) durability: Durability,
    /// Whether the checkpointer takes append deltas (read once per run).
    pub(crate) stores_appends: bool,
    queue: Option<SaveQueue>,
    /// Saves sent to the background task and not finished yet.
    queued: Arc<AtomicUsize>,
    /// Whether `async` saves are first polled in place (current-thread runtime).
    poll_in_place: bool,
    /// Writes held back in `exit` mode until the checkpoint they belong to is saved.
    deferred: Vec<DeferredWrites>,
}

impl RunSaver {
    pub(crate) fn new(
        checkpointer: Arc<dyn Checkpointer>,
        thread: CheckpointConfig,
        durability: Durability,
    ) -> Self {
        let flavor = tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor());
        let durability = match durability {
            Durability::Async if flavor.is_err() => Durability::Sync,
            d => d,
        };
        let poll_in_place = matches!(flavor, Ok(tokio::runtime::RuntimeFlavor::CurrentThread));
        let stores_appends = checkpointer.stores_appends();
        Self {
            checkpointer,
            thread,
            current: None,
            durability,
            stores_appends,
            queue: None,
            queued: Arc::new(AtomicUsize::new(0)),
            poll_in_place,
            deferred: Vec::new(),
        }
    }

    /// The address of the checkpoint tasks are currently planned from.
    pub(crate) fn current_config(&self) -> CheckpointConfig {
        CheckpointConfig { checkpoint_id: self.current.clone(), ..self.thread.clone() }
    }

    async fn submit(&mut self, mut op: SaveOp) -> GraphResult<()> {
        if self.durability != Durability::Async {
            return op.await.map_err(checkpoint_error);
        }
        // On one thread, with nothing queued, a save that completes at once (an in-memory saver) is done
        // here, in order; a save that waits (I/O) goes to the background task, and so do the saves after
        // it. On several threads the background task runs beside the loop, so every save goes there.
        if self.poll_in_place && self.queued.load(Ordering::Acquire) == 0 {
            if let Poll::Ready(result) = poll_once(&mut op).await {
                return result.map_err(checkpoint_error);
            }
        }
        if self.queue.is_none() {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<SaveOp>();
            let queued = Arc::clone(&self.queued);
            let handle = tokio::spawn(async move {
                while let Some(op) = rx.recv().await {
                    op.await?;
                    queued.fetch_sub(1, Ordering::Release);
                }
                Ok(())
            });
            self.queue = Some((tx, handle));
        }
        if let Some((tx, _)) = &self.queue {
            self.queued.fetch_add(1, Ordering::AcqRel);
            if tx.send(op).is_err() {
                // The writer stopped after a failed save; its error comes out of `finish`.
                return self.finish().await;
            }
        }
        Ok(())
    }

    /// Saves a checkpoint made from the current one and makes it current (its address is then
    /// [`current_config`](RunSaver::current_config)).
    pub(crate) async fn put(
        &mut self,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        appends: ChannelAppends,
    ) -> GraphResult<()> {
        let parent = self.current_config();
        let saver = Arc::clone(&self.checkpointer);
        self.current = Some(checkpoint.id.clone());
        self.submit(Box::pin(async move {
            if appends.is_empty() {
                saver.put(&parent, checkpoint, metadata, new_versions).await.map(drop)
            } else {
                saver.put_with_appends(&parent, checkpoint, metadata, new_versions, appends).await.map(drop)
            }
        }))
        .await
    }

    /// Saves a finished task's writes against the current checkpoint (held back in `exit` mode).
    pub(crate) async fn put_writes(
        &mut self,
        task_id: &str,
        task_path: &str,
        writes: Vec<(String, Value)>,
    ) -> GraphResult<()> {
        if writes.is_empty() {
            return Ok(());
        }
        self.put_writes_now(task_id, task_path, writes).await
    }

    /// Forgets writes held back in `exit` mode once their step has been applied.
    pub(crate) fn clear_deferred(&mut self) {
        self.deferred.clear();
    }

    /// Saves the writes of an interrupted or failed task; in `exit` mode they wait for the checkpoint
    /// saved when the run stops ([`flush_deferred`](RunSaver::flush_deferred)).
    pub(crate) async fn put_writes_now(
        &mut self,
        task_id: &str,
        task_path: &str,
        writes: Vec<(String, Value)>,
    ) -> GraphResult<()> {
        if self.durability == Durability::Exit {
            self.deferred.push((task_id.to_owned(), task_path.to_owned(), writes));
            return Ok(());
        }
        self.submit_writes(task_id, task_path, writes).await
    }

    /// Saves the writes held back in `exit` mode against the current checkpoint.
    pub(crate) async fn flush_deferred(&mut self) -> GraphResult<()> {
        for (task_id, path, writes) in std::mem::take(&mut self.deferred) {
            self.submit_writes(&task_id, &path, writes).await?;
        }
        Ok(())
    }

    async fn submit_writes(
        &mut self,
        task_id: &str,
        task_path: &str,
        writes: Vec<(String, Value)>,
    ) -> GraphResult<()> {
        let config = self.current_config();
        let saver = Arc::clone(&self.checkpointer);
        let (task_id, task_path) = (task_id.to_owned(), task_path.to_owned());
        self.submit(Box::pin(async move { saver.put_writes(&config, writes, &task_id, &task_path).await }))
            .await
    }

    /// Waits for every queued save.
    pub(crate) async fn finish(&mut self) -> GraphResult<()> {
        if let Some((tx, handle)) = self.queue.take() {
            drop(tx);
            match handle.await {
                Ok(result) => result.map_err(checkpoint_error)?,
                Err(join) => {
                    return Err(GraphError::Checkpoint(format!("checkpoint writer stopped: {join}")));
                }
            }
        }
        Ok(())
    }
}

/// Polls `op` once with the current task's context: its result if it is done, `Pending` otherwise (it
/// may then be polled again elsewhere).
async fn poll_once<F: Future + Unpin>(op: &mut F) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut *op).poll(cx))).await
}

fn checkpoint_error(e: CheckpointError) -> GraphError {
    GraphError::Checkpoint(e.to_string())
}
