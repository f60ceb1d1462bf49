//! Options given per run (LangGraph's per-call `interrupt_before`, `interrupt_after`, `durability` and
//! `context`), beside the ones the graph was compiled with.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use weft_graph::checkpoint::InMemorySaver;
use weft_graph::{
    CompileConfig, CompiledGraph, Durability, GraphInput, RunOptions, Runtime, START, State, StateGraph,
};
use weft_runnable_core::RunnableConfig;

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Doc {
    #[state(append)]
    log: Vec<String>,
}

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

fn log(s: &str) -> DocUpdate {
    DocUpdate::new().log(vec![s.to_owned()])
}

/// a -> b -> c, compiled to pause before `a`.
fn chain() -> CompiledGraph<Doc> {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("a", |_: Doc| log("a"));
    g.add_node("b", |_: Doc| log("b"));
    g.add_node("c", |_: Doc| log("c"));
    g.add_edge(START, "a");
    g.add_edge("a", "b");
    g.add_edge("b", "c");
    let config = CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new())).interrupt_before(["a"]);
    g.compile_with(config).unwrap()
}

fn before(nodes: &[&str]) -> RunOptions {
    RunOptions {
        interrupt_before: Some(nodes.iter().map(|&n| n.to_owned()).collect()),
        ..RunOptions::default()
    }
}

#[tokio::test]
async fn breakpoints_given_per_run_replace_the_compiled_ones() {
    let app = chain();
    let out = app.invoke_with(log("s"), &thread("t"), before(&["b"])).await.unwrap();
    assert_eq!(out.value.log, vec!["s", "a"], "paused before b, not before a");
    assert_eq!(app.get_state(&thread("t")).await.unwrap().next, vec!["b"]);
    // A run without per-run breakpoints uses the compiled ones again (none ahead: `a` already ran).
    let out = app.invoke(GraphInput::Resume, &thread("t")).await.unwrap();
    assert_eq!(out.value.log, vec!["s", "a", "b", "c"]);
}

#[tokio::test]
async fn an_empty_per_run_list_turns_the_compiled_breakpoints_off() {
    let out = chain().invoke_with(log("s"), &thread("t"), before(&[])).await.unwrap();
    assert_eq!(out.value.log, vec!["s", "a", "b", "c"]);
}

#[tokio::test]
async fn interrupt_after_given_per_run_pauses_after_the_node() {
    let app = chain();
    let options = RunOptions { interrupt_after: Some(vec!["b".to_owned()]), ..before(&[]) };
    let out = app.invoke_with(log("s"), &thread("t"), options).await.unwrap();
    assert_eq!(out.value.log, vec!["s", "a", "b"]);
    assert_eq!(app.get_state(&thread("t")).await.unwrap().next, vec!["c"]);
}

#[tokio::test]
async fn durability_given_per_run_decides_which_checkpoints_are_saved() {
    let app = chain();
    app.invoke_with(log("s"), &thread("sync"), RunOptions { durability: Durability::Sync, ..before(&[]) })
        .await
        .unwrap();
    app.invoke_with(log("s"), &thread("exit"), RunOptions { durability: Durability::Exit, ..before(&[]) })
        .await
        .unwrap();
    let count = |t| {
        let app = app.clone();
        async move { app.get_state_history(&thread(t), Default::default()).await.unwrap().len() }
    };
    // Input, START's step and one per node; on exit only the last one.
    assert_eq!(count("sync").await, 5);
    assert_eq!(count("exit").await, 1);
}

#[tokio::test]
async fn context_given_per_run_reaches_the_nodes() {
    #[derive(Debug)]
    struct User(&'static str);
    let mut g = StateGraph::<Doc>::new();
    g.add_node("greet", |_: Doc, rt: &Runtime| {
        log(&format!("hi {}", rt.context::<User>().map_or("?", |u| u.0)))
    });
    g.add_edge(START, "greet");
    let app = g.compile().unwrap();
    let options = RunOptions { context: Some(Arc::new(User("ada"))), ..RunOptions::default() };
    let out = app.invoke_with(log("s"), &RunnableConfig::default(), options).await.unwrap();
    assert_eq!(out.value.log, vec!["s", "hi ada"]);
    let out = app.invoke(log("s"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.log, vec!["s", "hi ?"]);
}
