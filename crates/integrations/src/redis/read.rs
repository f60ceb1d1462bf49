//! `get_tuple`, `list` and `list_ids`: ids from the sorted sets, then checkpoint hashes (metadata filters
//! applied as they arrive), then values and writes of the checkpoints kept, each step one pipeline.

use std::collections::BTreeSet;
use std::sync::Arc;

use redis::FromRedisValue;
use serde_json::{Map, Value};
use weft_graph::checkpoint::{CheckpointConfig, CheckpointError, CheckpointTuple, ListOptions, PendingWrite};

use super::codec::{RECORD_FIELDS, Record, StoredWrite, corrupt, decode_chain, decode_record, decode_write};
use super::keys::{NAMESPACES, NsSuffix, blob_field};
use super::saver::RedisSaver;

/// How many checkpoint hashes a filtered `list` reads per round trip.
const CHUNK: usize = 64;

/// Removes a thread from the thread index if its registry is gone (expired), atomically.
const FORGET_EXPIRED: &str = r"
if redis.call('EXISTS', KEYS[2]) == 0 then
  return redis.call('SREM', KEYS[1], ARGV[1])
end
return 0
";

/// Each field's chain of stored versions: the value, then its base, its base's base... up to a whole
/// one (`false` where nothing is stored). KEYS: values, bases. ARGV: fields.
pub(crate) const RESOLVE: &str = r"
local out = {}
for i = 1, #ARGV do
  local chain = {}
  local field = ARGV[i]
  for _ = 1, 100000 do
    chain[#chain + 1] = redis.call('HGET', KEYS[1], field)
    field = redis.call('HGET', KEYS[2], field)
    if not field then
      break
    end
  end
  out[i] = chain
end
return out
";

/// One checkpoint's address.
#[derive(Debug, Clone)]
pub(crate) struct Address {
    pub(crate) thread_id: String,
    pub(crate) ns: String,
    pub(crate) id: String,
}

impl Address {
    fn config(&self, id: &str) -> CheckpointConfig {
        CheckpointConfig {
            thread_id: self.thread_id.clone(),
            checkpoint_ns: self.ns.clone(),
            checkpoint_id: Some(id.to_owned()),
        }
    }
}

impl RedisSaver {
    pub(crate) async fn read_tuple(
        &self,
        config: &CheckpointConfig,
    ) -> Result<Option<CheckpointTuple>, CheckpointError> {
        let id = match &config.checkpoint_id {
            Some(id) => id.clone(),
            None => match self.ids_newest_first(config, None, Some(1)).await?.pop() {
                Some(id) => id,
                None => return Ok(None),
            },
        };
        let address = Address { thread_id: config.thread_id.clone(), ns: config.checkpoint_ns.clone(), id };
        let found = self.records(std::slice::from_ref(&address)).await?.pop().flatten();
        let Some(record) = found else {
            // Gone, or a hash lost while the index still lists it (evicted, deleted by hand).
            self.check_listed(std::slice::from_ref(&address)).await?;
            return match config.checkpoint_id {
                // The latest was pruned meanwhile: read the new latest.
                None => Box::pin(self.read_tuple(config)).await,
                Some(_) => Ok(None),
            };
        };
        let tuple = self.assemble(vec![(address, record)]).await?.pop();
        self.refresh_after_read([config.thread_id.as_str()]).await?;
        Ok(tuple)
    }

    pub(crate) async fn read_list(
        &self,
        config: Option<&CheckpointConfig>,
        options: ListOptions,
    ) -> Result<Vec<CheckpointTuple>, CheckpointError> {
        let limit = options.limit.unwrap_or(usize::MAX);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let before = options.before.as_deref();
        let candidates = match config {
            Some(c) => match &c.checkpoint_id {
                Some(id) if before.is_none_or(|b| id.as_str() < b) => {
                    vec![Address {
                        thread_id: c.thread_id.clone(),
                        ns: c.checkpoint_ns.clone(),
                        id: id.clone(),
                    }]
                }
                Some(_) => Vec::new(),
                None => {
                    let cap = options.limit.filter(|_| options.filter.is_empty());
                    let ids = self.ids_newest_first(c, before, cap).await?;
                    let at = |id| Address { thread_id: c.thread_id.clone(), ns: c.checkpoint_ns.clone(), id };
                    ids.into_iter().map(at).collect()
                }
            },
            None => self.every_address(before).await?,
        };
        let mut found = Vec::new();
        for chunk in candidates.chunks(CHUNK) {
            let records = self.records(chunk).await?;
            let missing: Vec<Address> =
                chunk.iter().zip(&records).filter(|(_, r)| r.is_none()).map(|(a, _)| a.clone()).collect();
            self.check_listed(&missing).await?;
            for (address, record) in chunk.iter().zip(records) {
                // A checkpoint pruned or deleted since its id was read is skipped.
                let Some(record) = record else { continue };
                if found.len() < limit && metadata_matches(&record.metadata_json, &options.filter) {
                    found.push((address.clone(), record));
                }
            }
            if found.len() >= limit {
                break;
            }
        }
        let tuples = self.assemble(found).await?;
        let threads: BTreeSet<&str> = tuples.iter().map(|t| t.config.thread_id.as_str()).collect();
        self.refresh_after_read(threads).await?;
        Ok(tuples)
    }

    pub(crate) async fn read_ids(&self, config: &CheckpointConfig) -> Result<Vec<String>, CheckpointError> {
        let ids = self.ids_newest_first(config, None, None).await?;
        if !ids.is_empty() {
            self.refresh_after_read([config.thread_id.as_str()]).await?;
        }
        Ok(ids)
    }

    /// Checkpoint ids of `config`'s thread and namespace, newest first, below `before`, at most `cap`.
    pub(crate) async fn ids_newest_first(
        &self,
        config: &CheckpointConfig,
        before: Option<&str>,
        cap: Option<usize>,
    ) -> Result<Vec<String>, CheckpointError> {
        let thread = self.keys.thread(&config.thread_id);
        let key = thread.full(&NsSuffix::new(&config.checkpoint_ns).ids());
        let mut cmd = redis::cmd("ZRANGE");
        cmd.arg(&key);
        match before {
            Some(before) => cmd.arg(format!("({before}")).arg("-").arg("BYLEX").arg("REV"),
            None => cmd.arg("+").arg("-").arg("BYLEX").arg("REV"),
        };
        if let Some(cap) = cap {
            cmd.arg("LIMIT").arg(0).arg(i64::try_from(cap).unwrap_or(i64::MAX));
        }
        let ids = self
            .conn
            .run("list ids", |mut c| {
                let cmd = &cmd;
                async move { cmd.query_async::<Vec<String>>(&mut c).await }
            })
            .await
            .map_err(|e| named(e, &config.thread_id, ""))?;
        if ids.is_empty() {
            // The thread's registry lists the index when the namespace has checkpoints: an index that is
            // gone while the registry lists it was lost (evicted, deleted by hand).
            let suffix = NsSuffix::new(&config.checkpoint_ns).ids();
            let mut pipe = redis::pipe();
            pipe.cmd("EXISTS").arg(&key).cmd("SISMEMBER").arg(thread.registry()).arg(&suffix);
            let (exists, listed): (bool, bool) =
                self.query(&pipe, "check index").await.map_err(|e| named(e, &config.thread_id, ""))?;
            if !exists && listed {
                return Err(corrupt(
                    &config.thread_id,
                    "",
                    format!(
                        "the index of checkpoints of namespace '{}' (key '{key}') is gone while the thread \
                         lists it: evicted or deleted outside the saver",
                        config.checkpoint_ns
                    ),
                ));
            }
        }
        Ok(ids)
    }

    /// Fails with `Corrupt` when the index still lists a checkpoint of `missing` (whose hash was not
    /// found): its hash was lost (evicted, deleted by hand), not pruned.
    async fn check_listed(&self, missing: &[Address]) -> Result<(), CheckpointError> {
        if missing.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for a in missing {
            pipe.cmd("ZSCORE")
                .arg(self.keys.thread(&a.thread_id).full(&NsSuffix::new(&a.ns).ids()))
                .arg(&a.id);
        }
        let scores: Vec<Option<f64>> = self.query(&pipe, "check index").await?;
        match missing.iter().zip(scores).find(|(_, score)| score.is_some()) {
            Some((a, _)) => Err(corrupt(
                &a.thread_id,
                &a.id,
                "the checkpoint's hash is gone while the index lists it: evicted or deleted outside the saver"
                    .to_owned(),
            )),
            None => Ok(()),
        }
    }

    /// `err` naming the thread and checkpoint of the first of `keys` (key, the type it must have,
    /// address) whose type is another, when `err` is a command on a key of the wrong type.
    async fn name_wrong_type(
        &self,
        err: CheckpointError,
        keys: &[(String, &str, &Address)],
    ) -> CheckpointError {
        if !is_wrong_type(&err) {
            return err;
        }
        let mut pipe = redis::pipe();
        for (key, _, _) in keys {
            pipe.cmd("TYPE").arg(key);
        }
        let Ok(types) = self.query::<Vec<String>>(&pipe, "check key types").await else { return err };
        for ((key, want, a), found) in keys.iter().zip(types) {
            if found != "none" && found != *want {
                return corrupt(
                    &a.thread_id,
                    &a.id,
                    format!("key '{key}' holds the wrong type: a {found}, not a {want}"),
                );
            }
        }
        err
    }

    /// Every checkpoint of every thread and namespace below `before`, newest first (by id, then thread,
    /// then namespace).
    async fn every_address(&self, before: Option<&str>) -> Result<Vec<Address>, CheckpointError> {
        let threads_key = self.keys.threads();
        let threads: Vec<String> = self
            .conn
            .run("list threads", |mut c| {
                let key = &threads_key;
                async move { redis::cmd("SMEMBERS").arg(key).query_async(&mut c).await }
            })
            .await?;
        let mut pipe = redis::pipe();
        for thread_id in &threads {
            pipe.cmd("SMEMBERS").arg(self.keys.thread(thread_id).full(NAMESPACES));
        }
        let namespaces: Vec<Vec<String>> = self.query(&pipe, "list namespaces").await?;
        let mut pairs = Vec::new();
        let mut forget = redis::pipe();
        for (thread_id, namespaces) in threads.iter().zip(namespaces) {
            if namespaces.is_empty() {
                let registry = self.keys.thread(thread_id).registry();
                forget.cmd("EVAL").arg(FORGET_EXPIRED).arg(2).arg(&threads_key).arg(registry).arg(thread_id);
                forget.ignore();
            }
            pairs.extend(namespaces.into_iter().map(|ns| (thread_id.clone(), ns)));
        }
        self.query::<()>(&forget, "forget expired threads").await?;
        let mut pipe = redis::pipe();
        for (thread_id, ns) in &pairs {
            pipe.cmd("ZRANGE").arg(self.keys.thread(thread_id).full(&NsSuffix::new(ns).ids())).arg(0).arg(-1);
        }
        let ids: Vec<Vec<String>> = self.query(&pipe, "list ids").await?;
        let mut all: Vec<Address> =
            pairs
                .into_iter()
                .zip(ids)
                .flat_map(|((thread_id, ns), ids)| {
                    ids.into_iter()
                        .filter(|id| before.is_none_or(|b| id.as_str() < b))
                        .map(move |id| Address { thread_id: thread_id.clone(), ns: ns.clone(), id })
                })
                .collect();
        all.sort_by(|a, b| (&b.id, &b.thread_id, &b.ns).cmp(&(&a.id, &a.thread_id, &a.ns)));
        Ok(all)
    }

    /// The checkpoint hashes at `addresses`, `None` where there is none.
    async fn records(&self, addresses: &[Address]) -> Result<Vec<Option<Record>>, CheckpointError> {
        let mut pipe = redis::pipe();
        let mut keys = Vec::with_capacity(addresses.len());
        for a in addresses {
            let key = self.keys.thread(&a.thread_id).full(&NsSuffix::new(&a.ns).checkpoint(&a.id));
            pipe.cmd("HMGET").arg(&key).arg(&RECORD_FIELDS[..]);
            keys.push((key, "hash", a));
        }
        let raw: Vec<Vec<Option<Vec<u8>>>> = match self.query(&pipe, "read checkpoints").await {
            Ok(raw) => raw,
            Err(e) => return Err(self.name_wrong_type(e, &keys).await),
        };
        addresses
            .iter()
            .zip(raw)
            .map(|(a, fields)| {
                decode_record(&fields)
                    .map_err(|message| corrupt(&a.thread_id, &a.id, format!("checkpoint: {message}")))
            })
            .collect()
    }

    /// Whole tuples: each checkpoint with the values its versions name and its pending writes.
    async fn assemble(&self, found: Vec<(Address, Record)>) -> Result<Vec<CheckpointTuple>, CheckpointError> {
        let mut pipe = redis::pipe();
        let mut keys = Vec::new();
        for (a, record) in &found {
            let thread = self.keys.thread(&a.thread_id);
            let ns = NsSuffix::new(&a.ns);
            let versions = &record.checkpoint.channel_versions;
            if !versions.is_empty() {
                let fields: Vec<String> = versions.iter().map(|(c, v)| blob_field(c, v)).collect();
                let (blobs, bases) = (thread.full(&ns.blobs()), thread.full(&ns.bases()));
                pipe.cmd("EVAL").arg(RESOLVE).arg(2).arg(&blobs).arg(&bases);
                pipe.arg(fields);
                keys.extend([(blobs, "hash", a), (bases, "hash", a)]);
            }
            let writes = ns.writes(&a.id);
            pipe.cmd("HGETALL").arg(thread.full(&writes));
            // Whether the registry lists the writes key (it does once writes were saved).
            pipe.cmd("SISMEMBER").arg(thread.registry()).arg(&writes);
            keys.push((thread.full(&writes), "hash", a));
        }
        let replies = match self.query::<Vec<redis::Value>>(&pipe, "read values and writes").await {
            Ok(replies) => replies,
            Err(e) => return Err(self.name_wrong_type(e, &keys).await),
        };
        let mut replies = replies.into_iter();
        let mut tuples = Vec::with_capacity(found.len());
        for (a, record) in found {
            let mut checkpoint = record.checkpoint;
            if !checkpoint.channel_versions.is_empty() {
                let chains: Vec<Vec<Option<Vec<u8>>>> = parse(replies.next(), &a)?;
                for ((channel, version), chain) in checkpoint.channel_versions.iter().zip(chains) {
                    let value = decode_chain(&chain).map_err(|e| {
                        corrupt(
                            &a.thread_id,
                            &a.id,
                            format!("channel '{channel}' at version '{version}': {e}"),
                        )
                    })?;
                    if let Some(value) = value {
                        checkpoint.channel_values.insert(Arc::clone(channel), value);
                    }
                }
            }
            let raw_writes: Vec<(Vec<u8>, Vec<u8>)> = parse(replies.next(), &a)?;
            let writes_listed: bool = parse(replies.next(), &a)?;
            if raw_writes.is_empty() && writes_listed {
                return Err(corrupt(
                    &a.thread_id,
                    &a.id,
                    "the checkpoint's pending writes are gone while the thread lists them: evicted or deleted \
                     outside the saver"
                        .to_owned(),
                ));
            }
            let pending_writes = writes_in_order(&a, raw_writes)?;
            tuples.push(CheckpointTuple {
                config: a.config(&a.id),
                checkpoint,
                metadata: record.metadata,
                parent_config: record.parent.as_deref().map(|p| a.config(p)),
                pending_writes,
            });
        }
        Ok(tuples)
    }

    /// Runs a non-transactional pipeline.
    pub(crate) async fn query<T: FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
        what: &str,
    ) -> Result<T, CheckpointError> {
        if pipe.is_empty() {
            return T::from_redis_value(redis::Value::Array(Vec::new()))
                .map_err(|e| CheckpointError::backend_from(format!("redis {what}: {e}"), e));
        }
        self.conn.run(what, |mut c| async move { pipe.query_async::<T>(&mut c).await }).await
    }
}

/// Writes sorted by task path, task id and index.
fn writes_in_order(a: &Address, raw: Vec<(Vec<u8>, Vec<u8>)>) -> Result<Vec<PendingWrite>, CheckpointError> {
    let mut writes: Vec<StoredWrite> = raw
        .into_iter()
        .map(|(field, bytes)| {
            decode_write(&bytes).map_err(|e| {
                let field = String::from_utf8_lossy(&field).into_owned();
                corrupt(&a.thread_id, &a.id, format!("pending write '{field}': {e}"))
            })
        })
        .collect::<Result<_, _>>()?;
    writes.sort_by(|x, y| (&x.task_path, &x.task_id, x.idx).cmp(&(&y.task_path, &y.task_id, y.idx)));
    Ok(writes
        .into_iter()
        .map(|w| PendingWrite { task_id: w.task_id, channel: w.channel, value: w.value })
        .collect())
}

fn parse<T: FromRedisValue>(reply: Option<redis::Value>, a: &Address) -> Result<T, CheckpointError> {
    let reply = reply.ok_or_else(|| CheckpointError::backend("redis pipeline returned too few replies"))?;
    T::from_redis_value(reply).map_err(|e| corrupt(&a.thread_id, &a.id, format!("unexpected reply: {e}")))
}

/// Whether `err` is a command on a key of the wrong type (see `conn::classify`).
fn is_wrong_type(err: &CheckpointError) -> bool {
    matches!(err, CheckpointError::Corrupt { thread_id, .. } if thread_id.is_empty())
}

/// `err` naming `thread_id` and `checkpoint_id` when it is a command on a key of the wrong type.
pub(crate) fn named(err: CheckpointError, thread_id: &str, checkpoint_id: &str) -> CheckpointError {
    match err {
        CheckpointError::Corrupt { thread_id: unnamed, message, .. } if unnamed.is_empty() => {
            corrupt(thread_id, checkpoint_id, message)
        }
        other => other,
    }
}

fn metadata_matches(metadata: &Map<String, Value>, filter: &Map<String, Value>) -> bool {
    filter.iter().all(|(key, wanted)| metadata.get(key) == Some(wanted))
}
