//! Drawing subgraphs inline (LangGraph's `get_graph(xray=...)`): a subgraph node is replaced by the nodes
//! of its own drawing, their ids prefixed `parent:`, its `__start__` and `__end__` trimmed when a single
//! edge leaves or enters them, and the parent's edges into and out of the node rewired to the subgraph's
//! first and last nodes.

use super::{DrawNode, EdgeData};

/// How deep [`CompiledGraph::get_graph_xray`](crate::CompiledGraph::get_graph_xray) draws subgraphs inline
/// (LangGraph's `xray`): `true` is every level, a number that many levels, `false` or `0` none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Xray {
    /// Subgraphs are drawn as single nodes.
    #[default]
    Off,
    /// Subgraphs are drawn inline this many levels deep (0 is [`Xray::Off`]).
    Depth(u32),
    /// Subgraphs are drawn inline at every level.
    All,
}

impl Xray {
    /// Whether subgraph nodes of this graph are drawn inline.
    pub fn expands(self) -> bool {
        match self {
            Self::Off | Self::Depth(0) => false,
            Self::Depth(_) | Self::All => true,
        }
    }

    /// The setting a subgraph is drawn with: one level less, as LangGraph passes `xray - 1` down.
    pub fn nested(self) -> Self {
        match self {
            Self::Depth(n) => Self::Depth(n.saturating_sub(1)),
            other => other,
        }
    }
}

impl From<bool> for Xray {
    fn from(all: bool) -> Self {
        if all { Self::All } else { Self::Off }
    }
}

impl From<u32> for Xray {
    fn from(depth: u32) -> Self {
        Self::Depth(depth)
    }
}

/// A drawing being assembled: nodes and edges in LangGraph's order (a node's place is its insertion).
#[derive(Debug, Clone, Default)]
pub(super) struct Draft {
    pub(super) nodes: Vec<DrawNode>,
    pub(super) edges: Vec<(String, String, EdgeData)>,
}

impl Draft {
    fn position(&self, id: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == id)
    }

    /// The only node (other than `exclude`) that no edge from outside `exclude` targets.
    fn first(&self, exclude: Option<&str>) -> Option<usize> {
        let targets: Vec<&str> =
            self.edges.iter().filter(|e| Some(e.0.as_str()) != exclude).map(|e| e.1.as_str()).collect();
        single(
            self.nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| Some(n.id.as_str()) != exclude && !targets.contains(&n.id.as_str())),
        )
    }

    /// The only node (other than `exclude`) that is the source of no edge into a node outside `exclude`.
    fn last(&self, exclude: Option<&str>) -> Option<usize> {
        let sources: Vec<&str> =
            self.edges.iter().filter(|e| Some(e.1.as_str()) != exclude).map(|e| e.0.as_str()).collect();
        single(
            self.nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| Some(n.id.as_str()) != exclude && !sources.contains(&n.id.as_str())),
        )
    }

    fn remove(&mut self, at: usize) {
        let node = self.nodes.remove(at);
        self.edges.retain(|(s, t, _)| *s != node.id && *t != node.id);
    }

    /// LangGraph's `trim_first_node`: drops the first node when a single edge leaves it and another node
    /// would then be first.
    fn trim_first(&mut self) {
        let Some(at) = self.first(None) else { return };
        let id = self.nodes[at].id.clone();
        if self.first(Some(&id)).is_some() && self.edges.iter().filter(|e| e.0 == id).count() == 1 {
            self.remove(at);
        }
    }

    /// LangGraph's `trim_last_node`: drops the last node when a single edge enters it and another node
    /// would then be last.
    fn trim_last(&mut self) {
        let Some(at) = self.last(None) else { return };
        let id = self.nodes[at].id.clone();
        if self.last(Some(&id)).is_some() && self.edges.iter().filter(|e| e.1 == id).count() == 1 {
            self.remove(at);
        }
    }

    /// Replaces node `name` by `sub` (LangGraph's subgraph replacement in `draw_graph`), when `sub` has
    /// more than one node and a first and a last node.
    pub(super) fn inline(&mut self, name: &str, mut sub: Draft) {
        let Some(at) = self.position(name) else { return };
        if sub.nodes.len() <= 1 || sub.first(None).is_none() || sub.last(None).is_none() {
            return;
        }
        sub.trim_first();
        sub.trim_last();
        let prefixed = |id: &str| format!("{name}:{id}");
        let (Some(first), Some(last)) = (sub.first(None), sub.last(None)) else {
            // Trimming never leaves a graph without its ends; keep the node as it is if it did.
            return;
        };
        let (first, last) = (prefixed(&sub.nodes[first].id), prefixed(&sub.nodes[last].id));
        self.nodes.remove(at);
        for (source, target, _) in &mut self.edges {
            if source == name {
                source.clone_from(&last);
            }
            if target == name {
                target.clone_from(&first);
            }
        }
        self.nodes.extend(sub.nodes.into_iter().map(|n| DrawNode { id: prefixed(&n.id), ..n }));
        self.edges.extend(sub.edges.into_iter().map(|(s, t, d)| (prefixed(&s), prefixed(&t), d)));
    }
}

fn single<'a>(mut found: impl Iterator<Item = (usize, &'a DrawNode)>) -> Option<usize> {
    match (found.next(), found.next()) {
        (Some((i, _)), None) => Some(i),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(nodes: &[&str], edges: &[(&str, &str)]) -> Draft {
        Draft {
            nodes: nodes
                .iter()
                .map(|n| DrawNode { id: (*n).to_owned(), name: (*n).to_owned(), metadata: None })
                .collect(),
            edges: edges
                .iter()
                .map(|(s, t)| {
                    ((*s).to_owned(), (*t).to_owned(), EdgeData { label: None, conditional: false })
                })
                .collect(),
        }
    }

    fn ids(d: &Draft) -> Vec<String> {
        d.nodes.iter().map(|n| n.id.clone()).collect()
    }

    #[test]
    fn xray_depth_counts_down_and_true_stays() {
        assert!(!Xray::from(false).expands() && !Xray::from(0).expands());
        assert!(Xray::from(true).nested().expands());
        assert!(Xray::from(2).nested().expands() && !Xray::from(1).nested().expands());
    }

    #[test]
    fn a_chain_subgraph_loses_its_ends_and_takes_the_node_place_in_the_edges() {
        let mut parent = draft(
            &["__start__", "sub", "z", "__end__"],
            &[("__start__", "sub"), ("sub", "z"), ("z", "__end__")],
        );
        let sub =
            draft(&["__start__", "a", "b", "__end__"], &[("__start__", "a"), ("a", "b"), ("b", "__end__")]);
        parent.inline("sub", sub);
        assert_eq!(ids(&parent), ["__start__", "z", "__end__", "sub:a", "sub:b"]);
        let edges: Vec<(&str, &str)> =
            parent.edges.iter().map(|(s, t, _)| (s.as_str(), t.as_str())).collect();
        assert_eq!(edges, [("__start__", "sub:a"), ("sub:b", "z"), ("z", "__end__"), ("sub:a", "sub:b")]);
    }

    #[test]
    fn an_end_reached_twice_is_kept() {
        let mut parent = draft(&["__start__", "sub", "__end__"], &[("__start__", "sub"), ("sub", "__end__")]);
        let sub = draft(
            &["__start__", "a", "b", "__end__"],
            &[("__start__", "a"), ("a", "b"), ("a", "__end__"), ("b", "__end__")],
        );
        parent.inline("sub", sub);
        assert_eq!(ids(&parent), ["__start__", "__end__", "sub:a", "sub:b", "sub:__end__"]);
        assert_eq!(parent.edges[1].0, "sub:__end__");
    }

    #[test]
    fn a_subgraph_without_a_single_first_node_is_not_inlined() {
        let mut parent = draft(&["__start__", "sub"], &[("__start__", "sub")]);
        parent.inline("sub", draft(&["x", "y"], &[]));
        assert_eq!(ids(&parent), ["__start__", "sub"]);
    }
}
