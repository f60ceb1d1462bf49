//! `InMemorySaver`: a checkpointer that keeps everything in process memory.

mod values;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::{
    ChannelAppends, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointError, CheckpointMetadata,
    CheckpointTuple, Checkpointer, ListOptions, PendingWrite, special,
};
use values::{Packed, Values};

/// A checkpointer that keeps everything in memory, laid out as LangGraph's in-memory saver: checkpoints
/// per (thread, namespace, id) without their values, each channel value once per (thread, namespace,
/// channel, version), and writes per (thread, namespace, checkpoint) keyed by (task id, index).
///
/// It stores append deltas ([`stores_appends`](Checkpointer::stores_appends) is true): a list channel that
/// a step only appended to is kept as the new items and a link to its previous version, so a growing
/// message list costs O(new messages) per checkpoint in time and memory; `get_tuple` and `list` rebuild
/// the whole list. A replaced or shortened list is stored whole.
///
/// For tests, development and short-lived processes: nothing survives the process. Many tasks may share
/// one saver; every call takes a lock briefly and never holds it across an await.
#[derive(Debug, Default)]
pub struct InMemorySaver {
    threads: RwLock<HashMap<String, Thread>>,
}

#[derive(Debug, Default, Clone)]
struct Thread {
    namespaces: BTreeMap<String, Namespace>,
}

#[derive(Debug, Default, Clone)]
struct Namespace {
    /// By id; ids are time-sortable, so the last is the latest.
    checkpoints: BTreeMap<String, Saved>,
    /// Channel values by (channel, version).
    values: Values,
    /// Checkpoint id, then (task id, index), to write.
    writes: BTreeMap<String, BTreeMap<(Arc<str>, i64), SavedWrite>>,
}

#[derive(Debug, Clone)]
struct Saved {
    /// With empty `channel_values`.
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    parent_id: Option<String>,
}

#[derive(Debug, Clone)]
struct SavedWrite {
    channel: String,
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
            threads.values().flat_map(|t| t.namespaces.values()).map(|ns| ns.values.len()).sum()
        })
    }

    fn read(&self) -> Result<RwLockReadGuard<'_, HashMap<String, Thread>>, CheckpointError> {
        self.threads.read().map_err(|_| CheckpointError::Backend("in-memory saver lock poisoned".into()))
    }

    fn write(&self) -> Result<RwLockWriteGuard<'_, HashMap<String, Thread>>, CheckpointError> {
        self.threads.write().map_err(|_| CheckpointError::Backend("in-memory saver lock poisoned".into()))
    }
}

impl Thread {
    fn has_checkpoints(&self) -> bool {
        self.namespaces.values().any(|ns| !ns.checkpoints.is_empty())
    }
}

/// Runs `f` on namespace `ns` of thread `thread_id`, made if absent (its keys are allocated only then).
fn with_namespace<R>(
    threads: &mut HashMap<String, Thread>,
    thread_id: &str,
    ns: &str,
    f: impl FnOnce(&mut Namespace) -> R,
) -> R {
    if let Some(namespace) = threads.get_mut(thread_id).and_then(|t| t.namespaces.get_mut(ns)) {
        return f(namespace);
    }
    f(threads.entry(thread_id.to_owned()).or_default().namespaces.entry(ns.to_owned()).or_default())
}

impl Namespace {
    /// The whole tuple of checkpoint `id`: values rebuilt from the versions it lists, writes sorted.
    fn tuple(
        &self,
        thread_id: &str,
        ns: &str,
        id: &str,
        saved: &Saved,
    ) -> Result<CheckpointTuple, CheckpointError> {
        let mut checkpoint = saved.checkpoint.clone();
        for (channel, version) in &checkpoint.channel_versions {
            match self.values.get(channel, version) {
                Ok(Some(value)) => {
                    checkpoint.channel_values.insert(channel.clone(), value);
                }
                Ok(None) => {}
                Err(message) => {
                    return Err(CheckpointError::Corrupt {
                        thread_id: thread_id.to_owned(),
                        checkpoint_id: id.to_owned(),
                        message,
                    });
                }
            }
        }
        let mut writes: Vec<(&(Arc<str>, i64), &SavedWrite)> =
            self.writes.get(id).map(|w| w.iter().collect()).unwrap_or_default();
        writes.sort_by(|(ka, a), (kb, b)| (&a.task_path, ka).cmp(&(&b.task_path, kb)));
        let corrupt = |message: String| CheckpointError::Corrupt {
            thread_id: thread_id.to_owned(),
            checkpoint_id: id.to_owned(),
            message,
        };
        let pending_writes = writes
            .into_iter()
            .map(|((task_id, _), w)| {
                Ok(PendingWrite {
                    task_id: task_id.to_string(),
                    channel: w.channel.clone(),
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

    /// Keeps the newest `keep` checkpoints, their writes and the values they reference.
    fn prune(&mut self, keep: usize) {
        let drop = self.checkpoints.len().saturating_sub(keep);
        let old: Vec<String> = self.checkpoints.keys().take(drop).cloned().collect();
        for id in &old {
            self.checkpoints.remove(id);
        }
        let checkpoints = &self.checkpoints;
        self.writes.retain(|id, _| checkpoints.contains_key(id));
        let needed: HashSet<(&str, &str)> = checkpoints
            .values()
            .flat_map(|s| s.checkpoint.channel_versions.iter().map(|(c, v)| (c.as_str(), v.as_str())))
            .collect();
        self.values.retain(&needed);
    }

    /// Saves a checkpoint whose values are in its `channel_values` (whole) or in `appends`.
    fn put(
        &mut self,
        thread_id: &str,
        mut checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        appends: ChannelAppends,
        parent_id: Option<String>,
    ) -> Result<(), CheckpointError> {
        let mut values = std::mem::take(&mut checkpoint.channel_values);
        let invalid = |message: String| CheckpointError::Invalid(format!("thread '{thread_id}': {message}"));
        // Check every append before storing anything.
        let mut prepared = Vec::with_capacity(appends.len());
        for (channel, delta) in appends {
            let Some(version) = new_versions.get(&channel) else {
                return Err(invalid(format!("append to channel '{channel}', which has no new version")));
            };
            let stored = self.values.prepare_append(&channel, version, delta).map_err(invalid)?;
            prepared.push((channel, version.clone(), stored));
        }
        for (channel, version) in new_versions {
            if !prepared.iter().any(|(c, ..)| *c == channel) {
                let value = values.remove(&channel);
                self.values.put_whole(channel, version, value);
            }
        }
        for (channel, version, stored) in prepared {
            self.values.insert(channel, version, stored);
        }
        let id = checkpoint.id.clone();
        self.checkpoints.insert(id, Saved { checkpoint, metadata, parent_id });
        Ok(())
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
        let Some(ns) = threads.get(&config.thread_id).and_then(|t| t.namespaces.get(&config.checkpoint_ns))
        else {
            return Ok(None);
        };
        let found = match &config.checkpoint_id {
            Some(id) => ns.checkpoints.get_key_value(id),
            None => ns.checkpoints.last_key_value(),
        };
        found.map(|(id, saved)| ns.tuple(&config.thread_id, &config.checkpoint_ns, id, saved)).transpose()
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
                .and_then(|t| t.namespaces.get(&c.checkpoint_ns))
                .map(|ns| (c.thread_id.as_str(), c.checkpoint_ns.as_str(), ns))
                .into_iter()
                .collect(),
            None => threads
                .iter()
                .flat_map(|(t, thread)| {
                    thread.namespaces.iter().map(move |(n, ns)| (t.as_str(), n.as_str(), ns))
                })
                .collect(),
        };
        let only = config.and_then(|c| c.checkpoint_id.as_deref());
        let mut found: Vec<(&str, &str, &Namespace, &str, &Saved)> = Vec::new();
        for (thread_id, ns_name, ns) in sources {
            for (id, saved) in &ns.checkpoints {
                let wanted = only.is_none_or(|w| w == id);
                let before = options.before.as_deref().is_none_or(|b| id.as_str() < b);
                if wanted && before && metadata_matches(&saved.metadata, &options.filter) {
                    found.push((thread_id, ns_name, ns, id, saved));
                }
            }
        }
        found.sort_by(|a, b| (b.3, b.0, b.1).cmp(&(a.3, a.0, a.1)));
        found.truncate(options.limit.unwrap_or(usize::MAX));
        found
            .into_iter()
            .map(|(thread_id, ns_name, ns, id, saved)| ns.tuple(thread_id, ns_name, id, saved))
            .collect()
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
        if checkpoint.id.is_empty() {
            return Err(CheckpointError::Invalid(format!(
                "checkpoint for thread '{}' has an empty id",
                config.thread_id
            )));
        }
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

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<(), CheckpointError> {
        let Some(checkpoint_id) = &config.checkpoint_id else {
            return Err(CheckpointError::Invalid(format!(
                "writes of task '{task_id}' in thread '{}' name no checkpoint id",
                config.thread_id
            )));
        };
        let (task_id, task_path): (Arc<str>, Arc<str>) = (Arc::from(task_id), Arc::from(task_path));
        let mut threads = self.write()?;
        with_namespace(&mut threads, &config.thread_id, &config.checkpoint_ns, |ns| {
            let saved = match ns.writes.get_mut(checkpoint_id) {
                Some(saved) => saved,
                None => ns.writes.entry(checkpoint_id.clone()).or_default(),
            };
            for (position, (channel, value)) in writes.into_iter().enumerate() {
                let fixed = special::fixed_index(&channel);
                let idx = fixed.unwrap_or_else(|| i64::try_from(position).unwrap_or(i64::MAX));
                let write =
                    SavedWrite { channel, value: Packed::pack(value), task_path: Arc::clone(&task_path) };
                let key = (Arc::clone(&task_id), idx);
                if fixed.is_some() {
                    saved.insert(key, write);
                } else {
                    saved.entry(key).or_insert(write);
                }
            }
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
        for ns in thread.namespaces.values_mut() {
            ns.prune(keep_latest);
        }
        thread.namespaces.retain(|_, ns| !ns.checkpoints.is_empty());
        if thread.namespaces.is_empty() {
            threads.remove(thread_id);
        }
        Ok(())
    }

    async fn list_ids(&self, config: &CheckpointConfig) -> Result<Vec<String>, CheckpointError> {
        let threads = self.read()?;
        let ns = threads.get(&config.thread_id).and_then(|t| t.namespaces.get(&config.checkpoint_ns));
        Ok(ns.map(|ns| ns.checkpoints.keys().rev().cloned().collect()).unwrap_or_default())
    }
}
