//! The channel values of one namespace: whole values, or the items appended to an earlier version.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use super::keys::Ver;
use crate::checkpoint::{AppendDelta, FlatMap};

/// A JSON value kept compactly: scalars as they are, lists and maps as their JSON text (a tree of
/// `Value`s takes several times the memory of its text; LangGraph's saver keeps serialized bytes too).
#[derive(Debug, Clone)]
pub(super) enum Packed {
    /// A scalar (or a value that could not be written as text, which a `Value` never is).
    Value(Value),
    /// A list or a map, as JSON text.
    Text(Box<str>),
}

impl Packed {
    pub(super) fn pack(value: Value) -> Self {
        match &value {
            Value::Array(_) | Value::Object(_) => match serde_json::to_string(&value) {
                Ok(text) => Packed::Text(text.into_boxed_str()),
                Err(_) => Packed::Value(value),
            },
            _ => Packed::Value(value),
        }
    }

    pub(super) fn unpack(&self) -> Result<Value, String> {
        match self {
            Packed::Value(value) => Ok(value.clone()),
            Packed::Text(text) => {
                serde_json::from_str(text).map_err(|e| format!("stored value unreadable: {e}"))
            }
        }
    }

    /// The items of a packed list, appended to `out`.
    fn unpack_items_into(&self, out: &mut Vec<Value>) -> Result<(), String> {
        match self.unpack()? {
            Value::Array(items) => {
                out.extend(items);
                Ok(())
            }
            _ => Err("stored list is not a list".to_owned()),
        }
    }
}

/// A channel's value at one version.
#[derive(Debug, Clone)]
pub(super) enum Stored {
    /// The channel was empty.
    Empty,
    /// The whole value; `list_len` is its length when it is a list.
    Whole { value: Packed, list_len: Option<usize> },
    /// The value at `base` (a list) followed by `items` (a packed list); `len` is the whole list's length.
    Appended { base: Ver, items: Packed, len: usize },
}

/// The stored versions of one channel. A run saves a channel's versions in increasing order, so they
/// are appended to a sorted vector (no search, no node to split); a version older than the newest one
/// stored (a run forked from an earlier checkpoint) goes to a tree, so forks stay O(log n) per save.
#[derive(Debug, Default, Clone)]
struct Versions {
    /// Versions saved in increasing order.
    ordered: FlatMap<Ver, Stored>,
    /// The others.
    others: BTreeMap<Ver, Stored>,
}

impl Versions {
    fn len(&self) -> usize {
        self.ordered.len() + self.others.len()
    }

    fn is_empty(&self) -> bool {
        self.ordered.is_empty() && self.others.is_empty()
    }

    fn get(&self, version: &Ver) -> Option<&Stored> {
        // The newest version is the one a thread's head reads: no search for it, however long the
        // history.
        if let Some((newest, stored)) = self.ordered.last_key_value() {
            if newest == version {
                return Some(stored);
            }
        }
        self.ordered.get(version).or_else(|| self.others.get(version))
    }

    fn insert(&mut self, version: Ver, stored: Stored) {
        let newest = self.ordered.last_key_value().is_none_or(|(last, _)| *last < version);
        if newest {
            self.ordered.insert(version, stored);
        } else if let Some(slot) = self.ordered.get_mut(&version) {
            *slot = stored;
        } else {
            self.others.insert(version, stored);
        }
    }

    fn retain(&mut self, mut keep: impl FnMut(&Ver) -> bool) {
        self.ordered.retain(|version, _| keep(version));
        self.others.retain(|version, _| keep(version));
    }
}

/// Channel (an interned name), then version, to value. An appended value's base is always an older
/// version of the same channel (a smaller counter), so chains end, at a whole list.
#[derive(Debug, Default, Clone)]
pub(super) struct Values {
    by_channel: Vec<Versions>,
}

impl Values {
    /// How many (channel, version) values are stored.
    pub(super) fn len(&self) -> usize {
        self.by_channel.iter().map(Versions::len).sum()
    }

    fn versions(&self, channel: u32) -> Option<&Versions> {
        self.by_channel.get(channel as usize).filter(|v| !v.is_empty())
    }

    /// Stores a whole value (`None`: the channel is empty).
    pub(super) fn put_whole(&mut self, channel: u32, version: Ver, value: Option<Value>) {
        let stored = match value {
            None => Stored::Empty,
            Some(value) => {
                let list_len = value.as_array().map(Vec::len);
                Stored::Whole { value: Packed::pack(value), list_len }
            }
        };
        self.insert(channel, version, stored);
    }

    /// Checks `delta` as the value of `channel` (named `name`) at `version` and returns it ready to
    /// [`insert`](Self::insert): the base must be stored, be a list (or empty) and have a smaller version
    /// counter than `version`; otherwise the reason.
    pub(super) fn prepare_append(
        &self,
        channel: u32,
        name: &str,
        version: &Ver,
        delta: AppendDelta,
    ) -> Result<Stored, String> {
        let base = Ver::parse(&delta.base_version);
        let older = match (base.counter(), version.counter()) {
            (Some(base), Some(new)) => base < new,
            _ => false,
        };
        if !older {
            return Err(format!(
                "append to channel '{name}': base version '{}' is not older than version '{}'",
                delta.base_version,
                version.render()
            ));
        }
        let base_len = match self.versions(channel).and_then(|v| v.get(&base)) {
            Some(Stored::Whole { list_len: Some(len), .. } | Stored::Appended { len, .. }) => *len,
            // An empty list channel.
            Some(Stored::Empty) => 0,
            Some(Stored::Whole { list_len: None, .. }) => {
                return Err(format!(
                    "append to channel '{name}': its value at base version '{}' is not a list",
                    delta.base_version
                ));
            }
            None => {
                return Err(format!(
                    "append to channel '{name}': no value stored at base version '{}'",
                    delta.base_version
                ));
            }
        };
        let len = base_len + delta.items.len();
        Ok(Stored::Appended { base, items: Packed::pack(Value::Array(delta.items)), len })
    }

    /// Stores a prepared value.
    pub(super) fn insert(&mut self, channel: u32, version: Ver, stored: Stored) {
        let i = channel as usize;
        if self.by_channel.len() <= i {
            self.by_channel.resize_with(i + 1, Versions::default);
        }
        self.by_channel[i].insert(version, stored);
    }

    /// The value of `channel` (named `name`) at `version`, rebuilt from its chain of appends: `Ok(None)`
    /// when the channel was empty, `Err` with the reason when something is missing.
    pub(super) fn get(&self, channel: u32, name: &str, version: &Ver) -> Result<Option<Value>, String> {
        let missing = || format!("no value stored for channel '{name}' at version '{}'", version.render());
        let Some(versions) = self.versions(channel) else {
            return Err(missing());
        };
        let mut chunks: Vec<&Packed> = Vec::new();
        // The whole list's length, known at the newest link.
        let mut total = 0;
        let mut at = version;
        let head = loop {
            match versions.get(at) {
                None if chunks.is_empty() => return Err(missing()),
                None => {
                    return Err(format!(
                        "value of channel '{name}' at version '{}' extends version '{}', which is not stored",
                        version.render(),
                        at.render()
                    ));
                }
                Some(Stored::Empty) if chunks.is_empty() => return Ok(None),
                Some(Stored::Whole { value, .. }) if chunks.is_empty() => return value.unpack().map(Some),
                // Appends to an empty list channel.
                Some(Stored::Empty) => break None,
                Some(Stored::Whole { value, list_len: Some(_) }) => break Some(value),
                Some(Stored::Whole { list_len: None, .. }) => {
                    return Err(format!(
                        "value of channel '{name}' at version '{}' extends version '{}', which is not a list",
                        version.render(),
                        at.render()
                    ));
                }
                Some(Stored::Appended { base, items, len }) => {
                    // Counters decrease along a chain, so it is at most as long as the channel's versions.
                    if chunks.len() > versions.len() {
                        return Err(format!(
                            "value of channel '{name}' at version '{}' has a cycle",
                            version.render()
                        ));
                    }
                    if chunks.is_empty() {
                        total = *len;
                    }
                    chunks.push(items);
                    at = base;
                }
            }
        };
        let mut items = Vec::with_capacity(total);
        if let Some(head) = head {
            head.unpack_items_into(&mut items)?;
        }
        for chunk in chunks.iter().rev() {
            chunk.unpack_items_into(&mut items)?;
        }
        Ok(Some(Value::Array(items)))
    }

    /// Keeps the values of `needed` (channel, version) pairs only. A needed value appended to a version
    /// that is not needed is stored whole first, so its chain can go; one whose chain cannot be read is
    /// left as it is, with the versions under it.
    pub(super) fn retain(&mut self, needed: &HashSet<(u32, Ver)>) {
        let mut keep: HashMap<u32, HashSet<Ver>> = HashMap::new();
        for (channel, version) in needed {
            keep.entry(*channel).or_default().insert(version.clone());
        }
        let mut whole = Vec::new();
        let mut broken = Vec::new();
        for (channel, version) in needed {
            let base = match self.versions(*channel).and_then(|v| v.get(version)) {
                Some(Stored::Appended { base, .. }) => base,
                _ => continue,
            };
            if keep.get(channel).is_some_and(|k| k.contains(base)) {
                continue;
            }
            match self.get(*channel, "", version) {
                Ok(Some(value)) => {
                    let list_len = value.as_array().map(Vec::len);
                    whole.push((
                        *channel,
                        version.clone(),
                        Stored::Whole { value: Packed::pack(value), list_len },
                    ));
                }
                Ok(None) | Err(_) => broken.push((*channel, version.clone())),
            }
        }
        for (channel, version) in broken {
            let Some(versions) = self.versions(channel) else { continue };
            let kept = keep.entry(channel).or_default();
            let mut at = &version;
            while let Some(Stored::Appended { base, .. }) = versions.get(at) {
                if !kept.insert(base.clone()) {
                    break;
                }
                at = base;
            }
        }
        for (channel, version, stored) in whole {
            self.insert(channel, version, stored);
        }
        for (channel, versions) in self.by_channel.iter_mut().enumerate() {
            let kept = u32::try_from(channel).ok().and_then(|c| keep.get(&c));
            versions.retain(|version| kept.is_some_and(|k| k.contains(version)));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn v(n: u64) -> Ver {
        Ver::Tagged(n, 7)
    }

    /// Test channels by one-letter name.
    fn c(name: &str) -> u32 {
        u32::from(name.as_bytes()[0])
    }

    impl Values {
        fn put_appended(&mut self, channel: &str, version: Ver, delta: AppendDelta) -> Result<(), String> {
            let stored = self.prepare_append(c(channel), channel, &version, delta)?;
            self.insert(c(channel), version, stored);
            Ok(())
        }

        fn get_named(&self, channel: &str, version: &Ver) -> Result<Option<Value>, String> {
            self.get(c(channel), channel, version)
        }
    }

    fn delta(base: u64, items: Value) -> AppendDelta {
        let Value::Array(items) = items else { unreachable!() };
        AppendDelta { base_version: v(base).render().into(), items }
    }

    #[test]
    fn values_round_trip_packed() {
        let mut values = Values::default();
        let tree = json!({"b": [1, 2.5, "x", null, {"z": true, "a": -3}], "a": {}});
        values.put_whole(c("t"), v(1), Some(tree.clone()));
        values.put_whole(c("n"), v(1), Some(json!(42)));
        values.put_whole(c("s"), v(1), Some(json!("text")));
        values.put_whole(c("e"), v(1), None);
        assert_eq!(values.get_named("t", &v(1)).unwrap(), Some(tree.clone()));
        // Key order survives the text form.
        assert_eq!(
            serde_json::to_string(&values.get_named("t", &v(1)).unwrap()).unwrap(),
            serde_json::to_string(&tree).unwrap()
        );
        assert_eq!(values.get_named("n", &v(1)).unwrap(), Some(json!(42)));
        assert_eq!(values.get_named("s", &v(1)).unwrap(), Some(json!("text")));
        assert_eq!(values.get_named("e", &v(1)).unwrap(), None);
    }

    #[test]
    fn chain_of_appends_rebuilds_the_whole_list() {
        let mut values = Values::default();
        values.put_whole(c("m"), v(1), Some(json!([1])));
        values.put_appended("m", v(2), delta(1, json!([2, 3]))).unwrap();
        values.put_appended("m", v(3), delta(2, json!([]))).unwrap();
        values.put_appended("m", v(4), delta(3, json!([4, {"k": [5]}]))).unwrap();
        assert_eq!(values.get_named("m", &v(4)).unwrap(), Some(json!([1, 2, 3, 4, {"k": [5]}])));
        assert_eq!(values.get_named("m", &v(3)).unwrap(), Some(json!([1, 2, 3])));
        assert_eq!(values.get_named("m", &v(2)).unwrap(), Some(json!([1, 2, 3])));
        assert_eq!(values.get_named("m", &v(1)).unwrap(), Some(json!([1])));
    }

    #[test]
    fn append_needs_an_older_list_base() {
        let mut values = Values::default();
        values.put_whole(c("m"), v(1), Some(json!([1])));
        values.put_whole(c("n"), v(1), Some(json!(5)));
        values.put_whole(c("e"), v(1), None);
        values.put_appended("e", v(2), delta(1, json!([1]))).unwrap();
        assert_eq!(values.get_named("e", &v(2)).unwrap(), Some(json!([1])));
        assert_eq!(values.get_named("e", &v(1)).unwrap(), None);
        assert!(values.put_appended("m", v(1), delta(1, json!([2]))).unwrap_err().contains("not older"));
        assert!(values.put_appended("m", v(3), delta(2, json!([2]))).unwrap_err().contains("no value"));
        assert!(values.put_appended("n", v(2), delta(1, json!([2]))).unwrap_err().contains("not a list"));
        let bad = AppendDelta { base_version: "x".into(), items: Vec::new() };
        assert!(values.put_appended("m", v(2), bad).is_err());
    }

    #[test]
    fn retain_stores_a_kept_append_whole_when_its_base_goes() {
        let mut values = Values::default();
        values.put_whole(c("m"), v(1), Some(json!([1])));
        values.put_appended("m", v(2), delta(1, json!([2]))).unwrap();
        values.put_whole(c("m"), v(3), Some(json!([9])));
        values.put_appended("m", v(4), delta(3, json!([10]))).unwrap();
        values.retain(&HashSet::from([(c("m"), v(2))]));
        assert_eq!(values.len(), 1, "one value, stored whole");
        assert_eq!(values.get_named("m", &v(2)).unwrap(), Some(json!([1, 2])));
        assert!(values.get_named("m", &v(4)).is_err());
        // Appends go on from the whole value.
        values.put_appended("m", v(5), delta(2, json!([3]))).unwrap();
        assert_eq!(values.get_named("m", &v(5)).unwrap(), Some(json!([1, 2, 3])));
    }

    #[test]
    fn retain_keeps_an_append_whose_base_is_kept() {
        let mut values = Values::default();
        values.put_whole(c("m"), v(1), Some(json!([1])));
        values.put_appended("m", v(2), delta(1, json!([2]))).unwrap();
        values.put_appended("m", v(3), delta(2, json!([3]))).unwrap();
        values.put_appended("m", v(4), delta(3, json!([4]))).unwrap();
        values.retain(&HashSet::from([(c("m"), v(3)), (c("m"), v(4))]));
        assert_eq!(values.len(), 2);
        assert!(matches!(values.by_channel[c("m") as usize].get(&v(4)), Some(Stored::Appended { .. })));
        assert!(matches!(values.by_channel[c("m") as usize].get(&v(3)), Some(Stored::Whole { .. })));
        assert_eq!(values.get_named("m", &v(4)).unwrap(), Some(json!([1, 2, 3, 4])));
    }

    #[test]
    fn a_missing_link_is_reported() {
        let mut values = Values::default();
        values.put_whole(c("m"), v(1), Some(json!([1])));
        values.put_appended("m", v(2), delta(1, json!([2]))).unwrap();
        values.retain(&HashSet::new());
        assert!(values.get_named("m", &v(2)).unwrap_err().contains("no value stored"));
    }

    #[test]
    fn versions_saved_out_of_order_are_found_replaced_and_retained() {
        let mut values = Values::default();
        for n in [1, 2, 5] {
            values.put_whole(c("x"), v(n), Some(json!(n)));
        }
        // A fork from version 2: older than the newest stored, on another tag.
        let fork = |n| Ver::Tagged(n, 8);
        values.put_whole(c("x"), fork(3), Some(json!("f3")));
        values.put_appended("x", fork(4), delta(1, json!([]))).unwrap_err();
        values.put_whole(c("x"), fork(4), Some(json!(["f4"])));
        values
            .put_appended(
                "x",
                fork(6),
                AppendDelta { base_version: fork(4).render().into(), items: vec![json!(1)] },
            )
            .unwrap();
        // The same version again replaces its value, wherever it is kept.
        values.put_whole(c("x"), v(2), Some(json!("two")));
        values.put_whole(c("x"), fork(3), Some(json!("three")));
        assert_eq!(values.len(), 6);
        assert_eq!(values.get_named("x", &v(2)).unwrap(), Some(json!("two")));
        assert_eq!(values.get_named("x", &fork(3)).unwrap(), Some(json!("three")));
        assert_eq!(values.get_named("x", &v(5)).unwrap(), Some(json!(5)));
        assert_eq!(values.get_named("x", &fork(6)).unwrap(), Some(json!(["f4", 1])));
        values.retain(&HashSet::from([(c("x"), fork(6)), (c("x"), v(1))]));
        assert_eq!(values.len(), 2, "the kept append is stored whole, its base goes");
        assert_eq!(values.get_named("x", &fork(6)).unwrap(), Some(json!(["f4", 1])));
        assert!(values.get_named("x", &v(5)).is_err());
    }
}
