//! Message-likes: values that stand for a message (role/content maps, `(role, text)` pairs, bare strings),
//! as LangChain's `convert_to_messages` accepts them.
//!
//! This is the graph crate's copy of that coercion; it gives way to the core's `Message::from_like` once
//! the core has it.

use serde_json::{Map, Value};
use weft_runnable_core::{Content, Error, Message, Result};

/// A value that stands for a message.
///
/// ```
/// use weft_graph::messages::convert_to_messages;
/// use weft_runnable_core::Message;
///
/// let messages = convert_to_messages([("system", "be brief"), ("user", "hi")]).unwrap();
/// assert_eq!(messages, [Message::system("be brief"), Message::human("hi")]);
/// assert_eq!(convert_to_messages(["hello"]).unwrap(), [Message::human("hello")]);
/// ```
pub trait MessageLike {
    /// Converts into a message; fails on an unknown role or a malformed map.
    fn into_message(self) -> Result<Message>;
}

impl MessageLike for Message {
    fn into_message(self) -> Result<Message> {
        Ok(self)
    }
}

/// A bare string is a human message.
impl MessageLike for &str {
    fn into_message(self) -> Result<Message> {
        Ok(Message::human(self))
    }
}

/// A bare string is a human message.
impl MessageLike for String {
    fn into_message(self) -> Result<Message> {
        Ok(Message::human(self))
    }
}

/// A `(role, content)` pair.
impl<R: AsRef<str>, C: Into<Content>> MessageLike for (R, C) {
    fn into_message(self) -> Result<Message> {
        message_from_role(self.0.as_ref(), self.1.into())
    }
}

/// A message in JSON: a message object (`{"type": "ai", ...}`), a role map (`{"role": "user", "content":
/// ...}`), a `[role, content]` pair, or a string.
impl MessageLike for Value {
    fn into_message(self) -> Result<Message> {
        message_from_json(self)
    }
}

/// Converts message-likes into messages.
pub fn convert_to_messages<I>(items: I) -> Result<Vec<Message>>
where
    I: IntoIterator,
    I::Item: MessageLike,
{
    items.into_iter().map(MessageLike::into_message).collect()
}

/// Converts a JSON list of message-likes, or a single one, into messages; an error names the position.
pub fn convert_json_to_messages(value: Value) -> Result<Vec<Message>> {
    match value {
        Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                message_from_json(item)
                    .map_err(|e| Error::InvalidInput(format!("at index {i}: {}", reason(e))))
            })
            .collect(),
        single => message_from_json(single).map(|m| vec![m]),
    }
}

/// The text of a coercion error, without the error kind's prefix.
pub(crate) fn reason(err: Error) -> String {
    match err {
        Error::InvalidInput(message) => message,
        other => other.to_string(),
    }
}

/// The message a role stands for, with `content`: `human`/`user`, `ai`/`assistant`, `system`,
/// `developer` (a system message marked as such); `tool` fails here, for want of a tool call id.
pub fn message_from_role(role: &str, content: Content) -> Result<Message> {
    let mut map = Map::new();
    map.insert("role".to_owned(), Value::String(role.to_owned()));
    map.insert("content".to_owned(), serde_json::to_value(content)?);
    message_from_map(map)
}

fn message_from_json(value: Value) -> Result<Message> {
    match value {
        Value::String(text) => Ok(Message::human(text)),
        Value::Array(pair) => match <[Value; 2]>::try_from(pair) {
            Ok([Value::String(role), content @ (Value::String(_) | Value::Array(_))]) => {
                let mut map = Map::new();
                map.insert("role".to_owned(), Value::String(role));
                map.insert("content".to_owned(), content);
                message_from_map(map)
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
        Value::Object(map) => message_from_map(map),
        other => Err(Error::InvalidInput(format!(
            "cannot convert {other} to a message; expected a message object, a [role, content] pair or a string"
        ))),
    }
}

/// The canonical type name for a type, class or role name.
fn kind(name: &str) -> Option<&'static str> {
    Some(match name {
        "human" | "user" | "HumanMessage" | "HumanMessageChunk" => "human",
        "ai" | "assistant" | "AIMessage" | "AIMessageChunk" => "ai",
        "system" | "developer" | "SystemMessage" | "SystemMessageChunk" => "system",
        "tool" | "ToolMessage" | "ToolMessageChunk" => "tool",
        "remove" | "RemoveMessage" => "remove",
        _ => return None,
    })
}

fn message_from_map(mut map: Map<String, Value>) -> Result<Message> {
    // `message_to_dict` form: {"type": "ai", "data": {...}}
    if !map.contains_key("content") && map.get("data").is_some_and(Value::is_object) {
        if let (Some(Value::String(kind)), Some(Value::Object(data))) =
            (map.remove("type"), map.remove("data"))
        {
            let mut data = data;
            data.insert("type".to_owned(), Value::String(kind));
            return message_from_map(data);
        }
    }
    let (name, from_role) = match (map.remove("role"), map.remove("type")) {
        (Some(Value::String(role)), _) => (role, true),
        (None, Some(Value::String(kind))) => (kind, false),
        (Some(other), _) => {
            return Err(Error::InvalidInput(format!("a message role must be a string, got {other}")));
        }
        _ => {
            return Err(Error::InvalidInput(format!(
                "message dict must contain 'role' (or 'type') and 'content' keys, got {}",
                Value::Object(map)
            )));
        }
    };
    let Some(kind) = kind(&name) else {
        return Err(Error::InvalidInput(format!(
            "unexpected message type: '{name}'; use one of 'human', 'user', 'ai', 'assistant', 'tool', 'system', \
             'developer' or 'remove'"
        )));
    };
    if kind != "remove" && !map.contains_key("content") {
        return Err(Error::InvalidInput(format!(
            "message dict must contain 'role' (or 'type') and 'content' keys, got {}",
            Value::Object(map)
        )));
    }
    if name == "developer" {
        let kwargs = map.entry("additional_kwargs").or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(kwargs) = kwargs {
            kwargs.insert("__openai_role__".to_owned(), Value::String("developer".to_owned()));
        }
    }
    if from_role && kind == "ai" {
        openai_tool_calls(&mut map);
    }
    map.insert("type".to_owned(), Value::String(kind.to_owned()));
    serde_json::from_value(Value::Object(map))
        .map_err(|e| Error::InvalidInput(format!("invalid {kind} message: {e}")))
}

/// Rewrites OpenAI-style tool calls (`{"id", "function": {"name", "arguments": "<json>"}}`) into
/// `{"id", "name", "args"}`.
fn openai_tool_calls(map: &mut Map<String, Value>) {
    let Some(Value::Array(calls)) = map.get_mut("tool_calls") else { return };
    for call in calls.iter_mut() {
        let Value::Object(call) = call else { continue };
        let Some(Value::Object(function)) = call.remove("function") else { continue };
        if let Some(name) = function.get("name") {
            call.insert("name".to_owned(), name.clone());
        }
        let args = match function.get("arguments") {
            Some(Value::String(raw)) => {
                serde_json::from_str(raw).unwrap_or_else(|_| Value::Object(Map::new()))
            }
            Some(other) => other.clone(),
            None => Value::Object(Map::new()),
        };
        call.insert("args".to_owned(), args);
        call.remove("type");
    }
}
