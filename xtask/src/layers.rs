//! The `layers` stage of `cargo xtask ci`: inside weft-graph, a module may use only modules of its own layer
//! or of the layers below it (docs/architecture.md draws them):
//!
//! 0. the data model: state, channels' values, messages, checkpoints and stores, stream chunks, errors, the
//!    runtime a node gets;
//! 1. the graph's static shape: topology, branches, the compiled spec;
//! 2. the Pregel engine: plan, execute, apply, save, emit;
//! 3. the user API: builder, compiled graph, state API, functional API, subgraphs, drawing.
//!
//! Every `crate::…` and `super::…` path outside test code is resolved to the module it names. An import
//! that runs up a layer fails the stage unless [`KNOWN_UPWARD`] lists it; that list only shrinks: an entry
//! no longer needed fails the stage too, so a fix cannot be undone unnoticed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The crate checked, from the workspace root.
const ROOT: &str = "crates/graph/src";

/// Each module's layer, by path prefix (the longest prefix that matches wins). A module missing here
/// fails the stage: a new module must be given its layer.
const LAYERS: [(&str, usize); 36] = [
    ("state", 0),
    ("json_state", 0),
    ("messages", 0),
    ("checkpoint", 0),
    ("store", 0),
    ("types", 0),
    ("error", 0),
    ("cache", 0),
    ("retry", 0),
    ("timeout", 0),
    ("control", 0),
    ("stream", 0),
    ("runtime", 0),
    ("snapshot", 0),
    ("subgraph_reader", 0),
    ("node", 0),
    ("node_input_fields", 0),
    ("parent_command", 0),
    ("topology", 1),
    ("branch", 1),
    ("pregel::spec", 1),
    ("pregel", 2),
    ("builder", 3),
    ("compiled", 3),
    ("state_api", 3),
    ("func", 3),
    ("subgraph", 3),
    ("draw", 3),
    ("erased", 3),
    ("root", 3),
    // The crate root only declares modules and re-exports the API.
    ("", 3),
    // Test-only kits compiled into the crate for savers and stores to run.
    ("checkpoint::conformance", 0),
    ("store::conformance", 0),
    ("state::derive_support", 0),
    ("messages::state", 0),
    // The functional API's state type (an entrypoint's input, return value and `previous`).
    ("func::state", 0),
];

/// Imports that run up a layer today, as `(from, to)` modules: the layering still to be done (issue 40).
/// Remove an entry when its import is gone; never add one.
const KNOWN_UPWARD: &[(&str, &str)] = &[];

/// Names of the layers, for messages.
const NAMES: [&str; 4] = ["data model", "static shape", "engine", "user API"];

/// Runs the check from the workspace root.
pub(crate) fn check() -> Result<(), String> {
    let root = PathBuf::from(ROOT);
    let mut files = Vec::new();
    rust_files(&root, &mut files)?;
    let mut upward = BTreeSet::new();
    let mut unknown = BTreeSet::new();
    for file in &files {
        let module = module_of(&root, file);
        let text =
            std::fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let Some(from) = layer_of(&module) else {
            unknown.insert(module.clone());
            continue;
        };
        for path in referenced_paths(&module, &without_tests(&text)) {
            let target = resolve(&root, &path);
            if target.is_empty() || module.starts_with(&target) || target.starts_with(&module) {
                continue;
            }
            match layer_of(&target) {
                Some(to) if to > from => {
                    upward.insert((module.clone(), target));
                }
                Some(_) => {}
                None => {
                    unknown.insert(target);
                }
            }
        }
    }
    report(&upward, &unknown)
}

/// Fails on modules without a layer, on upward imports not listed, and on listed ones that are gone.
fn report(upward: &BTreeSet<(String, String)>, unknown: &BTreeSet<String>) -> Result<(), String> {
    let mut problems = Vec::new();
    for module in unknown {
        problems.push(format!("module `{module}` has no layer: add it to LAYERS in xtask/src/layers.rs"));
    }
    let known: BTreeSet<(String, String)> =
        KNOWN_UPWARD.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect();
    for (from, to) in upward.difference(&known) {
        problems.push(format!(
            "`{from}` ({}) imports `{to}` ({}): a layer may use only the layers below it",
            name(layer_of(from)),
            name(layer_of(to))
        ));
    }
    for (from, to) in known.difference(upward) {
        problems.push(format!("`{from}` no longer imports `{to}`: remove the entry from KNOWN_UPWARD"));
    }
    println!(
        "layers: {} upward imports listed as still to be removed, {} new, {} stale",
        known.len(),
        upward.difference(&known).count(),
        known.difference(upward).count()
    );
    if problems.is_empty() { Ok(()) } else { Err(problems.join("\n")) }
}

fn name(layer: Option<usize>) -> &'static str {
    layer.and_then(|l| NAMES.get(l).copied()).unwrap_or("no layer")
}

/// The layer of a module: the entry of [`LAYERS`] with the longest prefix of its path.
fn layer_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .filter(|(prefix, _)| {
            module == *prefix || (!prefix.is_empty() && module.starts_with(&format!("{prefix}::")))
        })
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, layer)| *layer)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    Ok(())
}

/// `pregel::run` for `pregel/run.rs`, `pregel` for `pregel/mod.rs`, `` for `lib.rs`.
fn module_of(root: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(root).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    // A test file of a module (`foo/tests.rs`) is test code.
    parts.join("::")
}

/// The text without comments and without test code (`#[cfg(test)]` items and `tests` modules, which
/// may use anything).
fn without_tests(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut skip_depth: Option<i64> = None;
    let mut depth = 0i64;
    let mut pending_cfg_test = false;
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or_default();
        let trimmed = code.trim();
        if skip_depth.is_none() && trimmed.starts_with("#[cfg(test)]") {
            pending_cfg_test = true;
            continue;
        }
        let opens = code.matches('{').count() as i64;
        let closes = code.matches('}').count() as i64;
        if pending_cfg_test && skip_depth.is_none() && !trimmed.starts_with("#[") {
            pending_cfg_test = false;
            if opens > closes {
                skip_depth = Some(depth);
            } else {
                // A one-line test item (`mod tests;`, a `use`): skipped alone.
                depth += opens - closes;
                continue;
            }
        }
        depth += opens - closes;
        match skip_depth {
            Some(d) if depth <= d => skip_depth = None,
            Some(_) => {}
            None => {
                out.push_str(code);
                out.push('\n');
            }
        }
    }
    out
}

/// Every module path the text names, made absolute: `crate::a::b::C`, `super::x`, and each leaf of
/// `use crate::{a::{b, c}, d}` trees.
fn referenced_paths(module: &str, text: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        let (prefix, base): (&str, Vec<String>) = if rest.starts_with("crate::") {
            ("crate::", Vec::new())
        } else if rest.starts_with("super::") {
            ("super::", parent(module))
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        let boundary = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        i += prefix.len();
        if !boundary {
            continue;
        }
        let (tree, used) = use_tree(&text[i..]);
        i += used;
        for leaf in tree {
            let mut path = base.clone();
            let mut segments = leaf.into_iter().peekable();
            while let Some(segment) = segments.next() {
                if segment == "super" {
                    path.pop();
                } else if segment != "self" || segments.peek().is_some() {
                    path.push(segment);
                }
            }
            paths.push(path);
        }
    }
    paths
}

/// The module above `module` (`super` from it), as segments.
fn parent(module: &str) -> Vec<String> {
    let mut parts: Vec<String> = module.split("::").filter(|p| !p.is_empty()).map(str::to_owned).collect();
    parts.pop();
    parts
}

/// The paths of a use tree (or a plain path) at the start of `text`, and how many bytes it took.
fn use_tree(text: &str) -> (Vec<Vec<String>>, usize) {
    let mut segments = Vec::new();
    let mut i = 0;
    loop {
        let ident: String =
            text[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if ident.is_empty() {
            break;
        }
        i += ident.len();
        segments.push(ident);
        if text[i..].starts_with("::") {
            i += 2;
        } else {
            return (vec![segments], i);
        }
    }
    if !text[i..].starts_with('{') {
        return (vec![segments], i);
    }
    i += 1;
    let mut paths = Vec::new();
    loop {
        let skipped =
            text[i..].len() - text[i..].trim_start_matches(|c: char| c.is_whitespace() || c == ',').len();
        i += skipped;
        if text[i..].starts_with('}') || i >= text.len() {
            return (paths, (i + 1).min(text.len()));
        }
        let (inner, used) = use_tree(&text[i..]);
        if used == 0 {
            // Not a path (`*`, `self as x`…): skip one character.
            i += text[i..].chars().next().map_or(1, char::len_utf8);
            continue;
        }
        i += used;
        for tail in inner {
            let mut path = segments.clone();
            path.extend(tail);
            paths.push(path);
        }
    }
}

/// The module a path names: its longest prefix that is a module of the crate (`pregel::task` for
/// `pregel::task::state_json`), joined with `::`; empty for the crate root.
fn resolve(root: &Path, path: &[String]) -> String {
    let mut found = 0;
    for n in 1..=path.len() {
        let dir: PathBuf = path[..n].iter().collect();
        let as_file = root.join(&dir).with_extension("rs");
        if as_file.is_file() || root.join(&dir).join("mod.rs").is_file() {
            found = n;
        } else {
            break;
        }
    }
    path[..found].join("::")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn use_trees_and_inline_paths_resolve_to_absolute_paths() {
        let text = "use crate::{a::{b, c::D}, e};\nfn f() { super::g::h(); crate::x::y(); }";
        let paths: Vec<String> = referenced_paths("p::q", text).into_iter().map(|p| p.join("::")).collect();
        assert_eq!(paths, ["a::b", "a::c::D", "e", "p::g::h", "x::y"]);
    }

    #[test]
    fn test_code_is_left_out() {
        let text = "use crate::a;\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}\nuse crate::c;\n";
        let kept = without_tests(text);
        assert!(
            kept.contains("crate::a") && kept.contains("crate::c") && !kept.contains("crate::b"),
            "{kept}"
        );
    }

    #[test]
    fn the_longest_prefix_gives_the_layer() {
        assert_eq!(layer_of("pregel::run"), Some(2));
        assert_eq!(layer_of("pregel::spec"), Some(1));
        assert_eq!(layer_of("pregelx"), None);
        assert_eq!(layer_of(""), Some(3));
        assert_eq!(layer_of("checkpoint::memory::keys"), Some(0));
    }
}
