//! The store's operations shared by the SQL stores: each backend supplies its queries as
//! [`StoreRows`]; [`SqlStore`] does the rest (namespace checks, TTL refreshes, filters, ranking, paging).

use std::collections::HashMap;
use std::time::SystemTime;

use async_trait::async_trait;
use serde_json::Value;
use weft_graph::store::{
    IndexConfig, Item, ListNamespacesOptions, PutOptions, SearchItem, SearchOptions, StoreError, TtlConfig,
    validate_filter,
};

use super::store_rows::{
    self, Candidate, ItemRow, PrefixRange, duration_micros, keep_matching, micros, ns_text, prefix_range,
    rank,
};

/// A row of `store_items` as read: prefix, key, value, created at, updated at, TTL (microseconds).
pub(crate) type Row = (String, String, String, i64, i64, Option<i64>);

/// A row of `store_vectors` as read: prefix, key, embedding bytes.
pub(crate) type VectorRow = (String, String, Vec<u8>);

/// What `scan_items` does with each row: `Ok(false)` stops the scan.
pub(crate) type Visit<'a, T> = &'a mut (dyn FnMut(T) -> Result<bool, StoreError> + Send);

/// An item to store.
#[derive(Debug)]
pub(crate) struct NewItem<'a> {
    /// Its namespace as stored.
    pub(crate) prefix: &'a str,
    pub(crate) key: &'a str,
    /// Its value as JSON text.
    pub(crate) value: &'a str,
    /// The time of the put (microseconds since the Unix epoch).
    pub(crate) now: i64,
    /// Its TTL in microseconds.
    pub(crate) ttl: Option<i64>,
    /// The embeddings of its indexed fields.
    pub(crate) vectors: &'a [Vec<f32>],
}

/// The queries of one SQL store (its dialect and driver); every error is already a [`StoreError`].
#[async_trait]
pub(crate) trait StoreRows: Send + Sync {
    /// Whether text (a label or a key) holds a character the database cannot store (a label with a
    /// period is never stored either).
    fn unstorable_text(text: &str) -> bool;

    /// Why a key that [`unstorable_text`](Self::unstorable_text) refuses cannot be stored.
    const UNSTORABLE_KEY: &'static str;

    /// The live item at `prefix` and `key` at `now`.
    async fn item(&self, prefix: &str, key: &str, now: i64) -> Result<Option<Row>, StoreError>;

    /// Stores an item (replacing it and its vectors), in one transaction.
    async fn put_item(&self, item: NewItem<'_>) -> Result<(), StoreError>;

    /// Deletes an item and its vectors.
    async fn delete_item(&self, prefix: &str, key: &str) -> Result<(), StoreError>;

    /// Restarts the TTL of the items (prefix, key) at `now`; `items` is not empty.
    async fn refresh(&self, items: &[(String, String)], now: i64) -> Result<(), StoreError>;

    /// Deletes the items expired at `now` (and their vectors); returns how many.
    async fn sweep(&self, now: i64) -> Result<u64, StoreError>;

    /// Visits the live items in `range` at `now`, newest update first, until `visit` says stop; at most
    /// `limit` of them are needed when given.
    async fn scan_items(
        &self,
        range: &PrefixRange,
        now: i64,
        limit: Option<i64>,
        visit: Visit<'_, Row>,
    ) -> Result<(), StoreError>;

    /// Visits the vectors of the live items in `range` at `now` (each item's in index order).
    async fn scan_vectors(
        &self,
        range: &PrefixRange,
        now: i64,
        visit: Visit<'_, VectorRow>,
    ) -> Result<(), StoreError>;

    /// The stored namespaces in `range` holding live items at `now`.
    async fn namespaces(&self, range: &PrefixRange, now: i64) -> Result<Vec<String>, StoreError>;
}

/// A store on SQL rows: the backend's queries with the vector index and TTL settings.
#[derive(Debug)]
pub(crate) struct SqlStore<B> {
    pub(crate) rows: B,
    pub(crate) index: Option<IndexConfig>,
    pub(crate) ttl: TtlConfig,
}

fn item_of((prefix, key, value, created_at, updated_at, _): Row) -> Result<Item, StoreError> {
    ItemRow { prefix, key, value, created_at, updated_at }.into_item()
}

fn now() -> i64 {
    micros(SystemTime::now())
}

impl<B: StoreRows> SqlStore<B> {
    /// A store on `rows` without an index and with default TTL settings.
    pub(crate) fn new(rows: B) -> Self {
        Self { rows, index: None, ttl: TtlConfig::default() }
    }

    /// Labels with a period (or a character the database cannot store) are never stored, so a namespace
    /// or prefix with one matches nothing.
    fn unstorable(namespace: &[String]) -> bool {
        namespace.iter().any(|label| label.contains('.') || B::unstorable_text(label))
    }

    /// Deletes expired items now; returns how many.
    pub(crate) async fn sweep_expired(&self) -> Result<u64, StoreError> {
        self.rows.sweep(now()).await
    }

    /// Restarts the TTL of items (namespace text, key).
    async fn refresh(&self, items: &[(String, String)]) -> Result<(), StoreError> {
        if items.is_empty() {
            return Ok(());
        }
        self.rows.refresh(items, now()).await
    }

    /// [`Store::get_with`](weft_graph::store::Store::get_with).
    pub(crate) async fn get_with(
        &self,
        namespace: &[String],
        key: &str,
        refresh_ttl: Option<bool>,
    ) -> Result<Option<Item>, StoreError> {
        if namespace.is_empty() || Self::unstorable(namespace) || B::unstorable_text(key) {
            return Ok(None);
        }
        let prefix = ns_text(namespace);
        let Some(row) = self.rows.item(&prefix, key, now()).await? else { return Ok(None) };
        if row.5.is_some() && refresh_ttl.unwrap_or(self.ttl.refresh_on_read) {
            self.refresh(&[(prefix, key.to_owned())]).await?;
        }
        item_of(row).map(Some)
    }

    /// [`Store::put_with`](weft_graph::store::Store::put_with).
    pub(crate) async fn put_with(
        &self,
        namespace: &[String],
        key: &str,
        value: Value,
        options: PutOptions,
    ) -> Result<(), StoreError> {
        if B::unstorable_text(key) {
            return Err(StoreError::InvalidValue {
                namespace: namespace.to_vec(),
                key: key.to_owned(),
                reason: B::UNSTORABLE_KEY.into(),
            });
        }
        let prepared =
            weft_graph::store::prepare_put(namespace, key, &value, &options, self.index.as_ref(), &self.ttl)
                .await?;
        let (prefix, text) = (ns_text(namespace), value.to_string());
        let ttl = prepared.ttl.map(duration_micros);
        let item =
            NewItem { prefix: &prefix, key, value: &text, now: now(), ttl, vectors: &prepared.vectors };
        self.rows.put_item(item).await
    }

    /// [`Store::delete`](weft_graph::store::Store::delete).
    pub(crate) async fn delete(&self, namespace: &[String], key: &str) -> Result<(), StoreError> {
        if namespace.is_empty() || Self::unstorable(namespace) || B::unstorable_text(key) {
            return Ok(());
        }
        self.rows.delete_item(&ns_text(namespace), key).await
    }

    /// [`Store::search`](weft_graph::store::Store::search).
    pub(crate) async fn search(
        &self,
        namespace_prefix: &[String],
        options: SearchOptions,
    ) -> Result<Vec<SearchItem>, StoreError> {
        validate_filter(&options.filter)?;
        if Self::unstorable(namespace_prefix) {
            return Ok(Vec::new());
        }
        let query = match (&options.query, &self.index) {
            (Some(query), Some(index)) => Some(index.embed_query(query).await?),
            _ => None,
        };
        let range = prefix_range(namespace_prefix);
        let wanted = options.offset.saturating_add(options.limit);
        // Without a filter or a query, the newest `wanted` rows are the page's.
        let limit =
            (options.filter.is_empty() && query.is_none()).then(|| i64::try_from(wanted).ok()).flatten();
        let mut found: Vec<(Item, bool)> = Vec::new();
        let mut visit = |row: Row| {
            let has_ttl = row.5.is_some();
            let item = item_of(row)?;
            if keep_matching(&item, &options.filter) {
                found.push((item, has_ttl));
                if query.is_none() && found.len() >= wanted {
                    return Ok(false);
                }
            }
            Ok(true)
        };
        self.rows.scan_items(&range, now(), limit, &mut visit).await?;
        let mut vectors: HashMap<(String, String), Vec<Vec<f32>>> = HashMap::new();
        if query.is_some() {
            let mut visit = |(prefix, key, bytes): VectorRow| {
                if let Some(vector) = store_rows::vector_from_bytes(&bytes) {
                    vectors.entry((prefix, key)).or_default().push(vector);
                }
                Ok(true)
            };
            self.rows.scan_vectors(&range, now(), &mut visit).await?;
        }
        let ttls: HashMap<(String, String), bool> =
            found.iter().map(|(item, ttl)| ((ns_text(&item.namespace), item.key.clone()), *ttl)).collect();
        let candidates = found
            .into_iter()
            .map(|(item, _)| {
                let vectors =
                    vectors.remove(&(ns_text(&item.namespace), item.key.clone())).unwrap_or_default();
                Candidate { item, vectors }
            })
            .collect();
        let hits = rank(candidates, query.as_deref(), options.offset, options.limit);
        if options.refresh_ttl.unwrap_or(self.ttl.refresh_on_read) {
            let refresh: Vec<(String, String)> = hits
                .iter()
                .map(|h| (ns_text(&h.item.namespace), h.item.key.clone()))
                .filter(|k| ttls.get(k).copied().unwrap_or(false))
                .collect();
            self.refresh(&refresh).await?;
        }
        Ok(hits)
    }

    /// [`Store::list_namespaces`](weft_graph::store::Store::list_namespaces).
    pub(crate) async fn list_namespaces(
        &self,
        options: ListNamespacesOptions,
    ) -> Result<Vec<Vec<String>>, StoreError> {
        let head = store_rows::literal_head(options.prefix.as_deref());
        if Self::unstorable(&head) {
            return Ok(Vec::new());
        }
        let stored = self.rows.namespaces(&prefix_range(&head), now()).await?;
        Ok(store_rows::list_namespaces(stored, &options))
    }
}

/// The API a public SQL store type shares, over its field `$field` (a [`SqlStore`]): `Debug` (the
/// backend's connection as `db`), the builder methods `with_index` and `with_ttl`, `sweep_expired`, and
/// [`Store`](weft_graph::store::Store), each method forwarded to the [`SqlStore`].
macro_rules! sql_store_api {
    ($store:ident, $field:ident) => {
        impl std::fmt::Debug for $store {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($store))
                    .field("db", &self.$field.rows)
                    .field("index", &self.$field.index)
                    .field("ttl", &self.$field.ttl)
                    .finish()
            }
        }

        impl $store {
            /// Sets (or, with `None`, removes) the vector index.
            pub fn with_index(mut self, index: impl Into<Option<weft_graph::store::IndexConfig>>) -> Self {
                self.$field.index = index.into();
                self
            }

            /// Sets the TTL settings.
            pub fn with_ttl(mut self, ttl: weft_graph::store::TtlConfig) -> Self {
                self.$field.ttl = ttl;
                self
            }

            /// Deletes expired items now; returns how many.
            pub async fn sweep_expired(&self) -> Result<u64, weft_graph::store::StoreError> {
                self.$field.sweep_expired().await
            }
        }

        #[async_trait::async_trait]
        impl weft_graph::store::Store for $store {
            async fn get_with(
                &self,
                namespace: &[String],
                key: &str,
                refresh_ttl: Option<bool>,
            ) -> Result<Option<weft_graph::store::Item>, weft_graph::store::StoreError> {
                self.$field.get_with(namespace, key, refresh_ttl).await
            }

            async fn put_with(
                &self,
                namespace: &[String],
                key: &str,
                value: serde_json::Value,
                options: weft_graph::store::PutOptions,
            ) -> Result<(), weft_graph::store::StoreError> {
                self.$field.put_with(namespace, key, value, options).await
            }

            async fn delete(
                &self,
                namespace: &[String],
                key: &str,
            ) -> Result<(), weft_graph::store::StoreError> {
                self.$field.delete(namespace, key).await
            }

            async fn search(
                &self,
                namespace_prefix: &[String],
                options: weft_graph::store::SearchOptions,
            ) -> Result<Vec<weft_graph::store::SearchItem>, weft_graph::store::StoreError> {
                self.$field.search(namespace_prefix, options).await
            }

            async fn sweep_ttl(&self) -> Result<u64, weft_graph::store::StoreError> {
                self.$field.sweep_expired().await
            }

            async fn list_namespaces(
                &self,
                options: weft_graph::store::ListNamespacesOptions,
            ) -> Result<Vec<Vec<String>>, weft_graph::store::StoreError> {
                self.$field.list_namespaces(options).await
            }
        }
    };
}
pub(crate) use sql_store_api;
