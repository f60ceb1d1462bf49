//! The compile-time topology of a graph, on petgraph: its nodes, `START` and `END`, and every edge a run
//! can follow that the builder knows of (static edges, waiting edges, the targets of a router's path map;
//! a router without a path map may go to any node). Compile asks it which nodes no edge reaches.

use std::collections::HashMap;

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::Dfs;

use crate::types::{END, START};

/// The graph of node names; a router without a path map is an edge to every node.
#[derive(Debug, Default)]
pub(crate) struct Topology<'a> {
    graph: DiGraph<&'a str, ()>,
    index: HashMap<&'a str, NodeIndex>,
    nodes: Vec<&'a str>,
}

impl<'a> Topology<'a> {
    /// A topology over `nodes` (plus `START` and `END`).
    pub(crate) fn new(nodes: impl IntoIterator<Item = &'a str>) -> Self {
        let nodes: Vec<&str> = nodes.into_iter().collect();
        let mut graph = DiGraph::new();
        let mut index = HashMap::new();
        for n in [START, END].into_iter().chain(nodes.iter().copied()) {
            index.entry(n).or_insert_with(|| graph.add_node(n));
        }
        Self { graph, index, nodes }
    }

    /// An edge `from -> to` (names it does not know are left out: compile reports them).
    pub(crate) fn edge(&mut self, from: &'a str, to: &'a str) {
        if let (Some(&a), Some(&b)) = (self.index.get(from), self.index.get(to)) {
            self.graph.update_edge(a, b, ());
        }
    }

    /// A router of `from` that may go to any node (it has no path map).
    pub(crate) fn open_router(&mut self, from: &'a str) {
        for i in 0..self.nodes.len() {
            let to = self.nodes[i];
            self.edge(from, to);
        }
        self.edge(from, END);
    }

    /// The nodes no path of edges from `START` reaches, in the order given: only a `Command` or a `Send`
    /// can run them.
    pub(crate) fn unreached(&self) -> Vec<&'a str> {
        let mut seen = std::collections::HashSet::new();
        if let Some(&start) = self.index.get(START) {
            let mut dfs = Dfs::new(&self.graph, start);
            while let Some(n) = dfs.next(&self.graph) {
                seen.insert(self.graph[n]);
            }
        }
        self.nodes.iter().copied().filter(|n| !seen.contains(n)).collect()
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
    }

    #[test]
    fn a_router_without_a_path_map_reaches_every_node() {
        let mut t = Topology::new(["a", "b", "c"]);
        t.edge(START, "a");
        t.open_router("a");
        assert!(t.unreached().is_empty());
    }
}
