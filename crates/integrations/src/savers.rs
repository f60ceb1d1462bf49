//! What the SQLite, PostgreSQL and Redis savers share beyond their storage: the checks and errors of the
//! checkpointer's contract, and saving a batch op by op.

#[cfg(any(feature = "sqlite", feature = "redis"))]
use async_trait::async_trait;
#[cfg(any(feature = "sqlite", feature = "redis"))]
use weft_graph::checkpoint::{
    ChannelAppends, ChannelVersions, Checkpoint, CheckpointMetadata, Checkpointer, ExpectedHead, SaveOp,
    owned_writes,
};
use weft_graph::checkpoint::{CheckpointConfig, CheckpointError};

/// The checkpoint id that writes of `task_id` belong to; an error when `config` names none.
pub(crate) fn writes_checkpoint<'a>(
    config: &'a CheckpointConfig,
    task_id: &str,
) -> Result<&'a str, CheckpointError> {
    config.checkpoint_id.as_deref().ok_or_else(|| {
        CheckpointError::Invalid(format!(
            "writes of task '{task_id}' in thread '{}' name no checkpoint id",
            config.thread_id
        ))
    })
}

/// Why `copy_thread` from `src` to `dst` is refused: `src` has no checkpoints (`has_source` false) or
/// `dst` has some.
pub(crate) fn copy_refused(src: &str, dst: &str, has_source: bool) -> CheckpointError {
    if has_source {
        CheckpointError::Invalid(format!(
            "cannot copy thread '{src}' to thread '{dst}': '{dst}' already has checkpoints"
        ))
    } else {
        CheckpointError::Invalid(format!("cannot copy thread '{src}': it has no checkpoints"))
    }
}

/// The address of checkpoint `id` saved under `config` (its thread and namespace).
pub(crate) fn saved_config(config: &CheckpointConfig, id: String) -> CheckpointConfig {
    CheckpointConfig {
        thread_id: config.thread_id.clone(),
        checkpoint_ns: config.checkpoint_ns.clone(),
        checkpoint_id: Some(id),
    }
}

#[cfg(any(feature = "sqlite", feature = "redis"))]
/// A saver that stores one checkpoint at a time, checking its expected head as it does.
#[async_trait]
pub(crate) trait PutOne: Checkpointer {
    /// Stores a checkpoint, refusing it unless the head of its thread and namespace is as `expected`.
    async fn put_one(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        appends: ChannelAppends,
        expected: &ExpectedHead,
    ) -> Result<CheckpointConfig, CheckpointError>;
}

#[cfg(any(feature = "sqlite", feature = "redis"))]
/// Saves `ops` in order, each on its own (a put with its expected head checked); stops at the first
/// error.
pub(crate) async fn put_each<S: PutOne + ?Sized>(saver: &S, ops: Vec<SaveOp>) -> Result<(), CheckpointError> {
    for op in ops {
        match op {
            SaveOp::Put { config, checkpoint, metadata, new_versions, appends, expected_head } => {
                saver.put_one(&config, checkpoint, metadata, new_versions, appends, &expected_head).await?;
            }
            SaveOp::Writes { config, writes, task_id, task_path } => {
                saver.put_writes(&config, owned_writes(writes), &task_id, &task_path).await?;
            }
        }
    }
    Ok(())
}

#[cfg(any(feature = "sqlite", feature = "redis"))]
/// The future of a checkpointer's `put` as `async_trait` boxes it.
pub(crate) type PutFuture<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<CheckpointConfig, CheckpointError>> + Send + 'a>,
>;

#[cfg(any(feature = "sqlite", feature = "redis"))]
/// The [`Checkpointer`] methods of a [`PutOne`] saver that store one checkpoint (`put`,
/// `put_with_appends`, with any head) and `stores_appends` (whether the saver's `$delta` planner is on),
/// for use inside its `#[async_trait] impl Checkpointer`. Written as `async_trait` writes an `async fn`
/// (the attribute does not see inside a macro's expansion).
macro_rules! put_one_methods {
    ($delta:ident) => {
        fn put<'life0, 'life1, 'async_trait>(
            &'life0 self,
            config: &'life1 weft_graph::checkpoint::CheckpointConfig,
            checkpoint: weft_graph::checkpoint::Checkpoint,
            metadata: weft_graph::checkpoint::CheckpointMetadata,
            new_versions: weft_graph::checkpoint::ChannelVersions,
        ) -> $crate::savers::PutFuture<'async_trait>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            Self: 'async_trait,
        {
            let appends = weft_graph::checkpoint::ChannelAppends::new();
            self.put_with_appends(config, checkpoint, metadata, new_versions, appends)
        }

        /// Stores the engine's appends as the new items on their base version (O(new items) a step),
        /// unless delta storage is off.
        fn stores_appends(&self) -> bool {
            self.$delta.enabled()
        }

        fn put_with_appends<'life0, 'life1, 'async_trait>(
            &'life0 self,
            config: &'life1 weft_graph::checkpoint::CheckpointConfig,
            checkpoint: weft_graph::checkpoint::Checkpoint,
            metadata: weft_graph::checkpoint::CheckpointMetadata,
            new_versions: weft_graph::checkpoint::ChannelVersions,
            appends: weft_graph::checkpoint::ChannelAppends,
        ) -> $crate::savers::PutFuture<'async_trait>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            Self: 'async_trait,
        {
            Box::pin(async move {
                let any = weft_graph::checkpoint::ExpectedHead::Any;
                $crate::savers::PutOne::put_one(
                    self,
                    config,
                    checkpoint,
                    metadata,
                    new_versions,
                    appends,
                    &any,
                )
                .await
            })
        }
    };
}
#[cfg(any(feature = "sqlite", feature = "redis"))]
pub(crate) use put_one_methods;

/// Per channel (thread, namespace, channel), the engine's appends a saver stored in a row since the
/// channel's last whole value, as this process saw them: a saver stores the next version whole once a
/// count reaches its `snapshot_every` ([`AppendChains::is_long`]), so that a read follows a bounded
/// number of links. A count lost (a restart, the bound below, another process writing the thread) only
/// makes a chain longer, never a value wrong.
#[derive(Debug, Default)]
pub(crate) struct AppendChains {
    counts: std::collections::HashMap<(String, String, String), usize>,
}

impl AppendChains {
    fn key(thread_id: &str, ns: &str, channel: &str) -> (String, String, String) {
        (thread_id.to_owned(), ns.to_owned(), channel.to_owned())
    }

    /// Whether the next append to `channel` is to be stored whole, with `snapshot_every` links at most.
    pub(crate) fn is_long(&self, thread_id: &str, ns: &str, channel: &str, snapshot_every: usize) -> bool {
        !self.counts.is_empty()
            && self.counts.get(&Self::key(thread_id, ns, channel)).is_some_and(|n| n + 1 >= snapshot_every)
    }

    /// Records a stored save's appends (one more link each) and the channels it stored otherwise (their
    /// count starts over); past `capacity` counts (four per remembered list), every count starts over.
    pub(crate) fn stored<'a>(
        &mut self,
        thread_id: &str,
        ns: &str,
        appended: impl IntoIterator<Item = &'a str>,
        otherwise: impl IntoIterator<Item = &'a str>,
        capacity: usize,
    ) {
        for channel in appended {
            *self.counts.entry(Self::key(thread_id, ns, channel)).or_insert(0) += 1;
        }
        // Most saves append nothing: no key is made for them.
        if !self.counts.is_empty() {
            for channel in otherwise {
                self.counts.remove(&Self::key(thread_id, ns, channel));
            }
        }
        if self.counts.len() > capacity.max(1) * 4 {
            self.counts.clear();
        }
    }

    /// Forgets the count of one channel.
    pub(crate) fn forget(&mut self, thread_id: &str, ns: &str, channel: &str) {
        if !self.counts.is_empty() {
            self.counts.remove(&Self::key(thread_id, ns, channel));
        }
    }

    /// Forgets a thread's counts.
    pub(crate) fn forget_thread(&mut self, thread_id: &str) {
        self.counts.retain(|(thread, _, _), _| thread != thread_id);
    }
}

/// Moves the engine's appends to `channels` into `values`, whole, from the `parent` checkpoint they
/// extend: the parent's list followed by the new items. An append whose base is not the version the
/// parent lists stays an append (its base is checked when stored). Returns the channels made whole.
pub(crate) fn whole_from_parent(
    parent: &mut weft_graph::checkpoint::CheckpointTuple,
    channels: Vec<weft_graph::checkpoint::ChannelName>,
    appends: &mut weft_graph::checkpoint::ChannelAppends,
    values: &mut weft_graph::checkpoint::ChannelValues,
) -> Vec<weft_graph::checkpoint::ChannelName> {
    let mut whole = Vec::new();
    for channel in channels {
        let Some(base) = appends.get(&channel).map(|d| &d.base_version) else { continue };
        let listed = parent.checkpoint.channel_versions.get(&channel) == Some(base);
        let mut items = match parent.checkpoint.channel_values.remove(&channel) {
            Some(serde_json::Value::Array(items)) if listed => items,
            // Listed without a value: the channel is empty, for a list the empty list.
            None if listed => Vec::new(),
            _ => continue,
        };
        if let Some(delta) = appends.remove(&channel) {
            items.extend(delta.items);
            values.insert(channel.clone(), serde_json::Value::Array(items));
            whole.push(channel);
        }
    }
    whole
}
