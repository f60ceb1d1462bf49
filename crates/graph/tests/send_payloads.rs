//! `Send`s to compiled subgraphs and `Send`s whose payload is a `Command` (LangGraph's
//! `Send(node, Command(...))`).
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use futures::StreamExt as _;
use serde::{Deserialize, Serialize};
use serde_json::json;
use weft_graph::checkpoint::InMemorySaver;
use weft_graph::{
    Command, CompileConfig, Goto, GraphInput, Route, START, Send, State, StateGraph, StreamData, StreamMode,
};
use weft_runnable_core::RunnableConfig;

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Log {
    #[state(append)]
    log: Vec<String>,
    topics: Vec<String>,
}

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Inner {
    topic: String,
    #[state(append)]
    log: Vec<String>,
}

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

fn saver() -> CompileConfig {
    CompileConfig::default().checkpointer(Arc::new(InMemorySaver::new()))
}

fn entry(s: &str) -> LogUpdate {
    LogUpdate::new().log(vec![s.to_owned()])
}

/// What node "2" logs for the command it was sent: the number its goto sends on.
fn describe(cmd: &Command<Log>) -> String {
    match cmd.goto.first() {
        Some(Goto::Send(s)) => format!("2|cmd({})", s.payload().downcast_ref::<i64>().copied().unwrap_or(-1)),
        Some(Goto::Node(n)) => format!("2|cmd({n})"),
        None => "2|cmd()".to_owned(),
    }
}

/// LangGraph's `test_send_sequences`, with the node that takes numbers apart from the one that takes
/// commands (a Rust node has one input type).
fn sequences() -> StateGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    g.add_node("1", |_: Log| entry("1"));
    g.add_node("2", |cmd: Command<Log>| {
        let own = Command::new().update(entry(&describe(&cmd)));
        vec![cmd, own]
    });
    g.add_node("2n", |n: i64| entry(&format!("2n|{n}")));
    g.add_node("3", |_: Log| entry("3"));
    g.add_node("3.1", |_: Log| entry("3.1"));
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
    g
}

#[tokio::test]
async fn a_sent_command_reaches_its_node_and_its_reemitted_goto_runs() {
    let app = sequences().compile().unwrap();
    let out = app.invoke(entry("0"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.log, vec!["0", "1", "3.1", "2|cmd(3)", "2|cmd(4)", "3", "2n|3", "2n|4", "3"]);
}

#[tokio::test]
async fn a_sent_command_survives_a_checkpoint_and_resumes() {
    let app = sequences().compile_with(saver().interrupt_before(["2"])).unwrap();
    let out = app.invoke(entry("0"), &thread("t")).await.unwrap();
    assert_eq!(out.value.log, vec!["0", "1"]);
    let snap = app.get_state(&thread("t")).await.unwrap();
    assert_eq!(snap.next, vec!["2", "2", "3.1"]);
    // The saved packets read back as commands: the resumed run is the uninterrupted one.
    let out = app.invoke(GraphInput::Resume, &thread("t")).await.unwrap();
    assert_eq!(out.value.log, vec!["0", "1", "3.1", "2|cmd(3)", "2|cmd(4)", "3", "2n|3", "2n|4", "3"]);
}

#[tokio::test]
async fn a_sent_command_shows_as_the_task_input() {
    let app = sequences().compile().unwrap();
    let mut stream = app.stream(entry("0"), &RunnableConfig::default(), &[StreamMode::Tasks]);
    let mut inputs = Vec::new();
    while let Some(part) = stream.next().await {
        if let StreamData::TaskStart { name, input, .. } = part.unwrap().data {
            if name == "2" {
                inputs.push(input);
            }
        }
    }
    assert_eq!(
        inputs,
        vec![
            json!({"__command__": {"update": [], "goto": [{"node": "2n", "arg": 3}], "graph": null}}),
            json!({"__command__": {"update": [], "goto": [{"node": "2n", "arg": 4}], "graph": null}}),
        ]
    );
}

#[tokio::test]
async fn a_command_node_reached_by_an_edge_is_a_clear_error() {
    let mut g = StateGraph::<Log>::new();
    g.add_node("2", |cmd: Command<Log>| cmd);
    g.add_edge(START, "2");
    let err = g.compile().unwrap().invoke(entry("0"), &RunnableConfig::default()).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("node '2' takes a Command and runs only from a Send carrying one"), "{text}");
}

#[tokio::test]
async fn a_sent_command_to_an_unknown_node_is_a_clear_error() {
    let mut g = StateGraph::<Log>::new();
    g.add_node("a", |_: Log| ());
    g.add_edge(START, "a");
    g.add_conditional_edges("a", |_: &Log| vec![Send::command("nowhere", Command::<Log>::new())], None);
    let err = g.compile().unwrap().invoke(entry("0"), &RunnableConfig::default()).await.unwrap_err();
    assert!(err.to_string().contains("nowhere"), "{err}");
}

/// A parent sending each topic to a subgraph that refuses "bad" the first time it sees it.
fn subgraph_parent() -> StateGraph<Log> {
    let refused = std::sync::atomic::AtomicBool::new(false);
    let mut child = StateGraph::<Inner>::new();
    child.add_node("x", move |s: Inner| {
        if s.topic == "bad" && !refused.swap(true, std::sync::atomic::Ordering::SeqCst) {
            Err(weft_runnable_core::Error::msg("topic 'bad' refused"))
        } else {
            Ok(InnerUpdate::new().log(vec![format!("did {}", s.topic)]))
        }
    });
    child.add_edge(START, "x");
    let child = child.compile().unwrap();
    let mut parent = StateGraph::<Log>::new();
    parent.add_node("sub", child);
    parent.add_conditional_edges(
        START,
        |s: &Log| s.topics.iter().map(|t| Send::new("sub", json!({"topic": t}))).collect::<Vec<_>>(),
        None,
    );
    parent
}

#[tokio::test]
async fn a_send_to_a_checkpointed_subgraph_runs_it_and_the_thread_reads_back() {
    let app = subgraph_parent().compile_with(saver()).unwrap();
    let out = app.invoke(LogUpdate::new().topics(vec!["a".into(), "b".into()]), &thread("t")).await.unwrap();
    assert_eq!(out.value.log, vec!["did a", "did b"]);
    let snap = app.get_state(&thread("t")).await.unwrap();
    assert_eq!(snap.values.log, vec!["did a", "did b"]);
    assert!(snap.next.is_empty());
    assert_eq!(app.get_state_history(&thread("t"), Default::default()).await.unwrap().len(), 3);
}

#[tokio::test]
async fn a_failed_send_to_a_subgraph_leaves_a_readable_thread_that_resumes() {
    let app = subgraph_parent().compile_with(saver()).unwrap();
    let err =
        app.invoke(LogUpdate::new().topics(vec!["a".into(), "bad".into()]), &thread("t")).await.unwrap_err();
    assert!(err.to_string().contains("topic 'bad' refused"), "{err}");
    // Not corrupt: the state, the send still to run (the finished one saved its writes) and the history
    // read back, and the thread resumes.
    let snap = app.get_state(&thread("t")).await.unwrap();
    assert_eq!(snap.next, vec!["sub"]);
    assert!(app.get_state_history(&thread("t"), Default::default()).await.is_ok());
    let out = app.invoke(GraphInput::Resume, &thread("t")).await.unwrap();
    assert_eq!(out.value.log, vec!["did a", "did bad"]);
}

#[tokio::test]
async fn a_sent_command_to_a_subgraph_is_a_clear_error() {
    let mut child = StateGraph::<Inner>::new();
    child.add_node("x", |_: Inner| ());
    child.add_edge(START, "x");
    let mut parent = StateGraph::<Log>::new();
    parent.add_node("sub", child.compile().unwrap());
    parent.set_conditional_entry_point(|_: &Log| vec![Send::command("sub", Command::<Log>::new())], None);
    let err = parent.compile().unwrap().invoke(entry("0"), &RunnableConfig::default()).await.unwrap_err();
    assert!(err.to_string().contains("carries a Command"), "{err}");
}
