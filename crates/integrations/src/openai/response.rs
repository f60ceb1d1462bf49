//! Reading chat completion answers: a whole answer into an [`AiMessage`], and streamed chunks into AI
//! message chunks that merge into the same message.

use serde_json::{Map, Value, json};
use weft_runnable_core::{AiMessage, Content, InvalidToolCall, ToolCall, ToolCallChunk, UsageMetadata};

use super::OpenAIError;
use super::transport::parse_error_body;

/// The message of a whole (not streamed) chat completion.
pub(crate) fn parse_completion(body: &Value) -> Result<AiMessage, OpenAIError> {
    if let Some(error) = error_object(body) {
        return Err(error);
    }
    let choice =
        body.get("choices").and_then(Value::as_array).and_then(|choices| choices.first()).ok_or_else(
            || OpenAIError::InvalidResponse(format!("the answer has no choices: {}", short(body))),
        )?;
    let message = choice.get("message").and_then(Value::as_object).ok_or_else(|| {
        OpenAIError::InvalidResponse(format!("the choice has no message: {}", short(choice)))
    })?;

    let mut reply = AiMessage { content: content_of(message.get("content"))?, ..AiMessage::default() };
    reply.id = body.get("id").and_then(Value::as_str).filter(|id| !id.is_empty()).map(str::to_owned);
    for call in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        match parse_tool_call(call) {
            Ok(call) => reply.tool_calls.push(call),
            Err(invalid) => reply.invalid_tool_calls.push(invalid),
        }
    }
    copy_extras(message, &mut reply.additional_kwargs);
    reply.usage_metadata = body.get("usage").and_then(usage_of);

    let metadata = &mut reply.response_metadata;
    if let Some(usage) = body.get("usage").filter(|u| u.is_object()) {
        metadata.insert("token_usage".to_owned(), usage.clone());
    }
    insert_common_metadata(metadata, body);
    if let Some(id) = body.get("id").filter(|v| v.is_string()) {
        metadata.insert("id".to_owned(), id.clone());
    }
    for key in ["service_tier"] {
        if let Some(value) = body.get(key).filter(|v| !v.is_null()) {
            metadata.insert(key.to_owned(), value.clone());
        }
    }
    for key in ["finish_reason", "logprobs"] {
        if let Some(value) = choice.get(key).filter(|v| !v.is_null()) {
            metadata.insert(key.to_owned(), value.clone());
        }
    }
    Ok(reply)
}

/// `model_name`, `system_fingerprint` and `model_provider`.
fn insert_common_metadata(metadata: &mut Map<String, Value>, body: &Value) {
    if let Some(model) = body.get("model").filter(|v| v.is_string()) {
        metadata.insert("model_name".to_owned(), model.clone());
    }
    if let Some(fingerprint) = body.get("system_fingerprint").filter(|v| v.is_string()) {
        metadata.insert("system_fingerprint".to_owned(), fingerprint.clone());
    }
    metadata.insert("model_provider".to_owned(), json!("openai"));
}

/// Text content: a string, `null` (a reply of only tool calls), or a list of text parts some servers send.
fn content_of(content: Option<&Value>) -> Result<Content, OpenAIError> {
    match content {
        None | Some(Value::Null) => Ok(Content::default()),
        Some(Value::String(text)) => Ok(Content::Text(text.clone())),
        Some(Value::Array(parts)) => Ok(Content::Blocks(parts.clone())),
        Some(other) => {
            Err(OpenAIError::InvalidResponse(format!("message content is not text: {}", short(other))))
        }
    }
}

/// `reasoning_content` (reasoning models behind llama.cpp, vLLM, DeepSeek), `reasoning` and `refusal`, kept
/// in `additional_kwargs`.
fn copy_extras(message: &Map<String, Value>, into: &mut Map<String, Value>) {
    for key in ["reasoning_content", "reasoning", "refusal"] {
        if let Some(value) = message.get(key).filter(|v| !v.is_null()) {
            into.insert(key.to_owned(), value.clone());
        }
    }
}

/// A whole tool call; arguments that are not a JSON object make it an invalid tool call.
fn parse_tool_call(call: &Value) -> Result<ToolCall, InvalidToolCall> {
    let id = call.get("id").and_then(Value::as_str).filter(|id| !id.is_empty()).map(str::to_owned);
    let function = call.get("function");
    let name = function.and_then(|f| f.get("name")).and_then(Value::as_str).map(str::to_owned);
    let raw = function.and_then(|f| f.get("arguments"));
    let invalid = |args: Option<String>, error: String| InvalidToolCall {
        name: name.clone(),
        args,
        id: id.clone(),
        error: Some(error),
    };
    let Some(tool) = name.clone().filter(|n| !n.is_empty()) else {
        return Err(invalid(raw.map(Value::to_string), "the tool call has no function name".to_owned()));
    };
    let args = match raw {
        None | Some(Value::Null) => Value::Object(Map::new()),
        // Some servers send the arguments as an object instead of a JSON string.
        Some(object @ Value::Object(_)) => object.clone(),
        Some(Value::String(text)) if text.trim().is_empty() => Value::Object(Map::new()),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(object @ Value::Object(_)) => object,
            Ok(other) => {
                return Err(invalid(
                    Some(text.clone()),
                    format!("tool call arguments must be a json object, got {other}"),
                ));
            }
            Err(e) => {
                return Err(invalid(
                    Some(text.clone()),
                    format!("tool call arguments are not valid json: {e}"),
                ));
            }
        },
        Some(other) => {
            return Err(invalid(
                Some(other.to_string()),
                format!("tool call arguments must be a json object, got {other}"),
            ));
        }
    };
    Ok(ToolCall { name: tool, args, id })
}

/// Token counts: prompt and completion tokens, with cached, audio and reasoning tokens when reported.
fn usage_of(usage: &Value) -> Option<UsageMetadata> {
    let usage = usage.as_object()?;
    let count = |map: &Map<String, Value>, key: &str| map.get(key).and_then(Value::as_u64);
    let input = count(usage, "prompt_tokens")?;
    let output = count(usage, "completion_tokens").unwrap_or(0);
    let mut metadata = UsageMetadata::new(input, output);
    if let Some(total) = count(usage, "total_tokens") {
        metadata.total_tokens = total;
    }
    let details = |key: &str, names: &[(&str, &str)]| -> Option<Map<String, Value>> {
        let source = usage.get(key)?.as_object()?;
        let map: Map<String, Value> = names
            .iter()
            .filter_map(|(from, to)| count(source, from).map(|n| ((*to).to_owned(), json!(n))))
            .collect();
        (!map.is_empty()).then_some(map)
    };
    metadata.input_token_details =
        details("prompt_tokens_details", &[("cached_tokens", "cache_read"), ("audio_tokens", "audio")]);
    metadata.output_token_details =
        details("completion_tokens_details", &[("reasoning_tokens", "reasoning"), ("audio_tokens", "audio")]);
    Some(metadata)
}

/// An error object in a 200 answer or in the middle of a stream.
fn error_object(body: &Value) -> Option<OpenAIError> {
    let error = body.get("error").filter(|e| !e.is_null())?;
    if body.get("choices").is_some() {
        return None;
    }
    Some(OpenAIError::Api(Box::new(parse_error_body(None, &json!({"error": error}).to_string()))))
}

fn short(value: &Value) -> String {
    super::error::excerpt(&value.to_string())
}

/// Turns the chunks of a chat completion stream into AI message chunks, and checks that the stream was
/// whole: at least one chunk, and a finish reason before the end.
#[derive(Debug, Default)]
pub(crate) struct StreamState {
    chunks: usize,
    finished: bool,
    id: Option<String>,
}

impl StreamState {
    /// The AI message chunk of one streamed chunk.
    pub(crate) fn chunk(&mut self, body: &Value) -> Result<AiMessage, OpenAIError> {
        if let Some(error) = error_object(body) {
            return Err(error);
        }
        if !body.is_object() {
            return Err(OpenAIError::InvalidResponse(format!(
                "a stream chunk is not an object: {}",
                short(body)
            )));
        }
        self.chunks += 1;
        let id = body.get("id").and_then(Value::as_str).filter(|id| !id.is_empty()).map(str::to_owned);
        if self.id.is_none() {
            self.id.clone_from(&id);
        }
        let mut chunk = AiMessage { id, is_chunk: true, ..AiMessage::default() };
        // Usage comes in a chunk of its own (`choices: []`), or with the last choice on some servers.
        chunk.usage_metadata = body.get("usage").and_then(usage_of);
        let choice = body.get("choices").and_then(Value::as_array).and_then(|c| c.first());
        let Some(choice) = choice else { return Ok(chunk) };
        if let Some(delta) = choice.get("delta").and_then(Value::as_object) {
            chunk.content = match content_of(delta.get("content"))? {
                Content::Blocks(parts) => Content::Text(Content::Blocks(parts).text()),
                text => text,
            };
            copy_extras(delta, &mut chunk.additional_kwargs);
            let fragments = delta.get("tool_calls").and_then(Value::as_array).map(|calls| {
                calls.iter().enumerate().map(|(position, call)| tool_call_chunk(call, position)).collect()
            });
            if let Some(fragments) = fragments {
                chunk = chunk.with_tool_call_chunks(fragments);
            }
        }
        let finish = choice.get("finish_reason").filter(|v| !v.is_null());
        if let (Some(finish), false) = (finish, self.finished) {
            // Metadata goes on one chunk only: merged chunks concatenate strings.
            self.finished = true;
            let metadata = &mut chunk.response_metadata;
            metadata.insert("finish_reason".to_owned(), finish.clone());
            insert_common_metadata(metadata, body);
        }
        Ok(chunk)
    }

    /// The closing chunk (`chunk_position: "last"`), or the error of an empty or cut stream.
    pub(crate) fn finish(self) -> Result<AiMessage, OpenAIError> {
        if self.chunks == 0 {
            return Err(OpenAIError::IncompleteStream(
                "the server closed the stream without sending a chunk".to_owned(),
            ));
        }
        if !self.finished {
            return Err(OpenAIError::IncompleteStream(format!(
                "the stream ended after {} chunks without a finish reason",
                self.chunks
            )));
        }
        Ok(AiMessage {
            id: self.id,
            chunk_position: Some("last".to_owned()),
            is_chunk: true,
            ..AiMessage::default()
        })
    }
}

/// A streamed tool-call fragment. The index is the server's (the fragment's position in the delta when
/// it gives none); id and name are kept as sent, since chunk merging sets them once per index and only
/// appends the argument pieces (servers that repeat them in every fragment are common).
fn tool_call_chunk(call: &Value, position: usize) -> ToolCallChunk {
    let text = |value: Option<&Value>| match value {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Null) | None => None,
        Some(other) => Some(other.to_string()),
    };
    let function = call.get("function");
    let index = call
        .get("index")
        .and_then(Value::as_u64)
        .or(u64::try_from(position).ok())
        .and_then(|i| u32::try_from(i).ok());
    ToolCallChunk {
        name: text(function.and_then(|f| f.get("name"))).filter(|n| !n.is_empty()),
        args: text(function.and_then(|f| f.get("arguments"))),
        id: text(call.get("id")).filter(|id| !id.is_empty()),
        index,
    }
}

#[cfg(test)]
mod tests {
    use weft_runnable_core::Merge as _;

    use super::*;

    #[test]
    fn a_completion_with_text_usage_and_metadata() {
        let body = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-x", "system_fingerprint": "fp_1",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi", "reasoning_content": "think", "refusal": null}, "finish_reason": "stop", "logprobs": null}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12,
                      "prompt_tokens_details": {"cached_tokens": 4}, "completion_tokens_details": {"reasoning_tokens": 1}}
        });
        let reply = parse_completion(&body).unwrap();
        assert_eq!(reply.text(), "Hi");
        assert_eq!(reply.id.as_deref(), Some("chatcmpl-1"));
        assert_eq!(reply.additional_kwargs["reasoning_content"], json!("think"));
        assert!(!reply.additional_kwargs.contains_key("refusal"));
        let usage = reply.usage_metadata.unwrap();
        assert_eq!((usage.input_tokens, usage.output_tokens, usage.total_tokens), (10, 2, 12));
        assert_eq!(usage.input_token_details.unwrap()["cache_read"], json!(4));
        assert_eq!(usage.output_token_details.unwrap()["reasoning"], json!(1));
        let metadata = &reply.response_metadata;
        assert_eq!(metadata["model_name"], json!("gpt-x"));
        assert_eq!(metadata["finish_reason"], json!("stop"));
        assert_eq!(metadata["system_fingerprint"], json!("fp_1"));
        assert_eq!(metadata["token_usage"]["total_tokens"], json!(12));
    }

    #[test]
    fn bad_tool_arguments_become_invalid_tool_calls() {
        let body = json!({"id": "c", "choices": [{"message": {"content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "ok", "arguments": "{\"x\": 1}"}},
            {"id": "b", "type": "function", "function": {"name": "broken", "arguments": "{\"x\": "}},
            {"id": "c", "type": "function", "function": {"name": "list", "arguments": "[1]"}},
            {"id": "d", "type": "function", "function": {"name": "obj", "arguments": {"y": 2}}},
            {"id": "e", "type": "function", "function": {"name": "empty", "arguments": ""}},
            {"id": "f", "type": "function", "function": {"arguments": "{}"}}
        ]}, "finish_reason": "tool_calls"}]});
        let reply = parse_completion(&body).unwrap();
        assert_eq!(reply.text(), "");
        let valid: Vec<(&str, &Value)> =
            reply.tool_calls.iter().map(|c| (c.name.as_str(), &c.args)).collect();
        assert_eq!(valid, vec![("ok", &json!({"x": 1})), ("obj", &json!({"y": 2})), ("empty", &json!({}))]);
        let invalid: Vec<Option<&str>> = reply.invalid_tool_calls.iter().map(|c| c.id.as_deref()).collect();
        assert_eq!(invalid, vec![Some("b"), Some("c"), Some("f")]);
        assert_eq!(reply.invalid_tool_calls[0].args.as_deref(), Some("{\"x\": "));
        assert!(reply.invalid_tool_calls[0].error.as_deref().unwrap().contains("not valid json"));
    }

    #[test]
    fn answers_without_choices_or_with_an_error_object_are_errors() {
        assert!(matches!(parse_completion(&json!({"choices": []})), Err(OpenAIError::InvalidResponse(_))));
        let err =
            parse_completion(&json!({"error": {"message": "model overloaded", "type": "server_error"}}))
                .unwrap_err();
        assert_eq!(err.api_error().unwrap().message, "model overloaded");
        assert!(err.is_server_error());
        assert!(matches!(
            parse_completion(&json!({"choices": [{"message": {"content": 3}}]})),
            Err(OpenAIError::InvalidResponse(_))
        ));
    }

    #[test]
    fn streamed_chunks_merge_into_the_whole_message() {
        let chunks = [
            json!({"id": "s", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]}),
            json!({"id": "s", "model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{\"a\""}}]}, "finish_reason": null}]}),
            json!({"id": "s", "model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "add", "arguments": ": 2}"}}]}, "finish_reason": null}]}),
            json!({"id": "s", "model": "m", "system_fingerprint": "fp", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
            json!({"id": "s", "model": "m", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}),
        ];
        let mut state = StreamState::default();
        let mut merged = AiMessage::default();
        for chunk in &chunks {
            merged = merged.merge(state.chunk(chunk).unwrap()).unwrap();
        }
        merged = merged.merge(state.finish().unwrap()).unwrap().finish();
        assert_eq!(
            merged.tool_calls,
            vec![ToolCall { name: "add".to_owned(), args: json!({"a": 2}), id: Some("call_1".to_owned()) }]
        );
        assert_eq!(merged.usage_metadata, Some(UsageMetadata::new(5, 3)));
        assert_eq!(merged.response_metadata["model_name"], json!("m"));
        assert_eq!(merged.response_metadata["finish_reason"], json!("tool_calls"));
        assert_eq!(merged.id.as_deref(), Some("s"));
    }

    #[test]
    fn a_stream_without_chunks_or_finish_reason_is_an_error() {
        assert!(StreamState::default().finish().unwrap_err().is_incomplete_stream());
        let mut state = StreamState::default();
        state.chunk(&json!({"id": "s", "choices": [{"index": 0, "delta": {"content": "Hel"}}]})).unwrap();
        let err = state.finish().unwrap_err();
        assert!(err.is_incomplete_stream(), "{err}");
        assert!(err.to_string().contains("without a finish reason"), "{err}");
    }
}
