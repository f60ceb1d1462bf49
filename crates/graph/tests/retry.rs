//! Node retry policies: attempts, backoff waits, which errors, the compile-time default.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::{Counter, CounterUpdate};
use weft_graph::{
    CompileConfig, CompiledGraph, GraphError, NodeConfig, RetryPolicy, Runtime, START, StateGraph,
};
use weft_runnable_core::{Error, RunnableConfig};

/// A graph of one node, `flaky`, that fails on its first `failures` runs (recording the attempt number
/// the runtime reports on each run).
fn flaky_graph(
    failures: u32,
    node_policy: Option<RetryPolicy>,
    default_policy: Option<RetryPolicy>,
    attempts: Arc<std::sync::Mutex<Vec<u32>>>,
) -> CompiledGraph<Counter> {
    let runs = AtomicU32::new(0);
    let mut g = StateGraph::<Counter>::new();
    let node = move |_: Counter, rt: &Runtime| -> weft_runnable_core::Result<CounterUpdate> {
        attempts.lock().unwrap().push(rt.execution_info().attempt);
        if runs.fetch_add(1, Ordering::SeqCst) < failures {
            Err(Error::msg("flaky"))
        } else {
            Ok(CounterUpdate::log("done"))
        }
    };
    let config = node_policy.map_or_else(NodeConfig::new, |p| NodeConfig::new().retry(p));
    g.add_node_with("flaky", node, config);
    g.add_edge(START, "flaky");
    let mut compile = CompileConfig::new();
    if let Some(p) = default_policy {
        compile = compile.retry(p);
    }
    g.compile_with(compile).unwrap()
}

fn quick(max_attempts: u32) -> RetryPolicy {
    RetryPolicy::new()
        .max_attempts(max_attempts)
        .initial_interval(Duration::from_millis(100))
        .backoff_factor(2.0)
        .jitter(false)
}

#[tokio::test(start_paused = true)]
async fn a_failing_node_is_retried_with_exponential_backoff_until_it_succeeds() {
    let attempts = Arc::default();
    let app = flaky_graph(2, Some(quick(3)), None, Arc::clone(&attempts));
    let started = tokio::time::Instant::now();
    let out = app.invoke(CounterUpdate::default(), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.log, vec!["done"]);
    assert_eq!(*attempts.lock().unwrap(), vec![1, 2, 3], "the runtime reports each attempt");
    assert_eq!(started.elapsed(), Duration::from_millis(100 + 200), "waits of 100 ms, then 200 ms");
}

#[tokio::test(start_paused = true)]
async fn retry_stops_after_max_attempts_counting_the_first() {
    let attempts = Arc::default();
    let app = flaky_graph(5, Some(quick(2)), None, Arc::clone(&attempts));
    let err = app.invoke(CounterUpdate::default(), &RunnableConfig::default()).await.unwrap_err();
    assert!(matches!(&err, GraphError::Node { node, .. } if node == "flaky"), "{err}");
    assert_eq!(err.to_string(), "node 'flaky' of graph 'LangGraph' failed at step 1: flaky");
    assert_eq!(attempts.lock().unwrap().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn errors_the_policy_does_not_choose_are_not_retried() {
    let attempts = Arc::default();
    let policy = quick(5).retry_on(|err| err.to_string().contains("overloaded"));
    let app = flaky_graph(1, Some(policy), None, Arc::clone(&attempts));
    app.invoke(CounterUpdate::default(), &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(attempts.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_compile_retry_policy_covers_nodes_without_their_own() {
    let attempts = Arc::default();
    let app = flaky_graph(1, None, Some(quick(2)), Arc::clone(&attempts));
    let out = app.invoke(CounterUpdate::default(), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.log, vec!["done"]);
    assert_eq!(attempts.lock().unwrap().len(), 2);

    let attempts = Arc::default();
    let app = flaky_graph(1, Some(quick(1)), Some(quick(3)), Arc::clone(&attempts));
    app.invoke(CounterUpdate::default(), &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(attempts.lock().unwrap().len(), 1, "the node's own policy wins");
}

#[tokio::test]
async fn without_a_policy_a_failure_is_not_retried() {
    let attempts = Arc::default();
    let app = flaky_graph(1, None, None, Arc::clone(&attempts));
    app.invoke(CounterUpdate::default(), &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(attempts.lock().unwrap().len(), 1);
}

#[test]
fn backoff_intervals_grow_by_the_factor_up_to_the_maximum() {
    let policy = quick(10).max_interval(Duration::from_millis(300));
    let waits: Vec<u128> = (1..=4).map(|retry| policy.interval(retry).as_millis()).collect();
    assert_eq!(waits, [100, 200, 300, 300]);
    let jittered = quick(10).jitter(true).delay(1);
    assert!(jittered >= Duration::from_millis(100) && jittered < Duration::from_millis(1100), "{jittered:?}");
}

/// A graph of one node that fails with the scripted errors in order (`None`: a timeout, `Some(m)`: a
/// custom error), then succeeds; `policies` are the node's list of retry policies.
fn scripted_graph(
    errors: Vec<Option<&'static str>>,
    policies: Vec<RetryPolicy>,
    attempts: Arc<std::sync::Mutex<Vec<u32>>>,
) -> CompiledGraph<Counter> {
    let runs = AtomicU32::new(0);
    let mut g = StateGraph::<Counter>::new();
    let node = move |_: Counter, rt: &Runtime| -> weft_runnable_core::Result<CounterUpdate> {
        attempts.lock().unwrap().push(rt.execution_info().attempt);
        let run = runs.fetch_add(1, Ordering::SeqCst) as usize;
        match errors.get(run) {
            Some(None) => Err(Error::Timeout { what: "model".into(), after: Duration::from_secs(1) }),
            Some(Some(m)) => Err(Error::msg(*m)),
            None => Ok(CounterUpdate::log("done")),
        }
    };
    g.add_node_with("scripted", node, NodeConfig::new().retry_policies(policies));
    g.add_edge(START, "scripted");
    g.compile().unwrap()
}

fn on_timeouts(max_attempts: u32) -> RetryPolicy {
    quick(max_attempts).retry_on(|e| matches!(e, Error::Timeout { .. }))
}

#[tokio::test(start_paused = true)]
async fn the_first_policy_whose_retry_on_matches_the_error_applies() {
    let attempts = Arc::default();
    let slow = RetryPolicy::new().max_attempts(4).initial_interval(Duration::from_secs(1)).jitter(false);
    let app =
        scripted_graph(vec![None, None, Some("flaky")], vec![on_timeouts(5), slow], Arc::clone(&attempts));
    let started = tokio::time::Instant::now();
    let out = app.invoke(CounterUpdate::default(), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.log, vec!["done"]);
    assert_eq!(*attempts.lock().unwrap(), vec![1, 2, 3, 4]);
    // Two timeouts under the first policy (100 ms, 200 ms), then the custom error under the second, which
    // counts every failure so far: its third wait, 1 s x 2^2.
    assert_eq!(started.elapsed(), Duration::from_millis(100 + 200 + 4000));
}

#[tokio::test(start_paused = true)]
async fn an_error_no_policy_matches_fails_the_node_at_once() {
    let attempts = Arc::default();
    let app = scripted_graph(vec![Some("flaky")], vec![on_timeouts(5)], Arc::clone(&attempts));
    let err = app.invoke(CounterUpdate::default(), &RunnableConfig::default()).await.unwrap_err();
    assert!(matches!(err, GraphError::Node { .. }), "{err:?}");
    assert!(err.to_string().contains("flaky"), "{err}");
    assert_eq!(*attempts.lock().unwrap(), vec![1]);
}

#[tokio::test(start_paused = true)]
async fn the_matching_policy_counts_failures_under_earlier_policies() {
    let attempts = Arc::default();
    let app = scripted_graph(
        vec![None, None, Some("flaky")],
        vec![on_timeouts(5), quick(3)],
        Arc::clone(&attempts),
    );
    let err = app.invoke(CounterUpdate::default(), &RunnableConfig::default()).await.unwrap_err();
    assert!(err.to_string().contains("flaky"), "{err}");
    // The third failure reaches the second policy's three attempts.
    assert_eq!(*attempts.lock().unwrap(), vec![1, 2, 3]);
}

#[tokio::test(start_paused = true)]
async fn the_graphs_policy_list_serves_nodes_without_their_own() {
    let attempts: Arc<std::sync::Mutex<Vec<u32>>> = Arc::default();
    let runs = AtomicU32::new(0);
    let seen = Arc::clone(&attempts);
    let mut g = StateGraph::<Counter>::new();
    g.add_node("n", move |_: Counter, rt: &Runtime| -> weft_runnable_core::Result<CounterUpdate> {
        seen.lock().unwrap().push(rt.execution_info().attempt);
        match runs.fetch_add(1, Ordering::SeqCst) {
            0 => Err(Error::Timeout { what: "model".into(), after: Duration::from_secs(1) }),
            1 => Err(Error::msg("flaky")),
            _ => Ok(CounterUpdate::log("done")),
        }
    });
    g.add_edge(START, "n");
    let app = g.compile_with(CompileConfig::new().retry(on_timeouts(2)).retry(quick(3))).unwrap();
    let out = app.invoke(CounterUpdate::default(), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.log, vec!["done"]);
    assert_eq!(*attempts.lock().unwrap(), vec![1, 2, 3]);
}

#[tokio::test]
async fn a_node_policy_retries_a_runnable_as_it_retries_a_node() {
    use weft_runnable_core::{Runnable, RunnableExt, RunnableLambda};
    let calls = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&calls);
    let flaky = RunnableLambda::try_new(move |x: i64| -> weft_runnable_core::Result<i64> {
        if seen.fetch_add(1, Ordering::SeqCst) < 2 { Err(Error::msg("flaky")) } else { Ok(x * 2) }
    });
    let policy = RetryPolicy::new().jitter(false).initial_interval(Duration::from_millis(1)).max_attempts(3);
    let retried = flaky.with_retry_policy(policy.clone());
    assert_eq!(retried.invoke(21, &RunnableConfig::default()).await.unwrap(), 42);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    // Its attempts and its errors are the node's: invalid input is not retried.
    let refused = RunnableLambda::try_new(|_: i64| -> weft_runnable_core::Result<i64> {
        Err(Error::InvalidInput("bad".into()))
    })
    .with_retry_policy(policy);
    assert!(matches!(refused.invoke(1, &RunnableConfig::default()).await, Err(Error::InvalidInput(_))));
}
