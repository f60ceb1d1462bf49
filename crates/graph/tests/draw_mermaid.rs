//! Mermaid text with styles, options and node metadata, checked against LangGraph's own output for the same
//! graphs (LangGraph 1.2 `get_graph().draw_mermaid(...)`).
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use common::{Counter, CounterUpdate};
use serde_json::json;
use weft_graph::{CompileConfig, CurveStyle, END, MermaidOptions, NodeConfig, START, StateGraph};

const STYLES: &str = "\tclassDef default fill:#f2f0ff,line-height:1.2\n\tclassDef first fill-opacity:0\n\
                      \tclassDef last fill:#bfb6fc\n";

fn noop(_: Counter) -> CounterUpdate {
    CounterUpdate::default()
}

fn front(curve: &str) -> String {
    format!("---\nconfig:\n  flowchart:\n    curve: {curve}\n---\ngraph TD;\n")
}

#[test]
fn styled_chain_lists_nodes_in_insertion_order_between_first_and_last() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("c", noop).add_node("a", noop).add_node("b", noop);
    g.add_edge(START, "c").add_edge("c", "a").add_edge("a", "b");
    let expected = front("linear")
        + "\t__start__([<p>__start__</p>]):::first\n\tc(c)\n\ta(a)\n\tb(b)\n\t__end__([<p>__end__</p>]):::last\n\
           \t__start__ --> c;\n\ta --> b;\n\tc --> a;\n\tb --> __end__;\n"
        + STYLES;
    assert_eq!(g.compile().unwrap().get_graph().draw_mermaid(), expected);
}

#[test]
fn styled_conditional_edges_keep_labels() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("agent", noop).add_node("tools", noop);
    g.add_edge(START, "agent");
    g.add_conditional_edges("agent", |_: &Counter| "exit", [("continue", "tools"), ("exit", END)]);
    g.add_edge("tools", "agent");
    let expected = front("linear")
        + "\t__start__([<p>__start__</p>]):::first\n\tagent(agent)\n\ttools(tools)\n\
           \t__end__([<p>__end__</p>]):::last\n\t__start__ --> agent;\n\tagent -. &nbsp;exit&nbsp; .-> __end__;\n\
           \tagent -. &nbsp;continue&nbsp; .-> tools;\n\ttools --> agent;\n"
        + STYLES;
    assert_eq!(g.compile().unwrap().get_graph().draw_mermaid(), expected);
}

#[test]
fn unreachable_nodes_leave_start_and_end_unstyled() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", noop).add_node("lonely", noop);
    g.add_edge(START, "a");
    let drawn = g.compile().unwrap().get_graph();
    assert!(drawn.first_node().is_none() && drawn.last_node().is_none());
    let expected = front("linear")
        + "\t__start__(<p>__start__</p>)\n\ta(a)\n\tlonely(lonely)\n\t__end__(<p>__end__</p>)\n\
           \t__start__ --> a;\n\ta --> __end__;\n"
        + STYLES;
    assert_eq!(drawn.draw_mermaid(), expected);
}

#[test]
fn metadata_and_breakpoints_show_under_the_node_name() {
    let mut g = StateGraph::<Counter>::new();
    let mut config = NodeConfig::new();
    config.metadata.insert("team".into(), json!("blue"));
    config.metadata.insert("n".into(), json!(3));
    config.metadata.insert("ok".into(), json!(true));
    g.add_node_with("a", noop, config).add_node("b", noop).add_node("c", noop);
    g.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c");
    let app =
        g.compile_with(CompileConfig::new().interrupt_before(["b", "c"]).interrupt_after(["c"])).unwrap();
    let expected = front("linear")
        + "\t__start__([<p>__start__</p>]):::first\n\ta(a<hr/><small><em>team = blue\nn = 3\nok = True</em></small>)\n\
           \tb(b<hr/><small><em>__interrupt = before</em></small>)\n\
           \tc(c<hr/><small><em>__interrupt = before,after</em></small>)\n\t__end__([<p>__end__</p>]):::last\n\
           \t__start__ --> a;\n\ta --> b;\n\tb --> c;\n\tc --> __end__;\n"
        + STYLES;
    assert_eq!(app.get_graph().draw_mermaid(), expected);
    assert_eq!(app.get_graph().node("b").unwrap().metadata.as_ref().unwrap()["__interrupt"], json!("before"));

    // LangGraph tests `name in interrupt_before`; with "*" that is never true, so nothing is marked.
    let app = g.compile_with(CompileConfig::new().interrupt_before(["*"])).unwrap();
    assert!(app.get_graph().draw_mermaid().contains("\tb(b)\n\tc(c)\n"));
    assert_eq!(app.get_graph().node("b").unwrap().metadata, None);
}

#[test]
fn deferred_nodes_are_marked_after_their_metadata_and_before_breakpoints() {
    let mut g = StateGraph::<Counter>::new();
    let mut config = NodeConfig::new().defer();
    config.metadata.insert("team".into(), json!("red"));
    g.add_node("a", noop).add_node_with("q", noop, config);
    g.add_edge(START, "a").add_edge("a", "q");
    let app = g.compile_with(CompileConfig::new().interrupt_after(["q"])).unwrap();
    let expected = front("linear")
        + "\t__start__([<p>__start__</p>]):::first\n\ta(a)\n\
           \tq(q<hr/><small><em>team = red\ndefer = True\n__interrupt = after</em></small>)\n\
           \t__end__([<p>__end__</p>]):::last\n\t__start__ --> a;\n\ta --> q;\n\tq --> __end__;\n"
        + STYLES;
    assert_eq!(app.get_graph().draw_mermaid(), expected);
}

#[test]
fn long_labels_wrap_and_curve_style_is_configurable() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", noop).add_node("b", noop);
    g.add_edge(START, "a");
    g.add_conditional_edges(
        "a",
        |_: &Counter| END,
        [("one two three four five six seven eight nine ten eleven", "b"), ("x", END)],
    );
    let app = g.compile().unwrap();
    let nodes = "\t__start__([<p>__start__</p>]):::first\n\ta(a)\n\tb(b)\n\t__end__([<p>__end__</p>]):::last\n\
                 \t__start__ --> a;\n\ta -. &nbsp;x&nbsp; .-> __end__;\n";
    let expected = front("linear")
        + nodes
        + "\ta -. &nbsp;one two three four five six seven eight nine&nbsp<br>&nbspten eleven&nbsp; .-> b;\n\
           \tb --> __end__;\n"
        + STYLES;
    assert_eq!(app.get_graph().draw_mermaid(), expected);

    let options =
        MermaidOptions { wrap_label_n_words: 3, ..MermaidOptions::new().curve_style(CurveStyle::Basis) };
    let expected = front("basis")
        + nodes
        + "\ta -. &nbsp;one two three&nbsp<br>&nbspfour five six&nbsp<br>&nbspseven eight nine&nbsp<br>&nbspten \
           eleven&nbsp; .-> b;\n\tb --> __end__;\n"
        + STYLES;
    assert_eq!(app.get_graph().draw_mermaid_with(&options), expected);
}

#[test]
fn names_wrapped_in_markdown_characters_are_put_in_paragraphs() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("_x_", noop);
    g.add_edge(START, "_x_");
    let expected = front("linear")
        + "\t__start__([<p>__start__</p>]):::first\n\t_x_(<p>_x_</p>)\n\t__end__([<p>__end__</p>]):::last\n\
           \t__start__ --> _x_;\n\t_x_ --> __end__;\n"
        + STYLES;
    assert_eq!(g.compile().unwrap().get_graph().draw_mermaid(), expected);
}

#[test]
fn accessors_list_nodes_and_edges_in_drawing_order() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("b", noop).add_node("a", noop);
    g.add_edge(START, "b");
    g.add_conditional_edges("b", |_: &Counter| "go", [("go", "a"), ("stop", END)]);
    let drawn = g.compile().unwrap().get_graph();
    let names: Vec<&str> = drawn.nodes().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["__start__", "b", "a", "__end__"]);
    let edges: Vec<(&str, &str, Option<&str>, bool)> =
        drawn.edges().map(|e| (e.source, e.target, e.label, e.conditional)).collect();
    assert_eq!(
        edges,
        [
            ("__start__", "b", None, false),
            ("b", "__end__", Some("stop"), true),
            ("b", "a", Some("go"), true),
            ("a", "__end__", None, false),
        ]
    );
    assert_eq!(drawn.first_node().unwrap().name, "__start__");
    assert_eq!(drawn.last_node().unwrap().name, "__end__");
}
