//! `Retry`: runs a runnable again when it fails, as a [`RetryPolicy`] decides.

mod backoff;
mod policy;

pub use backoff::{Backoff, Jitter};
pub use policy::{ExponentialBackoff, RetryPolicy};

use std::borrow::Cow;
use std::time::Duration;

use async_trait::async_trait;

use crate::config::RunnableConfig;
use crate::error::{Error, Result};
use crate::events::{RunKind, trace_invoke};
use crate::runnable::{RunValue, Runnable};

/// A runnable that is called again when it fails (see
/// [`RunnableExt::with_retry`](crate::RunnableExt::with_retry)).
///
/// Each call is one run (named after the inner runnable, as in LangChain) whose children are the
/// attempts; attempts after the first are tagged `retry:attempt:N`. Control flow
/// ([`Error::ControlFlow`]) is returned at once, never retried.
///
/// In [`batch`](Runnable::batch) and [`batch_results`](Runnable::batch_results) the inner runnable's own
/// batch runs on all inputs, then again on only the inputs whose error the policy retries, after the
/// longest of their delays, until none is left to retry. The inner runs of a batch are not grouped under
/// a retry run per input.
///
/// Streaming runs the retried call and yields its result as one chunk.
#[derive(Debug, Clone)]
pub struct Retry<R, P = ExponentialBackoff> {
    inner: R,
    policy: P,
}

impl<R, P> Retry<R, P> {
    /// Retries `inner` as `policy` decides.
    pub fn new(inner: R, policy: P) -> Self {
        Self { inner, policy }
    }

    /// The retried runnable.
    pub fn inner(&self) -> &R {
        &self.inner
    }

    /// The policy.
    pub fn policy(&self) -> &P {
        &self.policy
    }
}

impl<R, P: RetryPolicy> Retry<R, P> {
    /// The delay before the attempt after failed attempt `attempt`, or `None` to stop.
    fn next_delay(&self, attempt: u32, error: &Error) -> Option<Duration> {
        if error.is_control_flow() {
            return None;
        }
        self.policy.retry_delay(attempt, error)
    }
}

/// The config of attempt `attempt` (1-based), given the config of the first.
fn attempt_config(config: &RunnableConfig, attempt: u32) -> Cow<'_, RunnableConfig> {
    if attempt <= 1 {
        Cow::Borrowed(config)
    } else {
        Cow::Owned(config.clone().with_tag(format!("retry:attempt:{attempt}")))
    }
}

#[async_trait]
impl<I, O, R, P> Runnable<I, O> for Retry<R, P>
where
    I: RunValue,
    O: RunValue,
    R: Runnable<I, O>,
    P: RetryPolicy,
{
    fn name(&self) -> Cow<'_, str> {
        self.inner.name()
    }

    async fn invoke(&self, input: I, config: &RunnableConfig) -> Result<O> {
        let name = self.name();
        trace_invoke(&name, RunKind::Chain, input, config, |input, child| async move {
            let mut attempt = 1;
            loop {
                let config = attempt_config(&child, attempt);
                let error = match self.inner.invoke(input.clone(), &config).await {
                    Ok(output) => return Ok(output),
                    Err(error) => error,
                };
                let Some(delay) = self.next_delay(attempt, &error) else { return Err(error) };
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
        })
        .await
    }

    async fn batch_results(&self, inputs: Vec<I>, config: &RunnableConfig) -> Vec<Result<O>> {
        // Attempt 1 runs every input in order and fills `results`; later attempts replace the entries
        // of the inputs still pending.
        let mut results: Vec<Result<O>> = Vec::with_capacity(inputs.len());
        let mut pending: Vec<usize> = (0..inputs.len()).collect();
        let mut attempt = 1;
        while !pending.is_empty() {
            let round: Vec<I> = pending.iter().map(|&i| inputs[i].clone()).collect();
            let mut outcomes =
                self.inner.batch_results(round, &attempt_config(config, attempt)).await.into_iter();
            let mut retry = Vec::new();
            let mut delay = Duration::ZERO;
            for &index in &pending {
                let outcome = outcomes.next().unwrap_or_else(|| {
                    Err(Error::InvalidInput(format!(
                        "{} returned fewer batch results than inputs",
                        self.inner.name()
                    )))
                });
                if let Err(error) = &outcome {
                    if let Some(wait) = self.next_delay(attempt, error) {
                        delay = delay.max(wait);
                        retry.push(index);
                    }
                }
                if attempt == 1 {
                    results.push(outcome);
                } else {
                    results[index] = outcome;
                }
            }
            if !retry.is_empty() {
                tokio::time::sleep(delay).await;
            }
            pending = retry;
            attempt += 1;
        }
        results
    }

    fn merge_chunks(&self, acc: O, next: O) -> Result<O> {
        self.inner.merge_chunks(acc, next)
    }
}

crate::impl_pipe_operator!([R: crate::ext::FixedOutput, P] Retry<R, P> => R::Output);
