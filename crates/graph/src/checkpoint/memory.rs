//! `InMemorySaver`: a checkpointer that keeps everything in process memory.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointError, CheckpointMetadata, CheckpointTuple,
    Checkpointer, ListOptions, PendingWrite, special,
};

/// A checkpointer that keeps everything in memory, laid out as LangGraph's in-memory saver: checkpoints
/// per (thread, namespace, id) without their values, each channel value once per (thread, namespace,
/// channel, version), and writes per (thread, namespace, checkpoint) keyed by (task id, index).
///
/// For tests, development and short-lived processes: nothing survives the process. Many tasks may share
/// one saver; every call takes a lock briefly and never holds it across an await.
#[derive(Debug, Default)]
pub struct InMemorySaver {
    threads: RwLock<HashMap<String, Thread>>,
}

#[derive(Debug, Default, Clone)]
struct Thread {
    namespaces: HashMap<String, Namespace>,
}

#[derive(Debug, Default, Clone)]
struct Namespace {
    /// By id; ids are time-sortable, so the last is the latest.
    checkpoints: BTreeMap<String, Saved>,
    /// Channel, then version, to value (`None`: the channel was empty at that version).
    values: HashMap<String, HashMap<String, Option<Value>>>,
    /// Checkpoint id, then (task id, index), to write.
    writes: HashMap<String, BTreeMap<(String, i64), SavedWrite>>,
}

#[derive(Debug, Clone)]
struct Saved {
    /// With empty `channel_values`.
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    /// `metadata` as JSON, for filters.
    metadata_json: Map<String, Value>,
    parent_id: Option<String>,
}

#[derive(Debug, Clone)]
struct SavedWrite {
    channel: String,
    value: Value,
    task_path: String,
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
            threads
                .values()
                .flat_map(|t| t.namespaces.values())
                .flat_map(|ns| ns.values.values())
                .map(HashMap::len)
                .sum()
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
            match self.values.get(channel).and_then(|versions| versions.get(version)) {
                Some(Some(value)) => {
                    checkpoint.channel_values.insert(channel.clone(), value.clone());
                }
                Some(None) => {}
                None => {
                    return Err(CheckpointError::Corrupt {
                        thread_id: thread_id.to_owned(),
                        checkpoint_id: id.to_owned(),
                        message: format!("no value stored for channel '{channel}' at version '{version}'"),
                    });
                }
            }
        }
        let mut writes: Vec<(&(String, i64), &SavedWrite)> =
            self.writes.get(id).map(|w| w.iter().collect()).unwrap_or_default();
        writes.sort_by(|(ka, a), (kb, b)| (&a.task_path, ka).cmp(&(&b.task_path, kb)));
        let pending_writes = writes
            .into_iter()
            .map(|((task_id, _), w)| PendingWrite {
                task_id: task_id.clone(),
                channel: w.channel.clone(),
                value: w.value.clone(),
            })
            .collect();
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
        self.values.retain(|channel, versions| {
            versions.retain(|version, _| needed.contains(&(channel.as_str(), version.as_str())));
            !versions.is_empty()
        });
    }
}

fn metadata_matches(metadata: &Map<String, Value>, filter: &Map<String, Value>) -> bool {
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
                if wanted && before && metadata_matches(&saved.metadata_json, &options.filter) {
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
        mut checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig, CheckpointError> {
        if checkpoint.id.is_empty() {
            return Err(CheckpointError::Invalid(format!(
                "checkpoint for thread '{}' has an empty id",
                config.thread_id
            )));
        }
        let metadata_json = match serde_json::to_value(&metadata) {
            Ok(Value::Object(map)) => map,
            Ok(_) | Err(_) => {
                return Err(CheckpointError::Invalid(format!(
                    "metadata of checkpoint '{}' in thread '{}' is not a JSON object",
                    checkpoint.id, config.thread_id
                )));
            }
        };
        let mut values = std::mem::take(&mut checkpoint.channel_values);
        let id = checkpoint.id.clone();
        let mut threads = self.write()?;
        let ns = threads
            .entry(config.thread_id.clone())
            .or_default()
            .namespaces
            .entry(config.checkpoint_ns.clone())
            .or_default();
        for (channel, version) in new_versions {
            let value = values.remove(&channel);
            ns.values.entry(channel).or_default().insert(version, value);
        }
        let parent_id = config.checkpoint_id.clone();
        ns.checkpoints.insert(id.clone(), Saved { checkpoint, metadata, metadata_json, parent_id });
        Ok(CheckpointConfig {
            thread_id: config.thread_id.clone(),
            checkpoint_ns: config.checkpoint_ns.clone(),
            checkpoint_id: Some(id),
        })
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
        let mut threads = self.write()?;
        let saved = threads
            .entry(config.thread_id.clone())
            .or_default()
            .namespaces
            .entry(config.checkpoint_ns.clone())
            .or_default()
            .writes
            .entry(checkpoint_id.clone())
            .or_default();
        for (position, (channel, value)) in writes.into_iter().enumerate() {
            let fixed = special::fixed_index(&channel);
            let idx = fixed.unwrap_or_else(|| i64::try_from(position).unwrap_or(i64::MAX));
            let write = SavedWrite { channel, value, task_path: task_path.to_owned() };
            let key = (task_id.to_owned(), idx);
            if fixed.is_some() {
                saved.insert(key, write);
            } else {
                saved.entry(key).or_insert(write);
            }
        }
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
