//! Checkpoints and history as LangGraph has them: task results, `update_state` steps and results, forks
//! and copies, `versions_seen` and `updated_channels`, the order of `next`.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use weft_graph::checkpoint::{CheckpointConfig, CheckpointSource, Checkpointer, InMemorySaver, ListOptions};
use weft_graph::{CompileConfig, CompiledGraph, GraphInput, START, Send, State, StateGraph};
use weft_runnable_core::RunnableConfig;

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Doc {
    #[state(append)]
    log: Vec<String>,
    x: i64,
}

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

fn log(s: &str) -> DocUpdate {
    DocUpdate::new().log(vec![s.to_owned()])
}

/// START -> a; a sends one packet to `w` and routes to `b`.
fn fan(saver: Arc<InMemorySaver>) -> CompiledGraph<Doc> {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("a", |_: Doc| log("a"));
    g.add_node("b", |_: Doc| log("b"));
    g.add_node("w", |_: Doc| log("w"));
    g.add_edge(START, "a");
    g.add_conditional_edges(
        "a",
        |s: &Doc| {
            vec![
                weft_graph::branch::Route::Send(Send::new("w", s.clone())),
                weft_graph::branch::Route::Node("b".to_owned()),
            ]
        },
        None,
    );
    g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

fn chain(saver: Arc<InMemorySaver>) -> CompiledGraph<Doc> {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("a", |_: Doc| log("a"));
    g.add_node("b", |_: Doc| log("b"));
    g.add_edge(START, "a");
    g.add_edge("a", "b");
    g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

#[tokio::test]
async fn saved_checkpoints_record_what_each_step_saw_and_updated() {
    let saver = Arc::new(InMemorySaver::new());
    let app = fan(Arc::clone(&saver));
    app.invoke(DocUpdate::new().x(1).log(vec![]), &thread("t")).await.unwrap();
    let mut tuples = saver.list(Some(&CheckpointConfig::thread("t")), ListOptions::default()).await.unwrap();
    tuples.reverse();
    let counter = |v: &str| v.split('.').next().unwrap().parse::<u64>().unwrap();
    let seen = |i: usize| -> Vec<(String, Vec<(String, u64)>)> {
        tuples[i]
            .checkpoint
            .versions_seen
            .iter()
            .map(|(n, m)| (n.to_string(), m.iter().map(|(c, v)| (c.to_string(), counter(v))).collect()))
            .collect()
    };
    let updated = |i: usize| -> Vec<String> {
        tuples[i].checkpoint.updated_channels.iter().map(ToString::to_string).collect()
    };
    assert_eq!(seen(0), [("__input__".to_owned(), vec![])]);
    assert_eq!(updated(0), ["__start__"]);
    assert_eq!(
        seen(1),
        [("__input__".to_owned(), vec![]), ("__start__".to_owned(), vec![("__start__".to_owned(), 1)])]
    );
    assert_eq!(updated(1), ["branch:to:a", "log", "x"], "sorted, and not the consumed __start__");
    assert_eq!(seen(2)[2], ("a".to_owned(), vec![("branch:to:a".to_owned(), 2)]), "the version a saw");
    assert_eq!(updated(2), ["__pregel_tasks", "branch:to:b", "log"]);
    assert_eq!(seen(3)[4], ("w".to_owned(), vec![]), "a sent task records no versions");
    assert_eq!(updated(3), ["log"]);

    // `next` lists sent tasks before triggered nodes, as LangGraph does.
    let history = app.get_state_history(&thread("t"), ListOptions::default()).await.unwrap();
    assert_eq!(history[1].next, ["w", "b"]);
    // A task's result holds its writes to state channels only.
    for snapshot in &history {
        for task in &snapshot.tasks {
            for (channel, _) in task.result.iter().flatten() {
                assert!(["log", "x"].contains(&channel.as_str()), "internal channel in a result: {channel}");
            }
        }
    }
    let a = history[2].tasks.iter().find(|t| t.name == "a").unwrap();
    assert_eq!(a.result.as_ref().unwrap().len(), 1, "a wrote log only: {:?}", a.result);
}

#[tokio::test]
async fn update_state_steps_results_and_forks_follow_langgraph() {
    let app = chain(Arc::new(InMemorySaver::new()));
    // A fresh thread's first update is step 0.
    let first = app.update_state(&thread("t"), vec![log("u")], Some("a")).await.unwrap();
    let state = app.get_state(&thread("t")).await.unwrap();
    assert_eq!(state.metadata.as_ref().unwrap().step, 0);
    assert_eq!(state.next, ["b"]);

    // A second update is recorded as b's result on the checkpoint it builds on.
    app.update_state(&thread("t"), vec![log("v")], Some("b")).await.unwrap();
    let history = app.get_state_history(&thread("t"), ListOptions::default()).await.unwrap();
    let steps: Vec<i64> = history.iter().map(|s| s.metadata.as_ref().unwrap().step).collect();
    assert_eq!(steps, [1, 0]);
    let b = history[1].tasks.iter().find(|t| t.name == "b").unwrap();
    assert_eq!(b.result.as_ref().unwrap()[0].0, "log");
    assert_eq!(b.result.as_ref().unwrap()[0].1, serde_json::json!(["v"]));

    // Continuing from an update checkpoint that is the latest adds no fork checkpoint.
    let app = chain(Arc::new(InMemorySaver::new()));
    app.invoke(log("in"), &thread("t")).await.unwrap();
    let history = app.get_state_history(&thread("t"), ListOptions::default()).await.unwrap();
    let before_b = history.iter().find(|s| s.next == ["b"]).unwrap().config.clone().unwrap();
    let at = thread("t").with_configurable("checkpoint_id", before_b.checkpoint_id.clone().unwrap());
    let branch = app.update_state(&at, vec![log("fix")], Some("a")).await.unwrap();
    let branch_step = app.get_state(&thread("t")).await.unwrap().metadata.unwrap().step;
    let at_branch = thread("t").with_configurable("checkpoint_id", branch.checkpoint_id.clone().unwrap());
    let out = app.invoke(GraphInput::Resume, &at_branch).await.unwrap();
    assert_eq!(out.value.log, ["in", "a", "fix", "b"]);
    let latest = app.get_state(&thread("t")).await.unwrap();
    assert_eq!(latest.metadata.as_ref().unwrap().step, branch_step + 1, "no extra fork step");
    assert_eq!(latest.parent_config.unwrap().checkpoint_id, branch.checkpoint_id);
    let _ = first;

    // A copy is a sibling of the copied checkpoint.
    let copied = app
        .get_state(&thread("t").with_configurable("checkpoint_id", before_b.checkpoint_id.clone().unwrap()))
        .await
        .unwrap();
    let copy = app.update_state(&at, vec![], Some("__copy__")).await.unwrap();
    let copy = app
        .get_state(&thread("t").with_configurable("checkpoint_id", copy.checkpoint_id.unwrap()))
        .await
        .unwrap();
    assert_eq!(copy.metadata.as_ref().unwrap().source, CheckpointSource::Fork);
    assert_eq!(copy.parent_config, copied.parent_config);
    assert_eq!(copy.next, ["b"]);
}

#[tokio::test]
async fn an_update_as_a_routed_node_replaces_the_pending_tasks_and_history_can_address_one_checkpoint() {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("a", |_: Doc| log("a"));
    g.add_node("yes", |_: Doc| log("yes"));
    g.add_node("no", |_: Doc| log("no"));
    g.add_edge(START, "a");
    g.add_conditional_edges("a", |s: &Doc| if s.x > 0 { "yes" } else { "no" }, None);
    let app = g
        .compile_with(
            CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new())).interrupt_after(["a"]),
        )
        .unwrap();
    app.invoke(Doc::update(), &thread("t")).await.unwrap();
    assert_eq!(app.get_state(&thread("t")).await.unwrap().next, ["no"]);
    app.update_state(&thread("t"), vec![DocUpdate::new().x(1)], Some("a")).await.unwrap();
    assert_eq!(app.get_state(&thread("t")).await.unwrap().next, ["yes"], "the old pending task is gone");
    let out = app.invoke(GraphInput::Resume, &thread("t")).await.unwrap();
    assert_eq!(out.value.log, ["a", "yes"]);

    let history = app.get_state_history(&thread("t"), ListOptions::default()).await.unwrap();
    let one = history[2].config.clone().unwrap();
    let at = thread("t").with_configurable("checkpoint_id", one.checkpoint_id.clone().unwrap());
    let only = app.get_state_history(&at, ListOptions::default()).await.unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].config.as_ref().unwrap().checkpoint_id, one.checkpoint_id);
}
