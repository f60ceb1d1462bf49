//! Messages measured and written as text: langchain-core's `count_tokens_approximately` and
//! `get_buffer_string(format="xml")`.

use serde_json::{Value, json};

use super::{Content, Message};
use crate::py::py_repr;

/// How [`count_tokens_approximately`] counts (langchain-core's defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ApproximateTokens {
    /// Characters per token.
    pub chars_per_token: f64,
    /// Tokens added for each message.
    pub extra_tokens_per_message: f64,
    /// Whether a message's name counts.
    pub count_name: bool,
    /// Tokens an image block counts for.
    pub tokens_per_image: usize,
    /// Whether the count is scaled (between 1 and 1.25) towards the `total_tokens` the provider reported
    /// for the last AI message, when every AI message comes from the same provider.
    pub usage_metadata_scaling: bool,
}

impl Default for ApproximateTokens {
    fn default() -> Self {
        Self {
            chars_per_token: 4.0,
            extra_tokens_per_message: 3.0,
            count_name: true,
            tokens_per_image: 85,
            usage_metadata_scaling: false,
        }
    }
}

/// The number of tokens `messages` take, estimated from their length as langchain-core's
/// `count_tokens_approximately` does (4 characters a token, 3 tokens a message).
pub fn count_tokens_approximately(messages: &[Message]) -> usize {
    ApproximateTokens::default().count(messages)
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

impl ApproximateTokens {
    /// The estimate for `messages`.
    pub fn count(&self, messages: &[Message]) -> usize {
        let mut tokens = 0.0;
        let mut provider: Option<Option<&Value>> = None;
        let mut mixed = false;
        let mut last_total: Option<u64> = None;
        let mut at_last_ai: f64 = 0.0;
        for message in messages {
            let (content, role, name) = match message {
                Message::System(m) => (&m.content, "system", m.name.as_deref()),
                Message::Human(m) => (&m.content, "user", m.name.as_deref()),
                Message::Ai(m) => (&m.content, "assistant", m.name.as_deref()),
                Message::Tool(m) => (&m.content, "tool", m.name.as_deref()),
                Message::Remove(_) => continue,
            };
            let mut count = 0;
            match content {
                Content::Text(text) => count += chars(text),
                Content::Blocks(blocks) => {
                    for block in blocks {
                        match block {
                            Value::String(s) => count += chars(s),
                            other => match other.get("type").and_then(Value::as_str) {
                                Some("image" | "image_url") => tokens += self.tokens_per_image as f64,
                                Some("text") => {
                                    count += other.get("text").and_then(Value::as_str).map_or(0, chars)
                                }
                                _ => count += chars(&py_repr(other)),
                            },
                        }
                    }
                }
            }
            if let Message::Ai(ai) = message {
                if matches!(ai.content, Content::Text(_)) && !ai.tool_calls.is_empty() {
                    let calls: Vec<Value> = ai
                        .tool_calls
                        .iter()
                        .map(|c| json!({"name": c.name, "args": c.args, "id": c.id, "type": "tool_call"}))
                        .collect();
                    count += chars(&py_repr(&Value::Array(calls)));
                }
            }
            if let Message::Tool(tool) = message {
                count += chars(&tool.tool_call_id);
            }
            count += role.len();
            if let (Some(name), true) = (name, self.count_name) {
                count += chars(name);
            }
            tokens += (count as f64 / self.chars_per_token).ceil() + self.extra_tokens_per_message;
            if let (Message::Ai(ai), true) = (message, self.usage_metadata_scaling) {
                let this = ai.response_metadata.get("model_provider");
                match provider {
                    None => provider = Some(this),
                    Some(first) if first != this => mixed = true,
                    Some(_) => {}
                }
                if let Some(total) = ai.usage_metadata.as_ref().map(|u| u.total_tokens) {
                    last_total = Some(total);
                    at_last_ai = tokens;
                }
            }
        }
        let known_provider = matches!(provider, Some(Some(_)));
        if self.usage_metadata_scaling && messages.len() > 1 && !mixed && known_provider && at_last_ai > 0.0 {
            if let Some(total) = last_total {
                tokens *= (total as f64 / at_last_ai).clamp(1.0, 1.25);
            }
        }
        tokens.ceil() as usize
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// An XML attribute value with its quotes, as Python's `quoteattr` writes it.
fn quote_attr(text: &str) -> String {
    let escaped = escape(text).replace('\n', "&#10;").replace('\r', "&#13;").replace('\t', "&#9;");
    if !escaped.contains('"') {
        format!("\"{escaped}\"")
    } else if !escaped.contains('\'') {
        format!("'{escaped}'")
    } else {
        format!("\"{}\"", escaped.replace('"', "&quot;"))
    }
}

/// `messages` as langchain-core's `get_buffer_string(messages, format="xml")` writes them: one
/// `<message type="...">` element each, tool calls as `<tool_call id=... name=...>` elements.
pub fn buffer_string_xml(messages: &[Message]) -> String {
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        let text = match message {
            Message::System(m) => m.content.text(),
            Message::Human(m) => m.content.text(),
            Message::Ai(m) => m.content.text(),
            Message::Tool(m) => m.content.text(),
            Message::Remove(_) => continue,
        };
        let kind = message.type_name();
        let calls: Vec<String> = message
            .as_ai()
            .map(|ai| {
                ai.tool_calls
                    .iter()
                    .map(|c| {
                        format!(
                            "  <tool_call id={} name={}>{}</tool_call>",
                            quote_attr(c.id.as_deref().unwrap_or_default()),
                            quote_attr(&c.name),
                            escape(&crate::py::py_json(&c.args))
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        if calls.is_empty() {
            out.push(format!("<message type=\"{kind}\">{}</message>", escape(&text)));
            continue;
        }
        let mut lines = vec![format!("<message type=\"{kind}\">")];
        if !text.is_empty() {
            lines.push(format!("  <content>{}</content>", escape(&text)));
        }
        lines.extend(calls);
        lines.push("</message>".to_owned());
        out.push(lines.join("\n"));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{AiMessage, ToolCall, ToolMessage};

    fn conversation() -> Vec<Message> {
        let call = ToolCall { name: "add".into(), args: json!({"a": 1}), id: Some("c1".into()) };
        vec![
            Message::human("hi <b>&"),
            Message::Ai(AiMessage { tool_calls: vec![call], ..AiMessage::default() }),
            Message::Tool(ToolMessage {
                content: "5".into(),
                tool_call_id: "c1".into(),
                name: Some("add".into()),
                ..ToolMessage::default()
            }),
            Message::ai("done"),
        ]
    }

    #[test]
    fn tokens_are_counted_as_langchain_counts_them() {
        // Checked against langchain-core 1.8: count_tokens_approximately of the same messages.
        assert_eq!(count_tokens_approximately(&conversation()), 42);
        assert_eq!(count_tokens_approximately(&[]), 0);
    }

    #[test]
    fn the_xml_buffer_matches_langchain() {
        let expected = "<message type=\"human\">hi &lt;b&gt;&amp;</message>\n<message type=\"ai\">\n  <tool_call id=\"c1\" \
                        name=\"add\">{\"a\": 1}</tool_call>\n</message>\n<message type=\"tool\">5</message>\n<message \
                        type=\"ai\">done</message>";
        assert_eq!(buffer_string_xml(&conversation()), expected);
    }
}
