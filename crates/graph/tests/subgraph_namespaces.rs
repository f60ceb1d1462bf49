//! Subgraph namespaces as LangGraph has them: each subgraph run a task starts has a namespace of its own.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use weft_graph::checkpoint::{Checkpointer as _, InMemorySaver};
use weft_graph::{CompileConfig, CompiledGraph, Runtime, START, State, StateGraph, SubgraphCheckpoints};
use weft_runnable_core::RunnableConfig;

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Log {
    #[state(append)]
    log: Vec<String>,
}

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Inner {
    #[state(append)]
    notes: Vec<String>,
}

fn child(name: &'static str) -> CompiledGraph<Inner> {
    let mut g = StateGraph::<Inner>::new();
    g.add_node("n", move |_: Inner| InnerUpdate::new().notes(vec![name.to_owned()]));
    g.add_edge(START, "n");
    g.compile_with(CompileConfig::new().subgraph_checkpoints(SubgraphCheckpoints::PerNode)).unwrap()
}

#[tokio::test]
async fn two_per_node_subgraphs_called_from_one_node_keep_their_own_state() {
    let (one, two) = (Arc::new(child("one")), Arc::new(child("two")));
    let mut g = StateGraph::<Log>::new();
    g.add_node("call", move |_: Log, rt: Runtime| {
        let (one, two) = (Arc::clone(&one), Arc::clone(&two));
        async move {
            let a =
                one.invoke(Inner::update(), rt.config()).await.map_err(weft_runnable_core::Error::from)?;
            let b =
                two.invoke(Inner::update(), rt.config()).await.map_err(weft_runnable_core::Error::from)?;
            Ok::<_, weft_runnable_core::Error>(
                LogUpdate::new().log(vec![
                    format!("one has {:?}", a.value.notes),
                    format!("two has {:?}", b.value.notes),
                ]),
            )
        }
    });
    g.add_edge(START, "call");
    let saver = Arc::new(InMemorySaver::new());
    let app = g.compile_with(CompileConfig::new().checkpointer(saver.clone())).unwrap();
    let thread = RunnableConfig::default().with_configurable("thread_id", "t");
    app.invoke(Log::update(), &thread).await.unwrap();
    let out = app.invoke(Log::update(), &thread).await.unwrap();
    assert_eq!(
        out.value.log[2..],
        [r#"one has ["one", "one"]"#.to_owned(), r#"two has ["two", "two"]"#.to_owned()],
        "each subgraph keeps only its own history"
    );
    let namespaces: std::collections::BTreeSet<String> = saver
        .list(None, Default::default())
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.config.checkpoint_ns)
        .collect();
    assert_eq!(namespaces.into_iter().collect::<Vec<_>>(), ["", "call", "call|1"]);
}

#[tokio::test]
async fn a_subgraph_called_inside_a_function_node_shows_in_nested_get_state() {
    let mut inner = StateGraph::<Inner>::new();
    inner.add_node("ask", |_: Inner, rt: &Runtime| -> weft_runnable_core::Result<InnerUpdate> {
        let v: String = rt.interrupt("inner?")?;
        Ok(InnerUpdate::new().notes(vec![v]))
    });
    inner.add_edge(START, "ask");
    let inner = Arc::new(inner.compile().unwrap());
    let mut g = StateGraph::<Log>::new();
    g.add_node("call", move |_: Log, rt: Runtime| {
        let inner = Arc::clone(&inner);
        async move {
            let out =
                inner.invoke(Inner::update(), rt.config()).await.map_err(weft_runnable_core::Error::from)?;
            Ok::<_, weft_runnable_core::Error>(LogUpdate::new().log(out.value.notes))
        }
    });
    g.add_edge(START, "call");
    let app = g.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap();
    let thread = RunnableConfig::default().with_configurable("thread_id", "t");
    let paused = app.invoke(Log::update(), &thread).await.unwrap();
    assert_eq!(paused.interrupts.len(), 1);

    let state = app.get_state_with_subgraphs(&thread).await.unwrap();
    let task = &state.tasks[0];
    let Some(weft_graph::TaskState::Snapshot(sub)) = &task.state else { panic!("{:?}", task.state) };
    assert_eq!(sub.next, ["ask"]);
    assert_eq!(sub.interrupts.len(), 1);
    let address = sub.config.as_ref().unwrap();
    assert_eq!(address.checkpoint_ns, format!("call:{}", task.id));
    assert!(sub.parent_config.is_some(), "a nested snapshot names its parent checkpoint");
}
