//! Options of store calls.

use std::time::Duration;

use serde_json::{Map, Value};

/// Which fields of a put item the vector index embeds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum IndexFields {
    /// The fields of the store's [`IndexConfig`](super::IndexConfig).
    #[default]
    Default,
    /// Not indexed: the item has no vector and is not ranked by similarity.
    Off,
    /// These fields (JSON paths such as `"text"`, `"tags[*]"` or `"$"` for the whole value).
    Fields(Vec<String>),
}

/// How long a put item lives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Ttl {
    /// The store's default TTL (none unless configured).
    #[default]
    Default,
    /// Forever.
    Never,
    /// This long after the put, or after the last read that refreshes it.
    After(Duration),
}

impl Ttl {
    /// A TTL in minutes, LangGraph's unit (negative or non-finite values mean zero; [`Ttl::try_minutes`]
    /// refuses them instead).
    pub fn minutes(minutes: f64) -> Self {
        Self::try_minutes(minutes).unwrap_or(Self::After(Duration::ZERO))
    }

    /// A TTL in minutes, or [`StoreError::InvalidTtl`](super::StoreError::InvalidTtl) when `minutes` is
    /// negative, NaN, infinite or too large for a [`Duration`].
    pub fn try_minutes(minutes: f64) -> Result<Self, super::StoreError> {
        if !minutes.is_finite() || minutes < 0.0 {
            return Err(super::StoreError::InvalidTtl(minutes));
        }
        Duration::try_from_secs_f64(minutes * 60.0)
            .map(Self::After)
            .map_err(|_| super::StoreError::InvalidTtl(minutes))
    }
}

/// Options of [`Store::put_with`](super::Store::put_with).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PutOptions {
    /// Which fields to embed.
    pub index: IndexFields,
    /// How long the item lives.
    pub ttl: Ttl,
}

/// Options of [`Store::search`](super::Store::search).
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOptions {
    /// Rank by similarity to this text (stores without a vector index ignore it).
    pub query: Option<String>,
    /// Keep items whose value matches: top-level keys equal (nested maps compared recursively as
    /// containment, lists element by element) or operator maps `{"$gt": 3}` with `$eq $ne $gt $gte $lt
    /// $lte` (ordering between numbers or between strings).
    pub filter: Map<String, Value>,
    /// At most this many (default 10).
    pub limit: usize,
    /// Skip this many first (default 0).
    pub offset: usize,
    /// Restart the TTL of returned items (default: the store's setting).
    pub refresh_ttl: Option<bool>,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self { query: None, filter: Map::new(), limit: 10, offset: 0, refresh_ttl: None }
    }
}

impl SearchOptions {
    /// Ranks by similarity to `query`.
    pub fn query(mut self, query: impl Into<String>) -> Self {
        self.query = Some(query.into());
        self
    }

    /// Filters on the item value (a JSON object; anything else filters nothing).
    pub fn filter(mut self, filter: Value) -> Self {
        self.filter = match filter {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        self
    }

    /// At most `limit` items.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Skips the first `offset` items.
    pub fn offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self
    }
}

/// Options of [`Store::list_namespaces`](super::Store::list_namespaces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListNamespacesOptions {
    /// Keep namespaces starting with these labels (`"*"` matches any label).
    pub prefix: Option<Vec<String>>,
    /// Keep namespaces ending with these labels (`"*"` matches any label).
    pub suffix: Option<Vec<String>>,
    /// Cut namespaces to this many labels, then deduplicate.
    pub max_depth: Option<usize>,
    /// At most this many (default 100).
    pub limit: usize,
    /// Skip this many first (default 0).
    pub offset: usize,
}

impl Default for ListNamespacesOptions {
    fn default() -> Self {
        Self { prefix: None, suffix: None, max_depth: None, limit: 100, offset: 0 }
    }
}
