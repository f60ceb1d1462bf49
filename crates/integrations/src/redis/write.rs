//! `put` (one server-side script) and `put_writes` (one `MULTI`/`EXEC` transaction): a checkpoint, or a
//! batch of writes, is stored whole or not at all.

use async_trait::async_trait;
use serde_json::Value;
use weft_graph::checkpoint::{
    AppendDelta, ChannelAppends, ChannelName, ChannelValues, ChannelVersion, ChannelVersions, Checkpoint,
    CheckpointConfig, CheckpointError, CheckpointMetadata, ExpectedHead, special,
};

use super::codec::{StoredWrite, encode_append, encode_list, encode_record, encode_value, encode_write};
use super::delta::{DeltaPlanner, ListPlan};
use super::keys::{NAMESPACES, NsSuffix, ThreadKeys, blob_field, write_field};
use super::read::named;
use super::saver::RedisSaver;
use crate::savers::{PutOne, saved_config, writes_checkpoint};

/// Stores a checkpoint atomically. KEYS: thread index, registry, namespace set, values, bases,
/// checkpoint hash, ids. ARGV: thread id, namespace, checkpoint id, checkpoint JSON, metadata JSON,
/// parent id, has parent (`1`/`0`), ttl ms (`""`: none), thread base, the suffixes of ids, values, bases
/// and checkpoint hash, the count of values, then per value its field, bytes and base field (`""`:
/// whole), then the expected head: `""` (none expected), `empty` or `id`, and the id. When the head (the
/// greatest id of the namespace) is neither the one expected nor this checkpoint (the same put again)
/// nothing is written and `{"", head}` is returned (`head` empty: none). When a base is missing nothing is written and the fields whose base is missing
/// are returned.
const PUT: &str = r"
local n = tonumber(ARGV[14])
local mode = ARGV[15 + 3 * n]
if mode ~= '' then
  local head = redis.call('ZRANGE', KEYS[7], -1, -1)[1]
  local other = head ~= nil and head ~= ARGV[3]
  if other and ((mode == 'empty') or (mode == 'id' and head ~= ARGV[16 + 3 * n])) then
    return {'', head or ''}
  end
end
local missing = {}
for i = 0, n - 1 do
  local base = ARGV[17 + 3 * i]
  if base ~= '' and redis.call('HEXISTS', KEYS[4], base) == 0 then
    missing[#missing + 1] = ARGV[15 + 3 * i]
  end
end
if #missing > 0 then
  return missing
end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[2], 'ns', ARGV[10], ARGV[11], ARGV[12], ARGV[13])
redis.call('SADD', KEYS[3], ARGV[2])
for i = 0, n - 1 do
  local field, base = ARGV[15 + 3 * i], ARGV[17 + 3 * i]
  if redis.call('HSETNX', KEYS[4], field, ARGV[16 + 3 * i]) == 1 and base ~= '' then
    redis.call('HSET', KEYS[5], field, base)
  end
end
redis.call('DEL', KEYS[6])
redis.call('HSET', KEYS[6], 'format', '1', 'checkpoint', ARGV[4], 'metadata', ARGV[5])
if ARGV[7] == '1' then
  redis.call('HSET', KEYS[6], 'parent', ARGV[6])
end
redis.call('ZADD', KEYS[7], 0, ARGV[3])
if ARGV[8] ~= '' then
  local members = redis.call('SMEMBERS', KEYS[2])
  for i = 1, #members do
    redis.call('PEXPIRE', ARGV[9] .. members[i], ARGV[8])
  end
  redis.call('PEXPIRE', KEYS[2], ARGV[8])
end
return missing
";

/// How many times a put is tried again with whole values after finding a base gone.
const WHOLE_RETRIES: usize = 2;

/// One channel value of a put.
struct Planned {
    channel: ChannelName,
    version: ChannelVersion,
    /// A list (maybe stored as appended elements).
    list: Option<ListPlan>,
    /// The items the engine appended to the value at a base version (no whole value to fall back on).
    append: Option<AppendDelta>,
    /// Anything else (`None`: the channel is empty).
    other: Option<Value>,
}

impl Planned {
    /// Its field, bytes and base field (empty: stored whole).
    fn encode(&self) -> Result<(String, Vec<u8>, String), String> {
        let field = blob_field(&self.channel, &self.version);
        if let Some(delta) = &self.append {
            let bytes = encode_append(&delta.base_version, None, &delta.items)?;
            return Ok((field, bytes, blob_field(&self.channel, &delta.base_version)));
        }
        match &self.list {
            Some(ListPlan { items, base: Some((base, from)), .. }) => {
                let bytes = encode_append(base, Some(*from), items.get(*from..).unwrap_or_default())?;
                Ok((field, bytes, blob_field(&self.channel, base)))
            }
            Some(list) => Ok((field, encode_list(&list.items)?, String::new())),
            None => Ok((field, encode_value(self.other.as_ref())?, String::new())),
        }
    }
}

#[async_trait]
impl PutOne for RedisSaver {
    /// One script: the head checked, the checkpoint and its values stored (values whose base is gone
    /// are stored whole, and the script runs again).
    async fn put_one(
        &self,
        config: &CheckpointConfig,
        mut checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        mut appends: ChannelAppends,
        expected: &ExpectedHead,
    ) -> Result<CheckpointConfig, CheckpointError> {
        let (thread_id, ns_name) = (&config.thread_id, &config.checkpoint_ns);
        if checkpoint.id.is_empty() {
            return Err(CheckpointError::Invalid(format!(
                "checkpoint for thread '{thread_id}' has an empty id"
            )));
        }
        if let Some((channel, _)) = appends.iter().find(|(channel, _)| !new_versions.contains_key(*channel)) {
            return Err(CheckpointError::Invalid(format!(
                "append to channel '{channel}' of thread '{thread_id}', which has no new version"
            )));
        }
        let mut values = std::mem::take(&mut checkpoint.channel_values);
        self.whole_after_long_chains(config, &mut appends, &mut values).await?;
        let mut planned = self.plan(config, new_versions, appends, values);
        let (record, meta) = encode_record(&checkpoint, &metadata).map_err(|message| {
            CheckpointError::Invalid(format!(
                "cannot serialize checkpoint '{}' of thread '{thread_id}': {message}",
                checkpoint.id
            ))
        })?;
        let cmd = self.put_command(config, &checkpoint.id, record, meta, planned.len());
        for attempt in 0..=WHOLE_RETRIES {
            let mut call = cmd.clone();
            for value in &planned {
                let (field, bytes, base) = value.encode().map_err(|message| CheckpointError::Serialize {
                    thread_id: thread_id.clone(),
                    channel: value.channel.to_string(),
                    message,
                })?;
                call.arg(field).arg(bytes).arg(base);
            }
            match expected {
                ExpectedHead::Id(id) => call.arg("id").arg(id),
                ExpectedHead::Empty => call.arg("empty").arg(""),
                _ => call.arg("").arg(""),
            };
            let missing: Vec<String> = self
                .conn
                .run("put", |mut c| {
                    let call = &call;
                    async move { call.query_async(&mut c).await }
                })
                .await
                .map_err(|e| named(e, thread_id, &checkpoint.id))?;
            if let [marker, head] = &missing[..] {
                if marker.is_empty() {
                    let head = Some(head.as_str()).filter(|h| !h.is_empty());
                    return Err(expected.check(config, &checkpoint.id, head).err().unwrap_or_else(|| {
                        CheckpointError::backend("redis put refused a checkpoint whose head matched")
                    }));
                }
            }
            if missing.is_empty() {
                self.committed(thread_id, ns_name, &planned);
                return Ok(saved_config(config, checkpoint.id));
            }
            whole_where_missing(thread_id, &mut planned, &missing)?;
            tracing::debug!(thread_id, attempt, "bases of appended values are gone; storing them whole");
        }
        Err(CheckpointError::backend(format!(
            "put of checkpoint '{}' in thread '{thread_id}' kept finding the bases of appended values gone",
            checkpoint.id
        )))
    }
}

impl RedisSaver {
    /// Each new channel version's plan: the engine's append, a list (maybe stored as appended elements),
    /// or a value stored whole.
    fn plan(
        &self,
        config: &CheckpointConfig,
        new_versions: ChannelVersions,
        mut appends: ChannelAppends,
        mut values: ChannelValues,
    ) -> Vec<Planned> {
        let (thread_id, ns_name) = (&config.thread_id, &config.checkpoint_ns);
        new_versions
            .into_iter()
            .map(|(channel, version)| {
                if let Some(delta) = appends.remove(&channel) {
                    return Planned { channel, version, list: None, append: Some(delta), other: None };
                }
                match values.remove(&*channel) {
                    Some(Value::Array(items)) => {
                        let list = self.deltas.plan(thread_id, ns_name, &channel, &version, items);
                        Planned { channel, version, list: Some(list), append: None, other: None }
                    }
                    other => Planned { channel, version, list: None, append: None, other },
                }
            })
            .collect()
    }

    /// The put script's call with its keys and every argument before the channel values (`values` of
    /// them) and the expected head.
    fn put_command(
        &self,
        config: &CheckpointConfig,
        checkpoint_id: &str,
        record: Vec<u8>,
        meta: Vec<u8>,
        values: usize,
    ) -> redis::Cmd {
        let (thread_id, ns_name) = (&config.thread_id, &config.checkpoint_ns);
        let thread = self.keys.thread(thread_id);
        let ns = NsSuffix::new(ns_name);
        let suffixes = [ns.ids(), ns.blobs(), ns.bases(), ns.checkpoint(checkpoint_id)];
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(PUT).arg(7).arg(self.keys.threads()).arg(thread.registry()).arg(thread.full(NAMESPACES));
        cmd.arg(thread.full(&suffixes[1])).arg(thread.full(&suffixes[2])).arg(thread.full(&suffixes[3]));
        cmd.arg(thread.full(&suffixes[0]));
        cmd.arg(thread_id).arg(ns_name).arg(checkpoint_id).arg(record).arg(meta);
        let parent = config.checkpoint_id.as_deref();
        cmd.arg(parent.unwrap_or_default()).arg(if parent.is_some() { "1" } else { "0" });
        cmd.arg(self.ttl_ms().map(|ms| ms.to_string()).unwrap_or_default()).arg(thread.base());
        cmd.arg(&suffixes[..]).arg(values);
        cmd
    }

    /// After a put stored everything: the delta planner learns what is stored now.
    fn committed(&self, thread_id: &str, ns_name: &str, planned: &[Planned]) {
        let lists = planned.iter().filter_map(|p| p.list.as_ref().map(|l| (&*p.channel, &*p.version, l)));
        self.deltas.commit(thread_id, ns_name, lists);
        let (appended, others): (Vec<&Planned>, Vec<&Planned>) =
            planned.iter().partition(|p| p.append.is_some());
        self.deltas.commit_appends(
            thread_id,
            ns_name,
            appended.iter().map(|p| &*p.channel),
            others.iter().map(|p| &*p.channel),
        );
    }

    /// Turns the engine's appends to channels with a long chain of appends into whole values (the
    /// parent's list and the new items), so that a read follows a bounded number of links. The parent is
    /// read once, and only when some chain is long (every `snapshot_every` appends to a channel).
    async fn whole_after_long_chains(
        &self,
        config: &CheckpointConfig,
        appends: &mut ChannelAppends,
        values: &mut ChannelValues,
    ) -> Result<(), CheckpointError> {
        let (thread_id, ns) = (&config.thread_id, &config.checkpoint_ns);
        let long: Vec<ChannelName> =
            appends.keys().filter(|channel| self.deltas.is_long(thread_id, ns, channel)).cloned().collect();
        if long.is_empty() || config.checkpoint_id.is_none() {
            return Ok(());
        }
        let Some(mut parent) = self.read_tuple(config).await? else { return Ok(()) };
        crate::savers::whole_from_parent(&mut parent, long, appends, values);
        Ok(())
    }

    pub(crate) async fn write_pending(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<(), CheckpointError> {
        let thread_id = &config.thread_id;
        let checkpoint_id = writes_checkpoint(config, task_id)?;
        let thread = self.keys.thread(thread_id);
        let writes_suffix = NsSuffix::new(&config.checkpoint_ns).writes(checkpoint_id);
        let mut pipe = self.thread_pipe(&thread, thread_id, &config.checkpoint_ns, &[&writes_suffix]);
        let writes_key = thread.full(&writes_suffix);
        for (position, (channel, value)) in writes.into_iter().enumerate() {
            let fixed = special::fixed_index(&channel);
            let idx = fixed.unwrap_or_else(|| i64::try_from(position).unwrap_or(i64::MAX));
            let field = write_field(task_id, idx);
            let write = StoredWrite {
                task_id: task_id.to_owned(),
                idx,
                channel,
                task_path: task_path.to_owned(),
                value,
            };
            let bytes = encode_write(&write).map_err(|message| CheckpointError::Serialize {
                thread_id: thread_id.clone(),
                channel: write.channel.clone(),
                message,
            })?;
            // Special writes replace earlier ones; regular writes are kept as first saved.
            let command = if fixed.is_some() { "HSET" } else { "HSETNX" };
            pipe.cmd(command).arg(&writes_key).arg(field).arg(bytes).ignore();
        }
        self.add_refresh(&mut pipe, &thread);
        self.conn
            .run("put_writes", |mut c| {
                let pipe = &pipe;
                async move { pipe.query_async::<()>(&mut c).await }
            })
            .await
            .map_err(|e| named(e, thread_id, checkpoint_id))
    }

    /// A transaction that registers the thread, its namespace `ns` and the keys of `suffixes`.
    fn thread_pipe(
        &self,
        thread: &ThreadKeys,
        thread_id: &str,
        ns: &str,
        suffixes: &[&String],
    ) -> redis::Pipeline {
        let mut pipe = redis::pipe();
        pipe.atomic();
        pipe.cmd("SADD").arg(self.keys.threads()).arg(thread_id).ignore();
        pipe.cmd("SADD").arg(thread.registry()).arg(NAMESPACES).arg(suffixes).ignore();
        pipe.cmd("SADD").arg(thread.full(NAMESPACES)).arg(ns).ignore();
        pipe
    }
}

/// After a put found the bases of some appended values gone (`missing`, their fields): the lists among them
/// are planned whole for the next try; the engine's appends cannot be, and fail.
fn whole_where_missing(
    thread_id: &str,
    planned: &mut [Planned],
    missing: &[String],
) -> Result<(), CheckpointError> {
    for value in planned.iter() {
        if let Some(delta) =
            value.append.as_ref().filter(|_| missing.contains(&blob_field(&value.channel, &value.version)))
        {
            return Err(CheckpointError::Invalid(format!(
                "append to channel '{}' of thread '{thread_id}': its base version '{}' is not stored",
                value.channel, delta.base_version
            )));
        }
    }
    for value in planned.iter_mut() {
        let field = blob_field(&value.channel, &value.version);
        if let Some(list) = value.list.as_mut().filter(|_| missing.contains(&field)) {
            DeltaPlanner::whole(list);
        }
    }
    Ok(())
}
