//! A run asked for its [`EndState`] hands back what `get_state_json` reads for the thread once it ends with
//! nothing left to run (values, `next`, tasks, interrupts, addresses, metadata), and nothing when it
//! pauses, fails or saves only at its exit. A run asked to leave its last saves to the caller
//! (`EndState::with_last_saves`) hands those back unstored with that state, and stores everything itself
//! when it ends otherwise.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use futures::StreamExt as _;
use serde_json::{Value, json};
use weft_graph::checkpoint::{Checkpointer, InMemorySaver, SaveOp};
use weft_graph::erased::{ErasedGraph, JsonInput};
use weft_graph::{
    ChannelKind, CompileConfig, Durability, END, EndState, GraphError, JsonSnapshot, JsonState, JsonUpdate,
    RunOptions, START, StateGraph, StreamMode,
};
use weft_runnable_core::RunnableConfig;

/// `a` → `b` → `c`, each appending its name to `items`, writing `last` (untracked) and `flash`
/// (ephemeral); `c` fails when the input asks it to.
fn graph() -> Arc<dyn ErasedGraph> {
    graph_on(Arc::new(InMemorySaver::new()))
}

/// [`graph`] on `saver`.
fn graph_on(saver: Arc<dyn Checkpointer>) -> Arc<dyn ErasedGraph> {
    let state = JsonState::builder()
        .channel("items", ChannelKind::Topic { accumulate: true })
        .channel("last", ChannelKind::Untracked)
        .channel("flash", ChannelKind::Ephemeral)
        .channel("fail", ChannelKind::LastValue)
        .build();
    let mut g = StateGraph::with_initial(state);
    for name in ["a", "b", "c"] {
        g.add_node(name, move |s: &JsonState| {
            if name == "c" && s.get("fail") == Some(&json!(true)) {
                return Err(weft_runnable_core::Error::InvalidInput("c fails".into()));
            }
            Ok(JsonUpdate::new()
                .write("items", json!(name))
                .write("last", json!(name))
                .write("flash", json!(1)))
        });
    }
    g.add_edge(START, "a");
    g.add_edge("a", "b");
    g.add_edge("b", "c");
    g.add_edge("c", END);
    g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap().erase()
}

fn thread(id: &str) -> RunnableConfig {
    let mut config = RunnableConfig::default();
    config.configurable.insert("thread_id".into(), json!(id));
    config.metadata.insert("run_id".into(), json!(format!("run-of-{id}")));
    config
}

/// Runs `input` on `thread_id` to its end; the state it handed back and the run's error, if any.
async fn run(
    graph: &Arc<dyn ErasedGraph>,
    thread_id: &str,
    input: Value,
    options: RunOptions,
) -> (Option<JsonSnapshot>, Option<GraphError>) {
    run_with(graph, thread_id, input, options, EndState::new()).await
}

/// [`run`] with `slot` for the end state.
async fn run_with(
    graph: &Arc<dyn ErasedGraph>,
    thread_id: &str,
    input: Value,
    mut options: RunOptions,
    slot: EndState,
) -> (Option<JsonSnapshot>, Option<GraphError>) {
    options.end_state = Some(slot.clone());
    let input = JsonInput::from_json(input).unwrap();
    let mut stream = graph.stream_json(input, thread(thread_id), &[StreamMode::Values], options);
    let mut error = None;
    while let Some(part) = stream.next().await {
        if let Err(e) = part {
            error = Some(e);
        }
    }
    (slot.take(), error)
}

fn durable(durability: Durability) -> RunOptions {
    RunOptions { durability, ..RunOptions::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_run_hands_back_what_get_state_reads() {
    let graph = graph();
    for durability in [Durability::Async, Durability::Sync] {
        let id = format!("t-{durability:?}");
        // Twice on one thread: the second run's first checkpoint has a parent.
        for turn in 0..2 {
            let (handed, error) = run(&graph, &id, json!({"items": ["in"]}), durable(durability)).await;
            assert!(error.is_none(), "{error:?}");
            let handed = handed.unwrap_or_else(|| panic!("{durability:?} turn {turn}: nothing handed back"));
            let read = graph.get_state_json(&thread(&id), false).await.unwrap();
            assert_eq!(handed, read, "{durability:?} turn {turn}");
            assert!(handed.next.is_empty() && handed.tasks.is_empty() && handed.interrupts.is_empty());
            assert!(handed.values.get("last").is_none(), "an untracked channel is not in a checkpoint");
            assert_eq!(handed.values["items"].as_array().unwrap().len(), 4 * (turn + 1));
            assert_eq!(
                handed.metadata.as_ref().unwrap().extra.get("run_id"),
                Some(&json!(format!("run-of-{id}")))
            );
        }
    }
}

#[tokio::test]
async fn a_finished_run_on_one_thread_of_a_runtime_hands_back_what_get_state_reads() {
    let graph = graph();
    let (handed, error) = run(&graph, "current", json!({"items": ["in"]}), durable(Durability::Async)).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(handed, Some(graph.get_state_json(&thread("current"), false).await.unwrap()));
}

#[tokio::test]
async fn a_paused_failed_or_exit_durability_run_hands_back_nothing() {
    let graph = graph();
    let pause = RunOptions { interrupt_before: Some(vec!["b".into()]), ..RunOptions::default() };
    let (handed, error) = run(&graph, "paused", json!({"items": ["in"]}), pause).await;
    assert!(error.is_none(), "{error:?}");
    assert!(handed.is_none(), "a paused run has a next task: its state is read");
    assert_eq!(graph.get_state_json(&thread("paused"), false).await.unwrap().next, vec!["b"]);

    let (handed, error) =
        run(&graph, "failed", json!({"items": ["in"], "fail": true}), RunOptions::default()).await;
    assert!(error.is_some());
    assert!(handed.is_none(), "a failed run leaves a task to retry: its state is read");

    let (handed, error) = run(&graph, "exit", json!({"items": ["in"]}), durable(Durability::Exit)).await;
    assert!(error.is_none(), "{error:?}");
    assert!(handed.is_none());
}

#[tokio::test]
async fn a_resumed_run_hands_back_the_state_it_ends_in() {
    let graph = graph();
    let pause = RunOptions { interrupt_before: Some(vec!["c".into()]), ..RunOptions::default() };
    let (handed, _) = run(&graph, "resumed", json!({"items": ["in"]}), pause).await;
    assert!(handed.is_none());
    let slot = EndState::new();
    let options = RunOptions { end_state: Some(slot.clone()), ..RunOptions::default() };
    let mut stream = graph.stream_json(JsonInput::Resume, thread("resumed"), &[StreamMode::Values], options);
    while let Some(part) = stream.next().await {
        part.unwrap();
    }
    let read = graph.get_state_json(&thread("resumed"), false).await.unwrap();
    assert_eq!(slot.take(), Some(read));
    assert!(slot.take().is_none(), "taken once");
}

/// The steps of the checkpoints among `saves`.
fn put_steps(saves: &[SaveOp]) -> Vec<i64> {
    saves
        .iter()
        .filter_map(|op| match op {
            SaveOp::Put { metadata, .. } => Some(metadata.step),
            SaveOp::Writes { .. } => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_leaving_its_last_saves_hands_back_its_last_step_unstored() {
    let saver: Arc<dyn Checkpointer> = Arc::new(InMemorySaver::new());
    let graph = graph_on(Arc::clone(&saver));
    for turn in 0..2 {
        let slot = EndState::with_last_saves();
        let (handed, error) =
            run_with(&graph, "last", json!({"items": ["in"]}), RunOptions::default(), slot.clone()).await;
        assert!(error.is_none(), "{error:?}");
        let handed = handed.unwrap();
        let saves = slot.take_saves();
        assert!(slot.take_saves().is_empty(), "taken once");
        // `c`'s writes and the checkpoint after it: the step before stored, `c` still to run there.
        assert_eq!(put_steps(&saves), [3 + 5 * turn], "turn {turn}: {saves:?}");
        let c_wrote = |op: &SaveOp| matches!(op, SaveOp::Writes { writes, .. } if writes.iter().any(|(_, v)| v == &json!("c")));
        assert!(c_wrote(&saves[0]), "the writes of `c` first: {saves:?}");
        let stored = graph.get_state_json(&thread("last"), false).await.unwrap();
        assert_eq!(stored.next, vec!["c"], "turn {turn}: the last step is not stored");
        // Stored by the caller, they make the thread what the run handed back.
        saver.put_batch(saves).await.unwrap();
        assert_eq!(graph.get_state_json(&thread("last"), false).await.unwrap(), handed, "turn {turn}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_leaving_its_last_saves_stores_them_itself_when_it_pauses_fails_or_saves_in_sync() {
    let graph = graph();
    let cases = [
        (
            "paused",
            json!({"items": ["in"]}),
            RunOptions { interrupt_before: Some(vec!["c".into()]), ..RunOptions::default() },
        ),
        ("failed", json!({"items": ["in"], "fail": true}), RunOptions::default()),
        ("sync", json!({"items": ["in"]}), durable(Durability::Sync)),
    ];
    for (id, input, options) in cases {
        let slot = EndState::with_last_saves();
        let (handed, _) = run_with(&graph, id, input, options, slot.clone()).await;
        assert!(slot.take_saves().is_empty(), "{id}: nothing is left to the caller");
        let stored = graph.get_state_json(&thread(id), false).await.unwrap();
        match id {
            "sync" => assert_eq!(handed, Some(stored), "sync: every save stored, the state handed back"),
            "paused" => assert_eq!(stored.next, vec!["c"], "paused: the pause is stored"),
            _ => assert!(
                stored.tasks.iter().any(|t| t.error.is_some()),
                "failed: the error is stored: {stored:?}"
            ),
        }
    }
}
