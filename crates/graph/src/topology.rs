//! The compile-time topology of a graph, on petgraph: one model, built once at compile from the builder's
//! nodes, plain edges, waiting edges and branches, that validation, reachability and the drawing read. The
//! run loop keeps its own index vectors (`pregel::spec`).
//!
//! Names an edge mentions that are not nodes become undeclared vertices, so that validation can name
//! them; reachability never goes through them.

use std::collections::{BTreeMap, HashMap, HashSet};

use petgraph::graph::{DiGraph, EdgeIndex, NodeIndex};
use petgraph::visit::{Dfs, NodeFiltered};

use crate::error::{GraphError, GraphResult};
use crate::types::{END, START};

/// What a vertex of the topology stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `START`.
    Start,
    /// `END`.
    End,
    /// A node of the graph.
    Node,
    /// A name an edge mentions that is no node (compile reports it).
    Undeclared,
}

/// A vertex: a name and what it stands for.
#[derive(Debug, Clone)]
pub(crate) struct Vertex {
    pub(crate) name: String,
    pub(crate) kind: Kind,
}

/// How a run can follow an edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Link {
    /// A plain edge.
    Plain,
    /// From one source of waiting edge `join` (an index into [`Topology::joins`]) to its target.
    Waiting { join: usize },
    /// A destination of branch `branch` (an index into [`Topology::branches`]), reached by path-map key
    /// `key`.
    Branch { branch: usize, key: String },
    /// A branch without declared destinations may go to any node (reachability only).
    Open { branch: usize },
}

/// A waiting edge: its target runs once every source has run.
#[derive(Debug, Clone)]
pub(crate) struct Join {
    pub(crate) sources: Vec<NodeIndex>,
    pub(crate) target: NodeIndex,
}

/// A conditional edge: its source, name and declared destinations (path-map key, target), in key order;
/// `None` when it declares none.
#[derive(Debug, Clone)]
pub(crate) struct BranchLinks {
    pub(crate) source: NodeIndex,
    pub(crate) name: String,
    pub(crate) targets: Option<Vec<(String, NodeIndex)>>,
}

/// The graph of a [`StateGraph`](crate::StateGraph): `START`, `END`, the nodes in the order they were
/// added, and every edge a run can follow, in the order the builder got them.
#[derive(Debug, Clone)]
pub(crate) struct Topology {
    graph: DiGraph<Vertex, Link>,
    index: HashMap<String, NodeIndex>,
    start: NodeIndex,
    end: NodeIndex,
    /// The nodes, in the order they were added.
    nodes: Vec<NodeIndex>,
    joins: Vec<Join>,
    branches: Vec<BranchLinks>,
}

impl Topology {
    /// A topology over `nodes` (plus `START` and `END`), in the order given.
    pub(crate) fn new<'a>(nodes: impl IntoIterator<Item = &'a str>) -> Self {
        let mut graph = DiGraph::new();
        let start = graph.add_node(Vertex { name: START.to_owned(), kind: Kind::Start });
        let end = graph.add_node(Vertex { name: END.to_owned(), kind: Kind::End });
        let mut index = HashMap::from([(START.to_owned(), start), (END.to_owned(), end)]);
        let mut order = Vec::new();
        for name in nodes {
            if !index.contains_key(name) {
                let i = graph.add_node(Vertex { name: name.to_owned(), kind: Kind::Node });
                index.insert(name.to_owned(), i);
                order.push(i);
            }
        }
        Self { graph, index, start, end, nodes: order, joins: Vec::new(), branches: Vec::new() }
    }

    /// The vertex of `name`, an undeclared one when no node has that name.
    fn vertex(&mut self, name: &str) -> NodeIndex {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.graph.add_node(Vertex { name: name.to_owned(), kind: Kind::Undeclared });
        self.index.insert(name.to_owned(), i);
        i
    }

    /// The vertex of an edge's target: `START` is never one, so it gets an undeclared vertex of its own.
    fn target(&mut self, name: &str) -> NodeIndex {
        if name == START {
            return self.graph.add_node(Vertex { name: name.to_owned(), kind: Kind::Undeclared });
        }
        self.vertex(name)
    }

    /// A plain edge `from -> to`.
    pub(crate) fn edge(&mut self, from: &str, to: &str) {
        let (a, b) = (self.vertex(from), self.target(to));
        self.graph.add_edge(a, b, Link::Plain);
    }

    /// A waiting edge: `to` runs once every node of `sources` has run.
    pub(crate) fn waiting_edge(&mut self, sources: &[String], to: &str) {
        let join = self.joins.len();
        let sources: Vec<NodeIndex> = sources.iter().map(|s| self.vertex(s)).collect();
        let target = self.target(to);
        for &s in &sources {
            self.graph.add_edge(s, target, Link::Waiting { join });
        }
        self.joins.push(Join { sources, target });
    }

    /// A conditional edge of `source` named `name`, with its path map (`None`: it may go to any node).
    pub(crate) fn branch(&mut self, source: &str, name: &str, path_map: Option<&BTreeMap<String, String>>) {
        let branch = self.branches.len();
        let from = self.vertex(source);
        let targets = path_map.map(|map| {
            map.iter()
                .map(|(key, to)| {
                    let to = self.target(to);
                    self.graph.add_edge(from, to, Link::Branch { branch, key: key.clone() });
                    (key.clone(), to)
                })
                .collect()
        });
        if targets.is_none() {
            for to in self.nodes.clone().into_iter().chain([self.end]) {
                self.graph.add_edge(from, to, Link::Open { branch });
            }
        }
        self.branches.push(BranchLinks { source: from, name: name.to_owned(), targets });
    }

    /// The vertex at `i`.
    pub(crate) fn vertex_at(&self, i: NodeIndex) -> &Vertex {
        &self.graph[i]
    }

    /// Whether `name` is a node of the graph.
    pub(crate) fn is_node(&self, name: &str) -> bool {
        self.index.get(name).is_some_and(|&i| self.graph[i].kind == Kind::Node)
    }

    /// The nodes, in the order they were added.
    pub(crate) fn nodes(&self) -> impl Iterator<Item = &str> + '_ {
        self.nodes.iter().map(|&i| self.graph[i].name.as_str())
    }

    /// The plain edges, in the order they were added: (source, target).
    pub(crate) fn plain_edges(&self) -> impl Iterator<Item = (NodeIndex, NodeIndex)> + '_ {
        // Edge indexes grow as edges are added: index order is insertion order.
        (0..self.graph.edge_count()).map(EdgeIndex::new).filter_map(|e| {
            let (a, b) = self.graph.edge_endpoints(e)?;
            (self.graph[e] == Link::Plain).then_some((a, b))
        })
    }

    /// The waiting edges, in the order they were added.
    pub(crate) fn joins(&self) -> &[Join] {
        &self.joins
    }

    /// The conditional edges, in the order they were added.
    pub(crate) fn branches(&self) -> &[BranchLinks] {
        &self.branches
    }

    fn undeclared(&self, i: NodeIndex) -> bool {
        self.graph[i].kind == Kind::Undeclared
    }

    /// Checks the edges, in LangGraph's order: sources of plain edges, of waiting edges and of branches
    /// are nodes (or `START`); something leaves `START`; branch destinations and edge targets are nodes
    /// (or `END`).
    pub(crate) fn validate(&self) -> GraphResult<()> {
        let name = |i: NodeIndex| self.graph[i].name.clone();
        for (from, _) in self.plain_edges() {
            if self.undeclared(from) {
                return Err(GraphError::UnknownEdgeSource(name(from)));
            }
        }
        for join in &self.joins {
            if let Some(&s) = join.sources.iter().find(|&&s| self.undeclared(s)) {
                return Err(GraphError::UnknownWaitingSource(name(s)));
            }
        }
        for branch in &self.branches {
            if self.undeclared(branch.source) {
                return Err(GraphError::UnknownEdgeSource(name(branch.source)));
            }
        }
        let branch_from_start = self.branches.iter().any(|b| b.source == self.start);
        if !branch_from_start && self.graph.edges(self.start).next().is_none() {
            return Err(GraphError::NoEntryPoint);
        }
        for branch in &self.branches {
            for (_, to) in branch.targets.iter().flatten() {
                if self.undeclared(*to) {
                    return Err(GraphError::UnknownBranchTarget {
                        source_node: name(branch.source),
                        branch: branch.name.clone(),
                        target: name(*to),
                    });
                }
            }
        }
        let targets = self.plain_edges().map(|(_, to)| to).chain(self.joins.iter().map(|j| j.target));
        for to in targets {
            if self.undeclared(to) {
                return Err(GraphError::UnknownEdgeTarget(name(to)));
            }
        }
        Ok(())
    }

    /// The nodes no path of edges from `START` reaches, in the order they were added: only a `Command` or
    /// a `Send` can run them.
    pub(crate) fn unreached(&self) -> Vec<&str> {
        let declared = NodeFiltered::from_fn(&self.graph, |i| !self.undeclared(i));
        let mut seen = HashSet::new();
        let mut dfs = Dfs::new(&declared, self.start);
        while let Some(n) = dfs.next(&declared) {
            seen.insert(n);
        }
        self.nodes.iter().filter(|i| !seen.contains(*i)).map(|&i| self.graph[i].name.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_past_a_static_chain_are_reached_and_orphans_are_not() {
        let mut t = Topology::new(["a", "b", "orphan"]);
        t.edge(START, "a");
        t.edge("a", "b");
        t.edge("orphan", "b");
        assert_eq!(t.unreached(), vec!["orphan"]);
        assert!(t.validate().is_ok());
    }

    #[test]
    fn a_router_without_a_path_map_reaches_every_node() {
        let mut t = Topology::new(["a", "b", "c"]);
        t.edge(START, "a");
        t.branch("a", "branch_0", None);
        assert!(t.unreached().is_empty());
    }

    #[test]
    fn paths_do_not_run_through_undeclared_names() {
        let mut t = Topology::new(["b"]);
        t.edge(START, "ghost");
        t.edge("ghost", "b");
        assert_eq!(t.unreached(), vec!["b"]);
        assert!(matches!(t.validate(), Err(GraphError::UnknownEdgeSource(n)) if n == "ghost"));
    }

    #[test]
    fn a_branch_to_start_is_an_unknown_target() {
        let mut t = Topology::new(["a"]);
        t.edge(START, "a");
        let map = BTreeMap::from([("back".to_owned(), START.to_owned())]);
        t.branch("a", "branch_0", Some(&map));
        assert!(
            matches!(t.validate(), Err(GraphError::UnknownBranchTarget { target, .. }) if target == START)
        );
    }
}
