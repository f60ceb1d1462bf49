//! Delta storage of append-only channels.
//!
//! A message list grows by a few messages a step; storing the whole list at every version makes a
//! thread's storage grow with the square of its length. The SQL savers store a list that only grew as
//! the appended elements and the version they extend (`base_version`); reading any checkpoint rebuilds
//! the exact value by following those links.
//!
//! Most such values come from the engine already as deltas: the savers' `stores_appends` is true, so a
//! `#[state(append)]` or `add_messages` channel that a step only appended to arrives as its new items
//! (`put_with_appends`), and a step costs O(new items) in time and memory. A value that arrives whole
//! (a state without the derive, `update_state`, a replaced list) is compared with the last list the saver
//! stored for that channel (same thread and namespace): when it starts with it, only the new elements are
//! stored, and every [`DeltaStorage::snapshot_every`] deltas in a row the whole list is stored again. A
//! value that is not a list, or a list whose head changed (`add_messages` replacing or removing a
//! message), is stored whole. The last stored list of each recently written channel is kept in memory
//! (bounded by [`DeltaStorage::cache_entries`] and [`DeltaStorage::cache_bytes`]); after a restart the
//! first version written is whole.
//!
//! The engine's appends are chained the same way: the planner counts, per channel, the appends stored in
//! a row since its last whole value, and once a count reaches `snapshot_every` the saver reads the
//! parent checkpoint's list and stores the new version whole ([`DeltaPlanner::long_chains`],
//! [`compact_long_chains`]), so that reading a version follows a bounded number of links however long the
//! thread (without it, a thread's 1,000th turn followed 2,000 links on every load). A count is this
//! process's own: after a restart, or for a thread other processes also write, a chain may grow longer
//! before it is cut, never wrong.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use weft_graph::checkpoint::{
    ChannelAppends, ChannelName, ChannelValues, ChannelVersion, ChannelVersions, Checkpoint,
    CheckpointConfig, CheckpointTuple, SaveOp,
};

use super::codec;
use crate::savers::{AppendChains, LastList, LastLists, ListKey};

/// How a SQL saver stores channels whose value only grows at the end (message lists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeltaStorage {
    /// Store appended elements only (default `true`); `false` stores every version whole.
    pub enabled: bool,
    /// A whole value after this many deltas in a row (default 64; `0` or `1` mean every version whole).
    pub snapshot_every: usize,
    /// How many channels' last values are remembered (default 1,024; each holds a reference to the
    /// list the engine saved).
    pub cache_entries: usize,
    /// How large those values may be together, measured as about their JSON size (default 64 MiB; the
    /// memory they take is a small multiple of it). Past either bound the least recently stored are
    /// forgotten; a list larger than this is not kept, so each version of its channel is stored whole.
    pub cache_bytes: usize,
}

impl Default for DeltaStorage {
    fn default() -> Self {
        Self { enabled: true, snapshot_every: 64, cache_entries: 1024, cache_bytes: 64 << 20 }
    }
}

impl DeltaStorage {
    /// Every version stored whole.
    pub fn off() -> Self {
        Self { enabled: false, ..Self::default() }
    }
}

/// One channel value to store.
#[derive(Debug, Clone)]
pub(crate) struct BlobRecord {
    pub(crate) channel: ChannelName,
    pub(crate) version: ChannelVersion,
    /// With `Some`, `blob` holds the elements appended to the value at this version.
    pub(crate) base_version: Option<ChannelVersion>,
    /// `None`: the channel was empty.
    pub(crate) blob: Option<Vec<u8>>,
    /// For a delta: the whole value, stored instead when the base is gone.
    pub(crate) whole: Option<Arc<Vec<Value>>>,
}

impl BlobRecord {
    /// The items the engine says were appended to the value at `base` (no whole value to fall back on:
    /// a missing base is an error).
    pub(crate) fn appended(
        channel: ChannelName,
        version: ChannelVersion,
        base: ChannelVersion,
        items: &[Value],
    ) -> Self {
        let blob = Some(codec::encode_append(items));
        Self { channel, version, base_version: Some(base), blob, whole: None }
    }

    /// The error for an engine delta whose base is not stored.
    pub(crate) fn missing_base(&self, thread_id: &str) -> weft_graph::checkpoint::CheckpointError {
        weft_graph::checkpoint::CheckpointError::Invalid(format!(
            "append to channel '{}' of thread '{thread_id}': its base version '{}' is not stored",
            self.channel,
            self.base_version.as_deref().unwrap_or_default()
        ))
    }

    /// The whole value of a delta record, as a blob.
    pub(crate) fn whole_blob(&self) -> Option<Vec<u8>> {
        self.whole.as_ref().map(|items| codec::encode_full_list(items))
    }
}

type Key = ListKey;

/// What a `put` stores, and how the memory of last values changes once it is committed.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub(crate) records: Vec<BlobRecord>,
    updates: Vec<(Key, LastList)>,
    /// The channels stored as the engine's appends, with their thread and namespace (set only then).
    appended: Vec<ChannelName>,
    thread: String,
    ns: String,
}

/// Chooses between whole values and deltas, remembering the last stored list per channel.
#[derive(Debug)]
pub(crate) struct DeltaPlanner {
    config: DeltaStorage,
    cache: Mutex<Cache>,
}

#[derive(Debug)]
struct Cache {
    lists: LastLists,
    /// The engine's appends stored in a row per channel (see [`DeltaPlanner::long_chains`]).
    chains: AppendChains,
}

impl DeltaPlanner {
    /// A planner with `config`.
    pub(crate) fn new(config: DeltaStorage) -> Self {
        let lists = LastLists::new(config.cache_entries, config.cache_bytes);
        Self { config, cache: Mutex::new(Cache { lists, chains: AppendChains::default() }) }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.config.enabled
            && self.config.snapshot_every > 1
            && self.config.cache_entries > 0
            && self.config.cache_bytes > 0
    }

    /// The records for the channels in `new_versions` (values taken from `values`).
    pub(crate) fn plan(
        &self,
        thread_id: &str,
        checkpoint_ns: &str,
        mut values: ChannelValues,
        new_versions: ChannelVersions,
    ) -> Plan {
        let mut plan = Plan::default();
        for (channel, version) in new_versions {
            let value = values.remove(&*channel);
            let Some(Value::Array(items)) = value else {
                let blob = value.as_ref().map(codec::encode_full);
                plan.records.push(BlobRecord { channel, version, base_version: None, blob, whole: None });
                continue;
            };
            if !self.enabled() {
                let blob = Some(codec::encode_full(&Value::Array(items)));
                plan.records.push(BlobRecord { channel, version, base_version: None, blob, whole: None });
                continue;
            }
            let key = (thread_id.to_owned(), checkpoint_ns.to_owned(), channel.clone());
            let last = self.cache.lock().ok().and_then(|c| c.lists.get(&key).cloned());
            let items = Arc::new(items);
            let extends = last.filter(|last| {
                last.chain + 1 < self.config.snapshot_every
                    && last.version != version
                    && items.len() >= last.items.len()
                    && items[..last.items.len()] == last.items[..]
            });
            let (record, chain, bytes) = match extends {
                Some(last) => {
                    let new_items = &items[last.items.len()..];
                    let blob = codec::encode_append(new_items);
                    // The size the bound counts: the bytes just encoded, not another walk of the list.
                    let bytes = last.bytes + blob.len();
                    let record = BlobRecord {
                        channel,
                        version: version.clone(),
                        base_version: Some(last.version),
                        blob: Some(blob),
                        whole: Some(Arc::clone(&items)),
                    };
                    (record, last.chain + 1, bytes)
                }
                None => {
                    let blob = codec::encode_full_list(&items);
                    let bytes = blob.len();
                    let record = BlobRecord {
                        channel,
                        version: version.clone(),
                        base_version: None,
                        blob: Some(blob),
                        whole: None,
                    };
                    (record, 0, bytes)
                }
            };
            plan.records.push(record);
            plan.updates.push((key, LastList::new(version, items, chain, bytes)));
        }
        plan
    }

    /// Like [`plan`](Self::plan), with the engine's `appends`: their channels are stored as the items
    /// appended to their base version (each is also in `new_versions`, without a value).
    pub(crate) fn plan_with_appends(
        &self,
        thread_id: &str,
        checkpoint_ns: &str,
        values: ChannelValues,
        mut new_versions: ChannelVersions,
        appends: ChannelAppends,
    ) -> Plan {
        let mut appended = Vec::with_capacity(appends.len());
        for (channel, delta) in appends {
            if let Some(version) = new_versions.remove(&channel) {
                appended.push(BlobRecord::appended(channel, version, delta.base_version, &delta.items));
            }
        }
        let mut plan = self.plan(thread_id, checkpoint_ns, values, new_versions);
        if !appended.is_empty() {
            plan.appended.extend(appended.iter().map(|r| r.channel.clone()));
            (plan.thread, plan.ns) = (thread_id.to_owned(), checkpoint_ns.to_owned());
        }
        plan.records.extend(appended);
        plan
    }

    /// Remembers the lists of a committed plan; `stored_whole` names delta records that were stored whole
    /// instead (their base was gone).
    pub(crate) fn commit(&self, plan: Plan, stored_whole: &[ChannelName]) {
        if plan.updates.is_empty() && plan.appended.is_empty() {
            return;
        }
        let Ok(mut cache) = self.cache.lock() else { return };
        count_appends(&mut cache, &plan, stored_whole, self.config.cache_entries);
        for (key, mut list) in plan.updates {
            if stored_whole.contains(&key.2) {
                list.chain = 0;
            }
            cache.lists.insert(key, list);
        }
    }

    /// The outcome of a batch written as planned for `threads`: `Ok(true)` when it was stored as planned;
    /// otherwise the planner remembered lists that are not stored as it assumed, so those threads start
    /// over.
    pub(crate) fn settle(
        &self,
        threads: &BTreeSet<String>,
        result: Result<bool, weft_graph::checkpoint::CheckpointError>,
    ) -> Result<(), weft_graph::checkpoint::CheckpointError> {
        if !matches!(result, Ok(true)) {
            for thread in threads {
                self.forget_thread(thread);
            }
        }
        result.map(drop)
    }

    /// Forgets the lists of a thread (it was pruned, deleted or replaced).
    pub(crate) fn forget_thread(&self, thread_id: &str) {
        if let Ok(mut cache) = self.cache.lock() {
            cache.lists.forget_thread(thread_id);
            cache.chains.forget_thread(thread_id);
        }
    }

    /// Forgets the last lists and the counts of appends of `lists`.
    pub(crate) fn forget_lists(&self, lists: &[Compacted]) {
        if lists.is_empty() {
            return;
        }
        if let Ok(mut cache) = self.cache.lock() {
            for key in lists {
                cache.lists.remove(key);
                cache.chains.forget(&key.0, &key.1, &key.2);
            }
        }
    }

    /// The channels of `appends` whose chain of the engine's appends, as this process counted it, is
    /// long: their next version is to be stored whole.
    pub(crate) fn long_chains(
        &self,
        thread_id: &str,
        ns: &str,
        appends: &ChannelAppends,
    ) -> Vec<ChannelName> {
        if appends.is_empty() || !self.enabled() {
            return Vec::new();
        }
        let Ok(cache) = self.cache.lock() else { return Vec::new() };
        let every = self.config.snapshot_every;
        appends.keys().filter(|c| cache.chains.is_long(thread_id, ns, c, every)).cloned().collect()
    }

    /// Whether a save of `appends` onto the checkpoint at `config` has a long chain: its parent is to be
    /// read for [`compact_long_chain`].
    pub(crate) fn reads_parent(&self, config: &CheckpointConfig, appends: &ChannelAppends) -> bool {
        config.checkpoint_id.is_some()
            && !self.long_chains(&config.thread_id, &config.checkpoint_ns, appends).is_empty()
    }

    /// The parents to read before planning `ops`: for each save with a long chain of appends
    /// ([`long_chains`](Self::long_chains)) whose parent is not saved earlier in `ops` (not stored yet),
    /// its position and the parent checkpoint's address.
    pub(crate) fn parents_to_read(&self, ops: &[SaveOp]) -> Vec<(usize, CheckpointConfig)> {
        let mut wanted = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            let SaveOp::Put { config, appends, .. } = op else { continue };
            let Some(parent) = config.checkpoint_id.as_deref() else { continue };
            let in_batch = ops[..i].iter().any(|earlier| match earlier {
                SaveOp::Put { config: c, checkpoint, .. } => {
                    checkpoint.id == parent && c.thread_id == config.thread_id
                }
                SaveOp::Writes { .. } => false,
            });
            if !in_batch && self.reads_parent(config, appends) {
                wanted.push((i, CheckpointConfig::clone(config)));
            }
        }
        wanted
    }
}

/// Counts a committed plan's appends per channel (one more link each; an append stored whole because
/// its base was gone starts over), and starts the count of the lists it planned itself over (stored
/// whole or as a delta on a list it kept: their chain is their cache entry's).
fn count_appends(cache: &mut Cache, plan: &Plan, stored_whole: &[ChannelName], capacity: usize) {
    for (key, _) in &plan.updates {
        cache.chains.forget(&key.0, &key.1, &key.2);
    }
    let (whole, appended): (Vec<&ChannelName>, Vec<&ChannelName>) =
        plan.appended.iter().partition(|c| stored_whole.contains(c));
    let (appended, whole) = (appended.into_iter().map(|c| &**c), whole.into_iter().map(|c| &**c));
    cache.chains.stored(&plan.thread, &plan.ns, appended, whole, capacity);
}

/// A channel of a thread and namespace whose list a save stores whole after a long chain of appends.
pub(crate) type Compacted = Key;

/// Stores the engine's appends to channels with a long chain ([`DeltaPlanner::long_chains`]) whole, in
/// the saves of `ops` at the positions of `parents` (read as [`DeltaPlanner::parents_to_read`] asks, a
/// parent only once every `snapshot_every` appends to a channel): the parent's list followed by the new
/// items. A save whose parent was not found (`None`: not stored yet, or gone), or does not list the
/// version an append extends, keeps its appends. Returns the lists made whole, which the planner has
/// forgotten so that each is stored whole (not as a delta on an older list it kept); the caller forgets
/// them again once they are planned ([`DeltaPlanner::forget_lists`]), so that a list the engine appends
/// to is not kept in memory.
pub(crate) fn compact_long_chains(
    delta: &DeltaPlanner,
    ops: &mut [SaveOp],
    parents: Vec<(usize, Option<CheckpointTuple>)>,
) -> Vec<Compacted> {
    let mut compacted = Vec::new();
    for (i, parent) in parents {
        if let (Some(SaveOp::Put { config, checkpoint, appends, .. }), Some(parent)) =
            (ops.get_mut(i), parent)
        {
            whole_from_parent(delta, config, checkpoint, appends, parent, &mut compacted);
        }
    }
    delta.forget_lists(&compacted);
    compacted
}

/// [`compact_long_chains`] for one save (`config` names its parent, read when
/// [`DeltaPlanner::reads_parent`] says so).
pub(crate) fn compact_long_chain(
    delta: &DeltaPlanner,
    config: &CheckpointConfig,
    checkpoint: &mut Checkpoint,
    appends: &mut ChannelAppends,
    parent: Option<CheckpointTuple>,
) -> Vec<Compacted> {
    let mut compacted = Vec::new();
    if let Some(parent) = parent {
        whole_from_parent(delta, config, checkpoint, appends, parent, &mut compacted);
    }
    delta.forget_lists(&compacted);
    compacted
}

/// Moves the appends to the long chains of one save into its values, whole, from `parent`.
fn whole_from_parent(
    delta: &DeltaPlanner,
    config: &CheckpointConfig,
    checkpoint: &mut Checkpoint,
    appends: &mut ChannelAppends,
    mut parent: CheckpointTuple,
    compacted: &mut Vec<Compacted>,
) {
    let long = delta.long_chains(&config.thread_id, &config.checkpoint_ns, appends);
    let whole = crate::savers::whole_from_parent(&mut parent, long, appends, &mut checkpoint.channel_values);
    compacted.extend(whole.into_iter().map(|c| (config.thread_id.clone(), config.checkpoint_ns.clone(), c)));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn versions(pairs: &[(&str, &str)]) -> ChannelVersions {
        pairs.iter().map(|(c, v)| (ChannelName::from(*c), ChannelVersion::from(*v))).collect()
    }

    fn values(pairs: &[(&str, Value)]) -> ChannelValues {
        pairs.iter().map(|(c, v)| (ChannelName::from(*c), v.clone())).collect()
    }

    fn put(p: &DeltaPlanner, version: &str, value: Value) -> BlobRecord {
        let mut plan = p.plan("t", "", values(&[("m", value)]), versions(&[("m", version)]));
        let record = plan.records.remove(0);
        p.commit(plan, &[]);
        record
    }

    fn append(p: &DeltaPlanner, base: &str, version: &str) {
        let appends = ChannelAppends::from([(
            ChannelName::from("m"),
            weft_graph::checkpoint::AppendDelta { base_version: base.into(), items: vec![json!(version)] },
        )]);
        let plan = p.plan_with_appends("t", "", ChannelValues::new(), versions(&[("m", version)]), appends);
        assert_eq!(plan.records[0].base_version.as_deref(), Some(base));
        p.commit(plan, &[]);
    }

    #[test]
    fn the_engines_appends_are_counted_until_a_whole_list_starts_over() {
        let p = DeltaPlanner::new(DeltaStorage { snapshot_every: 3, ..DeltaStorage::default() });
        let one = ChannelAppends::from([(
            ChannelName::from("m"),
            weft_graph::checkpoint::AppendDelta { base_version: "9".into(), items: vec![] },
        )]);
        put(&p, "1", json!([1]));
        append(&p, "1", "2");
        assert!(p.long_chains("t", "", &one).is_empty(), "one append in a row");
        append(&p, "2", "3");
        assert_eq!(
            p.long_chains("t", "", &one),
            vec![ChannelName::from("m")],
            "two in a row: the next is whole"
        );
        assert!(p.long_chains("u", "", &one).is_empty(), "counted per thread");
        put(&p, "4", json!([9]));
        assert!(p.long_chains("t", "", &one).is_empty(), "a whole list starts the count over");
        append(&p, "4", "5");
        append(&p, "5", "6");
        p.forget_thread("t");
        assert!(p.long_chains("t", "", &one).is_empty(), "a forgotten thread starts over");
    }

    #[test]
    fn a_parent_saved_earlier_in_the_batch_is_not_read() {
        let p = DeltaPlanner::new(DeltaStorage { snapshot_every: 2, ..DeltaStorage::default() });
        put(&p, "1", json!([1]));
        append(&p, "1", "2");
        let save = |parent: &str, id: &str| SaveOp::Put {
            config: std::sync::Arc::new(CheckpointConfig::thread("t").at(parent)),
            checkpoint: Checkpoint {
                v: weft_graph::checkpoint::CHECKPOINT_VERSION,
                id: id.into(),
                ts: String::new(),
                channel_values: ChannelValues::new(),
                channel_versions: versions(&[("m", id)]),
                versions_seen: Default::default(),
                updated_channels: Vec::new(),
            },
            metadata: weft_graph::checkpoint::CheckpointMetadata {
                source: weft_graph::checkpoint::CheckpointSource::Loop,
                step: 0,
                parents: Default::default(),
                extra: Default::default(),
            },
            new_versions: versions(&[("m", id)]),
            appends: ChannelAppends::from([(
                ChannelName::from("m"),
                weft_graph::checkpoint::AppendDelta { base_version: parent.into(), items: vec![] },
            )]),
            expected_head: weft_graph::checkpoint::ExpectedHead::Any,
        };
        let wanted = p.parents_to_read(&[save("c2", "c3"), save("c3", "c4")]);
        assert_eq!(wanted.len(), 1, "c3 is saved by the batch itself");
        assert_eq!((wanted[0].0, wanted[0].1.checkpoint_id.as_deref()), (0, Some("c2")));
    }

    #[test]
    fn growing_lists_become_deltas_with_periodic_snapshots() {
        let p = DeltaPlanner::new(DeltaStorage { snapshot_every: 3, ..DeltaStorage::default() });
        assert_eq!(put(&p, "1", json!([1])).base_version, None);
        let second = put(&p, "2", json!([1, 2]));
        assert_eq!(second.base_version.as_deref(), Some("1"));
        assert_eq!(
            codec::decode(second.blob.as_deref().unwrap()),
            Ok(codec::Decoded::Append(vec![json!(2)]))
        );
        assert_eq!(put(&p, "3", json!([1, 2, 3])).base_version.as_deref(), Some("2"));
        assert_eq!(put(&p, "4", json!([1, 2, 3, 4])).base_version, None, "snapshot after 2 deltas");
    }

    #[test]
    fn changed_heads_and_non_lists_are_stored_whole() {
        let p = DeltaPlanner::new(DeltaStorage::default());
        put(&p, "1", json!([1, 2]));
        assert_eq!(put(&p, "2", json!([9, 2, 3])).base_version, None);
        assert_eq!(put(&p, "3", json!({"not": "a list"})).base_version, None);
    }

    #[test]
    fn forgetting_a_thread_restarts_with_a_whole_value() {
        let p = DeltaPlanner::new(DeltaStorage::default());
        put(&p, "1", json!([1]));
        p.forget_thread("t");
        assert_eq!(put(&p, "2", json!([1, 2])).base_version, None);
    }

    #[test]
    fn the_cache_stays_within_its_bound() {
        let p = DeltaPlanner::new(DeltaStorage { cache_entries: 2, ..DeltaStorage::default() });
        for thread in ["a", "b", "c"] {
            let plan = p.plan(thread, "", values(&[("m", json!([1]))]), versions(&[("m", "1")]));
            p.commit(plan, &[]);
        }
        assert_eq!(p.cache.lock().unwrap().lists.held().0, 2);
    }

    #[test]
    fn the_cache_stays_within_its_size_and_a_forgotten_list_is_stored_whole_next() {
        let p = DeltaPlanner::new(DeltaStorage { cache_bytes: 100, ..DeltaStorage::default() });
        let long = Value::Array(vec![json!("0123456789"); 5]);
        for thread in ["a", "b", "c"] {
            let plan = p.plan(thread, "", values(&[("m", long.clone())]), versions(&[("m", "1")]));
            p.commit(plan, &[]);
        }
        let (lists, bytes) = p.cache.lock().unwrap().lists.held();
        assert!(lists == 1 && bytes <= 100, "{lists} lists, {bytes} bytes");
        let grown = Value::Array(vec![json!("0123456789"); 6]);
        for (thread, extends) in [("c", true), ("a", false)] {
            let plan = p.plan(thread, "", values(&[("m", grown.clone())]), versions(&[("m", "2")]));
            assert_eq!(plan.records[0].base_version.is_some(), extends, "thread {thread}");
            p.commit(plan, &[]);
        }
    }
}
