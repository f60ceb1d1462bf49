//! Input/output types of a graph and node-level input types (LangGraph's input, output and node schemas).
#![allow(clippy::unwrap_used, missing_docs)]

use serde::{Deserialize, Serialize};
use weft_graph::{START, State, StateGraph};
use weft_runnable_core::RunnableConfig;

/// The whole state, with a private scratch channel the caller never sees.
#[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
struct Full {
    question: String,
    scratch: Option<String>,
    answer: Option<String>,
}

#[derive(Serialize)]
struct Ask {
    question: String,
}

#[derive(Debug, Deserialize, PartialEq)]
struct Reply {
    answer: Option<String>,
}

/// What the `answer` node reads: only the scratch channel.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ScratchOnly {
    scratch: Option<String>,
}

#[tokio::test]
async fn typed_input_and_output_see_only_their_fields() {
    let mut g = StateGraph::<Full>::new();
    g.add_node("think", |s: Full| Full::update().scratch(format!("thinking about {}", s.question)));
    g.add_node("answer", |s: ScratchOnly| {
        Full::update().answer(format!("done {}", s.scratch.unwrap_or_default()))
    });
    g.add_edge(START, "think");
    g.add_edge("think", "answer");
    let app = g.compile().unwrap();
    let out = app
        .invoke_as::<_, Reply>(&Ask { question: "rust".to_owned() }, &RunnableConfig::default())
        .await
        .unwrap();
    assert_eq!(out.value, Reply { answer: Some("done thinking about rust".to_owned()) });
}

#[tokio::test]
async fn an_input_field_that_is_not_a_channel_is_an_error_naming_it() {
    #[derive(Serialize)]
    struct Wrong {
        nope: i32,
    }
    let mut g = StateGraph::<Full>::new();
    g.add_node("think", |_: Full| ());
    g.add_edge(START, "think");
    let err = g
        .compile()
        .unwrap()
        .invoke_as::<_, Reply>(&Wrong { nope: 1 }, &RunnableConfig::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("'nope'"), "{err}");
}
