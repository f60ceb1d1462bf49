//! Text drawings (`draw_ascii`): a box per node in layers, `*` for plain edges and `.` for conditional
//! ones; snapshots of the layout, which is deterministic.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use common::{Counter, CounterUpdate};
use weft_graph::{END, START, StateGraph};

fn noop(_: Counter) -> CounterUpdate {
    CounterUpdate::default()
}

fn draw(g: &StateGraph<Counter>) -> String {
    g.compile().unwrap().get_graph().draw_ascii()
}

/// `START -> agent`, `agent -.-> tools | END`, `tools -> agent`.
fn agent_loop() -> StateGraph<Counter> {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("agent", noop).add_node("tools", noop);
    g.add_edge(START, "agent");
    g.add_conditional_edges("agent", |_: &Counter| "exit", [("continue", "tools"), ("exit", END)]);
    g.add_edge("tools", "agent");
    g
}

#[test]
fn a_chain_is_a_column_of_boxes_in_edge_order() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("c", noop).add_node("a", noop).add_node("b", noop);
    g.add_edge(START, "c").add_edge("c", "a").add_edge("a", "b");
    let link = "      *\n      *\n      *\n";
    let boxed = |name: &str| format!("    +---+\n    | {name} |\n    +---+\n");
    let expected = "+-----------+\n| __start__ |\n+-----------+\n".to_owned()
        + link
        + &boxed("c")
        + link
        + &boxed("a")
        + link
        + &boxed("b")
        + link
        + " +---------+\n | __end__ |\n +---------+\n";
    assert_eq!(draw(&g), expected);
}

#[test]
fn a_router_loop_draws_conditional_edges_dotted_and_the_way_back_beside_them() {
    let expected = "    +-----------+\n    | __start__ |\n    +-----------+\n          *\n          *\n          *\n\
                    \x20     +-------+\n      | agent |\n      +-------+\n         ..**\n      ..*** ...\n\
                    \x20   ..**       ..\n+-------+  +---------+\n| tools |  | __end__ |\n+-------+  +---------+\n";
    assert_eq!(draw(&agent_loop()), expected);
}

#[test]
fn fan_out_and_in_with_an_edge_across_a_layer() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", noop).add_node("b", noop).add_node("c", noop).add_node("d", noop);
    g.add_edge(START, "a").add_edge("a", "b").add_edge("a", "c").add_edge("b", "d").add_edge("c", "d");
    g.add_edge("a", "d");
    let expected = "  +-----------+\n  | __start__ |\n  +-----------+\n        *\n        *\n        *\n\
                    \x20     +---+\n      | a |\n      +---+\n       ***\n    ***  ****\n  **     *   **\n\
                    +---+  +---+  *\n| b |  | c |  *\n+---+  +---+  *\n  **     *   **\n    ***  ****\n\
                    \x20      ***\n      +---+\n      | d |\n      +---+\n        *\n        *\n        *\n\
                    \x20  +---------+\n   | __end__ |\n   +---------+\n";
    assert_eq!(draw(&g), expected);
}

#[test]
fn subgraphs_drawn_inline_show_their_ids_and_self_loops_are_left_out() {
    let mut sub = StateGraph::<Counter>::new();
    sub.add_node("x", noop).add_node("y", noop);
    sub.add_edge(START, "x").add_edge("x", "y");
    let mut g = StateGraph::<Counter>::new();
    g.add_node("inner", sub.compile().unwrap()).add_node("spin", noop);
    g.add_edge(START, "inner").add_edge("inner", "spin");
    g.add_conditional_edges("spin", |_: &Counter| END, [("again", "spin"), ("done", END)]);
    let text = g.compile().unwrap().get_graph_xray(true).draw_ascii();
    for line in ["| inner:x |", "| inner:y |", "| spin |", "| __end__ |"] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    assert!(!text.contains("| inner |"));
    // Boxes follow the edges down: inner:x above inner:y above spin above __end__.
    let row = |label: &str| text.lines().position(|l| l.contains(label)).unwrap();
    assert!(
        row("inner:x") < row("inner:y") && row("inner:y") < row("| spin") && row("| spin") < row("__end__")
    );
    assert_eq!(text, g.compile().unwrap().get_graph_xray(true).draw_ascii());
}

#[test]
fn nodes_no_edge_touches_sit_on_the_top_layer() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", noop).add_node("lonely", noop);
    g.add_edge(START, "a");
    let text = draw(&g);
    let first = text.lines().nth(1).unwrap();
    assert!(first.contains("| __start__ |") && first.contains("| lonely |"), "{text}");
}
