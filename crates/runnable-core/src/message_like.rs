//! Reading a message from the loose shapes LangChain accepts wherever messages are expected.
//!
//! This is the crate's one place for that coercion; it gives way to `Message::from_like` once that
//! lands in `messages`.

use serde::Deserialize as _;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::messages::Message;
use crate::prompts::fstring::json_excerpt;

/// Reads one message from a message-like JSON value:
///
/// - a message object, tagged by `type` (`{"type": "human", "content": ..}`, LangChain's serialized
///   `{"type": "ai", "data": {..}}` included) or by `role` (`{"role": "user", "content": ..}`);
/// - a `[role, content]` pair (`["human", "hi"]`);
/// - a bare string, which is a human message.
///
/// Roles and types: `human`/`user`, `ai`/`assistant`, `system`/`developer`, `tool`, `remove`.
pub(crate) fn message_from_like(value: Value) -> Result<Message> {
    let mut fields = match value {
        Value::String(text) => return Ok(Message::human(text)),
        Value::Array(pair) => match <[Value; 2]>::try_from(pair) {
            Ok([Value::String(role), content @ (Value::String(_) | Value::Array(_))]) => {
                Map::from_iter([("role".to_owned(), Value::String(role)), ("content".to_owned(), content)])
            }
            Ok(pair) => return Err(not_a_message(&Value::Array(pair.into()))),
            Err(other) => return Err(not_a_message(&Value::Array(other))),
        },
        Value::Object(fields) => fields,
        other => return Err(not_a_message(&other)),
    };
    if !fields.contains_key("content") && !fields.contains_key("role") {
        if let Some(Value::Object(data)) = fields.get("data") {
            let mut data = data.clone();
            if let Some(kind) = fields.get("type") {
                data.insert("type".to_owned(), kind.clone());
            }
            fields = data;
        }
    }
    let kind = match fields.remove("role") {
        Some(role) => role,
        None => fields.get("type").cloned().ok_or_else(|| {
            Error::InvalidInput(format!(
                "a message object needs a 'type' or 'role' key, got {}",
                json_excerpt(&Value::Object(fields.clone()))
            ))
        })?,
    };
    let canonical = match kind.as_str() {
        Some("human" | "user" | "HumanMessageChunk") => "human",
        Some("ai" | "assistant" | "AIMessageChunk") => "ai",
        Some("system" | "developer" | "SystemMessageChunk") => "system",
        Some("tool" | "ToolMessageChunk") => "tool",
        Some("remove") => "remove",
        _ => {
            return Err(Error::InvalidInput(format!(
                "unknown message type {kind}; use one of human, user, ai, assistant, system, developer, tool, \
                 remove"
            )));
        }
    };
    if fields.get("content").is_some_and(Value::is_null) {
        fields.insert("content".to_owned(), Value::String(String::new()));
    }
    fields.insert("type".to_owned(), Value::String(canonical.to_owned()));
    let fields = Value::Object(fields);
    Message::deserialize(&fields).map_err(|err| {
        Error::InvalidInput(format!(
            "cannot read a {canonical} message from {}: {err}",
            json_excerpt(&fields)
        ))
    })
}

fn not_a_message(value: &Value) -> Error {
    Error::InvalidInput(format!(
        "expected a message (a message object, a [role, content] pair or a string), got {}",
        json_excerpt(value)
    ))
}
