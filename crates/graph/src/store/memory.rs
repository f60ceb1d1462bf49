//! `InMemoryStore`: a store in process memory, with an optional vector index and TTLs.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use serde_json::Value;
use tokio::time::Instant;

use super::filter::{matches, validate_filter};
use super::namespace::{matches_prefix, matches_suffix};
use super::{
    IndexConfig, Item, ListNamespacesOptions, PutOptions, SearchItem, SearchOptions, Store, StoreError,
    cosine_similarity,
};

/// TTL settings of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtlConfig {
    /// The TTL of items put with [`Ttl::Default`](crate::store::Ttl::Default) (`None`: they never expire).
    pub default_ttl: Option<Duration>,
    /// Whether reads (get, search) restart the TTL of the items they return, unless the call says.
    pub refresh_on_read: bool,
}

impl Default for TtlConfig {
    fn default() -> Self {
        Self { default_ttl: None, refresh_on_read: true }
    }
}

/// A store that keeps items in memory, with an optional vector index ([`IndexConfig`]) and TTLs.
///
/// Expired items are invisible at once and dropped on the next search, namespace listing or
/// [`sweep_expired`](Self::sweep_expired). TTLs run on tokio's clock (`tokio::time::pause` moves them).
/// Nothing survives the process.
#[derive(Debug, Default)]
pub struct InMemoryStore {
    data: Mutex<Data>,
    index: Option<IndexConfig>,
    ttl: TtlConfig,
}

#[derive(Debug, Default)]
struct Data {
    namespaces: BTreeMap<Vec<String>, BTreeMap<String, Stored>>,
    /// Bumped by every put: orders items by last update.
    seq: u64,
}

#[derive(Debug)]
struct Stored {
    item: Item,
    seq: u64,
    vectors: Vec<Vec<f32>>,
    ttl: Option<Duration>,
    expires_at: Option<Instant>,
}

impl Stored {
    fn expired(&self, now: Instant) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }

    fn refresh(&mut self, now: Instant) {
        if let Some(ttl) = self.ttl {
            self.expires_at = now.checked_add(ttl);
        }
    }
}

impl Data {
    fn purge(&mut self, now: Instant) -> usize {
        let mut dropped = 0;
        self.namespaces.retain(|_, items| {
            let before = items.len();
            items.retain(|_, s| !s.expired(now));
            dropped += before - items.len();
            !items.is_empty()
        });
        dropped
    }
}

impl InMemoryStore {
    /// An empty store without a vector index or default TTL.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets (or, with `None`, removes) the vector index.
    pub fn with_index(mut self, index: impl Into<Option<IndexConfig>>) -> Self {
        self.index = index.into();
        self
    }

    /// Sets the TTL settings.
    pub fn with_ttl(mut self, ttl: TtlConfig) -> Self {
        self.ttl = ttl;
        self
    }

    /// The vector index, if any.
    pub fn index(&self) -> Option<&IndexConfig> {
        self.index.as_ref()
    }

    /// Drops expired items now; returns how many.
    pub fn sweep_expired(&self) -> Result<usize, StoreError> {
        Ok(self.lock()?.purge(Instant::now()))
    }

    fn lock(&self) -> Result<MutexGuard<'_, Data>, StoreError> {
        self.data.lock().map_err(|_| StoreError::Backend("in-memory store lock poisoned".into()))
    }
}

#[async_trait]
impl Store for InMemoryStore {
    async fn get_with(
        &self,
        namespace: &[String],
        key: &str,
        refresh_ttl: Option<bool>,
    ) -> Result<Option<Item>, StoreError> {
        let now = Instant::now();
        let mut data = self.lock()?;
        let Some(items) = data.namespaces.get_mut(namespace) else { return Ok(None) };
        let Some(stored) = items.get_mut(key) else { return Ok(None) };
        if stored.expired(now) {
            items.remove(key);
            if items.is_empty() {
                data.namespaces.remove(namespace);
            }
            return Ok(None);
        }
        if refresh_ttl.unwrap_or(self.ttl.refresh_on_read) {
            stored.refresh(now);
        }
        Ok(Some(stored.item.clone()))
    }

    async fn put_with(
        &self,
        namespace: &[String],
        key: &str,
        value: Value,
        options: PutOptions,
    ) -> Result<(), StoreError> {
        let prepared =
            crate::store::prepare_put(namespace, key, &value, &options, self.index.as_ref(), &self.ttl)
                .await?;
        let vectors = prepared.vectors;
        let ttl = prepared.ttl;
        let (now, wall) = (Instant::now(), SystemTime::now());
        let mut data = self.lock()?;
        data.seq += 1;
        let seq = data.seq;
        let items = data.namespaces.entry(namespace.to_vec()).or_default();
        let created_at = items.get(key).filter(|s| !s.expired(now)).map_or(wall, |s| s.item.created_at);
        let item =
            Item { namespace: namespace.to_vec(), key: key.to_owned(), value, created_at, updated_at: wall };
        let expires_at = ttl.and_then(|ttl| now.checked_add(ttl));
        items.insert(key.to_owned(), Stored { item, seq, vectors, ttl, expires_at });
        Ok(())
    }

    async fn delete(&self, namespace: &[String], key: &str) -> Result<(), StoreError> {
        let mut data = self.lock()?;
        if let Some(items) = data.namespaces.get_mut(namespace) {
            items.remove(key);
            if items.is_empty() {
                data.namespaces.remove(namespace);
            }
        }
        Ok(())
    }

    async fn search(
        &self,
        namespace_prefix: &[String],
        options: SearchOptions,
    ) -> Result<Vec<SearchItem>, StoreError> {
        validate_filter(&options.filter)?;
        let query = match (&options.query, &self.index) {
            (Some(query), Some(index)) => Some(index.embed_query(query).await?),
            _ => None,
        };
        let now = Instant::now();
        let mut data = self.lock()?;
        data.purge(now);
        let mut hits: Vec<(Option<f64>, u64, Vec<String>, String)> = Vec::new();
        for (ns, items) in data.namespaces.iter().filter(|(ns, _)| ns.starts_with(namespace_prefix)) {
            for (key, stored) in items.iter().filter(|(_, s)| matches(&s.item.value, &options.filter)) {
                let score = query
                    .as_ref()
                    .and_then(|q| stored.vectors.iter().map(|v| cosine_similarity(q, v)).reduce(f64::max));
                hits.push((score, stored.seq, ns.clone(), key.clone()));
            }
        }
        // Scored items first, best first; then the rest; ties by latest update.
        hits.sort_by(|a, b| {
            b.0.is_some()
                .cmp(&a.0.is_some())
                .then(b.0.unwrap_or(0.0).total_cmp(&a.0.unwrap_or(0.0)))
                .then(b.1.cmp(&a.1))
        });
        let refresh = options.refresh_ttl.unwrap_or(self.ttl.refresh_on_read);
        let mut out = Vec::new();
        for (score, _, ns, key) in hits.into_iter().skip(options.offset).take(options.limit) {
            if let Some(stored) = data.namespaces.get_mut(&ns).and_then(|items| items.get_mut(&key)) {
                if refresh {
                    stored.refresh(now);
                }
                out.push(SearchItem { item: stored.item.clone(), score });
            }
        }
        Ok(out)
    }

    async fn sweep_ttl(&self) -> Result<u64, StoreError> {
        Ok(u64::try_from(self.sweep_expired()?).unwrap_or(u64::MAX))
    }

    async fn list_namespaces(&self, options: ListNamespacesOptions) -> Result<Vec<Vec<String>>, StoreError> {
        let mut data = self.lock()?;
        data.purge(Instant::now());
        let prefix = options.prefix.as_deref().unwrap_or_default();
        let suffix = options.suffix.as_deref().unwrap_or_default();
        let mut found: Vec<Vec<String>> = data
            .namespaces
            .keys()
            .filter(|ns| matches_prefix(ns, prefix) && matches_suffix(ns, suffix))
            .map(|ns| match options.max_depth {
                Some(depth) => ns.iter().take(depth).cloned().collect(),
                None => ns.clone(),
            })
            .collect();
        found.sort();
        found.dedup();
        Ok(found.into_iter().skip(options.offset).take(options.limit).collect())
    }
}
