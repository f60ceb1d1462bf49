//! The `messages` channel: a run's message chunks (`messages-tuple` events, `[chunk, metadata]`) as the
//! protocol's content-block events: `message-start`, `content-block-start`, one `content-block-delta` per
//! chunk of text, `content-block-finish` with the whole text, `message-finish`. A message ends when its
//! last chunk comes (`chunk_position: "last"` or a `finish_reason`), when another message starts in its
//! namespace, when it comes whole, or when anything else happens there (a node's update, the state, the
//! run's end). Whole messages (a node's output that was not streamed) are not sent, as langgraph-api
//! drops them.

use std::collections::HashMap;

use serde_json::{Value, json};

/// A message being streamed in one namespace.
#[derive(Debug)]
struct Open {
    id: Option<String>,
    text: String,
    /// Whether its text block was started.
    block: bool,
}

/// The open message of each namespace.
#[derive(Debug, Default)]
pub(crate) struct Messages {
    open: HashMap<Vec<String>, Open>,
}

/// The text of a message's content (a string, or its text blocks).
fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.as_str().or_else(|| b.get("text").and_then(Value::as_str)))
            .collect(),
        _ => String::new(),
    }
}

/// The protocol's role of a message type.
fn role_of(kind: &str) -> &'static str {
    match kind {
        "human" | "HumanMessageChunk" => "human",
        "system" | "SystemMessageChunk" => "system",
        "tool" | "ToolMessageChunk" => "tool",
        _ => "ai",
    }
}

impl Messages {
    /// Ends the namespace's open message: the events that close it (none when none is open).
    pub(crate) fn finish(&mut self, namespace: &[String]) -> Vec<Value> {
        let Some(open) = self.open.remove(namespace) else { return Vec::new() };
        let mut out = Vec::new();
        if open.block {
            out.push(json!({"event": "content-block-finish", "index": 0, "content": {"type": "text", "text": open.text}}));
        }
        out.push(json!({"event": "message-finish"}));
        out
    }

    /// Ends every open message (the run ended): each namespace with its closing events.
    pub(crate) fn finish_all(&mut self) -> Vec<(Vec<String>, Value)> {
        let mut namespaces: Vec<Vec<String>> = self.open.keys().cloned().collect();
        namespaces.sort();
        let mut out = Vec::new();
        for namespace in namespaces {
            for data in self.finish(&namespace) {
                out.push((namespace.clone(), data));
            }
        }
        out
    }

    /// The events of one `messages-tuple` event's data in `namespace`.
    pub(crate) fn chunk(&mut self, namespace: &[String], data: &Value) -> Vec<Value> {
        let Some(message) = data.get(0).or(Some(data)).filter(|m| m.is_object()) else { return Vec::new() };
        let kind = message.get("type").and_then(Value::as_str).unwrap_or("ai");
        let id = message.get("id").and_then(Value::as_str).map(str::to_owned);
        if !kind.ends_with("Chunk") {
            // A whole message (a node's output, not streamed) is not sent, as langgraph-api drops it; it
            // ends its chunks' message when it is that one.
            let same = self.open.get(namespace).is_some_and(|open| open.id == id);
            return if same { self.finish(namespace) } else { Vec::new() };
        }
        let mut out = Vec::new();
        if self.open.get(namespace).is_some_and(|open| open.id != id) {
            out.extend(self.finish(namespace));
        }
        let open = self.open.entry(namespace.to_vec()).or_insert_with(|| {
            out.push(json!({"event": "message-start", "role": role_of(kind), "id": id}));
            Open { id: id.clone(), text: String::new(), block: false }
        });
        let text = text_of(message.get("content"));
        if !text.is_empty() {
            if !open.block {
                open.block = true;
                out.push(json!({"event": "content-block-start", "index": 0, "content": {"type": "text", "text": ""}}));
            }
            open.text.push_str(&text);
            out.push(json!({"event": "content-block-delta", "index": 0, "delta": {"type": "text-delta", "text": text}}));
        }
        let last = message.get("chunk_position").and_then(Value::as_str) == Some("last")
            || message.pointer("/response_metadata/finish_reason").is_some_and(|r| !r.is_null());
        if last {
            out.extend(self.finish(namespace));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_become_content_block_events() {
        let mut m = Messages::default();
        let ns: Vec<String> = Vec::new();
        let chunk = |text: &str| json!([{"type": "AIMessageChunk", "content": text, "id": "m1"}, {}]);
        let mut events = m.chunk(&ns, &chunk("Hello"));
        events.extend(m.chunk(&ns, &chunk(" there")));
        events.extend(m.finish(&ns));
        let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
        assert_eq!(
            names,
            [
                "message-start",
                "content-block-start",
                "content-block-delta",
                "content-block-delta",
                "content-block-finish",
                "message-finish"
            ]
        );
        assert_eq!(events[0], json!({"event": "message-start", "role": "ai", "id": "m1"}));
        assert_eq!(events[4]["content"]["text"], "Hello there");
        assert!(m.finish(&ns).is_empty());
    }

    #[test]
    fn a_whole_message_is_not_sent_but_ends_its_chunks() {
        let mut m = Messages::default();
        assert!(m.chunk(&[], &json!([{"type": "tool", "content": "42", "id": "t"}, {}])).is_empty());
        let ns: Vec<String> = Vec::new();
        m.chunk(&ns, &json!([{"type": "AIMessageChunk", "content": "a", "id": "m"}, {}]));
        let end = m.chunk(&ns, &json!([{"type": "ai", "content": "a", "id": "m"}, {}]));
        let names: Vec<&str> = end.iter().filter_map(|e| e["event"].as_str()).collect();
        assert_eq!(names, ["content-block-finish", "message-finish"]);
        assert!(m.finish_all().is_empty());
    }
}
