#![allow(clippy::unwrap_used, missing_docs)]
//! Merging streamed AI message chunks, like LangChain's `AIMessageChunk` `+`.

use serde_json::{Map, Value, json};
use weft_runnable_core::{AiMessage, Content, Merge, ToolCall, ToolCallChunk, UsageMetadata};

fn fold(chunks: Vec<AiMessage>) -> AiMessage {
    chunks.into_iter().reduce(|acc, next| acc.merge(next).unwrap()).unwrap()
}

fn tool_chunk(name: Option<&str>, args: &str, id: Option<&str>, index: u32) -> AiMessage {
    AiMessage::default().with_tool_call_chunks(vec![ToolCallChunk::new(name, Some(args), id, Some(index))])
}

fn map(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

#[test]
fn text_content_concatenates() {
    let merged = fold(vec![AiMessage::new("Hel"), AiMessage::new("lo"), AiMessage::new(" world")]);
    assert_eq!(merged.content, Content::Text("Hello world".into()));
}

#[test]
fn content_blocks_merge_by_index() {
    let a = AiMessage::new(Content::Blocks(vec![json!({"type": "text", "text": "Hel", "index": 0})]));
    let b = AiMessage::new(Content::Blocks(vec![json!({"type": "text", "text": "lo", "index": 0})]));
    let c = AiMessage::new(Content::Blocks(vec![json!({"type": "tool_use", "id": "t1", "index": 1})]));
    let merged = fold(vec![a, b, c]);
    assert_eq!(
        merged.content,
        Content::Blocks(vec![
            json!({"type": "text", "text": "Hello", "index": 0}),
            json!({"type": "tool_use", "id": "t1", "index": 1}),
        ])
    );
    assert_eq!(merged.text(), "Hello");
}

#[test]
fn text_followed_by_blocks_becomes_a_list() {
    let merged = fold(vec![
        AiMessage::new("a"),
        AiMessage::new(Content::Blocks(vec![json!({"type": "text", "text": "b"})])),
        AiMessage::new("c"),
    ]);
    assert_eq!(
        merged.content,
        Content::Blocks(vec![json!("a"), json!({"type": "text", "text": "b"}), json!("c")])
    );
    let merged = fold(vec![
        AiMessage::new(""),
        AiMessage::new(Content::Blocks(vec![json!({"type": "text", "text": "b"})])),
    ]);
    assert_eq!(merged.content, Content::Blocks(vec![json!({"type": "text", "text": "b"})]));
}

#[test]
fn tool_call_args_split_across_chunks_are_parsed_after_merging() {
    let merged = fold(vec![
        tool_chunk(Some("add"), r#"{"a": "#, Some("call_1"), 0),
        tool_chunk(None, r#"1, "b""#, None, 0),
        tool_chunk(None, ": 2}", None, 0),
    ]);
    assert_eq!(merged.tool_call_chunks.len(), 1);
    assert_eq!(merged.tool_call_chunks[0].args.as_deref(), Some(r#"{"a": 1, "b": 2}"#));
    assert_eq!(
        merged.tool_calls,
        vec![ToolCall { name: "add".into(), args: json!({"a": 1, "b": 2}), id: Some("call_1".into()) }]
    );
    assert!(merged.invalid_tool_calls.is_empty());
}

#[test]
fn a_single_chunk_parses_its_partial_args() {
    let chunk = tool_chunk(Some("add"), r#"{"a": 1, "b"#, Some("call_1"), 0);
    assert_eq!(chunk.tool_calls[0].args, json!({"a": 1}));
    let merged = chunk.merge(AiMessage::new("")).unwrap();
    assert_eq!(merged.tool_calls[0].args, json!({"a": 1}));
}

#[test]
fn repeated_id_and_name_in_every_chunk_are_not_duplicated() {
    let merged = fold(vec![
        tool_chunk(Some("search"), r#"{"q": "#, Some("call_9"), 0),
        tool_chunk(Some("search"), r#""rust""#, Some("call_9"), 0),
        tool_chunk(Some("search"), "}", Some("call_9"), 0),
    ]);
    assert_eq!(
        merged.tool_calls,
        vec![ToolCall { name: "search".into(), args: json!({"q": "rust"}), id: Some("call_9".into()) }]
    );
    assert_eq!(merged.tool_call_chunks[0].name.as_deref(), Some("search"));
    assert_eq!(merged.tool_call_chunks[0].id.as_deref(), Some("call_9"));
}

#[test]
fn chunks_with_different_indexes_make_separate_calls() {
    let merged = fold(vec![
        tool_chunk(Some("a"), "{\"x\": 1", Some("c1"), 0),
        tool_chunk(Some("b"), "{}", Some("c2"), 1),
        tool_chunk(None, "}", None, 0),
    ]);
    let names: Vec<_> = merged.tool_calls.iter().map(|c| (c.name.as_str(), c.args.clone())).collect();
    assert_eq!(names, vec![("a", json!({"x": 1})), ("b", json!({}))]);
}

#[test]
fn same_index_with_different_ids_does_not_merge() {
    let merged =
        fold(vec![tool_chunk(Some("a"), "{}", Some("c1"), 0), tool_chunk(Some("b"), "{}", Some("c2"), 0)]);
    assert_eq!(merged.tool_calls.len(), 2);
}

#[test]
fn empty_args_give_an_empty_object() {
    let merged = fold(vec![tool_chunk(Some("now"), "", Some("c1"), 0), AiMessage::new("")]);
    assert_eq!(merged.tool_calls[0].args, json!({}));
    assert!(merged.invalid_tool_calls.is_empty());
}

#[test]
fn unparseable_args_become_invalid_tool_calls_with_an_error() {
    let merged = fold(vec![
        tool_chunk(Some("add"), "oops", Some("c1"), 0),
        tool_chunk(Some("ok"), "[1]", Some("c2"), 1),
    ]);
    assert!(merged.tool_calls.is_empty());
    assert_eq!(merged.invalid_tool_calls.len(), 2);
    let first = &merged.invalid_tool_calls[0];
    assert_eq!(
        (first.name.as_deref(), first.args.as_deref(), first.id.as_deref()),
        (Some("add"), Some("oops"), Some("c1"))
    );
    assert!(first.error.as_deref().unwrap().contains("oops"), "{:?}", first.error);
    assert!(merged.invalid_tool_calls[1].error.as_deref().unwrap().contains("json object"));
}

#[test]
fn whole_messages_keep_their_tool_calls_when_merged() {
    let call = ToolCall { name: "f".into(), args: json!({"k": [1, 2]}), id: Some("c1".into()) };
    let whole = AiMessage { tool_calls: vec![call.clone()], ..AiMessage::new("x") };
    let merged = whole.merge(AiMessage::new("y")).unwrap();
    assert_eq!(merged.tool_calls, vec![call]);
    assert_eq!(merged.text(), "xy");
}

#[test]
fn usage_is_summed_field_by_field() {
    let a = AiMessage { usage_metadata: Some(UsageMetadata::new(5, 1)), ..Default::default() };
    let b = AiMessage { usage_metadata: Some(UsageMetadata::new(0, 2)), ..Default::default() };
    let merged = a.merge(b).unwrap().usage_metadata.unwrap();
    assert_eq!((merged.input_tokens, merged.output_tokens, merged.total_tokens), (5, 3, 8));
}

#[test]
fn usage_details_are_summed_and_missing_usage_is_kept() {
    let mut a = UsageMetadata::new(5, 1);
    a.input_token_details = Some(map(json!({"cache_read": 2})));
    let mut b = UsageMetadata::new(1, 1);
    b.input_token_details = Some(map(json!({"cache_read": 3, "audio": 1})));
    let merged = fold(vec![
        AiMessage { usage_metadata: Some(a), ..Default::default() },
        AiMessage::new(""),
        AiMessage { usage_metadata: Some(b), ..Default::default() },
    ]);
    let usage = merged.usage_metadata.unwrap();
    assert_eq!(usage.input_token_details, Some(map(json!({"cache_read": 5, "audio": 1}))));
    assert_eq!(usage.total_tokens, 8);
    assert_eq!(AiMessage::new("a").merge(AiMessage::new("b")).unwrap().usage_metadata, None);
}

#[test]
fn provider_id_wins_over_generated_run_ids() {
    let with_id = |id: &str| AiMessage { id: Some(id.into()), ..Default::default() };
    assert_eq!(with_id("lc_run-1").merge(with_id("chatcmpl-9")).unwrap().id.as_deref(), Some("chatcmpl-9"));
    assert_eq!(with_id("chatcmpl-9").merge(with_id("run-1")).unwrap().id.as_deref(), Some("chatcmpl-9"));
    assert_eq!(with_id("run-1").merge(with_id("run-2")).unwrap().id.as_deref(), Some("run-1"));
    assert_eq!(AiMessage::default().merge(with_id("run-2")).unwrap().id.as_deref(), Some("run-2"));
    assert_eq!(with_id("msg_a").merge(with_id("msg_b")).unwrap().id.as_deref(), Some("msg_a"));
}

#[test]
fn kwargs_and_metadata_merge_deeply() {
    let a = AiMessage {
        additional_kwargs: map(json!({"function_call": {"name": "f", "arguments": "{\"a\""}})),
        response_metadata: map(json!({"model_name": "gpt", "id": "x", "logprobs": [{"index": 0, "t": "a"}]})),
        ..Default::default()
    };
    let b = AiMessage {
        additional_kwargs: map(json!({"function_call": {"arguments": ": 1}"}})),
        response_metadata: map(
            json!({"id": "x", "finish_reason": "stop", "logprobs": [{"index": 0, "t": "b"}], "created": 7}),
        ),
        ..Default::default()
    };
    let merged = a.merge(b).unwrap();
    assert_eq!(
        Value::Object(merged.additional_kwargs),
        json!({"function_call": {"name": "f", "arguments": "{\"a\": 1}"}})
    );
    assert_eq!(
        Value::Object(merged.response_metadata),
        json!({"model_name": "gpt", "id": "x", "logprobs": [{"index": 0, "t": "ab"}], "finish_reason": "stop", "created": 7})
    );
}

#[test]
fn kwargs_of_different_types_fail_naming_the_key() {
    let a = AiMessage { additional_kwargs: map(json!({"k": "text"})), ..Default::default() };
    let b = AiMessage { additional_kwargs: map(json!({"k": 1})), ..Default::default() };
    let err = a.merge(b).unwrap_err().to_string();
    assert!(err.contains("additional_kwargs[\"k\"]"), "{err}");
}

#[test]
fn last_chunk_position_is_kept() {
    let last = AiMessage { chunk_position: Some("last".into()), ..Default::default() };
    assert_eq!(AiMessage::new("a").merge(last.clone()).unwrap().chunk_position.as_deref(), Some("last"));
    assert_eq!(last.merge(AiMessage::new("b")).unwrap().chunk_position.as_deref(), Some("last"));
}

#[test]
fn finish_drops_fragments_and_keeps_parsed_calls() {
    let merged = fold(vec![
        tool_chunk(Some("add"), "{\"a\": 1}", Some("c1"), 0),
        AiMessage { chunk_position: Some("last".into()), ..Default::default() },
    ]);
    let done = merged.finish();
    assert!(done.tool_call_chunks.is_empty());
    assert_eq!(done.chunk_position, None);
    assert_eq!(done.tool_calls[0].args, json!({"a": 1}));
}
