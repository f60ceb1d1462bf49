//! Node retry policies.

use std::sync::Arc;
use std::time::Duration;

use weft_runnable_core::Error;
use weft_runnable_core::RetryPolicy as _;
use weft_runnable_core::retry::{Backoff, Jitter};

type RetryOn = Arc<dyn Fn(&Error) -> bool + Send + Sync>;

/// How a failing node is retried: exponential backoff with optional jitter, up to `max_attempts` runs in
/// all (the first included). The writes of a failed attempt are discarded. A node (or a graph, or a task)
/// may take several policies: the first whose [`retry_on`](Self::retry_on) matches the error applies
/// (see [`next_retry`]). The waits are computed by
/// weft's one [`Backoff`] (see [`backoff`](Self::backoff)).
#[derive(Clone)]
pub struct RetryPolicy {
    /// Wait before the first retry.
    pub initial_interval: Duration,
    /// Multiplier of the wait after each retry.
    pub backoff_factor: f64,
    /// The longest wait.
    pub max_interval: Duration,
    /// Runs in all, the first included.
    pub max_attempts: u32,
    /// Adds up to one second of random wait (the wait stays within `max_interval`).
    pub jitter: bool,
    retry_on: RetryOn,
}

impl std::fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("initial_interval", &self.initial_interval)
            .field("backoff_factor", &self.backoff_factor)
            .field("max_interval", &self.max_interval)
            .field("max_attempts", &self.max_attempts)
            .field("jitter", &self.jitter)
            .finish_non_exhaustive()
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            initial_interval: Duration::from_millis(500),
            backoff_factor: 2.0,
            max_interval: Duration::from_secs(128),
            max_attempts: 3,
            jitter: true,
            retry_on: Arc::new(default_retry_on),
        }
    }
}

/// LangGraph's default: retry provider failures that are transient, timeouts and user errors; never
/// retry control flow, invalid input or parse errors.
pub fn default_retry_on(err: &Error) -> bool {
    match err {
        Error::ControlFlow(_) => false,
        Error::Model(m) => m.is_transient(),
        Error::Timeout { .. } | Error::Custom(_) | Error::Tool { .. } => true,
        _ => false,
    }
}

impl RetryPolicy {
    /// The default policy (0.5 s, ×2, at most 128 s, 3 attempts, jitter).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the number of runs in all.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// Sets the first wait.
    pub fn initial_interval(mut self, d: Duration) -> Self {
        self.initial_interval = d;
        self
    }

    /// Sets the backoff factor.
    pub fn backoff_factor(mut self, f: f64) -> Self {
        self.backoff_factor = f;
        self
    }

    /// Sets the longest wait.
    pub fn max_interval(mut self, d: Duration) -> Self {
        self.max_interval = d;
        self
    }

    /// Turns jitter on or off.
    pub fn jitter(mut self, on: bool) -> Self {
        self.jitter = on;
        self
    }

    /// Sets which errors are retried (control flow never is).
    pub fn retry_on(mut self, f: impl Fn(&Error) -> bool + Send + Sync + 'static) -> Self {
        self.retry_on = Arc::new(f);
        self
    }

    /// Whether `err` should be retried.
    pub fn should_retry(&self, err: &Error) -> bool {
        !err.is_control_flow() && (self.retry_on)(err)
    }

    /// The waits of this policy as a [`Backoff`]: `initial_interval * backoff_factor^(retry-1)`, plus up
    /// to one second at random with `jitter`, at most `max_interval`.
    pub fn backoff(&self) -> Backoff {
        let jitter = if self.jitter { Jitter::Add(Duration::from_secs(1)) } else { Jitter::None };
        Backoff::new(self.initial_interval, self.max_interval)
            .with_factor(self.backoff_factor)
            .with_jitter(jitter)
    }

    /// The wait before retry number `retry` (1-based), without jitter.
    pub fn interval(&self, retry: u32) -> Duration {
        self.backoff().base_delay(retry)
    }

    /// The wait before retry number `retry`, with jitter when enabled.
    pub fn delay(&self, retry: u32) -> Duration {
        self.backoff().delay(retry)
    }
}

/// The wait before the next run of a task that has failed `failures` times, the last time with `err`,
/// under a list of policies (LangGraph's `retry_policy=[...]`): the first policy whose `retry_on` matches
/// the error decides, counting every failure of the task; `None` when no policy matches or that policy's
/// `max_attempts` are used up (the error is then the task's).
///
/// ```
/// use std::time::Duration;
/// use weft_graph::retry::{RetryPolicy, next_retry};
/// use weft_runnable_core::Error;
///
/// let policies = [
///     RetryPolicy::new().jitter(false).max_attempts(5).retry_on(|e| matches!(e, Error::Timeout { .. })),
///     RetryPolicy::new().jitter(false).max_attempts(2).initial_interval(Duration::from_millis(10)),
/// ];
/// let timeout = Error::Timeout { what: "model".into(), after: Duration::from_secs(1) };
/// assert_eq!(next_retry(&policies, &timeout, 3), Some(Duration::from_secs(2)));
/// let other = Error::msg("boom");
/// assert_eq!(next_retry(&policies, &other, 1), Some(Duration::from_millis(10)));
/// assert_eq!(next_retry(&policies, &other, 2), None);
/// assert_eq!(next_retry(&policies, &Error::InvalidInput("bad".into()), 1), None);
/// ```
pub fn next_retry(policies: &[RetryPolicy], err: &Error, failures: u32) -> Option<Duration> {
    policies.iter().find(|p| p.should_retry(err))?.retry_delay(failures, err)
}

/// A node's policy in the runnables' vocabulary: `runnable.with_retry_policy(RetryPolicy::new())` retries
/// a runnable as a graph retries a node.
impl weft_runnable_core::RetryPolicy for RetryPolicy {
    fn retry_delay(&self, attempt: u32, error: &Error) -> Option<Duration> {
        (self.should_retry(error) && attempt < self.max_attempts).then(|| self.delay(attempt))
    }
}
