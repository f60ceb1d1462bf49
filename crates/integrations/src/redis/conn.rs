//! The connection: a `ConnectionManager` (reconnects on its own), retries of transient errors, and error
//! texts scrubbed of the password.

use std::future::Future;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ErrorKind, IntoConnectionInfo, RedisError, RetryMethod};
use weft_graph::checkpoint::CheckpointError;
use weft_runnable_core::retry::{Backoff, Jitter};

use super::options::RedisOptions;

/// The oldest server version with every command the saver uses (`COPY`, `ZRANGE ... BYLEX REV`).
const MIN_VERSION: (u32, u32) = (6, 2);

/// A shared connection with a retry policy.
#[derive(Clone)]
pub(crate) struct Conn {
    manager: ConnectionManager,
    max_retries: u32,
    retry_delay: Duration,
    /// The password, only to scrub it from error texts.
    secret: Option<String>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").field("max_retries", &self.max_retries).finish_non_exhaustive()
    }
}

impl Conn {
    /// Connects as `options` say and checks the server's version.
    pub(crate) async fn connect(options: &RedisOptions) -> Result<Self, CheckpointError> {
        let url = options.redacted_url();
        let info =
            options.url.as_str().into_connection_info().map_err(|e| {
                CheckpointError::Invalid(scrub(format!("invalid redis url '{url}': {e}"), None))
            })?;
        let secret = info.redis_settings().password().filter(|p| !p.is_empty()).map(str::to_owned);
        let scrub_with = |text: String| scrub(text, secret.as_deref());
        let client = redis::Client::open(info)
            .map_err(|e| CheckpointError::Invalid(scrub_with(format!("invalid redis url '{url}': {e}"))))?;
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(usize::try_from(options.max_retries).unwrap_or(usize::MAX))
            .set_min_delay(options.retry_delay)
            .set_response_timeout(Some(options.response_timeout))
            .set_connection_timeout(Some(options.connection_timeout));
        let manager = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(|e| classify(scrub_with(format!("cannot connect to redis at '{url}': {e}")), e))?;
        let conn = Self {
            manager,
            max_retries: options.max_retries,
            retry_delay: options.retry_delay,
            secret: secret.clone(),
        };
        conn.check_version(&url).await?;
        Ok(conn)
    }

    async fn check_version(&self, url: &str) -> Result<(), CheckpointError> {
        let info: String =
            self.run("INFO server", |mut c| async move {
                redis::cmd("INFO").arg("server").query_async(&mut c).await
            })
            .await?;
        let version = info
            .lines()
            .find_map(|line| line.strip_prefix("redis_version:"))
            .map(str::trim)
            .unwrap_or("unknown");
        let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
        let major_minor = (parts.next().flatten(), parts.next().flatten());
        match major_minor {
            (Some(major), Some(minor)) if (major, minor) >= MIN_VERSION => Ok(()),
            _ => Err(CheckpointError::backend(format!(
                "redis at '{url}' is version {version}; the saver needs {}.{} or newer",
                MIN_VERSION.0, MIN_VERSION.1
            ))),
        }
    }

    /// Logs a warning when the server may evict keys of the saver (see
    /// [`RedisSaver::connect_with`](super::RedisSaver::connect_with)); `with_ttl`: the saver sets TTLs.
    pub(crate) async fn warn_if_evicting(&self, with_ttl: bool) -> Result<(), CheckpointError> {
        let info: String =
            self.run("INFO memory", |mut c| async move {
                redis::cmd("INFO").arg("memory").query_async(&mut c).await
            })
            .await?;
        let field = |name: &str| {
            info.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(':')).map(str::trim)
        };
        let limit = field("maxmemory").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        let policy = field("maxmemory_policy").unwrap_or("unknown");
        if can_evict(limit, policy, with_ttl) {
            tracing::warn!(
                maxmemory = limit,
                maxmemory_policy = policy,
                "redis may evict checkpoint keys when it reaches maxmemory; an evicted key reads as a corrupt \
                 thread. Set `maxmemory-policy noeviction` (and persistence: appendonly yes) for the saver"
            );
        }
        Ok(())
    }

    /// Runs `op` on the connection, trying again after transient errors; `what` names the operation in
    /// errors and logs.
    pub(crate) async fn run<T, F, Fut>(&self, what: &str, op: F) -> Result<T, CheckpointError>
    where
        F: Fn(ConnectionManager) -> Fut,
        Fut: Future<Output = Result<T, RedisError>>,
    {
        let mut attempt = 0;
        loop {
            match op(self.manager.clone()).await {
                Ok(value) => return Ok(value),
                Err(err) if attempt < self.max_retries && is_transient(&err) => {
                    // weft's one backoff: doubling from `retry_delay`, without jitter or cap.
                    let delay = Backoff::new(self.retry_delay, Duration::MAX)
                        .with_jitter(Jitter::None)
                        .delay(attempt.saturating_add(1));
                    tracing::warn!(
                        operation = what,
                        attempt = attempt + 1,
                        error = %self.scrub(err.to_string()),
                        "redis command failed; retrying in {delay:?}"
                    );
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                Err(err) => return Err(classify(self.scrub(format!("redis {what} failed: {err}")), err)),
            }
        }
    }

    fn scrub(&self, text: String) -> String {
        scrub(text, self.secret.as_deref())
    }
}

/// Whether a command (or one of a pipeline's) hit a key holding another type.
fn is_wrong_type(err: &RedisError) -> bool {
    err.code() == Some("WRONGTYPE")
        || err
            .clone()
            .into_server_errors()
            .is_some_and(|items| items.iter().any(|(_, e)| e.code() == "WRONGTYPE"))
}

/// Whether a server with `maxmemory` `limit` (0: none) and eviction `policy` may evict the saver's
/// keys (which have a TTL when `with_ttl`).
fn can_evict(limit: u64, policy: &str, with_ttl: bool) -> bool {
    limit > 0 && (policy.starts_with("allkeys") || (with_ttl && policy.starts_with("volatile")))
}

/// Whether trying the same command again may succeed: a lost or refused connection, a timeout, a server
/// that is loading or failing over. Authentication failures and command errors are final.
fn is_transient(err: &RedisError) -> bool {
    if matches!(err.kind(), ErrorKind::AuthenticationFailed) {
        return false;
    }
    err.is_io_error()
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || matches!(
            err.retry_method(),
            RetryMethod::Reconnect | RetryMethod::RetryImmediately | RetryMethod::WaitAndRetry
        )
}

/// The checkpoint error of a failed command: unavailable when trying again may succeed (see
/// [`is_transient`]), a backend error otherwise. `message` must be scrubbed already; the driver's error
/// is kept as the source only when it cannot hold the password (not for authentication failures).
pub(crate) fn classify(message: String, err: RedisError) -> CheckpointError {
    if is_wrong_type(&err) {
        // A key of the saver holds another type: damaged data. The caller names the thread (see
        // `RedisSaver::name_wrong_type`).
        return CheckpointError::corrupt("", "", message);
    }
    if matches!(err.kind(), ErrorKind::AuthenticationFailed) {
        CheckpointError::backend(message)
    } else if is_transient(&err) {
        CheckpointError::unavailable_from(message, err)
    } else {
        CheckpointError::backend_from(message, err)
    }
}

/// `text` with every occurrence of `secret` replaced by `***`.
pub(crate) fn scrub(text: String, secret: Option<&str>) -> String {
    match secret {
        Some(secret) if text.contains(secret) => text.replace(secret, "***"),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrub_removes_the_secret() {
        assert_eq!(scrub("auth hunter2 failed".into(), Some("hunter2")), "auth *** failed");
        assert_eq!(scrub("nothing here".into(), Some("hunter2")), "nothing here");
        assert_eq!(scrub("kept".into(), None), "kept");
    }

    #[test]
    fn eviction_is_possible_only_with_a_limit_and_a_policy_that_reaches_the_keys() {
        assert!(!can_evict(0, "allkeys-lru", true), "no limit, no eviction");
        assert!(can_evict(1 << 30, "allkeys-lru", false));
        assert!(!can_evict(1 << 30, "volatile-lru", false), "keys without a TTL are not evicted");
        assert!(can_evict(1 << 30, "volatile-ttl", true));
        assert!(!can_evict(1 << 30, "noeviction", true));
    }

    #[test]
    fn io_errors_are_unavailable() {
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(classify("redis get failed".into(), io).is_retryable());
    }

    #[test]
    fn command_errors_are_not_retried_and_io_errors_are() {
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(is_transient(&io));
        let auth = RedisError::from((ErrorKind::AuthenticationFailed, "bad password"));
        assert!(!is_transient(&auth));
        let client = RedisError::from((ErrorKind::Client, "wrong type"));
        assert!(!is_transient(&client));
    }
}
