//! Which messages of a run's output go into the history.

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::messages::{AiMessage, Message};
use crate::prompts::fstring::json_excerpt;

/// An output whose messages [`RunnableWithMessageHistory`](crate::RunnableWithMessageHistory) appends to
/// the history after a run.
///
/// A string is an AI message; a JSON object is either a message itself or holds the messages under
/// `output_messages_key` (by default its only key, or else `output`).
pub trait ToHistoryMessages {
    /// The messages to store; `output_messages_key` applies to map-shaped outputs only.
    fn to_history_messages(&self, output_messages_key: Option<&str>) -> Result<Vec<Message>>;
}

impl ToHistoryMessages for AiMessage {
    fn to_history_messages(&self, _: Option<&str>) -> Result<Vec<Message>> {
        Ok(vec![Message::Ai(self.clone())])
    }
}

impl ToHistoryMessages for Message {
    fn to_history_messages(&self, _: Option<&str>) -> Result<Vec<Message>> {
        Ok(vec![self.clone()])
    }
}

impl ToHistoryMessages for Vec<Message> {
    fn to_history_messages(&self, _: Option<&str>) -> Result<Vec<Message>> {
        Ok(self.clone())
    }
}

impl ToHistoryMessages for String {
    fn to_history_messages(&self, _: Option<&str>) -> Result<Vec<Message>> {
        Ok(vec![Message::ai(self.as_str())])
    }
}

impl ToHistoryMessages for Value {
    fn to_history_messages(&self, output_messages_key: Option<&str>) -> Result<Vec<Message>> {
        let value = match self {
            Value::Object(map) if output_messages_key.is_none() && is_message_object(map) => self,
            Value::Object(map) => {
                let key = match (output_messages_key, map.len()) {
                    (Some(key), _) => key,
                    (None, 1) => map.keys().next().map_or("output", String::as_str),
                    (None, _) => "output",
                };
                map.get(key).ok_or_else(|| {
                    Error::InvalidInput(format!(
                        "output has no key '{key}' to read messages from; keys are {:?}{}",
                        map.keys().collect::<Vec<_>>(),
                        if output_messages_key.is_none() { " (set output_messages_key)" } else { "" }
                    ))
                })?
            }
            other => other,
        };
        match value {
            Value::String(text) => Ok(vec![Message::ai(text.as_str())]),
            Value::Array(items) => items.iter().cloned().map(Message::from_like).collect(),
            Value::Object(_) => Ok(vec![Message::from_like(value.clone())?]),
            other => Err(Error::InvalidInput(format!(
                "output should be a message, a list of messages or a string to go into the history, got {}",
                json_excerpt(other)
            ))),
        }
    }
}

/// Whether a JSON object is a message itself rather than a map holding messages.
pub(crate) fn is_message_object(map: &Map<String, Value>) -> bool {
    map.contains_key("content") && (map.contains_key("type") || map.contains_key("role"))
}
