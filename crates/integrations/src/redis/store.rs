//! `RedisStore`: the long-term memory store on plain Redis; `get`, `put` and `delete` (search and
//! namespace listing are in `store_search.rs`).
//!
//! With prefix `P`, a namespace `N` (labels escaped and joined by `:`) and a key `K` (escaped):
//!
//! | key                   | type   | holds                                                              |
//! | --------------------- | ------ | ------------------------------------------------------------------ |
//! | `P:store:namespaces`  | set    | every namespace with items, as a JSON list of labels               |
//! | `P:store:seq`         | string | a counter that orders items by last update                         |
//! | `P:store:keys:N`      | set    | the keys of the namespace's items                                  |
//! | `P:store:item:N:K`    | hash   | `format`, `value`, `created_at`, `updated_at` (ns since 1970), `seq`, `ttl` (ms), `vectors` |
//!
//! An item's TTL is the TTL of its hash, so Redis expires it; the namespace and key sets are cleaned of
//! expired items when a search, a namespace listing or `sweep_ttl` walks them.

use std::fmt;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use serde_json::Value;
use weft_graph::checkpoint::CheckpointError;
use weft_graph::store::{
    IndexConfig, Item, ListNamespacesOptions, PutOptions, SearchItem, SearchOptions, Store, StoreError,
    TtlConfig,
};

use super::conn::Conn;
use super::keys::escape;
use super::options::RedisOptions;

/// Creates or replaces an item. KEYS: item, key set, namespace set, counter. ARGV: value, now (ns),
/// ttl (ms, `""`: none), vectors (`""`: none), key, namespace JSON.
const PUT: &str = r"
local seq = redis.call('INCR', KEYS[4])
redis.call('HSETNX', KEYS[1], 'created_at', ARGV[2])
redis.call('HSET', KEYS[1], 'format', '1', 'value', ARGV[1], 'updated_at', ARGV[2], 'seq', seq,
  'ttl', ARGV[3], 'vectors', ARGV[4])
if ARGV[3] ~= '' then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
else
  redis.call('PERSIST', KEYS[1])
end
redis.call('SADD', KEYS[2], ARGV[5])
redis.call('SADD', KEYS[3], ARGV[6])
return seq
";

/// Reads an item, restarting its TTL when ARGV[1] is `1`. KEYS: item.
const GET: &str = r"
local fields = redis.call('HMGET', KEYS[1], 'format', 'value', 'created_at', 'updated_at', 'ttl')
if ARGV[1] == '1' and fields[5] and fields[5] ~= '' then
  redis.call('PEXPIRE', KEYS[1], fields[5])
end
return fields
";

/// Deletes an item. KEYS: item, key set, namespace set. ARGV: key, namespace JSON.
const DELETE: &str = r"
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
if redis.call('SCARD', KEYS[2]) == 0 then
  redis.call('SREM', KEYS[3], ARGV[2])
end
return 0
";

/// A store of namespaced JSON items on plain Redis (6.2 or newer, no modules), with an optional vector
/// index computed by weft and per-item TTLs kept by Redis. Layout in the module source; the
/// [`Store`] conformance suite passes.
///
/// Searches read every item under the namespace prefix and filter and rank them in the process: fine for
/// memories of users and agents (thousands of items per prefix), not a search engine.
#[derive(Clone)]
pub struct RedisStore {
    pub(crate) conn: Conn,
    pub(crate) prefix: String,
    pub(crate) index: Option<IndexConfig>,
    pub(crate) ttl: TtlConfig,
    options: RedisOptions,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.options.redacted_url())
            .field("prefix", &self.prefix)
            .field("index", &self.index)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects as `options` say (their URL, prefix, retries and timeouts), without a vector index or
    /// default TTL.
    pub async fn connect_with(options: RedisOptions) -> Result<Self, StoreError> {
        if options.prefix.is_empty() {
            return Err(StoreError::Backend("the redis key prefix must not be empty".to_owned()));
        }
        let conn = Conn::connect(&options).await.map_err(backend)?;
        let prefix = format!("{}:store", options.prefix);
        Ok(Self { conn, prefix, index: None, ttl: TtlConfig::default(), options })
    }

    /// Sets (or, with `None`, removes) the vector index.
    pub fn with_index(mut self, index: impl Into<Option<IndexConfig>>) -> Self {
        self.index = index.into();
        self
    }

    /// Sets the default TTL of items and whether reads restart it.
    pub fn with_ttl(mut self, ttl: TtlConfig) -> Self {
        self.ttl = ttl;
        self
    }

    pub(crate) fn namespaces_key(&self) -> String {
        format!("{}:namespaces", self.prefix)
    }

    pub(crate) fn keys_key(&self, namespace: &[String]) -> String {
        format!("{}:keys:{}", self.prefix, joined(namespace))
    }

    pub(crate) fn item_key(&self, namespace: &[String], key: &str) -> String {
        format!("{}{}", self.item_head(namespace), escape(key))
    }

    /// What the keys of a namespace's items start with.
    pub(crate) fn item_head(&self, namespace: &[String]) -> String {
        format!("{}:item:{}:", self.prefix, joined(namespace))
    }

    pub(crate) async fn eval<T: redis::FromRedisValue>(
        &self,
        cmd: redis::Cmd,
        what: &str,
    ) -> Result<T, StoreError> {
        self.conn
            .run(what, |mut c| {
                let cmd = &cmd;
                async move { cmd.query_async::<T>(&mut c).await }
            })
            .await
            .map_err(backend)
    }
}

#[async_trait]
impl Store for RedisStore {
    async fn get_with(
        &self,
        namespace: &[String],
        key: &str,
        refresh_ttl: Option<bool>,
    ) -> Result<Option<Item>, StoreError> {
        let refresh = refresh_ttl.unwrap_or(self.ttl.refresh_on_read);
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(GET).arg(1).arg(self.item_key(namespace, key)).arg(if refresh { "1" } else { "0" });
        let fields: Vec<Option<Vec<u8>>> = self.eval(cmd, "store get").await?;
        decode_item(namespace, key, &fields)
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
        let ttl = prepared.ttl;
        let value_json = to_json(&value)?;
        let vectors_json = if vectors.is_empty() { String::new() } else { to_json(&vectors)? };
        let namespace_json = to_json(namespace)?;
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(PUT).arg(4).arg(self.item_key(namespace, key)).arg(self.keys_key(namespace));
        cmd.arg(self.namespaces_key()).arg(format!("{}:seq", self.prefix));
        cmd.arg(value_json).arg(nanos(SystemTime::now()).to_string());
        cmd.arg(
            ttl.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX).to_string()).unwrap_or_default(),
        );
        cmd.arg(vectors_json).arg(key).arg(namespace_json);
        self.eval::<i64>(cmd, "store put").await.map(|_| ())
    }

    async fn delete(&self, namespace: &[String], key: &str) -> Result<(), StoreError> {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(DELETE).arg(3).arg(self.item_key(namespace, key)).arg(self.keys_key(namespace));
        cmd.arg(self.namespaces_key()).arg(key).arg(to_json(namespace)?);
        self.eval::<i64>(cmd, "store delete").await.map(|_| ())
    }

    async fn search(
        &self,
        namespace_prefix: &[String],
        options: SearchOptions,
    ) -> Result<Vec<SearchItem>, StoreError> {
        self.search_items(namespace_prefix, options).await
    }

    async fn list_namespaces(&self, options: ListNamespacesOptions) -> Result<Vec<Vec<String>>, StoreError> {
        self.namespaces(options).await
    }

    /// Redis deletes expired items itself (their hashes carry the TTL); the sweep clears them from the
    /// key and namespace sets and counts them.
    async fn sweep_ttl(&self) -> Result<u64, StoreError> {
        self.sweep_index().await
    }
}

/// `value` as JSON text.
pub(crate) fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(json_error)
}

/// An item from its hash fields (`format`, `value`, `created_at`, `updated_at`, ...); `None` when the
/// hash does not exist.
pub(crate) fn decode_item(
    namespace: &[String],
    key: &str,
    fields: &[Option<Vec<u8>>],
) -> Result<Option<Item>, StoreError> {
    let corrupt = |what: &str| {
        StoreError::Backend(format!("corrupt store item '{key}' in namespace {namespace:?}: {what}"))
    };
    let (Some(Some(format)), Some(Some(value)), Some(Some(created)), Some(Some(updated))) =
        (fields.first(), fields.get(1), fields.get(2), fields.get(3))
    else {
        return match fields.iter().all(Option::is_none) {
            true => Ok(None),
            false => Err(corrupt("missing fields")),
        };
    };
    if format.as_slice() != b"1" {
        return Err(corrupt(&format!("unknown format version '{}'", String::from_utf8_lossy(format))));
    }
    let value: Value =
        serde_json::from_slice(value).map_err(|e| corrupt(&format!("unreadable value: {e}")))?;
    let time = |bytes: &[u8]| -> Result<SystemTime, StoreError> {
        let nanos: u64 = std::str::from_utf8(bytes)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| corrupt("unreadable timestamp"))?;
        Ok(SystemTime::UNIX_EPOCH + Duration::from_nanos(nanos))
    };
    Ok(Some(Item {
        namespace: namespace.to_vec(),
        key: key.to_owned(),
        value,
        created_at: time(created)?,
        updated_at: time(updated)?,
    }))
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Labels escaped and joined by `:`.
fn joined(namespace: &[String]) -> String {
    namespace.iter().map(|label| escape(label)).collect::<Vec<_>>().join(":")
}

pub(crate) fn backend(err: CheckpointError) -> StoreError {
    match err {
        CheckpointError::Backend { message, .. } => StoreError::Backend(message),
        other => StoreError::Backend(other.to_string()),
    }
}

pub(crate) fn json_error(err: serde_json::Error) -> StoreError {
    StoreError::Backend(format!("cannot encode store data: {err}"))
}
