//! `InMemorySaver`: a checkpointer that keeps everything in process memory.

mod keys;
mod values;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::{
    ChannelAppends, ChannelName, ChannelValues, ChannelVersions, Checkpoint, CheckpointConfig,
    CheckpointError, CheckpointMetadata, CheckpointTuple, Checkpointer, FlatMap, ListOptions, PendingWrite,
    SaveOp, special,
};
use keys::{Names, Ver};
use values::{Packed, Values};

/// A checkpointer that keeps everything in memory, laid out as LangGraph's in-memory saver: checkpoints
/// per (thread, namespace, id) without their values, each channel value once per (thread, namespace,
/// channel, version), and writes per (thread, namespace, checkpoint) keyed by (task id, index).
///
/// It stores append deltas ([`stores_appends`](Checkpointer::stores_appends) is true): a list channel that
/// a step only appended to is kept as the new items and a link to its previous version, so a growing
/// message list costs O(new messages) per checkpoint in time and memory; `get_tuple` and `list` rebuild
/// the whole list. A replaced or shortened list is stored whole. `prune` stores a kept list whole when
/// the version it extends goes, so a pruned thread keeps one value per channel and kept version.
///
/// For tests, development and short-lived processes: nothing survives the process. Many tasks may share
/// one saver; every call takes a lock briefly and never holds it across an await.
#[derive(Debug, Default)]
pub struct InMemorySaver {
    threads: RwLock<HashMap<String, Thread>>,
}

/// The namespaces of one thread: the root graph's (`""`, the one almost every save goes to) in a field of
/// its own, found without a search, and the subgraphs' by name.
#[derive(Debug, Default, Clone)]
struct Thread {
    root: Namespace,
    subgraphs: BTreeMap<String, Namespace>,
}

/// Writes of one checkpoint: (task id, index) to write.
type Writes = FlatMap<(Arc<str>, i64), SavedWrite>;

#[derive(Debug, Default, Clone)]
struct Namespace {
    /// Channel and node names, stored once.
    names: Names,
    /// By id, oldest first (ids are time-sortable, so the last is the latest).
    checkpoints: Vec<Entry>,
    /// Channel values by (channel, version).
    values: Values,
    /// Writes against checkpoint ids not stored (yet); they join their checkpoint when it is put.
    loose_writes: BTreeMap<String, Writes>,
}

#[derive(Debug, Clone)]
struct Entry {
    id: String,
    saved: Saved,
    writes: Writes,
}

/// A checkpoint without its id and values, its maps kept as given (taking them apart would cost more than
/// storing them).
#[derive(Debug, Clone)]
struct Saved {
    v: u32,
    ts: String,
    channel_versions: ChannelVersions,
    versions_seen: FlatMap<ChannelName, ChannelVersions>,
    updated_channels: Vec<ChannelName>,
    metadata: CheckpointMetadata,
    parent_id: Option<String>,
}

#[derive(Debug, Clone)]
struct SavedWrite {
    channel: u32,
    value: Packed,
    /// Shared by the writes of one `put_writes` call.
    task_path: Arc<str>,
}

impl InMemorySaver {
    /// An empty saver.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many channel values are stored, over all threads (one per thread, namespace, channel and
    /// version: an unchanged channel is not stored again).
    pub fn stored_value_count(&self) -> usize {
        self.threads.read().map_or(0, |threads| {
            threads.values().flat_map(Thread::namespaces).map(|(_, ns)| ns.values.len()).sum()
        })
    }

    fn read(&self) -> Result<RwLockReadGuard<'_, HashMap<String, Thread>>, CheckpointError> {
        self.threads.read().map_err(|_| CheckpointError::backend("in-memory saver lock poisoned"))
    }

    fn write(&self) -> Result<RwLockWriteGuard<'_, HashMap<String, Thread>>, CheckpointError> {
        self.threads.write().map_err(|_| CheckpointError::backend("in-memory saver lock poisoned"))
    }
}

impl Thread {
    fn has_checkpoints(&self) -> bool {
        self.namespaces().any(|(_, ns)| !ns.checkpoints.is_empty())
    }

    /// Every namespace with its name, in name order (the root first).
    fn namespaces(&self) -> impl Iterator<Item = (&str, &Namespace)> {
        std::iter::once(("", &self.root)).chain(self.subgraphs.iter().map(|(name, ns)| (name.as_str(), ns)))
    }

    fn namespace(&self, ns: &str) -> Option<&Namespace> {
        if ns.is_empty() { Some(&self.root) } else { self.subgraphs.get(ns) }
    }

    /// Runs `f` on namespace `ns`, made if absent (its name is allocated only then).
    fn with_namespace<R>(&mut self, ns: &str, f: impl FnOnce(&mut Namespace) -> R) -> R {
        if ns.is_empty() {
            return f(&mut self.root);
        }
        if let Some(namespace) = self.subgraphs.get_mut(ns) {
            return f(namespace);
        }
        f(self.subgraphs.entry(ns.to_owned()).or_default())
    }
}

/// Runs `f` on namespace `ns` of thread `thread_id`, made if absent (its keys are allocated only then).
fn with_namespace<R>(
    threads: &mut HashMap<String, Thread>,
    thread_id: &str,
    ns: &str,
    f: impl FnOnce(&mut Namespace) -> R,
) -> R {
    if let Some(thread) = threads.get_mut(thread_id) {
        return thread.with_namespace(ns, f);
    }
    threads.entry(thread_id.to_owned()).or_default().with_namespace(ns, f)
}

/// The checkpoint ids of a save must not be empty.
fn check_id(thread_id: &str, id: &str) -> Result<(), CheckpointError> {
    if id.is_empty() {
        return Err(CheckpointError::Invalid(format!("checkpoint for thread '{thread_id}' has an empty id")));
    }
    Ok(())
}

/// The checkpoint id writes are saved against.
fn writes_target<'a>(
    thread_id: &str,
    checkpoint_id: Option<&'a str>,
    task_id: &str,
) -> Result<&'a str, CheckpointError> {
    checkpoint_id.ok_or_else(|| {
        CheckpointError::Invalid(format!(
            "writes of task '{task_id}' in thread '{thread_id}' name no checkpoint id"
        ))
    })
}

/// Whether `op` saves to namespace `ns` of thread `thread_id`.
fn same_namespace(op: &SaveOp, thread_id: &str, ns: &str) -> bool {
    let config = op.config();
    config.thread_id == thread_id && config.checkpoint_ns == ns
}

impl Namespace {
    /// Applies one op of a batch to this namespace (of thread `thread_id`; the op's own thread and
    /// namespace are not read).
    fn apply(&mut self, thread_id: &str, op: SaveOp) -> Result<(), CheckpointError> {
        match op {
            SaveOp::Put { config, checkpoint, metadata, new_versions, appends, expected_head } => {
                if expected_head.is_checked() {
                    let head = self.checkpoints.last().map(|e| e.id.as_str());
                    expected_head.check(&config, &checkpoint.id, head)?;
                }
                let parent_id = config.checkpoint_id.clone();
                self.put(thread_id, checkpoint, metadata, new_versions, appends, parent_id)
            }
            SaveOp::Writes { config, writes, task_id, task_path } => {
                let id = writes_target(thread_id, config.checkpoint_id.as_deref(), &task_id)?;
                self.put_writes(id, writes, task_id, task_path);
                Ok(())
            }
        }
    }

    /// Where checkpoint `id` is in `checkpoints` (`Err`: where it would go).
    fn position(&self, id: &str) -> Result<usize, usize> {
        let len = self.checkpoints.len();
        // Saves come in id order: the latest is checked first.
        match self.checkpoints.last() {
            Some(last) if last.id == id => Ok(len - 1),
            Some(last) if last.id.as_str() < id => Err(len),
            None => Err(0),
            Some(_) => self.checkpoints.binary_search_by(|e| e.id.as_str().cmp(id)),
        }
    }

    fn entry(&self, id: &str) -> Option<&Entry> {
        self.position(id).ok().map(|i| &self.checkpoints[i])
    }

    /// The whole tuple of `entry`: values rebuilt from the versions it lists, writes sorted.
    fn tuple(&self, thread_id: &str, ns: &str, entry: &Entry) -> Result<CheckpointTuple, CheckpointError> {
        let id = entry.id.as_str();
        let corrupt = |message: String| CheckpointError::corrupt(thread_id, id, message);
        let saved = &entry.saved;
        let mut channel_values = ChannelValues::with_capacity(saved.channel_versions.len());
        for (name, version) in &saved.channel_versions {
            let value = match self.names.find(name) {
                Some(channel) => self.values.get(channel, name, &Ver::parse(version)),
                None => Err(format!("no value stored for channel '{name}' at version '{version}'")),
            };
            if let Some(value) = value.map_err(corrupt)? {
                channel_values.insert(Arc::clone(name), value);
            }
        }
        let checkpoint = Checkpoint {
            v: saved.v,
            id: id.to_owned(),
            ts: saved.ts.clone(),
            channel_values,
            channel_versions: saved.channel_versions.clone(),
            versions_seen: saved.versions_seen.clone(),
            updated_channels: saved.updated_channels.clone(),
        };
        let mut writes: Vec<(&(Arc<str>, i64), &SavedWrite)> = entry.writes.iter().collect();
        writes.sort_by(|(ka, a), (kb, b)| (&a.task_path, ka).cmp(&(&b.task_path, kb)));
        let pending_writes = writes
            .into_iter()
            .map(|((task_id, _), w)| {
                Ok(PendingWrite {
                    task_id: task_id.to_string(),
                    channel: self.names.name(w.channel).to_owned(),
                    value: w.value.unpack().map_err(corrupt)?,
                })
            })
            .collect::<Result<_, CheckpointError>>()?;
        let address = |checkpoint_id: &str| CheckpointConfig {
            thread_id: thread_id.to_owned(),
            checkpoint_ns: ns.to_owned(),
            checkpoint_id: Some(checkpoint_id.to_owned()),
        };
        Ok(CheckpointTuple {
            config: address(id),
            checkpoint,
            metadata: saved.metadata.clone(),
            parent_config: saved.parent_id.as_deref().map(address),
            pending_writes,
        })
    }

    /// Keeps the newest `keep` checkpoints, their writes and the values they reference (stored whole
    /// where the versions they extend go).
    fn prune(&mut self, keep: usize) {
        let drop = self.checkpoints.len().saturating_sub(keep);
        self.checkpoints.drain(..drop);
        self.loose_writes.clear();
        let needed: HashSet<(u32, Ver)> = self
            .checkpoints
            .iter()
            .flat_map(|e| e.saved.channel_versions.iter())
            .filter_map(|(name, version)| Some((self.names.find(name)?, Ver::parse(version))))
            .collect();
        self.values.retain(&needed);
    }

    /// Saves a checkpoint whose values are in its `channel_values` (whole) or in `appends`.
    fn put(
        &mut self,
        thread_id: &str,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        appends: ChannelAppends,
        parent_id: Option<String>,
    ) -> Result<(), CheckpointError> {
        let Checkpoint { v, id, ts, channel_values, channel_versions, versions_seen, updated_channels } =
            checkpoint;
        check_id(thread_id, &id)?;
        let invalid = |message: String| CheckpointError::Invalid(format!("thread '{thread_id}': {message}"));
        // Check every append before storing anything.
        let mut prepared = Vec::with_capacity(appends.len());
        for (channel, delta) in appends {
            let Some(version) = new_versions.get(&channel) else {
                return Err(invalid(format!("append to channel '{channel}', which has no new version")));
            };
            let c = self.names.intern(&channel);
            let version = Ver::parse(version);
            let stored = self.values.prepare_append(c, &channel, &version, delta).map_err(invalid)?;
            prepared.push((c, version, stored));
        }
        // Both maps are sorted by channel: one walk pairs each new version with its value.
        let mut values = channel_values.into_iter().peekable();
        for (channel, version) in new_versions {
            let c = self.names.intern_shared(&channel);
            while values.next_if(|(name, _)| !Arc::ptr_eq(name, &channel) && *name < channel).is_some() {}
            let value = values.next_if(|(name, _)| *name == channel).map(|(_, value)| value);
            if !prepared.iter().any(|(p, ..)| *p == c) {
                self.values.put_whole(c, Ver::parse(&version), value);
            }
        }
        for (channel, version, stored) in prepared {
            self.values.insert(channel, version, stored);
        }
        let saved = Saved { v, ts, channel_versions, versions_seen, updated_channels, metadata, parent_id };
        match self.position(&id) {
            // The same id again: the new checkpoint replaces the old, its writes stay.
            Ok(i) => self.checkpoints[i].saved = saved,
            Err(i) => {
                let writes = if self.loose_writes.is_empty() {
                    Writes::new()
                } else {
                    self.loose_writes.remove(&id).unwrap_or_default()
                };
                self.checkpoints.insert(i, Entry { id, saved, writes });
            }
        }
        Ok(())
    }

    /// Saves writes of a task against checkpoint `id`.
    fn put_writes(
        &mut self,
        id: &str,
        writes: Vec<(ChannelName, Value)>,
        task_id: Arc<str>,
        task_path: Arc<str>,
    ) {
        let saved = match self.position(id) {
            Ok(i) => &mut self.checkpoints[i].writes,
            Err(_) => match self.loose_writes.get_mut(id) {
                Some(saved) => saved,
                None => self.loose_writes.entry(id.to_owned()).or_default(),
            },
        };
        for (position, (channel, value)) in writes.into_iter().enumerate() {
            let c = self.names.intern_shared(&channel);
            let fixed = special::fixed_index(&channel);
            let idx = fixed.unwrap_or_else(|| i64::try_from(position).unwrap_or(i64::MAX));
            let write =
                SavedWrite { channel: c, value: Packed::pack(value), task_path: Arc::clone(&task_path) };
            let key = (Arc::clone(&task_id), idx);
            if fixed.is_some() {
                saved.insert(key, write);
            } else {
                saved.get_or_insert_with(key, || write);
            }
        }
    }
}

fn metadata_matches(metadata: &CheckpointMetadata, filter: &Map<String, Value>) -> bool {
    if filter.is_empty() {
        return true;
    }
    let Ok(Value::Object(metadata)) = serde_json::to_value(metadata) else { return false };
    filter.iter().all(|(key, wanted)| metadata.get(key) == Some(wanted))
}

#[async_trait]
impl Checkpointer for InMemorySaver {
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>, CheckpointError> {
        let threads = self.read()?;
        let Some(ns) = threads.get(&config.thread_id).and_then(|t| t.namespace(&config.checkpoint_ns)) else {
            return Ok(None);
        };
        let found = match &config.checkpoint_id {
            Some(id) => ns.entry(id),
            None => ns.checkpoints.last(),
        };
        found.map(|entry| ns.tuple(&config.thread_id, &config.checkpoint_ns, entry)).transpose()
    }

    async fn list(
        &self,
        config: Option<&CheckpointConfig>,
        options: ListOptions,
    ) -> Result<Vec<CheckpointTuple>, CheckpointError> {
        let threads = self.read()?;
        let sources: Vec<(&str, &str, &Namespace)> = match config {
            Some(c) => threads
                .get(&c.thread_id)
                .and_then(|t| t.namespace(&c.checkpoint_ns))
                .map(|ns| (c.thread_id.as_str(), c.checkpoint_ns.as_str(), ns))
                .into_iter()
                .collect(),
            None => threads
                .iter()
                .flat_map(|(t, thread)| thread.namespaces().map(move |(n, ns)| (t.as_str(), n, ns)))
                .collect(),
        };
        let only = config.and_then(|c| c.checkpoint_id.as_deref());
        let mut found: Vec<(&str, &str, &Namespace, &Entry)> = Vec::new();
        for (thread_id, ns_name, ns) in sources {
            for entry in &ns.checkpoints {
                let id = entry.id.as_str();
                let wanted = only.is_none_or(|w| w == id);
                let before = options.before.as_deref().is_none_or(|b| id < b);
                if wanted && before && metadata_matches(&entry.saved.metadata, &options.filter) {
                    found.push((thread_id, ns_name, ns, entry));
                }
            }
        }
        found.sort_by(|a, b| (b.3.id.as_str(), b.0, b.1).cmp(&(a.3.id.as_str(), a.0, a.1)));
        found.truncate(options.limit.unwrap_or(usize::MAX));
        found.into_iter().map(|(thread_id, ns_name, ns, entry)| ns.tuple(thread_id, ns_name, entry)).collect()
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig, CheckpointError> {
        self.put_with_appends(config, checkpoint, metadata, new_versions, ChannelAppends::new()).await
    }

    fn stores_appends(&self) -> bool {
        true
    }

    async fn put_with_appends(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        appends: ChannelAppends,
    ) -> Result<CheckpointConfig, CheckpointError> {
        check_id(&config.thread_id, &checkpoint.id)?;
        let address = CheckpointConfig {
            thread_id: config.thread_id.clone(),
            checkpoint_ns: config.checkpoint_ns.clone(),
            checkpoint_id: Some(checkpoint.id.clone()),
        };
        let parent_id = config.checkpoint_id.clone();
        let mut threads = self.write()?;
        with_namespace(&mut threads, &config.thread_id, &config.checkpoint_ns, |ns| {
            ns.put(&config.thread_id, checkpoint, metadata, new_versions, appends, parent_id)
        })?;
        Ok(address)
    }

    /// Saves the whole batch under one lock; on an error, the ops before the failing one are stored.
    async fn put_batch(&self, ops: Vec<SaveOp>) -> Result<(), CheckpointError> {
        let mut threads = self.write()?;
        let mut ops = ops.into_iter().peekable();
        while let Some(first) = ops.next() {
            // Consecutive ops of one thread and namespace (a step's writes and its checkpoint) share one
            // lookup.
            let config = Arc::clone(first.config());
            let (thread_id, ns) = (config.thread_id.as_str(), config.checkpoint_ns.as_str());
            with_namespace(&mut threads, thread_id, ns, |namespace| {
                namespace.apply(thread_id, first)?;
                while let Some(op) = ops.next_if(|op| same_namespace(op, thread_id, ns)) {
                    namespace.apply(thread_id, op)?;
                }
                Ok::<(), CheckpointError>(())
            })?;
        }
        Ok(())
    }

    /// Everything is in memory: every op is saved at once.
    fn save_now(&self, op: SaveOp) -> Result<Option<SaveOp>, CheckpointError> {
        let config = Arc::clone(op.config());
        let mut threads = self.write()?;
        with_namespace(&mut threads, &config.thread_id, &config.checkpoint_ns, |namespace| {
            namespace.apply(&config.thread_id, op)
        })?;
        Ok(None)
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<(), CheckpointError> {
        let id = writes_target(&config.thread_id, config.checkpoint_id.as_deref(), task_id)?;
        let mut threads = self.write()?;
        with_namespace(&mut threads, &config.thread_id, &config.checkpoint_ns, |ns| {
            let writes =
                writes.into_iter().map(|(channel, value)| (ChannelName::from(channel), value)).collect();
            ns.put_writes(id, writes, Arc::from(task_id), Arc::from(task_path));
        });
        Ok(())
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<(), CheckpointError> {
        self.write()?.remove(thread_id);
        Ok(())
    }

    async fn copy_thread(&self, src: &str, dst: &str) -> Result<(), CheckpointError> {
        let mut threads = self.write()?;
        let Some(source) = threads.get(src).filter(|t| t.has_checkpoints()).cloned() else {
            return Err(CheckpointError::Invalid(format!(
                "cannot copy thread '{src}': it has no checkpoints"
            )));
        };
        if threads.get(dst).is_some_and(Thread::has_checkpoints) {
            return Err(CheckpointError::Invalid(format!(
                "cannot copy thread '{src}' to thread '{dst}': '{dst}' already has checkpoints"
            )));
        }
        threads.insert(dst.to_owned(), source);
        Ok(())
    }

    async fn prune(&self, thread_id: &str, keep_latest: usize) -> Result<(), CheckpointError> {
        let mut threads = self.write()?;
        let Some(thread) = threads.get_mut(thread_id) else {
            return Ok(());
        };
        thread.root.prune(keep_latest);
        for ns in thread.subgraphs.values_mut() {
            ns.prune(keep_latest);
        }
        thread.subgraphs.retain(|_, ns| !ns.checkpoints.is_empty());
        if !thread.has_checkpoints() {
            threads.remove(thread_id);
        }
        Ok(())
    }

    async fn list_ids(&self, config: &CheckpointConfig) -> Result<Vec<String>, CheckpointError> {
        let threads = self.read()?;
        let ns = threads.get(&config.thread_id).and_then(|t| t.namespace(&config.checkpoint_ns));
        Ok(ns.map(|ns| ns.checkpoints.iter().rev().map(|e| e.id.clone()).collect()).unwrap_or_default())
    }
}
