//! The graph names of the facade: the prelude, `weft::graph`, and the derive through the facade's path.
#![allow(clippy::unwrap_used, missing_docs)]

use serde::{Deserialize, Serialize};
use weft::prelude::*;

/// A state whose derive reaches the graph crate through the facade only (`weft::graph`), as a crate that
/// depends on `weft` alone does by default.
#[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
#[state(crate = weft::graph)]
struct Tally {
    #[state(append)]
    seen: Vec<String>,
    total: i64,
}

/// Compiles only while the prelude leaves the standard `Send` trait alone.
fn is_send<T: Send>(_: &T) -> bool {
    true
}

#[tokio::test]
async fn a_graph_builds_and_runs_from_the_prelude_and_the_facade_path() {
    let mut graph = StateGraph::<Tally>::new();
    graph.add_node("count", |s: Tally| Tally::update().total(s.total + 1).seen(vec!["count".to_owned()]));
    graph.add_conditional_edges("count", |s: &Tally| if s.total < 2 { "count" } else { END }, None);
    graph.add_edge(START, "count");
    let app = graph.compile_with(CompileConfig::new().name("tally")).unwrap();
    assert!(is_send(&app));
    let out =
        app.invoke(GraphInput::Update(vec![Tally::update()]), &RunnableConfig::default()).await.unwrap();
    assert_eq!((out.value.total, out.value.seen.len()), (2, 2));
    assert_eq!(app.name(), "tally");
}

#[tokio::test]
async fn send_is_reached_through_weft_graph_and_messages_state_through_the_prelude() {
    #[derive(Debug, Clone, Serialize, Deserialize)]
    struct Word(String);

    let mut graph = StateGraph::<Tally>::new();
    graph.add_node("word", |w: Word| Tally::update().seen(vec![w.0]));
    graph.set_conditional_entry_point(
        |_: &Tally| {
            vec![
                weft::graph::Send::new("word", Word("a".into())),
                weft::graph::Send::new("word", Word("b".into())),
            ]
        },
        None,
    );
    let app = graph.compile().unwrap();
    let out = app.invoke(Tally::update(), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.seen, ["a", "b"]);
    let messages = MessagesState::update().messages(vec![Message::human("hi")]);
    assert_eq!(messages.messages.map(|m| m.len()), Some(1));
}
