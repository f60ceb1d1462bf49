//! Subgraphs drawn inline (`get_graph_xray`), checked against LangGraph's own output for the same graphs
//! (LangGraph 1.2 / langchain-core 1.8 `get_graph(xray=...).draw_mermaid(...)`).
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use common::{Counter, CounterUpdate};
use weft_graph::{CompiledGraph, END, MermaidOptions, START, StateGraph, Xray};

const STYLES: &str = "\tclassDef default fill:#f2f0ff,line-height:1.2\n\tclassDef first fill-opacity:0\n\
                      \tclassDef last fill:#bfb6fc\n";
const FRONT: &str = "---\nconfig:\n  flowchart:\n    curve: linear\n---\ngraph TD;\n";

fn noop(_: Counter) -> CounterUpdate {
    CounterUpdate::default()
}

fn plain(app: &CompiledGraph<Counter>, xray: impl Into<Xray>) -> String {
    app.get_graph_xray(xray).draw_mermaid_with(&MermaidOptions::new().with_styles(false))
}

/// `START -> a -> b`.
fn chain() -> CompiledGraph<Counter> {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", noop).add_node("b", noop);
    g.add_edge(START, "a").add_edge("a", "b");
    g.compile().unwrap()
}

/// `START -> sub -> z` with `sub` the chain.
fn parent_of_chain() -> CompiledGraph<Counter> {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("sub", chain()).add_node("z", noop);
    g.add_edge(START, "sub").add_edge("sub", "z");
    g.compile().unwrap()
}

#[test]
fn a_chain_subgraph_is_drawn_in_a_block_with_its_ends_trimmed() {
    let app = parent_of_chain();
    let expected = FRONT.to_owned()
        + "\t__start__([<p>__start__</p>]):::first\n\tz(z)\n\t__end__([<p>__end__</p>]):::last\n\
           \t__start__ --> sub\\3aa;\n\tsub\\3ab --> z;\n\tz --> __end__;\n\
           \tsubgraph sub\n\tsub\\3aa(a)\n\tsub\\3ab(b)\n\tsub\\3aa --> sub\\3ab;\n\tend\n"
        + STYLES;
    assert_eq!(app.get_graph_xray(true).draw_mermaid(), expected);
    assert_eq!(app.get_graph_xray(1).draw_mermaid(), expected);
    let drawn = app.get_graph_xray(true);
    let a = drawn.node("sub:a").unwrap();
    assert_eq!((a.id.as_str(), a.name.as_str()), ("sub:a", "a"));
    assert!(drawn.node("sub").is_none());
}

#[test]
fn without_xray_a_subgraph_is_one_node() {
    let app = parent_of_chain();
    let expected = "graph TD;\n\t__start__ --> sub;\n\tsub --> z;\n\tz --> __end__;\n";
    assert_eq!(plain(&app, false), expected);
    assert_eq!(plain(&app, 0), expected);
    assert_eq!(app.get_graph().draw_mermaid(), app.get_graph_xray(Xray::Off).draw_mermaid());
}

#[test]
fn a_subgraph_end_reached_by_two_edges_stays_and_leads_out() {
    let mut sub = StateGraph::<Counter>::new();
    sub.add_node("a", noop).add_node("b", noop);
    sub.add_edge(START, "a");
    sub.add_conditional_edges("a", |_: &Counter| "stop", [("go", "b"), ("stop", END)]);
    let mut g = StateGraph::<Counter>::new();
    g.add_node("first", noop).add_node("sub", sub.compile().unwrap());
    g.add_edge(START, "first").add_edge("first", "sub");
    let app = g.compile().unwrap();
    let edges =
        "\t__start__ --> first;\n\tfirst --> sub\\3aa;\n\tsub\\3a__end__ --> __end__;\n\tsubgraph sub\n";
    let inner = "\tsub\\3aa -. &nbsp;stop&nbsp; .-> sub\\3a__end__;\n\tsub\\3aa -. &nbsp;go&nbsp; .-> sub\\3ab;\n\
                 \tsub\\3ab --> sub\\3a__end__;\n\tend\n";
    let expected = FRONT.to_owned()
        + "\t__start__([<p>__start__</p>]):::first\n\tfirst(first)\n\t__end__([<p>__end__</p>]):::last\n"
        + edges
        + "\tsub\\3aa(a)\n\tsub\\3ab(b)\n\tsub\\3a__end__(<p>__end__</p>)\n"
        + inner
        + STYLES;
    assert_eq!(app.get_graph_xray(true).draw_mermaid(), expected);
    assert_eq!(plain(&app, true), "graph TD;\n".to_owned() + edges + inner);
}

/// `START -> mid -> after`, `mid` = `START -> x -> deep`, `deep` the chain.
fn nested() -> CompiledGraph<Counter> {
    let mut mid = StateGraph::<Counter>::new();
    mid.add_node("x", noop).add_node("deep", chain());
    mid.add_edge(START, "x").add_edge("x", "deep");
    let mut g = StateGraph::<Counter>::new();
    g.add_node("mid", mid.compile().unwrap()).add_node("after", noop);
    g.add_edge(START, "mid").add_edge("mid", "after");
    g.compile().unwrap()
}

#[test]
fn nested_subgraphs_nest_their_blocks_with_xray_true() {
    let expected = FRONT.to_owned()
        + "\t__start__([<p>__start__</p>]):::first\n\tafter(after)\n\t__end__([<p>__end__</p>]):::last\n\
           \t__start__ --> mid\\3ax;\n\tmid\\3adeep\\3ab --> after;\n\tafter --> __end__;\n\
           \tsubgraph mid\n\tmid\\3ax(x)\n\tmid\\3ax --> mid\\3adeep\\3aa;\n\
           \tsubgraph deep\n\tmid\\3adeep\\3aa(a)\n\tmid\\3adeep\\3ab(b)\n\tmid\\3adeep\\3aa --> mid\\3adeep\\3ab;\n\
           \tend\n\tend\n"
        + STYLES;
    assert_eq!(nested().get_graph_xray(true).draw_mermaid(), expected);
    assert_eq!(nested().get_graph_xray(5).draw_mermaid(), expected);
}

#[test]
fn xray_one_expands_a_single_level() {
    let expected = FRONT.to_owned()
        + "\t__start__([<p>__start__</p>]):::first\n\tafter(after)\n\t__end__([<p>__end__</p>]):::last\n\
           \t__start__ --> mid\\3ax;\n\tmid\\3adeep --> after;\n\tafter --> __end__;\n\
           \tsubgraph mid\n\tmid\\3ax(x)\n\tmid\\3adeep(deep)\n\tmid\\3ax --> mid\\3adeep;\n\tend\n"
        + STYLES;
    assert_eq!(nested().get_graph_xray(1).draw_mermaid(), expected);
    assert_eq!(
        plain(&nested(), 1),
        "graph TD;\n\t__start__ --> mid\\3ax;\n\tmid\\3adeep --> after;\n\tafter --> __end__;\n\
         \tsubgraph mid\n\tmid\\3ax --> mid\\3adeep;\n\tend\n"
    );
}
