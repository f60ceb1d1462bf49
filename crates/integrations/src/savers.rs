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
