//! Node caching: a node with a [`CachePolicy`] whose input was seen before reuses the writes it made then
//! instead of running again (the `updates` chunk is then marked cached).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

type KeyFn = Arc<dyn Fn(&Value) -> String + Send + Sync>;

/// How a node's results are cached: the key computed from its input (default: a hash of the input's
/// JSON) and how long an entry lives (default: forever).
#[derive(Clone, Default)]
pub struct CachePolicy {
    key: Option<KeyFn>,
    /// How long an entry lives.
    pub ttl: Option<Duration>,
}

impl fmt::Debug for CachePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachePolicy")
            .field("custom_key", &self.key.is_some())
            .field("ttl", &self.ttl)
            .finish()
    }
}

impl CachePolicy {
    /// Caches forever, keyed by the whole input.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the time to live.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Computes the key from the input's JSON (e.g. to ignore some fields).
    pub fn key(mut self, f: impl Fn(&Value) -> String + Send + Sync + 'static) -> Self {
        self.key = Some(Arc::new(f));
        self
    }

    /// The cache key of an input.
    pub(crate) fn key_of(&self, input: &Value) -> String {
        let raw = match &self.key {
            Some(f) => f(input),
            None => input.to_string(),
        };
        uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, raw.as_bytes()).simple().to_string()
    }
}

/// Where cached node writes are kept.
#[async_trait]
pub trait NodeCache: fmt::Debug + Send + Sync {
    /// The writes cached for `node` under `key`, if present and not expired.
    async fn get(&self, node: &str, key: &str) -> Option<Vec<(String, Value)>>;
    /// Caches writes.
    async fn set(&self, node: &str, key: &str, writes: Vec<(String, Value)>, ttl: Option<Duration>);
    /// Drops the entries of these nodes (all nodes when `None`).
    async fn clear(&self, nodes: Option<&[String]>);
}

type Entry = (Vec<(String, Value)>, Option<tokio::time::Instant>);

/// A process-local [`NodeCache`].
#[derive(Debug, Default)]
pub struct InMemoryCache {
    entries: Mutex<HashMap<(String, String), Entry>>,
}

impl InMemoryCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl NodeCache for InMemoryCache {
    async fn get(&self, node: &str, key: &str) -> Option<Vec<(String, Value)>> {
        let mut entries = self.entries.lock().ok()?;
        let k = (node.to_owned(), key.to_owned());
        match entries.get(&k) {
            Some((_, Some(expires))) if *expires <= tokio::time::Instant::now() => {
                entries.remove(&k);
                None
            }
            Some((writes, _)) => Some(writes.clone()),
            None => None,
        }
    }

    async fn set(&self, node: &str, key: &str, writes: Vec<(String, Value)>, ttl: Option<Duration>) {
        if let Ok(mut entries) = self.entries.lock() {
            let expires = ttl.map(|t| tokio::time::Instant::now() + t);
            entries.insert((node.to_owned(), key.to_owned()), (writes, expires));
        }
    }

    async fn clear(&self, nodes: Option<&[String]>) {
        if let Ok(mut entries) = self.entries.lock() {
            match nodes {
                None => entries.clear(),
                Some(nodes) => entries.retain(|(n, _), _| !nodes.contains(n)),
            }
        }
    }
}
