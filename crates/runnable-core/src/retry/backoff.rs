//! [`Backoff`]: how long to wait before trying again, the one formula of weft's retries.

use std::time::Duration;

/// Exponential backoff with jitter and a cap: weft's one formula for the wait before trying again. The
/// runnable retry policy ([`ExponentialBackoff`](super::ExponentialBackoff)), graph node retry policies,
/// the PostgreSQL backends and the OpenAI transport all compute their waits with it.
///
/// The wait before retry `n` (1 for the first) is `initial * factor^(n-1)`, made random by
/// [`jitter`](Self::jitter), then capped at `max`. A server's `Retry-After` replaces it
/// ([`delay_after`](Self::delay_after)) when it asks for no more than
/// [`max_retry_after`](Self::max_retry_after): retrying sooner would only be refused again.
///
/// ```
/// use std::time::Duration;
/// use weft_runnable_core::retry::{Backoff, Jitter};
///
/// let backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1)).with_jitter(Jitter::None);
/// let waits: Vec<u128> = (1..=5).map(|n| backoff.delay(n).as_millis()).collect();
/// assert_eq!(waits, [100, 200, 400, 800, 1000]);
/// // A rate-limited answer asking for 3 s is waited out.
/// assert_eq!(backoff.delay_after(1, Some(Duration::from_secs(3))), Duration::from_secs(3));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The wait before the first retry, before jitter.
    pub initial: Duration,
    /// The factor by which the wait grows after each retry (2: doubling).
    pub factor: f64,
    /// The longest wait, jitter included (a server's `Retry-After` may ask for more).
    pub max: Duration,
    /// How the wait is made random, so that clients failing together do not retry together.
    pub jitter: Jitter,
    /// The longest `Retry-After` honoured; a server asking for more gets the computed wait instead.
    /// `None`: any.
    pub max_retry_after: Option<Duration>,
}

/// How [`Backoff`] makes a wait random.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Jitter {
    /// The wait as computed.
    None,
    /// Adds a random time, uniform between zero and this.
    Add(Duration),
    /// Multiplies by a random factor, uniform between `low` and `high` (`0.75, 1.0`: up to a quarter
    /// less; `1.0, 1.5`: up to half as much again).
    Scale {
        /// The smallest factor.
        low: f64,
        /// The largest factor.
        high: f64,
    },
}

impl Backoff {
    /// Doubling waits from `initial`, capped at `max`, with up to a quarter taken off at random, and any
    /// `Retry-After` honoured.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            factor: 2.0,
            max,
            jitter: Jitter::Scale { low: 0.75, high: 1.0 },
            max_retry_after: None,
        }
    }

    /// These waits growing by `factor` after each retry.
    pub fn with_factor(mut self, factor: f64) -> Self {
        self.factor = factor;
        self
    }

    /// These waits with `jitter`.
    pub fn with_jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// These waits, honouring a `Retry-After` of at most `limit` only.
    pub fn with_max_retry_after(mut self, limit: Duration) -> Self {
        self.max_retry_after = Some(limit);
        self
    }

    /// The wait before retry `retry` (1 for the first; 0 counts as 1) without jitter: `initial *
    /// factor^(retry-1)`, capped at `max`.
    pub fn base_delay(&self, retry: u32) -> Duration {
        self.capped(self.initial.as_secs_f64() * self.factor.powf(f64::from(retry.max(1) - 1)))
    }

    /// The wait before retry `retry` (1 for the first), jitter included.
    pub fn delay(&self, retry: u32) -> Duration {
        let base = self.initial.as_secs_f64() * self.factor.powf(f64::from(retry.max(1) - 1));
        let base = self.capped(base).as_secs_f64();
        let secs = match self.jitter {
            Jitter::None => base,
            Jitter::Add(most) => base + uniform(0.0, most.as_secs_f64()),
            Jitter::Scale { low, high } => base * uniform(low, high),
        };
        self.capped(secs)
    }

    /// The wait before retry `retry` after an answer that asked for `retry_after` (a server's
    /// `Retry-After`): that, when there is one within [`max_retry_after`](Self::max_retry_after), else
    /// [`delay`](Self::delay).
    pub fn delay_after(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(after) if self.max_retry_after.is_none_or(|limit| after <= limit) => after,
            _ => self.delay(retry),
        }
    }

    fn capped(&self, secs: f64) -> Duration {
        if secs.is_nan() || secs >= self.max.as_secs_f64() {
            return self.max;
        }
        Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(self.max)
    }
}

/// A random number between `low` and `high` (`low` when the range is empty).
fn uniform(low: f64, high: f64) -> f64 {
    if high > low { rand::random_range(low..=high) } else { low }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_grow_by_the_factor_up_to_the_cap_and_jitter_stays_in_its_range() {
        let backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(700));
        for (retry, full) in [(1, 100), (2, 200), (3, 400), (4, 700), (30, 700)] {
            assert_eq!(backoff.base_delay(retry), Duration::from_millis(full));
            for _ in 0..50 {
                let delay = backoff.delay(retry);
                assert!(delay <= Duration::from_millis(full), "{retry}: {delay:?}");
                assert!(delay >= Duration::from_millis(full * 3 / 4), "{retry}: {delay:?}");
            }
        }
        let added = backoff.with_factor(3.0).with_jitter(Jitter::Add(Duration::from_millis(50)));
        for _ in 0..50 {
            let delay = added.delay(2);
            assert!((Duration::from_millis(300)..=Duration::from_millis(350)).contains(&delay), "{delay:?}");
            // The cap holds with the jitter added.
            assert_eq!(added.delay(3), Duration::from_millis(700));
        }
    }

    #[test]
    fn a_retry_after_is_honoured_up_to_its_limit() {
        let backoff =
            Backoff::new(Duration::from_millis(100), Duration::from_secs(1)).with_jitter(Jitter::None);
        assert_eq!(backoff.delay_after(1, Some(Duration::from_secs(30))), Duration::from_secs(30));
        assert_eq!(backoff.delay_after(2, None), Duration::from_millis(200));
        let limited = backoff.with_max_retry_after(Duration::from_secs(10));
        assert_eq!(limited.delay_after(1, Some(Duration::from_secs(5))), Duration::from_secs(5));
        assert_eq!(limited.delay_after(1, Some(Duration::from_secs(30))), Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_loop_waits_the_backoff_in_virtual_time() {
        let backoff =
            Backoff::new(Duration::from_millis(100), Duration::from_millis(300)).with_jitter(Jitter::None);
        let start = tokio::time::Instant::now();
        for retry in 1..=4 {
            tokio::time::sleep(backoff.delay(retry)).await;
        }
        assert_eq!(start.elapsed(), Duration::from_millis(100 + 200 + 300 + 300));
    }
}
