//! The channel values of one namespace: whole values, or the items appended to an earlier version.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use crate::checkpoint::{AppendDelta, version_counter};

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
    Appended { base: String, items: Packed, len: usize },
}

/// Channel, then version, to value. An appended value's base is always an older version of the same
/// channel (a smaller counter), so chains end, at a whole list.
///
/// Ordered maps: versions arrive in increasing order, so an insert lands at the right edge without
/// hashing a 49-byte key or rehashing a growing table.
#[derive(Debug, Default, Clone)]
pub(super) struct Values {
    by_channel: BTreeMap<String, BTreeMap<String, Stored>>,
}

impl Values {
    /// How many (channel, version) values are stored.
    pub(super) fn len(&self) -> usize {
        self.by_channel.values().map(BTreeMap::len).sum()
    }

    /// Stores a whole value (`None`: the channel is empty).
    pub(super) fn put_whole(&mut self, channel: String, version: String, value: Option<Value>) {
        let stored = match value {
            None => Stored::Empty,
            Some(value) => {
                let list_len = value.as_array().map(Vec::len);
                Stored::Whole { value: Packed::pack(value), list_len }
            }
        };
        self.insert(channel, version, stored);
    }

    /// Checks `delta` as channel's value at `version` and returns it ready to [`insert`](Self::insert): the
    /// base must be stored, be a list (or empty) and have a smaller version counter than `version`;
    /// otherwise the reason.
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
            Some(Stored::Whole { list_len: Some(len), .. } | Stored::Appended { len, .. }) => *len,
            // An empty list channel.
            Some(Stored::Empty) => 0,
            Some(Stored::Whole { list_len: None, .. }) => {
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
        Ok(Stored::Appended { base: delta.base_version, items: Packed::pack(Value::Array(delta.items)), len })
    }

    /// Stores a prepared value.
    pub(super) fn insert(&mut self, channel: String, version: String, stored: Stored) {
        match self.by_channel.get_mut(&channel) {
            Some(versions) => {
                versions.insert(version, stored);
            }
            None => {
                self.by_channel.insert(channel, BTreeMap::from([(version, stored)]));
            }
        }
    }

    /// The value of `channel` at `version`, rebuilt from its chain of appends: `Ok(None)` when the
    /// channel was empty, `Err` with the reason when something is missing.
    pub(super) fn get(&self, channel: &str, version: &str) -> Result<Option<Value>, String> {
        let Some(versions) = self.by_channel.get(channel) else {
            return Err(format!("no value stored for channel '{channel}' at version '{version}'"));
        };
        let mut chunks: Vec<&Packed> = Vec::new();
        // The whole list's length, known at the newest link.
        let mut total = 0;
        let mut at = version;
        let head = loop {
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
                Some(Stored::Whole { value, .. }) if chunks.is_empty() => return value.unpack().map(Some),
                // Appends to an empty list channel.
                Some(Stored::Empty) => break None,
                Some(Stored::Whole { value, list_len: Some(_) }) => break Some(value),
                Some(Stored::Whole { list_len: None, .. }) => {
                    return Err(format!(
                        "value of channel '{channel}' at version '{version}' extends version '{at}', which is not a list"
                    ));
                }
                Some(Stored::Appended { base, items, len }) => {
                    // Counters decrease along a chain, so it is at most as long as the channel's versions.
                    if chunks.len() > versions.len() {
                        return Err(format!(
                            "value of channel '{channel}' at version '{version}' has a cycle"
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
    fn values_round_trip_packed() {
        let mut values = Values::default();
        let tree = json!({"b": [1, 2.5, "x", null, {"z": true, "a": -3}], "a": {}});
        values.put_whole("t".into(), v(1), Some(tree.clone()));
        values.put_whole("n".into(), v(1), Some(json!(42)));
        values.put_whole("s".into(), v(1), Some(json!("text")));
        values.put_whole("e".into(), v(1), None);
        assert_eq!(values.get("t", &v(1)).unwrap(), Some(tree.clone()));
        // Key order survives the text form.
        assert_eq!(
            serde_json::to_string(&values.get("t", &v(1)).unwrap()).unwrap(),
            serde_json::to_string(&tree).unwrap()
        );
        assert_eq!(values.get("n", &v(1)).unwrap(), Some(json!(42)));
        assert_eq!(values.get("s", &v(1)).unwrap(), Some(json!("text")));
        assert_eq!(values.get("e", &v(1)).unwrap(), None);
    }

    #[test]
    fn chain_of_appends_rebuilds_the_whole_list() {
        let mut values = Values::default();
        values.put_whole("m".into(), v(1), Some(json!([1])));
        values.put_appended("m", v(2), delta(1, json!([2, 3]))).unwrap();
        values.put_appended("m", v(3), delta(2, json!([]))).unwrap();
        values.put_appended("m", v(4), delta(3, json!([4, {"k": [5]}]))).unwrap();
        assert_eq!(values.get("m", &v(4)).unwrap(), Some(json!([1, 2, 3, 4, {"k": [5]}])));
        assert_eq!(values.get("m", &v(3)).unwrap(), Some(json!([1, 2, 3])));
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
