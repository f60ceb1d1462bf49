//! Retry: attempt counts, exact delays under paused time, which errors are retried, batches.
#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use weft_runnable_core::{
    ControlFlow, Error, EventRecorder, ExponentialBackoff, ModelError, ModelErrorKind, Result, Runnable,
    RunnableConfig, RunnableExt, RunnableLambda,
};

/// Records when each input was tried.
#[derive(Clone, Default)]
struct Calls(Arc<Mutex<Vec<(i64, Instant)>>>);

impl Calls {
    fn count(&self, input: i64) -> usize {
        self.0.lock().unwrap().iter().filter(|(x, _)| *x == input).count()
    }

    fn counts(&self) -> BTreeMap<i64, usize> {
        let mut counts = BTreeMap::new();
        for (x, _) in self.0.lock().unwrap().iter() {
            *counts.entry(*x).or_insert(0) += 1;
        }
        counts
    }

    /// The time between consecutive attempts on `input`.
    fn delays(&self, input: i64) -> Vec<Duration> {
        let times: Vec<Instant> =
            self.0.lock().unwrap().iter().filter(|(x, _)| *x == input).map(|(_, t)| *t).collect();
        times.windows(2).map(|w| w[1] - w[0]).collect()
    }
}

/// Fails with `error(input, attempt)` while it returns `Some`, then returns the input.
fn flaky(
    calls: &Calls,
    error: impl Fn(i64, usize) -> Option<Error> + Send + Sync + 'static,
) -> RunnableLambda<i64, i64> {
    let calls = calls.clone();
    RunnableLambda::try_new(move |x: i64| {
        let attempt = calls.count(x) + 1;
        calls.0.lock().unwrap().push((x, Instant::now()));
        match error(x, attempt) {
            Some(err) => Err(err),
            None => Ok(x),
        }
    })
}

fn no_jitter() -> ExponentialBackoff {
    ExponentialBackoff::new().without_jitter()
}

#[tokio::test(start_paused = true)]
async fn retry_succeeds_after_transient_failures_with_default_delays() {
    let calls = Calls::default();
    let r = flaky(&calls, |_, attempt| (attempt <= 2).then(|| Error::msg(format!("fail {attempt}"))))
        .with_retry_policy(no_jitter());
    assert_eq!(r.invoke(7, &RunnableConfig::default()).await.unwrap(), 7);
    assert_eq!(calls.count(7), 3);
    assert_eq!(calls.delays(7), vec![Duration::from_secs(1), Duration::from_secs(2)]);
}

#[tokio::test(start_paused = true)]
async fn retry_stops_after_max_attempts_and_returns_the_last_error() {
    let calls = Calls::default();
    let r = flaky(&calls, |_, attempt| Some(Error::msg(format!("fail {attempt}"))))
        .with_retry_policy(no_jitter());
    let err = r.invoke(1, &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(err.to_string(), "fail 3");
    assert_eq!(calls.count(1), 3);
}

#[tokio::test(start_paused = true)]
async fn retry_default_policy_makes_three_attempts() {
    let calls = Calls::default();
    let r = flaky(&calls, |_, _| Some(Error::msg("down"))).with_retry();
    let start = Instant::now();
    r.invoke(1, &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(calls.count(1), 3);
    // 1 s + 2 s of backoff, each plus up to 1 s of jitter.
    let waited = start.elapsed();
    assert!(waited >= Duration::from_secs(3) && waited <= Duration::from_millis(5002), "waited {waited:?}");
}

#[tokio::test(start_paused = true)]
async fn retry_delays_grow_exponentially_without_jitter() {
    let calls = Calls::default();
    let r =
        flaky(&calls, |_, _| Some(Error::msg("down"))).with_retry_policy(no_jitter().with_max_attempts(5));
    r.invoke(1, &RunnableConfig::default()).await.unwrap_err();
    let secs: Vec<u64> = calls.delays(1).iter().map(Duration::as_secs).collect();
    assert_eq!(secs, vec![1, 2, 4, 8]);
    assert!(calls.delays(1).iter().all(|d| d.subsec_nanos() == 0));
}

#[tokio::test(start_paused = true)]
async fn retry_caps_delays_at_the_max_delay() {
    let calls = Calls::default();
    let policy = no_jitter()
        .with_max_attempts(4)
        .with_initial_delay(Duration::from_secs(10))
        .with_base(3.0)
        .with_max_delay(Duration::from_secs(20));
    let r = flaky(&calls, |_, _| Some(Error::msg("down"))).with_retry_policy(policy);
    r.invoke(1, &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(
        calls.delays(1),
        vec![Duration::from_secs(10), Duration::from_secs(20), Duration::from_secs(20)]
    );
}

#[tokio::test(start_paused = true)]
async fn retry_jitter_adds_at_most_the_configured_jitter() {
    for _ in 0..20 {
        let calls = Calls::default();
        let policy = ExponentialBackoff::new().with_max_attempts(2);
        let r = flaky(&calls, |_, _| Some(Error::msg("down"))).with_retry_policy(policy);
        r.invoke(1, &RunnableConfig::default()).await.unwrap_err();
        let delay = calls.delays(1)[0];
        // Paused time advances to whole milliseconds.
        assert!(delay >= Duration::from_secs(1) && delay <= Duration::from_millis(2001), "delay {delay:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn retry_waits_as_long_as_the_provider_asks() {
    let calls = Calls::default();
    let r = flaky(&calls, |_, attempt| {
        (attempt == 1).then(|| {
            let mut err = ModelError::new("fake", ModelErrorKind::RateLimited, "slow down");
            err.retry_after = Some(Duration::from_secs(7));
            Error::from(err)
        })
    })
    .with_retry(); // jitter on: `retry_after` is used as given
    assert_eq!(r.invoke(1, &RunnableConfig::default()).await.unwrap(), 1);
    assert_eq!(calls.delays(1), vec![Duration::from_secs(7)]);
}

#[tokio::test(start_paused = true)]
async fn retry_never_retries_control_flow_even_when_the_policy_would() {
    let calls = Calls::default();
    let always = |_: u32, _: &Error| Some(Duration::from_millis(1));
    let r = flaky(&calls, |_, _| Some(Error::ControlFlow(ControlFlow::new("interrupt", ()))))
        .with_retry_policy(always);
    let err = r.invoke(1, &RunnableConfig::default()).await.unwrap_err();
    assert!(err.is_control_flow());
    assert_eq!(calls.count(1), 1);

    let calls = Calls::default();
    let r = flaky(&calls, |_, _| Some(Error::ControlFlow(ControlFlow::new("interrupt", ())))).with_retry();
    assert!(r.invoke(1, &RunnableConfig::default()).await.unwrap_err().is_control_flow());
    assert_eq!(calls.count(1), 1);
}

#[tokio::test(start_paused = true)]
async fn retry_returns_at_once_errors_the_predicate_rejects() {
    let calls = Calls::default();
    let policy = no_jitter().retry_if(|e| e.as_model().is_some_and(ModelError::is_transient));
    let r = flaky(&calls, |_, _| Some(Error::msg("bad request"))).with_retry_policy(policy.clone());
    let start = Instant::now();
    assert_eq!(r.invoke(1, &RunnableConfig::default()).await.unwrap_err().to_string(), "bad request");
    assert_eq!(calls.count(1), 1);
    assert_eq!(start.elapsed(), Duration::ZERO);

    let calls = Calls::default();
    let r = flaky(&calls, |_, attempt| {
        (attempt == 1).then(|| ModelError::new("fake", ModelErrorKind::Server, "oops").into())
    })
    .with_retry_policy(policy);
    assert_eq!(r.invoke(1, &RunnableConfig::default()).await.unwrap(), 1);
    assert_eq!(calls.count(1), 2);
}

#[tokio::test(start_paused = true)]
async fn retry_in_batch_retries_only_the_failed_items() {
    let calls = Calls::default();
    let r = flaky(&calls, |x, attempt| (x == 2 && attempt == 1).then(|| Error::msg("two failed")))
        .with_retry_policy(no_jitter());
    let out = r.batch(vec![1, 2, 3], &RunnableConfig::default()).await.unwrap();
    assert_eq!(out, vec![1, 2, 3]);
    assert_eq!(calls.counts(), BTreeMap::from([(1, 1), (2, 2), (3, 1)]));
    assert_eq!(calls.delays(2), vec![Duration::from_secs(1)]);
}

#[tokio::test(start_paused = true)]
async fn retry_batch_results_keeps_errors_that_are_not_retried_or_still_fail() {
    let calls = Calls::default();
    let policy = no_jitter().retry_if(|e| e.to_string() != "fatal");
    let r = flaky(&calls, |x, attempt| match x {
        2 if attempt <= 1 => Some(Error::msg("transient")),
        3 => Some(Error::msg("fatal")),
        4 => Some(Error::msg(format!("always {attempt}"))),
        _ => None,
    })
    .with_retry_policy(policy);
    let results = r.batch_results(vec![1, 2, 3, 4], &RunnableConfig::default()).await;
    let shown: Vec<_> = results.into_iter().map(|r| r.map_err(|e| e.to_string())).collect();
    assert_eq!(shown, vec![Ok(1), Ok(2), Err("fatal".to_owned()), Err("always 3".to_owned())]);
    assert_eq!(calls.counts(), BTreeMap::from([(1, 1), (2, 2), (3, 1), (4, 3)]));
    assert_eq!(calls.delays(4), vec![Duration::from_secs(1), Duration::from_secs(2)]);
}

#[tokio::test(start_paused = true)]
async fn retry_in_batch_never_retries_control_flow() {
    let calls = Calls::default();
    let r = flaky(&calls, |x, _| (x == 1).then(|| Error::ControlFlow(ControlFlow::new("interrupt", ()))))
        .with_retry_policy(no_jitter());
    let results = r.batch_results(vec![1, 2], &RunnableConfig::default()).await;
    assert!(results[0].as_ref().unwrap_err().is_control_flow());
    assert_eq!(*results[1].as_ref().unwrap(), 2);
    assert_eq!(calls.counts(), BTreeMap::from([(1, 1), (2, 1)]));
}

#[tokio::test(start_paused = true)]
async fn retry_runs_under_the_inner_name_and_tags_later_attempts() {
    let calls = Calls::default();
    let r = flaky(&calls, |_, attempt| (attempt <= 2).then(|| Error::msg("again")))
        .named("flaky")
        .with_retry_policy(no_jitter());
    let recorder = EventRecorder::new();
    r.invoke(1, &RunnableConfig::default().with_callbacks(recorder.sink())).await.unwrap();
    let starts: Vec<_> = recorder
        .events()
        .into_iter()
        .filter(|e| e.event == "on_chain_start")
        .map(|e| (e.name, e.tags.join(","), e.parent_ids.len()))
        .collect();
    let expected: Vec<(String, String, usize)> = [
        ("flaky", "", 0),
        ("flaky", "", 1),
        ("flaky", "retry:attempt:2", 1),
        ("flaky", "retry:attempt:3", 1),
    ]
    .into_iter()
    .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c))
    .collect();
    assert_eq!(starts, expected);
}

#[tokio::test]
async fn retry_keeps_the_pipe_operator() {
    let chain = RunnableLambda::new(|x: i64| x + 1).with_retry() | RunnableLambda::new(|x: i64| x * 2);
    let out: Result<i64> = chain.invoke(1, &RunnableConfig::default()).await;
    assert_eq!(out.unwrap(), 4);
}
