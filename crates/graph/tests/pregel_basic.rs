//! Supersteps, edges, routers, Send, Command, recursion limit, streaming.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use common::{Counter, CounterUpdate};
use futures::StreamExt as _;
use weft_graph::{Command, END, GraphError, START, Send, StateGraph, StreamData, StreamMode};
use weft_runnable_core::RunnableConfig;

fn cfg() -> RunnableConfig {
    RunnableConfig::default()
}

#[tokio::test]
async fn chain_runs_each_node_once_in_order() {
    let mut g = StateGraph::<Counter>::new();
    for i in 0..5 {
        g.add_node(format!("n{i}"), move |s: Counter| CounterUpdate {
            count: Some(s.count + 1),
            log: Some(vec![format!("n{i}")]),
        });
    }
    g.add_edge(START, "n0");
    for i in 0..4 {
        g.add_edge(format!("n{i}"), format!("n{}", i + 1));
    }
    g.add_edge("n4", END);
    let app = g.compile().unwrap();
    let out = app.invoke(CounterUpdate::count(0), &cfg()).await.unwrap();
    assert_eq!(out.value.count, 5);
    assert_eq!(out.value.log, vec!["n0", "n1", "n2", "n3", "n4"]);
}

#[tokio::test]
async fn router_sees_own_write_and_loops() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("inc", |s: Counter| CounterUpdate::count(s.count + 1));
    g.add_edge(START, "inc");
    g.add_conditional_edges("inc", |s: &Counter| if s.count < 1000 { "inc" } else { END }, None);
    let app = g.compile().unwrap();
    let out = app.invoke(CounterUpdate::count(0), &cfg().with_recursion_limit(2000)).await.unwrap();
    assert_eq!(out.value.count, 1000);
}

#[tokio::test]
async fn recursion_limit_counts_the_start_step() {
    let mut g = StateGraph::<Counter>::new();
    fn inc(s: Counter) -> CounterUpdate {
        CounterUpdate::count(s.count + 1)
    }
    g.add_sequence(vec![("a", inc), ("b", inc), ("c", inc)]);
    g.add_edge(START, "a");
    let app = g.compile().unwrap();
    assert_eq!(
        app.invoke(CounterUpdate::count(0), &cfg().with_recursion_limit(4)).await.unwrap().value.count,
        3
    );
    let err = app.invoke(CounterUpdate::count(0), &cfg().with_recursion_limit(3)).await.unwrap_err();
    assert!(matches!(err, GraphError::RecursionLimit { limit: 3 }), "{err}");
    assert!(err.to_string().contains("recursion limit of 3 reached"), "{err}");
}

#[tokio::test]
async fn parallel_writes_to_last_value_key_fail_naming_it() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", |_: Counter| CounterUpdate::count(1));
    g.add_node("b", |_: Counter| CounterUpdate::count(2));
    g.add_edge(START, "a");
    g.add_edge(START, "b");
    let err = g.compile().unwrap().invoke(CounterUpdate::count(0), &cfg()).await.unwrap_err();
    assert!(err.to_string().contains("at key 'count'"), "{err}");
    assert!(err.to_string().contains("a, b"), "{err}");
}

#[tokio::test]
async fn reducer_folds_parallel_writes_in_node_name_order() {
    let mut g = StateGraph::<Counter>::new();
    for name in ["zc", "za", "zb"] {
        g.add_node(name, move |_: Counter| CounterUpdate::log(name));
        g.add_edge(START, name);
    }
    let out = g.compile().unwrap().invoke(CounterUpdate::default(), &cfg()).await.unwrap();
    assert_eq!(out.value.log, vec!["za", "zb", "zc"]);
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Item {
    i: i64,
}

#[tokio::test]
async fn send_fan_out_runs_one_task_per_packet_then_joins_once() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("split", |_: Counter| ());
    g.add_node("work", |item: Item| CounterUpdate::log(&(2 * item.i).to_string()));
    g.add_node("join", |s: Counter| {
        CounterUpdate::count(s.log.iter().map(|x| x.parse::<i64>().unwrap()).sum())
    });
    g.add_edge(START, "split");
    g.add_conditional_edges(
        "split",
        |_: &Counter| (0..100).map(|i| Send::new("work", Item { i })).collect::<Vec<_>>(),
        None,
    );
    g.add_edge("work", "join");
    g.add_edge("join", END);
    let out = g.compile().unwrap().invoke(CounterUpdate::default(), &cfg()).await.unwrap();
    assert_eq!(out.value.count, (0..100).map(|i| 2 * i).sum::<i64>());
    let expected: Vec<String> = (0..100).map(|i| (2 * i).to_string()).collect();
    assert_eq!(out.value.log, expected, "send results are applied in send order");
}

#[tokio::test]
async fn waiting_edge_runs_target_once_after_all_sources() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("fan", |_: Counter| ());
    g.add_node("fast", |_: Counter| CounterUpdate::log("fast"));
    g.add_node("slow1", |_: Counter| CounterUpdate::log("slow1"));
    g.add_node("slow2", |_: Counter| CounterUpdate::log("slow2"));
    g.add_node("join", |s: Counter| CounterUpdate {
        count: Some(s.count + 1),
        log: Some(vec!["join".into()]),
    });
    g.add_edge(START, "fan");
    g.add_edge("fan", "fast");
    g.add_edge("fan", "slow1");
    g.add_edge("slow1", "slow2");
    g.add_waiting_edge(["fast", "slow2"], "join");
    let out = g.compile().unwrap().invoke(CounterUpdate::count(0), &cfg()).await.unwrap();
    assert_eq!(out.value.count, 1);
    assert_eq!(out.value.log, vec!["fast", "slow1", "slow2", "join"]);
}

#[tokio::test]
async fn plain_fan_in_runs_target_once_per_step_with_a_finished_predecessor() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", |_: Counter| ());
    g.add_node("b1", |_: Counter| ());
    g.add_node("b2", |_: Counter| ());
    g.add_node("c", |_: Counter| CounterUpdate::log("c"));
    g.add_edge(START, "a");
    g.add_edge(START, "b1");
    g.add_edge("b1", "b2");
    g.add_edge("a", "c");
    g.add_edge("b2", "c");
    let out = g.compile().unwrap().invoke(CounterUpdate::default(), &cfg()).await.unwrap();
    assert_eq!(out.value.log, vec!["c", "c"]);
}

#[tokio::test]
async fn command_goto_and_static_edges_both_fire() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", |_: Counter| Command::new().update(CounterUpdate::log("a")).goto("b"));
    g.add_node("b", |_: Counter| CounterUpdate::log("b"));
    g.add_node("c", |_: Counter| CounterUpdate::log("c"));
    g.add_edge(START, "a");
    g.add_edge("a", "c");
    let out = g.compile().unwrap().invoke(CounterUpdate::default(), &cfg()).await.unwrap();
    assert_eq!(out.value.log, vec!["a", "b", "c"]);
}

#[tokio::test]
async fn send_to_end_is_an_error() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", |_: Counter| Command::<Counter>::new().goto(Send::new(END, Item { i: 1 })));
    g.add_edge(START, "a");
    let err = g.compile().unwrap().invoke(CounterUpdate::default(), &cfg()).await.unwrap_err();
    assert!(matches!(err, GraphError::SendToEnd), "{err}");
}

#[tokio::test]
async fn router_to_unknown_node_is_an_error_naming_it() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", |_: Counter| ());
    g.add_edge(START, "a");
    g.add_conditional_edges("a", |_: &Counter| "nowhere", None);
    let err = g.compile().unwrap().invoke(CounterUpdate::default(), &cfg()).await.unwrap_err();
    assert!(err.to_string().contains("'nowhere'"), "{err}");
}

#[tokio::test]
async fn deferred_node_runs_once_after_unequal_branches() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", |_: Counter| CounterUpdate::log("a"));
    g.add_node("b1", |_: Counter| CounterUpdate::log("b1"));
    g.add_node("b2", |_: Counter| CounterUpdate::log("b2"));
    g.add_node_with("d", |_: Counter| CounterUpdate::log("d"), weft_graph::NodeConfig::new().defer());
    g.add_edge(START, "a");
    g.add_edge(START, "b1");
    g.add_edge("b1", "b2");
    g.add_edge("a", "d");
    g.add_edge("b2", "d");
    let out = g.compile().unwrap().invoke(CounterUpdate::default(), &cfg()).await.unwrap();
    assert_eq!(out.value.log, vec!["a", "b1", "b2", "d"]);
}

#[tokio::test]
async fn updates_stream_yields_one_chunk_per_task() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("inc", |s: Counter| CounterUpdate::count(s.count + 1));
    g.add_edge(START, "inc");
    g.add_conditional_edges("inc", |s: &Counter| if s.count < 10 { "inc" } else { END }, None);
    let app = g.compile().unwrap();
    let chunks: Vec<_> = app.stream(CounterUpdate::count(0), &cfg(), &[StreamMode::Updates]).collect().await;
    assert_eq!(chunks.len(), 10);
    for (j, c) in chunks.iter().enumerate() {
        match &c.as_ref().unwrap().data {
            StreamData::Updates { node, updates, cached } => {
                assert_eq!(node, "inc");
                assert_eq!(updates, &vec![CounterUpdate::count(j as i64 + 1)]);
                assert!(!cached);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn values_stream_starts_with_the_input() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", |s: Counter| CounterUpdate::count(s.count + 1));
    g.add_edge(START, "a");
    let app = g.compile().unwrap();
    let chunks: Vec<_> = app
        .stream(CounterUpdate::count(5), &cfg(), &[StreamMode::Values])
        .map(|c| match c.unwrap().data {
            StreamData::Values { state: s, .. } => s.count,
            other => panic!("unexpected {other:?}"),
        })
        .collect()
        .await;
    assert_eq!(chunks, vec![5, 6]);
}

#[tokio::test]
async fn node_error_names_node_and_step() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("boom", |_: Counter| -> weft_runnable_core::Result<CounterUpdate> {
        Err(weft_runnable_core::Error::msg("kaboom"))
    });
    g.add_edge(START, "boom");
    let err = g.compile().unwrap().invoke(CounterUpdate::default(), &cfg()).await.unwrap_err();
    assert_eq!(err.to_string(), "node 'boom' of graph 'LangGraph' failed at step 1: kaboom");
    // The node's own error, reached as itself, and saved as the task's error.
    assert_eq!(err.node_error().map(ToString::to_string).as_deref(), Some("kaboom"));
}

#[tokio::test]
async fn a_graph_run_inside_a_task_never_reads_that_tasks_runtime() {
    let mut inner = StateGraph::<Counter>::new();
    inner.add_node("look", |_: Counter, rt: &weft_graph::Runtime| {
        let sees_parent = rt.config().extensions.get::<weft_graph::Runtime>().is_some();
        CounterUpdate::log(if sees_parent { "parent's runtime" } else { "own runtime" })
    });
    inner.add_edge(START, "look");
    let inner = inner.compile().unwrap();
    let mut g = StateGraph::<Counter>::new();
    g.add_node("outer", move |_: Counter, rt: weft_graph::Runtime| {
        let inner = inner.clone();
        async move {
            // What a tool node hands its tools: the task's config carrying its runtime.
            let mut config = rt.config().clone();
            config.extensions.insert(rt.clone());
            let out = inner.invoke(CounterUpdate::default(), &config).await?;
            Ok::<_, weft_runnable_core::Error>(CounterUpdate::log(&out.value.log.concat()))
        }
    });
    g.add_edge(START, "outer");
    let out = g.compile().unwrap().invoke(CounterUpdate::default(), &cfg()).await.unwrap();
    assert_eq!(out.value.log, ["own runtime"]);
}

#[tokio::test]
async fn async_nodes_run_concurrently_within_a_step() {
    let mut g = StateGraph::<Counter>::new();
    for name in ["a", "b"] {
        g.add_node(name, move |_: Counter| async move {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            CounterUpdate::log(name)
        });
        g.add_edge(START, name);
    }
    let started = std::time::Instant::now();
    let out = g.compile().unwrap().invoke(CounterUpdate::default(), &cfg()).await.unwrap();
    assert_eq!(out.value.log, vec!["a", "b"]);
    assert!(started.elapsed() < std::time::Duration::from_millis(190), "took {:?}", started.elapsed());
}

#[tokio::test]
async fn a_runnable_can_be_a_node() {
    use weft_runnable_core::{RunnableExt as _, RunnableLambda};
    let double = RunnableLambda::new(|s: Counter| CounterUpdate::count(s.count * 2)).named("double").boxed();
    let mut g = StateGraph::<Counter>::new();
    g.add_node("double", double);
    g.add_edge(START, "double");
    let out = g.compile().unwrap().invoke(CounterUpdate::count(21), &cfg()).await.unwrap();
    assert_eq!(out.value.count, 42);
}

#[tokio::test]
async fn sync_nodes_may_read_the_state_by_reference() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", |s: &Counter| CounterUpdate::count(s.count + s.log.len() as i64));
    g.add_node("b", |s: &Counter, rt: &weft_graph::Runtime| {
        CounterUpdate::log(&format!("{} at {}", s.count, rt.execution_info().step))
    });
    g.add_edge(START, "a");
    g.add_edge("a", "b");
    let out = g
        .compile()
        .unwrap()
        .invoke(CounterUpdate { count: Some(1), log: Some(vec!["x".into()]) }, &cfg())
        .await
        .unwrap();
    assert_eq!(out.value.count, 2);
    assert_eq!(out.value.log, vec!["x", "2 at 2"]);
}

#[tokio::test]
async fn a_node_reading_the_state_by_reference_cannot_take_a_send() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("split", |_: &Counter| ());
    g.add_node("by_ref", |_: &Counter| CounterUpdate::log("x"));
    g.add_edge(START, "split");
    g.add_conditional_edges("split", |_: &Counter| Send::new("by_ref", Item { i: 1 }), None);
    let err = g.compile().unwrap().invoke(CounterUpdate::default(), &cfg()).await.unwrap_err();
    assert!(err.to_string().contains("by reference"), "{err}");
}
