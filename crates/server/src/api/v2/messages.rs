//! The `messages` channel: a run's message chunks (`messages-tuple` events, `[chunk, metadata]`) as the
//! protocol's content-block events: `message-start`, `content-block-start`, one `content-block-delta` per
//! chunk of text, `content-block-finish` with the whole text, `message-finish`. A message ends when its
//! last chunk comes (`chunk_position: "last"` or a `finish_reason`), when another message starts in its
//! namespace, when it comes whole, or when anything else happens there (a node's update, the state, the
//! run's end). Whole messages (a node's output that was not streamed) are not sent, as langgraph-api
//! drops them. As langchain-core's compat bridge does, `message-start` carries the model (`metadata`'s
//! `provider` and `model`, from the first chunk's `response_metadata`) and `message-finish` the token
//! usage summed over the chunks (`usage`) and their `response_metadata` merged (`metadata`: the
//! `finish_reason` and the like; protocol 0.0.9 dropped the top-level `reason`).

use std::collections::HashMap;

use serde_json::{Map, Value, json};

/// A message being streamed in one namespace.
#[derive(Debug)]
struct Open {
    id: Option<String>,
    text: String,
    /// Whether its text block was started.
    block: bool,
    /// The chunks' token usage, summed (`None` until a chunk reports some).
    usage: Option<Map<String, Value>>,
    /// The chunks' `response_metadata`, merged (a later chunk's key wins).
    metadata: Map<String, Value>,
}

/// Adds a chunk's `usage_metadata` to the usage so far: the counts summed, the detail maps merged key by
/// key (langchain-core's `_accumulate_usage`).
fn add_usage(usage: &mut Map<String, Value>, chunk: &Map<String, Value>) {
    for key in ["input_tokens", "output_tokens", "total_tokens"] {
        if let Some(n) = chunk.get(key).and_then(Value::as_i64) {
            let sum = usage.get(key).and_then(Value::as_i64).unwrap_or(0).saturating_add(n);
            usage.insert(key.to_owned(), json!(sum));
        }
    }
    for key in ["input_token_details", "output_token_details"] {
        let Some(details) = chunk.get(key).and_then(Value::as_object).filter(|d| !d.is_empty()) else {
            continue;
        };
        let merged = usage.entry(key.to_owned()).or_insert_with(|| json!({}));
        if let Some(merged) = merged.as_object_mut() {
            merged.extend(details.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
}

/// `message-start`'s `metadata`: the provider and model a chunk's `response_metadata` names.
fn start_metadata(response: Option<&Map<String, Value>>) -> Map<String, Value> {
    let mut metadata = Map::new();
    for (from, to) in [("model_provider", "provider"), ("model_name", "model")] {
        if let Some(v) = response.and_then(|r| r.get(from)) {
            metadata.insert(to.to_owned(), v.clone());
        }
    }
    metadata
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
        let mut finish = Map::from_iter([("event".to_owned(), json!("message-finish"))]);
        if let Some(usage) = open.usage.filter(|u| !u.is_empty()) {
            finish.insert("usage".to_owned(), Value::Object(usage));
        }
        if !open.metadata.is_empty() {
            finish.insert("metadata".to_owned(), Value::Object(open.metadata));
        }
        out.push(Value::Object(finish));
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
        let response = message.get("response_metadata").and_then(Value::as_object);
        let open = self.open.entry(namespace.to_vec()).or_insert_with(|| {
            let mut start = json!({"event": "message-start", "role": role_of(kind), "id": id});
            let metadata = start_metadata(response);
            if let (false, Some(s)) = (metadata.is_empty(), start.as_object_mut()) {
                s.insert("metadata".to_owned(), Value::Object(metadata));
            }
            out.push(start);
            Open { id: id.clone(), text: String::new(), block: false, usage: None, metadata: Map::new() }
        });
        if let Some(response) = response {
            open.metadata.extend(response.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        if let Some(usage) = message.get("usage_metadata").and_then(Value::as_object) {
            add_usage(open.usage.get_or_insert_with(Map::new), usage);
        }
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
        assert_eq!(events[5], json!({"event": "message-finish"}), "no usage nor metadata reported");
        assert!(m.finish(&ns).is_empty());
    }

    #[test]
    fn the_finish_carries_summed_usage_and_merged_metadata() {
        let mut m = Messages::default();
        let usage = json!({"input_tokens": 3, "output_tokens": 1, "total_tokens": 4,
                           "output_token_details": {"reasoning": 1}});
        let first = json!([{"type": "AIMessageChunk", "content": "Hi", "id": "m", "usage_metadata": usage,
                            "response_metadata": {"model_provider": "openai", "model_name": "gpt"}}, {}]);
        let last = json!([{"type": "AIMessageChunk", "content": "!", "id": "m", "chunk_position": "last",
                           "usage_metadata": {"input_tokens": 0, "output_tokens": 2, "total_tokens": 2},
                           "response_metadata": {"finish_reason": "stop"}}, {}]);
        let mut events = m.chunk(&[], &first);
        events.extend(m.chunk(&[], &last));
        assert_eq!(
            events[0],
            json!({"event": "message-start", "role": "ai", "id": "m", "metadata": {"provider": "openai", "model": "gpt"}})
        );
        assert_eq!(
            events.last().unwrap(),
            &json!({"event": "message-finish",
                    "usage": {"input_tokens": 3, "output_tokens": 3, "total_tokens": 6, "output_token_details": {"reasoning": 1}},
                    "metadata": {"model_provider": "openai", "model_name": "gpt", "finish_reason": "stop"}})
        );
        // A usage of nulls (a chunk's `usage_metadata: null`) reports nothing.
        let plain = json!([{"type": "AIMessageChunk", "content": "x", "id": "n", "usage_metadata": null,
                            "response_metadata": {}, "chunk_position": "last"}, {}]);
        assert_eq!(m.chunk(&[], &plain).last().unwrap(), &json!({"event": "message-finish"}));
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
