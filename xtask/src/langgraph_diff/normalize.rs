//! Normalisation, applied alike to LangGraph's and weft's documents before they are compared:
//!
//! - timestamps (`ts`, `created_at`, `timestamp`) are dropped;
//! - object keys are sorted (a dict's order is not something a user relies on) and numbers printed in
//!   one form (`1.0` and `1` are the same number);
//! - channel versions (the values under `channel_versions` and `versions_seen`) become `<v:N>`, N the
//!   rank of the version's counter among the document's versions (LangGraph's are
//!   `000…0003.0.8126…`, weft's fixed-width strings: only their order means anything);
//! - ids (UUIDs, with or without a `run-`/`lc_run--` prefix, and 32-digit hex ids such as interrupt ids)
//!   become `<id:N>`, numbered by first appearance, inside any string or key;
//! - errors (`{"type": NAME}` under an `error` key) become the shared vocabulary's name
//!   ([`ERRORS`]): LangGraph's exception class and weft's `GraphError` variant map to one word;
//! - a saved `__error__` write's value becomes `<error>` (LangGraph saves the exception's `repr`, weft
//!   the error's text);
//! - lists whose order is the order tasks happened to finish in are sorted: a run's `__interrupt__`
//!   list (by value) and a checkpoint's `pending_writes` (by channel). LangGraph runs parallel tasks in
//!   threads and lists them as they finish; weft lists interrupts in task order.

use crate::json::Json;

/// Which half a document comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// LangGraph, through `python/run.py`.
    Python,
    /// weft, through `weft-langgraph-diff`.
    Weft,
}

/// The shared error vocabulary: `(side, the side's own name, the shared name)`. A name not listed
/// stays `python:NAME` or `weft:NAME`, so it can never compare equal by accident.
pub(crate) const ERRORS: &[(Side, &str, &str)] = &[
    (Side::Python, "GraphRecursionError", "GraphRecursionError"),
    (Side::Weft, "RecursionLimit", "GraphRecursionError"),
    (Side::Python, "InvalidUpdateError", "InvalidUpdateError"),
    (Side::Weft, "InvalidUpdate", "InvalidUpdateError"),
    (Side::Weft, "SendToEnd", "InvalidUpdateError"),
    // LangGraph raises InvalidUpdateError("There is no parent graph").
    (Side::Weft, "NoParentGraph", "InvalidUpdateError"),
    // A node returning something that is not an update ("Expected dict, got ...").
    (Side::Weft, "InvalidNodeReturn", "InvalidUpdateError"),
    (Side::Python, "EmptyInputError", "EmptyInputError"),
    (Side::Weft, "EmptyInput", "EmptyInputError"),
    (Side::Weft, "EmptyCommand", "EmptyInputError"),
    // "Branch did not return a valid destination", "recursion_limit must be at least 1", a missing
    // thread id: ValueError in LangGraph.
    (Side::Python, "ValueError", "ValueError"),
    (Side::Weft, "InvalidDestination", "ValueError"),
    (Side::Weft, "NoDestination", "ValueError"),
    (Side::Weft, "InvalidRecursionLimit", "ValueError"),
    (Side::Weft, "MissingThreadId", "ValueError"),
    // `bulk_update_state` without supersteps, or with an empty one.
    (Side::Weft, "NoSupersteps", "ValueError"),
    (Side::Weft, "NoUpdates", "ValueError"),
    // Resuming without a checkpointer, an ambiguous or unknown resume: RuntimeError in LangGraph.
    (Side::Python, "RuntimeError", "RuntimeError"),
    (Side::Weft, "ResumeWithoutCheckpointer", "RuntimeError"),
    (Side::Weft, "AmbiguousResume", "RuntimeError"),
    (Side::Weft, "UnknownResumeId", "RuntimeError"),
    // A node attempt past its timeout (LangGraph re-raises the node's own error; weft carries it in
    // the node's error, which the Rust half names by `GraphError::node_timeout`).
    (Side::Python, "NodeTimeoutError", "NodeTimeoutError"),
    (Side::Weft, "NodeTimeoutError", "NodeTimeoutError"),
    // A checkpointer's own failure (a saver raising in `get_next_version`).
    (Side::Python, "SaverFailure", "CheckpointerError"),
    (Side::Weft, "Storage", "CheckpointerError"),
    // A failure raised by a node or a router of the scenario itself.
    (Side::Python, "NodeFailure", "NodeError"),
    (Side::Python, "RouterFailure", "NodeError"),
    (Side::Weft, "Node", "NodeError"),
    // Errors middleware raise in an agent's node (weft: the node's error).
    (Side::Python, "ModelCallLimitExceededError", "NodeError"),
    (Side::Python, "ToolCallLimitExceededError", "NodeError"),
    (Side::Python, "PIIDetectionError", "NodeError"),
    (Side::Python, "StructuredOutputValidationError", "NodeError"),
    (Side::Python, "MultipleStructuredOutputsError", "NodeError"),
    // A node refusing its input: a ValueError raised by LangChain's middleware.
    (Side::Weft, "NodeInvalidInput", "ValueError"),
];

/// The shared name of `name`, raised on `side`.
pub(crate) fn error_name(side: Side, name: &str) -> String {
    match ERRORS.iter().find(|(s, own, _)| *s == side && *own == name) {
        Some((_, _, shared)) => (*shared).to_owned(),
        None => format!("{}:{name}", if side == Side::Python { "python" } else { "weft" }),
    }
}

const DROPPED: [&str; 3] = ["ts", "created_at", "timestamp"];

/// Normalises one document (a scenario's observations).
pub(crate) fn normalize(doc: &Json, side: Side) -> Json {
    let mut value = canonical(doc, side, None);
    let mut counters = Vec::new();
    collect_versions(&value, false, &mut counters);
    counters.sort_unstable();
    counters.dedup();
    replace_versions(&mut value, false, &counters);
    let mut ids = Vec::new();
    replace_ids(&mut value, &mut ids);
    value
}

/// Drops timestamps, sorts keys, prints numbers one way, maps error names.
fn canonical(value: &Json, side: Side, key: Option<&str>) -> Json {
    match value {
        Json::Num(text) => Json::Num(number(text)),
        Json::Arr(items) => {
            let mut items: Vec<Json> = items.iter().map(|v| canonical(v, side, None)).collect();
            let sort_key: Option<fn(&Json) -> String> = match key {
                Some("__interrupt__") => {
                    Some(|item| item.get("value").map(Json::to_text).unwrap_or_default())
                }
                Some("pending_writes") => Some(|item| match item {
                    Json::Arr(pair) => pair.first().map(Json::to_text).unwrap_or_default(),
                    _ => String::new(),
                }),
                _ => None,
            };
            if key == Some("pending_writes") {
                items.iter_mut().for_each(error_text);
            }
            if let Some(sort_key) = sort_key {
                items.sort_by_cached_key(sort_key);
            }
            Json::Arr(items)
        }
        Json::Obj(fields) => {
            if key == Some("error") {
                if let [(k, Json::Str(name))] = fields.as_slice() {
                    if k == "type" {
                        return Json::Obj(vec![("type".to_owned(), Json::Str(error_name(side, name)))]);
                    }
                }
            }
            let mut out: Vec<(String, Json)> = fields
                .iter()
                .filter(|(k, _)| !DROPPED.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), canonical(v, side, Some(k))))
                .collect();
            out.sort_by(|a, b| a.0.cmp(&b.0));
            Json::Obj(out)
        }
        other => other.clone(),
    }
}

/// A saved `__error__` write's value becomes `<error>`: LangGraph saves the exception (its `repr`), weft
/// the error's text; that a task failed is what compares.
fn error_text(write: &mut Json) {
    if let Json::Arr(pair) = write {
        if let [Json::Str(channel), value] = pair.as_mut_slice() {
            if channel == "__error__" {
                *value = Json::Str("<error>".to_owned());
            }
        }
    }
}

fn number(text: &str) -> String {
    match text.parse::<f64>() {
        Ok(n) if n.fract() == 0.0 && n.abs() < 1e15 => format!("{}", n as i64),
        Ok(n) => format!("{n}"),
        Err(_) => text.to_owned(),
    }
}

/// The counter of a version: the digits before the first `.` (or the number itself).
fn counter(value: &Json) -> Option<u128> {
    match value {
        Json::Str(s) => s.split('.').next().and_then(|d| d.trim().parse().ok()),
        Json::Num(n) => n.split('.').next().and_then(|d| d.parse().ok()),
        _ => None,
    }
}

fn is_version_map(key: &str) -> bool {
    key == "channel_versions" || key == "versions_seen"
}

fn collect_versions(value: &Json, inside: bool, out: &mut Vec<u128>) {
    match value {
        Json::Arr(items) => items.iter().for_each(|v| collect_versions(v, inside, out)),
        Json::Obj(fields) => {
            for (k, v) in fields {
                collect_versions(v, inside || is_version_map(k), out);
            }
        }
        leaf if inside => out.extend(counter(leaf)),
        _ => {}
    }
}

fn replace_versions(value: &mut Json, inside: bool, ranks: &[u128]) {
    match value {
        Json::Arr(items) => items.iter_mut().for_each(|v| replace_versions(v, inside, ranks)),
        Json::Obj(fields) => {
            for (k, v) in fields.iter_mut() {
                let inside = inside || is_version_map(k);
                replace_versions(v, inside, ranks);
            }
        }
        leaf if inside => {
            if let Some(rank) = counter(leaf).and_then(|c| ranks.iter().position(|r| *r == c)) {
                *leaf = Json::Str(format!("<v:{}>", rank + 1));
            }
        }
        _ => {}
    }
}

fn replace_ids(value: &mut Json, ids: &mut Vec<String>) {
    match value {
        Json::Str(s) => *s = ids_in(s, ids),
        Json::Arr(items) => items.iter_mut().for_each(|v| replace_ids(v, ids)),
        Json::Obj(fields) => {
            for (k, v) in fields.iter_mut() {
                *k = ids_in(k, ids);
                replace_ids(v, ids);
            }
            fields.sort_by(|a, b| a.0.cmp(&b.0));
        }
        _ => {}
    }
}

/// `text` with every id in it replaced by its placeholder.
pub(crate) fn ids_in(text: &str, ids: &mut Vec<String>) -> String {
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        let boundary = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        let found = if boundary { id_at(bytes, i) } else { None };
        match found {
            Some(len) => {
                out.push_str(&text[copied..i]);
                let id = &text[i..i + len];
                let n = match ids.iter().position(|known| known == id) {
                    Some(n) => n,
                    None => {
                        ids.push(id.to_owned());
                        ids.len() - 1
                    }
                };
                out.push_str(&format!("<id:{}>", n + 1));
                i += len;
                copied = i;
            }
            None => i += 1,
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// The length of the id starting at `i`, if one does. A run id (`lc_run--<uuid>`, `run-<uuid>`) takes
/// the generation index LangChain appends to message ids (`-0`) with it.
fn id_at(bytes: &[u8], i: usize) -> Option<usize> {
    let rest = &bytes[i..];
    for prefix in [&b"lc_run--"[..], b"run-", b""] {
        if let Some(after) = rest.strip_prefix(prefix) {
            if let Some(len) = uuid_len(after).or_else(|| hex32_len(after)) {
                let mut end = prefix.len() + len;
                if !prefix.is_empty() && rest.get(end) == Some(&b'-') {
                    let digits = rest[end + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
                    if digits > 0 && ends_token(rest, end + 1 + digits) {
                        end += 1 + digits;
                    }
                }
                return Some(end);
            }
        }
    }
    None
}

fn hex_run(bytes: &[u8], n: usize) -> bool {
    bytes.len() >= n && bytes[..n].iter().all(u8::is_ascii_hexdigit)
}

fn ends_token(bytes: &[u8], at: usize) -> bool {
    bytes.get(at).is_none_or(|c| !c.is_ascii_alphanumeric())
}

fn uuid_len(bytes: &[u8]) -> Option<usize> {
    let groups = [8, 4, 4, 4, 12];
    let mut at = 0;
    for (n, len) in groups.iter().enumerate() {
        if !hex_run(&bytes[at..], *len) {
            return None;
        }
        at += len;
        if n < 4 {
            if bytes.get(at) != Some(&b'-') {
                return None;
            }
            at += 1;
        }
    }
    ends_token(bytes, at).then_some(at)
}

fn hex32_len(bytes: &[u8]) -> Option<usize> {
    (hex_run(bytes, 32) && ends_token(bytes, 32) && bytes[..32].iter().any(u8::is_ascii_alphabetic))
        .then_some(32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    fn norm(text: &str, side: Side) -> String {
        normalize(&parse(text).unwrap(), side).to_text()
    }

    #[test]
    fn saved_error_writes_compare_as_a_failure_whatever_their_text() {
        let python =
            r#"[{"pending_writes": [["__error_source_node__", "a"], ["__error__", "NodeFailure('x')"]]}]"#;
        let weft = r#"[{"pending_writes": [["__error__", "node 'a' failed at step 1: x"], ["__error_source_node__", "a"]]}]"#;
        let expected = r#"[{"pending_writes":[["__error__","<error>"],["__error_source_node__","a"]]}]"#;
        assert_eq!(norm(python, Side::Python), expected);
        assert_eq!(norm(weft, Side::Weft), expected);
        // Only the error's value: another channel keeps its value.
        let other = r#"[{"pending_writes": [["log", ["x"]]]}]"#;
        assert_eq!(norm(other, Side::Python), r#"[{"pending_writes":[["log",["x"]]]}]"#);
    }

    #[test]
    fn ids_become_placeholders_in_order_of_first_appearance() {
        let python = r#"[{"id": "1f1e9041-a145-6bd9-bfff-64a8baa38ec9", "ns": "sub:563105bb-3915-6dc2-ce48-9efd6d9f3f65",
            "i": "bab091e1ae8d05bad37245780f78d53b", "again": "1f1e9041-a145-6bd9-bfff-64a8baa38ec9",
            "msg": "lc_run--019ac0b5-7da4-7c12-a6a3-1e7e1cf0c1a2-0"}]"#;
        let weft = r#"[{"msg": "019ac0b5-0000-7c12-a6a3-1e7e1cf0c1a2", "again": "01a21421-fb4d-7fb5-a6af-b134f854474e",
            "i": "0123456789abcdef0123456789abcdef", "ns": "sub:6518cfe1-2868-f5f0-f1a5-435193af61ae",
            "id": "01a21421-fb4d-7fb5-a6af-b134f854474e"}]"#;
        let expected = r#"[{"again":"<id:1>","i":"<id:2>","id":"<id:1>","msg":"<id:3>","ns":"sub:<id:4>"}]"#;
        assert_eq!(norm(python, Side::Python), expected);
        assert_eq!(norm(weft, Side::Weft), expected);
    }

    #[test]
    fn lists_in_finishing_order_are_sorted_and_others_kept() {
        let doc = r#"{"__interrupt__": [{"value": "s2?"}, {"value": "s1?"}],
            "pending_writes": [["log", 1], ["branch:to:b", null], ["branch:to:a", null]],
            "next": ["b", "a"]}"#;
        let expected = r#"{"__interrupt__":[{"value":"s1?"},{"value":"s2?"}],"next":["b","a"],"pending_writes":[["branch:to:a",null],["branch:to:b",null],["log",1]]}"#;
        assert_eq!(norm(doc, Side::Python), expected);
    }

    #[test]
    fn words_and_numbers_that_look_like_hex_are_left_alone() {
        let text = r#"["deadbeef", "call_1", "00000000000000000000000000000001", "a-b"]"#;
        assert_eq!(
            norm(text, Side::Python),
            r#"["deadbeef","call_1","00000000000000000000000000000001","a-b"]"#
        );
    }

    #[test]
    fn versions_become_ranks_of_their_counters() {
        let python = r#"{"channel_versions": {"a": "00000000000000000000000000000002.0.78", "b": "00000000000000000000000000000004.0.13"},
            "versions_seen": {"n": {"a": "00000000000000000000000000000002.0.11"}}}"#;
        let weft = r#"{"channel_versions": {"a": "00000000000000000002", "b": "00000000000000000009"},
            "versions_seen": {"n": {"a": "00000000000000000002"}}}"#;
        let expected =
            r#"{"channel_versions":{"a":"<v:1>","b":"<v:2>"},"versions_seen":{"n":{"a":"<v:1>"}}}"#;
        assert_eq!(norm(python, Side::Python), expected);
        assert_eq!(norm(weft, Side::Weft), expected);
    }

    #[test]
    fn timestamps_go_keys_sort_and_numbers_agree() {
        let text = r#"{"b": 1.0, "ts": "2026", "a": {"created_at": "x", "timestamp": 3, "n": 2}}"#;
        assert_eq!(norm(text, Side::Python), r#"{"a":{"n":2},"b":1}"#);
    }

    #[test]
    fn errors_map_to_the_shared_vocabulary() {
        let python = r#"[{"error": {"type": "GraphRecursionError"}}, {"error": {"type": "KeyError"}}]"#;
        let weft = r#"[{"error": {"type": "RecursionLimit"}}, {"error": {"type": "Serialization"}}]"#;
        assert_eq!(
            norm(python, Side::Python),
            r#"[{"error":{"type":"GraphRecursionError"}},{"error":{"type":"python:KeyError"}}]"#
        );
        assert_eq!(
            norm(weft, Side::Weft),
            r#"[{"error":{"type":"GraphRecursionError"}},{"error":{"type":"weft:Serialization"}}]"#
        );
    }

    #[test]
    fn node_timeouts_compare_by_name_node_kind_and_timeout() {
        let error =
            r#"[{"error": {"type": "NodeTimeoutError", "node": "slow", "kind": "run", "timeout": 0.05}}]"#;
        let expected = r#"[{"error":{"kind":"run","node":"slow","timeout":0.05,"type":"NodeTimeoutError"}}]"#;
        assert_eq!(norm(error, Side::Python), expected);
        assert_eq!(norm(error, Side::Weft), expected);
    }

    #[test]
    fn every_shared_error_name_has_both_sides() {
        for (_, _, shared) in ERRORS {
            for side in [Side::Python, Side::Weft] {
                assert!(ERRORS.iter().any(|(s, _, n)| *s == side && n == shared), "{shared} lacks {side:?}");
            }
        }
    }
}
