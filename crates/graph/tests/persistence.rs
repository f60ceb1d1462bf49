//! Checkpoints, interrupts and resumes, failed steps, time travel, update_state.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::{Map, json};
use weft_graph::checkpoint::{InMemorySaver, ListOptions};
use weft_graph::{
    Command, CompileConfig, CompiledGraph, Durability, END, GraphError, GraphInput, RunOptions, Runtime,
    START, State, StateGraph,
};
use weft_runnable_core::{Error, RunnableConfig};

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Doc {
    #[state(append)]
    log: Vec<String>,
    answer: Option<String>,
}

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

fn saver() -> Arc<InMemorySaver> {
    Arc::new(InMemorySaver::new())
}

fn log(s: &str) -> DocUpdate {
    DocUpdate::new().log(vec![s.to_owned()])
}

fn chain3(saver: Arc<InMemorySaver>) -> CompiledGraph<Doc> {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("a", |_: Doc| log("a"));
    g.add_node("b", |_: Doc| log("b"));
    g.add_node("c", |_: Doc| log("c"));
    g.add_edge(START, "a");
    g.add_edge("a", "b");
    g.add_edge("b", "c");
    g.add_edge("c", END);
    g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

#[tokio::test]
async fn every_superstep_and_the_input_make_a_checkpoint() {
    let app = chain3(saver());
    let out = app.invoke(log("in"), &thread("t1")).await.unwrap();
    assert_eq!(out.value.log, vec!["in", "a", "b", "c"]);
    let history = app.get_state_history(&thread("t1"), ListOptions::default()).await.unwrap();
    let steps: Vec<i64> = history.iter().map(|s| s.metadata.as_ref().unwrap().step).collect();
    assert_eq!(steps, vec![3, 2, 1, 0, -1]);
    let sources: Vec<String> = history
        .iter()
        .map(|s| serde_json::to_value(s.metadata.as_ref().unwrap().source).unwrap().to_string())
        .collect();
    assert_eq!(sources, vec!["\"loop\"", "\"loop\"", "\"loop\"", "\"loop\"", "\"input\""]);
    assert_eq!(history[0].values.log, vec!["in", "a", "b", "c"]);
    assert_eq!(history[3].next, vec!["a"]);
    assert!(history[0].next.is_empty());
}

#[tokio::test]
async fn exit_durability_saves_only_the_final_checkpoint() {
    let app = chain3(saver());
    let options = RunOptions { durability: Durability::Exit, ..RunOptions::default() };
    app.invoke_with(log("in"), &thread("t1"), options).await.unwrap();
    let history = app.get_state_history(&thread("t1"), ListOptions::default()).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].values.log, vec!["in", "a", "b", "c"]);
}

#[tokio::test]
async fn a_second_invoke_continues_the_thread() {
    let app = chain3(saver());
    app.invoke(log("1"), &thread("t")).await.unwrap();
    let out = app.invoke(log("2"), &thread("t")).await.unwrap();
    assert_eq!(out.value.log, vec!["1", "a", "b", "c", "2", "a", "b", "c"]);
    let state = app.get_state(&thread("t")).await.unwrap();
    assert_eq!(state.metadata.unwrap().step, 8);
}

#[tokio::test]
async fn missing_thread_id_is_an_error() {
    let err = chain3(saver()).invoke(log("x"), &RunnableConfig::default()).await.unwrap_err();
    assert!(matches!(err, GraphError::MissingThreadId), "{err}");
    assert!(err.to_string().contains("thread_id"), "{err}");
}

fn asking_graph(saver: Arc<InMemorySaver>, runs: Arc<AtomicUsize>) -> CompiledGraph<Doc> {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("ask", move |_: Doc, rt: &Runtime| -> weft_runnable_core::Result<DocUpdate> {
        runs.fetch_add(1, Ordering::SeqCst);
        let first: String = rt.interrupt("first?")?;
        let second: String = rt.interrupt(json!({"question": "second?"}))?;
        Ok(DocUpdate::new().answer(format!("{first}+{second}")))
    });
    g.add_node("after", |_: Doc| log("after"));
    g.add_edge(START, "ask");
    g.add_edge("ask", "after");
    g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

#[tokio::test]
async fn interrupt_pauses_and_each_resume_answers_the_next_interrupt() {
    let runs = Arc::new(AtomicUsize::new(0));
    let app = asking_graph(saver(), Arc::clone(&runs));
    let out = app.invoke(log("start"), &thread("t")).await.unwrap();
    assert_eq!(out.interrupts.len(), 1);
    assert_eq!(out.interrupts[0].value, json!("first?"));
    let first_id = out.interrupts[0].id.clone();
    let snapshot = app.get_state(&thread("t")).await.unwrap();
    assert_eq!(snapshot.next, vec!["ask"]);
    assert_eq!(snapshot.interrupts.len(), 1);

    let out = app.invoke(Command::<Doc>::resume("one"), &thread("t")).await.unwrap();
    assert_eq!(out.interrupts.len(), 1);
    assert_eq!(out.interrupts[0].value, json!({"question": "second?"}));
    assert_ne!(out.interrupts[0].id, first_id, "each interrupt has its own id");

    let out = app.invoke(Command::<Doc>::resume("two"), &thread("t")).await.unwrap();
    assert!(out.interrupts.is_empty());
    assert_eq!(out.value.answer.as_deref(), Some("one+two"));
    assert_eq!(out.value.log, vec!["start", "after"]);
    assert_eq!(runs.load(Ordering::SeqCst), 3, "the node re-runs from the top on each resume");
}

#[tokio::test]
async fn interrupt_ids_are_stable_across_replays() {
    let a = asking_graph(saver(), Arc::new(AtomicUsize::new(0)));
    let b = asking_graph(saver(), Arc::new(AtomicUsize::new(0)));
    let ia = a.invoke(log("s"), &thread("same")).await.unwrap().interrupts;
    let ib = b.invoke(log("s"), &thread("same")).await.unwrap().interrupts;
    assert_eq!(ia[0].value, ib[0].value);
    assert_eq!(ia[0].id.len(), 32);
}

#[tokio::test]
async fn resume_without_checkpointer_is_an_error() {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("a", |_: Doc| log("a"));
    g.add_edge(START, "a");
    let app = g.compile().unwrap();
    let err = app.invoke(Command::<Doc>::resume("x"), &RunnableConfig::default()).await.unwrap_err();
    assert!(matches!(err, GraphError::ResumeWithoutCheckpointer), "{err}");
}

fn two_askers(saver: Arc<InMemorySaver>) -> CompiledGraph<Doc> {
    let mut g = StateGraph::<Doc>::new();
    for name in ["p", "q"] {
        g.add_node(name, move |_: Doc, rt: &Runtime| -> weft_runnable_core::Result<DocUpdate> {
            let v: String = rt.interrupt(format!("{name}?"))?;
            Ok(log(&format!("{name}={v}")))
        });
        g.add_edge(START, name);
    }
    g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

#[tokio::test]
async fn several_pending_interrupts_need_resume_by_id() {
    let app = two_askers(saver());
    let out = app.invoke(log("s"), &thread("t")).await.unwrap();
    assert_eq!(out.interrupts.len(), 2);
    let err = app.invoke(Command::<Doc>::resume("x"), &thread("t")).await.unwrap_err();
    assert!(matches!(err, GraphError::AmbiguousResume(_)), "{err}");

    // A partial map resumes only the named interrupt.
    let p = out.interrupts.iter().find(|i| i.value == json!("p?")).unwrap().id.clone();
    let q = out.interrupts.iter().find(|i| i.value == json!("q?")).unwrap().id.clone();
    let mut map = Map::new();
    map.insert(p, json!("1"));
    let partial = app.invoke(Command::<Doc>::resume_by_id(map), &thread("t")).await.unwrap();
    assert_eq!(partial.interrupts.len(), 1);
    assert_eq!(partial.interrupts[0].value, json!("q?"));

    let mut map = Map::new();
    map.insert(q, json!("2"));
    let done = app.invoke(Command::<Doc>::resume_by_id(map), &thread("t")).await.unwrap();
    assert!(done.interrupts.is_empty());
    assert_eq!(done.value.log, vec!["s", "p=1", "q=2"]);
}

#[tokio::test]
async fn a_failed_step_keeps_finished_writes_and_reruns_only_the_failed_task() {
    let one_runs = Arc::new(AtomicUsize::new(0));
    let two_runs = Arc::new(AtomicUsize::new(0));
    let mut g = StateGraph::<Doc>::new();
    let r1 = Arc::clone(&one_runs);
    g.add_node("one", move |_: Doc| {
        r1.fetch_add(1, Ordering::SeqCst);
        log("one")
    });
    let r2 = Arc::clone(&two_runs);
    g.add_node("two", move |_: Doc| -> weft_runnable_core::Result<DocUpdate> {
        if r2.fetch_add(1, Ordering::SeqCst) == 0 { Err(Error::msg("flaky")) } else { Ok(log("two")) }
    });
    g.add_edge(START, "one");
    g.add_edge(START, "two");
    let app = g.compile_with(CompileConfig::new().checkpointer(saver())).unwrap();
    let err = app.invoke(log("s"), &thread("t")).await.unwrap_err();
    assert!(err.to_string().contains("flaky"), "{err}");
    let live = app.get_state(&thread("t")).await.unwrap();
    assert_eq!(live.values.log, vec!["s", "one"], "the live view includes the finished sibling's writes");
    assert_eq!(live.next, vec!["two"]);
    assert!(
        live.tasks.iter().any(|t| t.name == "two" && t.error.as_deref().is_some_and(|e| e.contains("flaky")))
    );

    let out = app.invoke(GraphInput::Resume, &thread("t")).await.unwrap();
    assert_eq!(out.value.log, vec!["s", "one", "two"]);
    assert_eq!(one_runs.load(Ordering::SeqCst), 1, "the finished task is not re-run");
    assert_eq!(two_runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn interrupt_before_pauses_and_resume_continues() {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("a", |_: Doc| log("a"));
    g.add_node("b", |_: Doc| log("b"));
    g.add_edge(START, "a");
    g.add_edge("a", "b");
    let app = g.compile_with(CompileConfig::new().checkpointer(saver()).interrupt_before(["b"])).unwrap();
    let out = app.invoke(log("s"), &thread("t")).await.unwrap();
    assert_eq!(out.value.log, vec!["s", "a"]);
    assert_eq!(app.get_state(&thread("t")).await.unwrap().next, vec!["b"]);
    let out = app.invoke(GraphInput::Resume, &thread("t")).await.unwrap();
    assert_eq!(out.value.log, vec!["s", "a", "b"]);
}

#[tokio::test]
async fn update_state_as_node_runs_its_edges() {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("a", |_: Doc| log("a"));
    g.add_node("b", |_: Doc| log("b"));
    g.add_node("c", |_: Doc| log("c"));
    g.add_edge(START, "a");
    g.add_edge("a", "b");
    g.add_edge("b", "c");
    let app = g.compile_with(CompileConfig::new().checkpointer(saver()).interrupt_before(["b"])).unwrap();
    app.invoke(log("s"), &thread("t")).await.unwrap();
    app.update_state(&thread("t"), vec![log("manual")], Some("b")).await.unwrap();
    let state = app.get_state(&thread("t")).await.unwrap();
    assert_eq!(state.next, vec!["c"]);
    assert_eq!(serde_json::to_value(state.metadata.unwrap().source).unwrap(), json!("update"));
    let out = app.invoke(GraphInput::Resume, &thread("t")).await.unwrap();
    assert_eq!(out.value.log, vec!["s", "a", "manual", "c"]);

    let err = app.update_state(&thread("t"), vec![], Some("zzz")).await.unwrap_err();
    assert_eq!(err.to_string(), "node zzz does not exist");
}

#[tokio::test]
async fn replaying_an_old_checkpoint_forks_and_reruns() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut g = StateGraph::<Doc>::new();
    let r = Arc::clone(&runs);
    g.add_node("a", |_: Doc| log("a"));
    g.add_node("b", move |_: Doc| {
        r.fetch_add(1, Ordering::SeqCst);
        log("b")
    });
    g.add_edge(START, "a");
    g.add_edge("a", "b");
    let app = g.compile_with(CompileConfig::new().checkpointer(saver())).unwrap();
    app.invoke(log("s"), &thread("t")).await.unwrap();
    let history = app.get_state_history(&thread("t"), ListOptions::default()).await.unwrap();
    let before_b = history.iter().find(|s| s.next == vec!["b"]).unwrap();
    let id = before_b.config.as_ref().unwrap().checkpoint_id.clone().unwrap();
    let out =
        app.invoke(GraphInput::Resume, &thread("t").with_configurable("checkpoint_id", id)).await.unwrap();
    assert_eq!(out.value.log, vec!["s", "a", "b"]);
    assert_eq!(runs.load(Ordering::SeqCst), 2, "b re-runs after the fork");
    let history = app.get_state_history(&thread("t"), ListOptions::default()).await.unwrap();
    assert!(
        history
            .iter()
            .any(|s| serde_json::to_value(s.metadata.as_ref().unwrap().source).unwrap() == json!("fork"))
    );
}

#[tokio::test]
async fn bulk_update_replays_a_run_into_the_same_history() {
    use weft_graph::StateUpdate;
    let app = chain3(saver());
    app.invoke(log("in"), &thread("t1")).await.unwrap();
    let original = app.get_state_history(&thread("t1"), ListOptions::default()).await.unwrap();

    let step = |node: &str, update: DocUpdate| {
        vec![StateUpdate { as_node: Some(node.to_owned()), updates: vec![update] }]
    };
    app.bulk_update_state(
        &thread("t2"),
        vec![
            step("__input__", log("in")),
            step(START, log("in")),
            step("a", log("a")),
            step("b", log("b")),
            step("c", log("c")),
        ],
    )
    .await
    .unwrap();
    let replayed = app.get_state_history(&thread("t2"), ListOptions::default()).await.unwrap();
    let shape = |h: &Vec<weft_graph::StateSnapshot<Doc>>| {
        h.iter()
            .map(|s| (s.metadata.as_ref().unwrap().step, s.values.log.clone(), s.next.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(shape(&replayed), shape(&original));
}

#[tokio::test]
async fn bulk_superstep_with_several_updates_needs_as_node() {
    use weft_graph::StateUpdate;
    let app = chain3(saver());
    let err = app
        .bulk_update_state(
            &thread("t"),
            vec![vec![
                StateUpdate { as_node: None, updates: vec![] },
                StateUpdate { as_node: None, updates: vec![] },
            ]],
        )
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "as_node is required when applying multiple updates");
}

#[tokio::test]
async fn resuming_a_thread_with_nothing_saved_is_an_error() {
    let err = chain3(saver()).invoke(GraphInput::Resume, &thread("empty")).await.unwrap_err();
    assert_eq!(err.to_string(), "received no input for __start__");
}

#[tokio::test]
async fn an_empty_command_is_an_error() {
    let err = chain3(saver()).invoke(Command::<Doc>::new(), &thread("t")).await.unwrap_err();
    assert_eq!(err.to_string(), "received empty Command input");
}

#[tokio::test]
async fn update_state_without_as_node_after_parallel_writers_is_ambiguous() {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("p", |_: Doc| log("p"));
    g.add_node("q", |_: Doc| log("q"));
    g.add_edge(START, "p");
    g.add_edge(START, "q");
    let app = g.compile_with(CompileConfig::new().checkpointer(saver())).unwrap();
    app.invoke(log("s"), &thread("t")).await.unwrap();
    let err = app.update_state(&thread("t"), vec![log("x")], None).await.unwrap_err();
    assert_eq!(err.to_string(), "ambiguous update, specify as_node");
}

#[tokio::test]
async fn a_router_sending_back_to_start_is_an_error_naming_the_node() {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("a", |_: Doc| log("a"));
    g.add_edge(START, "a");
    g.add_conditional_edges("a", |_: &Doc| START, None);
    let err = g.compile().unwrap().invoke(log("s"), &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(err.to_string(), "branch of node 'a' did not return a valid destination");
}

#[tokio::test]
async fn a_retention_policy_keeps_only_the_newest_checkpoints() {
    use weft_graph::RetentionPolicy;
    let mut g = StateGraph::<Doc>::new();
    g.add_node("a", |_: Doc| log("a"));
    g.add_node("b", |_: Doc| log("b"));
    g.add_edge(START, "a");
    g.add_edge("a", "b");
    let app = g
        .compile_with(CompileConfig::new().checkpointer(saver()).retention(RetentionPolicy::keep_last(2)))
        .unwrap();
    app.invoke(log("1"), &thread("t")).await.unwrap();
    let out = app.invoke(log("2"), &thread("t")).await.unwrap();
    assert_eq!(
        out.value.log,
        vec!["1", "a", "b", "2", "a", "b"],
        "the thread continues from its latest checkpoint"
    );
    let history = app.get_state_history(&thread("t"), ListOptions::default()).await.unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].values.log, out.value.log);
}

#[tokio::test]
async fn an_unserializable_value_names_thread_checkpoint_channel_and_path() {
    /// A value whose JSON form fails inside a nested field.
    #[derive(Debug, Clone, Default, PartialEq)]
    struct Bad;
    impl Serialize for Bad {
        fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("cannot encode Bad"))
        }
    }
    impl<'de> Deserialize<'de> for Bad {
        fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
            Ok(Bad)
        }
    }
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    struct Holder {
        inner: Vec<Bad>,
    }
    #[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    struct WithBad {
        holder: Holder,
    }
    let mut g = StateGraph::<WithBad>::new();
    g.add_node("a", |_: &WithBad| WithBadUpdate::new().holder(Holder { inner: vec![Bad] }));
    g.add_edge(START, "a");
    let app = g.compile_with(CompileConfig::new().checkpointer(saver())).unwrap();
    let err = app.invoke(WithBadUpdate::new(), &thread("t-bad")).await.unwrap_err().to_string();
    assert!(err.contains("'holder'") && err.contains("'t-bad'") && err.contains("checkpoint"), "{err}");
    assert!(err.contains("inner"), "the path inside the value: {err}");
}
