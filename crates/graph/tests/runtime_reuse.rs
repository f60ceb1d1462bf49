//! A node's runtime is its task's own: what one task of a loop saw (its step, its id, its interrupts)
//! never shows up in the next task of the same node, whether or not the engine fills a runtime in again.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::sync::{Arc, Mutex};

use common::{Counter, CounterUpdate};
use weft_graph::checkpoint::InMemorySaver;
use weft_graph::{CompileConfig, CompiledGraph, END, Runtime, START, StateGraph, types::Command};
use weft_runnable_core::RunnableConfig;

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

/// `inc` looping until `count` reaches `limit`; `node` runs in it before the count goes up.
fn looping(
    limit: i64,
    node: impl Fn(&Counter, &Runtime) -> weft_runnable_core::Result<()> + Send + Sync + 'static,
) -> CompiledGraph<Counter> {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("inc", move |s: Counter, rt: &Runtime| -> weft_runnable_core::Result<CounterUpdate> {
        node(&s, rt)?;
        Ok(CounterUpdate::count(s.count + 1))
    });
    g.add_edge(START, "inc");
    g.add_conditional_edges(
        "inc",
        move |s: &Counter| if s.count < limit { "inc" } else { END },
        ["inc", END],
    );
    g.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap()
}

#[tokio::test]
async fn each_task_of_a_loop_sees_its_own_step_id_and_checkpoint() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let app = looping(5, move |_, rt| {
        let info = rt.execution_info();
        log.lock().unwrap().push((info.step, info.task_id.clone(), info.checkpoint_id.clone(), info.attempt));
        Ok(())
    });
    app.invoke(CounterUpdate::count(0), &thread("t")).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    let steps: Vec<i64> = seen.iter().map(|s| s.0).collect();
    assert_eq!(steps, [1, 2, 3, 4, 5]);
    let mut ids: Vec<&String> = seen.iter().map(|s| &s.1).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 5, "a task id per task: {seen:?}");
    let checkpoints: std::collections::BTreeSet<_> = seen.iter().map(|s| s.2.clone()).collect();
    assert_eq!(checkpoints.len(), 5, "each task planned from the checkpoint before it: {seen:?}");
    assert!(seen.iter().all(|s| s.3 == 1), "first attempts: {seen:?}");
}

#[tokio::test]
async fn a_runtime_a_node_keeps_still_tells_its_own_task() {
    let kept = Arc::new(Mutex::new(Vec::<Runtime>::new()));
    let keep = Arc::clone(&kept);
    let app = looping(4, move |_, rt| {
        keep.lock().unwrap().push(rt.clone());
        Ok(())
    });
    app.invoke(CounterUpdate::count(0), &thread("t")).await.unwrap();
    let kept = kept.lock().unwrap();
    let steps: Vec<i64> = kept.iter().map(|rt| rt.execution_info().step).collect();
    assert_eq!(steps, [1, 2, 3, 4], "a kept runtime is never filled in for a later task");
}

#[tokio::test]
async fn an_answered_interrupt_does_not_answer_the_next_tasks() {
    let app = looping(3, |_, rt| {
        let _: String = rt.interrupt("again?")?;
        Ok(())
    });
    let config = thread("t");
    let out = app.invoke(CounterUpdate::count(0), &config).await.unwrap();
    assert_eq!(out.interrupts.len(), 1, "the first task pauses");
    for round in 1..=3 {
        let out = app.invoke(Command::resume("yes"), &config).await.unwrap();
        assert_eq!(out.value.count, round, "the answer lets one task through");
        let pauses = if round < 3 { 1 } else { 0 };
        assert_eq!(out.interrupts.len(), pauses, "round {round}: the next task asks again");
    }
}
