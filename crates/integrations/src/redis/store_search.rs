//! `RedisStore::search` and `list_namespaces`: walk the namespaces under a prefix, read their live items
//! with a server-side script (which also forgets expired ones), then filter, rank and page in process.

use std::cmp::Ordering;

use weft_graph::store::{
    ListNamespacesOptions, SearchItem, SearchOptions, StoreError, cosine_similarity, matches_filter,
    validate_filter,
};

use super::store::{RedisStore, decode_item, to_json};

/// The live items of a namespace (8 replies each: key, format, value, created_at, updated_at, seq, ttl,
/// vectors), or only their count when ARGV[3] is `0`; keys of expired items leave the key set, and a
/// namespace left without items leaves the namespace set. KEYS: key set, namespace set. ARGV: item key
/// head, namespace JSON, `1`/`0`.
const LIVE: &str = r"
local function esc(s)
  return (string.gsub(s, '[%%:]', {['%'] = '%25', [':'] = '%3A'}))
end
local out = {}
local live = 0
for _, k in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local f = redis.call('HMGET', ARGV[1] .. esc(k), 'format', 'value', 'created_at', 'updated_at', 'seq',
    'ttl', 'vectors')
  if f[1] then
    live = live + 1
    if ARGV[3] == '1' then
      out[#out + 1] = k
      for j = 1, 7 do
        out[#out + 1] = f[j]
      end
    end
  else
    redis.call('SREM', KEYS[1], k)
  end
end
if live == 0 then
  redis.call('SREM', KEYS[2], ARGV[2])
end
if ARGV[3] == '1' then
  return out
end
return live
";

/// Clears a namespace's key set of the keys whose item hash Redis expired, and the namespace set of the
/// namespace when none is left; returns how many keys it cleared. KEYS: key set, namespace set. ARGV:
/// item key head, namespace JSON.
const SWEEP: &str = r"
local function esc(s)
  return (string.gsub(s, '[%%:]', {['%'] = '%25', [':'] = '%3A'}))
end
local gone = 0
for _, k in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('EXISTS', ARGV[1] .. esc(k)) == 0 then
    redis.call('SREM', KEYS[1], k)
    gone = gone + 1
  end
end
if redis.call('SCARD', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[2], ARGV[2])
end
return gone
";

/// One live item as read.
struct Found {
    item: SearchItem,
    seq: i64,
    ttl: Option<String>,
}

impl RedisStore {
    pub(crate) async fn search_items(
        &self,
        prefix: &[String],
        options: SearchOptions,
    ) -> Result<Vec<SearchItem>, StoreError> {
        validate_filter(&options.filter)?;
        let query = match (&options.query, &self.index) {
            (Some(query), Some(index)) => Some(index.embed_query(query).await?),
            _ => None,
        };
        let namespaces: Vec<Vec<String>> =
            self.all_namespaces().await?.into_iter().filter(|ns| ns.starts_with(prefix)).collect();
        let mut pipe = redis::pipe();
        for ns in &namespaces {
            self.add_live(&mut pipe, ns, true)?;
        }
        let replies: Vec<Vec<Option<Vec<u8>>>> = self.query(&pipe, "store search").await?;
        let mut found = Vec::new();
        for (ns, reply) in namespaces.iter().zip(replies) {
            for fields in reply.chunks(8) {
                let key = fields.first().cloned().flatten().unwrap_or_default();
                let key = String::from_utf8_lossy(&key).into_owned();
                let Some(item) = decode_item(ns, &key, &fields[1..5])? else { continue };
                if !matches_filter(&item.value, &options.filter) {
                    continue;
                }
                let text = |i: usize| {
                    fields.get(i).cloned().flatten().map(|b| String::from_utf8_lossy(&b).into_owned())
                };
                let seq = text(5).and_then(|s| s.parse().ok()).unwrap_or(0);
                let ttl = text(6).filter(|t| !t.is_empty());
                let score = match (&query, text(7).filter(|v| !v.is_empty())) {
                    (Some(q), Some(vectors)) => serde_json::from_str::<Vec<Vec<f32>>>(&vectors)
                        .map_err(|e| {
                            StoreError::Backend(format!("corrupt vectors of item '{key}' in {ns:?}: {e}"))
                        })?
                        .iter()
                        .map(|v| cosine_similarity(q, v))
                        .reduce(f64::max),
                    _ => None,
                };
                found.push(Found { item: SearchItem { item, score }, seq, ttl });
            }
        }
        // Scored items first, best first; then the rest; ties by latest update.
        found.sort_by(|a, b| {
            b.item
                .score
                .is_some()
                .cmp(&a.item.score.is_some())
                .then(
                    b.item
                        .score
                        .unwrap_or(0.0)
                        .partial_cmp(&a.item.score.unwrap_or(0.0))
                        .unwrap_or(Ordering::Equal),
                )
                .then(b.seq.cmp(&a.seq))
        });
        let page: Vec<Found> = found.into_iter().skip(options.offset).take(options.limit).collect();
        if options.refresh_ttl.unwrap_or(self.ttl.refresh_on_read) {
            let mut pipe = redis::pipe();
            for f in page.iter().filter(|f| f.ttl.is_some()) {
                let key = self.item_key(&f.item.item.namespace, &f.item.item.key);
                pipe.cmd("PEXPIRE").arg(key).arg(f.ttl.as_deref().unwrap_or_default()).ignore();
            }
            self.query::<()>(&pipe, "store refresh").await?;
        }
        Ok(page.into_iter().map(|f| f.item).collect())
    }

    pub(crate) async fn namespaces(
        &self,
        options: ListNamespacesOptions,
    ) -> Result<Vec<Vec<String>>, StoreError> {
        let namespaces = self.all_namespaces().await?;
        let mut pipe = redis::pipe();
        for ns in &namespaces {
            self.add_live(&mut pipe, ns, false)?;
        }
        let counts: Vec<i64> = self.query(&pipe, "store list namespaces").await?;
        let prefix = options.prefix.as_deref().unwrap_or_default();
        let suffix = options.suffix.as_deref().unwrap_or_default();
        let mut found: Vec<Vec<String>> = namespaces
            .into_iter()
            .zip(counts)
            .filter(|(ns, count)| *count > 0 && matches_prefix(ns, prefix) && matches_suffix(ns, suffix))
            .map(|(ns, _)| match options.max_depth {
                Some(depth) => ns.into_iter().take(depth).collect(),
                None => ns,
            })
            .collect();
        found.sort();
        found.dedup();
        Ok(found.into_iter().skip(options.offset).take(options.limit).collect())
    }

    /// Clears the key and namespace sets of every item Redis expired; returns how many.
    pub(crate) async fn sweep_index(&self) -> Result<u64, StoreError> {
        let namespaces = self.all_namespaces().await?;
        let mut pipe = redis::pipe();
        for ns in &namespaces {
            pipe.cmd("EVAL").arg(SWEEP).arg(2).arg(self.keys_key(ns)).arg(self.namespaces_key());
            pipe.arg(self.item_head(ns)).arg(to_json(ns)?);
        }
        let cleared: Vec<u64> = self.query(&pipe, "store sweep").await?;
        Ok(cleared.iter().sum())
    }

    /// Every namespace in the namespace set.
    async fn all_namespaces(&self) -> Result<Vec<Vec<String>>, StoreError> {
        let mut cmd = redis::cmd("SMEMBERS");
        cmd.arg(self.namespaces_key());
        let raw: Vec<String> = self.eval(cmd, "store namespaces").await?;
        raw.iter()
            .map(|text| {
                serde_json::from_str(text)
                    .map_err(|e| StoreError::Backend(format!("corrupt namespace entry '{text}': {e}")))
            })
            .collect()
    }

    fn add_live(
        &self,
        pipe: &mut redis::Pipeline,
        ns: &[String],
        with_items: bool,
    ) -> Result<(), StoreError> {
        pipe.cmd("EVAL").arg(LIVE).arg(2).arg(self.keys_key(ns)).arg(self.namespaces_key());
        pipe.arg(self.item_head(ns)).arg(to_json(ns)?).arg(if with_items { "1" } else { "0" });
        Ok(())
    }

    async fn query<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
        what: &str,
    ) -> Result<T, StoreError> {
        if pipe.is_empty() {
            return T::from_redis_value(redis::Value::Array(Vec::new()))
                .map_err(|e| StoreError::Backend(format!("redis {what}: {e}")));
        }
        self.conn
            .run(what, |mut c| async move { pipe.query_async::<T>(&mut c).await })
            .await
            .map_err(super::store::backend)
    }
}

/// Whether `namespace` starts with `prefix`, label by label (`"*"` in `prefix` matches any label).
fn matches_prefix(namespace: &[String], prefix: &[String]) -> bool {
    namespace.len() >= prefix.len() && prefix.iter().zip(namespace).all(|(p, n)| p == "*" || p == n)
}

/// Whether `namespace` ends with `suffix`, label by label (`"*"` in `suffix` matches any label).
fn matches_suffix(namespace: &[String], suffix: &[String]) -> bool {
    namespace.len() >= suffix.len()
        && suffix.iter().rev().zip(namespace.iter().rev()).all(|(s, n)| s == "*" || s == n)
}
