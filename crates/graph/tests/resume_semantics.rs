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

/// Two compiled subgraph nodes that each ask once, in the same step.
fn two_asking_subgraphs(runs: Arc<AtomicUsize>) -> CompiledGraph<Doc> {
    let mut parent = StateGraph::<Doc>::new();
    for name in ["x", "y"] {
        let mut child = StateGraph::<Doc>::new();
        let runs = Arc::clone(&runs);
        child.add_node(
            "ask",
            move |_: Doc, rt: &weft_graph::Runtime| -> weft_runnable_core::Result<DocUpdate> {
                runs.fetch_add(1, Ordering::SeqCst);
                let v: String = rt.interrupt(format!("q{name}"))?;
                Ok(log(&format!("{name}:{v}")))
            },
        );
        child.add_edge(START, "ask");
        parent.add_node(name, child.compile().unwrap());
        parent.add_edge(START, name);
    }
    parent.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap()
}

#[tokio::test]
async fn a_finished_subgraph_does_not_run_again_when_its_sibling_is_resumed() {
    let runs = Arc::new(AtomicUsize::new(0));
    let app = two_asking_subgraphs(Arc::clone(&runs));
    let first = app.invoke(Doc::update(), &thread("t")).await.unwrap();
    assert_eq!(first.interrupts.len(), 2);
    let qx = first.interrupts.iter().find(|i| i.value == "qx").unwrap().id.clone();
    let qy = first.interrupts.iter().find(|i| i.value == "qy").unwrap().id.clone();

    let second = app.invoke(Command::<Doc>::resume_by_id(by_id(&qx, "X")), &thread("t")).await.unwrap();
    assert_eq!(second.interrupts.len(), 1);
    assert_eq!(second.interrupts[0].id, qy, "y's interrupt keeps its id");
    assert_eq!(second.value.log, ["x:X"]);
    assert_eq!(app.get_state(&thread("t")).await.unwrap().next, ["y"]);

    let runs_before = runs.load(Ordering::SeqCst);
    let done = app.invoke(Command::<Doc>::resume_by_id(by_id(&qy, "Y")), &thread("t")).await.unwrap();
    assert!(done.interrupts.is_empty(), "{:?}", done.interrupts);
    assert_eq!(done.value.log, ["x:X", "y:Y"]);
    assert_eq!(runs.load(Ordering::SeqCst) - runs_before, 1, "only y's subgraph runs again");
}

#[tokio::test]
async fn resuming_an_unknown_interrupt_id_is_an_error_naming_it_and_the_pending_ones() {
    let app = two_askers(Arc::new(AtomicUsize::new(0)));
    let first = app.invoke(Doc::update(), &thread("t")).await.unwrap();
    let mut pending: Vec<String> = first.interrupts.iter().map(|i| i.id.clone()).collect();
    pending.sort();

    let err = app.invoke(Command::<Doc>::resume_by_id(by_id("nope", "x")), &thread("t")).await.unwrap_err();
    match &err {
        weft_graph::GraphError::UnknownInterrupt { ids, pending: listed } => {
            assert_eq!(ids, &["nope"]);
            assert_eq!(listed, &pending, "pending ids sorted");
        }
        other => panic!("unexpected error: {other}"),
    }
    assert!(err.to_string().contains("nope"), "{err}");
    assert_eq!(app.get_state(&thread("t")).await.unwrap().next, ["a", "b"], "nothing ran");

    let err = app.invoke(Command::<Doc>::resume_by_id(Map::new()), &thread("t")).await.unwrap_err();
    assert!(matches!(err, weft_graph::GraphError::UnknownInterrupt { .. }), "{err}");

    // The ambiguous-resume error lists the pending ids in a stable (sorted) order.
    let err = app.invoke(Command::<Doc>::resume("x"), &thread("t")).await.unwrap_err();
    match err {
        weft_graph::GraphError::AmbiguousResume(ids) => assert_eq!(ids, pending),
        other => panic!("unexpected error: {other}"),
    }
}

#[tokio::test]
async fn a_command_to_the_parent_graph_as_root_input_is_the_no_parent_error() {
    let app = two_askers(Arc::new(AtomicUsize::new(0)));
    let cmd = Command::<Doc>::new().update(log("x")).to_parent();
    let err = app.invoke(cmd, &thread("t")).await.unwrap_err();
    assert!(matches!(err, weft_graph::GraphError::NoParentGraph), "{err}");
}

/// a -> b -> c, each appending its name; `a` asks first when `ask` is set.
fn chain(ask: bool, after_a: bool) -> CompiledGraph<Doc> {
    chain_with(ask, after_a, false)
}

fn chain_with(ask: bool, after_a: bool, before_b: bool) -> CompiledGraph<Doc> {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("a", move |_: Doc, rt: &weft_graph::Runtime| -> weft_runnable_core::Result<DocUpdate> {
        if ask {
            let _: String = rt.interrupt("go?")?;
        }
        Ok(log("a"))
    });
    g.add_node("b", |_: Doc| log("b"));
    g.add_node("c", |_: Doc| log("c"));
    g.add_edge(START, "a");
    g.add_edge("a", "b");
    g.add_edge("b", "c");
    let config = CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()));
    let config = if after_a { config.interrupt_after(["a"]) } else { config };
    let config = if before_b { config.interrupt_before(["b"]) } else { config };
    g.compile_with(config).unwrap()
}

#[tokio::test]
async fn a_resumed_run_counts_the_recursion_limit_from_the_step_it_resumes() {
    // Resumed after a static breakpoint on `a`: b and c fit in a limit of 1.
    let app = chain(false, true);
    app.invoke(Doc::update(), &thread("t")).await.unwrap();
    let limited = thread("t").with_recursion_limit(1);
    let out = app.invoke(weft_graph::GraphInput::Resume, &limited).await.unwrap();
    assert_eq!(out.value.log, ["a", "b", "c"]);

    // Resumed inside `a`: a limit of 2 runs a, b and c; a limit of 1 runs all three, then stops.
    for limit in [2, 1] {
        let app = chain(true, false);
        app.invoke(Doc::update(), &thread("t")).await.unwrap();
        let limited = thread("t").with_recursion_limit(limit);
        let result = app.invoke(Command::<Doc>::resume("yes"), &limited).await;
        let state = app.get_state(&thread("t")).await.unwrap();
        assert_eq!(state.values.log, ["a", "b", "c"], "limit {limit}");
        match limit {
            2 => assert!(result.is_ok(), "{result:?}"),
            _ => assert!(matches!(result, Err(weft_graph::GraphError::RecursionLimit { .. })), "{result:?}"),
        }
    }
}

#[tokio::test]
async fn an_update_at_a_static_breakpoint_continues_past_it() {
    for (after_a, before_b) in [(true, false), (false, true)] {
        let app = chain_with(false, after_a, before_b);
        let paused = app.invoke(Doc::update(), &thread("t")).await.unwrap();
        assert_eq!(paused.value.log, ["a"]);
        assert_eq!(app.get_state(&thread("t")).await.unwrap().next, ["b"]);
        let cmd = Command::<Doc>::new().update(DocUpdate::new().note(Some("n".to_owned())));
        let out = app.invoke(cmd, &thread("t")).await.unwrap();
        assert_eq!(
            out.value.log,
            ["a", "b", "c"],
            "the run goes on past the breakpoint ({after_a}, {before_b})"
        );
        assert_eq!(out.value.note.as_deref(), Some("n"));
    }
}

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Notes {
    #[state(append)]
    log: Vec<String>,
    #[state(append)]
    notes: Vec<String>,
}

#[tokio::test]
async fn sent_subgraphs_pause_and_resume_one_at_a_time() {
    let mut child = StateGraph::<Notes>::new();
    child.add_node("one", |s: Notes, rt: &weft_graph::Runtime| -> weft_runnable_core::Result<NotesUpdate> {
        let first = s.log.first().cloned().unwrap_or_default();
        let answer: String = rt.interrupt(format!("{first}?"))?;
        Ok(NotesUpdate::new().log(vec![format!("{first}:{answer}")]))
    });
    child.add_edge(START, "one");
    let mut g = StateGraph::<Doc>::new();
    g.add_node("sub", child.compile().unwrap());
    g.set_conditional_entry_point(
        |_: &Doc| {
            ["x", "y"]
                .iter()
                .map(|t| weft_graph::Send::new("sub", serde_json::json!({"log": [t]})))
                .collect::<Vec<_>>()
        },
        None,
    );
    let app = g.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap();
    let first = app.invoke(Doc::update(), &thread("t")).await.unwrap();
    let values: Vec<&serde_json::Value> = first.interrupts.iter().map(|i| &i.value).collect();
    assert_eq!(values, ["x?", "y?"], "each packet's subgraph asks, in send order");
    let (x, y) = (first.interrupts[0].id.clone(), first.interrupts[1].id.clone());

    let second = app.invoke(Command::<Doc>::resume_by_id(by_id(&x, "A")), &thread("t")).await.unwrap();
    assert_eq!(second.interrupts.len(), 1);
    assert_eq!(second.interrupts[0].id, y);
    assert_eq!(second.value.log, ["x", "x:A"], "the subgraph's channels go back by name");
    let done = app.invoke(Command::<Doc>::resume_by_id(by_id(&y, "B")), &thread("t")).await.unwrap();
    assert!(done.interrupts.is_empty());
    assert_eq!(done.value.log, ["x", "x:A", "y", "y:B"]);
}

#[tokio::test]
async fn a_resume_finishing_a_lone_task_saves_both_answers_with_the_resumed_checkpoint() {
    let saver = Arc::new(InMemorySaver::new());
    let mut g = StateGraph::<Doc>::new();
    g.add_node("ask", |_: Doc, rt: &weft_graph::Runtime| -> weft_runnable_core::Result<DocUpdate> {
        let answer: String = rt.interrupt("name?")?;
        Ok(log(&answer))
    });
    g.add_edge(START, "ask");
    let app = g.compile_with(CompileConfig::new().checkpointer(saver.clone())).unwrap();
    app.invoke(log("s"), &thread("t")).await.unwrap();
    let paused = app.get_state(&thread("t")).await.unwrap().config.unwrap();
    let out = app.invoke(Command::resume("ada"), &thread("t")).await.unwrap();
    assert_eq!(out.value.log, vec!["s", "ada"]);
    // As LangGraph: the resumed checkpoint holds the command's answer (the null task's) and the answers
    // the task used, beside the task's writes.
    let tuple = weft_graph::Checkpointer::get_tuple(&*saver, &paused).await.unwrap().unwrap();
    let resumes: Vec<(bool, serde_json::Value)> = tuple
        .pending_writes
        .iter()
        .filter(|w| w.channel == "__resume__")
        .map(|w| (w.task_id == weft_graph::checkpoint::special::NULL_TASK_ID, w.value.clone()))
        .collect();
    assert_eq!(resumes.len(), 2, "{resumes:?}");
    assert!(resumes.contains(&(true, json!("ada"))), "{resumes:?}");
    assert!(resumes.contains(&(false, json!(["ada"]))), "{resumes:?}");
    assert!(tuple.pending_writes.iter().any(|w| w.channel == "log" && w.value == json!(["ada"])));
}

#[tokio::test]
async fn a_resume_finishing_one_of_two_tasks_saves_its_answers_with_its_writes() {
    let saver = Arc::new(InMemorySaver::new());
    let mut g = StateGraph::<Doc>::new();
    g.add_node("ask", |_: Doc, rt: &weft_graph::Runtime| -> weft_runnable_core::Result<DocUpdate> {
        let answer: String = rt.interrupt("name?")?;
        Ok(log(&answer))
    });
    g.add_node("other", |_: Doc| log("other"));
    g.add_edge(START, "ask");
    g.add_edge(START, "other");
    let app = g.compile_with(CompileConfig::new().checkpointer(saver.clone())).unwrap();
    app.invoke(log("s"), &thread("t")).await.unwrap();
    let paused = app.get_state(&thread("t")).await.unwrap().config.unwrap();
    let out = app.invoke(Command::resume("ada"), &thread("t")).await.unwrap();
    assert!(out.value.log.contains(&"ada".to_owned()), "{:?}", out.value.log);
    // A step of two tasks saves each task's writes as it finishes: the resumed task's carry the answers
    // it used, as the lone task's do.
    let tuple = weft_graph::Checkpointer::get_tuple(&*saver, &paused).await.unwrap().unwrap();
    let used: Vec<serde_json::Value> = tuple
        .pending_writes
        .iter()
        .filter(|w| w.channel == "__resume__" && w.task_id != weft_graph::checkpoint::special::NULL_TASK_ID)
        .map(|w| w.value.clone())
        .collect();
    assert_eq!(used, [json!(["ada"])], "{:?}", tuple.pending_writes);
}

/// `ask` asks one question, then fails the first time it has an answer (a crash after the resume).
fn asks_then_fails_once(fails: Arc<AtomicUsize>) -> CompiledGraph<Doc> {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("ask", move |_: Doc, rt: &weft_graph::Runtime| -> weft_runnable_core::Result<DocUpdate> {
        let v: String = rt.interrupt("q")?;
        if fails.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(weft_runnable_core::Error::msg("lost the connection"));
        }
        Ok(log(&format!("ask:{v}")))
    });
    g.add_edge(START, "ask");
    g.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap()
}

#[tokio::test]
async fn a_run_without_input_reuses_the_answer_a_failed_resume_saved() {
    let app = asks_then_fails_once(Arc::new(AtomicUsize::new(0)));
    let first = app.invoke(Doc::update(), &thread("t")).await.unwrap();
    assert_eq!(first.interrupts.len(), 1);
    let err = app.invoke(Command::<Doc>::resume(json!("yes")), &thread("t")).await.unwrap_err();
    assert!(err.to_string().contains("lost the connection"), "{err}");
    // The answer is saved on the checkpoint: running again without input answers the question with it.
    let done = app.invoke(weft_graph::GraphInput::Resume, &thread("t")).await.unwrap();
    assert!(done.interrupts.is_empty(), "{:?}", done.interrupts);
    assert_eq!(done.value.log, ["ask:yes"]);
}

#[tokio::test]
async fn a_run_without_input_answers_the_next_question_with_the_saved_answer() {
    // LangGraph: the null task's answer is read again from the checkpoint by every run that resumes it;
    // the first question with no answer of its own takes it.
    let mut g = StateGraph::<Doc>::new();
    g.add_node("ask", |_: Doc, rt: &weft_graph::Runtime| -> weft_runnable_core::Result<DocUpdate> {
        let a: String = rt.interrupt("first")?;
        let b: String = rt.interrupt("second")?;
        Ok(log(&format!("{a}+{b}")))
    });
    g.add_edge(START, "ask");
    let app = g.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap();
    app.invoke(Doc::update(), &thread("t")).await.unwrap();
    let second = app.invoke(Command::<Doc>::resume(json!("x")), &thread("t")).await.unwrap();
    assert_eq!(second.interrupts.len(), 1);
    assert_eq!(second.interrupts[0].value, "second");
    let done = app.invoke(weft_graph::GraphInput::Resume, &thread("t")).await.unwrap();
    assert!(done.interrupts.is_empty(), "{:?}", done.interrupts);
    assert_eq!(done.value.log, ["x+x"]);
}

#[tokio::test]
async fn a_run_without_input_and_no_saved_answer_asks_again() {
    let app = asks_then_fails_once(Arc::new(AtomicUsize::new(0)));
    app.invoke(Doc::update(), &thread("t")).await.unwrap();
    let again = app.invoke(weft_graph::GraphInput::Resume, &thread("t")).await.unwrap();
    assert_eq!(again.interrupts.len(), 1);
    assert_eq!(again.interrupts[0].value, "q");
    assert!(again.value.log.is_empty());
}
