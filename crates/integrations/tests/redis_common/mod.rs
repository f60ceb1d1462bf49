//! What the Redis tests share: the rule for an unreachable server, and a saver on a key prefix of its own
//! that deletes its keys when dropped.
#![allow(dead_code)]

pub(crate) mod checkpoints;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::ops::Deref;
use std::sync::Once;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use weft_graph::checkpoint::{
    ChannelAppends, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointError, CheckpointMetadata,
    CheckpointTuple, Checkpointer, ListOptions, SaveOp,
};
use weft_integrations::redis::{RedisOptions, RedisSaver};

/// The server the tests use: `WEFT_TEST_REDIS_ADDR` (host:port), by default the local one.
pub(crate) fn addr() -> String {
    std::env::var("WEFT_TEST_REDIS_ADDR").unwrap_or_else(|_| "127.0.0.1:6379".to_owned())
}

/// Its URL.
pub(crate) fn url() -> String {
    format!("redis://{}", addr())
}

/// Whether `CI` is set (as `cargo xtask ci` reads it).
pub(crate) fn is_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| !matches!(value.trim(), "" | "0" | "false"))
}

/// The one rule for a test whose Redis cannot be reached: with `CI` set it fails (`Err`), elsewhere it
/// is skipped (`Ok(None)`) with a loud message. `Ok(Some(..))` when the server answers.
pub(crate) fn reachable_or_skip(test: &str) -> Result<Option<()>, String> {
    let addr = addr();
    let addr: SocketAddr = addr.parse().map_err(|e| format!("bad redis address {addr}: {e}"))?;
    if TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok() {
        return Ok(Some(()));
    }
    if is_ci() {
        return Err(format!(
            "{test}: Redis at {addr} is unreachable and CI is set (`cargo xtask services` starts it)"
        ));
    }
    // Written to stderr directly: the test harness captures `eprintln!` of passing tests.
    static BANNER: Once = Once::new();
    let mut err = std::io::stderr().lock();
    BANNER.call_once(|| {
        let rule = "!".repeat(78);
        let _ = writeln!(
            err,
            "{rule}\nWARNING: Redis at {addr} is unreachable; the tests that need it are SKIPPED \
             (`cargo xtask services` starts it).\nIn CI (CI set) this is a failure.\n{rule}"
        );
    });
    let _ = writeln!(err, "SKIPPED {test}: Redis at {addr} is unreachable");
    Ok(None)
}

/// A key prefix no other test or run uses.
pub(crate) fn fresh_prefix(label: &str) -> String {
    format!("weft-test:{label}:{}", uuid::Uuid::new_v4().simple())
}

/// A saver on a fresh prefix (`options` say the rest), or `None` when the test is skipped.
pub(crate) async fn saver_with(
    test: &str,
    options: impl FnOnce(RedisOptions) -> RedisOptions,
) -> Result<Option<TestSaver>, String> {
    if reachable_or_skip(test)?.is_none() {
        return Ok(None);
    }
    let prefix = fresh_prefix(test);
    let options = options(RedisOptions::new(url()).prefix(prefix.clone()));
    let saver =
        RedisSaver::connect_with(options).await.map_err(|e| format!("{test}: connect failed: {e}"))?;
    Ok(Some(TestSaver { saver, _cleanup: Cleanup(prefix.clone()), prefix }))
}

/// A saver on a fresh prefix with default options, or `None` when the test is skipped.
pub(crate) async fn saver(test: &str) -> Result<Option<TestSaver>, String> {
    saver_with(test, |o| o).await
}

/// Evaluates to a [`TestSaver`], or returns from the enclosing test (`Ok(())` when skipped, `Err` in CI).
#[macro_export]
macro_rules! saver_or_skip {
    ($test:expr) => {
        $crate::saver_or_skip!($test, |o| o)
    };
    ($test:expr, $options:expr) => {
        match $crate::redis_common::saver_with($test, $options).await {
            Ok(Some(saver)) => saver,
            Ok(None) => return Ok(()),
            Err(err) => return Err(err),
        }
    };
}

/// A plain async connection for looking at (or damaging) the saver's keys.
pub(crate) async fn raw() -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(url()).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

/// Every key under `prefix`.
pub(crate) async fn keys_under(prefix: &str) -> Vec<String> {
    let mut conn = raw().await;
    let pattern = format!("{}:*", glob_escape(prefix));
    let mut keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query_async(&mut conn).await.unwrap();
    keys.sort();
    keys
}

fn glob_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| if matches!(c, '*' | '?' | '[' | ']' | '\\') { vec!['\\', c] } else { vec![c] })
        .collect()
}

/// A [`RedisSaver`] on its own prefix; dropping it deletes every key under the prefix.
#[derive(Debug)]
pub(crate) struct TestSaver {
    pub(crate) saver: RedisSaver,
    pub(crate) prefix: String,
    _cleanup: Cleanup,
}

impl Deref for TestSaver {
    type Target = RedisSaver;
    fn deref(&self) -> &RedisSaver {
        &self.saver
    }
}

/// Deletes every key under its prefix when dropped (even when the test panics).
#[derive(Debug)]
pub(crate) struct Cleanup(pub(crate) String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let Ok(client) = redis::Client::open(url()) else { return };
        let Ok(mut conn) = client.get_connection() else { return };
        let pattern = format!("{}:*", glob_escape(&self.0));
        let keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(&mut conn).unwrap_or_default();
        for chunk in keys.chunks(500) {
            let _: Result<(), _> = redis::cmd("UNLINK").arg(chunk).query(&mut conn);
        }
    }
}

#[async_trait]
impl Checkpointer for TestSaver {
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>, CheckpointError> {
        self.saver.get_tuple(config).await
    }

    async fn list(
        &self,
        config: Option<&CheckpointConfig>,
        options: ListOptions,
    ) -> Result<Vec<CheckpointTuple>, CheckpointError> {
        self.saver.list(config, options).await
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig, CheckpointError> {
        self.saver.put(config, checkpoint, metadata, new_versions).await
    }

    fn stores_appends(&self) -> bool {
        self.saver.stores_appends()
    }

    async fn put_with_appends(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        appends: ChannelAppends,
    ) -> Result<CheckpointConfig, CheckpointError> {
        self.saver.put_with_appends(config, checkpoint, metadata, new_versions, appends).await
    }

    async fn put_batch(&self, ops: Vec<SaveOp>) -> Result<(), CheckpointError> {
        self.saver.put_batch(ops).await
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<(), CheckpointError> {
        self.saver.put_writes(config, writes, task_id, task_path).await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<(), CheckpointError> {
        self.saver.delete_thread(thread_id).await
    }

    async fn copy_thread(&self, src: &str, dst: &str) -> Result<(), CheckpointError> {
        self.saver.copy_thread(src, dst).await
    }

    async fn prune(&self, thread_id: &str, keep_latest: usize) -> Result<(), CheckpointError> {
        self.saver.prune(thread_id, keep_latest).await
    }

    async fn list_ids(&self, config: &CheckpointConfig) -> Result<Vec<String>, CheckpointError> {
        self.saver.list_ids(config).await
    }
}
