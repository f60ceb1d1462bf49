//! `/mcp`: every assistant as a tool over MCP's Streamable HTTP transport, as LangGraph's server serves it.
//! Stateless: each `POST` holds one JSON-RPC message and gets its JSON answer; there are no sessions and
//! no server-sent events (`DELETE` is `404`; `GET` is not routed, a `405`). The protocol's few shapes are
//! written here as LangGraph writes them: rmcp's server types (weft-integrations' `mcp` feature) would bring
//! its session transport into the server for them.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use serde_json::{Map, Value, json};

use super::guard::Caller;
use super::jsonrpc::{self, INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, Outcome};
use super::reply::empty;
use super::{assistants, loopback, runs};
use crate::app::App;
use crate::error::ApiError;

/// The protocol versions answered as asked; any other is answered with the latest.
const PROTOCOL_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
const LATEST_PROTOCOL_VERSION: &str = "2025-11-25";
/// Tools per `tools/list` page.
const PAGE_SIZE: u64 = 100;
/// The assistants a `tools/call` looks its tool up among.
const MAX_ASSISTANTS: u64 = 1000;
/// LangChain's message types and their parts, in an input schema's `$defs`.
const MESSAGE_TYPES: [&str; 12] = [
    "AIMessage",
    "AIMessageChunk",
    "HumanMessage",
    "HumanMessageChunk",
    "ChatMessage",
    "ChatMessageChunk",
    "SystemMessage",
    "SystemMessageChunk",
    "FunctionMessage",
    "FunctionMessageChunk",
    "ToolMessage",
    "ToolMessageChunk",
];
const MESSAGE_PART_TYPES: [&str; 6] = [
    "ToolCall",
    "ToolCallChunk",
    "InvalidToolCall",
    "UsageMetadata",
    "InputTokenDetails",
    "OutputTokenDetails",
];

/// `DELETE /mcp`: there is no session to end.
pub(crate) async fn delete() -> Response {
    empty(StatusCode::NOT_FOUND)
}

/// `POST /mcp`: one JSON-RPC request (answered), notification or response (both `202`).
pub(crate) async fn post(
    State(app): State<Arc<App>>,
    caller: Caller,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let bytes = match axum::body::to_bytes(body, app.limits.body_bytes).await {
        Ok(bytes) => bytes,
        Err(_) => {
            let limit = app.limits.body_bytes;
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("Request body too large (limit: {limit} bytes)"),
            )
            .into_response();
        }
    };
    let Ok(message) = serde_json::from_slice::<Value>(&bytes) else {
        return jsonrpc::http_error(StatusCode::BAD_REQUEST, "Invalid JSON");
    };
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !accept.contains("application/json") && !accept.contains("text/event-stream") {
        let text = "Accept header must include application/json or text/event-stream";
        return jsonrpc::http_error(StatusCode::BAD_REQUEST, text);
    }
    let Value::Object(message) = message else {
        return jsonrpc::http_error(StatusCode::BAD_REQUEST, "Invalid message format.");
    };
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        let text = "Invalid JSON-RPC message. Missing or invalid jsonrpc version.";
        return jsonrpc::http_error(StatusCode::BAD_REQUEST, text);
    }
    let id = message.get("id").filter(|id| !id.is_null());
    let method = message.get("method").filter(|m| truthy(m));
    match (id, method) {
        (Some(id), Some(method)) => {
            let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
            jsonrpc::reply(id, request(&app, &caller, method, &params).await)
        }
        (Some(_), None) | (None, Some(_)) => empty(StatusCode::ACCEPTED),
        (None, None) => jsonrpc::http_error(
            StatusCode::BAD_REQUEST,
            "Invalid message format. A message is to be either a JSON-RPC request, response, or notification.",
        ),
    }
}

/// Whether Python reads the value as true (a method of `0`, `""` or `false` is no method).
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// The answer to one request.
async fn request(app: &Arc<App>, caller: &Caller, method: &Value, params: &Value) -> Outcome {
    let Some(method) = method.as_str() else {
        return Err(jsonrpc::error(METHOD_NOT_FOUND, format!("Method not found: {method}")));
    };
    let Value::Object(params) = params else {
        return Err(jsonrpc::error(INVALID_PARAMS, "Invalid params: must be an object"));
    };
    match method {
        "initialize" => Ok(initialize(params)),
        "ping" => Ok(json!({})),
        "tools/list" => tools_list(app, caller, params).await,
        "tools/call" => tools_call(app, caller, params).await,
        other => Err(jsonrpc::error(METHOD_NOT_FOUND, format!("Method not found: {other}"))),
    }
}

/// `initialize`: the protocol version asked for when it is one of ours, else the latest.
fn initialize(params: &Map<String, Value>) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked.filter(|v| PROTOCOL_VERSIONS.contains(v)).unwrap_or(LATEST_PROTOCOL_VERSION);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "LangGraph", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// A failed call of one of the API's routes as a JSON-RPC error: the caller's mistakes (a `4xx`) as invalid
/// params, the server's as an internal error.
fn route_error(error: &ApiError) -> Value {
    let code = if error.status.is_client_error() { INVALID_PARAMS } else { INTERNAL_ERROR };
    jsonrpc::error(code, error.detail.clone())
}

/// The caller's assistants, `limit` from `offset` on, newest first (`POST /assistants/search`).
async fn search(app: &Arc<App>, caller: &Caller, offset: u64, limit: u64) -> Result<Vec<Value>, Value> {
    let query = json!({"offset": offset, "limit": limit});
    let answered = assistants::search(State(Arc::clone(app)), caller.clone(), loopback::body(&query)).await;
    match loopback::read(answered).await {
        Ok(answer) => match answer.body {
            Value::Array(items) => Ok(items),
            other => Err(jsonrpc::error(INTERNAL_ERROR, format!("unexpected assistants: {other}"))),
        },
        Err(error) => Err(route_error(&error)),
    }
}

/// An assistant's name as a tool's: runs of white space as one `_`, only `[A-Za-z0-9_.-]`, at most 128.
fn tool_name(name: &str) -> String {
    let mut out = String::new();
    let mut words = name.split_whitespace().peekable();
    while let Some(word) = words.next() {
        out.extend(word.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')));
        if words.peek().is_some() {
            out.push('_');
        }
    }
    out.chars().take(128).collect()
}

fn name_of(assistant: &Value) -> &str {
    assistant.get("name").and_then(Value::as_str).unwrap_or_default()
}

/// `tools/list`: a page of the caller's assistants as tools (one per tool name, the newest).
async fn tools_list(app: &Arc<App>, caller: &Caller, params: &Map<String, Value>) -> Outcome {
    let cursor = match params.get("cursor") {
        Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(0),
        _ => 0,
    };
    let found = search(app, caller, cursor, PAGE_SIZE).await?;
    let full_page = found.len() as u64 == PAGE_SIZE;
    let mut seen = std::collections::HashSet::new();
    let mut tools = Vec::new();
    for assistant in &found {
        let name = tool_name(name_of(assistant));
        if !seen.insert(name.clone()) {
            tracing::warn!(
                name = name_of(assistant),
                "two assistants have one tool name: the older is left out"
            );
            continue;
        }
        if let Some(tool) = tool(app, caller, assistant, name).await {
            tools.push(tool);
        }
    }
    let mut result = json!({"tools": tools});
    if full_page {
        result["nextCursor"] = json!(cursor + PAGE_SIZE);
    }
    Ok(result)
}

/// One assistant as a tool; none when its schemas cannot be had (it is left out of the list).
async fn tool(app: &Arc<App>, caller: &Caller, assistant: &Value, name: String) -> Option<Value> {
    let id = assistant.get("assistant_id").and_then(Value::as_str)?.to_owned();
    let answered = assistants::schemas(State(Arc::clone(app)), caller.clone(), Path(id.clone())).await;
    let schemas = match loopback::read(answered).await {
        Ok(answer) => answer.body,
        Err(error) => {
            tracing::warn!(
                assistant_id = id,
                error = error.detail,
                "an assistant without schemas is no tool"
            );
            return None;
        }
    };
    // A graph that declares no input schema takes its state (as LangGraph's graphs do).
    let mut input = match (schemas.get("input_schema"), schemas.get("state_schema")) {
        (Some(Value::Object(input)), _) => input.clone(),
        (_, Some(Value::Object(state))) => state.clone(),
        _ => Map::new(),
    };
    simplify(&mut input);
    input.entry("type").or_insert_with(|| json!("object"));
    let title = name_of(assistant);
    let description = match assistant.get("description").and_then(Value::as_str) {
        Some(d) if !d.is_empty() => d.to_owned(),
        _ => format!("Tool based on the {title} assistant"),
    };
    Some(json!({
        "name": name,
        "title": title,
        "description": description,
        "inputSchema": input,
        "annotations": {"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": true},
    }))
}

/// An input schema made for a model: LangChain's message definitions dropped, and each list of messages
/// one string (the user's message).
fn simplify(schema: &mut Map<String, Value>) {
    let Some(Value::Object(defs)) = schema.get_mut("$defs") else { return };
    if !MESSAGE_TYPES.iter().any(|t| defs.contains_key(*t)) {
        return;
    }
    for name in MESSAGE_TYPES.iter().chain(MESSAGE_PART_TYPES.iter()) {
        defs.shift_remove(*name);
    }
    if defs.is_empty() {
        schema.shift_remove("$defs");
    }
    let Some(Value::Object(properties)) = schema.get_mut("properties") else { return };
    for (key, property) in properties.iter_mut() {
        if lists_messages(property) {
            let title = property.get("title").cloned().unwrap_or_else(|| json!(key));
            *property = json!({"type": "string", "title": title, "description": "The user message to send to the agent."});
        }
    }
}

/// Whether a property is a list whose items may be one of LangChain's messages.
fn lists_messages(property: &Value) -> bool {
    if property.get("type").and_then(Value::as_str) != Some("array") {
        return false;
    }
    let items = property.get("items");
    let choices = items.and_then(|i| i.get("oneOf").or_else(|| i.get("anyOf"))).and_then(Value::as_array);
    choices.into_iter().flatten().any(|choice| {
        let reference = choice.get("$ref").and_then(Value::as_str).unwrap_or_default();
        reference.strip_prefix("#/$defs/").is_some_and(|name| MESSAGE_TYPES.contains(&name))
    })
}

/// `tools/call`: a stateless run of the tool's assistant on the arguments, waited for.
async fn tools_call(app: &Arc<App>, caller: &Caller, params: &Map<String, Value>) -> Outcome {
    let name = params.get("name").filter(|n| truthy(n));
    let unknown = |name: Option<&Value>| {
        let shown = match name {
            None => "None".to_owned(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        jsonrpc::error(INVALID_PARAMS, format!("Unknown tool: {shown}"))
    };
    let Some(wanted) = name else { return Err(unknown(name)) };
    let found = search(app, caller, 0, MAX_ASSISTANTS).await?;
    let matching: Vec<&Value> = found
        .iter()
        .filter(|a| {
            let normalized = tool_name(name_of(a));
            !normalized.is_empty() && wanted.as_str() == Some(normalized.as_str())
        })
        .collect();
    let assistant_id = match matching.as_slice() {
        [] => return Err(unknown(name)),
        [one] => one.get("assistant_id").cloned().unwrap_or(Value::Null),
        _ => return Err(jsonrpc::error(INVALID_PARAMS, "Multiple tools found with the same name.")),
    };
    let mut run = json!({
        "assistant_id": assistant_id,
        "input": params.get("arguments").cloned().unwrap_or_else(|| json!({})),
    });
    if let Some(context) = params.get("context").filter(|c| !c.is_null()) {
        run["context"] = context.clone();
    }
    let answered = runs::wait_stateless(State(Arc::clone(app)), caller.clone(), loopback::body(&run)).await;
    let value = loopback::read(answered).await.map_err(|e| route_error(&e))?.body;
    if let Some(error) = value.get("__error__") {
        let text = error
            .get("error")
            .map_or_else(String::new, |e| e.as_str().map_or_else(|| e.to_string(), str::to_owned));
        return Ok(json!({"isError": true, "content": [{"type": "text", "text": text}]}));
    }
    Ok(json!({"content": [{"type": "text", "text": weft_runnable_core::py::py_repr(&value)}]}))
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::{simplify, tool_name};

    #[test]
    fn names_become_tool_names() {
        assert_eq!(tool_name("  my  agent\tv2 "), "my_agent_v2");
        assert_eq!(tool_name("a/b:c-d.e"), "abc-d.e");
        assert_eq!(tool_name(&"x".repeat(200)).len(), 128);
        assert_eq!(tool_name("é"), "");
    }

    #[test]
    fn message_lists_become_one_string() {
        let mut schema: Map<_, _> = serde_json::from_value(json!({
            "$defs": {"HumanMessage": {}, "AIMessage": {}, "Other": {}},
            "properties": {
                "messages": {"type": "array", "title": "Messages", "items": {"oneOf": [{"$ref": "#/$defs/AIMessage"}]}},
                "n": {"type": "integer"},
            },
        }))
        .unwrap_or_default();
        simplify(&mut schema);
        assert_eq!(
            json!(schema),
            json!({
                "$defs": {"Other": {}},
                "properties": {
                    "messages": {"type": "string", "title": "Messages", "description": "The user message to send to the agent."},
                    "n": {"type": "integer"},
                },
            })
        );
    }
}
