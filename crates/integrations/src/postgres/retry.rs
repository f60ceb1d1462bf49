//! Retries of operations that failed for a passing reason (a dropped connection, a server restarting, a
//! serialization conflict).

use std::future::Future;
use std::time::Duration;

use weft_runnable_core::RetryPolicy as _;
use weft_runnable_core::retry::{Backoff, Jitter};

/// How a PostgreSQL backend retries an operation that failed for a passing reason: a connection that
/// broke or could not be made (I/O errors, SQLSTATE class 08), a server shutting down or starting
/// (57P01-57P03), too many connections (53300), a serialization failure or deadlock (40001, 40P01), or no
/// pooled connection in time. Every operation of the backends is safe to run again; other errors are
/// returned at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (default 3; `0` never retries).
    pub retries: u32,
    /// Wait before the first retry (default 50 ms); each retry waits twice as long as the one before,
    /// plus up to half as much again at random.
    pub first_delay: Duration,
    /// Longest wait between attempts (default 2 s).
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { retries: 3, first_delay: Duration::from_millis(50), max_delay: Duration::from_secs(2) }
    }
}

impl RetryPolicy {
    /// Never retries.
    pub fn none() -> Self {
        Self { retries: 0, ..Self::default() }
    }

    /// The wait before retry `n` (0-based): weft's [`Backoff`], doubling from `first_delay` with up to
    /// half as much again at random, at most `max_delay`.
    pub(crate) fn delay(&self, n: u32) -> Duration {
        Backoff::new(self.first_delay, self.max_delay)
            .with_jitter(Jitter::Scale { low: 1.0, high: 1.5 })
            .delay(n.saturating_add(1))
    }

    /// Runs `op` until it succeeds, fails for good, or the retries are spent.
    pub(crate) async fn run<T, F, Fut>(&self, what: &str, mut op: F) -> Result<T, sqlx::Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, sqlx::Error>>,
    {
        let mut attempt = 1;
        loop {
            let err = match op().await {
                Err(e) => e,
                done => return done,
            };
            let Some(wait) = self.retry_delay(attempt, &err) else { return Err(err) };
            tracing::warn!(operation = what, attempt, ?wait, error = %err,
                "postgres operation failed for a passing reason; retrying");
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }
}

/// The backends' policy in weft's retry vocabulary: after failed attempt `attempt` (1-based), a wait
/// while retries are left and the error is a passing one.
impl weft_runnable_core::RetryPolicy<sqlx::Error> for RetryPolicy {
    fn retry_delay(&self, attempt: u32, error: &sqlx::Error) -> Option<Duration> {
        (attempt <= self.retries && is_transient(error)).then(|| self.delay(attempt.saturating_sub(1)))
    }
}

/// Whether an error is worth another attempt.
pub(crate) fn is_transient(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            code.starts_with("08")
                || matches!(code.as_ref(), "57P01" | "57P02" | "57P03" | "53300" | "40001" | "40P01")
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn io_error() -> sqlx::Error {
        sqlx::Error::Io(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset"))
    }

    #[test]
    fn delays_double_and_stay_under_the_cap() {
        let policy = RetryPolicy::default();
        assert!(policy.delay(0) >= Duration::from_millis(50) && policy.delay(0) < Duration::from_millis(76));
        assert!(policy.delay(2) >= Duration::from_millis(200));
        assert_eq!(policy.delay(20), Duration::from_secs(2));
    }

    #[test]
    fn the_policy_answers_in_the_retry_vocabulary() {
        use weft_runnable_core::RetryPolicy as _;
        let policy = RetryPolicy { retries: 2, ..RetryPolicy::default() };
        assert!(policy.retry_delay(1, &io_error()).is_some_and(|d| d >= Duration::from_millis(50)));
        assert!(policy.retry_delay(2, &io_error()).is_some());
        assert_eq!(policy.retry_delay(3, &io_error()), None, "two retries, then the error");
        assert_eq!(policy.retry_delay(1, &sqlx::Error::RowNotFound), None, "not a passing failure");
    }

    #[tokio::test(start_paused = true)]
    async fn passing_failures_are_retried_until_success() {
        let calls = AtomicU32::new(0);
        let out = RetryPolicy::default()
            .run("test", || async {
                if calls.fetch_add(1, Ordering::SeqCst) < 2 { Err(io_error()) } else { Ok(7) }
            })
            .await;
        assert_eq!(out.unwrap(), 7);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_stop_when_spent_and_other_errors_are_not_retried() {
        let calls = AtomicU32::new(0);
        let policy = RetryPolicy { retries: 2, ..RetryPolicy::default() };
        let out: Result<(), _> = policy
            .run("test", || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(io_error())
            })
            .await;
        assert!(out.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        calls.store(0, Ordering::SeqCst);
        let out: Result<(), _> = policy
            .run("test", || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(sqlx::Error::RowNotFound)
            })
            .await;
        assert!(out.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
