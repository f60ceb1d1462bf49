//! Mermaid output in LangGraph's dialect (langchain-core's `draw_mermaid`), byte for byte.

use std::fmt::Write as _;

use serde_json::Value;

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
    if options.with_styles {
        let first = graph.first_node().map(|n| n.name.as_str());
        let last = graph.last_node().map(|n| n.name.as_str());
        for node in graph.nodes() {
            let id = safe_id(&node.name);
            let label = node_label(node);
            let name = Some(node.name.as_str());
            let _ = if name == last {
                writeln!(out, "\t{id}([{label}]):::last")
            } else if name == first {
                writeln!(out, "\t{id}([{label}]):::first")
            } else {
                writeln!(out, "\t{id}({label})")
            };
        }
    }
    // Edges are grouped by the common prefix of their ends; without subgraphs only a self-loop has one,
    // so self-loops come after the other edges.
    let (loops, others): (Vec<DrawEdge<'_>>, Vec<DrawEdge<'_>>) =
        graph.edges().partition(|e| e.source == e.target);
    for edge in others.iter().chain(loops.iter()) {
        let arrow = match edge.label {
            Some(data) => {
                let data = wrap_words(data, options.wrap_label_n_words.max(1));
                if edge.conditional {
                    format!(" -. &nbsp;{data}&nbsp; .-> ")
                } else {
                    format!(" -- &nbsp;{data}&nbsp; --> ")
                }
            }
            None if edge.conditional => " -.-> ".to_owned(),
            None => " --> ".to_owned(),
        };
        let _ = writeln!(out, "\t{}{arrow}{};", safe_id(edge.source), safe_id(edge.target));
    }
    if options.with_styles {
        let styles = &options.node_styles;
        let _ = writeln!(out, "\tclassDef default {}", styles.default);
        let _ = writeln!(out, "\tclassDef first {}", styles.first);
        let _ = writeln!(out, "\tclassDef last {}", styles.last);
    }
    out
}

/// The node's label: its name (in `<p>` when it starts and ends with a Markdown character, as
/// `__start__` does), then its metadata.
fn node_label(node: &DrawNode) -> String {
    const MARKDOWN: [char; 3] = ['*', '_', '`'];
    let name = &node.name;
    let mut label = if name.starts_with(MARKDOWN) && name.ends_with(MARKDOWN) {
        format!("<p>{name}</p>")
    } else {
        name.clone()
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

/// A metadata value as Python's `str()` prints it (LangGraph formats metadata with f-strings); floats
/// print as serde_json prints them, which differs from Python for exponents (`1e20`).
fn py_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => py_repr(other),
    }
}

fn py_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
            let mut out = String::from(quote);
            for ch in s.chars() {
                match ch {
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if c == quote => {
                        out.push('\\');
                        out.push(c);
                    }
                    c => out.push(c),
                }
            }
            out.push(quote);
            out
        }
        Value::Array(items) => format!("[{}]", items.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", py_repr(&Value::from(k.as_str())), py_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
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

    #[test]
    fn metadata_values_print_as_python_does() {
        assert_eq!(py_str(&Value::from("x")), "x");
        assert_eq!(py_str(&serde_json::json!(true)), "True");
        assert_eq!(py_str(&serde_json::json!(null)), "None");
        assert_eq!(py_str(&serde_json::json!({"k": ["a", 1, false]})), "{'k': ['a', 1, False]}");
        assert_eq!(py_repr(&Value::from("it's")), "\"it's\"");
    }
}
