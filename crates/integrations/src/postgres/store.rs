//! `PostgresStore`: the store on PostgreSQL.

use async_trait::async_trait;
use weft_graph::store::StoreError;

use super::statements::{NAMESPACES, PUT_ITEM, REFRESH, SEARCH, VECTORS};
use super::{Pg, PgPool, PostgresOptions, redact, schema};
use crate::sql::store::{NewItem, Row, SqlStore, StoreRows, VectorRow, Visit, sql_store_api};
use crate::sql::store_rows::{self, PrefixRange};

/// A store on PostgreSQL: items as JSON text under their namespace (labels joined by `.`), TTLs as expiry
/// times, and, with a vector index, the embeddings of each item's fields as `f32` arrays.
///
/// Filters and similarity are computed in weft over the rows under the searched namespace prefix (found
/// through an index on the namespace): a search reads every live item under the prefix (newest update
/// first, stopping once a page is full when there is no query), and a query with a vector index reads
/// their vectors, so keep prefixes narrow for stores of many items. pgvector is not used, even where it
/// is installed. Expired items are invisible at once and deleted by
/// [`sweep_expired`](Self::sweep_expired).
pub struct PostgresStore {
    store: SqlStore<Pg>,
}

fn backend(e: sqlx::Error) -> StoreError {
    StoreError::Backend(redact(&format!("postgres: {e}")))
}

impl PostgresStore {
    /// Connects a pool to `url` with default options and creates or updates the store's tables.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, PostgresOptions::default()).await
    }

    /// Connects a pool to `url` with `options` and creates or updates the store's tables.
    pub async fn connect_with(url: &str, options: PostgresOptions) -> Result<Self, StoreError> {
        Self::with_pg(Pg::connect(url, &options).await.map_err(StoreError::Backend)?).await
    }

    /// A store on the caller's pool (for example [`PostgresSaver::pool`](super::PostgresSaver::pool)).
    pub async fn from_pool(pool: PgPool, options: PostgresOptions) -> Result<Self, StoreError> {
        Self::with_pg(Pg::from_pool(pool, &options)).await
    }

    async fn with_pg(pg: Pg) -> Result<Self, StoreError> {
        pg.migrate("store", schema::STORE).await.map_err(|f| StoreError::Backend(f.message))?;
        Ok(Self { store: SqlStore::new(pg) })
    }
}

sql_store_api!(PostgresStore, store);

impl Pg {
    /// Rows of `query` (a pair from `under_prefix!`) in `range` at `now`, at most `limit` of them.
    async fn under<T>(
        &self,
        what: &str,
        query: (&'static str, &'static str),
        range: &PrefixRange,
        now: i64,
        limit: Option<i64>,
    ) -> Result<Vec<T>, StoreError>
    where
        T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
    {
        self.run(what, move || {
            let q = if range.all {
                sqlx::query_as::<_, T>(query.0).bind(now)
            } else {
                sqlx::query_as::<_, T>(query.1)
                    .bind(now)
                    .bind(&range.exact)
                    .bind(&range.lower)
                    .bind(&range.upper)
            };
            self.statements.fetch_all(q.bind(limit))
        })
        .await
        .map_err(backend)
    }
}

/// The store's queries on PostgreSQL: each one statement (one round trip), retried as the pool's policy
/// says; scans read their rows whole.
#[async_trait]
impl StoreRows for Pg {
    /// PostgreSQL text cannot hold a NUL.
    fn unstorable_text(text: &str) -> bool {
        text.contains('\0')
    }

    const UNSTORABLE_KEY: &'static str =
        "the key contains a NUL character, which PostgreSQL text cannot store";

    async fn item(&self, prefix: &str, key: &str, now: i64) -> Result<Option<Row>, StoreError> {
        self.run("get", move || {
            self.statements.fetch_optional(
                sqlx::query_as(
                    "SELECT prefix, key, value, created_at, updated_at, ttl_micros FROM store_items \
                     WHERE prefix_key = md5($1)::uuid AND key_key = md5($2)::uuid AND prefix = $1 AND key = $2 \
                     AND (expires_at IS NULL OR expires_at > $3)",
                )
                .bind(prefix)
                .bind(key)
                .bind(now),
            )
        })
        .await
        .map_err(backend)
    }

    async fn put_item(&self, item: NewItem<'_>) -> Result<(), StoreError> {
        let NewItem { prefix, key, value, now, ttl, vectors } = item;
        let idxs: Vec<i64> = (0..vectors.len()).map(|i| i64::try_from(i).unwrap_or(i64::MAX)).collect();
        let embeddings: Vec<Vec<u8>> = vectors.iter().map(|v| store_rows::vector_bytes(v)).collect();
        let (idxs, embeddings) = (&idxs, &embeddings);
        self.run("put", move || {
            self.statements.execute(
                sqlx::query(PUT_ITEM)
                    .bind(prefix)
                    .bind(key)
                    .bind(value)
                    .bind(now)
                    .bind(ttl.map(|t| now.saturating_add(t)))
                    .bind(ttl)
                    .bind(idxs)
                    .bind(embeddings),
            )
        })
        .await
        .map_err(backend)?;
        Ok(())
    }

    /// The item's vectors go with it (the schema's cascade).
    async fn delete_item(&self, prefix: &str, key: &str) -> Result<(), StoreError> {
        self.run("delete", move || {
            self.statements.execute(
                sqlx::query(
                    "DELETE FROM store_items WHERE prefix_key = md5($1)::uuid AND key_key = md5($2)::uuid \
                     AND prefix = $1 AND key = $2",
                )
                .bind(prefix)
                .bind(key),
            )
        })
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn refresh(&self, items: &[(String, String)], now: i64) -> Result<(), StoreError> {
        let prefixes: Vec<&str> = items.iter().map(|(p, _)| p.as_str()).collect();
        let keys: Vec<&str> = items.iter().map(|(_, k)| k.as_str()).collect();
        let (prefixes, keys) = (&prefixes, &keys);
        self.run("refresh", move || {
            self.statements.execute(sqlx::query(REFRESH).bind(prefixes).bind(keys).bind(now))
        })
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn sweep(&self, now: i64) -> Result<u64, StoreError> {
        let done = self
            .run("sweep_expired", move || {
                self.statements
                    .execute(sqlx::query("DELETE FROM store_items WHERE expires_at <= $1").bind(now))
            })
            .await
            .map_err(backend)?;
        Ok(done.rows_affected())
    }

    async fn scan_items(
        &self,
        range: &PrefixRange,
        now: i64,
        limit: Option<i64>,
        visit: Visit<'_, Row>,
    ) -> Result<(), StoreError> {
        visit_all(self.under::<Row>("search", SEARCH, range, now, limit).await?, visit)
    }

    async fn scan_vectors(
        &self,
        range: &PrefixRange,
        now: i64,
        visit: Visit<'_, VectorRow>,
    ) -> Result<(), StoreError> {
        visit_all(self.under::<VectorRow>("search vectors", VECTORS, range, now, None).await?, visit)
    }

    async fn namespaces(&self, range: &PrefixRange, now: i64) -> Result<Vec<String>, StoreError> {
        let stored: Vec<(String,)> = self.under("list_namespaces", NAMESPACES, range, now, None).await?;
        Ok(stored.into_iter().map(|(p,)| p).collect())
    }
}

/// Feeds `rows` to `visit` until it says stop.
fn visit_all<T>(rows: Vec<T>, visit: Visit<'_, T>) -> Result<(), StoreError> {
    for row in rows {
        if !visit(row)? {
            break;
        }
    }
    Ok(())
}
