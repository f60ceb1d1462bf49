//! `put` and `put_writes`: each one `MULTI`/`EXEC` transaction, so a checkpoint (or a batch of writes)
//! is stored whole or not at all.

use serde_json::Value;
use weft_graph::checkpoint::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointError, CheckpointMetadata, special,
};

use super::codec::{FORMAT_FIELD, StoredWrite, encode_record, encode_value, encode_write};
use super::keys::{NAMESPACES, NsSuffix, ThreadKeys, blob_field, write_field};
use super::saver::RedisSaver;

impl RedisSaver {
    pub(crate) async fn write_checkpoint(
        &self,
        config: &CheckpointConfig,
        mut checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig, CheckpointError> {
        let thread_id = &config.thread_id;
        if checkpoint.id.is_empty() {
            return Err(CheckpointError::Invalid(format!(
                "checkpoint for thread '{thread_id}' has an empty id"
            )));
        }
        let values = std::mem::take(&mut checkpoint.channel_values);
        let mut blobs = Vec::with_capacity(new_versions.len());
        for (channel, version) in &new_versions {
            let bytes = encode_value(values.get(channel)).map_err(|message| CheckpointError::Serialize {
                thread_id: thread_id.clone(),
                channel: channel.clone(),
                message,
            })?;
            blobs.push((blob_field(channel, version), bytes));
        }
        let (record, meta) = encode_record(&checkpoint, &metadata).map_err(|message| {
            CheckpointError::Invalid(format!(
                "cannot serialize checkpoint '{}' of thread '{thread_id}': {message}",
                checkpoint.id
            ))
        })?;

        let thread = self.keys.thread(thread_id);
        let ns = NsSuffix::new(&config.checkpoint_ns);
        let (ids, values_key, record_key) = (ns.ids(), ns.blobs(), ns.checkpoint(&checkpoint.id));
        let mut pipe =
            self.thread_pipe(&thread, thread_id, &config.checkpoint_ns, &[&ids, &values_key, &record_key]);
        let values_key = thread.full(&values_key);
        for (field, bytes) in &blobs {
            pipe.cmd("HSETNX").arg(&values_key).arg(field).arg(bytes).ignore();
        }
        let record_key = thread.full(&record_key);
        pipe.cmd("DEL").arg(&record_key).ignore();
        let hset = pipe.cmd("HSET").arg(&record_key);
        hset.arg("format").arg(FORMAT_FIELD).arg("checkpoint").arg(record).arg("metadata").arg(meta);
        if let Some(parent) = &config.checkpoint_id {
            hset.arg("parent").arg(parent);
        }
        hset.ignore();
        pipe.cmd("ZADD").arg(thread.full(&ids)).arg(0).arg(&checkpoint.id).ignore();
        self.add_refresh(&mut pipe, &thread);
        self.conn
            .run("put", |mut c| {
                let pipe = &pipe;
                async move { pipe.query_async::<()>(&mut c).await }
            })
            .await?;
        Ok(CheckpointConfig {
            thread_id: thread_id.clone(),
            checkpoint_ns: config.checkpoint_ns.clone(),
            checkpoint_id: Some(checkpoint.id),
        })
    }

    pub(crate) async fn write_pending(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<(), CheckpointError> {
        let thread_id = &config.thread_id;
        let Some(checkpoint_id) = &config.checkpoint_id else {
            return Err(CheckpointError::Invalid(format!(
                "writes of task '{task_id}' in thread '{thread_id}' name no checkpoint id"
            )));
        };
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
