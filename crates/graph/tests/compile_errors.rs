//! `compile()` rejects malformed graphs with an error naming the culprit.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use common::{Counter, CounterUpdate};
use weft_graph::{CompileConfig, END, GraphError, START, StateGraph};

fn noop(_: Counter) -> CounterUpdate {
    CounterUpdate::default()
}

fn err_of(g: &StateGraph<Counter>) -> String {
    g.compile().unwrap_err().to_string()
}

#[test]
fn graph_without_entry_is_rejected() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", noop);
    assert_eq!(err_of(&g), "graph must have an entrypoint: add at least one edge from START to another node");
}

#[test]
fn edge_from_unknown_node_names_it() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", noop);
    g.add_edge(START, "a");
    g.add_edge("zz", "a");
    assert_eq!(err_of(&g), "found edge starting at unknown node 'zz'");
}

#[test]
fn edge_to_unknown_node_names_it() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", noop);
    g.add_edge(START, "a");
    g.add_edge("a", "zz");
    assert_eq!(err_of(&g), "found edge ending at unknown node 'zz'");
}

#[test]
fn unknown_path_map_target_names_node_branch_and_target() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", noop);
    g.add_edge(START, "a");
    g.add_conditional_edges("a", |_: &Counter| "x", [("x", "nope")]);
    assert_eq!(err_of(&g), "at 'a' node, 'branch_0' branch found unknown target 'nope'");
}

#[test]
fn unknown_interrupt_node_is_rejected() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", noop);
    g.add_edge(START, "a");
    let err = g.compile_with(CompileConfig::new().interrupt_before(["nope"])).unwrap_err();
    assert_eq!(err.to_string(), "interrupt node 'nope' not found");
}

#[test]
fn duplicate_and_reserved_names_are_rejected() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", noop);
    g.add_node("a", noop);
    g.add_edge(START, "a");
    assert_eq!(err_of(&g), "node 'a' already present");

    let mut g = StateGraph::<Counter>::new();
    g.add_node(END, noop);
    assert_eq!(err_of(&g), "node '__end__' is reserved");

    for bad in ["a|b", "a:b"] {
        let mut g = StateGraph::<Counter>::new();
        g.add_node(bad, noop);
        assert!(matches!(g.compile().unwrap_err(), GraphError::ReservedCharacter { .. }), "{bad}");
    }
}

#[test]
fn end_as_source_and_start_as_target_are_rejected() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", noop);
    g.add_edge(END, "a");
    assert_eq!(err_of(&g), "END cannot be a start node");
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", noop);
    g.add_edge("a", START);
    assert_eq!(err_of(&g), "START cannot be an end node");
}

#[test]
fn waiting_edge_from_unknown_node_names_it() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", noop);
    g.add_edge(START, "a");
    g.add_waiting_edge(["a", "q"], "a");
    assert_eq!(err_of(&g), "need to add_node 'q' first");
}

#[test]
fn empty_sequence_is_rejected() {
    let mut g = StateGraph::<Counter>::new();
    g.add_sequence::<_, fn(Counter) -> CounterUpdate>(vec![]);
    assert_eq!(err_of(&g), "sequence requires at least one node");
}

#[tokio::test]
async fn recursion_limit_below_one_is_rejected() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", noop);
    g.add_edge(START, "a");
    let err = g
        .compile()
        .unwrap()
        .invoke(
            CounterUpdate::default(),
            &weft_runnable_core::RunnableConfig::default().with_recursion_limit(0),
        )
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "recursion_limit must be at least 1");
}

#[test]
fn waiting_edge_from_start_is_rejected() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", noop);
    g.add_node("b", noop);
    g.add_edge(START, "a");
    g.add_waiting_edge([START, "a"], "b");
    assert_eq!(err_of(&g), "need to add_node '__start__' first");
}

#[test]
fn nodes_no_edge_reaches_are_listed_and_routers_with_path_maps_count_as_edges() {
    let mut g = StateGraph::<Counter>::new();
    for n in ["a", "b", "c", "joined", "orphan", "only_by_command"] {
        g.add_node(n, |_: Counter| CounterUpdate::default());
    }
    g.add_edge(START, "a");
    g.add_conditional_edges("a", |_: &Counter| "b", Some(["b", "c"].into()));
    g.add_waiting_edge(["b", "c"], "joined");
    g.add_edge("orphan", "b");
    assert_eq!(g.unreached_nodes(), ["orphan", "only_by_command"]);
    // Still compiles: a Command or a Send may run them.
    assert!(g.compile().is_ok());
}

#[test]
fn a_router_without_a_path_map_may_reach_every_node() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", |_: Counter| CounterUpdate::default());
    g.add_node("b", |_: Counter| CounterUpdate::default());
    g.set_conditional_entry_point(|_: &Counter| "b", None);
    assert!(g.unreached_nodes().is_empty());
}
