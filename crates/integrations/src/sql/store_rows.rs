//! Rows of the store tables and the parts of a search done in weft (filters, ranking, paging), shared by
//! the SQL stores.
//!
//! A namespace is stored as its labels joined by `.` (labels cannot contain one), so a namespace prefix
//! is a range of that text: `p` itself, or from `p.` up to `p/` (`/` follows `.`), compared byte by byte.

use std::time::{Duration, SystemTime};

use serde_json::{Map, Value};
use weft_graph::store::{
    Item, ListNamespacesOptions, SearchItem, StoreError, cosine_similarity, matches_filter,
};

/// A namespace as stored.
pub(crate) fn ns_text(namespace: &[String]) -> String {
    namespace.join(".")
}

/// A stored namespace's labels.
pub(crate) fn ns_labels(text: &str) -> Vec<String> {
    text.split('.').map(str::to_owned).collect()
}

/// The stored namespaces a search prefix covers: everything, or `exact` and `lower <= ns < upper`.
#[derive(Debug, Clone)]
pub(crate) struct PrefixRange {
    pub(crate) all: bool,
    pub(crate) exact: String,
    pub(crate) lower: String,
    pub(crate) upper: String,
}

/// The range of a namespace prefix.
pub(crate) fn prefix_range(prefix: &[String]) -> PrefixRange {
    let exact = ns_text(prefix);
    PrefixRange { all: prefix.is_empty(), lower: format!("{exact}."), upper: format!("{exact}/"), exact }
}

/// A vector as little-endian `f32` bytes.
pub(crate) fn vector_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A vector from little-endian `f32` bytes (`None` when the length is not a multiple of 4).
pub(crate) fn vector_from_bytes(bytes: &[u8]) -> Option<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    Some(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

/// Microseconds since the Unix epoch.
pub(crate) fn micros(t: SystemTime) -> i64 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_micros()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_micros()).unwrap_or(i64::MAX),
    }
}

/// The time `micros` after the Unix epoch.
pub(crate) fn from_micros(micros: i64) -> SystemTime {
    let d = Duration::from_micros(micros.unsigned_abs());
    let t = if micros >= 0 {
        SystemTime::UNIX_EPOCH.checked_add(d)
    } else {
        SystemTime::UNIX_EPOCH.checked_sub(d)
    };
    t.unwrap_or(SystemTime::UNIX_EPOCH)
}

/// A duration in microseconds.
pub(crate) fn duration_micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// A row of `store_items`.
#[derive(Debug, Clone)]
pub(crate) struct ItemRow {
    pub(crate) prefix: String,
    pub(crate) key: String,
    pub(crate) value: String,
    pub(crate) created_at: i64,
    pub(crate) updated_at: i64,
}

impl ItemRow {
    /// The item; an unreadable value is a backend error naming the item.
    pub(crate) fn into_item(self) -> Result<Item, StoreError> {
        let namespace = ns_labels(&self.prefix);
        let value: Value = serde_json::from_str(&self.value).map_err(|e| {
            StoreError::Backend(format!("unreadable value of '{}' in namespace {namespace:?}: {e}", self.key))
        })?;
        Ok(Item {
            namespace,
            key: self.key,
            value,
            created_at: from_micros(self.created_at),
            updated_at: from_micros(self.updated_at),
        })
    }
}

/// An item found by a search query, with its vectors (newest update first when collected).
#[derive(Debug)]
pub(crate) struct Candidate {
    pub(crate) item: Item,
    pub(crate) vectors: Vec<Vec<f32>>,
}

/// Keeps items matching `filter` (validated) from rows read newest update first.
pub(crate) fn keep_matching(item: &Item, filter: &Map<String, Value>) -> bool {
    filter.is_empty() || matches_filter(&item.value, filter)
}

/// Ranks candidates (newest update first) by similarity to `query` when given: scored items best first,
/// then unscored ones, ties by last update; then `offset` and `limit`.
pub(crate) fn rank(
    candidates: Vec<Candidate>,
    query: Option<&[f32]>,
    offset: usize,
    limit: usize,
) -> Vec<SearchItem> {
    let mut scored: Vec<SearchItem> = candidates
        .into_iter()
        .map(|c| {
            let score =
                query.and_then(|q| c.vectors.iter().map(|v| cosine_similarity(q, v)).reduce(f64::max));
            SearchItem { item: c.item, score }
        })
        .collect();
    if query.is_some() {
        // Stable: equal scores keep the newest-update-first order.
        scored.sort_by(|a, b| {
            b.score
                .is_some()
                .cmp(&a.score.is_some())
                .then(b.score.unwrap_or(0.0).total_cmp(&a.score.unwrap_or(0.0)))
        });
    }
    scored.into_iter().skip(offset).take(limit).collect()
}

/// Whether `namespace` starts with `prefix`, label by label (`"*"` matches any label).
fn matches_prefix(namespace: &[String], prefix: &[String]) -> bool {
    namespace.len() >= prefix.len() && prefix.iter().zip(namespace).all(|(p, n)| p == "*" || p == n)
}

/// Whether `namespace` ends with `suffix`, label by label (`"*"` matches any label).
fn matches_suffix(namespace: &[String], suffix: &[String]) -> bool {
    namespace.len() >= suffix.len()
        && suffix.iter().rev().zip(namespace.iter().rev()).all(|(s, n)| s == "*" || s == n)
}

/// The labels of a `list_namespaces` prefix before its first wildcard (what SQL can narrow on).
pub(crate) fn literal_head(prefix: Option<&[String]>) -> Vec<String> {
    prefix.unwrap_or_default().iter().take_while(|l| l.as_str() != "*").cloned().collect()
}

/// `list_namespaces` over the stored namespaces that hold live items: filtered by prefix and suffix, cut
/// to `max_depth`, sorted, deduplicated, paged.
pub(crate) fn list_namespaces(stored: Vec<String>, options: &ListNamespacesOptions) -> Vec<Vec<String>> {
    let prefix = options.prefix.as_deref().unwrap_or_default();
    let suffix = options.suffix.as_deref().unwrap_or_default();
    let mut found: Vec<Vec<String>> = stored
        .iter()
        .map(|text| ns_labels(text))
        .filter(|ns| matches_prefix(ns, prefix) && matches_suffix(ns, suffix))
        .map(|mut ns| {
            if let Some(depth) = options.max_depth {
                ns.truncate(depth);
            }
            ns
        })
        .collect();
    found.sort();
    found.dedup();
    found.into_iter().skip(options.offset).take(options.limit).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(labels: &[&str]) -> Vec<String> {
        labels.iter().map(|l| (*l).to_owned()).collect()
    }

    #[test]
    fn prefix_ranges_cover_children_and_not_siblings() {
        let r = prefix_range(&ns(&["a", "b"]));
        let inside = |t: &str| t == r.exact || (t >= r.lower.as_str() && t < r.upper.as_str());
        assert!(inside("a.b") && inside("a.b.c") && inside("a.b.c.d"));
        assert!(!inside("a.bc") && !inside("a.b-") && !inside("a") && !inside("a.c"));
        assert!(prefix_range(&[]).all);
    }

    #[test]
    fn vectors_and_times_round_trip() {
        let v = vec![0.5_f32, -1.25, 3.0];
        assert_eq!(vector_from_bytes(&vector_bytes(&v)), Some(v));
        assert_eq!(vector_from_bytes(&[1, 2, 3]), None);
        let t = SystemTime::UNIX_EPOCH + Duration::from_micros(1_735_787_045_678_901);
        assert_eq!(from_micros(micros(t)), t);
    }

    #[test]
    fn namespaces_sort_by_labels_not_by_text() {
        let listed = list_namespaces(vec!["a-x".into(), "a.b".into()], &ListNamespacesOptions::default());
        assert_eq!(listed, vec![ns(&["a", "b"]), ns(&["a-x"])]);
    }
}
