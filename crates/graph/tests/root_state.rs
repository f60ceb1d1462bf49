//! Root-value states: LangGraph's bare `StateGraph(Annotated[list, operator.add])`.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use futures::StreamExt as _;
use serde_json::json;
use weft_graph::checkpoint::InMemorySaver;
use weft_graph::root::{Add, Append, LastValue, RootState, RootUpdate};
use weft_graph::{
    Command, CompileConfig, Goto, GraphError, GraphInput, Route, START, Send, StateGraph, StreamData,
    StreamMode,
};
use weft_runnable_core::RunnableConfig;

type Log = RootState<Vec<String>, Append>;

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

fn s(v: &str) -> Vec<String> {
    vec![v.to_owned()]
}

fn fan_out() -> StateGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    g.add_node("1", |_: Vec<String>| s("1"));
    g.add_node("1.1", |_: Vec<String>| s("1.1"));
    g.add_node("2", |seen: Vec<String>| vec![format!("2 saw {}", seen.len())]);
    g.add_edge(START, "1");
    g.add_edge(START, "1.1");
    g.add_edge("1", "2");
    g.add_edge("1.1", "2");
    g
}

#[tokio::test]
async fn input_node_returns_and_output_are_the_bare_value() {
    let out = fan_out().compile().unwrap().invoke(s("0"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(*out.value, ["0", "1", "1.1", "2 saw 3"]);
    assert_eq!(serde_json::to_value(&out.value).unwrap(), json!(["0", "1", "1.1", "2 saw 3"]));
}

#[tokio::test]
async fn stream_chunks_and_get_state_are_the_bare_value() {
    let app =
        fan_out().compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap();
    let mut parts = app.stream(s("0"), &thread("t"), &[StreamMode::Values, StreamMode::Updates]);
    let mut seen = Vec::new();
    while let Some(part) = parts.next().await {
        match part.unwrap().data {
            StreamData::Values { state, .. } => seen.push(json!(["values", state])),
            StreamData::Updates { node, updates, .. } => {
                let written: Vec<Vec<String>> = updates.into_iter().flat_map(|u| u.0).collect();
                seen.push(json!(["updates", node, written]));
            }
            _ => {}
        }
    }
    assert_eq!(
        seen,
        vec![
            json!(["values", ["0"]]),
            json!(["updates", "1", [["1"]]]),
            json!(["updates", "1.1", [["1.1"]]]),
            json!(["values", ["0", "1", "1.1"]]),
            json!(["updates", "2", [["2 saw 3"]]]),
            json!(["values", ["0", "1", "1.1", "2 saw 3"]]),
        ]
    );
    let snap = app.get_state(&thread("t")).await.unwrap();
    assert_eq!(*snap.values, ["0", "1", "1.1", "2 saw 3"]);
    // Erased to JSON (the server's view) the state and the update chunks are bare too.
    let erased = app.erase();
    let json_snap = erased.get_state_json(&thread("t"), false).await.unwrap();
    assert_eq!(json_snap.values, json!(["0", "1", "1.1", "2 saw 3"]));
    // Saved under LangGraph's channel name.
    let saver = app.checkpointer().unwrap();
    let tuple = saver.get_tuple(&snap.config.unwrap()).await.unwrap().unwrap();
    assert!(
        tuple.checkpoint.channel_values.contains_key("__root__"),
        "{:?}",
        tuple.checkpoint.channel_values
    );
}

#[tokio::test]
async fn a_paused_run_resumes_from_the_saved_value() {
    let app = fan_out()
        .compile_with(
            CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new())).interrupt_before(["2"]),
        )
        .unwrap();
    let out = app.invoke(s("0"), &thread("t")).await.unwrap();
    assert_eq!(*out.value, ["0", "1", "1.1"]);
    let out = app.invoke(GraphInput::Resume, &thread("t")).await.unwrap();
    assert_eq!(*out.value, ["0", "1", "1.1", "2 saw 3"]);
}

#[tokio::test]
async fn sends_and_commands_work_on_a_root_state() {
    // LangGraph's `test_send_sequences` on `Annotated[list, operator.add]`.
    let mut g = StateGraph::<Log>::new();
    g.add_node("1", |_: Vec<String>| s("1"));
    g.add_node("2", |cmd: Command<Log>| {
        let n = match cmd.goto.first() {
            Some(Goto::Send(p)) => p.payload().downcast_ref::<i64>().copied().unwrap_or(-1),
            _ => -1,
        };
        vec![cmd, Command::new().update(RootUpdate::of(vec![format!("2|cmd({n})")]))]
    });
    g.add_node("2n", |n: i64| RootUpdate::of(vec![format!("2n|{n}")]));
    g.add_node("3", |_: Vec<String>| s("3"));
    g.add_node("3.1", |_: Vec<String>| s("3.1"));
    g.add_edge(START, "1");
    g.add_conditional_edges(
        "1",
        |_: &Log| {
            vec![
                Route::Send(Send::command("2", Command::<Log>::new().goto(Send::new("2n", 3_i64)))),
                Route::Send(Send::command("2", Command::<Log>::new().goto(Send::new("2n", 4_i64)))),
                Route::Node("3.1".into()),
            ]
        },
        None,
    );
    g.add_conditional_edges("2", |_: &Log| "3", None);
    g.add_conditional_edges("2n", |_: &Log| "3", None);
    let out = g.compile().unwrap().invoke(s("0"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(*out.value, ["0", "1", "3.1", "2|cmd(3)", "2|cmd(4)", "3", "2n|3", "2n|4", "3"]);
}

#[tokio::test]
async fn a_last_value_root_written_twice_in_a_step_is_an_error() {
    let mut g = StateGraph::<RootState<i64, LastValue>>::new();
    g.add_node("a", |n: i64| n + 1);
    g.add_node("b", |n: i64| n + 2);
    g.add_edge(START, "a");
    g.add_edge(START, "b");
    let err = g.compile().unwrap().invoke(1_i64, &RunnableConfig::default()).await.unwrap_err();
    assert!(matches!(err, GraphError::InvalidUpdate { .. }), "{err:?}");
    assert!(err.to_string().contains("__root__"), "{err}");
}

#[tokio::test]
async fn an_add_root_sums_parallel_writes_and_node_errors_surface() {
    let mut g = StateGraph::<RootState<i64, Add>>::new();
    g.add_node("a", |n: i64| n * 10);
    g.add_node("b", |_: i64| -> Result<i64, weft_runnable_core::Error> { Ok(5) });
    g.add_edge(START, "a");
    g.add_edge(START, "b");
    let out = g.compile().unwrap().invoke(2_i64, &RunnableConfig::default()).await.unwrap();
    assert_eq!(*out.value, 2 + 20 + 5);

    let mut g = StateGraph::<RootState<i64, Add>>::new();
    g.add_node("a", |_: i64| -> Result<i64, weft_runnable_core::Error> {
        Err(weft_runnable_core::Error::msg("no"))
    });
    g.add_edge(START, "a");
    let err = g.compile().unwrap().invoke(2_i64, &RunnableConfig::default()).await.unwrap_err();
    assert!(err.to_string().contains("no"), "{err}");
}

#[tokio::test]
async fn a_node_writing_several_root_values_streams_them_all_as_a_list() {
    // LangGraph groups a task's writes to its root channel: one value bare, several as a list.
    let mut g = StateGraph::<Log>::new();
    g.add_node("one", |_: Vec<String>| s("a"));
    g.add_node("two", |_: Vec<String>| RootUpdate(vec![s("b"), s("c")]));
    g.add_edge(START, "one");
    g.add_edge("one", "two");
    let erased = g.compile().unwrap().erase();
    let input = weft_graph::erased::JsonInput::from_json(json!([])).unwrap();
    let parts: Vec<_> = erased
        .stream_json(input, RunnableConfig::default(), &[StreamMode::Updates], Default::default())
        .map(|p| p.unwrap().data)
        .collect()
        .await;
    let updates: Vec<(String, Vec<serde_json::Value>)> = parts
        .into_iter()
        .filter_map(|d| match d {
            weft_graph::JsonStreamData::Updates { node, updates, .. } => Some((node, updates)),
            _ => None,
        })
        .collect();
    assert_eq!(
        updates,
        [("one".to_owned(), vec![json!(["a"])]), ("two".to_owned(), vec![json!(["b"]), json!(["c"])])]
    );
}
