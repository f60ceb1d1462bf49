//! The connection: a `ConnectionManager` (reconnects on its own), retries of transient errors, and error
//! texts scrubbed of the password.

use std::future::Future;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ErrorKind, IntoConnectionInfo, RedisError, RetryMethod};
use weft_graph::checkpoint::CheckpointError;

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
                    let delay = self.retry_delay.saturating_mul(2u32.saturating_pow(attempt));
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
    fn command_errors_are_not_retried_and_io_errors_are() {
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(is_transient(&io));
        let auth = RedisError::from((ErrorKind::AuthenticationFailed, "bad password"));
        assert!(!is_transient(&auth));
        let client = RedisError::from((ErrorKind::Client, "wrong type"));
        assert!(!is_transient(&client));
    }
}
