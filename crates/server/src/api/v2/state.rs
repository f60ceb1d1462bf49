//! State payloads (`values`, `updates`) as the protocol carries them: `__interrupt__` removed and each
//! message in its protocol shape (LangGraph's type names, content as content blocks, tool calls typed), as
//! langgraph-api's `normalize_event_streaming_state_payload` shapes them (audio from `additional_kwargs`
//! is not carried).

use serde_json::{Map, Value, json};

/// The message types a state message may have.
const MESSAGE_TYPES: [&str; 8] = ["human", "user", "ai", "assistant", "system", "tool", "function", "remove"];

/// The content block types the protocol knows.
const BLOCK_TYPES: [&str; 13] = [
    "text",
    "reasoning",
    "tool_call",
    "tool_call_chunk",
    "invalid_tool_call",
    "server_tool_call",
    "server_tool_call_chunk",
    "server_tool_call_result",
    "image",
    "audio",
    "video",
    "file",
    "non_standard",
];

fn message_type(value: &Value) -> Option<&str> {
    match value.as_str()? {
        "assistant" => Some("ai"),
        "user" => Some("human"),
        other => Some(other),
    }
}

fn is_message(value: &Value) -> bool {
    value.get("type").and_then(message_type).is_some_and(|t| MESSAGE_TYPES.contains(&t))
}

/// One content block in the protocol's shape; `None` to leave it out.
fn block(value: &Value) -> Option<Value> {
    let kind = value.get("type")?.as_str()?;
    if BLOCK_TYPES.contains(&kind) {
        return Some(value.clone());
    }
    if kind == "image_url" {
        let image = value.get("image_url")?;
        let url = image.as_str().or_else(|| image.get("url").and_then(Value::as_str))?;
        return Some(json!({"type": "image", "url": url}));
    }
    if kind == "input_audio" {
        let audio = value.get("input_audio")?.as_object()?;
        let mut out = Map::from_iter([("type".to_owned(), json!("audio"))]);
        for key in ["data", "mime_type"] {
            if let Some(v) = audio.get(key).filter(|v| v.is_string()) {
                out.insert(key.to_owned(), v.clone());
            }
        }
        return Some(Value::Object(out));
    }
    Some(json!({"type": "non_standard", "value": value}))
}

/// Message content as content blocks (a string stays a string).
fn content(value: &Value) -> Value {
    let Some(list) = value.as_array() else { return value.clone() };
    let blocks: Vec<Value> = list
        .iter()
        .filter_map(|entry| match entry.as_str() {
            Some(text) => Some(json!({"type": "text", "text": text})),
            None => block(entry),
        })
        .collect();
    if blocks.is_empty() { value.clone() } else { Value::Array(blocks) }
}

/// A tool call's arguments, and whether they parse.
fn tool_args(raw: &Map<String, Value>) -> (bool, Value) {
    let function = raw.get("function").and_then(Value::as_object);
    let args = raw.get("args").or_else(|| function.and_then(|f| f.get("arguments")));
    match args {
        None | Some(Value::Null) => (true, json!({})),
        Some(Value::String(s)) if s.is_empty() => (true, json!({})),
        Some(Value::String(s)) => serde_json::from_str(s).map_or_else(|_| (false, json!(s)), |v| (true, v)),
        Some(other) => (true, other.clone()),
    }
}

/// An AI message's tool calls: the valid ones and the invalid ones.
fn tool_calls(list: &[Value]) -> (Vec<Value>, Vec<Value>) {
    let (mut valid, mut invalid) = (Vec::new(), Vec::new());
    for raw in list.iter().filter_map(Value::as_object) {
        let id = raw.get("id").filter(|v| v.is_string());
        let function = raw.get("function").and_then(Value::as_object);
        let name = raw
            .get("name")
            .filter(|v| v.is_string())
            .or_else(|| function?.get("name").filter(|v| v.is_string()));
        let (ok, args) = tool_args(raw);
        let mut entry = Map::new();
        match (name, ok) {
            (Some(name), true) => {
                entry.insert("type".into(), json!("tool_call"));
                entry.insert("name".into(), name.clone());
                entry.insert("args".into(), args);
            }
            (name, _) => {
                entry.insert("type".into(), json!("invalid_tool_call"));
                if let Some(name) = name {
                    entry.insert("name".into(), name.clone());
                }
                let error = if name.is_none() { "Incomplete tool call." } else { "Malformed args." };
                entry.insert("error".into(), json!(error));
                if args.is_string() {
                    entry.insert("args".into(), args);
                }
            }
        }
        if let Some(id) = id {
            entry.insert("id".into(), id.clone());
        }
        if entry.get("type") == Some(&json!("tool_call")) {
            valid.push(Value::Object(entry))
        } else {
            invalid.push(Value::Object(entry))
        }
    }
    (valid, invalid)
}

/// One state message in the protocol's shape.
fn message(value: &Map<String, Value>) -> Value {
    let Some(kind) = value.get("type").and_then(message_type) else { return Value::Object(value.clone()) };
    let mut out = Map::new();
    out.insert("type".into(), json!(kind));
    out.insert("content".into(), content(value.get("content").unwrap_or(&json!(""))));
    for key in ["id", "name"] {
        if let Some(v) = value.get(key).filter(|v| v.is_string()) {
            out.insert(key.into(), v.clone());
        }
    }
    if matches!(kind, "ai" | "human") {
        if let Some(v) = value.get("example").filter(|v| v.is_boolean()) {
            out.insert("example".into(), v.clone());
        }
    }
    if let Some(meta) =
        value.get("response_metadata").filter(|m| m.as_object().is_some_and(|m| !m.is_empty()))
    {
        out.insert("response_metadata".into(), meta.clone());
    }
    if kind == "tool" {
        if let Some(v) = value.get("tool_call_id").filter(|v| v.is_string()) {
            out.insert("tool_call_id".into(), v.clone());
        }
        if let Some(v) =
            value.get("status").filter(|v| v.as_str().is_some_and(|s| s == "success" || s == "error"))
        {
            out.insert("status".into(), v.clone());
        }
        if let Some(v) = value.get("artifact") {
            out.insert("artifact".into(), v.clone());
        }
    }
    if kind == "ai" {
        let raw = value
            .get("tool_calls")
            .and_then(Value::as_array)
            .filter(|l| !l.is_empty())
            .or_else(|| value.get("additional_kwargs")?.get("tool_calls")?.as_array());
        let (valid, invalid) = raw.map(|l| tool_calls(l)).unwrap_or_default();
        if !valid.is_empty() {
            out.insert("tool_calls".into(), Value::Array(valid));
        }
        if !invalid.is_empty() {
            out.insert("invalid_tool_calls".into(), Value::Array(invalid));
        }
    }
    Value::Object(out)
}

/// A state payload in the protocol's shape.
pub(crate) fn normalize(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| match item.as_object() {
                    Some(m) if is_message(item) => message(m),
                    _ => normalize(item),
                })
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| key.as_str() != "__interrupt__")
                .map(|(key, entry)| {
                    let entry = match (key.as_str(), entry.as_array()) {
                        ("messages", Some(list)) => Value::Array(
                            list.iter()
                                .map(|m| match m.as_object() {
                                    Some(o) if is_message(m) => message(o),
                                    _ => m.clone(),
                                })
                                .collect(),
                        ),
                        _ => normalize(entry),
                    };
                    (key.clone(), entry)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_take_the_protocol_shape() {
        let state = json!({
            "__interrupt__": [],
            "messages": [
                {"type": "human", "content": "hi", "id": "1", "additional_kwargs": {}, "response_metadata": {}},
                {"type": "ai", "content": ["a", {"type": "image_url", "image_url": "u"}], "id": "2",
                 "tool_calls": [{"name": "t", "args": {"x": 1}, "id": "c"}, {"id": "d", "args": "{"}]},
            ],
            "n": 1,
        });
        assert_eq!(
            normalize(&state),
            json!({
                "messages": [
                    {"type": "human", "content": "hi", "id": "1"},
                    {"type": "ai", "content": [{"type": "text", "text": "a"}, {"type": "image", "url": "u"}], "id": "2",
                     "tool_calls": [{"type": "tool_call", "name": "t", "args": {"x": 1}, "id": "c"}],
                     "invalid_tool_calls": [{"type": "invalid_tool_call", "error": "Incomplete tool call.", "args": "{", "id": "d"}]},
                ],
                "n": 1,
            })
        );
    }
}
