//! Checkpoints: what a saver stores after every superstep, and the `Checkpointer` trait.
//!
//! Checkpoints are JSON at this boundary: the engine converts its typed state to JSON channel values when
//! it saves, and back when it loads. A checkpoint passed to [`Checkpointer::put`] carries the values of the
//! channels whose version changed since the previous checkpoint (`new_versions`) and the values of the
//! others that are small scalars ([`is_inline_scalar`]); the saver keeps older values by
//! `(channel, version)` (or scalars in the checkpoint's record) and returns whole checkpoints from
//! [`get_tuple`](Checkpointer::get_tuple) and [`list`](Checkpointer::list).
//!
//! A list channel that only grew since the previous checkpoint (an `add_messages` or `append` channel
//! after a step that appended) can be passed as an [`AppendDelta`] instead of its whole value, through
//! [`Checkpointer::put_with_appends`]; the engine does so for savers whose
//! [`stores_appends`](Checkpointer::stores_appends) is true, so a step costs O(new items), not O(list).
//!
//! One thread has one run at a time: a save carries the head its writer expects ([`ExpectedHead`], in
//! [`SaveOp::Put`]); a saver refuses a checkpoint that would not extend the stored head with a
//! [`CheckpointError::Conflict`], atomically. Errors have a [`CheckpointErrorKind`] (unavailable,
//! corrupt, conflict, invalid request, backend) a caller can match on.
//!
//! [`InMemorySaver`] is the reference implementation; [`conformance`] holds the cases every saver must
//! pass; [`RetentionPolicy`] says which old checkpoints a running thread drops; [`get_next_version`] makes
//! channel versions; [`Intercepted`] wraps a saver to count, delay or change some of its calls.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub mod conformance;
mod error;
pub mod flat_map;
pub mod intercept;
mod memory;
mod retention;
pub(crate) mod stamp;
mod version;

pub use error::{CheckpointError, CheckpointErrorKind, ErrorSource, HeadConflict};
pub use flat_map::FlatMap;
pub use intercept::{Intercept, Intercepted};
pub use memory::InMemorySaver;
pub use retention::{RetentionPolicy, checkpoint_time};
pub use version::{default_next_version, get_next_version, try_next_version, version_counter};

/// Format version of [`Checkpoint`].
pub const CHECKPOINT_VERSION: u32 = 1;

/// The longest string, in bytes, that [`is_inline_scalar`] accepts. Savers read back whatever they kept
/// in a checkpoint's record, so this bound may grow in a later release but must never shrink (a reader
/// that skipped a longer kept string would not find it elsewhere).
pub const INLINE_STRING_MAX: usize = 128;

/// Whether a channel value is a scalar that a saver may keep in the checkpoint's own record instead of a
/// record of its own: `null`, a boolean, an integer within 64 bits, or a string of at most
/// [`INLINE_STRING_MAX`] bytes without NUL. The engine passes such values of unchanged channels too (see
/// [`Checkpointer::put`]), so a checkpoint is whole without them being stored per version. Floats are
/// not: some stores (PostgreSQL's `jsonb`) keep neither `-0.0` nor a float's written form.
pub fn is_inline_scalar(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(_) => true,
        Value::Number(n) => n.is_i64() || n.is_u64(),
        Value::String(s) => s.len() <= INLINE_STRING_MAX && !s.contains('\0'),
        Value::Array(_) | Value::Object(_) => false,
    }
}

/// Write channels with a fixed meaning (never applied to state).
pub mod special {
    /// A task failed: the value is the error text.
    pub const ERROR: &str = "__error__";
    /// A failed task's node has an error handler, which runs next: the value is the node's name. Saved
    /// with the task's `__error__` in one write, so a run that stops before the handler finishes resumes
    /// into the handler instead of running the node again (LangGraph's `__error_source_node__`).
    pub const ERROR_SOURCE_NODE: &str = "__error_source_node__";
    /// A task was interrupted: the value is the list of interrupts.
    pub const INTERRUPT: &str = "__interrupt__";
    /// Resume values a task has consumed, in order.
    pub const RESUME: &str = "__resume__";
    /// A task finished without writing anything.
    pub const NO_WRITES: &str = "__no_writes__";
    /// A task scheduled by `Send`.
    pub const TASKS: &str = "__pregel_tasks";
    /// The trigger of a pushed task (a `Send`'s, or a functional-API task call's).
    pub const PUSH: &str = "__pregel_push";
    /// The graph input.
    pub const START: &str = "__start__";
    /// The input's entry in `versions_seen`.
    pub const INPUT: &str = "__input__";
    /// The id of the task whose writes are made by the graph itself (input commands, resume values).
    pub const NULL_TASK_ID: &str = "00000000-0000-0000-0000-000000000000";

    /// The fixed index a saver stores a special write at (LangGraph's numbering), or `None` for a
    /// regular write (stored at its position in the batch).
    pub fn fixed_index(channel: &str) -> Option<i64> {
        match channel {
            ERROR => Some(-1),
            INTERRUPT => Some(-3),
            RESUME => Some(-4),
            _ => None,
        }
    }
}

/// Addresses a thread, a namespace in it and optionally one checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CheckpointConfig {
    /// The thread.
    pub thread_id: String,
    /// The namespace: `""` for the root graph, `node:<task id>` (joined by `|`) for subgraphs.
    #[serde(default)]
    pub checkpoint_ns: String,
    /// A checkpoint id; `None` means the latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_id: Option<String>,
}

impl CheckpointConfig {
    /// The latest checkpoint of a thread's root namespace.
    pub fn thread(thread_id: impl Into<String>) -> Self {
        Self { thread_id: thread_id.into(), ..Self::default() }
    }

    /// The same address, pointing at `checkpoint_id`.
    pub fn at(&self, checkpoint_id: impl Into<String>) -> Self {
        Self { checkpoint_id: Some(checkpoint_id.into()), ..self.clone() }
    }
}

/// A channel's (or node's) name in a checkpoint. Shared, not copied: a run names its channels in every
/// checkpoint it saves, and cloning a name only counts a reference.
pub type ChannelName = Arc<str>;

/// A channel's version: a counter and a random tag that keeps versions of diverging forks apart, as
/// LangGraph's `"{counter:032}.{tag:016}"` strings, which sort by counter. Shared like [`ChannelName`]:
/// a version appears in every checkpoint until the channel changes again.
pub type ChannelVersion = Arc<str>;

/// Channel name to version.
pub type ChannelVersions = FlatMap<ChannelName, ChannelVersion>;

/// What was appended to a list channel: its value at the new version is its value at `base_version` (a
/// JSON array) followed by `items`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppendDelta {
    /// The version whose value the items extend (the channel's version in the parent checkpoint).
    pub base_version: ChannelVersion,
    /// The new items, in order.
    pub items: Vec<Value>,
}

/// Channel name to what was appended to it.
pub type ChannelAppends = FlatMap<ChannelName, AppendDelta>;

/// Channel name to value.
pub type ChannelValues = FlatMap<ChannelName, Value>;

/// The state of a run between two supersteps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Format version.
    pub v: u32,
    /// Time-sortable id (UUID v7).
    pub id: String,
    /// When it was made (RFC 3339, UTC).
    pub ts: String,
    /// Channel values (only non-empty channels; see the module docs for which are present in `put`).
    pub channel_values: ChannelValues,
    /// The version of every channel that has one.
    pub channel_versions: ChannelVersions,
    /// For each node, the versions of its trigger channels it has seen.
    pub versions_seen: FlatMap<ChannelName, ChannelVersions>,
    /// Channels updated in the step that produced this checkpoint, sorted.
    #[serde(default)]
    pub updated_channels: Vec<ChannelName>,
}

/// Where a checkpoint came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckpointSource {
    /// New input.
    Input,
    /// A superstep.
    Loop,
    /// `update_state`.
    Update,
    /// A copy of an older checkpoint (time travel).
    Fork,
}

/// Metadata saved with a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointMetadata {
    /// Where it came from.
    pub source: CheckpointSource,
    /// The superstep (-1 for the input checkpoint).
    pub step: i64,
    /// Parent namespace to checkpoint id (subgraphs); empty at the root.
    #[serde(default)]
    pub parents: BTreeMap<String, String>,
    /// The caller's metadata (scalar values of the config's metadata and configurable). Shared: the
    /// checkpoints of one run carry the same map, built once per run ([`Arc::make_mut`] to change one).
    #[serde(flatten)]
    pub extra: Arc<Map<String, Value>>,
}

/// One saved write of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingWrite {
    /// The task that made it.
    pub task_id: String,
    /// The channel written.
    pub channel: String,
    /// The value.
    pub value: Value,
}

/// A checkpoint with its config, metadata, parent and pending writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointTuple {
    /// The checkpoint's address (with its id).
    pub config: CheckpointConfig,
    /// The checkpoint.
    pub checkpoint: Checkpoint,
    /// Its metadata.
    pub metadata: CheckpointMetadata,
    /// The checkpoint it was made from.
    pub parent_config: Option<CheckpointConfig>,
    /// Writes of tasks planned from this checkpoint, ordered by task path, task id, index.
    pub pending_writes: Vec<PendingWrite>,
}

/// The head of a thread and namespace that the writer of a checkpoint expects: a save compares it with
/// the head stored (the namespace's latest checkpoint) and stores the checkpoint only when they match,
/// atomically; otherwise it fails with [`CheckpointError::Conflict`] and stores nothing of that op.
///
/// This is how one thread gets one run at a time: a run expects, at its first save, the head it read
/// when it started (for a fork, from an older `checkpoint_id` or an `update_state` on an old checkpoint,
/// the head it read, not the checkpoint it forks from), then its own previous checkpoint. A second run
/// of the same thread started meanwhile fails at its first save, and the history stays one chain.
/// Pending writes are never checked: writes against a checkpoint that is not the head are fine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum ExpectedHead {
    /// Store whatever the head is (callers and savers that do not care).
    #[default]
    Any,
    /// The namespace has no checkpoint yet.
    Empty,
    /// The head is this checkpoint id.
    Id(String),
}

impl ExpectedHead {
    /// The expectation for a head read as `head` (`None`: no checkpoint).
    pub fn from_head(head: Option<String>) -> Self {
        head.map_or(Self::Empty, Self::Id)
    }

    /// Whether a head was expected at all (not [`Any`](Self::Any)).
    pub fn is_checked(&self) -> bool {
        !matches!(self, Self::Any)
    }

    /// Whether `found` (the stored head, `None`: no checkpoint) is what is expected.
    pub fn matches(&self, found: Option<&str>) -> bool {
        match self {
            Self::Any => true,
            Self::Empty => found.is_none(),
            Self::Id(id) => found == Some(id.as_str()),
        }
    }

    /// `Ok` when `found` matches, or is `checkpoint_id` itself (the same save again, as a retry after a
    /// reply was lost: saving it again changes nothing), else the [`CheckpointError::Conflict`] refusing
    /// `checkpoint_id`.
    pub fn check(
        &self,
        config: &CheckpointConfig,
        checkpoint_id: &str,
        found: Option<&str>,
    ) -> Result<(), CheckpointError> {
        if self.matches(found) || found == Some(checkpoint_id) {
            return Ok(());
        }
        Err(CheckpointError::Conflict(Box::new(HeadConflict {
            thread_id: config.thread_id.clone(),
            checkpoint_ns: config.checkpoint_ns.clone(),
            checkpoint_id: checkpoint_id.to_owned(),
            expected: match self {
                Self::Id(id) => Some(id.clone()),
                Self::Any | Self::Empty => None,
            },
            found: found.map(str::to_owned),
        })))
    }
}

/// One save of a run, as [`Checkpointer::put_batch`] takes it: a checkpoint or a task's writes.
// Ops are built once and moved into a batch; boxing the checkpoint would cost an allocation per save.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum SaveOp {
    /// A checkpoint, as [`Checkpointer::put_with_appends`] takes it (with no appends, as
    /// [`put`](Checkpointer::put) takes it).
    Put {
        /// The parent checkpoint's address (shared: a run's consecutive saves name the same one).
        config: Arc<CheckpointConfig>,
        /// The checkpoint (values of the channels in `new_versions` that are not in `appends`).
        checkpoint: Checkpoint,
        /// Its metadata.
        metadata: CheckpointMetadata,
        /// The channels whose version changed.
        new_versions: ChannelVersions,
        /// List channels given as the items appended to their base version.
        appends: ChannelAppends,
        /// The head of the thread and namespace this checkpoint must extend (see [`ExpectedHead`]).
        expected_head: ExpectedHead,
    },
    /// Writes of a task, as [`Checkpointer::put_writes`] takes them.
    Writes {
        /// The checkpoint the task was planned from.
        config: Arc<CheckpointConfig>,
        /// Channel and value of each write, in order.
        writes: Vec<(ChannelName, Value)>,
        /// The task.
        task_id: Arc<str>,
        /// The task's path.
        task_path: Arc<str>,
    },
}

impl SaveOp {
    /// The address the op names: the parent checkpoint of a put, the checkpoint of writes.
    pub fn config(&self) -> &Arc<CheckpointConfig> {
        match self {
            Self::Put { config, .. } | Self::Writes { config, .. } => config,
        }
    }

    /// The thread the op saves to.
    pub fn thread_id(&self) -> &str {
        &self.config().thread_id
    }
}

/// Saves `ops` in order through `saver`'s `put_with_appends` (or `put`) and `put_writes`, stopping at the
/// first error: the default [`Checkpointer::put_batch`], for savers that batch some ops and not others.
///
/// A checkpoint with an [`ExpectedHead`] is checked against the head [`list_ids`](Checkpointer::list_ids)
/// reads just before it is stored: not atomic, so a saver whose checks must hold against concurrent
/// writers (every saver of this workspace) checks in its own `put_batch`, and a wrapper of a saver must
/// forward `put_batch` to it.
pub async fn put_one_by_one<C: Checkpointer + ?Sized>(
    saver: &C,
    ops: Vec<SaveOp>,
) -> Result<(), CheckpointError> {
    for op in ops {
        match op {
            SaveOp::Put { config, checkpoint, metadata, new_versions, appends, expected_head } => {
                if expected_head.is_checked() {
                    let ids = saver.list_ids(&config).await?;
                    expected_head.check(&config, &checkpoint.id, ids.first().map(String::as_str))?;
                }
                if appends.is_empty() {
                    saver.put(&config, checkpoint, metadata, new_versions).await?;
                } else {
                    saver.put_with_appends(&config, checkpoint, metadata, new_versions, appends).await?;
                }
            }
            SaveOp::Writes { config, writes, task_id, task_path } => {
                saver.put_writes(&config, owned_writes(writes), &task_id, &task_path).await?;
            }
        }
    }
    Ok(())
}

/// Writes as [`Checkpointer::put_writes`] takes them: channel names as owned strings.
pub fn owned_writes(writes: Vec<(ChannelName, Value)>) -> Vec<(String, Value)> {
    writes.into_iter().map(|(channel, value)| (channel.to_string(), value)).collect()
}

/// Filters of [`Checkpointer::list`].
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// Keep checkpoints whose metadata, as JSON (`source`, `step`, `parents` and the caller's keys, all at
    /// the top level), has these key/value pairs.
    pub filter: Map<String, Value>,
    /// Keep checkpoints older than this one.
    pub before: Option<String>,
    /// At most this many.
    pub limit: Option<usize>,
}

/// Stores checkpoints and pending writes; durable implementations live in `weft-integrations`.
#[async_trait]
pub trait Checkpointer: std::fmt::Debug + Send + Sync {
    /// The checkpoint at `config` (by id, or the latest of the thread and namespace), with its pending
    /// writes.
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>, CheckpointError>;

    /// Checkpoints newest first (by id): of one thread and namespace (`config.checkpoint_ns`, `""` being
    /// the root graph; only the checkpoint `config.checkpoint_id` when it is set), or of every thread and
    /// namespace when `config` is `None`. `options` filter on metadata, keep ids below `before` and cap
    /// the count, in that order.
    async fn list(
        &self,
        config: Option<&CheckpointConfig>,
        options: ListOptions,
    ) -> Result<Vec<CheckpointTuple>, CheckpointError>;

    /// Saves a checkpoint made from `config`'s checkpoint (its parent). `checkpoint.channel_values` holds
    /// the values of the channels in `new_versions`, and the value of every other channel of
    /// `channel_versions` that is an inline scalar ([`is_inline_scalar`]; the engine passes them, and a
    /// whole checkpoint, as LangGraph passes, has them): a saver may keep such values in the checkpoint's
    /// record only, so a checkpoint that leaves one out may read back without it. Returns the new
    /// checkpoint's address. Stores whatever the thread's head is ([`ExpectedHead::Any`]); the engine
    /// saves through [`put_batch`](Self::put_batch) with the head it expects.
    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig, CheckpointError>;

    /// The version a step gives the channels it changes, following `current`, the highest version of
    /// the checkpoint (`None` on a new thread), as LangGraph's `BaseCheckpointSaver.get_next_version`
    /// decides it. The engine calls it once per step and needs its counter (the integer before the first
    /// `.`, see [`version_counter`]) to grow; a version whose counter does not grow fails the run.
    ///
    /// The default, [`default_next_version`], is the engine's own form, `"{counter:032}.{tag:016}"` with
    /// a random integer tag, which sorts as a string and keeps forks of one checkpoint apart; LangGraph's
    /// savers' form (a float tag) is [`get_next_version`], and plain integers (`"1"`, `"2"`, ...) are
    /// LangGraph's base form. A saver that wraps another forwards this method to it. An error fails the run
    /// with it (LangGraph's saver may raise here too), before the step's checkpoint is saved.
    fn get_next_version(&self, current: Option<&str>) -> Result<ChannelVersion, CheckpointError> {
        Ok(default_next_version(current))
    }

    /// Whether this saver stores [`AppendDelta`]s itself in
    /// [`put_with_appends`](Self::put_with_appends). The engine passes deltas only to savers that say so
    /// and whole values to the others. Defaults to `false`.
    fn stores_appends(&self) -> bool {
        false
    }

    /// Saves a checkpoint as [`put`](Self::put) does, except that the channels of `appends` (each also in
    /// `new_versions`, with no value in `checkpoint.channel_values`) are given as the items appended to
    /// their value at the delta's base version, which must be stored in the same thread and namespace.
    ///
    /// The default rebuilds whole values from the parent checkpoint (`config`'s, whose version of each such
    /// channel must be the delta's base) and calls `put`: correct for any saver, at the cost of a read.
    /// A base that does not match is [`CheckpointError::Invalid`] naming the channel.
    async fn put_with_appends(
        &self,
        config: &CheckpointConfig,
        mut checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        appends: ChannelAppends,
    ) -> Result<CheckpointConfig, CheckpointError> {
        if !appends.is_empty() {
            let parent = match &config.checkpoint_id {
                Some(_) => self.get_tuple(config).await?,
                None => None,
            };
            let empty = Value::Array(Vec::new());
            for (channel, delta) in appends {
                // A channel listed without a value is empty: for a list, the empty list.
                let base = parent.as_ref().and_then(|p| {
                    let listed = p.checkpoint.channel_versions.get(&channel) == Some(&delta.base_version);
                    listed.then(|| p.checkpoint.channel_values.get(&*channel).unwrap_or(&empty))
                });
                let Some(Value::Array(items)) = base else {
                    return Err(CheckpointError::Invalid(format!(
                        "append to channel '{channel}' of thread '{}': its base version '{}' is not a list in the parent checkpoint",
                        config.thread_id, delta.base_version
                    )));
                };
                let mut items = items.clone();
                items.extend(delta.items);
                checkpoint.channel_values.insert(channel, Value::Array(items));
            }
        }
        self.put(config, checkpoint, metadata, new_versions).await
    }

    /// Saves `op` at once, without waiting, if this saver can (it keeps everything in memory, say):
    /// `Ok(None)` when it is saved, `Ok(Some(op))` handing it back when saving means waiting (I/O).
    /// The engine offers every save here first when nothing is queued before it, and saves an op handed
    /// back through [`put_batch`](Self::put_batch); the effect of a save made here must be that of
    /// `put_batch(vec![op])`. The default hands every op back.
    fn save_now(&self, op: SaveOp) -> Result<Option<SaveOp>, CheckpointError> {
        Ok(Some(op))
    }

    /// Saves `ops` in order, with the effect of calling [`put_with_appends`](Self::put_with_appends) (or
    /// [`put`](Self::put)) and [`put_writes`](Self::put_writes) for each in turn, where a checkpoint with
    /// an [`ExpectedHead`] is stored only if the head of its thread and namespace is the one expected, at
    /// that point of the batch (checked and stored atomically; [`CheckpointError::Conflict`] otherwise). In `async` durability
    /// the engine hands a run's queued saves over this way, so a backend can store many supersteps in
    /// one transaction and a few round trips.
    ///
    /// On an error, the ops before the failing one may be stored (the default stops there) or none of
    /// them (savers that use one transaction say so). The default calls the methods one by one.
    async fn put_batch(&self, ops: Vec<SaveOp>) -> Result<(), CheckpointError> {
        put_one_by_one(self, ops).await
    }

    /// Saves writes of task `task_id` against the checkpoint at `config`. Regular writes are inserted if
    /// absent; special writes (`special::fixed_index` is `Some`) replace earlier ones.
    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<(), CheckpointError>;

    /// Deletes everything of a thread (all namespaces, checkpoints, writes and values). Deleting a thread
    /// that has nothing is not an error.
    async fn delete_thread(&self, thread_id: &str) -> Result<(), CheckpointError>;

    /// Copies every checkpoint (same ids, metadata, parents), pending write (with its task path and index)
    /// and stored value of thread `src`, in every namespace, to thread `dst`. Later changes to either
    /// thread do not show in the other. A `src` without checkpoints, or a `dst` that already has some, is
    /// [`CheckpointError::Invalid`] naming the thread.
    async fn copy_thread(&self, src: &str, dst: &str) -> Result<(), CheckpointError>;

    /// Keeps the newest `keep_latest` checkpoints of each namespace of a thread, with their pending
    /// writes and the channel values they reference; everything else of the thread is dropped (`0`
    /// drops every checkpoint). A kept value stored as items appended to a version that goes is stored
    /// whole first (kept checkpoints read the same), so no chain of appends outlives its checkpoints. A
    /// kept checkpoint's `parent_config` may then name a dropped checkpoint. Pruning a thread that has
    /// nothing is not an error.
    async fn prune(&self, thread_id: &str, keep_latest: usize) -> Result<(), CheckpointError>;

    /// The ids of the checkpoints of `config`'s thread and namespace, newest first (`config`'s
    /// checkpoint id is ignored). The default reads whole checkpoints through [`list`](Self::list);
    /// savers override it with a query that reads ids only.
    async fn list_ids(&self, config: &CheckpointConfig) -> Result<Vec<String>, CheckpointError> {
        let config = CheckpointConfig { checkpoint_id: None, ..config.clone() };
        let tuples = self.list(Some(&config), ListOptions::default()).await?;
        Ok(tuples.into_iter().map(|t| t.checkpoint.id).collect())
    }
}
