//! Merging streamed AI message chunks into one message, like LangChain's `AIMessageChunk.__add__`.

use serde_json::{Map, Value};

use super::json_merge::{merge_lists, merge_maps};
use super::{AiMessage, Content, InvalidToolCall, ToolCall, ToolCallChunk, UsageMetadata};
use crate::error::Result;
use crate::partial_json::parse_partial_json;
use crate::runnable::Merge;

impl Merge for AiMessage {
    /// Content concatenates (block lists merge by `index`), `additional_kwargs` and `response_metadata`
    /// merge deeply, tool-call chunks merge by `index` and `tool_calls` are parsed again from the merged
    /// argument strings, usage adds up, a provider's id wins over a generated `run-` id, and the result is a
    /// chunk when either side is.
    fn merge(self, next: Self) -> Result<Self> {
        let left_chunks = self.chunks_or_calls();
        let right_chunks = next.chunks_or_calls();
        let tool_call_chunks = merge_tool_call_chunks(left_chunks, right_chunks);
        let (tool_calls, invalid_tool_calls) = tool_calls_from_chunks(&tool_call_chunks);
        let chunk_position = if self.chunk_position.as_deref() == Some("last") {
            self.chunk_position
        } else {
            next.chunk_position.or(self.chunk_position)
        };
        Ok(AiMessage {
            content: merge_content(self.content, next.content)?,
            id: pick_id(self.id, next.id),
            name: self.name.or(next.name),
            tool_calls,
            invalid_tool_calls,
            tool_call_chunks,
            usage_metadata: add_usage(self.usage_metadata, next.usage_metadata),
            additional_kwargs: merge_maps(
                self.additional_kwargs,
                next.additional_kwargs,
                "additional_kwargs",
            )?,
            response_metadata: merge_maps(
                self.response_metadata,
                next.response_metadata,
                "response_metadata",
            )?,
            chunk_position,
            is_chunk: self.is_chunk || next.is_chunk,
        })
    }
}

impl AiMessage {
    /// Turns a merged chunk into a finished message: the chunk mark, the tool-call fragments and the chunk
    /// position go, the parsed `tool_calls` and `invalid_tool_calls` stay (LangChain's
    /// `message_chunk_to_message`).
    pub fn finish(mut self) -> Self {
        self.tool_call_chunks.clear();
        self.chunk_position = None;
        self.is_chunk = false;
        self
    }

    /// Sets the streamed tool-call fragments of a chunk and parses them into `tool_calls` and
    /// `invalid_tool_calls`, as LangChain does when an `AIMessageChunk` is built.
    pub fn with_tool_call_chunks(mut self, chunks: Vec<ToolCallChunk>) -> Self {
        let (valid, invalid) = tool_calls_from_chunks(&chunks);
        self.tool_call_chunks = chunks;
        self.tool_calls = valid;
        self.invalid_tool_calls = invalid;
        self
    }

    /// The tool-call fragments of this chunk; a whole message (no fragments) contributes its tool calls
    /// and invalid tool calls as fragments without an index, so they are kept as they are.
    fn chunks_or_calls(&self) -> Vec<ToolCallChunk> {
        if !self.tool_call_chunks.is_empty() {
            return self.tool_call_chunks.clone();
        }
        let valid = self.tool_calls.iter().map(|call| ToolCallChunk {
            name: Some(call.name.clone()),
            args: Some(if call.args.is_null() { String::new() } else { call.args.to_string() }),
            id: call.id.clone(),
            index: None,
        });
        let invalid = self.invalid_tool_calls.iter().map(|call| ToolCallChunk {
            name: call.name.clone(),
            args: call.args.clone(),
            id: call.id.clone(),
            index: None,
        });
        valid.chain(invalid).collect()
    }
}

/// Merges content: strings concatenate, block lists merge by `index`, text joins a list as a string item.
fn merge_content(left: Content, right: Content) -> Result<Content> {
    Ok(match (left, right) {
        (Content::Text(mut a), Content::Text(b)) => {
            a.push_str(&b);
            Content::Text(a)
        }
        (Content::Text(a), Content::Blocks(b)) => {
            let mut blocks = Vec::with_capacity(b.len() + 1);
            if !a.is_empty() {
                blocks.push(Value::String(a));
            }
            blocks.extend(b);
            Content::Blocks(blocks)
        }
        (Content::Blocks(a), Content::Blocks(b)) => Content::Blocks(merge_lists(a, b, "content")?),
        (Content::Blocks(a), Content::Text(b)) if b.is_empty() => Content::Blocks(a),
        (Content::Blocks(a), Content::Text(b)) if a.is_empty() => Content::Text(b),
        (Content::Blocks(mut a), Content::Text(b)) => {
            match a.last_mut() {
                Some(Value::String(last)) => last.push_str(&b),
                _ => a.push(Value::String(b)),
            }
            Content::Blocks(a)
        }
    })
}

/// Merges tool-call fragments: a fragment with an index joins the earlier fragment with the same index
/// (unless their ids differ), concatenating the argument strings and keeping the first name and id.
fn merge_tool_call_chunks(mut left: Vec<ToolCallChunk>, right: Vec<ToolCallChunk>) -> Vec<ToolCallChunk> {
    for chunk in right {
        let target = chunk.index.and_then(|index| {
            left.iter_mut().find(|existing| existing.index == Some(index) && ids_agree(existing, &chunk))
        });
        match target {
            Some(existing) => {
                if is_blank(&existing.name) {
                    existing.name = chunk.name.or(existing.name.take());
                }
                if is_blank(&existing.id) {
                    existing.id = chunk.id.or(existing.id.take());
                }
                if let Some(args) = chunk.args {
                    existing.args.get_or_insert_with(String::new).push_str(&args);
                }
            }
            None => left.push(chunk),
        }
    }
    left
}

fn is_blank(value: &Option<String>) -> bool {
    value.as_deref().is_none_or(str::is_empty)
}

fn ids_agree(left: &ToolCallChunk, right: &ToolCallChunk) -> bool {
    is_blank(&left.id) || is_blank(&right.id) || left.id == right.id
}

/// Parses the merged fragments: arguments that parse (possibly partially) into a JSON object make a tool
/// call, an empty argument string gives `{}`, anything else is an invalid tool call.
fn tool_calls_from_chunks(chunks: &[ToolCallChunk]) -> (Vec<ToolCall>, Vec<InvalidToolCall>) {
    let mut valid = Vec::new();
    let mut invalid = Vec::new();
    for chunk in chunks {
        let raw = chunk.args.as_deref().unwrap_or("");
        let parsed = if raw.is_empty() { Some(Value::Object(Map::new())) } else { parse_partial_json(raw) };
        match parsed {
            Some(args @ Value::Object(_)) => valid.push(ToolCall {
                name: chunk.name.clone().unwrap_or_default(),
                args,
                id: chunk.id.clone(),
            }),
            other => {
                let error = match other {
                    Some(value) => format!("tool call arguments must be a json object, got {value}"),
                    None => format!("tool call arguments are not valid json: {raw}"),
                };
                invalid.push(InvalidToolCall {
                    name: chunk.name.clone(),
                    args: chunk.args.clone(),
                    id: chunk.id.clone(),
                    error: Some(error),
                });
            }
        }
    }
    (valid, invalid)
}

/// The id to keep: a provider's id first, then a generated `lc_run-`/`run-` id, then any other `lc_` id.
fn pick_id(left: Option<String>, right: Option<String>) -> Option<String> {
    fn rank(id: &Option<String>) -> u8 {
        match id.as_deref() {
            None | Some("") => 0,
            Some(id) if id.starts_with("lc_run-") || id.starts_with("run-") => 2,
            Some(id) if id.starts_with("lc_") => 1,
            Some(_) => 3,
        }
    }
    if rank(&right) > rank(&left) { right } else { left }
}

/// Adds token counts field by field, breakdowns included.
fn add_usage(left: Option<UsageMetadata>, right: Option<UsageMetadata>) -> Option<UsageMetadata> {
    match (left, right) {
        (Some(a), Some(b)) => Some(UsageMetadata {
            input_tokens: a.input_tokens.saturating_add(b.input_tokens),
            output_tokens: a.output_tokens.saturating_add(b.output_tokens),
            total_tokens: a.total_tokens.saturating_add(b.total_tokens),
            input_token_details: add_details(a.input_token_details, b.input_token_details),
            output_token_details: add_details(a.output_token_details, b.output_token_details),
        }),
        (a, b) => a.or(b),
    }
}

fn add_details(
    left: Option<Map<String, Value>>,
    right: Option<Map<String, Value>>,
) -> Option<Map<String, Value>> {
    match (left, right) {
        (Some(a), Some(b)) => Some(add_counts(a, b)),
        (a, b) => a.or(b),
    }
}

fn add_counts(mut left: Map<String, Value>, right: Map<String, Value>) -> Map<String, Value> {
    for (key, value) in right {
        let merged = match (left.remove(&key), value) {
            (Some(Value::Number(a)), Value::Number(b)) => match (a.as_u64(), b.as_u64()) {
                (Some(x), Some(y)) => Value::from(x.saturating_add(y)),
                _ => Value::from(a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0)),
            },
            (Some(Value::Object(a)), Value::Object(b)) => Value::Object(add_counts(a, b)),
            (_, value) => value,
        };
        left.insert(key, merged);
    }
    left
}
