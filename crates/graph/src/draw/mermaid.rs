//! Mermaid output in LangGraph's dialect (langchain-core's `draw_mermaid`), byte for byte.

use std::collections::HashSet;
use std::fmt::Write as _;

use weft_runnable_core::py::py_str;

use super::{DrawEdge, DrawNode, DrawableGraph};

/// How Mermaid draws edges (its `flowchart.curve` setting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CurveStyle {
    /// `basis`.
    Basis,
    /// `bumpX`.
    BumpX,
    /// `bumpY`.
    BumpY,
    /// `cardinal`.
    Cardinal,
    /// `catmullRom`.
    CatmullRom,
    /// `linear` (LangGraph's default).
    #[default]
    Linear,
    /// `monotoneX`.
    MonotoneX,
    /// `monotoneY`.
    MonotoneY,
    /// `natural`.
    Natural,
    /// `step`.
    Step,
    /// `stepAfter`.
    StepAfter,
    /// `stepBefore`.
    StepBefore,
}

impl CurveStyle {
    /// The name Mermaid knows it by.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Basis => "basis",
            Self::BumpX => "bumpX",
            Self::BumpY => "bumpY",
            Self::Cardinal => "cardinal",
            Self::CatmullRom => "catmullRom",
            Self::Linear => "linear",
            Self::MonotoneX => "monotoneX",
            Self::MonotoneY => "monotoneY",
            Self::Natural => "natural",
            Self::Step => "step",
            Self::StepAfter => "stepAfter",
            Self::StepBefore => "stepBefore",
        }
    }
}

/// The `classDef` styles of ordinary, first and last nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStyles {
    /// Style of ordinary nodes.
    pub default: String,
    /// Style of the first node (`__start__`).
    pub first: String,
    /// Style of the last node (`__end__`).
    pub last: String,
}

impl Default for NodeStyles {
    fn default() -> Self {
        Self {
            default: "fill:#f2f0ff,line-height:1.2".to_owned(),
            first: "fill-opacity:0".to_owned(),
            last: "fill:#bfb6fc".to_owned(),
        }
    }
}

/// Settings of [`DrawableGraph::draw_mermaid_with`]; the default is LangGraph's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MermaidOptions {
    /// Front matter, node lines and `classDef` lines (default `true`); without them only edges are listed.
    pub with_styles: bool,
    /// How edges are curved (default linear).
    pub curve_style: CurveStyle,
    /// Node styles.
    pub node_styles: NodeStyles,
    /// Edge labels longer than this many words are broken into lines (default 9; 0 counts as 1).
    pub wrap_label_n_words: usize,
}

impl Default for MermaidOptions {
    fn default() -> Self {
        Self {
            with_styles: true,
            curve_style: CurveStyle::Linear,
            node_styles: NodeStyles::default(),
            wrap_label_n_words: 9,
        }
    }
}

impl MermaidOptions {
    /// LangGraph's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Turns styles (front matter, node lines, `classDef`s) on or off.
    pub fn with_styles(mut self, on: bool) -> Self {
        self.with_styles = on;
        self
    }

    /// Sets the curve style.
    pub fn curve_style(mut self, style: CurveStyle) -> Self {
        self.curve_style = style;
        self
    }
}

pub(super) fn render(graph: &DrawableGraph, options: &MermaidOptions) -> String {
    let mut out = String::new();
    if options.with_styles {
        // LangGraph writes `{"config": {"flowchart": {"curve": ...}}}` as YAML front matter.
        let _ = write!(out, "---\nconfig:\n  flowchart:\n    curve: {}\n---\n", options.curve_style.as_str());
    }
    out.push_str("graph TD;\n");
    let mut renderer = Renderer {
        out,
        options,
        first: graph.first_node().map(|n| n.id.as_str()),
        last: graph.last_node().map(|n| n.id.as_str()),
        subgraph_nodes: Vec::new(),
        edge_groups: Vec::new(),
        seen: HashSet::new(),
    };
    // Nodes inside subgraphs are listed in their deepest subgraph's block, the others first.
    for node in graph.nodes() {
        match node.id.rsplit_once(':') {
            Some((prefix, _)) => group(&mut renderer.subgraph_nodes, prefix, node),
            None if options.with_styles => renderer.node(node),
            None => {}
        }
    }
    // Edges are grouped by the parts their ends' ids share: a subgraph's inner edges by its name, a
    // self-loop by the node's id, every other edge in the top-level group.
    for edge in graph.edges() {
        let prefix: Vec<&str> = edge
            .source
            .split(':')
            .zip(edge.target.split(':'))
            .filter(|(s, t)| s == t)
            .map(|(s, _)| s)
            .collect();
        group(&mut renderer.edge_groups, &prefix.join(":"), edge);
    }
    renderer.block("");
    let tops: Vec<String> = renderer
        .edge_groups
        .iter()
        .map(|(p, _)| p.clone())
        .filter(|p| !p.is_empty() && !p.contains(':'))
        .collect();
    for prefix in tops {
        renderer.block(&prefix);
        renderer.seen.insert(prefix);
    }
    // Subgraphs with no inner edge still show their nodes.
    if options.with_styles {
        for (prefix, nodes) in &renderer.subgraph_nodes {
            if prefix.contains(':') || renderer.seen.contains(prefix) {
                continue;
            }
            let _ = writeln!(renderer.out, "\tsubgraph {prefix}");
            for node in nodes {
                let line = renderer.node_line(node);
                renderer.out.push_str(&line);
            }
            renderer.out.push_str("\tend\n");
        }
    }
    let mut out = renderer.out;
    if options.with_styles {
        let styles = &options.node_styles;
        let _ = writeln!(out, "\tclassDef default {}", styles.default);
        let _ = writeln!(out, "\tclassDef first {}", styles.first);
        let _ = writeln!(out, "\tclassDef last {}", styles.last);
    }
    out
}

/// Appends `item` to the group of `key`, groups kept in the order their keys first appear.
fn group<T>(groups: &mut Vec<(String, Vec<T>)>, key: &str, item: T) {
    match groups.iter_mut().find(|(k, _)| k == key) {
        Some((_, items)) => items.push(item),
        None => groups.push((key.to_owned(), vec![item])),
    }
}

/// LangGraph's `draw_mermaid` walk: top-level edges, then each subgraph's block with its nodes, its edges
/// and its nested subgraphs' blocks.
struct Renderer<'a> {
    out: String,
    options: &'a MermaidOptions,
    first: Option<&'a str>,
    last: Option<&'a str>,
    subgraph_nodes: Vec<(String, Vec<&'a DrawNode>)>,
    edge_groups: Vec<(String, Vec<DrawEdge<'a>>)>,
    seen: HashSet<String>,
}

impl Renderer<'_> {
    fn node_line(&self, node: &DrawNode) -> String {
        let id = safe_id(&node.id);
        let label = node_label(node);
        let key = Some(node.id.as_str());
        if key == self.last {
            format!("\t{id}([{label}]):::last\n")
        } else if key == self.first {
            format!("\t{id}([{label}]):::first\n")
        } else {
            format!("\t{id}({label})\n")
        }
    }

    fn node(&mut self, node: &DrawNode) {
        let line = self.node_line(node);
        self.out.push_str(&line);
    }

    /// The block of the edges grouped under `prefix` (none for the top level and for a self-loop).
    fn block(&mut self, prefix: &str) {
        let edges =
            self.edge_groups.iter().find(|(p, _)| p == prefix).map(|(_, e)| e.clone()).unwrap_or_default();
        let self_loop = matches!(edges.as_slice(), [e] if e.source == e.target);
        let framed = !prefix.is_empty() && !self_loop;
        if framed {
            // LangGraph refuses two subgraphs of one name; weft draws both.
            let name = prefix.rsplit(':').next().unwrap_or(prefix);
            self.seen.insert(name.to_owned());
            let _ = writeln!(self.out, "\tsubgraph {name}");
            if self.options.with_styles {
                let lines: Vec<String> = self
                    .subgraph_nodes
                    .iter()
                    .filter(|(p, _)| p == prefix)
                    .flat_map(|(_, nodes)| nodes.iter().map(|n| self.node_line(n)))
                    .collect();
                self.out.extend(lines);
            }
        }
        for edge in &edges {
            self.edge(edge);
        }
        let nested: Vec<String> = self
            .edge_groups
            .iter()
            .map(|(p, _)| p.clone())
            .filter(|p| {
                p.strip_prefix(prefix)
                    .and_then(|rest| rest.strip_prefix(':'))
                    .is_some_and(|rest| !rest.contains(':'))
            })
            .collect();
        for p in nested {
            self.block(&p);
        }
        if framed {
            self.out.push_str("\tend\n");
        }
    }

    fn edge(&mut self, edge: &DrawEdge<'_>) {
        let arrow = match edge.label {
            Some(data) => {
                let data = wrap_words(data, self.options.wrap_label_n_words.max(1));
                if edge.conditional {
                    format!(" -. &nbsp;{data}&nbsp; .-> ")
                } else {
                    format!(" -- &nbsp;{data}&nbsp; --> ")
                }
            }
            None if edge.conditional => " -.-> ".to_owned(),
            None => " --> ".to_owned(),
        };
        let _ = writeln!(self.out, "\t{}{arrow}{};", safe_id(edge.source), safe_id(edge.target));
    }
}

/// The node's label: its name (in `<p>` when it starts and ends with a Markdown character, as
/// `__start__` does), then its metadata.
fn node_label(node: &DrawNode) -> String {
    const MARKDOWN: [char; 3] = ['*', '_', '`'];
    let name = node.name.rsplit(':').next().unwrap_or(&node.name);
    let mut label = if name.starts_with(MARKDOWN) && name.ends_with(MARKDOWN) {
        format!("<p>{name}</p>")
    } else {
        name.to_owned()
    };
    if let Some(metadata) = node.metadata.as_ref().filter(|m| !m.is_empty()) {
        let lines: Vec<String> = metadata.iter().map(|(k, v)| format!("{k} = {}", py_str(v))).collect();
        let _ = write!(label, "<hr/><small><em>{}</em></small>", lines.join("\n"));
    }
    label
}

/// Keeps `[a-zA-Z0-9_-]`; any other character becomes a backslash and its code point in lower-case hex.
fn safe_id(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for ch in name.chars() {
        if ch.is_ascii_alphanumeric() || ch == '_' || ch == '-' {
            out.push(ch);
        } else {
            let _ = write!(out, "\\{:x}", u32::from(ch));
        }
    }
    out
}

/// Breaks a label of more than `n` words into lines of `n` words.
fn wrap_words(data: &str, n: usize) -> String {
    let words: Vec<&str> = data.split_whitespace().collect();
    if words.len() <= n {
        return data.to_owned();
    }
    words.chunks(n).map(|c| c.join(" ")).collect::<Vec<_>>().join("&nbsp<br>&nbsp")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_id_escapes_like_langchain() {
        assert_eq!(safe_id("Call Tool"), "Call\\20Tool");
        assert_eq!(safe_id("a-b_c9"), "a-b_c9");
        assert_eq!(safe_id("sub:one"), "sub\\3aone");
        assert_eq!(safe_id("é"), "\\e9");
    }

    #[test]
    fn long_labels_wrap_every_n_words() {
        assert_eq!(wrap_words("a b c", 2), "a b&nbsp<br>&nbspc");
        assert_eq!(wrap_words("a  b", 2), "a  b");
    }
}
