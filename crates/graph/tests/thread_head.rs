//! A run given the thread's head as its caller read it ([`ThreadHead`]) starts from it without reading it;
//! a head that moved meanwhile is a conflict, never built on; a head read for another thread, or for a run
//! that replays a checkpoint, is not used.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use futures::StreamExt as _;
use serde_json::{Value, json};
use weft_graph::checkpoint::{CheckpointConfig, CheckpointErrorKind, Checkpointer, InMemorySaver};
use weft_graph::erased::{ErasedGraph, JsonInput};
use weft_graph::stream::JsonStreamData;
use weft_graph::{
    ChannelKind, CompileConfig, END, GraphError, JsonState, JsonUpdate, RunOptions, START, StateGraph,
    StreamMode, ThreadHead,
};
use weft_runnable_core::RunnableConfig;

/// `a` → `b`, each appending its name to `items`.
fn graph(saver: Arc<dyn Checkpointer>) -> Arc<dyn ErasedGraph> {
    let state = JsonState::builder().channel("items", ChannelKind::Topic { accumulate: true }).build();
    let mut g = StateGraph::with_initial(state);
    for name in ["a", "b"] {
        g.add_node(name, move |_: &JsonState| JsonUpdate::new().write("items", json!(name)));
    }
    g.add_edge(START, "a");
    g.add_edge("a", "b");
    g.add_edge("b", END);
    g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap().erase()
}

fn thread(id: &str) -> RunnableConfig {
    let mut config = RunnableConfig::default();
    config.configurable.insert("thread_id".into(), json!(id));
    config
}

/// Runs `{"items": ["in"]}` on `config` with `head`; the last values streamed, or the error.
async fn run(
    graph: &Arc<dyn ErasedGraph>,
    config: RunnableConfig,
    head: ThreadHead,
) -> Result<Value, GraphError> {
    let options = RunOptions { head: Some(head), ..RunOptions::default() };
    let input = JsonInput::from_json(json!({"items": ["in"]})).unwrap();
    let mut stream = graph.stream_json(input, config, &[StreamMode::Values], options);
    let mut last = Value::Null;
    while let Some(part) = stream.next().await {
        if let JsonStreamData::Values { values, .. } = part?.data {
            last = values;
        }
    }
    Ok(last)
}

async fn head_of(saver: &dyn Checkpointer, id: &str) -> Option<weft_graph::checkpoint::CheckpointTuple> {
    saver.get_tuple(&CheckpointConfig::thread(id)).await.unwrap()
}

#[tokio::test]
async fn a_run_starts_from_the_head_its_caller_read() {
    let saver: Arc<dyn Checkpointer> = Arc::new(InMemorySaver::new());
    let graph = graph(Arc::clone(&saver));
    // A fresh thread: read as having no checkpoint.
    let out = run(&graph, thread("t"), ThreadHead::read("t", None)).await.unwrap();
    assert_eq!(out["items"], json!(["in", "a", "b"]));
    // Then from the head as read.
    let read = head_of(saver.as_ref(), "t").await;
    let out = run(&graph, thread("t"), ThreadHead::read("t", read)).await.unwrap();
    assert_eq!(out["items"], json!(["in", "a", "b", "in", "a", "b"]));
}

#[tokio::test]
async fn a_head_that_moved_since_it_was_read_is_a_conflict() {
    let saver: Arc<dyn Checkpointer> = Arc::new(InMemorySaver::new());
    let graph = graph(Arc::clone(&saver));
    run(&graph, thread("t"), ThreadHead::read("t", None)).await.unwrap();
    let stale = head_of(saver.as_ref(), "t").await;
    run(&graph, thread("t"), ThreadHead::read("t", stale.clone())).await.unwrap();
    let err = run(&graph, thread("t"), ThreadHead::read("t", stale)).await.unwrap_err();
    assert!(
        matches!(&err, GraphError::Storage(e) if e.kind() == CheckpointErrorKind::Conflict),
        "the head moved: {err}"
    );
    // Read as empty while it is not: a conflict too.
    let err = run(&graph, thread("t"), ThreadHead::read("t", None)).await.unwrap_err();
    assert!(matches!(&err, GraphError::Storage(e) if e.kind() == CheckpointErrorKind::Conflict), "{err}");
    let items = head_of(saver.as_ref(), "t").await.unwrap().checkpoint.channel_values["items"].clone();
    assert_eq!(items.as_array().map(Vec::len), Some(6), "nothing was built on a stale head: {items}");
}

#[tokio::test]
async fn a_head_read_for_another_thread_or_a_replay_is_not_used() {
    let saver: Arc<dyn Checkpointer> = Arc::new(InMemorySaver::new());
    let graph = graph(Arc::clone(&saver));
    run(&graph, thread("t"), ThreadHead::read("t", None)).await.unwrap();
    // Another thread's head (here: "no checkpoint", which would be a conflict on `t`).
    let out = run(&graph, thread("t"), ThreadHead::read("u", None)).await.unwrap();
    assert_eq!(out["items"].as_array().map(Vec::len), Some(6));
    // A replay of the first run's last checkpoint reads that checkpoint, whatever head it is given.
    let first = saver.list(Some(&CheckpointConfig::thread("t")), Default::default()).await.unwrap();
    let at = first.iter().find(|t| t.metadata.step == 2).unwrap().checkpoint.id.clone();
    let mut config = thread("t");
    config.configurable.insert("checkpoint_id".into(), json!(at));
    let out = run(&graph, config, ThreadHead::read("t", None)).await.unwrap();
    assert_eq!(out["items"], json!(["in", "a", "b", "in", "a", "b"]), "forked from the first run's end");
}
