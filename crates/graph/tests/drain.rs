//! Draining a run ([`RunControl::request_drain`]): it stops at the next superstep boundary with
//! `GraphError::Drained`, its checkpoint saved in every durability, and resumes without running a finished
//! step again.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use weft_graph::checkpoint::InMemorySaver;
use weft_graph::{
    CompileConfig, CompiledGraph, Durability, END, GraphError, GraphInput, RunControl, RunOptions, START,
    State, StateGraph,
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

fn controlled(id: &str, control: &RunControl) -> RunnableConfig {
    let mut config = thread(id);
    control.attach(&mut config);
    config
}

/// Every node run, in order.
type Calls = Arc<Mutex<Vec<String>>>;

/// `a` → `b` → `c`; `drain_in` requests a drain of `control` while it runs.
fn chain(calls: &Calls, control: &RunControl, drain_in: &'static str) -> CompiledGraph<Doc> {
    let mut g = StateGraph::<Doc>::new();
    for name in ["a", "b", "c"] {
        let calls = Arc::clone(calls);
        let control = control.clone();
        g.add_node(name, move |_: Doc| {
            calls.lock().unwrap().push(name.to_owned());
            if name == drain_in {
                control.request_drain();
            }
            DocUpdate::new().log(vec![name.to_owned()])
        });
    }
    g.add_edge(START, "a");
    g.add_edge("a", "b");
    g.add_edge("b", "c");
    g.add_edge("c", END);
    g.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap()
}

async fn drained_mid_run_resumes_without_rerunning(durability: Durability) {
    let calls = Calls::default();
    let control = RunControl::new();
    let app = chain(&calls, &control, "a");
    let options = RunOptions { durability, ..RunOptions::default() };
    let out =
        app.invoke_with(DocUpdate::new().log(vec!["in".into()]), &controlled("t", &control), options).await;
    // Step 0 is `__start__` (the input), 1 is `a`.
    assert!(matches!(out, Err(GraphError::Drained { next_step: 2 })), "{durability:?}: {out:?}");
    assert_eq!(*calls.lock().unwrap(), ["a"], "{durability:?}: `b` never started");
    let saved = app.get_state(&thread("t")).await.unwrap();
    assert_eq!(saved.values.log, ["in", "a"], "{durability:?}: the finished step is saved");
    assert_eq!(saved.next, ["b"], "{durability:?}");
    let done = app.invoke(GraphInput::Resume, &thread("t")).await.unwrap();
    assert_eq!(done.value.log, ["in", "a", "b", "c"], "{durability:?}");
    assert_eq!(*calls.lock().unwrap(), ["a", "b", "c"], "{durability:?}: no step ran twice");
}

#[tokio::test]
async fn a_drained_run_stops_at_the_boundary_saved_in_every_durability() {
    for durability in [Durability::Sync, Durability::Async, Durability::Exit] {
        drained_mid_run_resumes_without_rerunning(durability).await;
    }
}

#[tokio::test]
async fn a_drain_requested_before_the_run_saves_its_input_and_runs_nothing() {
    let calls = Calls::default();
    let control = RunControl::new();
    control.request_drain();
    assert!(control.is_drain_requested());
    let app = chain(&calls, &control, "none");
    let out = app.invoke(DocUpdate::new().log(vec!["in".into()]), &controlled("t", &control)).await;
    assert!(matches!(out, Err(GraphError::Drained { next_step: 0 })), "{out:?}");
    assert!(calls.lock().unwrap().is_empty());
    assert_eq!(app.get_state(&thread("t")).await.unwrap().next, ["__start__"]);
    let done = app.invoke(GraphInput::Resume, &thread("t")).await.unwrap();
    assert_eq!(done.value.log, ["in", "a", "b", "c"]);
}

#[tokio::test]
async fn a_run_with_no_step_left_ends_as_usual() {
    let calls = Calls::default();
    let control = RunControl::new();
    let app = chain(&calls, &control, "c");
    let out = app.invoke(DocUpdate::new(), &controlled("t", &control)).await.unwrap();
    assert_eq!(out.value.log, ["a", "b", "c"]);
}

#[tokio::test]
async fn runs_without_the_control_are_not_drained() {
    let calls = Calls::default();
    let control = RunControl::new();
    control.request_drain();
    let app = chain(&calls, &control, "none");
    let out = app.invoke(DocUpdate::new(), &thread("t")).await.unwrap();
    assert_eq!(out.value.log, ["a", "b", "c"]);
}

#[tokio::test]
async fn a_step_in_flight_finishes_all_its_tasks_and_its_subgraphs() {
    let calls = Calls::default();
    let control = RunControl::new();
    // The subgraph's first node asks for the drain: the subgraph still runs to its end inside the step.
    let sub = chain(&calls, &control, "a");
    let mut g = StateGraph::<Doc>::new();
    g.add_node("sub", sub);
    let side_calls = Arc::clone(&calls);
    g.add_node("side", move |_: Doc| {
        side_calls.lock().unwrap().push("side".into());
        DocUpdate::new().log(vec!["side".into()])
    });
    g.add_node("after", |_: Doc| DocUpdate::new().log(vec!["after".into()]));
    g.add_edge(START, "sub");
    g.add_edge(START, "side");
    g.add_edge("sub", "after");
    g.add_edge("after", END);
    let app = g.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap();
    let out = app.invoke(DocUpdate::new(), &controlled("p", &control)).await;
    assert!(matches!(out, Err(GraphError::Drained { next_step: 2 })), "{out:?}");
    let mut ran = calls.lock().unwrap().clone();
    ran.sort();
    assert_eq!(ran, ["a", "b", "c", "side"]);
    let saved = app.get_state(&thread("p")).await.unwrap();
    assert_eq!(saved.next, ["after"]);
    let done = app.invoke(GraphInput::Resume, &thread("p")).await.unwrap();
    assert!(done.value.log.ends_with(&["after".to_owned()]), "{:?}", done.value.log);
    assert_eq!(calls.lock().unwrap().len(), 4, "nothing ran again");
}
