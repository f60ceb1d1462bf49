//! `ToolOutput`: what a tool returns.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::error::Result;
use crate::messages::Content;

/// What a tool returns.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ToolOutput {
    /// Text, sent to the model as is.
    Text(String),
    /// A JSON value, sent to the model as its JSON text.
    Json(Value),
    /// Content for the model and an artifact kept for the application (LangChain's
    /// `response_format="content_and_artifact"`); the artifact lands in `ToolMessage::artifact`.
    ContentAndArtifact {
        /// What the model sees.
        content: Content,
        /// What only the application sees.
        artifact: Value,
    },
    /// A command for the graph that runs the tool (update its state, go to a node, ...).
    ///
    /// The payload is opaque here; the graph crate builds it from its own `Command` type and downcasts it
    /// back when the tool ran inside a tool node. Invoked outside a graph, such a tool is an error.
    Command(CommandPayload),
    /// A tool message of the tool's own making (its content, status and artifact as given; the call's id
    /// and the tool's name are filled in when missing).
    Message(Box<crate::messages::ToolMessage>),
    /// Several outputs: commands and tool messages, exactly one of which answers the call (LangGraph's
    /// `list[Command | ToolMessage]`); a graph's tool node applies them in order.
    Many(Vec<ToolOutput>),
}

impl ToolOutput {
    /// Text output.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(text.into())
    }

    /// Any serializable value: a string becomes text, anything else JSON.
    pub fn from_serialize<T: Serialize + ?Sized>(value: &T) -> Result<Self> {
        Ok(match serde_json::to_value(value)? {
            Value::String(s) => Self::Text(s),
            other => Self::Json(other),
        })
    }

    /// A tool message of the tool's own making.
    pub fn message(message: crate::messages::ToolMessage) -> Self {
        Self::Message(Box::new(message))
    }

    /// Several outputs: commands and tool messages, exactly one of which answers the call.
    pub fn many(outputs: impl IntoIterator<Item = ToolOutput>) -> Self {
        Self::Many(outputs.into_iter().collect())
    }

    /// Content for the model plus an artifact for the application.
    pub fn content_and_artifact(content: impl Into<Content>, artifact: Value) -> Self {
        Self::ContentAndArtifact { content: content.into(), artifact }
    }

    /// A command payload for the graph (see [`ToolOutput::Command`]).
    pub fn command(payload: CommandPayload) -> Self {
        Self::Command(payload)
    }
}

impl From<String> for ToolOutput {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<&str> for ToolOutput {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

impl From<Value> for ToolOutput {
    fn from(value: Value) -> Self {
        match value {
            Value::String(s) => Self::Text(s),
            other => Self::Json(other),
        }
    }
}

/// An opaque command returned by a tool, for the graph crate to downcast (see [`ToolOutput::Command`]).
///
/// `summary` is a JSON description of the command, used in run events and logs.
#[derive(Clone)]
pub struct CommandPayload {
    value: Arc<dyn Any + Send + Sync>,
    summary: Value,
}

impl CommandPayload {
    /// Wraps a command value with a JSON summary of it.
    pub fn new<T: Any + Send + Sync>(value: T, summary: Value) -> Self {
        Self { value: Arc::new(value), summary }
    }

    /// The command, if it is a `T`.
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        self.value.downcast_ref::<T>()
    }

    /// The shared command value.
    pub fn value(&self) -> &Arc<dyn Any + Send + Sync> {
        &self.value
    }

    /// The JSON summary given at construction.
    pub fn summary(&self) -> &Value {
        &self.summary
    }
}

impl fmt::Debug for CommandPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommandPayload").field("summary", &self.summary).finish_non_exhaustive()
    }
}

impl Serialize for CommandPayload {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        self.summary.serialize(serializer)
    }
}
