//! Which edges `get_graph()` finds, checked against LangGraph's own output for the same graphs
//! (LangGraph 1.2 `get_graph().draw_mermaid(with_styles=False)`; several are its test snapshots).
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use common::{Counter, CounterUpdate};
use weft_graph::{DrawEdge, END, MermaidOptions, NodeConfig, START, StateGraph};

fn noop(_: Counter) -> CounterUpdate {
    CounterUpdate::default()
}

fn graph_with(nodes: &[&str]) -> StateGraph<Counter> {
    let mut g = StateGraph::<Counter>::new();
    for name in nodes {
        g.add_node(*name, noop);
    }
    g
}

fn edges_only(g: &StateGraph<Counter>) -> String {
    g.compile().unwrap().get_graph().draw_mermaid_with(&MermaidOptions::new().with_styles(false))
}

#[test]
fn linear_chain_gets_an_implicit_edge_to_end() {
    let mut g = StateGraph::<Counter>::new();
    g.add_sequence(vec![("a", noop), ("b", noop), ("c", noop)]);
    g.add_edge(START, "a");
    assert_eq!(edges_only(&g), "graph TD;\n\t__start__ --> a;\n\ta --> b;\n\tb --> c;\n\tc --> __end__;\n");
}

#[test]
fn plain_edge_to_end_is_drawn_only_for_nodes_without_other_edges() {
    let mut g = graph_with(&["a", "b"]);
    g.add_edge(START, "a").add_edge("a", "b").add_edge("b", END);
    assert_eq!(edges_only(&g), "graph TD;\n\t__start__ --> a;\n\ta --> b;\n\tb --> __end__;\n");

    let mut g = graph_with(&["a", "b"]);
    g.add_edge(START, "a").add_edge("a", "b").add_edge("a", END);
    assert_eq!(edges_only(&g), "graph TD;\n\t__start__ --> a;\n\ta --> b;\n\tb --> __end__;\n");
}

#[test]
fn conditional_edges_are_dotted_and_labelled_with_path_map_keys() {
    let mut g = graph_with(&["agent", "tools"]);
    g.add_edge(START, "agent");
    g.add_conditional_edges("agent", |_: &Counter| "exit", [("continue", "tools"), ("exit", END)]);
    g.add_edge("tools", "agent");
    assert_eq!(
        edges_only(&g),
        "graph TD;\n\t__start__ --> agent;\n\tagent -. &nbsp;exit&nbsp; .-> __end__;\n\
         \tagent -. &nbsp;continue&nbsp; .-> tools;\n\ttools --> agent;\n"
    );
    let drawn = g.compile().unwrap().get_graph();
    let edges: Vec<DrawEdge<'_>> = drawn.edges().collect();
    assert_eq!(
        edges[1],
        DrawEdge { source: "agent", target: "__end__", label: Some("exit"), conditional: true }
    );
    assert_eq!(edges[3], DrawEdge { source: "tools", target: "agent", label: None, conditional: false });
}

#[test]
fn path_map_keys_equal_to_their_target_are_not_labels_and_self_loops_come_last() {
    let mut g = graph_with(&["worker_node"]);
    g.add_edge(START, "worker_node");
    g.add_conditional_edges("worker_node", |_: &Counter| END, ["worker_node", END]);
    assert_eq!(
        edges_only(&g),
        "graph TD;\n\t__start__ --> worker_node;\n\tworker_node -.-> __end__;\n\tworker_node -.-> worker_node;\n"
    );
}

#[test]
fn edges_sort_by_name_with_escaped_ids() {
    let mut g = graph_with(&["Researcher", "Chart Generator", "Call Tool"]);
    g.add_conditional_edges(
        "Researcher",
        |_: &Counter| "end",
        [("redo", "Researcher"), ("continue", "Chart Generator"), ("call_tool", "Call Tool"), ("end", END)],
    );
    g.add_conditional_edges(
        "Chart Generator",
        |_: &Counter| "end",
        [("continue", "Researcher"), ("call_tool", "Call Tool"), ("end", END)],
    );
    g.add_conditional_edges(
        "Call Tool",
        |_: &Counter| "Researcher",
        [("Researcher", "Researcher"), ("Chart Generator", "Chart Generator")],
    );
    g.set_entry_point("Researcher");
    assert_eq!(
        edges_only(&g),
        "graph TD;\n\tCall\\20Tool -.-> Chart\\20Generator;\n\tCall\\20Tool -.-> Researcher;\n\
         \tChart\\20Generator -. &nbsp;call_tool&nbsp; .-> Call\\20Tool;\n\
         \tChart\\20Generator -. &nbsp;continue&nbsp; .-> Researcher;\n\
         \tChart\\20Generator -. &nbsp;end&nbsp; .-> __end__;\n\
         \tResearcher -. &nbsp;call_tool&nbsp; .-> Call\\20Tool;\n\
         \tResearcher -. &nbsp;continue&nbsp; .-> Chart\\20Generator;\n\
         \tResearcher -. &nbsp;end&nbsp; .-> __end__;\n\t__start__ --> Researcher;\n\
         \tResearcher -. &nbsp;redo&nbsp; .-> Researcher;\n"
    );
}

#[test]
fn conditional_edge_without_path_map_declares_no_targets() {
    let mut g = graph_with(&["inc"]);
    g.add_edge(START, "inc");
    g.add_conditional_edges("inc", |_: &Counter| END, None);
    assert_eq!(edges_only(&g), "graph TD;\n\t__start__ --> inc;\n\tinc --> __end__;\n");

    let mut g = graph_with(&["a", "b", "c"]);
    g.add_edge(START, "a");
    g.add_conditional_edges("a", |_: &Counter| "b", None);
    g.add_edge("b", END).add_edge("c", END);
    assert_eq!(edges_only(&g), "graph TD;\n\t__start__ --> a;\n\ta --> __end__;\n");
}

#[test]
fn a_loop_without_exit_ends_where_langgraph_dry_run_stops() {
    // LangGraph's dry run stops after 251 steps; the node of the last step gets a dotted edge to END.
    let mut g = graph_with(&["human", "agent"]);
    g.add_edge(START, "human").add_edge("human", "agent").add_edge("agent", "human");
    assert_eq!(
        edges_only(&g),
        "graph TD;\n\t__start__ --> human;\n\tagent --> human;\n\thuman --> agent;\n\tagent -.-> __end__;\n"
    );

    let mut g = graph_with(&["x", "y", "z"]);
    g.add_edge(START, "x").add_edge("x", "y").add_edge("y", "z").add_edge("z", "x");
    assert_eq!(
        edges_only(&g),
        "graph TD;\n\t__start__ --> x;\n\tx --> y;\n\ty --> z;\n\tz --> x;\n\tx -.-> __end__;\n"
    );
}

#[test]
fn a_loop_with_a_branch_to_end_gets_no_extra_end_edge() {
    let mut g = graph_with(&["a", "b"]);
    g.add_edge(START, "a").add_edge("a", "b").add_edge("b", "a");
    g.add_conditional_edges("a", |_: &Counter| END, [("quit", END)]);
    assert_eq!(
        edges_only(&g),
        "graph TD;\n\t__start__ --> a;\n\ta -. &nbsp;quit&nbsp; .-> __end__;\n\ta --> b;\n\tb --> a;\n"
    );
}

#[test]
fn a_node_keeps_its_declared_targets_each_time_it_runs() {
    // `a` routes to itself, then (once the run would finish) to the deferred `x`: the edge into `x` comes
    // from `a`'s declared targets, not from an implicit edge.
    let mut g = StateGraph::<Counter>::new();
    g.add_node_with("x", noop, NodeConfig::new().defer()).add_node("a", noop);
    g.add_edge("a", END).add_edge(START, "a");
    g.add_conditional_edges("a", |_: &Counter| END, [("k0", "a"), ("k1", "x"), ("k2", END)]);
    g.add_conditional_edges("x", |_: &Counter| END, [("k0", "a")]);
    assert_eq!(
        edges_only(&g),
        "graph TD;\n\t__start__ --> a;\n\ta -. &nbsp;k2&nbsp; .-> __end__;\n\ta -. &nbsp;k1&nbsp; .-> x;\n\
         \tx -. &nbsp;k0&nbsp; .-> a;\n\ta -. &nbsp;k0&nbsp; .-> a;\n"
    );
}

#[test]
fn waiting_edge_is_a_solid_edge_from_each_source() {
    let mut g = graph_with(&["up", "side", "other", "down"]);
    g.set_entry_point("up");
    g.add_edge("up", "side").add_edge("up", "other");
    g.add_waiting_edge(["up", "side"], "down");
    g.set_finish_point("down");
    assert_eq!(
        edges_only(&g),
        "graph TD;\n\t__start__ --> up;\n\tside --> down;\n\tup --> down;\n\tup --> other;\n\tup --> side;\n\
         \tdown --> __end__;\n\tother --> __end__;\n"
    );
}

fn fan_out(defer: bool, waiting: bool) -> StateGraph<Counter> {
    let mut g = graph_with(&["rewrite_query", "analyzer_one", "retriever_one", "retriever_two"]);
    let config = if defer { NodeConfig::new().defer() } else { NodeConfig::new() };
    g.add_node_with("qa", noop, config);
    g.set_entry_point("rewrite_query");
    g.add_edge("rewrite_query", "analyzer_one").add_edge("analyzer_one", "retriever_one");
    g.add_edge("rewrite_query", "retriever_two");
    if waiting {
        g.add_waiting_edge(["retriever_one", "retriever_two"], "qa");
    } else {
        g.add_edge("retriever_one", "qa").add_edge("retriever_two", "qa");
    }
    g.set_finish_point("qa");
    g
}

#[test]
fn fan_in_draws_the_same_with_waiting_edges_deferred_nodes_or_plain_edges() {
    let expected = "graph TD;\n\t__start__ --> rewrite_query;\n\tanalyzer_one --> retriever_one;\n\
                    \tretriever_one --> qa;\n\tretriever_two --> qa;\n\trewrite_query --> analyzer_one;\n\
                    \trewrite_query --> retriever_two;\n\tqa --> __end__;\n";
    assert_eq!(edges_only(&fan_out(false, true)), expected);
    assert_eq!(edges_only(&fan_out(true, true)), expected);
    assert_eq!(edges_only(&fan_out(true, false)), expected);
}

#[test]
fn a_deferred_node_reached_after_the_others_finish_gets_a_dotted_edge_from_the_last_step() {
    for waiting in [false, true] {
        let mut g = graph_with(&["rewrite_query", "analyzer_one", "retriever_one", "retriever_two"]);
        g.add_node_with("qa", noop, NodeConfig::new().defer());
        g.set_entry_point("rewrite_query");
        g.add_edge("rewrite_query", "retriever_one").add_edge("retriever_one", "analyzer_one");
        g.add_edge("rewrite_query", "retriever_two");
        if waiting {
            g.add_waiting_edge(["retriever_one", "retriever_two"], "qa");
        } else {
            g.add_edge("retriever_one", "qa").add_edge("retriever_two", "qa");
        }
        g.set_finish_point("qa");
        assert_eq!(
            edges_only(&g),
            "graph TD;\n\t__start__ --> rewrite_query;\n\tanalyzer_one -.-> qa;\n\tretriever_one --> analyzer_one;\n\
             \tretriever_one --> qa;\n\tretriever_two --> qa;\n\trewrite_query --> retriever_one;\n\
             \trewrite_query --> retriever_two;\n\tqa --> __end__;\n",
            "waiting edge: {waiting}"
        );
    }
}

#[test]
fn waiting_edge_to_end_leaves_its_sources_as_termini() {
    let mut g = graph_with(&["A", "B"]);
    g.add_edge(START, "A").add_edge(START, "B");
    g.add_waiting_edge(["A", "B"], END);
    assert_eq!(
        edges_only(&g),
        "graph TD;\n\t__start__ --> A;\n\t__start__ --> B;\n\tA --> __end__;\n\tB --> __end__;\n"
    );
}

#[test]
fn conditional_entry_point_is_dotted_from_start() {
    let mut g = graph_with(&["left", "right"]);
    g.set_conditional_entry_point(|_: &Counter| "go-left", [("go-left", "left"), ("go-right", "right")]);
    g.add_conditional_edges("left", |_: &Counter| END, [(END, END)]);
    g.add_edge("right", END);
    assert_eq!(
        edges_only(&g),
        "graph TD;\n\t__start__ -. &nbsp;go-left&nbsp; .-> left;\n\t__start__ -. &nbsp;go-right&nbsp; .-> right;\n\
         \tleft -.-> __end__;\n\tright --> __end__;\n"
    );

    let mut g = graph_with(&["get_weather"]);
    g.add_edge("get_weather", END);
    g.set_conditional_entry_point(|_: &Counter| Vec::<String>::new(), ["get_weather"]);
    assert_eq!(edges_only(&g), "graph TD;\n\t__start__ -.-> get_weather;\n\tget_weather --> __end__;\n");
}

#[test]
fn nodes_without_outgoing_edges_get_a_solid_edge_to_end() {
    let mut g = graph_with(&["A", "B"]);
    g.add_edge(START, "A").add_edge(START, "B");
    assert_eq!(
        edges_only(&g),
        "graph TD;\n\t__start__ --> A;\n\t__start__ --> B;\n\tA --> __end__;\n\tB --> __end__;\n"
    );
}

#[test]
fn a_plain_edge_and_a_branch_to_the_same_node_draw_as_the_branch() {
    let mut g = graph_with(&["a", "b"]);
    g.add_edge(START, "a").add_edge("a", "b");
    g.add_conditional_edges("a", |_: &Counter| "k", [("k", "b"), ("z", END)]);
    assert_eq!(
        edges_only(&g),
        "graph TD;\n\t__start__ --> a;\n\ta -. &nbsp;z&nbsp; .-> __end__;\n\ta -. &nbsp;k&nbsp; .-> b;\n\tb --> __end__;\n"
    );
}
