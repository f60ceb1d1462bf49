//! Subgraphs: a compiled graph as a node, interrupts inside them, commands to the parent graph.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use weft_graph::checkpoint::InMemorySaver;
use weft_graph::{Command, CompileConfig, END, GraphError, Runtime, START, State, StateGraph};
use weft_runnable_core::RunnableConfig;

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Doc {
    #[state(append)]
    log: Vec<String>,
    answer: Option<String>,
}

/// A child state sharing only `answer` with the parent.
#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Inner {
    answer: Option<String>,
    #[state(append)]
    steps: Vec<String>,
}

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

fn log(s: &str) -> DocUpdate {
    DocUpdate::new().log(vec![s.to_owned()])
}

#[tokio::test]
async fn subgraph_reads_and_writes_the_shared_channels() {
    let mut child = StateGraph::<Inner>::new();
    child.add_node("x", |s: Inner| {
        InnerUpdate::new().steps(vec!["x".into()]).answer(format!("{}!", s.answer.unwrap_or_default()))
    });
    child.add_edge(START, "x");
    let child = child.compile().unwrap();

    let mut parent = StateGraph::<Doc>::new();
    parent.add_node("sub", child);
    parent.add_node("after", |s: Doc| log(&format!("after {}", s.answer.unwrap_or_default())));
    parent.add_edge(START, "sub");
    parent.add_edge("sub", "after");
    let out = parent
        .compile()
        .unwrap()
        .invoke(DocUpdate::new().answer("hi".to_owned()), &RunnableConfig::default())
        .await
        .unwrap();
    assert_eq!(out.value.answer.as_deref(), Some("hi!"));
    assert_eq!(out.value.log, vec!["after hi!"]);
}

#[tokio::test]
async fn interrupt_inside_a_subgraph_resumes_inside_it() {
    let first_runs = Arc::new(AtomicUsize::new(0));
    let runs = Arc::clone(&first_runs);
    let mut child = StateGraph::<Inner>::new();
    child.add_node("prep", move |_: Inner| {
        runs.fetch_add(1, Ordering::SeqCst);
        InnerUpdate::new().steps(vec!["prep".into()])
    });
    child.add_node("ask", |_: Inner, rt: &Runtime| -> weft_runnable_core::Result<InnerUpdate> {
        let a: String = rt.interrupt("name?")?;
        Ok(InnerUpdate::new().answer(a))
    });
    child.add_edge(START, "prep");
    child.add_edge("prep", "ask");
    let child = child.compile().unwrap();

    let mut parent = StateGraph::<Doc>::new();
    parent.add_node("sub", child);
    parent.add_node("after", |s: Doc| log(&format!("hello {}", s.answer.unwrap_or_default())));
    parent.add_edge(START, "sub");
    parent.add_edge("sub", "after");
    let app = parent.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap();

    let out = app.invoke(log("s"), &thread("t")).await.unwrap();
    assert_eq!(out.interrupts.len(), 1);
    assert_eq!(out.interrupts[0].value, serde_json::json!("name?"));
    assert_eq!(app.get_state(&thread("t")).await.unwrap().next, vec!["sub"]);

    let out = app.invoke(Command::<Doc>::resume("Ada"), &thread("t")).await.unwrap();
    assert!(out.interrupts.is_empty(), "{:?}", out.interrupts);
    assert_eq!(out.value.log, vec!["s", "hello Ada"]);
    assert_eq!(first_runs.load(Ordering::SeqCst), 1, "the subgraph's finished node is not re-run");
}

#[tokio::test]
async fn command_to_parent_routes_in_the_parent_graph() {
    let mut child = StateGraph::<Doc>::new();
    child.add_node("handoff", |_: Doc| {
        Command::<Doc>::new()
            .update(DocUpdate::new().answer("from child".to_owned()))
            .goto("other")
            .to_parent()
    });
    child.add_edge(START, "handoff");
    let child = child.compile().unwrap();

    let mut parent = StateGraph::<Doc>::new();
    parent.add_node("sub", child);
    parent.add_node("other", |s: Doc| log(&format!("other got {}", s.answer.unwrap_or_default())));
    parent.add_edge(START, "sub");
    parent.add_edge("other", END);
    let out = parent.compile().unwrap().invoke(log("s"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.log, vec!["s", "other got from child"]);
}

#[tokio::test]
async fn command_to_parent_at_the_root_is_an_error() {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("a", |_: Doc| Command::<Doc>::new().goto("a").to_parent());
    g.add_edge(START, "a");
    let err = g.compile().unwrap().invoke(log("s"), &RunnableConfig::default()).await.unwrap_err();
    assert!(matches!(err, GraphError::NoParentGraph), "{err}");
}

#[tokio::test]
async fn subgraph_checkpoints_live_in_their_own_namespace() {
    let saver = Arc::new(InMemorySaver::new());
    let mut child = StateGraph::<Doc>::new();
    child.add_node("inner", |_: Doc| log("inner"));
    child.add_edge(START, "inner");
    let child = child.compile().unwrap();
    let mut parent = StateGraph::<Doc>::new();
    parent.add_node("sub", child);
    parent.add_edge(START, "sub");
    let app = parent.compile_with(CompileConfig::new().checkpointer(saver.clone())).unwrap();
    app.invoke(log("s"), &thread("t")).await.unwrap();
    use weft_graph::checkpoint::Checkpointer as _;
    let all = saver.list(None, Default::default()).await.unwrap();
    let namespaces: std::collections::BTreeSet<String> =
        all.iter().map(|t| t.config.checkpoint_ns.clone()).collect();
    assert_eq!(namespaces.len(), 2, "{namespaces:?}");
    assert!(namespaces.iter().any(|ns| ns.starts_with("sub:")), "{namespaces:?}");
}

mod streaming {
    use super::*;
    use futures::StreamExt as _;
    use weft_graph::{RunOptions, StreamData, StreamMode};
    use weft_runnable_core::fakes::FakeChatModel;
    use weft_runnable_core::{PromptValue, Runnable};

    fn graph() -> weft_graph::CompiledGraph<Doc> {
        let model = FakeChatModel::new(["deep thought"]);
        let mut child = StateGraph::<Inner>::new();
        child.add_node("think", move |_: Inner, rt: Runtime| {
            let model = model.clone();
            async move {
                let reply = model.invoke(PromptValue::from("q"), rt.config()).await?;
                Ok::<_, weft_runnable_core::Error>(InnerUpdate::new().answer(reply.text()))
            }
        });
        child.add_edge(START, "think");
        let mut parent = StateGraph::<Doc>::new();
        parent.add_node("sub", child.compile().unwrap());
        parent.add_edge(START, "sub");
        parent.compile().unwrap()
    }

    async fn chunks(subgraphs: bool) -> Vec<(Vec<String>, String)> {
        let options = RunOptions { subgraphs, ..RunOptions::default() };
        graph()
            .stream_with(
                log("s"),
                &RunnableConfig::default(),
                &[StreamMode::Updates, StreamMode::Messages],
                options,
            )
            .map(|p| {
                let p = p.unwrap();
                let what = match p.data {
                    StreamData::Updates { node, .. } => format!("update {node}"),
                    StreamData::SubgraphUpdates { node, updates, .. } => {
                        format!("subupdate {node} {}", updates[0])
                    }
                    StreamData::Message { chunk, .. } => format!("token {}", chunk.text()),
                    other => format!("{other:?}"),
                };
                (p.ns.iter().map(|s| s.split(':').next().unwrap_or_default().to_owned()).collect(), what)
            })
            .collect()
            .await
    }

    #[tokio::test]
    async fn without_subgraphs_only_the_parent_streams() {
        assert_eq!(chunks(false).await, vec![(vec![], "update sub".to_owned())]);
    }

    #[tokio::test]
    async fn with_subgraphs_chunks_carry_the_subgraph_namespace() {
        let got = chunks(true).await;
        let sub = vec!["sub".to_owned()];
        assert!(got.contains(&(sub.clone(), "token deep".to_owned())), "{got:?}");
        assert!(
            got.contains(&(sub.clone(), "subupdate think {\"answer\":\"deep thought\"}".to_owned())),
            "{got:?}"
        );
        assert_eq!(got.last().unwrap(), &(vec![], "update sub".to_owned()));
    }
}

mod checkpoint_modes {
    use super::*;
    use weft_graph::SubgraphCheckpoints;
    use weft_graph::checkpoint::Checkpointer as _;

    /// A parent whose subgraph counts its own runs in its state.
    fn app(mode: SubgraphCheckpoints, saver: Arc<InMemorySaver>) -> weft_graph::CompiledGraph<Doc> {
        let mut child = StateGraph::<Inner>::new();
        child.add_node("count", |s: Inner| {
            InnerUpdate::new().steps(vec!["run".into()]).answer(format!("{}", s.steps.len() + 1))
        });
        child.add_edge(START, "count");
        let child = child.compile_with(CompileConfig::new().subgraph_checkpoints(mode)).unwrap();
        let mut parent = StateGraph::<Doc>::new();
        parent.add_node("sub", child);
        parent.add_edge(START, "sub");
        parent.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
    }

    async fn two_runs(mode: SubgraphCheckpoints) -> (Option<String>, usize) {
        let saver = Arc::new(InMemorySaver::new());
        let app = app(mode, Arc::clone(&saver));
        app.invoke(log("1"), &thread("t")).await.unwrap();
        let out = app.invoke(log("2"), &thread("t")).await.unwrap();
        let all = saver.list(None, Default::default()).await.unwrap();
        let namespaces: std::collections::BTreeSet<String> =
            all.into_iter().map(|t| t.config.checkpoint_ns).collect();
        (out.value.answer, namespaces.len())
    }

    #[tokio::test]
    async fn inherited_subgraphs_start_fresh_for_each_parent_task() {
        assert_eq!(two_runs(SubgraphCheckpoints::Inherit).await, (Some("1".to_owned()), 3));
    }

    #[tokio::test]
    async fn per_node_subgraphs_accumulate_across_parent_runs() {
        assert_eq!(two_runs(SubgraphCheckpoints::PerNode).await, (Some("2".to_owned()), 2));
    }

    #[tokio::test]
    async fn subgraphs_without_checkpoints_save_nothing() {
        assert_eq!(two_runs(SubgraphCheckpoints::Never).await, (Some("1".to_owned()), 1));
    }
}

#[tokio::test]
async fn nodes_reach_the_store_through_their_runtime() {
    use weft_graph::{InMemoryStore, Store};
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let mut g = StateGraph::<Doc>::new();
    g.add_node("remember", |_: Doc, rt: Runtime| async move {
        let store = rt.store().cloned().ok_or_else(|| weft_runnable_core::Error::msg("no store"))?;
        store
            .put(&["users".to_owned(), "ada".to_owned()], "pref", serde_json::json!({"lang": "rust"}))
            .await
            .map_err(weft_runnable_core::Error::custom)?;
        Ok::<_, weft_runnable_core::Error>(log("saved"))
    });
    g.add_edge(START, "remember");
    let app = g.compile_with(CompileConfig::new().store(Arc::clone(&store))).unwrap();
    app.invoke(log("s"), &RunnableConfig::default()).await.unwrap();
    let item = store.get(&["users".to_owned(), "ada".to_owned()], "pref").await.unwrap().unwrap();
    assert_eq!(item.value["lang"], "rust");
}
