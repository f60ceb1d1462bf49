//! The key layout: every key the saver writes, built from a prefix, a thread, a namespace and an id.
//!
//! Names inside keys are escaped (`%` as `%25`, `:` as `%3A`) so that `:` only ever separates parts: a
//! thread id, namespace or checkpoint id cannot make one key look like another. Keys of a thread are
//! registered by their suffix (the part after the thread's base) in the thread's registry set, so that
//! whole-thread operations (delete, copy, TTL refresh) reach every key without `SCAN`.

use std::borrow::Cow;

/// The keys of one saver (one prefix).
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    prefix: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Self {
        Self { prefix: prefix.to_owned() }
    }

    /// The set of every thread id that has (or had) keys.
    pub(crate) fn threads(&self) -> String {
        format!("{}:threads", self.prefix)
    }

    /// The keys of thread `thread_id`.
    pub(crate) fn thread(&self, thread_id: &str) -> ThreadKeys {
        ThreadKeys { base: format!("{}:t:{}:", self.prefix, escape(thread_id)) }
    }
}

/// The keys of one thread: its registry, its namespace set and, per namespace, the id index, the values
/// hash and a hash per checkpoint and per checkpoint's writes.
#[derive(Debug, Clone)]
pub(crate) struct ThreadKeys {
    base: String,
}

/// Suffix of the set of a thread's namespaces.
pub(crate) const NAMESPACES: &str = "ns";

impl ThreadKeys {
    /// The base every key of the thread starts with.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// The set of suffixes of every other key of the thread.
    pub(crate) fn registry(&self) -> String {
        format!("{}keys", self.base)
    }

    /// The full key of `suffix`.
    pub(crate) fn full(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.base)
    }
}

/// The suffixes of one namespace's keys.
#[derive(Debug, Clone)]
pub(crate) struct NsSuffix {
    head: String,
}

impl NsSuffix {
    pub(crate) fn new(ns: &str) -> Self {
        Self { head: format!("n:{}:", escape(ns)) }
    }

    /// What every suffix of the namespace starts with.
    pub(crate) fn head(&self) -> &str {
        &self.head
    }

    /// Sorted set of checkpoint ids (all with score 0, so ordered by id).
    pub(crate) fn ids(&self) -> String {
        format!("{}ids", self.head)
    }

    /// Hash of channel values: field `channel:version`.
    pub(crate) fn blobs(&self) -> String {
        format!("{}blobs", self.head)
    }

    /// Hash of the base of each appended value: field `channel:version` to the base's field.
    pub(crate) fn bases(&self) -> String {
        format!("{}bases", self.head)
    }

    /// Hash of one checkpoint: `format`, `checkpoint`, `metadata`, `parent`.
    pub(crate) fn checkpoint(&self, id: &str) -> String {
        format!("{}c:{}", self.head, escape(id))
    }

    /// Hash of one checkpoint's pending writes: field `task_id:idx`.
    pub(crate) fn writes(&self, id: &str) -> String {
        format!("{}w:{}", self.head, escape(id))
    }
}

/// The field of a channel's value at a version in the values hash.
pub(crate) fn blob_field(channel: &str, version: &str) -> String {
    format!("{}:{version}", escape(channel))
}

/// The field of a write in a writes hash (the index is last, so the field is unambiguous).
pub(crate) fn write_field(task_id: &str, idx: i64) -> String {
    format!("{task_id}:{idx}")
}

/// `s` with `%` and `:` escaped.
pub(crate) fn escape(s: &str) -> Cow<'_, str> {
    if !s.contains(['%', ':']) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '%' => out.push_str("%25"),
            ':' => out.push_str("%3A"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_keeps_separators_unambiguous() {
        assert_eq!(escape("plain"), "plain");
        assert_eq!(escape("a:b%c"), "a%3Ab%25c");
        assert_ne!(escape("a:b"), escape("a%3Ab"));
        let keys = Keys::new("p");
        assert_ne!(keys.thread("a:ns").registry(), keys.thread("a").full(NAMESPACES));
    }

    #[test]
    fn namespace_keys_live_under_the_thread_base() {
        let thread = Keys::new("weft").thread("t 1");
        let ns = NsSuffix::new("node:x|sub:y");
        assert_eq!(thread.full(&ns.ids()), "weft:t:t 1:n:node%3Ax|sub%3Ay:ids");
        assert!(ns.checkpoint("id").starts_with(ns.head()));
        assert!(ns.writes("id").starts_with(ns.head()));
        assert_ne!(ns.checkpoint("id"), ns.writes("id"));
    }
}
