//! Checkpoint saving for one run: addresses, durability, and the background queue of `async` mode.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio::sync::Notify;

use crate::checkpoint::{
    ChannelAppends, ChannelName, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointError,
    CheckpointMetadata, Checkpointer, ExpectedHead, SaveOp,
};
use crate::error::{GraphError, GraphResult};
use crate::types::Durability;

/// Writes of one task held back: task id, task path, writes.
type DeferredWrites = (Arc<str>, Arc<str>, Vec<(ChannelName, Value)>);
type SaveFuture = BoxFuture<'static, Result<(), CheckpointError>>;

/// What the background writer of `async` mode receives, in order.
// Moved once through the queue; boxing the op would cost an allocation per save.
#[allow(clippy::large_enum_variant)]
enum Queued {
    /// A save not started yet: consecutive ones go to the saver as one batch.
    Op(SaveOp),
    /// A save already polled once in place, to finish before the next.
    Started(SaveFuture),
    /// Saves held back and let go together (see [`RunSaver::release`]): one item, so that the writer
    /// never takes some of them without the others.
    Ops(Vec<SaveOp>),
}

/// The most saves handed to the saver in one batch.
const MAX_BATCH: usize = 1024;
/// Saves queued beyond this make the loop wait for the writer, even within a step (memory stays bounded
/// when one step's tasks finish faster than the backend stores their writes).
const MAX_QUEUED: u64 = 8192;

/// The background writer: its queue, the saves not finished yet and a signal of its progress.
struct Writer {
    tx: tokio::sync::mpsc::UnboundedSender<Queued>,
    handle: tokio::task::JoinHandle<Result<(), CheckpointError>>,
    progress: Arc<Notify>,
}

/// Saves of one run, in order. In `async` mode saves go to a background writer, which hands everything
/// queued meanwhile to the saver as one [`put_batch`](Checkpointer::put_batch); `finish` waits for them.
/// On a current-thread runtime (where the writer cannot run in parallel anyway) a save is first polled
/// in place; once one is not done then (the saver does I/O), it and every later save go to the writer,
/// which runs when the loop waits (at the latest at the next step boundary), so that each of its
/// batches holds a step's saves or two, in one transaction.
///
/// The writer trails the loop by one step at most: once step N's checkpoint is queued, the loop waits
/// ([`step_boundary`](RunSaver::step_boundary)) until every save queued up to step N-1's checkpoint
/// (the writes of step N-1's tasks and that checkpoint included) is confirmed, so step N+1 never starts
/// while a save of step N-1 is unconfirmed, and a failed save stops the run at the next step boundary
/// (or at the next save, if that comes first) with the saver's error. What a crash or an outage can cost
/// is then the tasks of the step that overlapped the failed save and of the step running, no more.
pub(crate) struct RunSaver {
    pub(crate) checkpointer: Arc<dyn Checkpointer>,
    pub(crate) thread: CheckpointConfig,
    /// The address of the checkpoint new tasks are planned from (parent of the next put), shared by the
    /// saves that name it; without a checkpoint id before the first.
    current: Arc<CheckpointConfig>,
    /// The address `current` replaced, kept to be reused for the next one once the saves naming it are
    /// done (an in-memory saver finishes them at once: no address is allocated per checkpoint then).
    spare: Option<Arc<CheckpointConfig>>,
    pub(crate) durability: Durability,
    /// Whether the checkpointer takes append deltas (read once per run).
    pub(crate) stores_appends: bool,
    writer: Option<Writer>,
    /// Saves sent to the writer.
    sent: u64,
    /// Saves the writer has stored (in order: the first `confirmed` of the `sent`).
    confirmed: Arc<AtomicU64>,
    /// `sent` when the latest checkpoint was queued: the saves the next step boundary waits for.
    fence: u64,
    /// Whether `async` saves are first polled in place (current-thread runtime, until a save is not
    /// done at once).
    poll_in_place: bool,
    /// Writes held back in `exit` mode until the checkpoint they belong to is saved.
    deferred: Vec<DeferredWrites>,
    /// The head of the thread and namespace the next checkpoint must extend: what the run read when it
    /// started, then its own last checkpoint.
    head: ExpectedHead,
    /// Whether the run leaves the saves of its last step to its caller (see
    /// [`EndState::with_last_saves`](crate::EndState::with_last_saves)): `async` durability only.
    hands_back: bool,
    /// The saves of the step's end held back until the loop plans the next step ([`RunSaver::hold`]);
    /// `None` while saves go out as they come.
    held: Option<Vec<SaveOp>>,
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
            current: Arc::new(thread.clone()),
            spare: None,
            thread,
            durability,
            stores_appends,
            writer: None,
            sent: 0,
            confirmed: Arc::new(AtomicU64::new(0)),
            fence: 0,
            poll_in_place,
            deferred: Vec::new(),
            head: ExpectedHead::Any,
            hands_back: false,
            held: None,
        }
    }

    /// The run leaves the saves of its last step to its caller (in `async` durability; nothing changes
    /// in the others): from now on [`hold`](RunSaver::hold) holds them back.
    pub(crate) fn hand_back_last_saves(&mut self) {
        self.hands_back = self.durability == Durability::Async;
    }

    /// At a step's end, in a run that hands back its last saves: the saves from here on (the writes of
    /// a lone task, the checkpoint) wait until the loop plans the next step ([`release`]), or are handed
    /// back when the run ends ([`take_held`]). The step boundary is taken at the release.
    ///
    /// [`release`]: RunSaver::release
    /// [`take_held`]: RunSaver::take_held
    pub(crate) fn hold(&mut self) {
        if self.hands_back && self.held.is_none() {
            self.held = Some(Vec::new());
        }
    }

    /// The loop goes on: the saves held back go out, in order, and the step boundary is taken (the
    /// saves of the step before them are confirmed), as it would have been when they were made.
    pub(crate) async fn release(&mut self) -> GraphResult<()> {
        let Some(held) = self.held.take().filter(|held| !held.is_empty()) else { return Ok(()) };
        if self.poll_in_place {
            for op in held {
                self.submit(op).await?;
            }
        } else {
            self.send(Queued::Ops(held)).await?;
        }
        self.step_boundary().await
    }

    /// The saves held back, taken, for the run's caller (none when nothing is held).
    pub(crate) fn take_held(&mut self) -> Vec<SaveOp> {
        self.held.take().unwrap_or_default()
    }

    /// Sets the head the run's first checkpoint must extend (`None`: the thread and namespace had no
    /// checkpoint when the run read them).
    pub(crate) fn set_head(&mut self, head: Option<String>) {
        self.head = ExpectedHead::from_head(head);
    }

    /// The address of the checkpoint tasks are currently planned from.
    pub(crate) fn current_config(&self) -> &Arc<CheckpointConfig> {
        &self.current
    }

    /// Makes checkpoint `id` (loaded, not saved) the current one.
    pub(crate) fn set_current(&mut self, id: String) {
        self.current = Arc::new(CheckpointConfig { checkpoint_id: Some(id), ..self.thread.clone() });
    }

    /// One save as a future of its own (a batch of one, so that its expected head is checked).
    fn start(&self, op: SaveOp) -> SaveFuture {
        let saver = Arc::clone(&self.checkpointer);
        Box::pin(async move { saver.put_batch(vec![op]).await })
    }

    /// Saves `op` at once when the saver can and nothing is queued before it (in order, then); hands it
    /// back otherwise, for [`submit`](RunSaver::submit). Not async: the op is not moved into a future.
    fn save_now(&self, op: SaveOp) -> GraphResult<Option<SaveOp>> {
        if self.unconfirmed() != 0 || self.held.is_some() {
            return Ok(Some(op));
        }
        self.checkpointer.save_now(op).map_err(checkpoint_error)
    }

    /// Saves `op` as the durability mode says (an op [`save_now`](RunSaver::save_now) handed back).
    pub(crate) async fn submit(&mut self, op: SaveOp) -> GraphResult<()> {
        if let Some(held) = self.held.as_mut() {
            held.push(op);
            return Ok(());
        }
        if self.durability != Durability::Async {
            return self.start(op).await.map_err(checkpoint_error);
        }
        // On one thread, with nothing queued, a save that completes at once (an in-memory saver) is done
        // here, in order; a save that waits (I/O) goes to the writer, and so do the saves after it. On
        // several threads the writer runs beside the loop, so every save goes there.
        let item = if self.poll_in_place && self.unconfirmed() == 0 {
            // As a batch of one: the saver takes the op by value (nothing to copy, no address to return).
            let saver = Arc::clone(&self.checkpointer);
            let mut started: SaveFuture = Box::pin(async move { saver.put_batch(vec![op]).await });
            if let Poll::Ready(result) = poll_once(&mut started).await {
                return result.map_err(checkpoint_error);
            }
            // The saver waits for I/O: from now on its saves go to the writer without a turn of their
            // own, so that it takes a step's writes and checkpoint (or two steps') as one batch.
            self.poll_in_place = false;
            Queued::Started(started)
        } else {
            Queued::Op(op)
        };
        self.send(item).await
    }

    /// Hands `item` to the background writer (started at the first), keeping its queue bounded.
    async fn send(&mut self, item: Queued) -> GraphResult<()> {
        let writer = self.writer.get_or_insert_with(|| spawn_writer(&self.checkpointer, &self.confirmed));
        if writer.tx.send(item).is_err() {
            // The writer stopped after a failed save; its error comes out of `finish`.
            return self.finish().await;
        }
        self.sent += 1;
        // Keep the queue bounded: wait for the writer when it falls far behind.
        if self.unconfirmed() >= MAX_QUEUED {
            self.wait_confirmed(self.sent - MAX_QUEUED + 1).await?;
        }
        Ok(())
    }

    /// Saves a checkpoint made from the current one and makes it current (its address is then
    /// [`current_config`](RunSaver::current_config)). Returns the save when it is still to
    /// [`submit`](RunSaver::submit) (the saver must wait for I/O).
    pub(crate) fn put(
        &mut self,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        appends: ChannelAppends,
    ) -> GraphResult<Option<SaveOp>> {
        let fresh = || {
            Arc::new(CheckpointConfig { checkpoint_id: Some(checkpoint.id.clone()), ..self.thread.clone() })
        };
        let next = match self.spare.take() {
            Some(mut spare) => match Arc::get_mut(&mut spare) {
                Some(config) => {
                    let id = config.checkpoint_id.get_or_insert_with(String::new);
                    id.clear();
                    id.push_str(&checkpoint.id);
                    spare
                }
                None => fresh(),
            },
            None => fresh(),
        };
        let config = std::mem::replace(&mut self.current, next);
        self.spare = Some(Arc::clone(&config));
        let expected_head = std::mem::replace(&mut self.head, ExpectedHead::Id(checkpoint.id.clone()));
        self.save_now(SaveOp::Put { config, checkpoint, metadata, new_versions, appends, expected_head })
    }

    /// Saves a finished task's writes against the current checkpoint (held back in `exit` mode). Returns
    /// the save when it is still to [`submit`](RunSaver::submit).
    pub(crate) fn put_writes(
        &mut self,
        task_id: &Arc<str>,
        task_path: &Arc<str>,
        writes: Vec<(ChannelName, Value)>,
    ) -> GraphResult<Option<SaveOp>> {
        if writes.is_empty() {
            return Ok(None);
        }
        if self.durability == Durability::Exit {
            self.deferred.push((Arc::clone(task_id), Arc::clone(task_path), writes));
            return Ok(None);
        }
        let config = Arc::clone(&self.current);
        let (task_id, task_path) = (Arc::clone(task_id), Arc::clone(task_path));
        self.save_now(SaveOp::Writes { config, writes, task_id, task_path })
    }

    /// Forgets writes held back in `exit` mode once their step has been applied.
    pub(crate) fn clear_deferred(&mut self) {
        self.deferred.clear();
    }

    /// Saves the writes of an interrupted or failed task; in `exit` mode they wait for the checkpoint
    /// saved when the run stops ([`flush_deferred`](RunSaver::flush_deferred)).
    pub(crate) async fn put_writes_now(
        &mut self,
        task_id: &Arc<str>,
        task_path: &Arc<str>,
        writes: Vec<(ChannelName, Value)>,
    ) -> GraphResult<()> {
        match self.put_writes(task_id, task_path, writes)? {
            Some(op) => self.submit(op).await,
            None => Ok(()),
        }
    }

    /// Saves a failed task's writes and waits until they are stored (under `async` durability too), so
    /// that the error handler it goes to never runs before them: a run that stops while the handler runs
    /// resumes into the handler (in `exit` mode they wait for the run's end, as other writes do).
    pub(crate) async fn put_writes_confirmed(
        &mut self,
        task_id: &Arc<str>,
        task_path: &Arc<str>,
        writes: Vec<(ChannelName, Value)>,
    ) -> GraphResult<()> {
        self.put_writes_now(task_id, task_path, writes).await?;
        self.wait_confirmed(self.sent).await
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
        task_id: &Arc<str>,
        task_path: &Arc<str>,
        writes: Vec<(ChannelName, Value)>,
    ) -> GraphResult<()> {
        let config = Arc::clone(&self.current);
        let (task_id, task_path) = (Arc::clone(task_id), Arc::clone(task_path));
        match self.save_now(SaveOp::Writes { config, writes, task_id, task_path })? {
            Some(op) => self.submit(op).await,
            None => Ok(()),
        }
    }

    /// Saves sent to the writer and not stored yet.
    fn unconfirmed(&self) -> u64 {
        self.sent.saturating_sub(self.confirmed.load(Ordering::Acquire))
    }

    /// Called once a checkpoint has been saved or queued, before the loop goes on: waits until the saves
    /// queued up to the previous checkpoint are stored (one step's saves overlap the next step, no
    /// more), and returns the error of a save that failed (the run stops there).
    pub(crate) async fn step_boundary(&mut self) -> GraphResult<()> {
        // Held back: taken when the saves go out.
        if self.writer.is_none() || self.held.is_some() {
            return Ok(());
        }
        let fence = std::mem::replace(&mut self.fence, self.sent);
        self.wait_confirmed(fence).await
    }

    /// Waits until the first `count` saves sent to the writer are stored; a writer that failed ends the
    /// wait with its error (found at once, even when those saves are stored).
    async fn wait_confirmed(&mut self, count: u64) -> GraphResult<()> {
        loop {
            let Some(writer) = self.writer.as_ref() else { return Ok(()) };
            if writer.tx.is_closed() {
                return match self.finish().await {
                    Ok(()) => Err(GraphError::Checkpoint("checkpoint writer stopped".to_owned())),
                    Err(e) => Err(e),
                };
            }
            let progress = writer.progress.notified();
            if self.confirmed.load(Ordering::Acquire) >= count {
                return Ok(());
            }
            progress.await;
        }
    }

    /// Waits for every queued save, then stores those held back, as one batch.
    pub(crate) async fn finish(&mut self) -> GraphResult<()> {
        let held = self.held.take().unwrap_or_default();
        if let Some(Writer { tx, handle, .. }) = self.writer.take() {
            drop(tx);
            match handle.await {
                Ok(result) => result.map_err(checkpoint_error)?,
                Err(join) => {
                    return Err(GraphError::Checkpoint(format!("checkpoint writer stopped: {join}")));
                }
            }
        }
        if !held.is_empty() {
            self.checkpointer.put_batch(held).await.map_err(checkpoint_error)?;
        }
        Ok(())
    }
}

/// Starts the background writer of a run: it takes everything queued at each turn and saves the
/// consecutive ops among it as one batch.
fn spawn_writer(checkpointer: &Arc<dyn Checkpointer>, confirmed: &Arc<AtomicU64>) -> Writer {
    // Unbounded as a channel, bounded in use: the loop waits for the writer at each step boundary and
    // past `MAX_QUEUED` unconfirmed saves.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Queued>();
    let (saver, confirmed) = (Arc::clone(checkpointer), Arc::clone(confirmed));
    let progress = Arc::new(Notify::new());
    let signal = Arc::clone(&progress);
    let handle = tokio::spawn(async move {
        let mut items = Vec::new();
        let mut batch = Vec::new();
        let result = async {
            while rx.recv_many(&mut items, MAX_BATCH).await > 0 {
                let taken = items.len();
                for item in items.drain(..) {
                    match item {
                        Queued::Op(op) => batch.push(op),
                        Queued::Ops(ops) => batch.extend(ops),
                        Queued::Started(started) => {
                            if !batch.is_empty() {
                                saver.put_batch(std::mem::take(&mut batch)).await?;
                            }
                            started.await?;
                        }
                    }
                }
                if !batch.is_empty() {
                    saver.put_batch(std::mem::take(&mut batch)).await?;
                }
                confirmed.fetch_add(taken as u64, Ordering::AcqRel);
                signal.notify_waiters();
            }
            Ok(())
        }
        .await;
        // A failed writer stops taking saves; anyone waiting for room learns it at once.
        rx.close();
        signal.notify_waiters();
        result
    });
    Writer { tx, handle, progress }
}

/// Polls `op` once with the current task's context: its result if it is done, `Pending` otherwise (it
/// may then be polled again elsewhere).
async fn poll_once<F: Future + Unpin>(op: &mut F) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut *op).poll(cx))).await
}

fn checkpoint_error(e: CheckpointError) -> GraphError {
    GraphError::Storage(e)
}
