#![allow(clippy::unwrap_used, missing_docs)]
//! Partial JSON: completing what a model is still streaming, like langchain-core's `parse_partial_json`.

use serde_json::json;
use weft_runnable_core::{parse_json_markdown, parse_partial_json};

#[test]
fn complete_json_parses_unchanged() {
    assert_eq!(parse_partial_json(r#"{"a": [1, 2], "b": null}"#), Some(json!({"a": [1, 2], "b": null})));
    assert_eq!(parse_partial_json("42"), Some(json!(42)));
}

#[test]
fn open_string_and_brackets_are_closed() {
    assert_eq!(parse_partial_json(r#"{"name": "Al"#), Some(json!({"name": "Al"})));
    assert_eq!(parse_partial_json(r#"{"a": {"b": [1, {"c": "x"#), Some(json!({"a": {"b": [1, {"c": "x"}]}})));
    assert_eq!(parse_partial_json("["), Some(json!([])));
}

#[test]
fn dangling_key_and_trailing_comma_are_dropped() {
    assert_eq!(parse_partial_json(r#"{"na"#), Some(json!({})));
    assert_eq!(parse_partial_json(r#"{"name": "Alice", "ag"#), Some(json!({"name": "Alice"})));
    assert_eq!(parse_partial_json(r#"{"name": "Alice","#), Some(json!({"name": "Alice"})));
    assert_eq!(parse_partial_json(r#"{"name": "Alice", "age": "#), Some(json!({"name": "Alice"})));
    assert_eq!(parse_partial_json(r#"{"a": oops"#), Some(json!({})));
    assert_eq!(parse_partial_json("[1, 2, "), Some(json!([1, 2])));
}

#[test]
fn partial_numbers_and_literals_are_kept_or_dropped() {
    assert_eq!(parse_partial_json(r#"{"age": 3"#), Some(json!({"age": 3})));
    assert_eq!(parse_partial_json(r#"{"ok": tr"#), Some(json!({})));
}

#[test]
fn escapes_survive_and_a_trailing_backslash_is_dropped() {
    assert_eq!(parse_partial_json(r##"{"q": "say \"hi\""##), Some(json!({"q": "say \"hi\""})));
    assert_eq!(parse_partial_json(r#"{"q": "say \"hi\"#), Some(json!({"q": "say \"hi"})));
    assert_eq!(parse_partial_json(r#"{"p": "C:\\dir\"#), Some(json!({"p": "C:\\dir"})));
    assert_eq!(parse_partial_json("{\"s\": \"ab\\"), Some(json!({"s": "ab"})));
}

#[test]
fn raw_newlines_and_tabs_inside_strings_are_accepted() {
    assert_eq!(
        parse_partial_json("{\"text\": \"line 1\nline\t2\"}"),
        Some(json!({"text": "line 1\nline\t2"}))
    );
    assert_eq!(parse_partial_json("{\"text\": \"line 1\nli"), Some(json!({"text": "line 1\nli"})));
}

#[test]
fn unicode_text_is_cut_on_character_boundaries() {
    assert_eq!(parse_partial_json(r#"{"w": "héllo wörld"#), Some(json!({"w": "héllo wörld"})));
    assert_eq!(parse_partial_json(r#"{"w": "é", "ü"#), Some(json!({"w": "é"})));
}

#[test]
fn mismatched_closer_or_nothing_parseable_gives_none() {
    assert_eq!(parse_partial_json(r#"{"a": [1}"#), None);
    assert_eq!(parse_partial_json("hello"), None);
    assert_eq!(parse_partial_json(""), None);
}

#[test]
fn markdown_fences_are_stripped() {
    assert_eq!(parse_json_markdown("```json\n{\"a\": 1}\n```"), Some(json!({"a": 1})));
    assert_eq!(parse_json_markdown("Sure!\n```json\n{\"a\": 1}\n```\nAnything else?"), Some(json!({"a": 1})));
    assert_eq!(parse_json_markdown("```\n[1, 2]\n```"), Some(json!([1, 2])));
    assert_eq!(parse_json_markdown("  {\"a\": 1}  "), Some(json!({"a": 1})));
}

#[test]
fn unfinished_fenced_json_is_completed() {
    assert_eq!(parse_json_markdown("```json\n{\"a\": [1, 2"), Some(json!({"a": [1, 2]})));
    assert_eq!(parse_json_markdown("```json\n"), None);
}

#[test]
fn long_text_before_a_fence_parses_quickly() {
    let prose = "word ".repeat(20_000);
    let text = format!("{prose}\n```json\n{{\"a\": 1}}\n```");
    let started = std::time::Instant::now();
    assert_eq!(parse_json_markdown(&text), Some(json!({"a": 1})));
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "took {:?}", started.elapsed());
}
