//! Checkpoint problems the engine itself finds (an unknown checkpoint to replay or copy, a stored
//! checkpoint it cannot restore, a value it cannot serialize) come out as typed storage errors with a
//! kind and the thread, as the savers' own errors do.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use weft_graph::checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointErrorKind, CheckpointMetadata, CheckpointSource, Checkpointer,
    InMemorySaver,
};
use weft_graph::{CompileConfig, CompiledGraph, END, GraphError, GraphInput, START, State, StateGraph};
use weft_runnable_core::RunnableConfig;

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Count {
    n: i64,
}

fn counter(saver: Arc<InMemorySaver>) -> CompiledGraph<Count> {
    let mut g = StateGraph::<Count>::new();
    g.add_node("inc", |s: &Count| CountUpdate::new().n(s.n + 1));
    g.add_edge(START, "inc");
    g.add_edge("inc", END);
    g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

fn storage_kind(err: &GraphError) -> Option<CheckpointErrorKind> {
    assert!(matches!(err, GraphError::Storage(_)), "not a storage error: {err:?}");
    err.checkpoint_error_kind()
}

#[tokio::test]
async fn replaying_an_unknown_checkpoint_is_an_invalid_request_naming_it() {
    let app = counter(Arc::new(InMemorySaver::new()));
    app.invoke(CountUpdate::new().n(0), &thread("t")).await.unwrap();
    let at = thread("t").with_configurable("checkpoint_id", "no-such-checkpoint");
    let err = app.invoke(GraphInput::Resume, &at).await.unwrap_err();
    assert_eq!(storage_kind(&err), Some(CheckpointErrorKind::InvalidRequest), "{err}");
    let text = err.to_string();
    assert!(text.contains("no-such-checkpoint") && text.contains("'t'"), "{text}");
}

#[tokio::test]
async fn copying_a_checkpoint_of_an_empty_thread_is_an_invalid_request() {
    let app = counter(Arc::new(InMemorySaver::new()));
    let err = app.update_state(&thread("empty"), vec![], Some("__copy__")).await.unwrap_err();
    assert_eq!(storage_kind(&err), Some(CheckpointErrorKind::InvalidRequest), "{err}");
    assert!(err.to_string().contains("'empty'"), "{err}");
}

#[tokio::test]
async fn a_stored_checkpoint_the_engine_cannot_restore_is_corrupt_naming_thread_and_checkpoint() {
    let saver = Arc::new(InMemorySaver::new());
    let app = counter(saver.clone());
    let checkpoint = Checkpoint {
        v: 1,
        id: uuid_like(),
        ts: "2025-01-01T00:00:00+00:00".to_owned(),
        channel_values: [("n".into(), serde_json::json!(1))].into_iter().collect(),
        channel_versions: [("n".into(), "not a version".into())].into_iter().collect(),
        versions_seen: Default::default(),
        updated_channels: Vec::new(),
    };
    let metadata = CheckpointMetadata {
        source: CheckpointSource::Loop,
        step: 0,
        parents: Default::default(),
        extra: Default::default(),
    };
    let id = checkpoint.id.clone();
    saver.put(&CheckpointConfig::thread("damaged"), checkpoint, metadata, Default::default()).await.unwrap();
    let err = app.get_state(&thread("damaged")).await.unwrap_err();
    assert_eq!(storage_kind(&err), Some(CheckpointErrorKind::Corrupt), "{err}");
    let storage = err.checkpoint_error().unwrap();
    assert_eq!(storage.thread_id(), Some("damaged"));
    assert!(err.to_string().contains(&id), "{err}");
    // A run on the damaged thread stops the same way, before running anything.
    let err = app.invoke(CountUpdate::new().n(0), &thread("damaged")).await.unwrap_err();
    assert_eq!(storage_kind(&err), Some(CheckpointErrorKind::Corrupt), "{err}");
}

/// A value whose serialization always fails.
#[derive(Debug, Clone, Default, PartialEq)]
struct Unsaveable(bool);

impl Serialize for Unsaveable {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.0 {
            Err(serde::ser::Error::custom("refuses to be saved"))
        } else {
            serializer.serialize_bool(false)
        }
    }
}

impl<'de> Deserialize<'de> for Unsaveable {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        bool::deserialize(deserializer).map(Unsaveable)
    }
}

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Holder {
    value: Unsaveable,
}

#[tokio::test]
async fn a_value_that_cannot_be_serialized_is_an_invalid_request_naming_the_channel() {
    let mut g = StateGraph::<Holder>::new();
    g.add_node("write", |_: &Holder| HolderUpdate::new().value(Unsaveable(true)));
    g.add_edge(START, "write");
    g.add_edge("write", END);
    let app = g.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap();
    let err = app.invoke(HolderUpdate::new(), &thread("t")).await.unwrap_err();
    assert_eq!(storage_kind(&err), Some(CheckpointErrorKind::InvalidRequest), "{err}");
    let text = err.to_string();
    assert!(text.contains("'value'") && text.contains("refuses to be saved"), "{text}");
}

fn uuid_like() -> String {
    "1f0c0000-0000-6000-8000-000000000001".to_owned()
}

/// A thread paused before `inc`, with a pending write of the step's input added by `write`.
async fn paused_with_input(write: (&str, serde_json::Value)) -> (CompiledGraph<Count>, String) {
    let saver = Arc::new(InMemorySaver::new());
    let mut g = StateGraph::<Count>::new();
    g.add_node("inc", |s: &Count| CountUpdate::new().n(s.n + 1));
    g.add_edge(START, "inc");
    g.add_edge("inc", END);
    let app =
        g.compile_with(CompileConfig::new().checkpointer(saver.clone()).interrupt_before(["inc"])).unwrap();
    app.invoke(CountUpdate::new().n(1), &thread("paused")).await.unwrap();
    let head = saver.get_tuple(&CheckpointConfig::thread("paused")).await.unwrap().unwrap();
    let at = head.config.clone();
    saver
        .put_writes(
            &at,
            vec![(write.0.to_owned(), write.1)],
            weft_graph::checkpoint::special::NULL_TASK_ID,
            "",
        )
        .await
        .unwrap();
    (app, head.checkpoint.id)
}

#[tokio::test]
async fn a_saved_write_of_the_wrong_type_is_corrupt_naming_thread_checkpoint_and_channel() {
    let (app, checkpoint_id) = paused_with_input(("n", serde_json::json!("not a number"))).await;
    // Reading the state and resuming the run both replay the write.
    let read = app.get_state(&thread("paused")).await.unwrap_err();
    let resumed = app.invoke(GraphInput::Resume, &thread("paused")).await.unwrap_err();
    for err in [read, resumed] {
        assert_eq!(storage_kind(&err), Some(CheckpointErrorKind::Corrupt), "{err}");
        let storage = err.checkpoint_error().unwrap();
        assert_eq!(storage.thread_id(), Some("paused"));
        let text = err.to_string();
        assert!(text.contains(&checkpoint_id) && text.contains("'n'"), "{text}");
    }
}

#[tokio::test]
async fn a_saved_write_to_an_unknown_channel_is_corrupt() {
    let (app, checkpoint_id) = paused_with_input(("ghost", serde_json::json!(1))).await;
    let err = app.invoke(GraphInput::Resume, &thread("paused")).await.unwrap_err();
    assert_eq!(storage_kind(&err), Some(CheckpointErrorKind::Corrupt), "{err}");
    let text = err.to_string();
    assert!(text.contains(&checkpoint_id) && text.contains("unknown channel 'ghost'"), "{text}");
}
