//! `RedisSaver`: the struct, its constructor and the `Checkpointer` implementation (the work is done in
//! `read.rs`, `write.rs` and `thread_ops.rs`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use weft_graph::checkpoint::{
    CheckpointConfig, CheckpointError, CheckpointTuple, Checkpointer, ListOptions, SaveOp,
};

use super::conn::Conn;
use super::delta::{DeltaConfig, DeltaPlanner};
use super::keys::Keys;
use super::options::RedisOptions;
use crate::savers::{put_each, put_one_methods};

/// A checkpointer on plain Redis (6.2 or newer, no modules), laid out as the [module docs](super) say.
///
/// Cheap to share: clone it or put it in an `Arc`; every clone uses the same multiplexed connection,
/// which reconnects by itself. Many threads may run through one saver at once.
#[derive(Clone)]
pub struct RedisSaver {
    pub(crate) conn: Conn,
    pub(crate) keys: Keys,
    pub(crate) ttl: Option<Duration>,
    pub(crate) refresh_on_read: bool,
    pub(crate) deltas: Arc<DeltaPlanner>,
    options: RedisOptions,
}

impl RedisSaver {
    /// Connects to the server at `url` with the default options (prefix `"weft"`, no TTL).
    pub async fn connect(url: &str) -> Result<Self, CheckpointError> {
        Self::connect_with(RedisOptions::new(url)).await
    }

    /// Connects as `options` say. Fails when the server cannot be reached (after the retries), rejects
    /// the credentials, or is older than Redis 6.2. Logs a warning (`tracing`, target
    /// `weft_integrations::redis`) when the server may evict the saver's keys: a `maxmemory` limit with
    /// an `allkeys-*` eviction policy, or a `volatile-*` one while the saver sets a TTL (see the
    /// [module docs](super) for the settings the saver needs).
    pub async fn connect_with(options: RedisOptions) -> Result<Self, CheckpointError> {
        if options.prefix.is_empty() {
            return Err(CheckpointError::Invalid("the redis key prefix must not be empty".to_owned()));
        }
        if options.ttl.is_some_and(|ttl| ttl.as_millis() == 0) {
            return Err(CheckpointError::Invalid(
                "the redis ttl must be at least one millisecond".to_owned(),
            ));
        }
        let conn = Conn::connect(&options).await?;
        conn.warn_if_evicting(options.ttl.is_some()).await?;
        Ok(Self {
            conn,
            keys: Keys::new(&options.prefix),
            ttl: options.ttl,
            refresh_on_read: options.refresh_on_read,
            deltas: Arc::new(DeltaPlanner::new(DeltaConfig {
                snapshot_every: options.snapshot_every,
                cache_entries: options.delta_cache_entries,
                cache_bytes: options.delta_cache_bytes,
            })),
            options,
        })
    }

    /// The options the saver was made with.
    pub fn options(&self) -> &RedisOptions {
        &self.options
    }

    /// The TTL in milliseconds, when one is set.
    pub(crate) fn ttl_ms(&self) -> Option<u64> {
        self.ttl.map(|ttl| u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1))
    }
}

impl fmt::Debug for RedisSaver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSaver")
            .field("url", &self.options.redacted_url())
            .field("prefix", &self.options.prefix)
            .field("ttl", &self.ttl)
            .field("refresh_on_read", &self.refresh_on_read)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Checkpointer for RedisSaver {
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>, CheckpointError> {
        self.read_tuple(config).await
    }

    async fn list(
        &self,
        config: Option<&CheckpointConfig>,
        options: ListOptions,
    ) -> Result<Vec<CheckpointTuple>, CheckpointError> {
        self.read_list(config, options).await
    }

    put_one_methods!(deltas);

    /// Each op in turn; a checkpoint's expected head is checked in its put script (atomically).
    async fn put_batch(&self, ops: Vec<SaveOp>) -> Result<(), CheckpointError> {
        put_each(self, ops).await
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<(), CheckpointError> {
        self.write_pending(config, writes, task_id, task_path).await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<(), CheckpointError> {
        self.remove_thread(thread_id).await
    }

    async fn copy_thread(&self, src: &str, dst: &str) -> Result<(), CheckpointError> {
        self.duplicate_thread(src, dst).await
    }

    async fn prune(&self, thread_id: &str, keep_latest: usize) -> Result<(), CheckpointError> {
        self.prune_thread(thread_id, keep_latest).await
    }

    async fn list_ids(&self, config: &CheckpointConfig) -> Result<Vec<String>, CheckpointError> {
        self.read_ids(config).await
    }
}
