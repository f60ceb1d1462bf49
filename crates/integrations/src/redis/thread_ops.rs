//! Whole-thread operations: TTL refresh, `delete_thread`, `copy_thread`, `prune`.
//!
//! The scripts walk a thread's registry on the server, so each runs atomically in one round trip.

use std::collections::{BTreeSet, HashMap, HashSet};

use weft_graph::checkpoint::{Checkpoint, CheckpointError};

use super::keys::{NAMESPACES, NsSuffix, ThreadKeys, blob_field};
use super::saver::RedisSaver;

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
        if self.checkpoint_count(src).await? == 0 {
            return Err(CheckpointError::Invalid(format!(
                "cannot copy thread '{src}': it has no checkpoints"
            )));
        }
        if self.checkpoint_count(dst).await? > 0 {
            return Err(CheckpointError::Invalid(format!(
                "cannot copy thread '{src}' to thread '{dst}': '{dst}' already has checkpoints"
            )));
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
            let suffix = NsSuffix::new(&ns);
            let ids_key = thread.full(&suffix.ids());
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
                cmd.arg(thread.base()).arg(suffix.head()).arg(&ns).ignore();
                self.query::<()>(&cmd, "prune").await?;
            } else if drop > 0 {
                self.drop_checkpoints(&thread, &suffix, &ids[..drop], &ids[drop..]).await?;
            }
        }
        if self.namespaces(&thread).await?.is_empty() {
            self.remove_thread(thread_id).await?;
        }
        Ok(())
    }

    /// Drops `dropped` checkpoints of a namespace with their writes and the values that only they use.
    async fn drop_checkpoints(
        &self,
        thread: &ThreadKeys,
        ns: &NsSuffix,
        dropped: &[String],
        kept: &[String],
    ) -> Result<(), CheckpointError> {
        let mut pipe = redis::pipe();
        for id in dropped.iter().chain(kept) {
            pipe.cmd("HGET").arg(thread.full(&ns.checkpoint(id))).arg("checkpoint");
        }
        let raw: Vec<Option<Vec<u8>>> = self.query(&pipe, "prune").await?;
        let versions = |bytes: &Option<Vec<u8>>| -> Option<HashSet<String>> {
            let checkpoint: Checkpoint = serde_json::from_slice(bytes.as_deref()?).ok()?;
            Some(checkpoint.channel_versions.iter().map(|(c, v)| blob_field(c, v)).collect())
        };
        let bases: HashMap<String, String> = self
            .query::<Vec<HashMap<String, String>>>(
                redis::pipe().cmd("HGETALL").arg(thread.full(&ns.bases())),
                "prune",
            )
            .await?
            .pop()
            .unwrap_or_default();
        // A value is needed by the checkpoints that list its version and by every appended value over it.
        let with_bases = |fields: HashSet<String>| -> HashSet<String> {
            let mut all = HashSet::new();
            for mut field in fields {
                while all.insert(field.clone()) {
                    match bases.get(&field) {
                        Some(base) => field = base.clone(),
                        None => break,
                    }
                }
            }
            all
        };
        let (old, new) = raw.split_at(dropped.len());
        let mut stale: BTreeSet<String> =
            with_bases(old.iter().filter_map(versions).flatten().collect()).into_iter().collect();
        let mut needed = HashSet::new();
        for fields in new.iter().map(versions) {
            match fields {
                Some(fields) => needed.extend(fields),
                // A kept checkpoint that cannot be read may use any value: keep them all.
                None => stale.clear(),
            }
        }
        let needed = with_bases(needed);
        stale.retain(|f| !needed.contains(f));
        let mut pipe = redis::pipe();
        pipe.atomic();
        pipe.cmd("ZREM").arg(thread.full(&ns.ids())).arg(dropped).ignore();
        let suffixes: Vec<String> =
            dropped.iter().flat_map(|id| [ns.checkpoint(id), ns.writes(id)]).collect();
        for chunk in suffixes.chunks(256) {
            let keys: Vec<String> = chunk.iter().map(|s| thread.full(s)).collect();
            pipe.cmd("UNLINK").arg(keys).ignore();
            pipe.cmd("SREM").arg(thread.registry()).arg(chunk).ignore();
        }
        for chunk in stale.into_iter().collect::<Vec<_>>().chunks(256) {
            pipe.cmd("HDEL").arg(thread.full(&ns.blobs())).arg(chunk).ignore();
            pipe.cmd("HDEL").arg(thread.full(&ns.bases())).arg(chunk).ignore();
        }
        self.query::<()>(&pipe, "prune").await
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
