//! Subgraphs a node's function invokes, declared with `NodeConfig::subgraph`: the drawing with xray, the
//! list of subgraphs and the state calls see them as they see a compiled graph added as a node, as
//! LangGraph sees a subgraph it finds inside a function. Also what happens when subgraphs share names.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::sync::Arc;

use common::{Counter, CounterUpdate};
use serde::{Deserialize, Serialize};
use weft_graph::checkpoint::InMemorySaver;
use weft_graph::{
    CompileConfig, CompiledGraph, GraphError, NodeConfig, Runtime, START, State, StateGraph, TaskState,
};
use weft_runnable_core::RunnableConfig;

const STYLES: &str = "\tclassDef default fill:#f2f0ff,line-height:1.2\n\tclassDef first fill-opacity:0\n\
                      \tclassDef last fill:#bfb6fc\n";
const FRONT: &str = "---\nconfig:\n  flowchart:\n    curve: linear\n---\ngraph TD;\n";

fn noop(_: Counter) -> CounterUpdate {
    CounterUpdate::default()
}

/// `START -> a -> b`.
fn chain() -> CompiledGraph<Counter> {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("a", noop).add_node("b", noop);
    g.add_edge(START, "a").add_edge("a", "b");
    g.compile().unwrap()
}

/// A node function that invokes `sub` and hands back its count.
fn calling(
    sub: CompiledGraph<Counter>,
) -> impl Fn(Counter, Runtime) -> futures::future::BoxFuture<'static, weft_runnable_core::Result<CounterUpdate>>
+ Send
+ Sync
+ 'static {
    move |state: Counter, rt: Runtime| {
        let sub = sub.clone();
        Box::pin(async move {
            let out = sub.invoke(CounterUpdate::count(state.count), rt.config()).await?;
            Ok(CounterUpdate::count(out.value.count))
        })
    }
}

/// `START -> sub -> z`, `sub` a function node that invokes the chain and declares it.
fn parent_calling_chain() -> CompiledGraph<Counter> {
    let sub = chain();
    let mut g = StateGraph::<Counter>::new();
    g.add_node_with("sub", calling(sub.clone()), NodeConfig::new().subgraph(&sub)).add_node("z", noop);
    g.add_edge(START, "sub").add_edge("sub", "z");
    g.compile().unwrap()
}

#[test]
fn a_declared_subgraph_is_drawn_inline_as_langgraph_draws_one_found_in_a_function() {
    // LangGraph 1.2 prints this for `START -> sub -> z` whether `sub` is the compiled chain or a function
    // calling it: `get_subgraphs` finds the chain in the function, and xray draws it the same way.
    let expected = FRONT.to_owned()
        + "\t__start__([<p>__start__</p>]):::first\n\tz(z)\n\t__end__([<p>__end__</p>]):::last\n\
           \t__start__ --> sub\\3aa;\n\tsub\\3ab --> z;\n\tz --> __end__;\n\
           \tsubgraph sub\n\tsub\\3aa(a)\n\tsub\\3ab(b)\n\tsub\\3aa --> sub\\3ab;\n\tend\n"
        + STYLES;
    let app = parent_calling_chain();
    assert_eq!(app.get_graph_xray(true).draw_mermaid(), expected);
    let flat = app.get_graph().draw_mermaid();
    assert!(flat.contains("\tsub(sub)\n") && !flat.contains("subgraph"), "{flat}");
}

#[test]
fn an_undeclared_subgraph_call_stays_one_node() {
    let mut g = StateGraph::<Counter>::new();
    g.add_node("sub", calling(chain())).add_node("z", noop);
    g.add_edge(START, "sub").add_edge("sub", "z");
    let app = g.compile().unwrap();
    assert_eq!(app.get_graph_xray(true).draw_mermaid(), app.get_graph().draw_mermaid());
    assert!(app.erase().subgraphs().is_empty());
}

#[tokio::test]
async fn a_declared_subgraph_runs_and_is_listed_with_the_subgraph_nodes() {
    let app = parent_calling_chain();
    let out = app.invoke(CounterUpdate::count(3), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.count, 3);
    let subgraphs = app.erase().subgraphs();
    let names: Vec<&str> = subgraphs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["sub"]);
    let nodes: Vec<String> = subgraphs[0].1.get_graph().nodes().map(|n| n.id.clone()).collect();
    assert_eq!(nodes, ["__start__", "a", "b", "__end__"]);
}

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Inner {
    #[state(append)]
    notes: Vec<String>,
}

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Outer {
    #[state(append)]
    log: Vec<String>,
}

fn asking() -> CompiledGraph<Inner> {
    let mut inner = StateGraph::<Inner>::new();
    inner.add_node("ask", |_: Inner, rt: &Runtime| -> weft_runnable_core::Result<InnerUpdate> {
        let v: String = rt.interrupt("inner?")?;
        Ok(InnerUpdate::new().notes(vec![v]))
    });
    inner.add_edge(START, "ask");
    inner.compile().unwrap()
}

fn outer(saver: Arc<InMemorySaver>, declare: bool) -> CompiledGraph<Outer> {
    let inner = asking();
    let called = inner.clone();
    let config = if declare { NodeConfig::new().subgraph(&inner) } else { NodeConfig::new() };
    let mut g = StateGraph::<Outer>::new();
    g.add_node_with(
        "call",
        move |_: Outer, rt: Runtime| {
            let called = called.clone();
            async move {
                let out = called.invoke(Inner::update(), rt.config()).await?;
                Ok::<_, GraphError>(OuterUpdate::new().log(out.value.notes))
            }
        },
        config,
    );
    g.add_edge(START, "call");
    g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

#[tokio::test]
async fn a_fresh_process_finds_a_declared_subgraph_state_before_the_node_runs_again() {
    let saver = Arc::new(InMemorySaver::new());
    let thread = RunnableConfig::default().with_configurable("thread_id", "t");
    let paused = outer(Arc::clone(&saver), true).invoke(Outer::update(), &thread).await.unwrap();
    assert_eq!(paused.interrupts.len(), 1);

    // Another compile of the same graph, as a restarted server has: nothing of it has run yet.
    let app = outer(Arc::clone(&saver), true);
    let state = app.get_state(&thread).await.unwrap();
    let Some(TaskState::Config(address)) = &state.tasks[0].state else {
        panic!("{:?}", state.tasks[0].state)
    };
    assert_eq!(address.checkpoint_ns, format!("call:{}", state.tasks[0].id));
    let at_child = thread.clone().with_configurable("checkpoint_ns", address.checkpoint_ns.clone());
    let child = app.get_state_json(&at_child, false).await.unwrap();
    assert_eq!(child.next, ["ask"]);
    let nested = app.get_state_with_subgraphs(&thread).await.unwrap();
    let Some(TaskState::Snapshot(sub)) = &nested.tasks[0].state else {
        panic!("{:?}", nested.tasks[0].state)
    };
    assert_eq!(sub.next, ["ask"]);

    // Undeclared, a fresh compile cannot tell that the node ran a subgraph.
    let undeclared = outer(saver, false);
    let state = undeclared.get_state(&thread).await.unwrap();
    assert!(state.tasks[0].state.is_none(), "{:?}", state.tasks[0].state);
}

#[test]
fn a_later_declaration_replaces_the_earlier_one() {
    let mut other = StateGraph::<Counter>::new();
    other.add_node("only", noop);
    other.add_edge(START, "only");
    let other = other.compile().unwrap();
    let config = NodeConfig::new().subgraph(&other).subgraph(&chain());
    let mut g = StateGraph::<Counter>::new();
    g.add_node_with("sub", noop, config);
    g.add_edge(START, "sub");
    let drawn = g.compile().unwrap().get_graph_xray(true);
    assert!(drawn.node("sub:a").is_some() && drawn.node("sub:only").is_none());
}

#[test]
fn two_subgraph_nodes_of_one_name_are_a_duplicate_node() {
    // LangGraph refuses a second node of a name, subgraph or not; a namespace is a path of node names,
    // so no two subgraphs of a graph share one.
    let mut g = StateGraph::<Counter>::new();
    g.add_node("sub", chain());
    let sub = chain();
    g.add_node_with("sub", noop, NodeConfig::new().subgraph(&sub));
    g.add_edge(START, "sub");
    assert!(matches!(g.compile(), Err(GraphError::DuplicateNode(name)) if name == "sub"));
}

#[test]
fn a_subgraph_inside_a_subgraph_of_the_same_name_gets_its_own_namespace() {
    let mut mid = StateGraph::<Counter>::new();
    mid.add_node("sub", chain());
    mid.add_edge(START, "sub");
    let mut g = StateGraph::<Counter>::new();
    g.add_node("sub", mid.compile().unwrap());
    g.add_edge(START, "sub");
    let app = g.compile().unwrap();

    let top = app.erase().subgraphs();
    assert_eq!(top.len(), 1);
    let inner = top[0].1.subgraphs();
    let names: Vec<&str> = inner.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!((top[0].0.as_str(), names), ("sub", vec!["sub"]));
    let drawn = app.get_graph_xray(true);
    let ids: Vec<&str> = drawn.nodes().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["__start__", "__end__", "sub:sub:a", "sub:sub:b"]);
}
