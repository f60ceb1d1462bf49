//! Reading messages from JSON: LangChain's serialised shapes and message-like values (role dicts,
//! `[role, content]` pairs, bare strings), as `convert_to_messages` accepts them.

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::{
    AiMessage, Content, HumanMessage, InvalidToolCall, Message, RemoveMessage, SystemMessage, ToolCall,
    ToolMessage,
};
use crate::error::{Error, Result};

/// The message kinds a type or role name can stand for.
#[derive(Clone, Copy)]
enum Kind {
    System,
    Developer,
    Human,
    Ai,
    Tool,
    Remove,
}

impl Kind {
    /// Type names (`ai`), chunk type names (`AIMessageChunk`), class names (`AIMessage`) and OpenAI roles.
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "system" | "SystemMessage" | "SystemMessageChunk" => Kind::System,
            "developer" => Kind::Developer,
            "human" | "user" | "HumanMessage" | "HumanMessageChunk" => Kind::Human,
            "ai" | "assistant" | "AIMessage" | "AIMessageChunk" => Kind::Ai,
            "tool" | "ToolMessage" | "ToolMessageChunk" => Kind::Tool,
            "remove" | "RemoveMessage" => Kind::Remove,
            _ => return None,
        })
    }
}

const EXPECTED_KINDS: &str = "'human', 'user', 'ai', 'assistant', 'system', 'developer', 'tool' or 'remove'";

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Object(map) => message_from_map(map).map_err(D::Error::custom),
            other => Err(D::Error::custom(format!("expected a message object, got {other}"))),
        }
    }
}

impl TryFrom<Value> for Message {
    type Error = Error;

    fn try_from(value: Value) -> Result<Self> {
        Message::from_like(value)
    }
}

impl Message {
    /// Builds a message from anything message-like: a message dict in any shape [`Message`] deserialises
    /// (`{"role": "user", "content": "hi"}`, `{"type": "ai", "content": ...}`, `{"type": "ai", "data":
    /// {...}}`), a `[role, content]` pair, or a bare string (a human message).
    ///
    /// ```
    /// use serde_json::json;
    /// use weft_runnable_core::Message;
    ///
    /// assert_eq!(Message::from_like(json!("hi")).unwrap(), Message::human("hi"));
    /// assert_eq!(Message::from_like(json!(["assistant", "hello"])).unwrap(), Message::ai("hello"));
    /// assert_eq!(Message::from_like(json!({"role": "system", "content": "be brief"})).unwrap(), Message::system("be brief"));
    /// ```
    pub fn from_like(value: Value) -> Result<Message> {
        match value {
            Value::String(text) => Ok(Message::human(text)),
            Value::Array(pair) => match <[Value; 2]>::try_from(pair) {
                Ok([Value::String(role), content @ (Value::String(_) | Value::Array(_))]) => {
                    let mut map = Map::new();
                    map.insert("role".into(), Value::String(role));
                    map.insert("content".into(), content);
                    message_from_map(map).map_err(Error::InvalidInput)
                }
                Ok(pair) => Err(Error::InvalidInput(format!(
                    "a message pair must be [role, content] with a string role, got {}",
                    Value::Array(pair.into())
                ))),
                Err(items) => Err(Error::InvalidInput(format!(
                    "a message pair must have 2 items, got {}",
                    Value::Array(items)
                ))),
            },
            Value::Object(map) => {
                let has_kind = ["role", "type"].iter().any(|k| map.get(*k).is_some_and(Value::is_string));
                let needs_content = !map.contains_key("data")
                    && !map.contains_key("kwargs")
                    && !matches!(map.get("type").and_then(Value::as_str), Some("remove" | "RemoveMessage"));
                if !has_kind || (needs_content && !map.contains_key("content")) {
                    return Err(Error::InvalidInput(format!(
                        "message dict must contain 'role' (or 'type') and 'content' keys, got {}",
                        Value::Object(map)
                    )));
                }
                message_from_map(map).map_err(Error::InvalidInput)
            }
            other => Err(Error::InvalidInput(format!(
                "cannot convert {other} to a message; expected a message dict, a [role, content] pair or a string"
            ))),
        }
    }
}

/// Converts a JSON list of message-likes (or a single one) into messages, like LangChain's
/// `convert_to_messages`; an error names the position of the item at fault.
pub fn convert_to_messages(value: Value) -> Result<Vec<Message>> {
    match value {
        Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                Message::from_like(item).map_err(|err| match err {
                    Error::InvalidInput(reason) => Error::InvalidInput(format!("at index {i}: {reason}")),
                    other => other,
                })
            })
            .collect(),
        single => Message::from_like(single).map(|m| vec![m]),
    }
}

/// A typed value that stands for a message: a [`Message`], a bare string (a human message), a
/// `(role, content)` pair, or a JSON message-like (see [`Message::from_like`]).
///
/// ```
/// use weft_runnable_core::{Message, messages_from};
///
/// let messages = messages_from([("system", "be brief"), ("user", "hi")]).unwrap();
/// assert_eq!(messages, [Message::system("be brief"), Message::human("hi")]);
/// assert_eq!(messages_from(["hello"]).unwrap(), [Message::human("hello")]);
/// ```
pub trait MessageLike {
    /// Converts into a message; fails on an unknown role or a malformed message.
    fn into_message(self) -> Result<Message>;
}

impl MessageLike for Message {
    fn into_message(self) -> Result<Message> {
        Ok(self)
    }
}

impl MessageLike for &str {
    fn into_message(self) -> Result<Message> {
        Ok(Message::human(self))
    }
}

impl MessageLike for String {
    fn into_message(self) -> Result<Message> {
        Ok(Message::human(self))
    }
}

impl<R: AsRef<str>, C: Into<Content>> MessageLike for (R, C) {
    fn into_message(self) -> Result<Message> {
        let mut map = Map::new();
        map.insert("role".into(), Value::String(self.0.as_ref().to_owned()));
        map.insert("content".into(), serde_json::to_value(self.1.into())?);
        Message::from_like(Value::Object(map))
    }
}

impl MessageLike for Value {
    fn into_message(self) -> Result<Message> {
        Message::from_like(self)
    }
}

/// Converts typed message-likes into messages (the typed form of [`convert_to_messages`]).
pub fn messages_from<I>(items: I) -> Result<Vec<Message>>
where
    I: IntoIterator,
    I::Item: MessageLike,
{
    items.into_iter().map(MessageLike::into_message).collect()
}

/// Reads a message from a JSON object in any of the accepted shapes; the error names what is wrong.
fn message_from_map(mut map: Map<String, Value>) -> std::result::Result<Message, String> {
    // LangChain's serialised constructor: {"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs": {...}}
    if map.get("type").and_then(Value::as_str) == Some("constructor") {
        let class = map.get("id").and_then(Value::as_array).and_then(|id| id.last()).and_then(Value::as_str);
        let class = class.map(str::to_owned).ok_or("serialised message has no class name in 'id'")?;
        let Some(Value::Object(kwargs)) = map.remove("kwargs") else {
            return Err(format!("serialised {class} has no 'kwargs' object"));
        };
        return typed_message(&class, kwargs);
    }
    // `message_to_dict`: {"type": "ai", "data": {...}}
    if !map.contains_key("content") && map.get("data").is_some_and(Value::is_object) {
        let kind = match map.remove("type") {
            Some(Value::String(kind)) => kind,
            other => return Err(format!("message dict with 'data' needs a string 'type', got {other:?}")),
        };
        let Some(Value::Object(data)) = map.remove("data") else {
            return Err(format!("message dict of type '{kind}' has no 'data' object"));
        };
        return typed_message(&kind, data);
    }
    let kind = match (map.remove("role"), map.get("type")) {
        (Some(Value::String(role)), _) => role,
        (Some(other), _) => return Err(format!("message role must be a string, got {other}")),
        (None, Some(Value::String(kind))) => kind.clone(),
        (None, _) => return Err(format!("message dict has no 'type' or 'role': {}", Value::Object(map))),
    };
    typed_message(&kind, map)
}

/// Builds the message of kind `kind` from its fields.
fn typed_message(kind: &str, mut fields: Map<String, Value>) -> std::result::Result<Message, String> {
    let parsed = Kind::parse(kind)
        .ok_or_else(|| format!("unexpected message type: '{kind}'; use one of {EXPECTED_KINDS}"))?;
    fields.remove("type");
    // Absent and null are the same to LangChain (`name: None`, `content: None` from OpenAI).
    fields.retain(|_, value| !value.is_null());
    Ok(match parsed {
        Kind::System => Message::System(fields_into::<SystemMessage>(kind, fields)?),
        Kind::Developer => {
            let mut message = fields_into::<SystemMessage>(kind, fields)?;
            message.additional_kwargs.insert("__openai_role__".into(), Value::String("developer".into()));
            Message::System(message)
        }
        Kind::Human => Message::Human(fields_into::<HumanMessage>(kind, fields)?),
        Kind::Ai => {
            let invalid = convert_openai_tool_calls(&mut fields);
            let mut message = fields_into::<AiMessage>(kind, fields)?;
            message.invalid_tool_calls.extend(invalid);
            message.is_chunk = kind == "AIMessageChunk";
            Message::Ai(message)
        }
        Kind::Tool => Message::Tool(fields_into::<ToolMessage>(kind, fields)?),
        Kind::Remove => Message::Remove(fields_into::<RemoveMessage>(kind, fields)?),
    })
}

fn fields_into<T: DeserializeOwned>(
    kind: &str,
    fields: Map<String, Value>,
) -> std::result::Result<T, String> {
    serde_json::from_value(Value::Object(fields)).map_err(|err| format!("invalid '{kind}' message: {err}"))
}

/// Rewrites OpenAI-style tool calls (`{"id", "type": "function", "function": {"name", "arguments"}}`)
/// into LangChain's shape; calls whose argument string is not JSON come back as invalid tool calls.
fn convert_openai_tool_calls(fields: &mut Map<String, Value>) -> Vec<InvalidToolCall> {
    let mut invalid = Vec::new();
    let Some(Value::Array(calls)) = fields.get_mut("tool_calls") else {
        return invalid;
    };
    calls.retain_mut(|call| {
        let Some(Value::Object(function)) = call.get("function") else {
            return true;
        };
        let name = function.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let id = call.get("id").and_then(Value::as_str).map(str::to_owned);
        let args = match function.get("arguments") {
            Some(Value::String(raw)) => match serde_json::from_str::<Value>(raw) {
                Ok(args) => args,
                Err(err) => {
                    invalid.push(InvalidToolCall {
                        name: Some(name),
                        args: Some(raw.clone()),
                        id,
                        error: Some(format!("tool call arguments are not valid json: {err}")),
                    });
                    return false;
                }
            },
            Some(args) => args.clone(),
            None => Value::Object(Map::new()),
        };
        *call = serde_json::to_value(ToolCall { name, args, id }).unwrap_or(Value::Null);
        true
    });
    invalid
}
