//! Channels as LangGraph has them: ephemeral and topic values across parallel tasks, writes to keys a
//! JSON state does not declare, untracked values and saved `Send` packets, routers without a destination.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::json;
use weft_graph::checkpoint::{Checkpointer, InMemorySaver};
use weft_graph::{
    ChannelKind, CompileConfig, GraphError, GraphInput, JsonState, JsonUpdate, START, Send, State, StateGraph,
};
use weft_runnable_core::RunnableConfig;

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Board {
    #[state(append)]
    log: Vec<String>,
    #[state(ephemeral)]
    flash: Option<String>,
    #[state(topic)]
    events: Vec<String>,
    #[state(untracked)]
    secret: Option<String>,
}

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

#[tokio::test]
async fn ephemeral_and_topic_values_of_a_parallel_step_reach_the_next_step() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut g = StateGraph::<Board>::new();
    g.add_node("a", |_: Board| BoardUpdate::new().flash("hi".to_owned()).events(vec!["from a".to_owned()]));
    g.add_node("b", |_: Board| BoardUpdate::new().events(vec!["from b".to_owned()]));
    let seen_by_c = Arc::clone(&seen);
    g.add_node("c", move |s: Board| {
        seen_by_c.lock().unwrap().push((s.flash.clone(), s.events.clone()));
        BoardUpdate::new().log(vec!["c".to_owned()])
    });
    let seen_by_d = Arc::clone(&seen);
    g.add_node("d", move |s: Board| {
        seen_by_d.lock().unwrap().push((s.flash.clone(), s.events.clone()));
        BoardUpdate::new()
    });
    g.add_edge(START, "a");
    g.add_edge(START, "b");
    g.add_waiting_edge(["a", "b"], "c");
    g.add_edge("c", "d");
    let out = g.compile().unwrap().invoke(Board::update(), &RunnableConfig::default()).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0], (Some("hi".to_owned()), vec!["from a".to_owned(), "from b".to_owned()]));
    assert_eq!(seen[1], (None, Vec::new()), "cleared after a step that did not write them");
    assert_eq!(out.value.log, ["c"]);
}

#[tokio::test]
async fn untracked_values_never_reach_saved_send_packets() {
    let mut g = StateGraph::<Board>::new();
    g.add_node("a", |_: Board| BoardUpdate::new().secret("TOKEN".to_owned()));
    g.add_node("w", |_: Board, rt: &weft_graph::Runtime| -> weft_runnable_core::Result<BoardUpdate> {
        let _: String = rt.interrupt("q")?;
        Ok(BoardUpdate::new().log(vec!["w".to_owned()]))
    });
    g.add_edge(START, "a");
    g.add_conditional_edges(
        "a",
        |s: &Board| {
            vec![Send::new(
                "w",
                Board { log: vec!["x".to_owned()], secret: s.secret.clone(), ..Board::default() },
            )]
        },
        None,
    );
    let saver = Arc::new(InMemorySaver::new());
    let app = g.compile_with(CompileConfig::new().checkpointer(saver.clone())).unwrap();
    let out = app.invoke(Board::update(), &thread("t")).await.unwrap();
    assert_eq!(out.interrupts.len(), 1);
    let tuples = saver
        .list(Some(&weft_graph::checkpoint::CheckpointConfig::thread("t")), Default::default())
        .await
        .unwrap();
    assert!(!tuples.is_empty());
    for tuple in tuples {
        let text = serde_json::to_string(&tuple.checkpoint).unwrap();
        assert!(!text.contains("TOKEN"), "an untracked value was saved: {text}");
        for write in tuple.pending_writes {
            assert!(!write.value.to_string().contains("TOKEN"), "an untracked value was saved in {write:?}");
        }
    }
}

#[tokio::test]
async fn untracked_values_never_reach_saved_sent_commands() {
    let mut g = StateGraph::<Board>::new();
    g.add_node("a", |_: Board| BoardUpdate::new().log(vec!["a".to_owned()]));
    g.add_node("w", |cmd: weft_graph::Command<Board>, rt: &weft_graph::Runtime| {
        let _: String = rt.interrupt("q")?;
        Ok::<_, weft_runnable_core::Error>(cmd)
    });
    g.add_edge(START, "a");
    g.add_conditional_edges(
        "a",
        |_: &Board| {
            let update = BoardUpdate::new().secret("TOKEN".to_owned()).log(vec!["sent".to_owned()]);
            vec![Send::command("w", weft_graph::Command::<Board>::new().update(update))]
        },
        None,
    );
    let saver = Arc::new(InMemorySaver::new());
    let app = g.compile_with(CompileConfig::new().checkpointer(saver.clone())).unwrap();
    let out = app.invoke(Board::update(), &thread("t")).await.unwrap();
    assert_eq!(out.interrupts.len(), 1);
    let tuples = saver
        .list(Some(&weft_graph::checkpoint::CheckpointConfig::thread("t")), Default::default())
        .await
        .unwrap();
    let mut saw_command = false;
    for tuple in tuples {
        let text = serde_json::to_string(&tuple.checkpoint).unwrap();
        assert!(!text.contains("TOKEN"), "an untracked value was saved: {text}");
        for write in tuple.pending_writes {
            let value = write.value.to_string();
            saw_command |= value.contains("__command__") && value.contains("sent");
            assert!(!value.contains("TOKEN"), "an untracked value was saved in {write:?}");
        }
    }
    assert!(saw_command, "the sent command was saved");
}

fn json_graph() -> StateGraph<JsonState> {
    let state = JsonState::builder().channel("count", ChannelKind::LastValue).append("log").build();
    StateGraph::with_initial(state)
}

#[tokio::test]
async fn a_json_state_drops_writes_to_keys_it_does_not_declare() {
    let mut g = json_graph();
    g.add_node("a", |_: serde_json::Value| {
        JsonUpdate::new().write("count", json!(1)).write("stray", json!("x"))
    });
    g.add_edge(START, "a");
    let app = g.compile().unwrap();
    let input = JsonUpdate::new().write("log", json!(["in"])).write("unknown", json!(true));
    let out = app.invoke(GraphInput::Update(vec![input]), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.to_json(), json!({"count": 1, "log": ["in"]}));
}

#[tokio::test]
async fn a_router_without_a_destination_is_an_error_naming_the_branch_and_step() {
    let mut g = StateGraph::<Board>::new();
    g.add_node("a", |_: Board| BoardUpdate::new().log(vec!["a".to_owned()]));
    g.add_node("b", |_: Board| BoardUpdate::new().log(vec!["b".to_owned()]));
    g.add_edge(START, "a");
    g.add_edge("a", "b");
    g.add_conditional_edges("b", |_: &Board| Option::<&str>::None, None);
    let err = g.compile().unwrap().invoke(Board::update(), &RunnableConfig::default()).await.unwrap_err();
    match &err {
        GraphError::NoDestination { node, branch, step } => {
            assert_eq!((node.as_str(), branch.as_str()), ("b", "branch_0"));
            assert_eq!(*step, 2, "the step the router ran in");
        }
        other => panic!("unexpected error: {other}"),
    }
    assert!(
        err.to_string().contains("branch 'branch_0' of node 'b' did not return a valid destination"),
        "{err}"
    );

    // An empty list is no destination at all, which is fine.
    let mut g = StateGraph::<Board>::new();
    g.add_node("a", |_: Board| BoardUpdate::new().log(vec!["a".to_owned()]));
    g.add_edge(START, "a");
    g.add_conditional_edges("a", |_: &Board| Vec::<&str>::new(), None);
    let out = g.compile().unwrap().invoke(Board::update(), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.log, ["a"]);
}
