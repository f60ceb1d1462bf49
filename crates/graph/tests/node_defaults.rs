//! `set_node_defaults`: graph-wide retry, cache and timeout policies, overridden per node, not inherited
//! by subgraphs.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Counter, CounterUpdate};
use weft_graph::{
    CachePolicy, CompileConfig, GraphError, InMemoryCache, NodeConfig, NodeDefaults, RetryPolicy, Runtime,
    START, StateGraph, TimeoutKind, TimeoutPolicy,
};
use weft_runnable_core::{Error, RunnableConfig};

const MS: Duration = Duration::from_millis(1);

type Attempts = Arc<Mutex<Vec<(String, u32)>>>;

/// An async node that records `(name, attempt)` and fails on every attempt before `succeed_at`.
fn failing(
    name: &'static str,
    succeed_at: u32,
    attempts: &Attempts,
) -> impl Fn(Counter, Runtime) -> futures::future::BoxFuture<'static, Result<CounterUpdate, Error>>
+ Send
+ Sync
+ 'static {
    let attempts = Arc::clone(attempts);
    move |_: Counter, rt: Runtime| {
        let attempt = rt.execution_info().attempt;
        attempts.lock().unwrap().push((name.to_owned(), attempt));
        Box::pin(async move {
            if attempt < succeed_at { Err(Error::msg("flaky")) } else { Ok(CounterUpdate::log(name)) }
        })
    }
}

/// An async node that sleeps `d`.
fn sleeping(
    name: &'static str,
    d: Duration,
) -> impl Fn(Counter) -> futures::future::BoxFuture<'static, Result<CounterUpdate, Error>> + Send + Sync + 'static
{
    move |_: Counter| {
        Box::pin(async move {
            tokio::time::sleep(d).await;
            Ok(CounterUpdate::log(name))
        })
    }
}

fn retry(max_attempts: u32) -> RetryPolicy {
    RetryPolicy::new().max_attempts(max_attempts).initial_interval(10 * MS).jitter(false)
}

fn count(attempts: &Attempts, name: &str) -> usize {
    attempts.lock().unwrap().iter().filter(|(n, _)| n == name).count()
}

async fn run(app: &weft_graph::CompiledGraph<Counter>) -> Result<Vec<String>, GraphError> {
    app.invoke(CounterUpdate::default(), &RunnableConfig::default()).await.map(|o| o.value.log)
}

#[tokio::test(start_paused = true)]
async fn the_default_retry_applies_to_nodes_without_their_own_and_comes_before_the_compile_configs() {
    let attempts = Attempts::default();
    let mut g = StateGraph::<Counter>::new();
    g.set_node_defaults(NodeDefaults::new().retry(retry(3)));
    g.add_node("plain", failing("plain", 3, &attempts));
    g.add_node_with("own", failing("own", 3, &attempts), NodeConfig::new().retry(retry(2)));
    g.add_edge(START, "plain").add_edge("plain", "own");
    let app = g.compile_with(CompileConfig::new().retry(retry(10))).unwrap();
    let err = run(&app).await.unwrap_err();
    assert_eq!(count(&attempts, "plain"), 3, "the default's three attempts, not the compile config's ten");
    assert_eq!(count(&attempts, "own"), 2, "the node's own policy wins");
    assert!(matches!(&err, GraphError::Node { node, .. } if node == "own"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn the_default_timeout_applies_to_nodes_without_their_own() {
    let mut g = StateGraph::<Counter>::new();
    g.set_node_defaults(NodeDefaults::new().timeout(TimeoutPolicy::run(100 * MS).unwrap()));
    g.add_node_with(
        "patient",
        sleeping("patient", 300 * MS),
        NodeConfig::new().timeout(TimeoutPolicy::run(500 * MS).unwrap()),
    );
    g.add_node("hasty", sleeping("hasty", 300 * MS));
    g.add_edge(START, "patient").add_edge("patient", "hasty");
    let err = run(&g.compile().unwrap()).await.unwrap_err();
    let timeout = err.node_timeout().unwrap();
    assert_eq!((timeout.node.as_str(), timeout.kind, timeout.timeout), ("hasty", TimeoutKind::Run, 100 * MS));
}

#[tokio::test]
async fn the_default_cache_applies_to_nodes_without_their_own() {
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&runs);
    let mut g = StateGraph::<Counter>::new();
    g.set_node_defaults(NodeDefaults::new().cache(CachePolicy::new()));
    g.add_node("a", move |s: Counter| {
        counted.fetch_add(1, Ordering::SeqCst);
        CounterUpdate::count(s.count + 1)
    });
    g.add_edge(START, "a");
    let app = g.compile_with(CompileConfig::new().cache(Arc::new(InMemoryCache::new()))).unwrap();
    for _ in 0..2 {
        let out = app.invoke(CounterUpdate::count(1), &RunnableConfig::default()).await.unwrap();
        assert_eq!(out.value.count, 2);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the second run's node was served from the cache");
}

/// The parent's default retry retries its subgraph node as a whole; the subgraph's own node keeps no
/// retry, so each of its runs is a first attempt.
#[tokio::test(start_paused = true)]
async fn a_subgraph_does_not_inherit_its_parents_defaults() {
    let attempts = Attempts::default();
    let mut inner = StateGraph::<Counter>::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let flaky = {
        let (attempts, calls) = (Arc::clone(&attempts), Arc::clone(&calls));
        move |_: Counter, rt: Runtime| {
            attempts.lock().unwrap().push(("inner".to_owned(), rt.execution_info().attempt));
            let first = calls.fetch_add(1, Ordering::SeqCst) == 0;
            async move { if first { Err(Error::msg("flaky")) } else { Ok(CounterUpdate::log("inner")) } }
        }
    };
    inner.add_node("inner", flaky);
    inner.add_edge(START, "inner");
    let inner = inner.compile().unwrap();
    let mut outer = StateGraph::<Counter>::new();
    outer.set_node_defaults(NodeDefaults::new().retry(retry(3)));
    outer.add_node("sub", inner);
    outer.add_edge(START, "sub");
    assert_eq!(run(&outer.compile().unwrap()).await.unwrap(), ["inner"]);
    let seen: Vec<u32> = attempts.lock().unwrap().iter().map(|(_, a)| *a).collect();
    assert_eq!(seen, [1, 1], "the inner node was not retried inside the subgraph: the parent retried `sub`");
}

#[test]
fn a_default_timeout_on_a_graph_with_a_sync_node_does_not_compile() {
    let mut g = StateGraph::<Counter>::new();
    g.set_node_defaults(NodeDefaults::new().timeout(TimeoutPolicy::run(MS).unwrap()));
    g.add_node("sync", |_: Counter| CounterUpdate::log("x"));
    g.add_edge(START, "sync");
    assert!(matches!(g.compile(), Err(GraphError::SyncNodeTimeout(node)) if node == "sync"));
}

#[tokio::test(start_paused = true)]
async fn a_later_call_replaces_only_the_defaults_it_sets() {
    let attempts = Attempts::default();
    let mut g = StateGraph::<Counter>::new();
    g.set_node_defaults(NodeDefaults::new().retry(retry(4)).timeout(TimeoutPolicy::run(100 * MS).unwrap()));
    g.set_node_defaults(NodeDefaults::new().timeout(TimeoutPolicy::run(50 * MS).unwrap()));
    g.add_node("flaky", failing("flaky", 99, &attempts));
    g.add_node("slow", sleeping("slow", 75 * MS));
    g.add_edge(START, "flaky").add_edge("flaky", "slow");
    run(&g.compile().unwrap()).await.unwrap_err();
    assert_eq!(count(&attempts, "flaky"), 4, "the first call's retry stays");

    let mut g = StateGraph::<Counter>::new();
    g.set_node_defaults(NodeDefaults::new().timeout(TimeoutPolicy::run(100 * MS).unwrap()));
    g.set_node_defaults(NodeDefaults::new().timeout(TimeoutPolicy::run(50 * MS).unwrap()));
    g.add_node("slow", sleeping("slow", 75 * MS));
    g.add_edge(START, "slow");
    let err = run(&g.compile().unwrap()).await.unwrap_err();
    assert_eq!(
        err.node_timeout().unwrap().timeout,
        50 * MS,
        "the second call's timeout replaced the first's"
    );
}
