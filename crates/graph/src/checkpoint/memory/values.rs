//! The channel values of one namespace: whole values, or the items appended to an earlier version.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::checkpoint::{AppendDelta, version_counter};

/// A channel's value at one version.
#[derive(Debug, Clone)]
pub(super) enum Stored {
    /// The channel was empty.
    Empty,
    /// The whole value.
    Whole(Value),
    /// The value at `base` (a list) followed by `items`; `len` is the length of the whole list.
    Appended { base: String, items: Vec<Value>, len: usize },
}

/// Channel, then version, to value. An appended value's base is always an older version of the same
/// channel (a smaller counter), so chains end, at a whole list.
#[derive(Debug, Default, Clone)]
pub(super) struct Values {
    by_channel: HashMap<String, HashMap<String, Stored>>,
}

impl Values {
    /// How many (channel, version) values are stored.
    pub(super) fn len(&self) -> usize {
        self.by_channel.values().map(HashMap::len).sum()
    }

    /// Stores a whole value (`None`: the channel is empty).
    pub(super) fn put_whole(&mut self, channel: String, version: String, value: Option<Value>) {
        let stored = value.map_or(Stored::Empty, Stored::Whole);
        self.slot(channel).insert(version, stored);
    }

    /// Checks `delta` as channel's value at `version` and returns it ready to [`insert`](Self::insert): the
    /// base must be stored, be a list and have a smaller version counter than `version`; otherwise the
    /// reason.
    pub(super) fn prepare_append(
        &self,
        channel: &str,
        version: &str,
        delta: AppendDelta,
    ) -> Result<Stored, String> {
        let older = match (version_counter(&delta.base_version), version_counter(version)) {
            (Some(base), Some(new)) => base < new,
            _ => false,
        };
        if !older {
            return Err(format!(
                "append to channel '{channel}': base version '{}' is not older than version '{version}'",
                delta.base_version
            ));
        }
        let base_len = match self.by_channel.get(channel).and_then(|v| v.get(&delta.base_version)) {
            Some(Stored::Whole(Value::Array(items))) => items.len(),
            Some(Stored::Appended { len, .. }) => *len,
            // An empty list channel.
            Some(Stored::Empty) => 0,
            Some(Stored::Whole(_)) => {
                return Err(format!(
                    "append to channel '{channel}': its value at base version '{}' is not a list",
                    delta.base_version
                ));
            }
            None => {
                return Err(format!(
                    "append to channel '{channel}': no value stored at base version '{}'",
                    delta.base_version
                ));
            }
        };
        let len = base_len + delta.items.len();
        Ok(Stored::Appended { base: delta.base_version, items: delta.items, len })
    }

    /// Stores a prepared value.
    pub(super) fn insert(&mut self, channel: String, version: String, stored: Stored) {
        self.slot(channel).insert(version, stored);
    }

    fn slot(&mut self, channel: String) -> &mut HashMap<String, Stored> {
        // Look up first: the common case (a known channel) then allocates nothing for the key.
        if !self.by_channel.contains_key(&channel) {
            self.by_channel.insert(channel.clone(), HashMap::new());
        }
        self.by_channel.entry(channel).or_default()
    }

    /// The value of `channel` at `version`, rebuilt from its chain of appends: `Ok(None)` when the
    /// channel was empty, `Err` with the reason when something is missing.
    pub(super) fn get(&self, channel: &str, version: &str) -> Result<Option<Value>, String> {
        let Some(versions) = self.by_channel.get(channel) else {
            return Err(format!("no value stored for channel '{channel}' at version '{version}'"));
        };
        let mut chunks: Vec<&[Value]> = Vec::new();
        let mut at = version;
        loop {
            match versions.get(at) {
                None if chunks.is_empty() => {
                    return Err(format!("no value stored for channel '{channel}' at version '{version}'"));
                }
                None => {
                    return Err(format!(
                        "value of channel '{channel}' at version '{version}' extends version '{at}', which is not stored"
                    ));
                }
                Some(Stored::Empty) if chunks.is_empty() => return Ok(None),
                Some(Stored::Whole(value)) if chunks.is_empty() => return Ok(Some(value.clone())),
                Some(Stored::Whole(Value::Array(head))) => return Ok(Some(concat(head, &chunks))),
                // Appends to an empty list channel.
                Some(Stored::Empty) => return Ok(Some(concat(&[], &chunks))),
                Some(Stored::Whole(_)) => {
                    return Err(format!(
                        "value of channel '{channel}' at version '{version}' extends version '{at}', which is not a list"
                    ));
                }
                Some(Stored::Appended { base, items, .. }) => {
                    // Counters decrease along a chain, so it is at most as long as the channel's versions.
                    if chunks.len() > versions.len() {
                        return Err(format!(
                            "value of channel '{channel}' at version '{version}' has a cycle"
                        ));
                    }
                    chunks.push(items);
                    at = base;
                }
            }
        }
    }

    /// Keeps the values of `needed` (channel, version) pairs and the versions their appends extend.
    pub(super) fn retain(&mut self, needed: &HashSet<(&str, &str)>) {
        let mut keep: HashMap<String, HashSet<String>> = HashMap::new();
        for &(channel, version) in needed {
            let Some(versions) = self.by_channel.get(channel) else { continue };
            let kept = keep.entry(channel.to_owned()).or_default();
            let mut at = version;
            while kept.insert(at.to_owned()) {
                match versions.get(at) {
                    Some(Stored::Appended { base, .. }) => at = base,
                    _ => break,
                }
            }
        }
        self.by_channel.retain(|channel, versions| {
            let kept = keep.get(channel);
            versions.retain(|version, _| kept.is_some_and(|k| k.contains(version)));
            !versions.is_empty()
        });
    }
}

/// `head` followed by `chunks` in reverse order (they were collected newest first).
fn concat(head: &[Value], chunks: &[&[Value]]) -> Value {
    let total = head.len() + chunks.iter().map(|c| c.len()).sum::<usize>();
    let mut items = Vec::with_capacity(total);
    items.extend_from_slice(head);
    for chunk in chunks.iter().rev() {
        items.extend_from_slice(chunk);
    }
    Value::Array(items)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn v(n: u64) -> String {
        format!("{n:032}.{:016}", 7)
    }

    impl Values {
        fn put_appended(&mut self, channel: &str, version: String, delta: AppendDelta) -> Result<(), String> {
            let stored = self.prepare_append(channel, &version, delta)?;
            self.insert(channel.to_owned(), version, stored);
            Ok(())
        }
    }

    fn delta(base: u64, items: Value) -> AppendDelta {
        let Value::Array(items) = items else { unreachable!() };
        AppendDelta { base_version: v(base), items }
    }

    #[test]
    fn chain_of_appends_rebuilds_the_whole_list() {
        let mut values = Values::default();
        values.put_whole("m".into(), v(1), Some(json!([1])));
        values.put_appended("m", v(2), delta(1, json!([2, 3]))).unwrap();
        values.put_appended("m", v(3), delta(2, json!([]))).unwrap();
        values.put_appended("m", v(4), delta(3, json!([4]))).unwrap();
        assert_eq!(values.get("m", &v(4)).unwrap(), Some(json!([1, 2, 3, 4])));
        assert_eq!(values.get("m", &v(2)).unwrap(), Some(json!([1, 2, 3])));
        assert_eq!(values.get("m", &v(1)).unwrap(), Some(json!([1])));
    }

    #[test]
    fn append_needs_an_older_list_base() {
        let mut values = Values::default();
        values.put_whole("m".into(), v(1), Some(json!([1])));
        values.put_whole("n".into(), v(1), Some(json!(5)));
        values.put_whole("e".into(), v(1), None);
        values.put_appended("e", v(2), delta(1, json!([1]))).unwrap();
        assert_eq!(values.get("e", &v(2)).unwrap(), Some(json!([1])));
        assert_eq!(values.get("e", &v(1)).unwrap(), None);
        assert!(values.put_appended("m", v(1), delta(1, json!([2]))).unwrap_err().contains("not older"));
        assert!(values.put_appended("m", v(3), delta(2, json!([2]))).unwrap_err().contains("no value"));
        assert!(values.put_appended("n", v(2), delta(1, json!([2]))).unwrap_err().contains("not a list"));
        let bad = AppendDelta { base_version: "x".into(), items: Vec::new() };
        assert!(values.put_appended("m", v(2), bad).is_err());
    }

    #[test]
    fn retain_keeps_the_versions_an_append_extends() {
        let mut values = Values::default();
        values.put_whole("m".into(), v(1), Some(json!([1])));
        values.put_appended("m", v(2), delta(1, json!([2]))).unwrap();
        values.put_whole("m".into(), v(3), Some(json!([9])));
        values.put_appended("m", v(4), delta(3, json!([10]))).unwrap();
        let (m, v2) = ("m".to_owned(), v(2));
        values.retain(&HashSet::from([(m.as_str(), v2.as_str())]));
        assert_eq!(values.len(), 2);
        assert_eq!(values.get("m", &v(2)).unwrap(), Some(json!([1, 2])));
        assert!(values.get("m", &v(4)).is_err());
    }

    #[test]
    fn a_missing_link_is_reported() {
        let mut values = Values::default();
        values.put_whole("m".into(), v(1), Some(json!([1])));
        values.put_appended("m", v(2), delta(1, json!([2]))).unwrap();
        values.retain(&HashSet::new());
        assert!(values.get("m", &v(2)).unwrap_err().contains("no value stored"));
    }
}
