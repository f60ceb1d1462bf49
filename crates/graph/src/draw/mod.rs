//! Drawing a compiled graph: [`CompiledGraph::get_graph`] dry-runs the graph's compile-time topology
//! (`crate::topology`) the way LangGraph's `get_graph()` does, and [`DrawableGraph::draw_mermaid`]
//! renders it in LangGraph's Mermaid dialect.
//!
//! Which edges appear, and how:
//! - plain edges are solid; the targets of a conditional edge come from its path map and are dotted,
//!   labelled with the path-map key when it differs from the target;
//! - a router returning an enum with `#[derive(Destinations)]` declares the enum's variants, as a path map
//!   listing them would (LangGraph's `Literal` return annotation);
//! - a conditional edge without a path map or typed destinations declares no targets: like LangGraph for a
//!   router without a `Literal` return annotation, nothing is drawn for it (what it leads to may still appear as a dotted
//!   edge when nothing else explains why that node runs);
//! - a waiting edge is a solid edge from each source;
//! - plain edges to `END` are not drawn as such: a node that is a target but never a source gets a solid
//!   edge to `END`; if there is none, no edge reaches `END` yet and the dry run of the graph stops on a
//!   single node (a loop does, after LangGraph's 250 steps), that node gets a dotted edge to `END`;
//! - edges are sorted by (source, target, conditional, label), self-loops last, as LangGraph prints them.
//!
//! With [`Xray`] ([`CompiledGraph::get_graph_xray`]) subgraph nodes are drawn inline, as LangGraph's
//! `get_graph(xray=...)` draws them: ids `parent:child`, Mermaid `subgraph` blocks. Compiled graphs added
//! as nodes are expanded, and subgraphs a node's function calls when the node declares them
//! ([`NodeConfig::subgraph`](crate::NodeConfig::subgraph); LangGraph finds them by inspecting the function).
//!
//! The targets a node declares for its `Command`s ([`NodeConfig::destinations`](crate::NodeConfig::destinations),
//! LangGraph's `destinations=`) are drawn as a conditional edge's would be.
//!
//! When a path map sends several keys to one node, the edge is labelled with the last key in key order,
//! where LangGraph takes the last in insertion order.

mod ascii;
mod channel;
mod mermaid;
mod simulate;
mod xray;

use std::collections::HashMap;

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef as _;
use serde_json::{Map, Value};

pub use mermaid::{CurveStyle, MermaidOptions, NodeStyles};
pub use xray::Xray;

use xray::Draft;

use crate::compiled::CompiledGraph;
use crate::erased::ErasedSubgraph as _;
use crate::pregel::spec::GraphSpec;
use crate::state::State;
use crate::topology::Kind;
use crate::types::{END, START};

/// A node of a [`DrawableGraph`].
#[derive(Debug, Clone, PartialEq)]
pub struct DrawNode {
    /// The node's id: its name, prefixed with the names of the subgraph nodes it is drawn inside
    /// (`parent:child`, as LangGraph names them) when subgraphs are drawn inline.
    pub id: String,
    /// The node's name: `__start__`, `__end__`, or a node of the graph (or of a subgraph drawn inline).
    pub name: String,
    /// Shown under the name: the node's metadata, plus `defer = True` for deferred nodes and `__interrupt`
    /// (`before`, `after` or `before,after`) for nodes named in `interrupt_before` / `interrupt_after`.
    pub metadata: Option<Map<String, Value>>,
}

#[derive(Debug, Clone)]
struct EdgeData {
    label: Option<String>,
    conditional: bool,
}

/// An edge of a [`DrawableGraph`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrawEdge<'a> {
    /// The source node's id.
    pub source: &'a str,
    /// The target node's id.
    pub target: &'a str,
    /// The path-map key that leads there, when it differs from the target's name.
    pub label: Option<&'a str>,
    /// Whether the edge is conditional (drawn dotted).
    pub conditional: bool,
}

/// The topology of a compiled graph: `__start__`, the nodes in the order they were added, `__end__` (when
/// some edge reaches it), and the edges in LangGraph's order.
#[derive(Debug, Clone)]
pub struct DrawableGraph {
    graph: DiGraph<DrawNode, EdgeData>,
}

impl DrawableGraph {
    /// The nodes, in drawing order.
    pub fn nodes(&self) -> impl Iterator<Item = &DrawNode> + '_ {
        self.graph.node_weights()
    }

    /// The edges, in drawing order.
    pub fn edges(&self) -> impl Iterator<Item = DrawEdge<'_>> + '_ {
        self.graph.edge_references().map(|e| DrawEdge {
            source: &self.graph[e.source()].id,
            target: &self.graph[e.target()].id,
            label: e.weight().label.as_deref(),
            conditional: e.weight().conditional,
        })
    }

    /// The node of that id (its name, or `parent:child` inside a subgraph drawn inline).
    pub fn node(&self, id: &str) -> Option<&DrawNode> {
        self.graph.node_weights().find(|n| n.id == id)
    }

    /// The only node that is no edge's target, if there is exactly one (drawn as the first node).
    pub fn first_node(&self) -> Option<&DrawNode> {
        self.single(petgraph::Direction::Incoming)
    }

    /// The only node that is no edge's source, if there is exactly one (drawn as the last node).
    pub fn last_node(&self) -> Option<&DrawNode> {
        self.single(petgraph::Direction::Outgoing)
    }

    fn single(&self, direction: petgraph::Direction) -> Option<&DrawNode> {
        let mut found =
            self.graph.node_indices().filter(|i| self.graph.edges_directed(*i, direction).next().is_none());
        match (found.next(), found.next()) {
            (Some(i), None) => Some(&self.graph[i]),
            _ => None,
        }
    }

    /// Mermaid text in LangGraph's dialect, with styles and linear curves (LangGraph's defaults).
    pub fn draw_mermaid(&self) -> String {
        self.draw_mermaid_with(&MermaidOptions::default())
    }

    /// Mermaid text in LangGraph's dialect, with the given options.
    pub fn draw_mermaid_with(&self, options: &MermaidOptions) -> String {
        mermaid::render(self, options)
    }

    /// A text drawing (langchain-core's `draw_ascii()`): a box per node (its id), in layers from the
    /// top; plain edges drawn with `*`, conditional ones with `.`, without arrowheads or labels, as
    /// langchain draws them. The layout is weft's own (langchain uses grandalf's), so the picture is not
    /// the same character for character, but a graph always draws the same. Self-loops are not drawn.
    ///
    /// ```
    /// use weft_graph::{ChannelKind, JsonState, JsonUpdate, START, StateGraph};
    ///
    /// let mut g = StateGraph::with_initial(JsonState::builder().channel("n", ChannelKind::LastValue).build());
    /// g.add_node("agent", |_: &JsonState| JsonUpdate::new());
    /// g.add_edge(START, "agent");
    /// let text = g.compile()?.get_graph().draw_ascii();
    /// assert!(text.contains("| agent |"));
    /// # Ok::<(), weft_graph::GraphError>(())
    /// ```
    pub fn draw_ascii(&self) -> String {
        ascii::render(self)
    }
}

impl<S: State> CompiledGraph<S> {
    /// The graph's topology for drawing (LangGraph's `get_graph()`): see [`DrawableGraph`].
    pub fn get_graph(&self) -> DrawableGraph {
        self.get_graph_xray(Xray::Off)
    }

    /// The graph's topology with subgraphs drawn inline (LangGraph's `get_graph(xray=...)`): `true` for
    /// every level, a number for that many levels. A node that is a compiled graph is replaced by the
    /// nodes of the subgraph's own drawing, ids prefixed `node:` (`node:child`); the subgraph's
    /// `__start__` and `__end__` are left out when a single edge leaves or enters them, and the edges to
    /// and from the node go to its first node and leave from its last.
    ///
    /// ```
    /// use weft_graph::{ChannelKind, JsonState, JsonUpdate, START, StateGraph};
    ///
    /// let state = JsonState::builder().channel("n", ChannelKind::LastValue).build();
    /// let mut inner = StateGraph::with_initial(state.clone());
    /// inner.add_node("a", |_: &JsonState| JsonUpdate::new()).add_node("b", |_: &JsonState| JsonUpdate::new());
    /// inner.add_edge(START, "a").add_edge("a", "b");
    /// let mut outer = StateGraph::with_initial(state);
    /// outer.add_node("sub", inner.compile()?);
    /// outer.add_edge(START, "sub");
    /// let drawn = outer.compile()?.get_graph_xray(true);
    /// assert!(drawn.node("sub:a").is_some() && drawn.node("sub").is_none());
    /// assert!(drawn.draw_mermaid().contains("\tsubgraph sub\n"));
    /// # Ok::<(), weft_graph::GraphError>(())
    /// ```
    pub fn get_graph_xray(&self, xray: impl Into<Xray>) -> DrawableGraph {
        let xray = xray.into();
        let mut draft = self.draft();
        if xray.expands() {
            let spec = &self.inner.spec;
            for &n in &spec.insertion_order {
                let node = &spec.nodes[n];
                let Some(sub) = node.subgraph().and_then(|r| r.erased()) else {
                    continue;
                };
                draft.inline(&node.name, sub.get_graph_xray(xray.nested()).draft());
            }
        }
        DrawableGraph::from_draft(draft)
    }

    /// This graph's own drawing, subgraphs as single nodes, before it becomes a petgraph.
    fn draft(&self) -> Draft {
        let inner = &self.inner;
        let spec = &inner.spec;
        let found = simulate::discover(&plan(spec));

        let mut draft = Draft::default();
        draft.nodes.push(DrawNode { id: START.to_owned(), name: START.to_owned(), metadata: None });
        for &n in &spec.insertion_order {
            let node = &spec.nodes[n];
            let mut metadata = node.config.metadata.clone();
            if node.config.defer {
                metadata.insert("defer".to_owned(), Value::Bool(true));
            }
            let before = inner.config.interrupt_before.iter().any(|n| **n == *node.name);
            let after = inner.config.interrupt_after.iter().any(|n| **n == *node.name);
            let interrupt = match (before, after) {
                (true, true) => Some("before,after"),
                (true, false) => Some("before"),
                (false, true) => Some("after"),
                (false, false) => None,
            };
            if let Some(when) = interrupt {
                metadata.insert("__interrupt".to_owned(), Value::from(when));
            }
            let metadata = (!metadata.is_empty()).then_some(metadata);
            draft.nodes.push(DrawNode { id: node.name.to_string(), name: node.name.to_string(), metadata });
        }
        for (source, target, label, conditional) in found {
            if target == END && !draft.nodes.iter().any(|n| n.id == END) {
                draft.nodes.push(DrawNode { id: END.to_owned(), name: END.to_owned(), metadata: None });
            }
            draft.edges.push((source, target, EdgeData { label, conditional }));
        }
        draft
    }
}

impl DrawableGraph {
    fn from_draft(draft: Draft) -> Self {
        let mut graph: DiGraph<DrawNode, EdgeData> = DiGraph::new();
        let mut index: HashMap<String, NodeIndex> = HashMap::new();
        for node in draft.nodes {
            let id = node.id.clone();
            index.insert(id, graph.add_node(node));
        }
        for (source, target, data) in draft.edges {
            if let (Some(&s), Some(&t)) = (index.get(&source), index.get(&target)) {
                graph.add_edge(s, t, data);
            }
        }
        Self { graph }
    }

    /// Back to a draft, to be drawn inline in a parent's drawing.
    fn draft(&self) -> Draft {
        Draft {
            nodes: self.graph.node_weights().cloned().collect(),
            edges: self
                .graph
                .edge_references()
                .map(|e| {
                    (self.graph[e.source()].id.clone(), self.graph[e.target()].id.clone(), e.weight().clone())
                })
                .collect(),
        }
    }
}

/// The dry-run view of a graph, read from its topology: process 0 is `START`, process `i + 1` is node `i`
/// of the spec (nodes sorted by name).
fn plan<S: State>(spec: &GraphSpec<S>) -> simulate::Plan {
    let topology = &spec.topology;
    let proc_of = |v: NodeIndex| {
        let vertex = topology.vertex_at(v);
        match vertex.kind {
            Kind::Start => Some(0),
            Kind::Node => spec.node_names.get(&vertex.name).map(|i| i + 1),
            Kind::End | Kind::Undeclared => None,
        }
    };
    let mut procs: Vec<simulate::Proc> = std::iter::once(&spec.start)
        .chain(spec.nodes.iter())
        .map(|node| simulate::Proc {
            name: node.name.to_string(),
            defer: node.config.defer,
            ..simulate::Proc::default()
        })
        .collect();
    for (from, to) in topology.plain_edges() {
        if let (Some(from), Some(to)) = (proc_of(from), proc_of(to)) {
            if !procs[from].edges.contains(&to) {
                procs[from].edges.push(to);
            }
        }
    }
    let mut joins = Vec::with_capacity(topology.joins().len());
    for (j, join) in topology.joins().iter().enumerate() {
        let sources: Vec<usize> = join.sources.iter().map(|&s| proc_of(s).unwrap_or(0)).collect();
        for &s in &sources {
            procs[s].joins.push(j);
        }
        joins.push(simulate::Join { sources, target: proc_of(join.target) });
    }
    for branch in topology.branches() {
        let (Some(source), Some(targets)) = (proc_of(branch.source), &branch.targets) else { continue };
        let targets = targets
            .iter()
            .filter_map(|(key, to)| match topology.vertex_at(*to).kind {
                Kind::End => Some((key.clone(), None)),
                _ => Some((key.clone(), Some(proc_of(*to)?))),
            })
            .collect();
        procs[source].branches.push(targets);
    }
    simulate::Plan {
        procs,
        joins,
        insertion_order: topology.nodes().filter_map(|n| spec.node_names.get(n).map(|i| i + 1)).collect(),
    }
}
