//! Node timeouts (LangGraph's `TimeoutPolicy` and `NodeTimeoutError`): a hard cap on each attempt and a
//! cap on the time an attempt may go without progress.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;
use weft_runnable_core::Error;

/// Which signals refresh a [`TimeoutPolicy`]'s idle timeout (LangGraph's `refresh_on`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RefreshOn {
    /// The node's progress (a `custom` stream write, an event of a run it makes under its config: a
    /// model's start, token or end, a tool's or chain's, a subgraph's node) and explicit
    /// [`Runtime::heartbeat`](crate::Runtime::heartbeat) calls.
    #[default]
    Auto,
    /// Only explicit [`Runtime::heartbeat`](crate::Runtime::heartbeat) calls.
    Heartbeat,
}

/// A timeout that is not a positive, finite length of time (LangGraph's `ValueError` "... must be greater
/// than 0").
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field} must be greater than 0 (got {value})")]
pub struct TimeoutPolicyError {
    /// `run_timeout` or `idle_timeout`.
    pub field: &'static str,
    /// The refused value, as given.
    pub value: String,
}

/// How long each attempt of a node may run (LangGraph's `TimeoutPolicy`): `run_timeout` caps an attempt's
/// wall-clock time and is never refreshed; `idle_timeout` caps the time it goes without progress (see
/// [`RefreshOn`]). A timed-out attempt is cancelled, its writes are dropped, and it fails with a
/// [`NodeTimeoutError`], which the node's retry policy may retry like any other error (the default
/// policy does). Each attempt has its own clocks; the waits between attempts are not counted.
///
/// A policy always has at least one of the two, each a positive length of time:
///
/// ```
/// use std::time::Duration;
/// use weft_graph::{RefreshOn, TimeoutPolicy};
///
/// let policy = TimeoutPolicy::run(Duration::from_secs(30))?
///     .with_idle(Duration::from_secs(5))?
///     .refresh_on(RefreshOn::Heartbeat);
/// assert_eq!(policy.run_timeout(), Some(Duration::from_secs(30)));
/// assert!(TimeoutPolicy::idle(Duration::ZERO).is_err());
/// assert!(TimeoutPolicy::from_secs_f64(-1.0).is_err());
/// # Ok::<(), weft_graph::TimeoutPolicyError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutPolicy {
    run_timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
    refresh_on: RefreshOn,
}

fn positive(field: &'static str, d: Duration) -> Result<Duration, TimeoutPolicyError> {
    if d.is_zero() {
        return Err(TimeoutPolicyError { field, value: format!("{d:?}") });
    }
    Ok(d)
}

impl TimeoutPolicy {
    /// A hard cap of `d` on each attempt (LangGraph's `timeout=<seconds>`).
    pub fn run(d: Duration) -> Result<Self, TimeoutPolicyError> {
        Ok(Self {
            run_timeout: Some(positive("run_timeout", d)?),
            idle_timeout: None,
            refresh_on: RefreshOn::Auto,
        })
    }

    /// A cap of `d` on the time each attempt may go without progress.
    pub fn idle(d: Duration) -> Result<Self, TimeoutPolicyError> {
        Ok(Self {
            run_timeout: None,
            idle_timeout: Some(positive("idle_timeout", d)?),
            refresh_on: RefreshOn::Auto,
        })
    }

    /// A hard cap of `secs` seconds on each attempt; zero, negative, infinite and NaN are refused.
    pub fn from_secs_f64(secs: f64) -> Result<Self, TimeoutPolicyError> {
        match Duration::try_from_secs_f64(secs) {
            Ok(d) if secs.is_finite() => Self::run(d),
            _ => Err(TimeoutPolicyError { field: "run_timeout", value: secs.to_string() }),
        }
    }

    /// This policy with a hard cap of `d` as well.
    pub fn with_run(self, d: Duration) -> Result<Self, TimeoutPolicyError> {
        Ok(Self { run_timeout: Some(positive("run_timeout", d)?), ..self })
    }

    /// This policy with an idle cap of `d` as well.
    pub fn with_idle(self, d: Duration) -> Result<Self, TimeoutPolicyError> {
        Ok(Self { idle_timeout: Some(positive("idle_timeout", d)?), ..self })
    }

    /// Sets which signals refresh the idle timeout.
    pub fn refresh_on(self, refresh_on: RefreshOn) -> Self {
        Self { refresh_on, ..self }
    }

    /// The hard cap on an attempt.
    pub fn run_timeout(&self) -> Option<Duration> {
        self.run_timeout
    }

    /// The cap on the time an attempt may go without progress.
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.idle_timeout
    }

    /// Which signals refresh the idle timeout.
    pub fn refreshed_on(&self) -> RefreshOn {
        self.refresh_on
    }
}

/// Which of a [`TimeoutPolicy`]'s timeouts fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutKind {
    /// The attempt went `idle_timeout` without progress.
    Idle,
    /// The attempt ran `run_timeout`.
    Run,
}

/// A node attempt ran past one of its [`TimeoutPolicy`]'s timeouts (LangGraph's `NodeTimeoutError`). It
/// reaches the retry policy as [`Error::Custom`] (the default policy
/// retries it) and a run's caller as the node's error:
/// [`GraphError::node_timeout`](crate::GraphError::node_timeout) finds it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.message())]
pub struct NodeTimeoutError {
    /// The node.
    pub node: String,
    /// Which timeout fired.
    pub kind: TimeoutKind,
    /// The timeout that fired.
    pub timeout: Duration,
    /// The policy's run timeout.
    pub run_timeout: Option<Duration>,
    /// The policy's idle timeout.
    pub idle_timeout: Option<Duration>,
    /// How long the attempt had run.
    pub elapsed: Duration,
}

impl NodeTimeoutError {
    fn message(&self) -> String {
        let (node, timeout, elapsed) = (&self.node, self.timeout.as_secs_f64(), self.elapsed.as_secs_f64());
        match self.kind {
            TimeoutKind::Idle => format!(
                "node '{node}' exceeded its idle timeout of {timeout:.3}s without making progress (elapsed: {elapsed:.3}s)"
            ),
            TimeoutKind::Run => {
                format!("node '{node}' exceeded its run timeout of {timeout:.3}s (elapsed: {elapsed:.3}s)")
            }
        }
    }
}

/// The progress clock of one timed attempt, which its runtime refreshes.
#[derive(Debug)]
pub(crate) struct AttemptClock {
    last: Mutex<Instant>,
    auto: bool,
}

impl AttemptClock {
    pub(crate) fn new(refresh_on: RefreshOn) -> Self {
        Self { last: Mutex::new(Instant::now()), auto: refresh_on == RefreshOn::Auto }
    }

    /// Whether signals other than heartbeats are progress.
    pub(crate) fn auto(&self) -> bool {
        self.auto
    }

    /// An explicit heartbeat: always progress.
    pub(crate) fn heartbeat(&self) {
        if let Ok(mut last) = self.last.lock() {
            *last = Instant::now();
        }
    }

    /// A progress signal other than a heartbeat: progress under [`RefreshOn::Auto`] only.
    pub(crate) fn touch(&self) {
        if self.auto {
            self.heartbeat();
        }
    }

    /// When the attempt last made progress.
    pub(crate) fn last(&self) -> Instant {
        self.last.lock().map_or_else(|p| *p.into_inner(), |l| *l)
    }
}

/// Runs one attempt of `name` under `policy`, `clock` being its progress: the attempt is dropped
/// (cancelled) when it runs past `run_timeout` or goes `idle_timeout` without progress, and fails with a
/// [`NodeTimeoutError`].
pub(crate) async fn run_timed<T>(
    policy: &TimeoutPolicy,
    clock: &AttemptClock,
    name: &str,
    attempt: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let start = Instant::now();
    let run_deadline = policy.run_timeout.map(|d| start + d);
    tokio::pin!(attempt);
    loop {
        let idle_deadline = policy.idle_timeout.map(|d| clock.last() + d);
        let next = match (run_deadline, idle_deadline) {
            (Some(r), Some(i)) => r.min(i),
            (Some(d), None) | (None, Some(d)) => d,
            (None, None) => return attempt.await,
        };
        tokio::select! {
            biased;
            out = &mut attempt => return out,
            () = tokio::time::sleep_until(next) => {}
        }
        let now = Instant::now();
        let fired = match (run_deadline, policy.idle_timeout) {
            (Some(deadline), _) if now >= deadline => policy.run_timeout.map(|d| (TimeoutKind::Run, d)),
            // Progress made since the deadline was taken moves it.
            (_, Some(idle)) if now >= clock.last() + idle => Some((TimeoutKind::Idle, idle)),
            _ => None,
        };
        if let Some((kind, timeout)) = fired {
            return Err(Error::custom(NodeTimeoutError {
                node: name.to_owned(),
                kind,
                timeout,
                run_timeout: policy.run_timeout,
                idle_timeout: policy.idle_timeout,
                elapsed: now - start,
            }));
        }
    }
}
