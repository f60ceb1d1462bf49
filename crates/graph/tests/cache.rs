//! Node cache: same input reuses the writes and marks the update as cached.
#![allow(clippy::panic)]
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Counter, CounterUpdate};
use futures::StreamExt as _;
use weft_graph::{
    CachePolicy, CompileConfig, CompiledGraph, InMemoryCache, NodeConfig, START, StateGraph, StreamData,
    StreamMode,
};
use weft_runnable_core::RunnableConfig;

fn cached_graph(runs: Arc<AtomicUsize>, policy: CachePolicy) -> CompiledGraph<Counter> {
    let mut g = StateGraph::<Counter>::new();
    g.add_node_with(
        "slow",
        move |s: Counter| {
            runs.fetch_add(1, Ordering::SeqCst);
            CounterUpdate::log(&format!("double {}", s.count * 2))
        },
        NodeConfig::new().cache(policy),
    );
    g.add_edge(START, "slow");
    g.compile_with(CompileConfig::new().cache(Arc::new(InMemoryCache::new()))).unwrap()
}

async fn updates(app: &CompiledGraph<Counter>, count: i64) -> Vec<(String, bool)> {
    app.stream(CounterUpdate::count(count), &RunnableConfig::default(), &[StreamMode::Updates])
        .map(|p| match p.unwrap().data {
            StreamData::Updates { node, cached, .. } => (node, cached),
            other => panic!("{other:?}"),
        })
        .collect()
        .await
}

#[tokio::test]
async fn same_input_reuses_cached_writes() {
    let runs = Arc::new(AtomicUsize::new(0));
    let app = cached_graph(Arc::clone(&runs), CachePolicy::new());
    assert_eq!(updates(&app, 2).await, vec![("slow".to_owned(), false)]);
    assert_eq!(updates(&app, 2).await, vec![("slow".to_owned(), true)]);
    let out = app.invoke(CounterUpdate::count(2), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.log, vec!["double 4"]);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    updates(&app, 3).await;
    assert_eq!(runs.load(Ordering::SeqCst), 2, "another input misses the cache");
    app.clear_cache(None).await;
    updates(&app, 2).await;
    assert_eq!(runs.load(Ordering::SeqCst), 3, "a cleared cache misses");
}

#[tokio::test(start_paused = true)]
async fn entries_expire_after_their_ttl() {
    let runs = Arc::new(AtomicUsize::new(0));
    let app = cached_graph(Arc::clone(&runs), CachePolicy::new().ttl(Duration::from_secs(60)));
    updates(&app, 1).await;
    tokio::time::advance(Duration::from_secs(30)).await;
    updates(&app, 1).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    tokio::time::advance(Duration::from_secs(31)).await;
    updates(&app, 1).await;
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_custom_key_ignores_fields() {
    let runs = Arc::new(AtomicUsize::new(0));
    let app = cached_graph(Arc::clone(&runs), CachePolicy::new().key(|_input| "constant".to_owned()));
    updates(&app, 1).await;
    let out = app.invoke(CounterUpdate::count(5), &RunnableConfig::default()).await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(out.value.log, vec!["double 2"], "the cached writes are reused as they were");
}

/// A packet whose map keys are not strings cannot be written as JSON.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Grid {
    cells: std::collections::BTreeMap<(i64, i64), i64>,
}

#[tokio::test]
async fn a_packet_that_cannot_be_written_as_json_runs_uncached() {
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&runs);
    let mut g = StateGraph::<Counter>::new();
    g.add_node_with(
        "sum",
        move |grid: Grid| {
            counted.fetch_add(1, Ordering::SeqCst);
            CounterUpdate::log(&format!("sum {}", grid.cells.values().sum::<i64>()))
        },
        NodeConfig::new().cache(CachePolicy::new()),
    );
    g.set_conditional_entry_point(
        |_: &Counter| {
            [1, 2]
                .map(|v| weft_graph::Send::new("sum", Grid { cells: [((0, 0), v)].into_iter().collect() }))
                .to_vec()
        },
        None,
    );
    let app = g.compile_with(CompileConfig::new().cache(Arc::new(InMemoryCache::new()))).unwrap();
    let out = app.invoke(CounterUpdate::count(0), &RunnableConfig::default()).await.unwrap();
    let mut log = out.value.log.clone();
    log.sort();
    assert_eq!(log, ["sum 1", "sum 2"], "each packet ran with its own input");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}
