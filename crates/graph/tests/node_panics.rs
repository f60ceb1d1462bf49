//! A node or a router that panics: its run fails with the node's error (`Error::Panicked`), as a node
//! or a router returning an error does, instead of unwinding through the caller; what was saved before
//! it stays, and the thread runs again.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::{Counter, CounterUpdate};
use futures::StreamExt as _;
use weft_graph::checkpoint::InMemorySaver;
use weft_graph::{
    CompileConfig, CompiledGraph, GraphError, GraphInput, NodeConfig, RetryPolicy, START, StateGraph,
    StreamMode,
};
use weft_runnable_core::{Error, RunnableConfig};

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

/// `first` → `boom`; `boom` panics on its first `panics` runs, then logs `boom`.
fn graph(panics: u32, policy: Option<RetryPolicy>) -> (CompiledGraph<Counter>, Arc<AtomicU32>) {
    let runs = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&runs);
    let mut g = StateGraph::<Counter>::new();
    g.add_node("first", |_: Counter| CounterUpdate::log("first"));
    let boom = move |state: Counter| -> weft_runnable_core::Result<CounterUpdate> {
        if counted.fetch_add(1, Ordering::SeqCst) < panics {
            panic!("boom after {} entries", state.log.len());
        }
        Ok(CounterUpdate::log("boom"))
    };
    g.add_node_with("boom", boom, policy.map_or_else(NodeConfig::new, |p| NodeConfig::new().retry(p)));
    g.add_edge(START, "first");
    g.add_edge("first", "boom");
    let saver = Arc::new(InMemorySaver::new());
    (g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap(), runs)
}

#[tokio::test]
async fn a_panicking_node_fails_its_run_with_the_panics_message() {
    let (app, runs) = graph(1, None);
    let err = app.invoke(CounterUpdate::log("in"), &thread("t")).await.unwrap_err();
    let GraphError::Node { node, source, .. } = &err else { panic!("a node error: {err:?}") };
    assert_eq!(node.name(), "boom");
    assert!(matches!(source, Error::Panicked(m) if m == "boom after 2 entries"), "{source:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "a panic is not retried by the default policy");

    // The step before it was saved; the thread goes on from there.
    let state = app.get_state(&thread("t")).await.unwrap();
    assert_eq!(state.values.log, vec!["in", "first"]);
    assert_eq!(state.next, vec!["boom"]);
    let out = app.invoke(GraphInput::Resume, &thread("t")).await.unwrap();
    assert_eq!(out.value.log, vec!["in", "first", "boom"]);
}

#[tokio::test]
async fn a_stream_ends_with_the_panic_as_its_error() {
    let (app, _) = graph(1, None);
    let parts: Vec<_> =
        app.stream(CounterUpdate::log("in"), &thread("s"), &[StreamMode::Updates]).collect().await;
    let (last, before) = parts.split_last().unwrap();
    assert!(before.iter().all(Result::is_ok), "the updates before the panic are streamed");
    assert_eq!(before.len(), 1, "first's update: {before:?}");
    let err = last.as_ref().unwrap_err();
    assert!(err.to_string().contains("panicked: boom after 2 entries"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn a_policy_that_retries_panics_runs_the_node_again() {
    let policy = RetryPolicy::new()
        .max_attempts(3)
        .initial_interval(Duration::from_millis(10))
        .jitter(false)
        .retry_on(|e| matches!(e, Error::Panicked(_)));
    let (app, runs) = graph(2, Some(policy));
    let out = app.invoke(CounterUpdate::log("in"), &thread("r")).await.unwrap();
    assert_eq!(out.value.log, vec!["in", "first", "boom"]);
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_panicking_router_fails_its_nodes_task() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("first", |_: Counter| CounterUpdate::log("first"));
    g.add_node("second", |_: Counter| CounterUpdate::log("second"));
    g.add_edge(START, "first");
    g.add_conditional_edges("first", |_: &Counter| -> &'static str { panic!("no way out") }, ["second"]);
    let app = g.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap();
    let err = app.invoke(CounterUpdate::log("in"), &thread("r")).await.unwrap_err();
    let GraphError::Node { node, source, .. } = &err else { panic!("a node error: {err:?}") };
    assert_eq!(node.name(), "first");
    assert!(matches!(source, Error::Panicked(m) if m == "no way out"), "{source:?}");
    let state = app.get_state(&thread("r")).await.unwrap();
    // As for a router's error: the node's writes are saved with the error (as LangGraph saves a failing
    // task's writes), and the task counts as finished.
    assert_eq!(state.values.log, vec!["in", "first"]);
    assert!(state.next.is_empty(), "{:?}", state.next);
}
