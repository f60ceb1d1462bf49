//! A waiting edge's barrier in the history: each checkpoint keeps the barrier as it was when the checkpoint
//! was made, whatever the durability, so a snapshot lists the join only once all its sources have run and a
//! replay from a half-complete barrier runs the join after its last source. (LangGraph 1.2.22 saves with
//! `durability="async"` a barrier the next step has already added to; weft does not copy that.)
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;
use weft_graph::checkpoint::{Checkpointer, InMemorySaver};
use weft_graph::{
    CompileConfig, CompiledGraph, Durability, GraphInput, ListOptions, RunOptions, START, State, StateGraph,
};
use weft_runnable_core::RunnableConfig;

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Log {
    #[state(append)]
    log: Vec<String>,
}

fn thread() -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", "t")
}

fn wrote(name: &str) -> LogUpdate {
    LogUpdate::new().log(vec![name.to_owned()])
}

/// `a` and `b1` from START, `b1` then `b2`, and `join` waiting for `a` and `b2`.
fn unequal_branches(saver: Arc<InMemorySaver>) -> CompiledGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    g.add_node("a", |_: Log| wrote("a"));
    g.add_node("b1", |_: Log| wrote("b1"));
    g.add_node("b2", |_: Log| wrote("b2"));
    g.add_node("join", |s: Log| wrote(&format!("join {}", s.log.len())));
    g.add_edge(START, "a").add_edge(START, "b1").add_edge("b1", "b2");
    g.add_waiting_edge(["a", "b2"], "join");
    g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

#[tokio::test]
async fn a_snapshot_lists_the_join_only_once_its_barrier_is_complete() {
    for durability in [Durability::Sync, Durability::Async] {
        let saver = Arc::new(InMemorySaver::new());
        let app = unequal_branches(Arc::clone(&saver));
        let options = RunOptions { durability, ..RunOptions::default() };
        let out = app.invoke_with(LogUpdate::new(), &thread(), options).await.unwrap();
        assert_eq!(out.value.log, ["a", "b1", "b2", "join 3"]);

        let history = app.get_state_history(&thread(), ListOptions::default()).await.unwrap();
        let next: Vec<(i64, Vec<String>)> =
            history.iter().rev().map(|s| (s.metadata.as_ref().unwrap().step, s.next.clone())).collect();
        let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            next,
            [
                (-1, names(&["__start__"])),
                (0, names(&["a", "b1"])),
                (1, names(&["b2"])),
                (2, names(&["join"])),
                (3, names(&[])),
            ],
            "{durability:?}"
        );
        // The checkpoint after `a` and `b1` holds the barrier with `a` alone.
        let after_a = history[2].config.clone().unwrap();
        let saved = saver.get_tuple(&after_a).await.unwrap().unwrap();
        assert_eq!(
            saved.checkpoint.channel_values.get("join:a+b2:join"),
            Some(&json!(["a"])),
            "{durability:?}"
        );
    }
}

#[tokio::test]
async fn a_replay_from_a_half_complete_barrier_runs_the_join_after_its_last_source() {
    let app = unequal_branches(Arc::new(InMemorySaver::new()));
    app.invoke(LogUpdate::new(), &thread()).await.unwrap();
    let history = app.get_state_history(&thread(), ListOptions::default()).await.unwrap();
    let after_a = history.iter().find(|s| s.metadata.as_ref().unwrap().step == 1).unwrap();
    let address = after_a.config.clone().unwrap();
    let fork = thread().with_configurable("checkpoint_id", address.checkpoint_id.unwrap());
    let out = app.invoke(GraphInput::Resume, &fork).await.unwrap();
    assert_eq!(out.value.log, ["a", "b1", "b2", "join 3"]);
}
