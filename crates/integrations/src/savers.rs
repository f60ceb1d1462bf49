//! What the SQLite, PostgreSQL and Redis savers share beyond their storage: the checks and errors of the
//! checkpointer's contract, and saving a batch op by op.

#[cfg(any(feature = "sqlite", feature = "redis"))]
use async_trait::async_trait;
#[cfg(any(feature = "sqlite", feature = "redis"))]
use weft_graph::checkpoint::{
    ChannelAppends, ChannelVersions, Checkpoint, CheckpointMetadata, Checkpointer, ExpectedHead, SaveOp,
    owned_writes,
};
use weft_graph::checkpoint::{CheckpointConfig, CheckpointError};

/// The checkpoint id that writes of `task_id` belong to; an error when `config` names none.
pub(crate) fn writes_checkpoint<'a>(
    config: &'a CheckpointConfig,
    task_id: &str,
) -> Result<&'a str, CheckpointError> {
    config.checkpoint_id.as_deref().ok_or_else(|| {
        CheckpointError::Invalid(format!(
            "writes of task '{task_id}' in thread '{}' name no checkpoint id",
            config.thread_id
        ))
    })
}

/// Why `copy_thread` from `src` to `dst` is refused: `src` has no checkpoints (`has_source` false) or
/// `dst` has some.
pub(crate) fn copy_refused(src: &str, dst: &str, has_source: bool) -> CheckpointError {
    if has_source {
        CheckpointError::Invalid(format!(
            "cannot copy thread '{src}' to thread '{dst}': '{dst}' already has checkpoints"
        ))
    } else {
        CheckpointError::Invalid(format!("cannot copy thread '{src}': it has no checkpoints"))
    }
}

/// The address of checkpoint `id` saved under `config` (its thread and namespace).
pub(crate) fn saved_config(config: &CheckpointConfig, id: String) -> CheckpointConfig {
    CheckpointConfig {
        thread_id: config.thread_id.clone(),
        checkpoint_ns: config.checkpoint_ns.clone(),
        checkpoint_id: Some(id),
    }
}

#[cfg(any(feature = "sqlite", feature = "redis"))]
/// A saver that stores one checkpoint at a time, checking its expected head as it does.
#[async_trait]
pub(crate) trait PutOne: Checkpointer {
    /// Stores a checkpoint, refusing it unless the head of its thread and namespace is as `expected`.
    async fn put_one(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        appends: ChannelAppends,
        expected: &ExpectedHead,
    ) -> Result<CheckpointConfig, CheckpointError>;
}

#[cfg(any(feature = "sqlite", feature = "redis"))]
/// Saves `ops` in order, each on its own (a put with its expected head checked); stops at the first
/// error.
pub(crate) async fn put_each<S: PutOne + ?Sized>(saver: &S, ops: Vec<SaveOp>) -> Result<(), CheckpointError> {
    for op in ops {
        match op {
            SaveOp::Put { config, checkpoint, metadata, new_versions, appends, expected_head } => {
                saver.put_one(&config, checkpoint, metadata, new_versions, appends, &expected_head).await?;
            }
            SaveOp::Writes { config, writes, task_id, task_path } => {
                saver.put_writes(&config, owned_writes(writes), &task_id, &task_path).await?;
            }
        }
    }
    Ok(())
}

#[cfg(any(feature = "sqlite", feature = "redis"))]
/// The future of a checkpointer's `put` as `async_trait` boxes it.
pub(crate) type PutFuture<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<CheckpointConfig, CheckpointError>> + Send + 'a>,
>;

#[cfg(any(feature = "sqlite", feature = "redis"))]
/// The [`Checkpointer`] methods of a [`PutOne`] saver that store one checkpoint (`put`,
/// `put_with_appends`, with any head) and `stores_appends` (whether the saver's `$delta` planner is on),
/// for use inside its `#[async_trait] impl Checkpointer`. Written as `async_trait` writes an `async fn`
/// (the attribute does not see inside a macro's expansion).
macro_rules! put_one_methods {
    ($delta:ident) => {
        fn put<'life0, 'life1, 'async_trait>(
            &'life0 self,
            config: &'life1 weft_graph::checkpoint::CheckpointConfig,
            checkpoint: weft_graph::checkpoint::Checkpoint,
            metadata: weft_graph::checkpoint::CheckpointMetadata,
            new_versions: weft_graph::checkpoint::ChannelVersions,
        ) -> $crate::savers::PutFuture<'async_trait>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            Self: 'async_trait,
        {
            let appends = weft_graph::checkpoint::ChannelAppends::new();
            self.put_with_appends(config, checkpoint, metadata, new_versions, appends)
        }

        /// Stores the engine's appends as the new items on their base version (O(new items) a step),
        /// unless delta storage is off.
        fn stores_appends(&self) -> bool {
            self.$delta.enabled()
        }

        fn put_with_appends<'life0, 'life1, 'async_trait>(
            &'life0 self,
            config: &'life1 weft_graph::checkpoint::CheckpointConfig,
            checkpoint: weft_graph::checkpoint::Checkpoint,
            metadata: weft_graph::checkpoint::CheckpointMetadata,
            new_versions: weft_graph::checkpoint::ChannelVersions,
            appends: weft_graph::checkpoint::ChannelAppends,
        ) -> $crate::savers::PutFuture<'async_trait>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            Self: 'async_trait,
        {
            Box::pin(async move {
                let any = weft_graph::checkpoint::ExpectedHead::Any;
                $crate::savers::PutOne::put_one(
                    self,
                    config,
                    checkpoint,
                    metadata,
                    new_versions,
                    appends,
                    &any,
                )
                .await
            })
        }
    };
}
#[cfg(any(feature = "sqlite", feature = "redis"))]
pub(crate) use put_one_methods;

/// Per channel (thread, namespace, channel), the engine's appends a saver stored in a row since the
/// channel's last whole value, as this process saw them: a saver stores the next version whole once a
/// count reaches its `snapshot_every` ([`AppendChains::is_long`]), so that a read follows a bounded
/// number of links. A count lost (a restart, the bound below, another process writing the thread) only
/// makes a chain longer, never a value wrong.
#[derive(Debug, Default)]
pub(crate) struct AppendChains {
    counts: std::collections::HashMap<(String, String, String), usize>,
}

impl AppendChains {
    fn key(thread_id: &str, ns: &str, channel: &str) -> (String, String, String) {
        (thread_id.to_owned(), ns.to_owned(), channel.to_owned())
    }

    /// Whether the next append to `channel` is to be stored whole, with `snapshot_every` links at most.
    pub(crate) fn is_long(&self, thread_id: &str, ns: &str, channel: &str, snapshot_every: usize) -> bool {
        !self.counts.is_empty()
            && self.counts.get(&Self::key(thread_id, ns, channel)).is_some_and(|n| n + 1 >= snapshot_every)
    }

    /// Records a stored save's appends (one more link each) and the channels it stored otherwise (their
    /// count starts over); past `capacity` counts (four per remembered list), every count starts over.
    pub(crate) fn stored<'a>(
        &mut self,
        thread_id: &str,
        ns: &str,
        appended: impl IntoIterator<Item = &'a str>,
        otherwise: impl IntoIterator<Item = &'a str>,
        capacity: usize,
    ) {
        for channel in appended {
            *self.counts.entry(Self::key(thread_id, ns, channel)).or_insert(0) += 1;
        }
        // Most saves append nothing: no key is made for them.
        if !self.counts.is_empty() {
            for channel in otherwise {
                self.counts.remove(&Self::key(thread_id, ns, channel));
            }
        }
        if self.counts.len() > capacity.max(1) * 4 {
            self.counts.clear();
        }
    }

    /// Forgets the count of one channel.
    pub(crate) fn forget(&mut self, thread_id: &str, ns: &str, channel: &str) {
        if !self.counts.is_empty() {
            self.counts.remove(&Self::key(thread_id, ns, channel));
        }
    }

    /// Forgets a thread's counts.
    pub(crate) fn forget_thread(&mut self, thread_id: &str) {
        self.counts.retain(|(thread, _, _), _| thread != thread_id);
    }
}

/// Moves the engine's appends to `channels` into `values`, whole, from the `parent` checkpoint they
/// extend: the parent's list followed by the new items. An append whose base is not the version the
/// parent lists stays an append (its base is checked when stored). Returns the channels made whole.
pub(crate) fn whole_from_parent(
    parent: &mut weft_graph::checkpoint::CheckpointTuple,
    channels: Vec<weft_graph::checkpoint::ChannelName>,
    appends: &mut weft_graph::checkpoint::ChannelAppends,
    values: &mut weft_graph::checkpoint::ChannelValues,
) -> Vec<weft_graph::checkpoint::ChannelName> {
    let mut whole = Vec::new();
    for channel in channels {
        let Some(base) = appends.get(&channel).map(|d| &d.base_version) else { continue };
        let listed = parent.checkpoint.channel_versions.get(&channel) == Some(base);
        let mut items = match parent.checkpoint.channel_values.remove(&channel) {
            Some(serde_json::Value::Array(items)) if listed => items,
            // Listed without a value: the channel is empty, for a list the empty list.
            None if listed => Vec::new(),
            _ => continue,
        };
        if let Some(delta) = appends.remove(&channel) {
            items.extend(delta.items);
            values.insert(channel.clone(), serde_json::Value::Array(items));
            whole.push(channel);
        }
    }
    whole
}

/// A channel of a thread: (thread, namespace, channel).
pub(crate) type ListKey = (String, String, std::sync::Arc<str>);

/// The last list a saver stored for a channel, which the channel's next version is compared with.
#[derive(Debug, Clone)]
pub(crate) struct LastList {
    /// The version it was stored at.
    pub(crate) version: std::sync::Arc<str>,
    /// The whole list.
    pub(crate) items: std::sync::Arc<Vec<serde_json::Value>>,
    /// Deltas stored since the channel's last whole value.
    pub(crate) chain: usize,
    /// Its size as stored (about its JSON size: the encoded blobs, or [`list_bytes`]), what the memory
    /// bound counts.
    pub(crate) bytes: usize,
    used: u64,
}

impl LastList {
    /// The list `items` of a channel at `version`, `chain` deltas after its last whole value.
    pub(crate) fn new(
        version: std::sync::Arc<str>,
        items: std::sync::Arc<Vec<serde_json::Value>>,
        chain: usize,
        bytes: usize,
    ) -> Self {
        Self { version, items, chain, bytes, used: 0 }
    }
}

/// About the bytes `items` take encoded as JSON, without encoding them: the measure of [`LastLists`]'
/// bound (its lists' memory is a small multiple of it).
pub(crate) fn list_bytes(items: &[serde_json::Value]) -> usize {
    fn value(v: &serde_json::Value) -> usize {
        match v {
            serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => 8,
            serde_json::Value::String(s) => s.len() + 2,
            serde_json::Value::Array(items) => 2 + list_bytes(items),
            serde_json::Value::Object(map) => {
                2 + map.iter().map(|(k, v)| k.len() + 4 + value(v)).sum::<usize>()
            }
        }
    }
    items.iter().map(|v| value(v) + 1).sum()
}

/// The last list a saver stored per channel (a value that starts with it is stored as its new items),
/// bounded by count and by size: past either bound the least recently stored lists are forgotten first,
/// and a list larger than the whole size bound is not kept (its channel's versions are then stored
/// whole). Forgetting only costs storage: the next version of that channel is stored whole.
#[derive(Debug)]
pub(crate) struct LastLists {
    lists: std::collections::HashMap<ListKey, LastList>,
    clock: u64,
    bytes: usize,
    max_lists: usize,
    max_bytes: usize,
}

impl LastLists {
    /// An empty memory of at most `max_lists` lists and `max_bytes` of them.
    pub(crate) fn new(max_lists: usize, max_bytes: usize) -> Self {
        Self { lists: std::collections::HashMap::new(), clock: 0, bytes: 0, max_lists, max_bytes }
    }

    /// The last list of `key`.
    pub(crate) fn get(&self, key: &ListKey) -> Option<&LastList> {
        self.lists.get(key)
    }

    /// Remembers `list` as the last of `key`, then forgets the oldest lists past the bounds.
    pub(crate) fn insert(&mut self, key: ListKey, mut list: LastList) {
        self.remove(&key);
        if list.bytes > self.max_bytes || self.max_lists == 0 {
            return;
        }
        self.clock += 1;
        list.used = self.clock;
        self.bytes += list.bytes;
        self.lists.insert(key, list);
        // Past a bound, usually by one list: the oldest found by a scan, only its key copied.
        while self.lists.len() > self.max_lists || self.bytes > self.max_bytes {
            let Some(oldest) = self.lists.iter().min_by_key(|(_, l)| l.used).map(|(k, _)| k.clone()) else {
                break;
            };
            self.remove(&oldest);
        }
    }

    /// Forgets the last list of `key`.
    pub(crate) fn remove(&mut self, key: &ListKey) {
        if let Some(old) = self.lists.remove(key) {
            self.bytes -= old.bytes;
        }
    }

    /// Forgets a thread's lists.
    pub(crate) fn forget_thread(&mut self, thread_id: &str) {
        let before = self.lists.len();
        self.lists.retain(|(thread, _, _), _| thread != thread_id);
        if self.lists.len() != before {
            self.bytes = self.lists.values().map(|l| l.bytes).sum();
        }
    }

    /// How many lists and bytes are remembered.
    #[cfg(test)]
    pub(crate) fn held(&self) -> (usize, usize) {
        (self.lists.len(), self.bytes)
    }
}

#[cfg(test)]
mod last_lists_tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn key(thread: &str) -> ListKey {
        (thread.to_owned(), String::new(), Arc::from("m"))
    }

    fn list(text: &str) -> LastList {
        let items = vec![json!(text)];
        let bytes = list_bytes(&items);
        LastList::new(Arc::from("1"), Arc::new(items), 0, bytes)
    }

    #[test]
    fn sizes_are_about_the_json_encoding() {
        let items = vec![json!({"type": "human", "content": "hello there"}), json!([1, null]), json!("x")];
        let encoded: usize = items.iter().map(|v| v.to_string().len() + 1).sum();
        let estimate = list_bytes(&items);
        assert!(estimate >= encoded && estimate <= 2 * encoded, "{estimate} against {encoded}");
    }

    #[test]
    fn the_oldest_lists_go_first_past_either_bound() {
        let one = list("0123456789").bytes;
        let mut lists = LastLists::new(3, 10 * one);
        for thread in ["a", "b", "c", "d"] {
            lists.insert(key(thread), list("0123456789"));
        }
        assert_eq!(lists.held(), (3, 3 * one));
        assert!(lists.get(&key("a")).is_none() && lists.get(&key("d")).is_some());

        let mut lists = LastLists::new(100, 2 * one);
        for thread in ["a", "b", "c"] {
            lists.insert(key(thread), list("0123456789"));
        }
        assert_eq!(lists.held(), (2, 2 * one), "the size bound holds");
        assert!(lists.get(&key("a")).is_none());
        // Storing a channel again makes it the newest, and replaces its size.
        lists.insert(key("b"), list("0123456789"));
        lists.insert(key("e"), list("0123456789"));
        assert!(lists.get(&key("b")).is_some() && lists.get(&key("c")).is_none());
    }

    #[test]
    fn a_list_larger_than_the_bound_is_not_kept_and_forgetting_a_thread_frees_its_size() {
        let mut lists = LastLists::new(10, 20);
        lists.insert(key("a"), list("short"));
        lists.insert(key("a"), list("a list much longer than twenty bytes"));
        assert_eq!(lists.held(), (0, 0), "the older list of the channel is gone too");
        lists.insert(key("a"), list("short"));
        lists.insert(key("b"), list("tiny"));
        lists.forget_thread("a");
        assert_eq!(lists.held(), (1, list("tiny").bytes));
    }
}
