//! `SqliteStore`: the store on SQLite.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::time::SystemTime;

use async_trait::async_trait;
use futures::TryStreamExt;
use serde_json::Value;
use weft_graph::store::{
    IndexConfig, Item, ListNamespacesOptions, PutOptions, SearchItem, SearchOptions, Store, StoreError,
    TtlConfig, validate_filter,
};

use super::statements::{NAMESPACES, PUT_ITEM, REFRESH, SEARCH, VECTORS};
use super::{Db, SqliteOptions, SqlitePool, schema};
use crate::sql::store_rows::{
    self, Candidate, ItemRow, duration_micros, keep_matching, micros, ns_text, prefix_range, rank,
};

/// A store on SQLite: items as JSON text under their namespace (labels joined by `.`), TTLs as expiry
/// times, and, with a vector index, the embeddings of each item's fields.
///
/// Filters and similarity are computed in weft over the rows under the searched namespace prefix: a
/// search reads every live item under the prefix (newest update first, stopping once a page is full when
/// there is no query), so keep prefixes narrow for stores of many items. Expired items are invisible at
/// once and deleted by [`sweep_expired`](Self::sweep_expired).
pub struct SqliteStore {
    db: Db,
    index: Option<IndexConfig>,
    ttl: TtlConfig,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("db", &self.db)
            .field("index", &self.index)
            .field("ttl", &self.ttl)
            .finish()
    }
}

fn backend(e: sqlx::Error) -> StoreError {
    StoreError::Backend(format!("sqlite: {e}"))
}

type Row = (String, String, String, i64, i64, Option<i64>);

impl SqliteStore {
    /// Opens (creating it if missing) the database file at `path` with default options.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, SqliteOptions::default()).await
    }

    /// Opens (creating it if missing) the database file at `path` with `options`.
    pub async fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, StoreError> {
        Self::with_db(Db::open(path.as_ref(), &options).await.map_err(|f| StoreError::Backend(f.message))?)
            .await
    }

    /// A private in-memory database: nothing survives the store.
    pub async fn in_memory() -> Result<Self, StoreError> {
        Self::with_db(Db::in_memory().await.map_err(|f| StoreError::Backend(f.message))?).await
    }

    /// A store on the caller's pool (for example [`SqliteSaver::pool`](super::SqliteSaver::pool), to
    /// keep checkpoints and memory in one file).
    pub async fn from_pool(pool: SqlitePool) -> Result<Self, StoreError> {
        Self::with_db(Db::from_pool(pool)).await
    }

    async fn with_db(db: Db) -> Result<Self, StoreError> {
        db.migrate("store", schema::STORE).await.map_err(|f| StoreError::Backend(f.message))?;
        Ok(Self { db, index: None, ttl: TtlConfig::default() })
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

    /// Deletes expired items now; returns how many.
    pub async fn sweep_expired(&self) -> Result<u64, StoreError> {
        let now = micros(SystemTime::now());
        let mut tx = self.db.writer.begin_with("BEGIN IMMEDIATE").await.map_err(backend)?;
        sqlx::query(
            "DELETE FROM store_vectors WHERE EXISTS (SELECT 1 FROM store_items i WHERE i.prefix = \
             store_vectors.prefix AND i.key = store_vectors.key AND i.expires_at <= ?1)",
        )
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        let done = sqlx::query("DELETE FROM store_items WHERE expires_at <= ?1")
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(done.rows_affected())
    }

    /// Restarts the TTL of items.
    async fn refresh(&self, items: &[(String, String)]) -> Result<(), StoreError> {
        if items.is_empty() {
            return Ok(());
        }
        let now = micros(SystemTime::now());
        let mut tx = self.db.writer.begin_with("BEGIN IMMEDIATE").await.map_err(backend)?;
        for (prefix, key) in items {
            sqlx::query(REFRESH).bind(prefix).bind(key).bind(now).execute(&mut *tx).await.map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }
}

fn item_of((prefix, key, value, created_at, updated_at, _): Row) -> Result<Item, StoreError> {
    ItemRow { prefix, key, value, created_at, updated_at }.into_item()
}

/// Labels with a period are never stored, so a namespace or prefix with one matches nothing.
fn has_dotted_label(namespace: &[String]) -> bool {
    namespace.iter().any(|label| label.contains('.'))
}

#[async_trait]
impl Store for SqliteStore {
    async fn get_with(
        &self,
        namespace: &[String],
        key: &str,
        refresh_ttl: Option<bool>,
    ) -> Result<Option<Item>, StoreError> {
        if namespace.is_empty() || has_dotted_label(namespace) {
            return Ok(None);
        }
        let prefix = ns_text(namespace);
        let row: Option<Row> = sqlx::query_as(
            "SELECT prefix, key, value, created_at, updated_at, ttl_micros FROM store_items \
             WHERE prefix = ?1 AND key = ?2 AND (expires_at IS NULL OR expires_at > ?3)",
        )
        .bind(&prefix)
        .bind(key)
        .bind(micros(SystemTime::now()))
        .fetch_optional(&self.db.reader)
        .await
        .map_err(backend)?;
        let Some(row) = row else { return Ok(None) };
        if row.5.is_some() && refresh_ttl.unwrap_or(self.ttl.refresh_on_read) {
            self.refresh(&[(prefix, key.to_owned())]).await?;
        }
        item_of(row).map(Some)
    }

    async fn put_with(
        &self,
        namespace: &[String],
        key: &str,
        value: Value,
        options: PutOptions,
    ) -> Result<(), StoreError> {
        let prepared =
            weft_graph::store::prepare_put(namespace, key, &value, &options, self.index.as_ref(), &self.ttl)
                .await?;
        let vectors = prepared.vectors;
        let ttl = prepared.ttl.map(duration_micros);
        let now = micros(SystemTime::now());
        let prefix = ns_text(namespace);
        let mut tx = self.db.writer.begin_with("BEGIN IMMEDIATE").await.map_err(backend)?;
        sqlx::query(PUT_ITEM)
            .bind(&prefix)
            .bind(key)
            .bind(value.to_string())
            .bind(now)
            .bind(ttl.map(|t| now.saturating_add(t)))
            .bind(ttl)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        sqlx::query("DELETE FROM store_vectors WHERE prefix = ?1 AND key = ?2")
            .bind(&prefix)
            .bind(key)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        for (idx, vector) in vectors.iter().enumerate() {
            sqlx::query("INSERT INTO store_vectors (prefix, key, idx, embedding) VALUES (?1, ?2, ?3, ?4)")
                .bind(&prefix)
                .bind(key)
                .bind(i64::try_from(idx).unwrap_or(i64::MAX))
                .bind(store_rows::vector_bytes(vector))
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }

    async fn delete(&self, namespace: &[String], key: &str) -> Result<(), StoreError> {
        if namespace.is_empty() || has_dotted_label(namespace) {
            return Ok(());
        }
        let prefix = ns_text(namespace);
        let mut tx = self.db.writer.begin_with("BEGIN IMMEDIATE").await.map_err(backend)?;
        for statement in [
            "DELETE FROM store_vectors WHERE prefix = ?1 AND key = ?2",
            "DELETE FROM store_items WHERE prefix = ?1 AND key = ?2",
        ] {
            sqlx::query(statement).bind(&prefix).bind(key).execute(&mut *tx).await.map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }

    async fn search(
        &self,
        namespace_prefix: &[String],
        options: SearchOptions,
    ) -> Result<Vec<SearchItem>, StoreError> {
        validate_filter(&options.filter)?;
        if has_dotted_label(namespace_prefix) {
            return Ok(Vec::new());
        }
        let query = match (&options.query, &self.index) {
            (Some(query), Some(index)) => Some(index.embed_query(query).await?),
            _ => None,
        };
        let range = prefix_range(namespace_prefix);
        let wanted = options.offset.saturating_add(options.limit);
        let mut found: Vec<(Item, Option<i64>)> = Vec::new();
        let mut conn = self.db.reader.acquire().await.map_err(backend)?;
        {
            let mut rows = sqlx::query_as::<_, Row>(SEARCH)
                .bind(range.all)
                .bind(&range.exact)
                .bind(&range.lower)
                .bind(&range.upper)
                .bind(micros(SystemTime::now()))
                .fetch(&mut *conn);
            while let Some(row) = rows.try_next().await.map_err(backend)? {
                let ttl = row.5;
                let item = item_of(row)?;
                if keep_matching(&item, &options.filter) {
                    found.push((item, ttl));
                    if query.is_none() && found.len() >= wanted {
                        break;
                    }
                }
            }
        }
        let mut vectors: HashMap<(String, String), Vec<Vec<f32>>> = HashMap::new();
        if query.is_some() {
            let mut rows = sqlx::query_as::<_, (String, String, Vec<u8>)>(VECTORS)
                .bind(range.all)
                .bind(&range.exact)
                .bind(&range.lower)
                .bind(&range.upper)
                .fetch(&mut *conn);
            while let Some((prefix, key, bytes)) = rows.try_next().await.map_err(backend)? {
                if let Some(vector) = store_rows::vector_from_bytes(&bytes) {
                    vectors.entry((prefix, key)).or_default().push(vector);
                }
            }
        }
        drop(conn);
        let ttls: HashMap<(String, String), bool> = found
            .iter()
            .map(|(item, ttl)| ((ns_text(&item.namespace), item.key.clone()), ttl.is_some()))
            .collect();
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

    async fn sweep_ttl(&self) -> Result<u64, StoreError> {
        self.sweep_expired().await
    }

    async fn list_namespaces(&self, options: ListNamespacesOptions) -> Result<Vec<Vec<String>>, StoreError> {
        let head = store_rows::literal_head(options.prefix.as_deref());
        if has_dotted_label(&head) {
            return Ok(Vec::new());
        }
        let range = prefix_range(&head);
        let stored: Vec<String> = sqlx::query_scalar(NAMESPACES)
            .bind(range.all)
            .bind(&range.exact)
            .bind(&range.lower)
            .bind(&range.upper)
            .bind(micros(SystemTime::now()))
            .fetch_all(&self.db.reader)
            .await
            .map_err(backend)?;
        Ok(store_rows::list_namespaces(stored, &options))
    }
}
