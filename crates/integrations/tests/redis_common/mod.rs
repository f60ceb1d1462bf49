//! What the Redis tests share: the rule for an unreachable server, and a saver on a key prefix of its own
//! that deletes its keys when dropped.
#![allow(dead_code)]

pub(crate) mod checkpoints;

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use weft_graph::checkpoint::{Intercept, Intercepted};
use weft_integrations::redis::{RedisOptions, RedisSaver};

/// The server the tests use: `WEFT_TEST_REDIS_ADDR` (host:port), by default the local one.
pub(crate) fn addr() -> String {
    weft_testenv::redis_addr()
}

/// Its URL.
pub(crate) fn url() -> String {
    format!("redis://{}", addr())
}

/// The one rule for a test whose Redis cannot be reached: with `CI` set it fails (`Err`), elsewhere it
/// is skipped (`Ok(None)`) with a loud message. `Ok(Some(..))` when the server answers.
pub(crate) fn reachable_or_skip(test: &str) -> Result<Option<()>, String> {
    let addr = addr();
    let addr: SocketAddr = addr.parse().map_err(|e| format!("bad redis address {addr}: {e}"))?;
    if TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok() {
        return Ok(Some(()));
    }
    weft_testenv::require(
        &format!("Redis at {addr} ({test})"),
        "unreachable",
        "`cargo xtask services` starts it",
    )?;
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
    Ok(Some(Intercepted::new(Arc::new(saver), Cleanup(prefix))))
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

/// A [`RedisSaver`] on its own prefix (`intercept()` is its [`Cleanup`]); dropping it deletes every key
/// under the prefix.
pub(crate) type TestSaver = Intercepted<Cleanup, RedisSaver>;

/// Deletes every key under its prefix when dropped (even when the test panics).
#[derive(Debug)]
pub(crate) struct Cleanup(pub(crate) String);

impl Cleanup {
    /// The key prefix it cleans up.
    pub(crate) fn prefix(&self) -> &str {
        &self.0
    }
}

/// The guard rides along with the saver and intercepts nothing.
impl Intercept<RedisSaver> for Cleanup {}

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
