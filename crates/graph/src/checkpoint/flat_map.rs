//! `FlatMap`: the small sorted map checkpoints are made of.

use std::borrow::Borrow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A map kept as one vector of `(key, value)` pairs sorted by key: the maps of a checkpoint (channel
/// versions, the versions each node has seen, channel values) hold a handful of entries each and are
/// built once per superstep, in key order. One allocation of exactly their size, where a `BTreeMap`
/// allocates a node of eleven slots, and iteration is a slice walk.
///
/// The API follows `BTreeMap`'s (iteration in key order, `get` by a borrowed key, `insert` returning the
/// value replaced, JSON as an object), so code written against one reads the same against the other.
/// Lookups are binary searches; an insert in key order appends, any other shifts the entries after it
/// (a checkpoint map is small; collecting an unsorted iterator sorts once).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct FlatMap<K, V> {
    entries: Vec<(K, V)>,
}

impl<K, V> Default for FlatMap<K, V> {
    fn default() -> Self {
        Self { entries: Vec::new() }
    }
}

impl<K, V> FlatMap<K, V> {
    /// An empty map (allocates nothing).
    pub const fn new() -> Self {
        Self { entries: Vec::new() }
    }

    /// An empty map with room for `capacity` entries.
    pub fn with_capacity(capacity: usize) -> Self {
        Self { entries: Vec::with_capacity(capacity) }
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// The entries in key order, borrowed.
    pub fn iter(&self) -> Iter<'_, K, V> {
        Iter { inner: self.entries.iter() }
    }

    /// The entries in key order, values mutable.
    pub fn iter_mut(&mut self) -> IterMut<'_, K, V> {
        IterMut { inner: self.entries.iter_mut() }
    }

    /// The keys in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &K> + ExactSizeIterator {
        self.entries.iter().map(|(k, _)| k)
    }

    /// The values in key order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.entries.iter().map(|(_, v)| v)
    }

    /// The values in key order, mutable.
    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut V> + ExactSizeIterator {
        self.entries.iter_mut().map(|(_, v)| v)
    }

    /// The values in key order, taken.
    pub fn into_values(self) -> impl DoubleEndedIterator<Item = V> + ExactSizeIterator {
        self.entries.into_iter().map(|(_, v)| v)
    }

    /// The first entry (smallest key).
    pub fn first_key_value(&self) -> Option<(&K, &V)> {
        self.entries.first().map(|(k, v)| (k, v))
    }

    /// The last entry (largest key).
    pub fn last_key_value(&self) -> Option<(&K, &V)> {
        self.entries.last().map(|(k, v)| (k, v))
    }

    /// Keeps the entries for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        self.entries.retain_mut(|(k, v)| keep(k, v));
    }

    /// The entries as a slice, in key order.
    pub fn as_slice(&self) -> &[(K, V)] {
        &self.entries
    }
}

impl<K: Ord, V> FlatMap<K, V> {
    fn find<Q>(&self, key: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.entries.binary_search_by(|(k, _)| k.borrow().cmp(key))
    }

    /// The value of `key`.
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.find(key).ok().map(|i| &self.entries[i].1)
    }

    /// The key and value of `key`.
    pub fn get_key_value<Q>(&self, key: &Q) -> Option<(&K, &V)>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.find(key).ok().map(|i| {
            let (k, v) = &self.entries[i];
            (k, v)
        })
    }

    /// The value of `key`, mutable.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.find(key).ok().map(|i| &mut self.entries[i].1)
    }

    /// Whether `key` has a value.
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.find(key).is_ok()
    }

    /// Sets the value of `key`; returns the value it replaces (the key already stored is kept).
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        // Maps are mostly built in key order: appending needs one comparison.
        match self.entries.last() {
            None => {
                self.entries.push((key, value));
                return None;
            }
            Some((last, _)) if *last < key => {
                self.entries.push((key, value));
                return None;
            }
            Some(_) => {}
        }
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    /// The value of `key`, inserted by `make` when absent.
    pub fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.find(&key) {
            Ok(i) => i,
            Err(i) => {
                self.entries.insert(i, (key, make()));
                i
            }
        };
        &mut self.entries[i].1
    }

    /// Removes `key`; returns its value.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.find(key).ok().map(|i| self.entries.remove(i).1)
    }

    /// Removes `key`; returns the key stored and its value.
    pub fn remove_entry<Q>(&mut self, key: &Q) -> Option<(K, V)>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.find(key).ok().map(|i| self.entries.remove(i))
    }

    /// Sorts `entries` by key; of equal keys the last one stays (as inserting them one by one would).
    fn from_vec(mut entries: Vec<(K, V)>) -> Self {
        if !entries.is_sorted_by(|a, b| a.0 < b.0) {
            // In place: reversed, a stable sort puts the last of equal keys first among them, and
            // `dedup_by` keeps the first of each run.
            entries.reverse();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            entries.dedup_by(|later, kept| later.0 == kept.0);
        }
        Self { entries }
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for FlatMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.entries.iter().map(|(k, v)| (k, v))).finish()
    }
}

impl<K: Ord, V> FromIterator<(K, V)> for FlatMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Self::from_vec(iter.into_iter().collect())
    }
}

impl<K: Ord, V> Extend<(K, V)> for FlatMap<K, V> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl<K: Ord, V, const N: usize> From<[(K, V); N]> for FlatMap<K, V> {
    fn from(entries: [(K, V); N]) -> Self {
        Self::from_vec(Vec::from(entries))
    }
}

impl<K: Ord, V> From<std::collections::BTreeMap<K, V>> for FlatMap<K, V> {
    fn from(map: std::collections::BTreeMap<K, V>) -> Self {
        // Already in key order, without duplicates.
        Self { entries: map.into_iter().collect() }
    }
}

impl<K: Ord, V, Q> std::ops::Index<&Q> for FlatMap<K, V>
where
    K: Borrow<Q>,
    Q: Ord + ?Sized,
{
    type Output = V;

    /// The value of `key`.
    ///
    /// # Panics
    /// When `key` is absent, as `BTreeMap`'s index does; [`get`](FlatMap::get) does not.
    #[allow(clippy::panic)]
    fn index(&self, key: &Q) -> &V {
        match self.get(key) {
            Some(value) => value,
            None => panic!("key not in the map"),
        }
    }
}

/// Borrowed entries of a [`FlatMap`], in key order.
#[derive(Debug, Clone)]
pub struct Iter<'a, K, V> {
    inner: std::slice::Iter<'a, (K, V)>,
}

impl<'a, K, V> Iterator for Iter<'a, K, V> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|(k, v)| (k, v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<K, V> DoubleEndedIterator for Iter<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.inner.next_back().map(|(k, v)| (k, v))
    }
}

impl<K, V> ExactSizeIterator for Iter<'_, K, V> {}

/// Entries of a [`FlatMap`] with mutable values, in key order.
#[derive(Debug)]
pub struct IterMut<'a, K, V> {
    inner: std::slice::IterMut<'a, (K, V)>,
}

impl<'a, K, V> Iterator for IterMut<'a, K, V> {
    type Item = (&'a K, &'a mut V);

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|(k, v)| (&*k, v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<K, V> DoubleEndedIterator for IterMut<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.inner.next_back().map(|(k, v)| (&*k, v))
    }
}

impl<K, V> ExactSizeIterator for IterMut<'_, K, V> {}

impl<'a, K, V> IntoIterator for &'a FlatMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = Iter<'a, K, V>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a, K, V> IntoIterator for &'a mut FlatMap<K, V> {
    type Item = (&'a K, &'a mut V);
    type IntoIter = IterMut<'a, K, V>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

impl<K, V> IntoIterator for FlatMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl<K: Serialize, V: Serialize> Serialize for FlatMap<K, V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.entries.len()))?;
        for (k, v) in &self.entries {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de, K: Deserialize<'de> + Ord, V: Deserialize<'de>> Deserialize<'de> for FlatMap<K, V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor<K, V>(PhantomData<(K, V)>);

        impl<'de, K: Deserialize<'de> + Ord, V: Deserialize<'de>> Visitor<'de> for MapVisitor<K, V> {
            type Value = FlatMap<K, V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                // A hostile size hint must not reserve memory: cap it.
                let mut entries = Vec::with_capacity(access.size_hint().unwrap_or(0).min(1024));
                while let Some(entry) = access.next_entry()? {
                    entries.push(entry);
                }
                Ok(FlatMap::from_vec(entries))
            }
        }

        deserializer.deserialize_map(MapVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn inserts_in_any_order_iterate_sorted() {
        let mut map = FlatMap::new();
        assert_eq!(map.insert("b", 2), None);
        assert_eq!(map.insert("d", 4), None);
        assert_eq!(map.insert("a", 1), None);
        assert_eq!(map.insert("c", 3), None);
        assert_eq!(map.insert("b", 20), Some(2));
        assert_eq!(
            map.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>(),
            [("a", 1), ("b", 20), ("c", 3), ("d", 4)]
        );
        assert_eq!(map.get("c"), Some(&3));
        assert_eq!(map.get("e"), None);
        assert_eq!(map.remove("a"), Some(1));
        assert_eq!(map.remove("a"), None);
        assert_eq!(map.len(), 3);
        *map.get_or_insert_with("e", || 0) += 5;
        *map.get_or_insert_with("e", || 100) += 1;
        assert_eq!(map.get("e"), Some(&6));
        assert_eq!(map.first_key_value(), Some((&"b", &20)));
        assert_eq!(map.last_key_value(), Some((&"e", &6)));
    }

    #[test]
    fn collecting_keeps_the_last_of_equal_keys() {
        let map: FlatMap<&str, i32> = [("x", 1), ("a", 2), ("x", 3), ("a", 4), ("m", 5)].into();
        assert_eq!(map.into_iter().collect::<Vec<_>>(), [("a", 4), ("m", 5), ("x", 3)]);
    }

    #[test]
    fn json_is_an_object_and_duplicate_keys_keep_the_last() {
        let map: FlatMap<std::sync::Arc<str>, i32> = [("z".into(), 1), ("a".into(), 2)].into();
        assert_eq!(serde_json::to_string(&map).unwrap(), r#"{"a":2,"z":1}"#);
        let back: FlatMap<std::sync::Arc<str>, i32> = serde_json::from_str(r#"{"z":1,"a":2,"z":9}"#).unwrap();
        assert_eq!(back.get("z"), Some(&9));
        assert_eq!(back.len(), 2);
        assert!(serde_json::from_str::<FlatMap<String, i32>>("[1, 2]").is_err());
        assert!(serde_json::from_str::<FlatMap<String, i32>>(r#"{"a": "x"}"#).is_err());
    }

    proptest! {
        #[test]
        fn behaves_as_a_btreemap(ops in proptest::collection::vec((0u8..3, 0u8..16, any::<i32>()), 0..64)) {
            let mut flat = FlatMap::new();
            let mut tree = BTreeMap::new();
            for (op, key, value) in ops {
                match op {
                    0 | 1 => prop_assert_eq!(flat.insert(key, value), tree.insert(key, value)),
                    _ => prop_assert_eq!(flat.remove(&key), tree.remove(&key)),
                }
                prop_assert_eq!(flat.len(), tree.len());
                prop_assert!(flat.iter().eq(tree.iter()));
            }
            for key in 0u8..16 {
                prop_assert_eq!(flat.get(&key), tree.get(&key));
            }
            let collected: FlatMap<u8, i32> = tree.clone().into_iter().rev().collect();
            prop_assert!(collected.iter().eq(tree.iter()));
        }
    }
}
