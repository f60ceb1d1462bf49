//! State calls on a parent graph whose config's `checkpoint_ns` names a subgraph go to the subgraph, as
//! LangGraph's `get_state`, `get_state_history` and `update_state` hand them over: typed when the subgraph
//! has the parent's state type, as JSON for any subgraph.
#![allow(clippy::panic)]
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;
use weft_graph::checkpoint::{CheckpointConfig, InMemorySaver};
use weft_graph::{
    CompileConfig, CompiledGraph, GraphError, ListOptions, Runtime, START, State, StateGraph,
    SubgraphCheckpoints, TaskState,
};
use weft_runnable_core::RunnableConfig;

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Doc {
    #[state(append)]
    log: Vec<String>,
}

/// A child state of its own type.
#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Notes {
    #[state(append)]
    notes: Vec<String>,
}

fn thread() -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", "t")
}

fn at(address: &CheckpointConfig) -> RunnableConfig {
    let config = thread().with_configurable("checkpoint_ns", address.checkpoint_ns.clone());
    match &address.checkpoint_id {
        Some(id) => config.with_configurable("checkpoint_id", id.clone()),
        None => config,
    }
}

/// x, then y, which asks a question.
fn doc_child() -> StateGraph<Doc> {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("x", |_: Doc| DocUpdate::new().log(vec!["x".to_owned()]));
    g.add_node("y", |_: Doc, rt: &Runtime| -> weft_runnable_core::Result<DocUpdate> {
        let answer: String = rt.interrupt("y?")?;
        Ok(DocUpdate::new().log(vec![format!("y:{answer}")]))
    });
    g.add_edge(START, "x").add_edge("x", "y");
    g
}

fn notes_child() -> CompiledGraph<Notes> {
    let mut g = StateGraph::<Notes>::new();
    g.add_node("jot", |_: Notes| NotesUpdate::new().notes(vec!["jotted".to_owned()]));
    g.add_node("ask", |_: Notes, rt: &Runtime| -> weft_runnable_core::Result<NotesUpdate> {
        let answer: String = rt.interrupt("more?")?;
        Ok(NotesUpdate::new().notes(vec![answer]))
    });
    g.add_edge(START, "jot").add_edge("jot", "ask");
    g.compile().unwrap()
}

fn parent_of<C: State>(child: CompiledGraph<C>) -> CompiledGraph<Doc> {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("sub", child);
    g.add_edge(START, "sub");
    g.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap()
}

/// The address the parent's pending `sub` task gives for its subgraph's checkpoints.
async fn sub_address(app: &CompiledGraph<Doc>) -> CheckpointConfig {
    let parent = app.get_state(&thread()).await.unwrap();
    let Some(TaskState::Config(address)) = parent.tasks[0].state.clone() else {
        panic!("{:?}", parent.tasks)
    };
    address
}

#[tokio::test]
async fn get_state_and_history_with_a_subgraph_namespace_read_the_subgraph() {
    let app = parent_of(doc_child().compile().unwrap());
    app.invoke(DocUpdate::new(), &thread()).await.unwrap();
    let address = sub_address(&app).await;
    assert!(address.checkpoint_ns.starts_with("sub:"), "{address:?}");

    let sub = app.get_state(&at(&address)).await.unwrap();
    assert_eq!(sub.values.log, ["x"]);
    assert_eq!(sub.next, ["y"]);
    assert_eq!(sub.interrupts.len(), 1);
    assert_eq!(sub.interrupts[0].value, json!("y?"));
    assert_eq!(sub.config.as_ref().unwrap().checkpoint_ns, address.checkpoint_ns);

    let history = app.get_state_history(&at(&address), ListOptions::default()).await.unwrap();
    let steps: Vec<(i64, Vec<String>)> =
        history.iter().map(|s| (s.metadata.as_ref().unwrap().step, s.next.clone())).collect();
    assert_eq!(
        steps,
        [(1, vec!["y".to_owned()]), (0, vec!["x".to_owned()]), (-1, vec!["__start__".to_owned()])]
    );
    assert!(history.iter().all(|s| s.config.as_ref().unwrap().checkpoint_ns == address.checkpoint_ns));
}

#[tokio::test]
async fn a_subgraph_of_another_state_type_is_read_and_written_as_json() {
    let app = parent_of(notes_child());
    app.invoke(DocUpdate::new(), &thread()).await.unwrap();
    let address = sub_address(&app).await;

    let err = app.get_state(&at(&address)).await.unwrap_err();
    assert!(
        matches!(&err, GraphError::SubgraphStateType { checkpoint_ns } if *checkpoint_ns == address.checkpoint_ns),
        "{err:?}"
    );
    assert!(err.to_string().contains("get_state_json"), "{err}");
    assert!(matches!(
        app.get_state_history(&at(&address), ListOptions::default()).await,
        Err(GraphError::SubgraphStateType { .. })
    ));

    let sub = app.get_state_json(&at(&address), false).await.unwrap();
    assert_eq!(sub.values, json!({"notes": ["jotted"]}));
    assert_eq!(sub.next, ["ask"]);
    assert!(sub.created_at.is_some());
    let history = app.get_state_history_json(&at(&address), ListOptions::default()).await.unwrap();
    assert_eq!(history.len(), 3);
    assert_eq!(history[0].config, sub.config);

    // An update lands in the subgraph's checkpoints, not the parent's.
    let saved =
        app.update_state_json(&at(&address), json!({"notes": ["edited"]}), Some("jot")).await.unwrap();
    assert_eq!(saved.checkpoint_ns, address.checkpoint_ns);
    let sub = app.get_state_json(&at(&address), false).await.unwrap();
    assert_eq!(sub.values, json!({"notes": ["jotted", "edited"]}));
    assert_eq!(sub.metadata.unwrap().source, weft_graph::CheckpointSource::Update);
    assert_eq!(app.get_state(&thread()).await.unwrap().values.log, Vec::<String>::new());
}

#[tokio::test]
async fn the_parents_own_namespace_still_reads_the_parent() {
    let app = parent_of(notes_child());
    app.invoke(DocUpdate::new(), &thread()).await.unwrap();
    let own = app.get_state_json(&thread(), false).await.unwrap();
    assert_eq!(own.next, ["sub"]);
    // A namespace naming no subgraph of this graph reads this graph's checkpoints there (none).
    let elsewhere = thread().with_configurable("checkpoint_ns", "nope:1");
    assert_eq!(app.get_state(&elsewhere).await.unwrap().config, None);
}

#[tokio::test]
async fn a_nested_subgraphs_namespace_is_followed_down() {
    let mut middle = StateGraph::<Doc>::new();
    middle.add_node("inner", notes_child());
    middle.add_edge(START, "inner");
    let app = parent_of(middle.compile().unwrap());
    app.invoke(DocUpdate::new(), &thread()).await.unwrap();
    let nested = app.get_state_with_subgraphs(&thread()).await.unwrap();
    let Some(TaskState::Snapshot(middle)) = &nested.tasks[0].state else { panic!("{:?}", nested.tasks) };
    let Some(TaskState::Snapshot(inner)) = &middle.tasks[0].state else { panic!("{:?}", middle.tasks) };
    let address = inner.config.clone().unwrap();
    assert_eq!(address.checkpoint_ns.matches('|').count(), 1, "{address:?}");
    assert_eq!(inner.values, json!({"notes": ["jotted"]}));

    let read = app.get_state_json(&at(&address), false).await.unwrap();
    assert_eq!(read.values, json!({"notes": ["jotted"]}));
    assert_eq!(read.next, ["ask"]);
    assert_eq!(read.config, inner.config);
}

#[tokio::test]
async fn a_per_node_subgraph_is_read_at_its_node_namespace() {
    let child = doc_child()
        .compile_with(CompileConfig::new().subgraph_checkpoints(SubgraphCheckpoints::PerNode))
        .unwrap();
    let app = parent_of(child);
    app.invoke(DocUpdate::new(), &thread()).await.unwrap();
    let address = sub_address(&app).await;
    assert_eq!(address.checkpoint_ns, "sub");
    let sub = app.get_state(&at(&address)).await.unwrap();
    assert_eq!((sub.values.log, sub.next), (vec!["x".to_owned()], vec!["y".to_owned()]));
    // A task's namespace with its id names the same per-node history.
    let with_id = thread().with_configurable("checkpoint_ns", "sub:0f0f");
    assert_eq!(app.get_state(&with_id).await.unwrap().config.unwrap().checkpoint_ns, "sub");
}
