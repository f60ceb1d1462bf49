//! Routers typed with an enum of destinations (`#[derive(Destinations)]`): they route at run time, draw
//! their edges and have them checked at compile without a path map.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use common::{Counter, CounterUpdate};
use weft_graph::{Destinations, END, GraphError, MermaidOptions, PathMap, START, StateGraph};
use weft_runnable_core::RunnableConfig;

#[derive(Destinations, Debug, Clone, Copy)]
enum Next {
    Tools,
    #[route(name = "human review")]
    Review,
    #[route(end)]
    Done,
}

fn noop(_: Counter) -> CounterUpdate {
    CounterUpdate::default()
}

fn log(name: &'static str) -> impl Fn(Counter) -> CounterUpdate + Send + Sync + 'static {
    move |_| CounterUpdate::log(name)
}

/// `agent` routes by the count: 0 → tools, 1 → human review, else END; both come back to `agent`.
fn graph() -> StateGraph<Counter> {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("agent", |s: Counter| CounterUpdate::count(s.count + 1));
    g.add_node("tools", log("tools")).add_node("human review", log("review"));
    g.add_edge(START, "agent").add_edge("tools", "agent").add_edge("human review", "agent");
    g.add_conditional_edges(
        "agent",
        |s: &Counter| match s.count {
            1 => Next::Tools,
            2 => Next::Review,
            _ => Next::Done,
        },
        PathMap::none(),
    );
    g
}

#[test]
fn the_derive_lists_variants_as_node_names() {
    assert_eq!(<Next as Destinations>::destinations(), ["tools", "human review", END]);
    assert_eq!(
        <Option<Next> as weft_graph::IntoRoutes>::destinations(),
        Some(&["tools", "human review", END][..])
    );
    assert_eq!(<&str as weft_graph::IntoRoutes>::destinations(), None);
}

#[tokio::test]
async fn a_router_returning_the_enum_routes_to_its_variants() {
    let app = graph().compile().unwrap();
    let out = app.invoke(CounterUpdate::count(0), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.count, 3);
    assert_eq!(out.value.log, ["tools", "review"]);
}

#[test]
fn its_edges_are_drawn_without_a_path_map() {
    let app = graph().compile().unwrap();
    let drawn = app.get_graph().draw_mermaid_with(&MermaidOptions::new().with_styles(false));
    assert_eq!(
        drawn,
        "graph TD;\n\t__start__ --> agent;\n\tagent -.-> __end__;\n\tagent -.-> human\\20review;\n\
         \tagent -.-> tools;\n\thuman\\20review --> agent;\n\ttools --> agent;\n"
    );
}

#[test]
fn an_optional_enum_router_draws_the_same() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("agent", noop).add_node("tools", noop).add_node("human review", noop);
    g.add_edge(START, "agent");
    g.add_conditional_edges("agent", |_: &Counter| Some(Next::Done), PathMap::none());
    let drawn = g.compile().unwrap().get_graph();
    let targets: Vec<&str> = drawn.edges().filter(|e| e.source == "agent").map(|e| e.target).collect();
    assert_eq!(targets, [END, "human review", "tools"]);
}

#[test]
fn a_variant_naming_no_node_fails_compile_naming_it() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("agent", noop).add_node("tools", noop);
    g.add_edge(START, "agent");
    g.add_conditional_edges("agent", |_: &Counter| Next::Done, PathMap::none());
    let err = g.compile().unwrap_err();
    assert!(
        matches!(&err, GraphError::UnknownBranchTarget { target, .. } if target == "human review"),
        "{err}"
    );
    assert_eq!(err.to_string(), "at 'agent' node, 'branch_0' branch found unknown target 'human review'");
}

#[test]
fn an_explicit_path_map_still_wins() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("agent", noop).add_node("tools", noop);
    g.add_edge(START, "agent");
    // The keys are the enum's names; the map sends "human review" to tools.
    g.add_conditional_edges(
        "agent",
        |_: &Counter| Next::Review,
        [("tools", "tools"), ("human review", "tools"), (END, END)],
    );
    assert!(g.compile().is_ok());
}

/// The channels a router with an input type reads.
#[derive(Debug, Clone, serde::Deserialize)]
struct CountOnly {
    count: i64,
}

#[tokio::test]
async fn a_router_with_an_input_type_returning_the_enum_is_drawn_and_routes() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("agent", |s: Counter| CounterUpdate::count(s.count + 1));
    g.add_node("tools", log("tools")).add_node("human review", log("review"));
    g.add_edge(START, "agent").add_edge("tools", "agent").add_edge("human review", "agent");
    g.add_conditional_edges(
        "agent",
        weft_graph::Router::with_input(|c: CountOnly| match c.count {
            1 => Next::Tools,
            2 => Next::Review,
            _ => Next::Done,
        }),
        PathMap::none(),
    );
    let app = g.compile().unwrap();
    let drawn = app.get_graph().draw_mermaid_with(&MermaidOptions::new().with_styles(false));
    assert!(drawn.contains("agent -.-> human\\20review;"), "{drawn}");
    assert!(drawn.contains("agent -.-> tools;"), "{drawn}");
    let out = app.invoke(CounterUpdate::count(0), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.log, ["tools", "review"]);
}
