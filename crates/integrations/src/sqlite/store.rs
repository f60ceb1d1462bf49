//! `SqliteStore`: the store on SQLite.

use std::path::Path;

use async_trait::async_trait;
use futures::TryStreamExt;
use futures::stream::BoxStream;
use weft_graph::store::StoreError;

use super::statements::{NAMESPACES, PUT_ITEM, REFRESH, SEARCH, VECTORS};
use super::{Db, SqliteOptions, SqlitePool, schema};
use crate::sql::store::{NewItem, Row, SqlStore, StoreRows, VectorRow, Visit, sql_store_api};
use crate::sql::store_rows::{self, PrefixRange};

/// A store on SQLite: items as JSON text under their namespace (labels joined by `.`), TTLs as expiry
/// times, and, with a vector index, the embeddings of each item's fields.
///
/// Filters and similarity are computed in weft over the rows under the searched namespace prefix: a
/// search reads every live item under the prefix (newest update first, stopping once a page is full when
/// there is no query), so keep prefixes narrow for stores of many items. Expired items are invisible at
/// once and deleted by [`sweep_expired`](Self::sweep_expired).
pub struct SqliteStore {
    store: SqlStore<Db>,
}

fn backend(e: sqlx::Error) -> StoreError {
    StoreError::Backend(format!("sqlite: {e}"))
}

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
        Ok(Self { store: SqlStore::new(db) })
    }
}

sql_store_api!(SqliteStore, store);

/// The store's queries on SQLite: writes in `BEGIN IMMEDIATE` transactions of the writer, scans streamed
/// from a reader connection.
#[async_trait]
impl StoreRows for Db {
    /// SQLite text holds any character.
    fn unstorable_text(_: &str) -> bool {
        false
    }

    const UNSTORABLE_KEY: &'static str = "the key cannot be stored";

    async fn item(&self, prefix: &str, key: &str, now: i64) -> Result<Option<Row>, StoreError> {
        sqlx::query_as(
            "SELECT prefix, key, value, created_at, updated_at, ttl_micros FROM store_items \
             WHERE prefix = ?1 AND key = ?2 AND (expires_at IS NULL OR expires_at > ?3)",
        )
        .bind(prefix)
        .bind(key)
        .bind(now)
        .fetch_optional(&self.reader)
        .await
        .map_err(backend)
    }

    async fn put_item(&self, item: NewItem<'_>) -> Result<(), StoreError> {
        let NewItem { prefix, key, value, now, ttl, vectors } = item;
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await.map_err(backend)?;
        sqlx::query(PUT_ITEM)
            .bind(prefix)
            .bind(key)
            .bind(value)
            .bind(now)
            .bind(ttl.map(|t| now.saturating_add(t)))
            .bind(ttl)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        sqlx::query("DELETE FROM store_vectors WHERE prefix = ?1 AND key = ?2")
            .bind(prefix)
            .bind(key)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        for (idx, vector) in vectors.iter().enumerate() {
            sqlx::query("INSERT INTO store_vectors (prefix, key, idx, embedding) VALUES (?1, ?2, ?3, ?4)")
                .bind(prefix)
                .bind(key)
                .bind(i64::try_from(idx).unwrap_or(i64::MAX))
                .bind(store_rows::vector_bytes(vector))
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }

    async fn delete_item(&self, prefix: &str, key: &str) -> Result<(), StoreError> {
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await.map_err(backend)?;
        for statement in [
            "DELETE FROM store_vectors WHERE prefix = ?1 AND key = ?2",
            "DELETE FROM store_items WHERE prefix = ?1 AND key = ?2",
        ] {
            sqlx::query(statement).bind(prefix).bind(key).execute(&mut *tx).await.map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }

    async fn refresh(&self, items: &[(String, String)], now: i64) -> Result<(), StoreError> {
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await.map_err(backend)?;
        for (prefix, key) in items {
            sqlx::query(REFRESH).bind(prefix).bind(key).bind(now).execute(&mut *tx).await.map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }

    async fn sweep(&self, now: i64) -> Result<u64, StoreError> {
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await.map_err(backend)?;
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

    /// Streams every live row (no `LIMIT`: `visit` stops the scan).
    async fn scan_items(
        &self,
        range: &PrefixRange,
        now: i64,
        _limit: Option<i64>,
        visit: Visit<'_, Row>,
    ) -> Result<(), StoreError> {
        let mut conn = self.reader.acquire().await.map_err(backend)?;
        let rows = sqlx::query_as::<_, Row>(SEARCH)
            .bind(range.all)
            .bind(&range.exact)
            .bind(&range.lower)
            .bind(&range.upper)
            .bind(now)
            .fetch(&mut *conn);
        visit_rows(rows, visit).await
    }

    /// The vectors of every item in `range` (those of expired items are never ranked).
    async fn scan_vectors(
        &self,
        range: &PrefixRange,
        _now: i64,
        visit: Visit<'_, VectorRow>,
    ) -> Result<(), StoreError> {
        let mut conn = self.reader.acquire().await.map_err(backend)?;
        let rows = sqlx::query_as::<_, VectorRow>(VECTORS)
            .bind(range.all)
            .bind(&range.exact)
            .bind(&range.lower)
            .bind(&range.upper)
            .fetch(&mut *conn);
        visit_rows(rows, visit).await
    }

    async fn namespaces(&self, range: &PrefixRange, now: i64) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar(NAMESPACES)
            .bind(range.all)
            .bind(&range.exact)
            .bind(&range.lower)
            .bind(&range.upper)
            .bind(now)
            .fetch_all(&self.reader)
            .await
            .map_err(backend)
    }
}

/// Feeds `rows` to `visit` until it says stop.
async fn visit_rows<T>(
    mut rows: BoxStream<'_, Result<T, sqlx::Error>>,
    visit: Visit<'_, T>,
) -> Result<(), StoreError> {
    while let Some(row) = rows.try_next().await.map_err(backend)? {
        if !visit(row)? {
            break;
        }
    }
    Ok(())
}
