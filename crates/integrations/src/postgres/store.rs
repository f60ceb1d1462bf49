//! `PostgresStore`: the store on PostgreSQL.

use std::collections::HashMap;
use std::fmt;
use std::time::SystemTime;

use async_trait::async_trait;
use serde_json::Value;
use weft_graph::store::{
    IndexConfig, Item, ListNamespacesOptions, PutOptions, SearchItem, SearchOptions, Store, StoreError,
    TtlConfig, validate_filter,
};

use super::statements::{NAMESPACES, SEARCH, VECTORS};
use super::{Pg, PgPool, PostgresOptions, redact, schema};
use crate::sql::store_rows::{
    self, Candidate, ItemRow, duration_micros, keep_matching, micros, ns_text, prefix_range, rank,
};

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
    pg: Pg,
    index: Option<IndexConfig>,
    ttl: TtlConfig,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("db", &self.pg)
            .field("index", &self.index)
            .field("ttl", &self.ttl)
            .finish()
    }
}

fn backend(e: sqlx::Error) -> StoreError {
    StoreError::Backend(redact(&format!("postgres: {e}")))
}

type Row = (String, String, String, i64, i64, Option<i64>);

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
        Ok(Self { pg, index: None, ttl: TtlConfig::default() })
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
        let (pg, now) = (&self.pg, micros(SystemTime::now()));
        let done = pg
            .run("sweep_expired", move || {
                pg.statements.execute(sqlx::query("DELETE FROM store_items WHERE expires_at <= $1").bind(now))
            })
            .await
            .map_err(backend)?;
        Ok(done.rows_affected())
    }

    /// Restarts the TTL of items (namespace text, key).
    async fn refresh(&self, items: &[(String, String)]) -> Result<(), StoreError> {
        if items.is_empty() {
            return Ok(());
        }
        let prefixes: Vec<&str> = items.iter().map(|(p, _)| p.as_str()).collect();
        let keys: Vec<&str> = items.iter().map(|(_, k)| k.as_str()).collect();
        let (pg, prefixes, keys, now) = (&self.pg, &prefixes, &keys, micros(SystemTime::now()));
        pg.run("refresh", move || {
            pg.statements.execute(sqlx::query(super::statements::REFRESH).bind(prefixes).bind(keys).bind(now))
        })
        .await
        .map_err(backend)?;
        Ok(())
    }

    /// Rows of `query` (a pair from [`under_prefix!`]) under `prefix`, at most `limit` of them.
    async fn under<T>(
        &self,
        what: &str,
        query: (&'static str, &'static str),
        prefix: &[String],
        limit: Option<i64>,
    ) -> Result<Vec<T>, StoreError>
    where
        T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
    {
        let range = prefix_range(prefix);
        let (pg, range, now) = (&self.pg, &range, micros(SystemTime::now()));
        pg.run(what, move || {
            let q = if range.all {
                sqlx::query_as::<_, T>(query.0).bind(now)
            } else {
                sqlx::query_as::<_, T>(query.1)
                    .bind(now)
                    .bind(&range.exact)
                    .bind(&range.lower)
                    .bind(&range.upper)
            };
            pg.statements.fetch_all(q.bind(limit))
        })
        .await
        .map_err(backend)
    }
}

fn item_of((prefix, key, value, created_at, updated_at, _): Row) -> Result<Item, StoreError> {
    ItemRow { prefix, key, value, created_at, updated_at }.into_item()
}

/// Labels with a period (or a NUL, which PostgreSQL text cannot hold) are never stored, so a namespace
/// or prefix with one matches nothing.
fn unstorable(namespace: &[String]) -> bool {
    namespace.iter().any(|label| label.contains('.') || label.contains('\0'))
}

#[async_trait]
impl Store for PostgresStore {
    async fn get_with(
        &self,
        namespace: &[String],
        key: &str,
        refresh_ttl: Option<bool>,
    ) -> Result<Option<Item>, StoreError> {
        if namespace.is_empty() || unstorable(namespace) || key.contains('\0') {
            return Ok(None);
        }
        let prefix = ns_text(namespace);
        let (pg, prefix_ref, now) = (&self.pg, &prefix, micros(SystemTime::now()));
        let row: Option<Row> = pg
            .run("get", move || {
                pg.statements.fetch_optional(sqlx::query_as(
                    "SELECT prefix, key, value, created_at, updated_at, ttl_micros FROM store_items \
                     WHERE prefix_key = md5($1)::uuid AND key_key = md5($2)::uuid AND prefix = $1 AND key = $2 \
                     AND (expires_at IS NULL OR expires_at > $3)",
                )
                .bind(prefix_ref)
                .bind(key)
                .bind(now))
            })
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
        if key.contains('\0') {
            return Err(StoreError::InvalidValue {
                namespace: namespace.to_vec(),
                key: key.to_owned(),
                reason: "the key contains a NUL character, which PostgreSQL text cannot store".into(),
            });
        }
        let prepared =
            weft_graph::store::prepare_put(namespace, key, &value, &options, self.index.as_ref(), &self.ttl)
                .await?;
        let vectors = prepared.vectors;
        let idxs: Vec<i64> = (0..vectors.len()).map(|i| i64::try_from(i).unwrap_or(i64::MAX)).collect();
        let embeddings: Vec<Vec<u8>> = vectors.iter().map(|v| store_rows::vector_bytes(v)).collect();
        let ttl = prepared.ttl.map(duration_micros);
        let now = micros(SystemTime::now());
        let (prefix, text) = (ns_text(namespace), value.to_string());
        let (pg, prefix, text, idxs, embeddings) = (&self.pg, &prefix, &text, &idxs, &embeddings);
        pg.run("put", move || {
            pg.statements.execute(
                sqlx::query(super::statements::PUT_ITEM)
                    .bind(prefix)
                    .bind(key)
                    .bind(text)
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

    async fn delete(&self, namespace: &[String], key: &str) -> Result<(), StoreError> {
        if namespace.is_empty() || unstorable(namespace) || key.contains('\0') {
            return Ok(());
        }
        let prefix = ns_text(namespace);
        let (pg, prefix) = (&self.pg, &prefix);
        pg.run("delete", move || {
            pg.statements.execute(
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

    async fn search(
        &self,
        namespace_prefix: &[String],
        options: SearchOptions,
    ) -> Result<Vec<SearchItem>, StoreError> {
        validate_filter(&options.filter)?;
        if unstorable(namespace_prefix) {
            return Ok(Vec::new());
        }
        let query = match (&options.query, &self.index) {
            (Some(query), Some(index)) => Some(index.embed_query(query).await?),
            _ => None,
        };
        let wanted = options.offset.saturating_add(options.limit);
        // Without a filter or a query, the newest `wanted` rows are the page's.
        let limit =
            (options.filter.is_empty() && query.is_none()).then(|| i64::try_from(wanted).ok()).flatten();
        let rows: Vec<Row> = self.under("search", SEARCH, namespace_prefix, limit).await?;
        let mut found: Vec<(Item, bool)> = Vec::new();
        for row in rows {
            let has_ttl = row.5.is_some();
            let item = item_of(row)?;
            if keep_matching(&item, &options.filter) {
                found.push((item, has_ttl));
                if query.is_none() && found.len() >= wanted {
                    break;
                }
            }
        }
        let mut vectors: HashMap<(String, String), Vec<Vec<f32>>> = HashMap::new();
        if query.is_some() {
            let rows: Vec<(String, String, Vec<u8>)> =
                self.under("search vectors", VECTORS, namespace_prefix, None).await?;
            for (prefix, key, bytes) in rows {
                if let Some(vector) = store_rows::vector_from_bytes(&bytes) {
                    vectors.entry((prefix, key)).or_default().push(vector);
                }
            }
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

    async fn sweep_ttl(&self) -> Result<u64, StoreError> {
        self.sweep_expired().await
    }

    async fn list_namespaces(&self, options: ListNamespacesOptions) -> Result<Vec<Vec<String>>, StoreError> {
        let head = store_rows::literal_head(options.prefix.as_deref());
        if unstorable(&head) {
            return Ok(Vec::new());
        }
        let stored: Vec<(String,)> = self.under("list_namespaces", NAMESPACES, &head, None).await?;
        Ok(store_rows::list_namespaces(stored.into_iter().map(|(p,)| p).collect(), &options))
    }
}
