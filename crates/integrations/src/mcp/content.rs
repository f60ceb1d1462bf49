//! MCP content as weft content: tool results as tool outputs, prompt messages as messages, resources as
//! text or binary contents. The mapping reads MCP's wire JSON (the protocol's stable shape), as
//! langchain-mcp-adapters converts it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use weft_runnable_core::{Content, Message, ToolOutput};

use super::error::McpError;

/// One MCP content block as a weft content block (LangChain's standard blocks):
///
/// | MCP | weft |
/// |---|---|
/// | `text` | `{"type": "text", "text"}` |
/// | `image` | `{"type": "image", "base64", "mime_type"}` |
/// | `audio` | `{"type": "audio", "base64", "mime_type"}` |
/// | `resource` with `text` | `{"type": "text", "text"}` |
/// | `resource` with `blob` | `{"type": "file", "base64", "mime_type"}` |
/// | `resource_link` | `{"type": "file", "url", "mime_type"}` |
///
/// A block of another type is kept as it came.
pub fn block_from_mcp(block: &Value) -> Value {
    let str_of = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    let with_mime = |mut block: Map<String, Value>, mime: Option<String>| {
        if let Some(mime) = mime {
            block.insert("mime_type".to_owned(), Value::String(mime));
        }
        Value::Object(block)
    };
    match block.get("type").and_then(Value::as_str) {
        Some("text") => json!({"type": "text", "text": str_of(block, "text").unwrap_or_default()}),
        Some(kind @ ("image" | "audio")) => {
            let mut out = Map::new();
            out.insert("type".to_owned(), Value::String(kind.to_owned()));
            out.insert("base64".to_owned(), Value::String(str_of(block, "data").unwrap_or_default()));
            with_mime(out, str_of(block, "mimeType"))
        }
        Some("resource") => {
            let resource = block.get("resource").cloned().unwrap_or(Value::Null);
            match (str_of(&resource, "text"), str_of(&resource, "blob")) {
                (Some(text), _) => json!({"type": "text", "text": text}),
                (None, Some(blob)) => {
                    let mut out = Map::new();
                    out.insert("type".to_owned(), Value::String("file".to_owned()));
                    out.insert("base64".to_owned(), Value::String(blob));
                    with_mime(out, str_of(&resource, "mimeType"))
                }
                (None, None) => block.clone(),
            }
        }
        Some("resource_link") => {
            let mut out = Map::new();
            out.insert("type".to_owned(), Value::String("file".to_owned()));
            out.insert("url".to_owned(), Value::String(str_of(block, "uri").unwrap_or_default()));
            with_mime(out, str_of(block, "mimeType"))
        }
        _ => block.clone(),
    }
}

/// The weft content of MCP content blocks: one text block becomes plain text, anything else a list of
/// blocks.
pub fn content_from_mcp(blocks: &[Value]) -> Content {
    let converted: Vec<Value> = blocks.iter().map(block_from_mcp).collect();
    match converted.as_slice() {
        [] => Content::Text(String::new()),
        [only] if only.get("type").and_then(Value::as_str) == Some("text") => {
            Content::Text(only.get("text").and_then(Value::as_str).unwrap_or_default().to_owned())
        }
        _ => Content::Blocks(converted),
    }
}

/// A `tools/call` result (its wire JSON) as a tool output.
///
/// `isError: true` is an [`McpError::ToolFailed`] carrying the text of the content (so the tool's error
/// policy decides what the model sees). Structured content is kept as the artifact,
/// `{"structured_content": ...}`; when the result has structured content and no content blocks, the
/// model sees the structured content's JSON text.
pub fn tool_output_from_mcp(server: &str, tool: &str, result: &Value) -> Result<ToolOutput, McpError> {
    let blocks = result.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let text = content_from_mcp(blocks).text();
        let message =
            if text.is_empty() { "the tool reported an error without a message".to_owned() } else { text };
        return Err(McpError::ToolFailed { server: server.to_owned(), tool: tool.to_owned(), message });
    }
    let structured = result.get("structuredContent").filter(|v| !v.is_null());
    let content = match (blocks.is_empty(), structured) {
        (true, Some(structured)) => Content::Text(structured.to_string()),
        _ => content_from_mcp(blocks),
    };
    Ok(match structured {
        Some(structured) => {
            ToolOutput::content_and_artifact(content, json!({"structured_content": structured}))
        }
        None => match content {
            Content::Text(text) => ToolOutput::Text(text),
            blocks => ToolOutput::content_and_artifact(blocks, Value::Null),
        },
    })
}

/// A prompt message (`{"role", "content"}`) as a weft message: `user` becomes a human message,
/// `assistant` an AI message.
pub fn message_from_mcp(message: &Value) -> Result<Message, String> {
    let content =
        message.get("content").map(|c| content_from_mcp(std::slice::from_ref(c))).unwrap_or_default();
    match message.get("role").and_then(Value::as_str) {
        Some("user") => Ok(Message::human(content)),
        Some("assistant") => Ok(Message::ai(content)),
        other => Err(format!("unknown prompt message role {other:?}")),
    }
}

/// The contents of a resource, as `resources/read` returns them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceContent {
    /// The resource's URI.
    pub uri: String,
    /// Its MIME type, when the server gave one.
    #[serde(default, rename = "mimeType", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The data.
    #[serde(flatten)]
    pub data: ResourceData,
}

/// Text or binary resource data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResourceData {
    /// Text.
    Text(String),
    /// Binary data, base64-encoded as the server sent it.
    Blob(String),
}

impl ResourceContent {
    /// The text, for a text resource.
    pub fn text(&self) -> Option<&str> {
        match &self.data {
            ResourceData::Text(text) => Some(text),
            ResourceData::Blob(_) => None,
        }
    }
}

/// A tool output as MCP content blocks (serving weft tools over MCP): text as one text block, JSON as
/// its text, standard weft blocks back into MCP blocks.
pub(crate) fn mcp_blocks_from_content(content: &Content) -> Vec<Value> {
    match content {
        Content::Text(text) => vec![json!({"type": "text", "text": text})],
        Content::Blocks(blocks) => blocks.iter().map(mcp_block_from_weft).collect(),
    }
}

fn mcp_block_from_weft(block: &Value) -> Value {
    let str_of = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    match block.get("type").and_then(Value::as_str) {
        Some(kind @ ("image" | "audio")) if block.get("base64").is_some() => {
            json!({"type": kind, "data": str_of("base64"), "mimeType": str_of("mime_type")})
        }
        Some("text") => json!({"type": "text", "text": str_of("text")}),
        _ => match block {
            Value::String(text) => json!({"type": "text", "text": text}),
            other => json!({"type": "text", "text": other.to_string()}),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_text_block_is_plain_text() {
        let result = json!({"content": [{"type": "text", "text": "Echo: hi"}]});
        let ToolOutput::Text(text) = tool_output_from_mcp("s", "echo", &result).unwrap() else {
            panic!("expected text")
        };
        assert_eq!(text, "Echo: hi");
    }

    #[test]
    fn images_become_standard_image_blocks_next_to_the_text() {
        let result = json!({"content": [
            {"type": "text", "text": "a logo:"},
            {"type": "image", "data": "iVBOR", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "f://x", "blob": "AAE=", "mimeType": "application/zip"}},
            {"type": "resource_link", "uri": "demo://r/1", "name": "r1", "mimeType": "text/plain"},
        ]});
        let ToolOutput::ContentAndArtifact { content: Content::Blocks(blocks), artifact } =
            tool_output_from_mcp("s", "img", &result).unwrap()
        else {
            panic!("expected blocks")
        };
        assert_eq!(
            blocks,
            vec![
                json!({"type": "text", "text": "a logo:"}),
                json!({"type": "image", "base64": "iVBOR", "mime_type": "image/png"}),
                json!({"type": "file", "base64": "AAE=", "mime_type": "application/zip"}),
                json!({"type": "file", "url": "demo://r/1", "mime_type": "text/plain"}),
            ]
        );
        assert_eq!(artifact, Value::Null);
    }

    #[test]
    fn structured_content_is_the_artifact_and_stands_in_for_missing_text() {
        let with_text =
            json!({"content": [{"type": "text", "text": "22.5"}], "structuredContent": {"t": 22.5}});
        let ToolOutput::ContentAndArtifact { content, artifact } =
            tool_output_from_mcp("s", "w", &with_text).unwrap()
        else {
            panic!("expected an artifact")
        };
        assert_eq!(
            (content.text(), artifact),
            ("22.5".to_owned(), json!({"structured_content": {"t": 22.5}}))
        );
        let alone = json!({"structuredContent": {"t": 1}});
        let ToolOutput::ContentAndArtifact { content, .. } = tool_output_from_mcp("s", "w", &alone).unwrap()
        else {
            panic!("expected an artifact")
        };
        assert_eq!(content.text(), r#"{"t":1}"#);
    }

    #[test]
    fn is_error_results_are_tool_failures_with_their_text() {
        let result = json!({"isError": true, "content": [{"type": "text", "text": "bad input"}]});
        let err = tool_output_from_mcp("math", "add", &result).unwrap_err();
        assert_eq!(err.to_string(), "tool 'add' of mcp server 'math' failed: bad input");
        let silent = json!({"isError": true, "content": []});
        let err = tool_output_from_mcp("math", "add", &silent).unwrap_err();
        assert!(err.to_string().ends_with("the tool reported an error without a message"), "{err}");
    }

    #[test]
    fn prompt_messages_map_roles_and_reject_unknown_ones() {
        let user =
            message_from_mcp(&json!({"role": "user", "content": {"type": "text", "text": "hi"}})).unwrap();
        assert_eq!(user, Message::human("hi"));
        let ai = message_from_mcp(&json!({"role": "assistant", "content": {"type": "text", "text": "yo"}}))
            .unwrap();
        assert_eq!(ai, Message::ai("yo"));
        let bad = message_from_mcp(&json!({"role": "system", "content": {"type": "text", "text": "x"}}));
        assert_eq!(bad.unwrap_err(), "unknown prompt message role Some(\"system\")");
    }

    #[test]
    fn weft_content_goes_back_to_mcp_blocks() {
        let content = Content::Blocks(vec![
            json!({"type": "text", "text": "t"}),
            json!({"type": "image", "base64": "AA", "mime_type": "image/png"}),
            json!("plain"),
        ]);
        assert_eq!(
            mcp_blocks_from_content(&content),
            vec![
                json!({"type": "text", "text": "t"}),
                json!({"type": "image", "data": "AA", "mimeType": "image/png"}),
                json!({"type": "text", "text": "plain"}),
            ]
        );
    }

    #[test]
    fn resource_contents_read_text_and_blobs() {
        let text: ResourceContent =
            serde_json::from_value(json!({"uri": "a://1", "mimeType": "text/plain", "text": "hello"}))
                .unwrap();
        assert_eq!(text.text(), Some("hello"));
        let blob: ResourceContent = serde_json::from_value(json!({"uri": "a://2", "blob": "AAE="})).unwrap();
        assert_eq!((blob.data, blob.mime_type), (ResourceData::Blob("AAE=".into()), None));
    }
}
