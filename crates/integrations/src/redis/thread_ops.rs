//! Whole-thread operations: TTL refresh, `delete_thread`, `copy_thread`, `prune`.
//!
//! The scripts walk a thread's registry on the server, so each runs atomically in one round trip.

use std::collections::HashSet;

use weft_graph::checkpoint::{Checkpoint, CheckpointError};

use super::codec::{decode_chain, encode_value};
use super::keys::{NAMESPACES, NsSuffix, ThreadKeys, blob_field};
use super::read::RESOLVE;
use super::saver::RedisSaver;
use crate::savers::copy_refused;

/// What `prune` stores whole in a namespace: (field, value) pairs; `complete` is false when a kept
/// appended value's chain could not be read (it is left as it is, and so is every value).
struct Compacted {
    whole: Vec<(String, Vec<u8>)>,
    complete: bool,
}

/// Sets the TTL (ms) of every key of a thread. KEYS: registry. ARGV: base, ttl.
const REFRESH: &str = r"
local members = redis.call('SMEMBERS', KEYS[1])
for i = 1, #members do
  redis.call('PEXPIRE', ARGV[1] .. members[i], ARGV[2])
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return #members
";

/// Deletes every key of a thread. KEYS: registry, thread index. ARGV: base, thread id.
const DELETE: &str = r"
local members = redis.call('SMEMBERS', KEYS[1])
for i = 1, #members do
  redis.call('UNLINK', ARGV[1] .. members[i])
end
redis.call('UNLINK', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[2])
return #members
";

/// Copies every key of a thread to another base. KEYS: source registry, target registry, thread index.
/// ARGV: source base, target base, target thread id.
const COPY: &str = r"
local members = redis.call('SMEMBERS', KEYS[1])
for i = 1, #members do
  redis.call('COPY', ARGV[1] .. members[i], ARGV[2] .. members[i], 'REPLACE')
end
redis.call('COPY', KEYS[1], KEYS[2], 'REPLACE')
redis.call('SADD', KEYS[3], ARGV[3])
return #members
";

/// Deletes every key of one namespace. KEYS: registry, namespace set. ARGV: base, suffix head, namespace.
const DROP_NAMESPACE: &str = r"
local members = redis.call('SMEMBERS', KEYS[1])
local n = #ARGV[2]
for i = 1, #members do
  local m = members[i]
  if string.sub(m, 1, n) == ARGV[2] then
    redis.call('UNLINK', ARGV[1] .. m)
    redis.call('SREM', KEYS[1], m)
  end
end
return redis.call('SREM', KEYS[2], ARGV[3])
";

/// Drops checkpoints of one namespace with their writes, stores values whole and drops values, unless
/// the namespace's checkpoints changed since they were read (then returns 0). KEYS: ids, values, bases,
/// registry. ARGV: thread base, count of ids read, newest id read, number of dropped ids, of values to
/// store whole and of values to drop, then the dropped ids, their checkpoint and writes keys' suffixes
/// (two per id), (field, value) pairs to store whole, fields to drop.
const PRUNE_NAMESPACE: &str = r"
local newest = redis.call('ZRANGE', KEYS[1], -1, -1)[1] or ''
if redis.call('ZCARD', KEYS[1]) ~= tonumber(ARGV[2]) or newest ~= ARGV[3] then
  return 0
end
local dropped, whole, stale = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local at = 7
for i = at, at + dropped - 1 do
  redis.call('ZREM', KEYS[1], ARGV[i])
end
at = at + dropped
for i = at, at + 2 * dropped - 1 do
  redis.call('UNLINK', ARGV[1] .. ARGV[i])
  redis.call('SREM', KEYS[4], ARGV[i])
end
at = at + 2 * dropped
for i = at, at + 2 * whole - 1, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  redis.call('HDEL', KEYS[3], ARGV[i])
end
at = at + 2 * whole
for i = at, at + stale - 1 do
  redis.call('HDEL', KEYS[2], ARGV[i])
  redis.call('HDEL', KEYS[3], ARGV[i])
end
return 1
";

/// How many times `prune` reads a namespace again after checkpoints were added to it meanwhile.
const PRUNE_TRIES: usize = 3;

/// Sums the memory of every key of a thread. KEYS: registry. ARGV: base.
const MEMORY: &str = r"
local total = redis.call('MEMORY', 'USAGE', KEYS[1], 'SAMPLES', 0) or 0
local members = redis.call('SMEMBERS', KEYS[1])
for i = 1, #members do
  total = total + (redis.call('MEMORY', 'USAGE', ARGV[1] .. members[i], 'SAMPLES', 0) or 0)
end
return total
";

impl RedisSaver {
    /// The bytes of server memory a thread takes (every key of it, as `MEMORY USAGE` counts them).
    pub async fn stored_bytes(&self, thread_id: &str) -> Result<u64, CheckpointError> {
        let thread = self.keys.thread(thread_id);
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(MEMORY).arg(1).arg(thread.registry()).arg(thread.base());
        self.conn
            .run("stored_bytes", |mut c| {
                let cmd = &cmd;
                async move { cmd.query_async::<u64>(&mut c).await }
            })
            .await
    }

    /// Adds the TTL refresh of `thread` to a pipeline, when a TTL is set.
    pub(crate) fn add_refresh(&self, pipe: &mut redis::Pipeline, thread: &ThreadKeys) {
        if let Some(ms) = self.ttl_ms() {
            pipe.cmd("EVAL").arg(REFRESH).arg(1).arg(thread.registry()).arg(thread.base()).arg(ms).ignore();
        }
    }

    /// Restarts the TTL of `threads` after a read, when a TTL is set and reads refresh it.
    pub(crate) async fn refresh_after_read<'a>(
        &self,
        threads: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), CheckpointError> {
        if !self.refresh_on_read || self.ttl.is_none() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for thread_id in threads {
            self.add_refresh(&mut pipe, &self.keys.thread(thread_id));
        }
        self.query::<()>(&pipe, "refresh ttl").await
    }

    pub(crate) async fn remove_thread(&self, thread_id: &str) -> Result<(), CheckpointError> {
        self.deltas.forget_thread(thread_id);
        let thread = self.keys.thread(thread_id);
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(DELETE)
            .arg(2)
            .arg(thread.registry())
            .arg(self.keys.threads())
            .arg(thread.base())
            .arg(thread_id);
        self.conn
            .run("delete_thread", |mut c| {
                let cmd = &cmd;
                async move { cmd.query_async::<()>(&mut c).await }
            })
            .await
    }

    pub(crate) async fn duplicate_thread(&self, src: &str, dst: &str) -> Result<(), CheckpointError> {
        let has_source = self.checkpoint_count(src).await? > 0;
        if !has_source || self.checkpoint_count(dst).await? > 0 {
            return Err(copy_refused(src, dst, has_source));
        }
        // Leftovers of `dst` without checkpoints (writes only) must not survive the copy.
        self.remove_thread(dst).await?;
        let (from, to) = (self.keys.thread(src), self.keys.thread(dst));
        let mut pipe = redis::pipe();
        pipe.atomic();
        pipe.cmd("EVAL").arg(COPY).arg(3).arg(from.registry()).arg(to.registry()).arg(self.keys.threads());
        pipe.arg(from.base()).arg(to.base()).arg(dst).ignore();
        self.add_refresh(&mut pipe, &to);
        self.query::<()>(&pipe, "copy_thread").await
    }

    pub(crate) async fn prune_thread(&self, thread_id: &str, keep: usize) -> Result<(), CheckpointError> {
        self.deltas.forget_thread(thread_id);
        let thread = self.keys.thread(thread_id);
        for ns in self.namespaces(&thread).await? {
            self.prune_namespace(&thread, &ns, keep).await?;
        }
        if self.namespaces(&thread).await?.is_empty() {
            self.remove_thread(thread_id).await?;
        }
        Ok(())
    }

    /// Keeps the newest `keep` checkpoints of namespace `ns`, trying again when checkpoints were added
    /// while it read what to keep.
    async fn prune_namespace(
        &self,
        thread: &ThreadKeys,
        ns: &str,
        keep: usize,
    ) -> Result<(), CheckpointError> {
        let suffix = NsSuffix::new(ns);
        let ids_key = thread.full(&suffix.ids());
        for _ in 0..PRUNE_TRIES {
            let ids: Vec<Vec<String>> =
                self.query(redis::pipe().cmd("ZRANGE").arg(&ids_key).arg(0).arg(-1), "prune").await?;
            let ids = ids.into_iter().next().unwrap_or_default();
            let drop = ids.len().saturating_sub(keep);
            if drop == ids.len() {
                let mut cmd = redis::pipe();
                cmd.cmd("EVAL")
                    .arg(DROP_NAMESPACE)
                    .arg(2)
                    .arg(thread.registry())
                    .arg(thread.full(NAMESPACES));
                cmd.arg(thread.base()).arg(suffix.head()).arg(ns).ignore();
                return self.query::<()>(&cmd, "prune").await;
            }
            if drop == 0 || self.drop_checkpoints(thread, &suffix, &ids, drop).await? {
                return Ok(());
            }
        }
        Err(CheckpointError::unavailable(format!(
            "prune of namespace '{ns}' ({}): checkpoints kept being added meanwhile",
            thread.base()
        )))
    }

    /// Drops the oldest `drop` of a namespace's checkpoints `ids` with their writes, stores whole at its
    /// version every kept value appended to a version no kept checkpoint lists, and drops every value no
    /// kept checkpoint lists, in one script. `false` (nothing done) when the namespace's checkpoints are
    /// no longer `ids`.
    async fn drop_checkpoints(
        &self,
        thread: &ThreadKeys,
        ns: &NsSuffix,
        ids: &[String],
        drop: usize,
    ) -> Result<bool, CheckpointError> {
        let (dropped, kept) = ids.split_at(drop);
        let (blobs, bases) = (thread.full(&ns.blobs()), thread.full(&ns.bases()));
        let mut whole = Vec::new();
        let mut stale = Vec::new();
        // Values are dropped only when every kept checkpoint can be read (one that cannot may use any).
        if let Some(kept) = self.kept_fields(thread, ns, kept).await? {
            let compacted = self.compact(thread, &blobs, &bases, &kept).await?;
            whole = compacted.whole;
            // A kept delta whose chain cannot be read is left as it is, with every value under it.
            if compacted.complete {
                let mut all: Vec<Vec<String>> =
                    self.query(redis::pipe().cmd("HKEYS").arg(&blobs), "prune").await?;
                stale = all.pop().unwrap_or_default();
                stale.retain(|f| !kept.contains(f));
            }
        }
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(PRUNE_NAMESPACE).arg(4).arg(thread.full(&ns.ids())).arg(&blobs).arg(&bases);
        cmd.arg(thread.registry())
            .arg(thread.base())
            .arg(ids.len())
            .arg(ids.last().map_or("", String::as_str));
        cmd.arg(dropped.len()).arg(whole.len()).arg(stale.len()).arg(dropped);
        for id in dropped {
            cmd.arg(ns.checkpoint(id)).arg(ns.writes(id));
        }
        for (field, bytes) in &whole {
            cmd.arg(field).arg(bytes);
        }
        cmd.arg(&stale);
        self.conn
            .run("prune", |mut c| {
                let cmd = &cmd;
                async move { cmd.query_async::<bool>(&mut c).await }
            })
            .await
    }

    /// The value fields the `kept` checkpoints of a namespace list; `None` when one of them cannot be read.
    async fn kept_fields(
        &self,
        thread: &ThreadKeys,
        ns: &NsSuffix,
        kept: &[String],
    ) -> Result<Option<HashSet<String>>, CheckpointError> {
        let mut pipe = redis::pipe();
        for id in kept {
            pipe.cmd("HGET").arg(thread.full(&ns.checkpoint(id))).arg("checkpoint");
        }
        let raw: Vec<Option<Vec<u8>>> = self.query(&pipe, "prune").await?;
        let mut fields = HashSet::new();
        for bytes in raw {
            let Some(checkpoint) = bytes.and_then(|b| serde_json::from_slice::<Checkpoint>(&b).ok()) else {
                return Ok(None);
            };
            fields.extend(checkpoint.channel_versions.iter().map(|(c, v)| blob_field(c, v)));
        }
        Ok(Some(fields))
    }

    /// The kept values (`kept`, their fields) appended to a version no kept checkpoint lists, rebuilt
    /// whole with the reads' own code (`RESOLVE`, `decode_chain`).
    async fn compact(
        &self,
        thread: &ThreadKeys,
        blobs: &str,
        bases: &str,
        kept: &HashSet<String>,
    ) -> Result<Compacted, CheckpointError> {
        let mut done = Compacted { whole: Vec::new(), complete: true };
        if kept.is_empty() {
            return Ok(done);
        }
        let fields: Vec<&String> = kept.iter().collect();
        let found: Vec<Vec<Option<String>>> =
            self.query(redis::pipe().cmd("HMGET").arg(bases).arg(&fields), "prune").await?;
        let targets: Vec<&String> = fields
            .into_iter()
            .zip(found.into_iter().next().unwrap_or_default())
            .filter(|(_, base)| base.as_ref().is_some_and(|base| !kept.contains(base)))
            .map(|(field, _)| field)
            .collect();
        if targets.is_empty() {
            return Ok(done);
        }
        let mut pipe = redis::pipe();
        pipe.cmd("EVAL").arg(RESOLVE).arg(2).arg(blobs).arg(bases).arg(&targets);
        let chains: Vec<Vec<Vec<Option<Vec<u8>>>>> = self.query(&pipe, "prune").await?;
        for (field, chain) in targets.into_iter().zip(chains.into_iter().next().unwrap_or_default()) {
            let value = decode_chain(&chain).and_then(|value| encode_value(value.as_ref()));
            match value {
                Ok(bytes) => done.whole.push((field.clone(), bytes)),
                Err(message) => {
                    tracing::warn!(
                        thread = thread.base(),
                        field = field.as_str(),
                        message,
                        "prune keeps an appended value whose chain cannot be read as it is"
                    );
                    done.complete = false;
                }
            }
        }
        Ok(done)
    }

    async fn namespaces(&self, thread: &ThreadKeys) -> Result<Vec<String>, CheckpointError> {
        let reply: Vec<Vec<String>> =
            self.query(redis::pipe().cmd("SMEMBERS").arg(thread.full(NAMESPACES)), "read namespaces").await?;
        Ok(reply.into_iter().next().unwrap_or_default())
    }

    /// How many checkpoints a thread has over all its namespaces.
    async fn checkpoint_count(&self, thread_id: &str) -> Result<u64, CheckpointError> {
        let thread = self.keys.thread(thread_id);
        let mut pipe = redis::pipe();
        for ns in self.namespaces(&thread).await? {
            pipe.cmd("ZCARD").arg(thread.full(&NsSuffix::new(&ns).ids()));
        }
        let counts: Vec<u64> = self.query(&pipe, "count checkpoints").await?;
        Ok(counts.into_iter().sum())
    }
}
