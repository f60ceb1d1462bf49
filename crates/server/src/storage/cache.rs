//! [`Cache`]: the records kept in memory past their use, by id, the least recently used let go first
//! once there are more than its capacity.

use std::collections::HashMap;

/// Records by id, at most `capacity` of them (unbounded where memory is all there is).
#[derive(Debug)]
pub(crate) struct Cache<V> {
    entries: HashMap<String, (V, u64)>,
    /// Bumped at every use: an entry's stamp says when it was last used.
    clock: u64,
    capacity: usize,
}

impl<V> Cache<V> {
    /// A cache of at most `capacity` records (`usize::MAX`: never lets one go).
    pub(crate) fn new(capacity: usize) -> Self {
        Self { entries: HashMap::new(), clock: 0, capacity: capacity.max(1) }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The record, marked used.
    pub(crate) fn get(&mut self, id: &str) -> Option<&V> {
        let now = self.tick();
        let entry = self.entries.get_mut(id)?;
        entry.1 = now;
        Some(&entry.0)
    }

    /// The record, as it is, without marking it used.
    pub(crate) fn peek(&self, id: &str) -> Option<&V> {
        self.entries.get(id).map(|(value, _)| value)
    }

    /// Whether the record is kept.
    pub(crate) fn contains(&self, id: &str) -> bool {
        self.entries.contains_key(id)
    }

    /// Keeps `value` as `id`'s record; over capacity, the least recently used eighth goes.
    pub(crate) fn insert(&mut self, id: String, value: V) {
        let now = self.tick();
        self.entries.insert(id, (value, now));
        if self.entries.len() > self.capacity {
            self.evict();
        }
    }

    /// Replaces `id`'s record only where it is kept.
    pub(crate) fn update(&mut self, id: &str, value: V) {
        if let Some(entry) = self.entries.get_mut(id) {
            entry.0 = value;
        }
    }

    /// Lets `id`'s record go.
    pub(crate) fn remove(&mut self, id: &str) -> Option<V> {
        self.entries.remove(id).map(|(value, _)| value)
    }

    /// Every record kept, in no order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.values().map(|(value, _)| value)
    }

    /// How many records are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Lets the least recently used records go, down to seven eighths of the capacity (one pass per
    /// eighth of the capacity's inserts: amortised constant per insert).
    fn evict(&mut self) {
        let keep = self.capacity - self.capacity / 8;
        let excess = self.entries.len().saturating_sub(keep);
        if excess == 0 {
            return;
        }
        let mut stamps: Vec<u64> = self.entries.values().map(|(_, stamp)| *stamp).collect();
        let (_, cutoff, _) = stamps.select_nth_unstable(excess - 1);
        let cutoff = *cutoff;
        self.entries.retain(|_, (_, stamp)| *stamp > cutoff);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_go_first_and_the_cache_stays_bounded() {
        let mut cache = Cache::new(8);
        for i in 0..8 {
            cache.insert(format!("k{i}"), i);
        }
        // k0 used again: k1 is now the oldest.
        assert_eq!(cache.get("k0"), Some(&0));
        cache.insert("k8".into(), 8);
        assert_eq!(cache.len(), 7, "down to seven eighths");
        assert!(cache.contains("k0"), "recently used");
        assert!(!cache.contains("k1"), "least recently used");
        assert!(!cache.contains("k2"));
        for i in 9..10_000 {
            cache.insert(format!("k{i}"), i);
            assert!(cache.len() <= 8);
        }
        assert_eq!(cache.peek("k9999"), Some(&9999));
    }

    #[test]
    fn update_touches_only_kept_records_and_a_complete_cache_never_forgets() {
        let mut cache = Cache::new(2);
        cache.update("a", 1);
        assert!(!cache.contains("a"));
        cache.insert("a".into(), 1);
        cache.update("a", 2);
        assert_eq!(cache.remove("a"), Some(2));
        let mut all = Cache::new(usize::MAX);
        for i in 0..1_000 {
            all.insert(i.to_string(), i);
        }
        assert_eq!(all.len(), 1_000);
        assert_eq!(all.values().count(), 1_000);
    }
}
