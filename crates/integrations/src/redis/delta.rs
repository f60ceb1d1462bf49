//! Delta storage of growing lists: a message list that gains a few messages a step is stored as the
//! appended elements plus the version they extend, with a whole copy every `snapshot_every` versions.
//!
//! Nothing declares a channel append-only: when a channel's new value is a list that starts with the
//! whole list this saver last stored for that channel (same thread and namespace), only the new elements
//! are stored; anything else (not a list, a changed head after a removal or replacement, a version this
//! process has not seen) is stored whole. The last list of recently written channels is kept in memory
//! (at most `cache_entries` lists and `cache_bytes` of them); after a restart the first version
//! written is whole. The base of each
//! appended value is recorded in the namespace's `bases` hash, and the put script checks that it still
//! exists (another process may have pruned it), storing the value whole when it does not.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::savers::{AppendChains, LastList, LastLists, list_bytes};

/// How growing lists are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeltaConfig {
    /// A whole value after this many appended ones in a row (`0` or `1`: every version whole).
    pub(crate) snapshot_every: usize,
    /// How many channels' last lists are remembered.
    pub(crate) cache_entries: usize,
    /// How large they may be together (about their JSON size).
    pub(crate) cache_bytes: usize,
}

impl DeltaConfig {
    fn enabled(self) -> bool {
        self.snapshot_every > 1 && self.cache_entries > 0 && self.cache_bytes > 0
    }
}

/// How one list value is to be stored.
#[derive(Debug, Clone)]
pub(crate) struct ListPlan {
    pub(crate) items: Arc<Vec<Value>>,
    /// `Some((base version, appended from index))` for an appended value.
    pub(crate) base: Option<(String, usize)>,
    chain: usize,
    /// The list's size ([`list_bytes`]).
    bytes: usize,
}

/// Remembers the last stored list per (thread, namespace, channel).
#[derive(Debug)]
pub(crate) struct DeltaPlanner {
    config: DeltaConfig,
    cache: Mutex<Cache>,
}

#[derive(Debug)]
struct Cache {
    lists: LastLists,
    /// The engine's appends stored in a row per channel (see [`DeltaPlanner::is_long`]).
    chains: AppendChains,
}

impl DeltaPlanner {
    pub(crate) fn new(config: DeltaConfig) -> Self {
        let lists = LastLists::new(config.cache_entries, config.cache_bytes);
        Self { config, cache: Mutex::new(Cache { lists, chains: AppendChains::default() }) }
    }

    /// How to store `items`, the list of `channel` at `version`.
    pub(crate) fn plan(
        &self,
        thread_id: &str,
        ns: &str,
        channel: &str,
        version: &str,
        items: Vec<Value>,
    ) -> ListPlan {
        let items = Arc::new(items);
        if !self.config.enabled() {
            return ListPlan { items, base: None, chain: 0, bytes: 0 };
        }
        let key = (thread_id.to_owned(), ns.to_owned(), Arc::from(channel));
        let last = self.cache.lock().ok().and_then(|cache| cache.lists.get(&key).cloned());
        match last {
            Some(last)
                if last.chain + 1 < self.config.snapshot_every
                    && *last.version != *version
                    && items.len() >= last.items.len()
                    && items[..last.items.len()] == last.items[..] =>
            {
                let from = last.items.len();
                let bytes = last.bytes + list_bytes(&items[from..]);
                ListPlan { items, base: Some((last.version.to_string(), from)), chain: last.chain + 1, bytes }
            }
            _ => {
                let bytes = list_bytes(&items);
                ListPlan { items, base: None, chain: 0, bytes }
            }
        }
    }

    /// Stores a plan as a whole value instead (its base is gone).
    pub(crate) fn whole(plan: &mut ListPlan) {
        plan.base = None;
        plan.chain = 0;
    }

    /// Remembers the lists of a stored checkpoint.
    pub(crate) fn commit<'a>(
        &self,
        thread_id: &str,
        ns: &str,
        stored: impl IntoIterator<Item = (&'a str, &'a str, &'a ListPlan)>,
    ) {
        if !self.config.enabled() {
            return;
        }
        let Ok(mut cache) = self.cache.lock() else { return };
        for (channel, version, plan) in stored {
            let list = LastList::new(Arc::from(version), plan.items.clone(), plan.chain, plan.bytes);
            cache.lists.insert((thread_id.to_owned(), ns.to_owned(), Arc::from(channel)), list);
        }
    }

    /// Whether growing lists are stored as appended elements.
    pub(crate) fn enabled(&self) -> bool {
        self.config.enabled()
    }

    /// Whether the next engine append to `channel` must be stored whole (its chain of appends, as this
    /// process counted it, is long), so that a read follows at most `snapshot_every` links.
    pub(crate) fn is_long(&self, thread_id: &str, ns: &str, channel: &str) -> bool {
        let every = self.config.snapshot_every;
        self.cache.lock().is_ok_and(|cache| cache.chains.is_long(thread_id, ns, channel, every))
    }

    /// Records a stored checkpoint's engine appends (one more link each) and the channels it stored
    /// otherwise (their chain of engine appends starts over; the planner's last list of an appended
    /// channel is older than the value now stored, so it is forgotten).
    pub(crate) fn commit_appends<'a>(
        &self,
        thread_id: &str,
        ns: &str,
        appended: impl IntoIterator<Item = &'a str>,
        whole: impl IntoIterator<Item = &'a str>,
    ) {
        let Ok(mut cache) = self.cache.lock() else { return };
        let appended: Vec<&str> = appended.into_iter().collect();
        for channel in &appended {
            cache.lists.remove(&(thread_id.to_owned(), ns.to_owned(), Arc::from(*channel)));
        }
        cache.chains.stored(thread_id, ns, appended, whole, self.config.cache_entries);
    }

    /// Forgets a thread's lists (it was pruned, deleted or replaced).
    pub(crate) fn forget_thread(&self, thread_id: &str) {
        if let Ok(mut cache) = self.cache.lock() {
            cache.lists.forget_thread(thread_id);
            cache.chains.forget_thread(thread_id);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn planner(snapshot_every: usize, cache_entries: usize) -> DeltaPlanner {
        DeltaPlanner::new(DeltaConfig { snapshot_every, cache_entries, cache_bytes: 64 << 20 })
    }

    fn put(p: &DeltaPlanner, thread: &str, version: &str, items: Vec<Value>) -> Option<(String, usize)> {
        let plan = p.plan(thread, "", "m", version, items);
        p.commit(thread, "", [("m", version, &plan)]);
        plan.base
    }

    #[test]
    fn growing_lists_are_appended_with_a_whole_copy_every_n_versions() {
        let p = planner(3, 10);
        assert_eq!(put(&p, "t", "1", vec![json!(1)]), None);
        assert_eq!(put(&p, "t", "2", vec![json!(1), json!(2)]), Some(("1".into(), 1)));
        assert_eq!(put(&p, "t", "3", vec![json!(1), json!(2), json!(3)]), Some(("2".into(), 2)));
        assert_eq!(put(&p, "t", "4", vec![json!(1), json!(2), json!(3), json!(4)]), None);
    }

    #[test]
    fn changed_heads_other_threads_and_forgotten_threads_are_whole() {
        let p = planner(64, 10);
        put(&p, "t", "1", vec![json!(1), json!(2)]);
        assert_eq!(put(&p, "t", "2", vec![json!(9), json!(2), json!(3)]), None);
        assert_eq!(put(&p, "u", "3", vec![json!(9), json!(2), json!(3), json!(4)]), None);
        p.forget_thread("t");
        assert_eq!(put(&p, "t", "4", vec![json!(9), json!(2), json!(3), json!(4)]), None);
    }

    #[test]
    fn the_memory_keeps_the_most_recent_channels_only() {
        let p = planner(64, 2);
        for thread in ["a", "b", "c"] {
            put(&p, thread, "1", vec![json!(1)]);
        }
        assert_eq!(p.cache.lock().unwrap().lists.held().0, 2);
        assert_eq!(put(&p, "a", "2", vec![json!(1), json!(2)]), None, "the oldest was forgotten");
        assert!(put(&p, "c", "2", vec![json!(1), json!(2)]).is_some());
    }

    #[test]
    fn disabled_planners_store_everything_whole() {
        let p = planner(1, 10);
        put(&p, "t", "1", vec![json!(1)]);
        assert_eq!(put(&p, "t", "2", vec![json!(1), json!(2)]), None);
    }
}
