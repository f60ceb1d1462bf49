//! Node input schemas: a node taking a narrower input type reads just those channels, private ones
//! included; an input type naming no channel of the state is a compile error.
#![allow(clippy::unwrap_used, missing_docs)]

use serde::{Deserialize, Serialize};
use serde_json::json;
use weft_graph::{END, GraphError, Router, START, Send, State, StateGraph};
use weft_runnable_core::RunnableConfig;

#[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
struct Overall {
    question: String,
    answer: String,
    /// Written and read by the nodes only: the graph's output type leaves it out.
    scratch: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SeesScratch {
    scratch: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Output {
    answer: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Typo {
    questoin: String,
}

#[tokio::test]
async fn a_node_reads_only_its_input_channels_private_ones_included() {
    let mut g = StateGraph::<Overall>::new();
    g.add_node("think", |s: Overall| OverallUpdate::new().scratch(format!("thinking about {}", s.question)));
    g.add_node("say", |s: SeesScratch| OverallUpdate::new().answer(s.scratch.unwrap_or_default()));
    g.add_edge(START, "think");
    g.add_edge("think", "say");
    let app = g.compile().unwrap();
    let out: weft_graph::GraphOutput<Output> =
        app.invoke_as(&json!({"question": "tea"}), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.answer, "thinking about tea");
}

#[test]
fn an_input_type_naming_an_unknown_channel_is_a_compile_error() {
    let mut g = StateGraph::<Overall>::new();
    g.add_node("ask", |t: Typo| OverallUpdate::new().answer(t.questoin));
    g.add_edge(START, "ask");
    let err = g.compile().unwrap_err();
    assert!(
        matches!(&err, GraphError::UnknownInputChannel { node, field, .. } if node == "ask" && field == "questoin")
    );
    assert_eq!(
        err.to_string(),
        "node 'ask' takes an input type with field 'questoin', which is not a channel of the state \
         (channels: question, answer, scratch)"
    );
}

#[tokio::test]
async fn a_send_payload_struct_is_not_an_input_schema() {
    // Reached only by Sends, the node gets packets, not the state: its fields need not be channels.
    let mut g = StateGraph::<Overall>::new();
    g.add_node("ask", |t: Typo| OverallUpdate::new().answer(t.questoin));
    g.set_conditional_entry_point(|_: &Overall| vec![Send::new("ask", Typo { questoin: "x".into() })], None);
    let out = g.compile().unwrap().invoke(OverallUpdate::new(), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.answer, "x");
}

#[tokio::test]
async fn a_routers_destination_may_take_send_payloads() {
    // The map step of a map-reduce names its worker in its path map and reaches it with Sends only.
    let mut g = StateGraph::<Overall>::new();
    g.add_node("plan", |_: Overall| OverallUpdate::new().scratch("planned".to_owned()));
    g.add_node("ask", |t: Typo| OverallUpdate::new().answer(t.questoin));
    g.add_edge(START, "plan");
    g.add_conditional_edges(
        "plan",
        |_: &Overall| vec![Send::new("ask", Typo { questoin: "y".into() })],
        ["ask"],
    );
    let out = g.compile().unwrap().invoke(OverallUpdate::new(), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.answer, "y");
}

/// Refuses any other field: the router is handed its own channels only.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouterView {
    scratch: Option<String>,
}

#[tokio::test]
async fn a_router_reads_only_its_input_channels_private_ones_included() {
    let mut g = StateGraph::<Overall>::new();
    g.add_node("think", |s: Overall| OverallUpdate::new().scratch(format!("thinking about {}", s.question)));
    g.add_node("yes", |_: Overall| OverallUpdate::new().answer("scratch seen".to_owned()));
    g.add_node("no", |_: Overall| OverallUpdate::new().answer("no scratch".to_owned()));
    g.add_edge(START, "think");
    g.add_conditional_edges(
        "think",
        Router::with_input(|v: RouterView| if v.scratch.is_some() { "yes" } else { "no" }),
        ["yes", "no"],
    );
    let app = g.compile().unwrap();
    let out = app
        .invoke(OverallUpdate::new().question("tea".to_owned()), &RunnableConfig::default())
        .await
        .unwrap();
    assert_eq!(out.value.answer, "scratch seen");
}

#[tokio::test]
async fn a_conditional_entry_router_takes_an_input_type_or_the_state_by_value() {
    #[derive(Debug, Clone, Deserialize)]
    struct Question {
        question: String,
    }
    let mut g = StateGraph::<Overall>::new();
    g.add_node("short", |_: Overall| OverallUpdate::new().answer("short".to_owned()));
    g.add_node("long", |_: Overall| OverallUpdate::new().answer("long".to_owned()));
    g.set_conditional_entry_point(
        Router::with_input(|q: Question| if q.question.len() < 5 { "short" } else { "long" }),
        None,
    );
    g.add_conditional_edges(
        "short",
        Router::with_input(|s: Overall| if s.answer == "short" { END } else { "long" }),
        None,
    );
    let app = g.compile().unwrap();
    let out = app
        .invoke(OverallUpdate::new().question("tea".to_owned()), &RunnableConfig::default())
        .await
        .unwrap();
    assert_eq!(out.value.answer, "short");
    let out = app
        .invoke(OverallUpdate::new().question("oolong".to_owned()), &RunnableConfig::default())
        .await
        .unwrap();
    assert_eq!(out.value.answer, "long");
}

#[test]
fn a_router_input_type_naming_an_unknown_channel_is_a_compile_error() {
    let mut g = StateGraph::<Overall>::new();
    g.add_node("ask", |_: Overall| OverallUpdate::new());
    g.add_edge(START, "ask");
    g.add_conditional_edges(
        "ask",
        Router::with_input(|t: Typo| if t.questoin.is_empty() { END } else { "ask" }),
        None,
    );
    let err = g.compile().unwrap_err();
    assert!(matches!(
        &err,
        GraphError::UnknownRouterInputChannel { source_node, branch, field, .. }
            if source_node == "ask" && branch == "branch_0" && field == "questoin"
    ));
    assert_eq!(
        err.to_string(),
        "router 'branch_0' of node 'ask' takes an input type with field 'questoin', which is not a channel of \
         the state (channels: question, answer, scratch)"
    );
}

#[tokio::test]
async fn a_router_input_that_cannot_be_read_fails_the_run_naming_the_type() {
    #[derive(Debug, Clone, Deserialize)]
    struct NeedsScratch {
        #[allow(dead_code)]
        scratch: String,
    }
    let mut g = StateGraph::<Overall>::new();
    g.add_node("ask", |_: Overall| OverallUpdate::new());
    g.add_edge(START, "ask");
    // `scratch` is empty: a required field of the router's input type is missing.
    g.add_conditional_edges("ask", Router::with_input(|_: NeedsScratch| END), None);
    let err =
        g.compile().unwrap().invoke(OverallUpdate::new(), &RunnableConfig::default()).await.unwrap_err();
    let message = err.to_string();
    assert!(message.contains("NeedsScratch, which cannot be read from the state"), "{message}");
    assert!(message.contains("missing field `scratch`"), "{message}");
}
