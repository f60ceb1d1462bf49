//! Chat messages: system, human, AI, tool and remove markers, with LangChain-compatible JSON.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod coerce;
mod json_merge;
mod merge;
pub mod text;

pub use coerce::{MessageLike, convert_to_messages, messages_from};
pub use text::{ApproximateTokens, buffer_string_xml, count_tokens_approximately};

/// The id of a [`RemoveMessage`] that removes every message before it (LangChain's `REMOVE_ALL_MESSAGES`).
pub const REMOVE_ALL_MESSAGES: &str = "__remove_all__";

/// The content of a message: plain text or a list of content blocks (`{"type": "text", "text": ...}`, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Content blocks, as multimodal providers use them.
    Blocks(Vec<Value>),
}

impl Default for Content {
    fn default() -> Self {
        Content::Text(String::new())
    }
}

impl Content {
    /// The text of the content: the string itself, or the text blocks joined.
    pub fn text(&self) -> String {
        match self {
            Content::Text(s) => s.clone(),
            Content::Blocks(blocks) => blocks
                .iter()
                .filter_map(|b| match b {
                    Value::String(s) => Some(s.as_str()),
                    Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("text") => {
                        o.get("text").and_then(Value::as_str)
                    }
                    _ => None,
                })
                .collect(),
        }
    }

    /// Whether there is no content at all.
    pub fn is_empty(&self) -> bool {
        match self {
            Content::Text(s) => s.is_empty(),
            Content::Blocks(b) => b.is_empty(),
        }
    }
}

impl From<String> for Content {
    fn from(s: String) -> Self {
        Content::Text(s)
    }
}

impl From<&str> for Content {
    fn from(s: &str) -> Self {
        Content::Text(s.to_owned())
    }
}

/// Instructions for the model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SystemMessage {
    /// The content.
    #[serde(default)]
    pub content: Content,
    /// Optional unique id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Optional name of the author.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Provider-specific extra fields.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub additional_kwargs: Map<String, Value>,
    /// Provider-specific response fields.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub response_metadata: Map<String, Value>,
}

/// A message from the user.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HumanMessage {
    /// The content.
    #[serde(default)]
    pub content: Content,
    /// Optional unique id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Optional name of the author.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Provider-specific extra fields.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub additional_kwargs: Map<String, Value>,
    /// Provider-specific response fields.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub response_metadata: Map<String, Value>,
}

/// A request from the model to call a tool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "tool_call")]
pub struct ToolCall {
    /// The tool's name.
    pub name: String,
    /// The arguments, a JSON object.
    #[serde(default = "empty_object")]
    pub args: Value,
    /// The call's id, echoed back in the tool message.
    #[serde(default)]
    pub id: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// A tool call whose arguments could not be parsed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "invalid_tool_call")]
pub struct InvalidToolCall {
    /// The tool's name, if known.
    #[serde(default)]
    pub name: Option<String>,
    /// The raw argument string.
    #[serde(default)]
    pub args: Option<String>,
    /// The call's id, if known.
    #[serde(default)]
    pub id: Option<String>,
    /// Why the call is invalid.
    #[serde(default)]
    pub error: Option<String>,
}

/// A fragment of a tool call as streamed by a model; fragments with the same `index` merge.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "tool_call_chunk")]
pub struct ToolCallChunk {
    /// The tool's name (usually only in the first fragment).
    #[serde(default)]
    pub name: Option<String>,
    /// A piece of the argument string.
    #[serde(default)]
    pub args: Option<String>,
    /// The call's id (usually only in the first fragment).
    #[serde(default)]
    pub id: Option<String>,
    /// Which tool call of the message this fragment belongs to.
    #[serde(default)]
    pub index: Option<u32>,
}

impl ToolCallChunk {
    /// A fragment of the tool call at `index`.
    pub fn new(name: Option<&str>, args: Option<&str>, id: Option<&str>, index: Option<u32>) -> Self {
        Self {
            name: name.map(str::to_owned),
            args: args.map(str::to_owned),
            id: id.map(str::to_owned),
            index,
        }
    }
}

/// Token counts of a model call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageMetadata {
    /// Tokens in the prompt.
    pub input_tokens: u64,
    /// Tokens generated.
    pub output_tokens: u64,
    /// Total tokens.
    pub total_tokens: u64,
    /// Breakdown of input tokens (e.g. `cache_read`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_token_details: Option<Map<String, Value>>,
    /// Breakdown of output tokens (e.g. `reasoning`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_token_details: Option<Map<String, Value>>,
}

impl UsageMetadata {
    /// Counts of prompt and generated tokens; the total is their sum.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Self {
            input_tokens,
            output_tokens,
            total_tokens: input_tokens.saturating_add(output_tokens),
            ..Default::default()
        }
    }
}

/// A message from the model, whole or (while streaming) a chunk of one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AiMessage {
    /// The content.
    #[serde(default)]
    pub content: Content,
    /// Optional unique id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Optional name of the author (an agent's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Tool calls requested by the model.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Tool calls whose arguments could not be parsed.
    #[serde(default)]
    pub invalid_tool_calls: Vec<InvalidToolCall>,
    /// Streamed tool-call fragments (chunks only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_call_chunks: Vec<ToolCallChunk>,
    /// Token counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_metadata: Option<UsageMetadata>,
    /// Provider-specific extra fields.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub additional_kwargs: Map<String, Value>,
    /// Provider-specific response fields (model name, finish reason, ...).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub response_metadata: Map<String, Value>,
    /// `Some("last")` on the final chunk of a stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_position: Option<String>,
    /// Whether this is a streamed chunk (LangChain's `AIMessageChunk`) rather than a whole message. Chat
    /// models' streams mark their chunks, merging keeps the mark and [`finish`](AiMessage::finish) (or the
    /// `add_messages` reducer) clears it. Inside a [`Message`] a chunk serialises with type
    /// `AIMessageChunk`, as LangChain's does; the field itself is never serialised.
    #[serde(skip)]
    pub is_chunk: bool,
}

/// A streamed piece of an [`AiMessage`] (one with [`is_chunk`](AiMessage::is_chunk) set); chunks merge into a
/// whole message.
pub type AiMessageChunk = AiMessage;

/// Whether a tool call succeeded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    /// The tool returned a result.
    #[default]
    Success,
    /// The tool failed; the content describes the error.
    Error,
}

/// The result of a tool call, sent back to the model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolMessage {
    /// The tool's result as content.
    #[serde(default)]
    pub content: Content,
    /// The id of the tool call this answers.
    pub tool_call_id: String,
    /// Optional unique id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A value kept for the application but not sent to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<Value>,
    /// Success or error.
    #[serde(default)]
    pub status: ToolStatus,
    /// Provider-specific extra fields.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub additional_kwargs: Map<String, Value>,
    /// Provider-specific response fields.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub response_metadata: Map<String, Value>,
}

/// A marker that deletes the message with `id` from a message list (or all of them, with
/// [`REMOVE_ALL_MESSAGES`]) when applied by the `add_messages` reducer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RemoveMessage {
    /// The id of the message to remove.
    pub id: String,
}

/// Any chat message.
///
/// Serialises in LangChain's flat form, `{"type": "ai", "content": ..., "tool_calls": [...], ...}` (an AI
/// message chunk as `{"type": "AIMessageChunk", ...}`). Deserialises that form, LangChain's `message_to_dict` form `{"type": "ai", "data": {...}}`, its
/// serialised-constructor form `{"lc": 1, "id": [..., "AIMessage"], "kwargs": {...}}`, chunk type names
/// (`AIMessageChunk`, ...) and OpenAI-style role dicts; [`Message::from_like`] also accepts `[role,
/// content]` pairs and bare strings.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// Instructions for the model.
    System(SystemMessage),
    /// A user message.
    Human(HumanMessage),
    /// A model message, or a chunk of one while it streams.
    Ai(AiMessage),
    /// A tool result.
    Tool(ToolMessage),
    /// A removal marker.
    Remove(RemoveMessage),
}

/// How a [`Message`] serialises: its fields under a `type` tag, `AIMessageChunk` for an AI chunk.
#[derive(Serialize)]
#[serde(tag = "type")]
enum Tagged<'a> {
    #[serde(rename = "system")]
    System(&'a SystemMessage),
    #[serde(rename = "human")]
    Human(&'a HumanMessage),
    #[serde(rename = "ai")]
    Ai(&'a AiMessage),
    #[serde(rename = "AIMessageChunk")]
    AiChunk(&'a AiMessage),
    #[serde(rename = "tool")]
    Tool(&'a ToolMessage),
    #[serde(rename = "remove")]
    Remove(&'a RemoveMessage),
}

/// An AI message serialised as a [`Message`] is, with its `type` (`ai`, or `AIMessageChunk` for a chunk),
/// without moving it into one.
pub(crate) struct AiAsMessage<'a>(pub(crate) &'a AiMessage);

impl Serialize for AiAsMessage<'_> {
    fn serialize<Ser: serde::Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        if self.0.is_chunk { Tagged::AiChunk(self.0) } else { Tagged::Ai(self.0) }.serialize(serializer)
    }
}

impl Serialize for Message {
    fn serialize<Ser: serde::Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        match self {
            Message::System(m) => Tagged::System(m),
            Message::Human(m) => Tagged::Human(m),
            Message::Ai(m) => return AiAsMessage(m).serialize(serializer),
            Message::Tool(m) => Tagged::Tool(m),
            Message::Remove(m) => Tagged::Remove(m),
        }
        .serialize(serializer)
    }
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<Content>) -> Self {
        Message::System(SystemMessage { content: content.into(), ..Default::default() })
    }

    /// A human message.
    pub fn human(content: impl Into<Content>) -> Self {
        Message::Human(HumanMessage { content: content.into(), ..Default::default() })
    }

    /// An AI message.
    pub fn ai(content: impl Into<Content>) -> Self {
        Message::Ai(AiMessage { content: content.into(), ..Default::default() })
    }

    /// A tool message answering `tool_call_id`.
    pub fn tool(content: impl Into<Content>, tool_call_id: impl Into<String>) -> Self {
        Message::Tool(ToolMessage {
            content: content.into(),
            tool_call_id: tool_call_id.into(),
            ..Default::default()
        })
    }

    /// A marker removing the message with `id`.
    pub fn remove(id: impl Into<String>) -> Self {
        Message::Remove(RemoveMessage { id: id.into() })
    }

    /// The type name LangChain uses for the kind of message: `system`, `human`, `ai`, `tool`, `remove` (`ai`
    /// for an AI chunk too, which serialises as `AIMessageChunk`).
    pub fn type_name(&self) -> &'static str {
        match self {
            Message::System(_) => "system",
            Message::Human(_) => "human",
            Message::Ai(_) => "ai",
            Message::Tool(_) => "tool",
            Message::Remove(_) => "remove",
        }
    }

    /// The message id, if any.
    pub fn id(&self) -> Option<&str> {
        match self {
            Message::System(m) => m.id.as_deref(),
            Message::Human(m) => m.id.as_deref(),
            Message::Ai(m) => m.id.as_deref(),
            Message::Tool(m) => m.id.as_deref(),
            Message::Remove(m) => Some(&m.id),
        }
    }

    /// Sets the message id.
    pub fn set_id(&mut self, id: impl Into<String>) {
        let id: String = id.into();
        match self {
            Message::System(m) => m.id = Some(id),
            Message::Human(m) => m.id = Some(id),
            Message::Ai(m) => m.id = Some(id),
            Message::Tool(m) => m.id = Some(id),
            Message::Remove(m) => m.id = id,
        }
    }

    /// Returns the message with its id set.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.set_id(id);
        self
    }

    /// The content (remove markers have none).
    pub fn content(&self) -> Option<&Content> {
        match self {
            Message::System(m) => Some(&m.content),
            Message::Human(m) => Some(&m.content),
            Message::Ai(m) => Some(&m.content),
            Message::Tool(m) => Some(&m.content),
            Message::Remove(_) => None,
        }
    }

    /// The text of the content.
    pub fn text(&self) -> String {
        self.content().map(Content::text).unwrap_or_default()
    }

    /// The AI message inside, if this is one.
    pub fn as_ai(&self) -> Option<&AiMessage> {
        match self {
            Message::Ai(m) => Some(m),
            _ => None,
        }
    }

    /// The tool message inside, if this is one.
    pub fn as_tool(&self) -> Option<&ToolMessage> {
        match self {
            Message::Tool(m) => Some(m),
            _ => None,
        }
    }
}

impl From<AiMessage> for Message {
    fn from(m: AiMessage) -> Self {
        Message::Ai(m)
    }
}

impl From<HumanMessage> for Message {
    fn from(m: HumanMessage) -> Self {
        Message::Human(m)
    }
}

impl From<SystemMessage> for Message {
    fn from(m: SystemMessage) -> Self {
        Message::System(m)
    }
}

impl From<ToolMessage> for Message {
    fn from(m: ToolMessage) -> Self {
        Message::Tool(m)
    }
}

impl From<RemoveMessage> for Message {
    fn from(m: RemoveMessage) -> Self {
        Message::Remove(m)
    }
}

impl AiMessage {
    /// An AI message with text content.
    pub fn new(content: impl Into<Content>) -> Self {
        Self { content: content.into(), ..Default::default() }
    }

    /// A streamed chunk with text content (LangChain's `AIMessageChunk(content=...)`).
    pub fn chunk(content: impl Into<Content>) -> Self {
        Self { content: content.into(), is_chunk: true, ..Default::default() }
    }

    /// The text of the content.
    pub fn text(&self) -> String {
        self.content.text()
    }
}

/// What a prompt produces and a model consumes: plain text or a list of messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PromptValue {
    /// A plain string (a completion prompt; a chat model sees one human message).
    Text(String),
    /// Chat messages.
    Messages(Vec<Message>),
}

impl PromptValue {
    /// The prompt as chat messages.
    pub fn into_messages(self) -> Vec<Message> {
        match self {
            PromptValue::Text(s) => vec![Message::human(s)],
            PromptValue::Messages(m) => m,
        }
    }

    /// The prompt as one string (messages rendered one per line as `Role: text`).
    pub fn to_text(&self) -> String {
        match self {
            PromptValue::Text(s) => s.clone(),
            PromptValue::Messages(messages) => messages
                .iter()
                .map(|m| {
                    let role = match m {
                        Message::System(_) => "System",
                        Message::Human(_) => "Human",
                        Message::Ai(_) => "AI",
                        Message::Tool(_) => "Tool",
                        Message::Remove(_) => "Remove",
                    };
                    format!("{role}: {}", m.text())
                })
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

impl From<String> for PromptValue {
    fn from(s: String) -> Self {
        PromptValue::Text(s)
    }
}

impl From<&str> for PromptValue {
    fn from(s: &str) -> Self {
        PromptValue::Text(s.to_owned())
    }
}

impl From<Vec<Message>> for PromptValue {
    fn from(m: Vec<Message>) -> Self {
        PromptValue::Messages(m)
    }
}
