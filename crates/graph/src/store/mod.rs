//! The store: long-term memory shared across threads, as LangGraph's `BaseStore`.
//!
//! Items are JSON objects filed under a namespace (a path of labels such as `["users", "42", "prefs"]`)
//! and a key. A store gets, puts and deletes items, searches a namespace prefix with filters (and, when
//! it has a vector index, by similarity to a query), lists namespaces, and forgets items whose TTL ran
//! out. [`InMemoryStore`] is the reference implementation; [`conformance`] holds the cases every store
//! must pass.

use std::fmt::Debug;
use std::time::SystemTime;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub mod conformance;
mod error;
mod filter;
mod index;
mod memory;
mod namespace;
mod options;
mod path;
mod put;
mod sweeper;
pub(crate) mod time;

pub use error::StoreError;
pub use filter::{matches_filter, validate_filter};
pub use index::{IndexConfig, cosine_similarity};
pub use memory::{InMemoryStore, TtlConfig};
pub use namespace::{namespace, validate_namespace};
pub use options::{IndexFields, ListNamespacesOptions, PutOptions, SearchOptions, Ttl};
pub use path::texts_at_path;
pub use put::{PreparedPut, prepare_put, resolve_ttl};
pub use sweeper::{TtlSweeper, spawn_ttl_sweeper};

/// A stored item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// Where it is filed.
    pub namespace: Vec<String>,
    /// Its key in the namespace.
    pub key: String,
    /// The value: always a JSON object.
    pub value: Value,
    /// When it was first put.
    #[serde(with = "time::rfc3339")]
    pub created_at: SystemTime,
    /// When it was last put.
    #[serde(with = "time::rfc3339")]
    pub updated_at: SystemTime,
}

/// An item found by [`Store::search`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchItem {
    /// The item.
    #[serde(flatten)]
    pub item: Item,
    /// Its similarity to the query (cosine, higher is closer); `None` without a query or a vector.
    pub score: Option<f64>,
}

/// Namespaced key-value memory shared across threads; durable implementations live in
/// `weft-integrations`.
#[async_trait]
pub trait Store: Debug + Send + Sync {
    /// The item at `namespace` and `key` (`None` when absent or expired). `refresh_ttl` (default: the
    /// store's setting) restarts the item's TTL.
    async fn get_with(
        &self,
        namespace: &[String],
        key: &str,
        refresh_ttl: Option<bool>,
    ) -> Result<Option<Item>, StoreError>;

    /// Creates or replaces an item (a replaced item keeps its `created_at`). The namespace is validated
    /// ([`validate_namespace`]) and `value` must be a JSON object.
    async fn put_with(
        &self,
        namespace: &[String],
        key: &str,
        value: Value,
        options: PutOptions,
    ) -> Result<(), StoreError>;

    /// Deletes an item; deleting an absent item is not an error.
    async fn delete(&self, namespace: &[String], key: &str) -> Result<(), StoreError>;

    /// Items whose namespace starts with `namespace_prefix` (whole labels; empty: every namespace) and
    /// whose value matches `options.filter`. With a query and a vector index: ranked by similarity
    /// (items without a vector come last); otherwise newest update first. Then `offset` and `limit`.
    async fn search(
        &self,
        namespace_prefix: &[String],
        options: SearchOptions,
    ) -> Result<Vec<SearchItem>, StoreError>;

    /// The namespaces that hold items, sorted, filtered by prefix and suffix (`"*"` matches any one
    /// label), cut to `max_depth` labels (and deduplicated), then `offset` and `limit`.
    async fn list_namespaces(&self, options: ListNamespacesOptions) -> Result<Vec<Vec<String>>, StoreError>;

    /// Deletes the items whose TTL ran out; returns how many it removed. Expired items are invisible to
    /// reads at once whether or not a sweep ran; a sweep only reclaims their space. A store that wraps
    /// another forwards it.
    async fn sweep_ttl(&self) -> Result<u64, StoreError>;

    /// The item at `namespace` and `key`, refreshing its TTL as the store is configured to.
    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>, StoreError> {
        self.get_with(namespace, key, None).await
    }

    /// Creates or replaces an item with the default index fields and TTL.
    async fn put(&self, namespace: &[String], key: &str, value: Value) -> Result<(), StoreError> {
        self.put_with(namespace, key, value, PutOptions::default()).await
    }
}
