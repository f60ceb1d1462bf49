#![allow(clippy::unwrap_used, missing_docs)]
//! Messages in LangChain's JSON shapes, and message-like coercion.

use serde_json::{Value, json};
use weft_runnable_core::{
    AiMessage, Content, Message, ToolCall, ToolCallChunk, ToolMessage, ToolStatus, UsageMetadata,
    convert_to_messages,
};

fn ai_with_calls() -> Message {
    Message::Ai(AiMessage {
        content: "calling".into(),
        id: Some("run-1".into()),
        tool_calls: vec![ToolCall { name: "add".into(), args: json!({"a": 1}), id: Some("c1".into()) }],
        invalid_tool_calls: vec![weft_runnable_core::InvalidToolCall {
            name: Some("bad".into()),
            args: Some("{oops".into()),
            id: Some("c2".into()),
            error: Some("broken".into()),
        }],
        usage_metadata: Some(UsageMetadata::new(5, 3)),
        ..Default::default()
    })
}

#[test]
fn ai_message_serialises_flat_with_typed_tool_calls() {
    let value = serde_json::to_value(ai_with_calls()).unwrap();
    assert_eq!(
        value,
        json!({
            "type": "ai",
            "content": "calling",
            "id": "run-1",
            "tool_calls": [{"type": "tool_call", "name": "add", "args": {"a": 1}, "id": "c1"}],
            "invalid_tool_calls": [{"type": "invalid_tool_call", "name": "bad", "args": "{oops", "id": "c2", "error": "broken"}],
            "usage_metadata": {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}
        })
    );
    let back: Message = serde_json::from_value(value).unwrap();
    assert_eq!(back, ai_with_calls());
}

#[test]
fn langchain_model_dump_of_an_ai_message_deserialises() {
    // AIMessage(...).model_dump() as langchain-core 1.x writes it.
    let dumped = json!({
        "content": "calling",
        "additional_kwargs": {},
        "response_metadata": {},
        "type": "ai",
        "name": null,
        "id": "run-1",
        "example": false,
        "tool_calls": [{"name": "add", "args": {"a": 1}, "id": "c1", "type": "tool_call"}],
        "invalid_tool_calls": [{"name": "bad", "args": "{oops", "id": "c2", "error": "broken", "type": "invalid_tool_call"}],
        "usage_metadata": {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}
    });
    let message: Message = serde_json::from_value(dumped).unwrap();
    assert_eq!(message, ai_with_calls());
}

#[test]
fn message_to_dict_form_deserialises() {
    let dict = json!({
        "type": "tool",
        "data": {
            "content": "3", "additional_kwargs": {}, "response_metadata": {}, "type": "tool", "name": "add",
            "id": null, "tool_call_id": "c1", "artifact": {"raw": 3}, "status": "error"
        }
    });
    let message: Message = serde_json::from_value(dict).unwrap();
    assert_eq!(
        message,
        Message::Tool(ToolMessage {
            content: "3".into(),
            tool_call_id: "c1".into(),
            name: Some("add".into()),
            artifact: Some(json!({"raw": 3})),
            status: ToolStatus::Error,
            ..Default::default()
        })
    );
    let human: Message =
        serde_json::from_value(json!({"type": "human", "data": {"content": "hi", "id": "h1"}})).unwrap();
    assert_eq!(human, Message::human("hi").with_id("h1"));
}

#[test]
fn chunk_type_names_deserialise_as_their_message() {
    let chunk = json!({
        "type": "AIMessageChunk",
        "content": "par",
        "id": "run-2",
        "tool_calls": [],
        "invalid_tool_calls": [],
        "tool_call_chunks": [{"name": "f", "args": "{\"x\"", "id": "c1", "index": 0, "type": "tool_call_chunk"}],
        "chunk_position": null
    });
    let message: Message = serde_json::from_value(chunk).unwrap();
    let ai = message.as_ai().unwrap();
    assert_eq!(ai.tool_call_chunks, vec![ToolCallChunk::new(Some("f"), Some("{\"x\""), Some("c1"), Some(0))]);
    let human: Message =
        serde_json::from_value(json!({"type": "HumanMessageChunk", "content": "h"})).unwrap();
    assert_eq!(human, Message::human("h"));
}

#[test]
fn tool_call_chunks_serialise_with_their_type() {
    let value = serde_json::to_value(ToolCallChunk::new(Some("f"), Some("{"), None, Some(1))).unwrap();
    assert_eq!(value, json!({"type": "tool_call_chunk", "name": "f", "args": "{", "id": null, "index": 1}));
}

#[test]
fn serialised_constructor_form_deserialises() {
    let lc = json!({
        "lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "SystemMessage"],
        "kwargs": {"content": "be brief", "type": "system"}
    });
    assert_eq!(serde_json::from_value::<Message>(lc).unwrap(), Message::system("be brief"));
}

#[test]
fn every_kind_round_trips() {
    let messages = vec![
        Message::system("s").with_id("1"),
        Message::human(Content::Blocks(vec![
            json!({"type": "text", "text": "look"}),
            json!({"type": "image", "url": "u"}),
        ])),
        ai_with_calls(),
        Message::tool("3", "c1"),
        Message::remove("1"),
    ];
    let text = serde_json::to_string(&messages).unwrap();
    let back: Vec<Message> = serde_json::from_str(&text).unwrap();
    assert_eq!(back, messages);
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value[3], json!({"type": "tool", "content": "3", "tool_call_id": "c1", "status": "success"}));
    assert_eq!(value[4], json!({"type": "remove", "id": "1"}));
}

#[test]
fn unknown_type_is_an_error_naming_it() {
    let err =
        serde_json::from_value::<Message>(json!({"type": "robot", "content": "x"})).unwrap_err().to_string();
    assert!(err.contains("'robot'"), "{err}");
    let err =
        serde_json::from_value::<Message>(json!({"type": "tool", "content": "x"})).unwrap_err().to_string();
    assert!(err.contains("tool_call_id"), "{err}");
}

#[test]
fn role_dicts_coerce_with_openai_aliases() {
    let cases = [
        (json!({"role": "user", "content": "u"}), Message::human("u")),
        (json!({"role": "human", "content": "h"}), Message::human("h")),
        (json!({"role": "assistant", "content": "a"}), Message::ai("a")),
        (json!({"role": "ai", "content": "a"}), Message::ai("a")),
        (json!({"role": "system", "content": "s"}), Message::system("s")),
        (json!({"role": "tool", "content": "t", "tool_call_id": "c1"}), Message::tool("t", "c1")),
        (json!({"type": "human", "content": "x", "id": "m1"}), Message::human("x").with_id("m1")),
    ];
    for (like, expected) in cases {
        assert_eq!(Message::from_like(like.clone()).unwrap(), expected, "{like}");
    }
    let developer = Message::from_like(json!({"role": "developer", "content": "d"})).unwrap();
    let Message::System(system) = developer else { unreachable!() };
    assert_eq!(system.additional_kwargs.get("__openai_role__"), Some(&json!("developer")));
}

#[test]
fn openai_assistant_tool_calls_are_converted() {
    let like = json!({
        "role": "assistant",
        "content": null,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 1}"}},
            {"id": "c2", "type": "function", "function": {"name": "bad", "arguments": "{oops"}}
        ]
    });
    let message = Message::try_from(like).unwrap();
    let ai = message.as_ai().unwrap();
    assert_eq!(ai.content, Content::Text(String::new()));
    assert_eq!(
        ai.tool_calls,
        vec![ToolCall { name: "add".into(), args: json!({"a": 1}), id: Some("c1".into()) }]
    );
    assert_eq!(ai.invalid_tool_calls[0].args.as_deref(), Some("{oops"));
}

#[test]
fn pairs_and_strings_coerce() {
    assert_eq!(Message::from_like(json!(["user", "hi"])).unwrap(), Message::human("hi"));
    assert_eq!(Message::from_like(json!(["system", "s"])).unwrap(), Message::system("s"));
    assert_eq!(Message::from_like(json!("plain")).unwrap(), Message::human("plain"));
    let messages = convert_to_messages(json!(["a", ["ai", "b"], {"role": "user", "content": "c"}])).unwrap();
    assert_eq!(messages, vec![Message::human("a"), Message::ai("b"), Message::human("c")]);
}

#[test]
fn bad_message_likes_are_errors_naming_the_value() {
    let err = Message::from_like(json!(42)).unwrap_err().to_string();
    assert!(err.contains("cannot convert 42 to a message"), "{err}");
    let err = Message::from_like(json!({"role": "user", "text": "hi"})).unwrap_err().to_string();
    assert!(err.contains("'role' (or 'type') and 'content'") && err.contains("\"text\":\"hi\""), "{err}");
    let err = Message::from_like(json!(["wizard", "hi"])).unwrap_err().to_string();
    assert!(err.contains("unexpected message type: 'wizard'"), "{err}");
    let err = Message::from_like(json!(["user", "hi", "extra"])).unwrap_err().to_string();
    assert!(err.contains("2 items"), "{err}");
    let err = Message::from_like(json!([1, "hi"])).unwrap_err().to_string();
    assert!(err.contains("[1,\"hi\"]"), "{err}");
}

#[test]
fn prompt_values_hold_langchain_shaped_messages() {
    let value: weft_runnable_core::PromptValue = serde_json::from_value(
        json!([{"type": "human", "data": {"content": "x"}}, {"role": "assistant", "content": "y"}]),
    )
    .unwrap();
    assert_eq!(value, vec![Message::human("x"), Message::ai("y")].into());
}
