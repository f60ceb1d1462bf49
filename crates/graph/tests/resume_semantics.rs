//! Resumes and interrupts as LangGraph 1.x has them: partial resumes, updates given with a resume,
//! durability `exit`, the recursion limit of a resumed run, bad resume ids.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::{Map, json};
use weft_graph::checkpoint::InMemorySaver;
use weft_graph::{Command, CompileConfig, CompiledGraph, START, State, StateGraph};
use weft_runnable_core::RunnableConfig;

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Doc {
    #[state(append)]
    log: Vec<String>,
    note: Option<String>,
}

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

fn log(s: &str) -> DocUpdate {
    DocUpdate::new().log(vec![s.to_owned()])
}

fn by_id(id: &str, value: &str) -> Map<String, serde_json::Value> {
    let mut map = Map::new();
    map.insert(id.to_owned(), json!(value));
    map
}

/// `a` and `b` each ask a question in the first step; `c` waits for both.
fn two_askers(runs: Arc<AtomicUsize>) -> CompiledGraph<Doc> {
    let mut g = StateGraph::<Doc>::new();
    for name in ["a", "b"] {
        let runs = Arc::clone(&runs);
        g.add_node(name, move |_: Doc, rt: &weft_graph::Runtime| -> weft_runnable_core::Result<DocUpdate> {
            runs.fetch_add(1, Ordering::SeqCst);
            let v: String = rt.interrupt(format!("q{name}"))?;
            Ok(log(&format!("{name}:{v}")))
        });
        g.add_edge(START, name);
    }
    g.add_node("c", |_: Doc| log("c"));
    g.add_waiting_edge(["a", "b"], "c");
    g.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap()
}

#[tokio::test]
async fn resuming_one_of_two_interrupts_keeps_the_finished_write_pending() {
    let runs = Arc::new(AtomicUsize::new(0));
    let app = two_askers(Arc::clone(&runs));
    let first = app.invoke(Doc::update(), &thread("t")).await.unwrap();
    let qa = first.interrupts.iter().find(|i| i.value == "qa").unwrap().id.clone();
    let qb = first.interrupts.iter().find(|i| i.value == "qb").unwrap().id.clone();

    let second = app.invoke(Command::<Doc>::resume_by_id(by_id(&qa, "A")), &thread("t")).await.unwrap();
    assert_eq!(second.value.log, ["a:A"], "the finished task's write is in the result");
    assert_eq!(second.interrupts.len(), 1);
    assert_eq!(second.interrupts[0].id, qb);

    let state = app.get_state(&thread("t")).await.unwrap();
    assert_eq!(state.values.log, ["a:A"]);
    assert_eq!(state.next, ["b"]);
    let a = state.tasks.iter().find(|t| t.name == "a").unwrap();
    assert!(a.interrupts.is_empty(), "a's answered interrupt is gone: {:?}", a.interrupts);
    assert!(a.result.is_some());
    assert_eq!(state.interrupts.len(), 1);
    assert_eq!(state.interrupts[0].id, qb);

    let runs_before = runs.load(Ordering::SeqCst);
    let done = app.invoke(Command::<Doc>::resume_by_id(by_id(&qb, "B")), &thread("t")).await.unwrap();
    assert_eq!(done.value.log, ["a:A", "b:B", "c"]);
    assert!(done.interrupts.is_empty());
    assert_eq!(runs.load(Ordering::SeqCst) - runs_before, 1, "only b runs again");
}

/// `ask` asks twice; `after` runs once it is done.
fn asks_twice(durability_runs: Arc<AtomicUsize>) -> CompiledGraph<Doc> {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("ask", move |_: Doc, rt: &weft_graph::Runtime| -> weft_runnable_core::Result<DocUpdate> {
        durability_runs.fetch_add(1, Ordering::SeqCst);
        let first: String = rt.interrupt("first?")?;
        let second: String = rt.interrupt("second?")?;
        Ok(log(&format!("{first}+{second}")))
    });
    g.add_edge(START, "ask");
    g.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap()
}

#[tokio::test]
async fn an_update_given_with_a_resume_holds_when_the_node_pauses_again() {
    let app = asks_twice(Arc::new(AtomicUsize::new(0)));
    app.invoke(Doc::update(), &thread("t")).await.unwrap();
    let resume = Command::<Doc>::resume("one").update(DocUpdate::new().note(Some("kept".to_owned())));
    let paused = app.invoke(resume, &thread("t")).await.unwrap();
    assert_eq!(paused.interrupts[0].value, "second?");
    assert_eq!(paused.value.note.as_deref(), Some("kept"), "the result shows the update");
    let state = app.get_state(&thread("t")).await.unwrap();
    assert_eq!(state.values.note.as_deref(), Some("kept"), "get_state shows the saved update");
    assert_eq!(state.next, ["ask"]);

    let done = app.invoke(Command::<Doc>::resume("two"), &thread("t")).await.unwrap();
    assert_eq!(done.value.note.as_deref(), Some("kept"), "the update survives to the end");
    assert_eq!(done.value.log, ["one+two"]);
    let state = app.get_state(&thread("t")).await.unwrap();
    assert_eq!(state.values.note.as_deref(), Some("kept"));
    assert!(state.next.is_empty());
}

#[tokio::test]
async fn exit_durability_keeps_the_finished_tasks_of_an_interrupted_step() {
    let runs = Arc::new(AtomicUsize::new(0));
    let app = two_askers(Arc::clone(&runs));
    let exit = || weft_graph::RunOptions { durability: weft_graph::Durability::Exit, ..Default::default() };
    let first = app.invoke_with(Doc::update(), &thread("t"), exit()).await.unwrap();
    let qa = first.interrupts.iter().find(|i| i.value == "qa").unwrap().id.clone();
    let qb = first.interrupts.iter().find(|i| i.value == "qb").unwrap().id.clone();
    assert_eq!(app.get_state(&thread("t")).await.unwrap().next, ["a", "b"]);

    let second =
        app.invoke_with(Command::<Doc>::resume_by_id(by_id(&qa, "A")), &thread("t"), exit()).await.unwrap();
    assert_eq!(second.interrupts.len(), 1);
    let state = app.get_state(&thread("t")).await.unwrap();
    assert_eq!(state.next, ["b"], "a finished and was saved");
    assert_eq!(state.values.log, ["a:A"]);

    let runs_before = runs.load(Ordering::SeqCst);
    let done =
        app.invoke_with(Command::<Doc>::resume_by_id(by_id(&qb, "B")), &thread("t"), exit()).await.unwrap();
    assert_eq!(done.value.log, ["a:A", "b:B", "c"]);
    assert_eq!(runs.load(Ordering::SeqCst) - runs_before, 1, "a does not run again");
}
