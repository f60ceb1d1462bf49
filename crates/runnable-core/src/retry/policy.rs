//! Retry policies: whether a failed attempt is tried again, and after how long.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::backoff::{Backoff, Jitter};
use crate::error::Error;

/// Decides whether a failed attempt is tried again and how long to wait first (tower's `retry::Policy`
/// idea, reduced to what a runnable needs): weft's one retry vocabulary. Runnables take it
/// ([`ExponentialBackoff`], or a graph's node policy, `weft_graph::RetryPolicy`), and so do the
/// backends for their own errors (`E`: the PostgreSQL saver's policy answers for `sqlx::Error`).
///
/// [`Retry`](crate::retry::Retry) never consults the policy for control flow
/// ([`Error::ControlFlow`]): that is never retried, whatever the policy says. Closures
/// `Fn(u32, &E) -> Option<Duration>` are policies.
pub trait RetryPolicy<E = Error>: Send + Sync {
    /// After attempt number `attempt` (1 for the first call) failed with `error`: the delay before the
    /// next attempt, or `None` to give up and return the error.
    fn retry_delay(&self, attempt: u32, error: &E) -> Option<Duration>;
}

impl<F, E> RetryPolicy<E> for F
where
    F: Fn(u32, &E) -> Option<Duration> + Send + Sync,
{
    fn retry_delay(&self, attempt: u32, error: &E) -> Option<Duration> {
        self(attempt, error)
    }
}

type Predicate = Arc<dyn Fn(&Error) -> bool + Send + Sync>;

/// The default policy, langchain-core's defaults: up to 3 attempts (counting the first), every error
/// retried (except control flow), exponential backoff `initial * base^(attempt - 1)` plus a random
/// jitter, capped at `max_delay`: 1 s, 2 s, 4 s, ... (+ up to 1 s), at most 60 s. The waits are a
/// [`Backoff`]'s (see [`as_backoff`](Self::as_backoff)).
///
/// When the error is a [`ModelError`](crate::ModelError) with `retry_after` (a provider's
/// `Retry-After`), that delay is used as given, without jitter or cap: retrying sooner would only be
/// refused again.
#[derive(Clone)]
pub struct ExponentialBackoff {
    max_attempts: u32,
    backoff: Backoff,
    retry_if: Option<Predicate>,
}

impl fmt::Debug for ExponentialBackoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExponentialBackoff")
            .field("max_attempts", &self.max_attempts)
            .field("backoff", &self.backoff)
            .field("retry_if", &self.retry_if.is_some())
            .finish()
    }
}

impl Default for ExponentialBackoff {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(60))
                .with_jitter(Jitter::Add(Duration::from_secs(1))),
            retry_if: None,
        }
    }
}

impl ExponentialBackoff {
    /// The defaults: 3 attempts, 1 s initial delay, base 2, 60 s cap, up to 1 s of jitter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stops after `attempts` attempts in all, the first included (at least 1).
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// The delay after the first failure, before jitter.
    pub fn with_initial_delay(mut self, delay: Duration) -> Self {
        self.backoff.initial = delay;
        self
    }

    /// The longest delay, jitter included.
    pub fn with_max_delay(mut self, delay: Duration) -> Self {
        self.backoff.max = delay;
        self
    }

    /// The factor by which the delay grows after each failure.
    pub fn with_base(mut self, base: f64) -> Self {
        self.backoff.factor = base;
        self
    }

    /// The most random time added to each delay (uniform between zero and `jitter`).
    pub fn with_jitter(mut self, jitter: Duration) -> Self {
        self.backoff.jitter = Jitter::Add(jitter);
        self
    }

    /// No random jitter: delays are exactly `initial * base^(attempt - 1)`, capped.
    pub fn without_jitter(self) -> Self {
        self.with_jitter(Duration::ZERO)
    }

    /// These waits, as `backoff` computes them (its jitter and `Retry-After` limit included).
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// The waits between attempts.
    pub fn as_backoff(&self) -> &Backoff {
        &self.backoff
    }

    /// Retries only the errors for which `predicate` returns `true` (control flow never is).
    pub fn retry_if(mut self, predicate: impl Fn(&Error) -> bool + Send + Sync + 'static) -> Self {
        self.retry_if = Some(Arc::new(predicate));
        self
    }

    /// The most attempts, the first included.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The delay after failed attempt number `attempt`, before jitter and without `retry_after`.
    pub fn backoff(&self, attempt: u32) -> Duration {
        self.backoff.base_delay(attempt)
    }
}

impl RetryPolicy for ExponentialBackoff {
    fn retry_delay(&self, attempt: u32, error: &Error) -> Option<Duration> {
        if attempt >= self.max_attempts || error.is_control_flow() {
            return None;
        }
        if let Some(predicate) = &self.retry_if {
            if !predicate(error) {
                return None;
            }
        }
        Some(self.backoff.delay_after(attempt, error.as_model().and_then(|e| e.retry_after)))
    }
}
