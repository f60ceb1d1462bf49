//! `/a2a/{assistant_id}` and the agent cards: each assistant an A2A agent, as LangGraph's server serves
//! it. JSON-RPC `message/send` (`SendMessage`) runs the assistant on the thread named by the message's
//! `contextId` (or resumes the task its `taskId` names) and answers the task; `tasks/get` (`GetTask`) reads
//! a task back. A task is one run: its id is `{context_id}:{run_id}`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use serde_json::{Map, Value, json};

use super::guard::Caller;
use super::jsonrpc::{
    self, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, Outcome, PARSE_ERROR,
};
use super::reply::{self, empty};
use super::{assistants, loopback, runs, threads};
use crate::app::{App, is_uuid, new_id, now};
use crate::error::ApiError;

/// No task has this id.
const TASK_NOT_FOUND: i64 = -32001;
/// The method or the request is not supported.
const UNSUPPORTED_OPERATION: i64 = -32004;
/// A message part of a kind the agent does not take.
const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
/// The most history a request may ask for.
const MAX_HISTORY_LENGTH: u64 = 10;
/// The input and output modes of an assistant whose metadata names none.
const DEFAULT_MODES: [&str; 2] = ["application/json", "text/plain"];

/// The A2A 0.x method names and the 1.0 names they stand for (answered in 0.x form).
const ALIASES: [(&str, &str); 4] = [
    ("message/send", "SendMessage"),
    ("message/stream", "SendStreamingMessage"),
    ("tasks/get", "GetTask"),
    ("tasks/cancel", "CancelTask"),
];
const METHODS: [&str; 6] =
    ["SendMessage", "SendStreamingMessage", "GetTask", "CancelTask", "ListTasks", "GetExtendedAgentCard"];

/// Whether an `Accept` header takes `media_type` (wildcards included).
fn accepts(accept: &str, media_type: &str) -> bool {
    accept.split(',').any(|range| {
        let candidate = range.split(';').next().unwrap_or_default().trim().to_lowercase();
        let kind = media_type.split('/').next().unwrap_or_default();
        candidate == "*/*" || candidate == media_type || candidate == format!("{kind}/*")
    })
}

/// `POST /a2a/{assistant_id}`: one JSON-RPC message; errors in the message are JSON-RPC errors (`200`).
pub(crate) async fn post(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(assistant_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let limit = app.limits.body_bytes;
    let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Request body too large (limit: {limit} bytes)"),
        )
        .into_response();
    };
    let null = Value::Null;
    let Ok(message) = serde_json::from_slice::<Value>(&bytes) else {
        return jsonrpc::reply(&null, Err(jsonrpc::error(PARSE_ERROR, "Invalid JSON payload")));
    };
    let Value::Object(message) = message else {
        let error = jsonrpc::error(INVALID_REQUEST, "Invalid message format: expected object");
        return jsonrpc::reply(&null, Err(error));
    };
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        let text = "Invalid JSON-RPC message: missing or invalid jsonrpc version";
        return jsonrpc::reply(&id, Err(jsonrpc::error(INVALID_REQUEST, text)));
    }
    if !matches!(id, Value::Null | Value::String(_) | Value::Number(_)) {
        let text = "Invalid JSON-RPC request: 'id' must be a string, number, or null";
        return jsonrpc::reply(&null, Err(jsonrpc::error(INVALID_REQUEST, text)));
    }
    let method = match message.get("method") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) => Some(m.as_str()),
        Some(_) => {
            let text = "Method not found: method must be a string";
            return jsonrpc::reply(&id, Err(jsonrpc::error(METHOD_NOT_FOUND, text)));
        }
    };
    let legacy = method.and_then(|m| ALIASES.iter().find(|(old, _)| *old == m)).map(|(_, new)| *new);
    let method = legacy.or(method);
    if let Some(unknown) = method.filter(|m| !METHODS.contains(m)) {
        return jsonrpc::reply(
            &id,
            Err(jsonrpc::error(METHOD_NOT_FOUND, format!("Method not found: {unknown}"))),
        );
    }
    let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
    if let Some(error) = method.and_then(|m| message_params_error(m, &params)) {
        return jsonrpc::reply(&id, Err(error));
    }
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    if method == Some("SendStreamingMessage") && !accepts(accept, "text/event-stream") {
        let text = "Accept header must include text/event-stream for streaming";
        return jsonrpc::http_error(StatusCode::BAD_REQUEST, text);
    }
    if method != Some("SendStreamingMessage") && !accepts(accept, "application/json") {
        return jsonrpc::http_error(StatusCode::BAD_REQUEST, "Accept header must include application/json");
    }
    match (id.is_null(), method) {
        (false, Some(method)) => {
            let outcome = request(&app, &caller, method, &params, &assistant_id).await;
            let outcome = if legacy.is_some() { legacy_form(outcome) } else { outcome };
            jsonrpc::reply(&id, outcome)
        }
        (false, None) if message.contains_key("result") || message.contains_key("error") => {
            empty(StatusCode::ACCEPTED)
        }
        (false, None) => {
            let text = "Invalid JSON-RPC request: missing 'method' field";
            jsonrpc::reply(&id, Err(jsonrpc::error(INVALID_REQUEST, text)))
        }
        (true, _) => {
            let text = "Invalid message format: must be a JSON-RPC request or notification";
            jsonrpc::reply(&null, Err(jsonrpc::error(INVALID_REQUEST, text)))
        }
    }
}

/// What is wrong with the params of a message method: not an object, or no message object.
fn message_params_error(method: &str, params: &Value) -> Option<Value> {
    if !matches!(method, "SendMessage" | "SendStreamingMessage") {
        return None;
    }
    let Value::Object(params) = params else {
        return Some(jsonrpc::error(INVALID_PARAMS, "Invalid params: must be an object"));
    };
    match params.get("message") {
        Some(Value::Object(message)) if !message.is_empty() => None,
        _ => Some(jsonrpc::error(INVALID_PARAMS, "Missing or invalid 'message' in params")),
    }
}

/// The answer to one request for the assistant.
async fn request(
    app: &Arc<App>,
    caller: &Caller,
    method: &str,
    params: &Value,
    assistant_id: &str,
) -> Outcome {
    if !is_uuid(assistant_id) {
        return Err(jsonrpc::error(INVALID_PARAMS, "Invalid assistant ID: must be a UUID"));
    }
    let empty_params = Map::new();
    let params = params.as_object().unwrap_or(&empty_params);
    match method {
        "SendMessage" => send(app, caller, params, assistant_id).await,
        "GetTask" => get_task(app, caller, params, assistant_id).await,
        _ => Err(jsonrpc::error(UNSUPPORTED_OPERATION, format!("{method} is not supported by this server"))),
    }
}

/// An answer in A2A 0.x form: roles and states in lower case, the task not wrapped.
fn legacy_form(outcome: Outcome) -> Outcome {
    outcome.map(|result| match result {
        Value::Object(mut wrapped) if wrapped.len() == 1 && wrapped.contains_key("task") => {
            legacy_value(wrapped.remove("task").unwrap_or_default())
        }
        other => legacy_value(other),
    })
}

fn legacy_value(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, item)| {
                    let item = match (key.as_str(), item) {
                        ("role" | "state", Value::String(s)) => Value::String(legacy_name(&s)),
                        (_, item) => legacy_value(item),
                    };
                    (key, item)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(legacy_value).collect()),
        other => other,
    }
}

/// `ROLE_USER` as `user`, `TASK_STATE_INPUT_REQUIRED` as `input-required`; other names unchanged.
fn legacy_name(name: &str) -> String {
    match name.strip_prefix("ROLE_").or_else(|| name.strip_prefix("TASK_STATE_")) {
        Some(rest) => rest.to_lowercase().replace('_', "-"),
        None => name.to_owned(),
    }
}

fn invalid(message: impl Into<String>) -> Value {
    jsonrpc::error(INVALID_PARAMS, message)
}

/// A failed call of one of the API's routes (creating or reading a run) as a JSON-RPC error.
fn route_error(error: &ApiError, assistant_id: &str, context_id: &str) -> Value {
    match error.status {
        StatusCode::NOT_FOUND if error.detail.to_lowercase().contains("thread") => json!({
            "code": INVALID_PARAMS,
            "message": format!("Thread '{context_id}' not found. Please create the thread first before sending messages to it."),
            "data": {"thread_id": context_id, "error_type": "thread_not_found"},
        }),
        StatusCode::NOT_FOUND => invalid(format!("Assistant '{assistant_id}' not found")),
        StatusCode::BAD_REQUEST => invalid(format!("Invalid request: {}", error.detail)),
        StatusCode::FORBIDDEN => invalid("Access denied to assistant or thread"),
        s if s.is_server_error() => jsonrpc::error(INTERNAL_ERROR, "Internal server error"),
        _ => invalid(format!("Failed to create run: {}", error.detail)),
    }
}

/// The assistant, or why not as LangGraph words it.
async fn assistant(app: &Arc<App>, caller: &Caller, assistant_id: &str) -> Result<Value, String> {
    let answered =
        assistants::get(State(Arc::clone(app)), caller.clone(), Path(assistant_id.to_owned())).await;
    match loopback::read(answered).await {
        Ok(answer) => Ok(answer.body),
        Err(e) if e.status == StatusCode::NOT_FOUND => Err(format!("Assistant '{assistant_id}' not found")),
        Err(e) => Err(format!("Failed to get assistant '{assistant_id}': {}", e.detail)),
    }
}

/// The assistant's input schema (its state's when it declares none).
async fn input_schema(
    app: &Arc<App>,
    caller: &Caller,
    assistant_id: &str,
) -> Result<Map<String, Value>, String> {
    let answered =
        assistants::schemas(State(Arc::clone(app)), caller.clone(), Path(assistant_id.to_owned())).await;
    let schemas = loopback::read(answered)
        .await
        .map_err(|e| format!("Failed to get schemas for assistant '{assistant_id}': {}", e.detail))?
        .body;
    match (schemas.get("input_schema"), schemas.get("state_schema")) {
        (Some(Value::Object(input)), _) => Ok(input.clone()),
        (_, Some(Value::Object(state))) => Ok(state.clone()),
        _ => Ok(Map::new()),
    }
}

fn property_names(schema: &Map<String, Value>) -> Vec<String> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// `historyLength` checked: none, or 0 to [`MAX_HISTORY_LENGTH`].
fn history_length(value: Option<&Value>) -> Result<Option<usize>, Value> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(n) if n > MAX_HISTORY_LENGTH => {
                Err(invalid(format!("historyLength cannot exceed {MAX_HISTORY_LENGTH}")))
            }
            Some(n) => Ok(usize::try_from(n).ok()),
            None => Err(invalid("historyLength must be a non-negative integer")),
        },
        Some(_) => Err(invalid("historyLength must be a non-negative integer")),
    }
}

/// A message's parts as the run's input: each text part a message of `role`, the fields of each data part
/// input fields of their own.
fn input_from_parts(parts: &[Value], role: &str, message_id: &str) -> Result<Map<String, Value>, Value> {
    let unsupported = |text: &str| jsonrpc::error(CONTENT_TYPE_NOT_SUPPORTED, text);
    let role = if matches!(role, "user" | "ROLE_USER") { "human" } else { "assistant" };
    let mut messages = Vec::new();
    let mut input = Map::new();
    for part in parts {
        let Value::Object(part) = part else {
            return Err(unsupported(
                "Each message part must be an object. A2A agents support 'text', 'data', and 'file' parts only.",
            ));
        };
        let present: Vec<&str> =
            ["text", "file", "data"].into_iter().filter(|k| part.contains_key(*k)).collect();
        if present.len() > 1 {
            let text = format!(
                "Each message part must contain exactly one of 'text', 'file', or 'data'. Got multiple: {present:?}."
            );
            return Err(jsonrpc::error(CONTENT_TYPE_NOT_SUPPORTED, text));
        }
        match present.first().copied() {
            Some("text") => messages.push(json!({"role": role, "content": part["text"], "id": message_id})),
            Some("data") => match &part["data"] {
                Value::Object(data) => input.extend(data.clone()),
                _ => return Err(unsupported("DataPart must contain a JSON object in the 'data' field")),
            },
            Some(_) => return Err(unsupported("File parts are not supported by this server.")),
            None => {
                return Err(unsupported(
                    "Unsupported part type. A2A agents support 'text', 'data', and 'file' parts only.",
                ));
            }
        }
    }
    if messages.is_empty() && input.is_empty() {
        return Err(unsupported("Message must contain at least one valid text, data, or file part"));
    }
    if !messages.is_empty() {
        input.insert("messages".to_owned(), Value::Array(messages));
    }
    Ok(input)
}

/// A string field of `object` that may be absent; present but not a string is an error.
fn optional_string<'a>(
    object: &'a Map<String, Value>,
    key: &str,
    error: &str,
) -> Result<Option<&'a str>, Value> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(error)),
    }
}

/// The message of a `SendMessage`, checked.
struct Sent<'a> {
    /// The whole message.
    message: &'a Map<String, Value>,
    /// Its `messageId`.
    id: String,
    /// Its `role`.
    role: String,
    /// Its parts (at least one).
    parts: &'a [Value],
}

/// The message of `SendMessage`, checked: its id, role and parts.
fn checked_message(params: &Map<String, Value>) -> Result<Sent<'_>, Value> {
    let Some(Value::Object(message)) = params.get("message") else {
        return Err(invalid("Missing 'message' in params"));
    };
    let text = |key: &str| match message.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(other) if !other.is_null() && other != &json!(false) && other != &json!(0) => {
            Some(other.to_string())
        }
        _ => None,
    };
    let message_id = text("messageId").ok_or_else(|| invalid("Missing required 'messageId' in message"))?;
    let role = text("role").ok_or_else(|| invalid("Missing required 'role' in message"))?;
    let parts = match message.get("parts") {
        Some(Value::Array(parts)) if !parts.is_empty() => parts,
        Some(Value::Array(_)) | None => return Err(invalid("Message must contain at least one part")),
        Some(_) => return Err(invalid("Invalid params: 'parts' must be an array")),
    };
    Ok(Sent { message, id: message_id, role, parts })
}

/// `SendMessage`: the assistant run on the message, on the thread of its `contextId` (a new one without),
/// waited for; the task it was.
async fn send(app: &Arc<App>, caller: &Caller, params: &Map<String, Value>, assistant_id: &str) -> Outcome {
    let configuration = match params.get("configuration") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(c)) => c.clone(),
        Some(_) => return Err(invalid("Invalid params: 'configuration' must be an object")),
    };
    let history = history_length(configuration.get("historyLength"))?;
    let Sent { message, id: message_id, role, parts } = checked_message(params)?;
    let assistant_record = assistant(app, caller, assistant_id).await.map_err(invalid)?;
    if parts.iter().any(|p| p.get("text").is_some() || p.get("file").is_some()) {
        let schema = input_schema(app, caller, assistant_id).await.map_err(invalid)?;
        let fields = property_names(&schema);
        if !fields.iter().any(|f| f == "messages") {
            let graph_id = assistant_record.get("graph_id").and_then(Value::as_str).unwrap_or_default();
            return Err(invalid(format!(
                "Assistant '{assistant_id}' (graph '{graph_id}') does not support A2A conversational messages. \
                 Graph input schema must include a 'messages' field to accept text or file parts. \
                 Available input fields: {fields:?}"
            )));
        }
    }
    let context_id = optional_string(message, "contextId", "contextId must be a string")?;
    let existing = optional_string(message, "taskId", "taskId must be a string")?;
    let mut input = input_from_parts(parts, &role, &message_id)?;
    let (task_id, context_id, command) = match existing {
        None => (None, context_id.map_or_else(new_id, str::to_owned), None),
        Some(task_id) => {
            let Some(found) = resolve(app, caller, task_id, context_id, assistant_id).await? else {
                return Err(jsonrpc::error(TASK_NOT_FOUND, format!("Task not found: {task_id}")));
            };
            if TERMINAL_STATES.contains(&found.state) {
                let text = "A terminal task cannot accept another message";
                return Err(jsonrpc::error(UNSUPPORTED_OPERATION, text));
            }
            let command = resume_command(message, parts, found.interrupted, &mut input)?;
            (Some(task_id.to_owned()), found.context_id, command)
        }
    };
    let mut run = json!({"assistant_id": assistant_id, "if_not_exists": "create"});
    if command.is_none() || !input.is_empty() {
        run["input"] = Value::Object(input);
    }
    if let Some(command) = command {
        run["command"] = command;
    }
    if let Some(context) = params.get("context").filter(|c| !c.is_null()) {
        run["context"] = context.clone();
    }
    let path = Path(context_id.clone());
    let answered = runs::wait(State(Arc::clone(app)), caller.clone(), path, loopback::body(&run)).await;
    let answer = loopback::read(answered).await.map_err(|e| route_error(&e, assistant_id, &context_id))?;
    let run_id = answer.location.as_deref().and_then(|l| l.rsplit('/').next()).unwrap_or_default();
    let task_id = task_id.unwrap_or_else(|| format!("{context_id}:{run_id}"));
    Ok(json!({"task": task(&task_id, &context_id, &answer.body, assistant_id, history)}))
}

/// The states after which a task takes no more messages.
const TERMINAL_STATES: [&str; 4] =
    ["TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"];

/// The `Command` a message to an existing task runs with: the message's own `command` (LangGraph's
/// extension), else, while the thread waits at an interrupt, a resume with the value of its data part's
/// `resume` field or with its text (which then is no input).
fn resume_command(
    message: &Map<String, Value>,
    parts: &[Value],
    interrupted: bool,
    input: &mut Map<String, Value>,
) -> Result<Option<Value>, Value> {
    match message.get("command") {
        None | Some(Value::Null) => {}
        Some(command @ Value::Object(_)) => return Ok(Some(command.clone())),
        Some(_) => return Err(invalid("command must be an object")),
    }
    let resumes: Vec<&Value> = parts.iter().filter_map(|p| p.get("data")?.get("resume")).collect();
    if resumes.len() > 1 {
        return Err(invalid("Only one resume value is allowed in data parts"));
    }
    if let Some(resume) = resumes.first() {
        if !interrupted {
            return Err(invalid("Task is not awaiting input"));
        }
        input.remove("resume");
        return Ok(Some(json!({"resume": resume})));
    }
    let texts: Vec<&str> = parts.iter().filter_map(|p| p.get("text")?.as_str()).collect();
    if texts.is_empty() || !interrupted {
        return Ok(None);
    }
    input.remove("messages");
    Ok(Some(json!({"resume": texts.join("\n")})))
}

/// A task found: its thread, its run and the state they give it.
struct Found {
    /// The thread (the task's context).
    context_id: String,
    /// The task's run.
    run: Value,
    /// Whether the thread waits at an interrupt.
    interrupted: bool,
    /// The task's state.
    state: &'static str,
}

/// The task `task_id` of this assistant (`{context_id}:{run_id}`, or a run id in `context_id`); none when
/// there is no such run of the assistant.
async fn resolve(
    app: &Arc<App>,
    caller: &Caller,
    task_id: &str,
    context_id: Option<&str>,
    assistant_id: &str,
) -> Result<Option<Found>, Value> {
    let (parsed, run_id) = task_id.split_once(':').unwrap_or(("", task_id));
    if !parsed.is_empty() && context_id.is_some_and(|c| c != parsed) {
        return Ok(None);
    }
    let context_id = context_id.unwrap_or(parsed).to_owned();
    if context_id.is_empty() {
        return Ok(None);
    }
    let path = Path((context_id.clone(), run_id.to_owned()));
    let run = match loopback::read(runs::get(State(Arc::clone(app)), caller.clone(), path).await).await {
        Ok(answer) => answer.body,
        Err(e) if e.status.is_server_error() => {
            return Err(jsonrpc::error(INTERNAL_ERROR, "Internal server error"));
        }
        Err(_) => return Ok(None),
    };
    if run.get("assistant_id").and_then(Value::as_str) != Some(assistant_id) {
        return Ok(None);
    }
    let answered = threads::get(State(Arc::clone(app)), caller.clone(), Path(context_id.clone())).await;
    let thread = loopback::read(answered).await.map(|a| a.body).unwrap_or_default();
    let interrupted = thread.get("status").and_then(Value::as_str) == Some("interrupted");
    let state = state_of(run.get("status").and_then(Value::as_str).unwrap_or("unknown"), interrupted);
    Ok(Some(Found { context_id, run, interrupted, state }))
}

/// A LangChain message's A2A role: `ROLE_USER` for a human's, `ROLE_AGENT` for an AI's, none for the
/// rest (system prompts and tool results are not published).
fn role_of(message: &Map<String, Value>) -> Option<&'static str> {
    let label = |key: &str| {
        message
            .get(key)
            .and_then(Value::as_str)
            .map(|s| s.to_lowercase().replace(['_', '-'], ""))
            .unwrap_or_default()
    };
    let (kind, role) = (label("type"), label("role"));
    let by_type = match kind.as_str() {
        "" | "chat" | "chatmessage" | "chatmessagechunk" => None,
        "human" | "humanmessage" | "humanmessagechunk" => Some("ROLE_USER"),
        "ai" | "aimessage" | "aimessagechunk" => Some("ROLE_AGENT"),
        _ => return None,
    };
    let by_role = match role.as_str() {
        "" => None,
        "human" | "user" => Some("ROLE_USER"),
        "agent" | "assistant" => Some("ROLE_AGENT"),
        _ => return None,
    };
    match (by_type, by_role) {
        (Some(a), Some(b)) if a != b => None,
        (a, b) => a.or(b),
    }
}

/// A message's content as A2A parts: its text (text blocks joined); other blocks are left out.
fn content_parts(content: Option<&Value>) -> Vec<Value> {
    match content {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(text)) => vec![json!({"kind": "text", "text": text})],
        Some(Value::Array(blocks)) => {
            let text: String = blocks
                .iter()
                .filter_map(|block| match block {
                    Value::String(s) => Some(s.as_str()),
                    Value::Object(b) if b.get("type").and_then(Value::as_str) == Some("text") => {
                        b.get("text").and_then(Value::as_str)
                    }
                    _ => None,
                })
                .collect();
            if text.is_empty() { Vec::new() } else { vec![json!({"kind": "text", "text": text})] }
        }
        Some(other) => vec![json!({"kind": "text", "text": weft_runnable_core::py::py_repr(other)})],
    }
}

fn has_content(parts: &[Value]) -> bool {
    parts.iter().any(|p| p.get("text").and_then(Value::as_str).is_some_and(|t| !t.is_empty()))
}

/// The thread's messages as the task's history: the human's and the agent's, the last `length` of them.
fn history(messages: &[Value], task_id: &str, context_id: &str, length: Option<usize>) -> Vec<Value> {
    let mut out = Vec::new();
    for message in messages {
        let Value::Object(message) = message else { continue };
        let Some(role) = role_of(message) else { continue };
        let mut parts = content_parts(message.get("content"));
        if role == "ROLE_AGENT" && !has_content(&parts) {
            continue;
        }
        if parts.is_empty() {
            parts.push(json!({"kind": "text", "text": ""}));
        }
        let id = message
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map_or_else(new_id, str::to_owned);
        out.push(json!({
            "kind": "message", "role": role, "parts": parts, "messageId": id, "taskId": task_id, "contextId": context_id,
        }));
    }
    let skip = length.map_or(0, |n| out.len().saturating_sub(n));
    out.split_off(skip)
}

/// The agent's reply in a run's result: the last AI message with content after the last human one.
fn reply_parts(result: &Value) -> Vec<Value> {
    let Some(messages) = result.get("messages").and_then(Value::as_array).filter(|m| !m.is_empty()) else {
        return vec![json!({"kind": "text", "text": weft_runnable_core::py::py_repr(result)})];
    };
    let roles: Vec<Option<&str>> = messages.iter().map(|m| m.as_object().and_then(role_of)).collect();
    let turn_start = roles.iter().rposition(|r| *r == Some("ROLE_USER")).map_or(0, |i| i + 1);
    for (message, role) in messages.iter().zip(&roles).skip(turn_start).rev() {
        if *role == Some("ROLE_AGENT") && message.get("content").is_some() {
            let parts = content_parts(message.get("content"));
            if has_content(&parts) {
                return parts;
            }
        }
    }
    vec![json!({"kind": "text", "text": ""})]
}

/// The task a finished run is, from its result.
fn task(task_id: &str, context_id: &str, result: &Value, assistant_id: &str, length: Option<usize>) -> Value {
    let messages = result.get("messages").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let mut task = json!({"kind": "task", "id": task_id, "contextId": context_id});
    if length != Some(0) {
        task["history"] = json!(history(messages, task_id, context_id, length));
    }
    if let Some(error) = result.get("__error__") {
        let name = error
            .get("error")
            .map_or_else(String::new, |e| e.as_str().map_or_else(|| e.to_string(), str::to_owned));
        task["status"] = json!({
            "state": "TASK_STATE_FAILED",
            "message": {
                "kind": "message", "role": "ROLE_AGENT",
                "parts": [{"kind": "text", "text": format!("Error executing assistant: {name}")}],
                "messageId": new_id(), "taskId": task_id, "contextId": context_id,
            },
        });
    } else if let Some(interrupts) = result.get("__interrupt__").and_then(Value::as_array) {
        let parts: Vec<Value> = interrupts
            .iter()
            .map(|i| json!({"kind": "data", "data": {"id": i.get("id"), "value": i.get("value")}}))
            .collect();
        task["status"] = json!({"state": "TASK_STATE_INPUT_REQUIRED", "timestamp": now()});
        task["artifacts"] = json!([{
            "artifactId": new_id(), "name": "Interrupt", "description": "Agent requires input to continue", "parts": parts,
        }]);
    } else {
        task["status"] = json!({"state": "TASK_STATE_COMPLETED", "timestamp": now()});
        task["artifacts"] = json!([{
            "artifactId": new_id(),
            "name": "Assistant Response",
            "description": format!("Response from assistant {assistant_id}"),
            "parts": reply_parts(result),
        }]);
    }
    task
}

/// A run's status as a task's state.
fn state_of(status: &str, thread_interrupted: bool) -> &'static str {
    match status {
        "pending" => "TASK_STATE_SUBMITTED",
        "running" => "TASK_STATE_WORKING",
        "success" if thread_interrupted => "TASK_STATE_INPUT_REQUIRED",
        "success" => "TASK_STATE_COMPLETED",
        "interrupted" => "TASK_STATE_CANCELED",
        "error" | "timeout" => "TASK_STATE_FAILED",
        _ => "TASK_STATE_SUBMITTED",
    }
}

/// `GetTask`: the task of a run of this assistant, its state and its thread's messages.
async fn get_task(
    app: &Arc<App>,
    caller: &Caller,
    params: &Map<String, Value>,
    assistant_id: &str,
) -> Outcome {
    let id = match params.get("id") {
        None | Some(Value::Null) => return Err(invalid("Missing required parameter: id (task_id)")),
        Some(Value::String(s)) if s.is_empty() => {
            return Err(invalid("Missing required parameter: id (task_id)"));
        }
        Some(id) => id,
    };
    let (Value::String(task_id), Ok(context)) =
        (id, optional_string(params, "contextId", "Task id and contextId must be strings"))
    else {
        return Err(invalid("Task id and contextId must be strings"));
    };
    let Some(found) = resolve(app, caller, task_id, context, assistant_id).await? else {
        let location = context.map(|c| format!(" in context '{c}'")).unwrap_or_default();
        return Err(jsonrpc::error(TASK_NOT_FOUND, format!("Task not found: {task_id}{location}")));
    };
    let length = history_length(params.get("historyLength"))?;
    let Found { context_id, run, state, .. } = found;
    let status = run.get("status").and_then(Value::as_str).unwrap_or("unknown");
    let timestamp =
        run.get("updated_at").or_else(|| run.get("created_at")).cloned().unwrap_or_else(|| json!(now()));
    let mut task = json!({"kind": "task", "id": task_id, "contextId": context_id, "status": {"state": state, "timestamp": timestamp}});
    if length != Some(0) {
        let answered = threads::get(State(Arc::clone(app)), caller.clone(), Path(context_id.clone())).await;
        let thread = loopback::read(answered).await.map(|a| a.body).unwrap_or_default();
        let messages =
            thread.pointer("/values/messages").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        task["history"] = json!(history(messages, task_id, &context_id, length));
    }
    let text = match state {
        "TASK_STATE_COMPLETED" => Some("Task completed successfully".to_owned()),
        "TASK_STATE_FAILED" => Some(format!("Task failed with status: {status}")),
        _ => None,
    };
    if let Some(text) = text {
        task["status"]["message"] = json!({
            "kind": "message", "role": "ROLE_AGENT", "parts": [{"kind": "text", "text": text}],
            "messageId": new_id(), "taskId": task_id,
        });
    }
    Ok(task)
}

/// The assistant's input and output modes: its metadata's `a2a.input_modes`/`a2a.output_modes`, or the
/// defaults.
fn modes(assistant: &Value) -> Result<(Vec<String>, Vec<String>), String> {
    let defaults = || DEFAULT_MODES.iter().map(|m| (*m).to_owned()).collect::<Vec<_>>();
    let a2a = match assistant.get("metadata") {
        None | Some(Value::Null) => return Ok((defaults(), defaults())),
        Some(Value::Object(metadata)) => metadata.get("a2a"),
        Some(_) => return Err("Assistant metadata must be an object.".to_owned()),
    };
    let a2a = match a2a {
        None | Some(Value::Null) => return Ok((defaults(), defaults())),
        Some(Value::Object(a2a)) => a2a,
        Some(_) => return Err("Assistant metadata.a2a must be an object.".to_owned()),
    };
    let field = |name: &str| -> Result<Vec<String>, String> {
        let error = || format!("Assistant metadata.a2a.{name} must be a non-empty array of strings.");
        match a2a.get(name) {
            None | Some(Value::Null) => Ok(defaults()),
            Some(Value::Array(items)) if !items.is_empty() => items
                .iter()
                .map(|m| {
                    m.as_str().map(str::trim).filter(|m| !m.is_empty()).map(str::to_owned).ok_or_else(error)
                })
                .collect(),
            Some(_) => Err(error()),
        }
    };
    Ok((field("input_modes")?, field("output_modes")?))
}

/// The server's address as the request reached it: `X-Forwarded-Proto` (else `http`) and `Host`.
fn base_url(headers: &HeaderMap) -> String {
    let value =
        |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty());
    let scheme = value("x-forwarded-proto").unwrap_or("http");
    let host = value("host").unwrap_or("localhost");
    let default_port = if scheme == "https" { ":443" } else { ":80" };
    format!("{scheme}://{}", host.strip_suffix(default_port).unwrap_or(host))
}

/// The agent card of an assistant; an error is the assistant missing or its A2A metadata invalid.
async fn agent_card(
    app: &Arc<App>,
    caller: &Caller,
    headers: &HeaderMap,
    assistant_id: &str,
) -> Result<Value, String> {
    let assistant = assistant(app, caller, assistant_id).await?;
    let schema = input_schema(app, caller, assistant_id).await?;
    let mut fields = property_names(&schema);
    fields.sort();
    let required = schema.get("required").cloned().unwrap_or_else(|| json!([]));
    let name = assistant.get("name").and_then(Value::as_str).unwrap_or_default();
    let description = match assistant.get("description").and_then(Value::as_str) {
        Some(d) if !d.is_empty() => d.to_owned(),
        _ => format!("{name} assistant"),
    };
    let (input_modes, output_modes) = modes(&assistant)?;
    let url = format!("{}/a2a/{assistant_id}", base_url(headers));
    Ok(json!({
        "name": name,
        "description": description,
        "url": url,
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": false, "pushNotifications": false, "stateTransitionHistory": false, "extensions": []},
        "defaultInputModes": input_modes,
        "defaultOutputModes": output_modes,
        "skills": [{
            "id": format!("{assistant_id}-main"),
            "name": format!("{name} Capabilities"),
            "description": description,
            "tags": ["assistant", "langgraph"],
            "examples": [],
            "inputModes": input_modes,
            "outputModes": output_modes,
            "metadata": {"inputSchema": {
                "required": required,
                "properties": fields,
                "supportsA2A": fields.iter().any(|f| f == "messages"),
            }},
        }],
        "version": env!("CARGO_PKG_VERSION"),
    }))
}

/// A card, or a `400` with a JSON-RPC error object.
async fn card_answer(app: &Arc<App>, caller: &Caller, headers: &HeaderMap, assistant_id: &str) -> Response {
    match agent_card(app, caller, headers, assistant_id).await {
        Ok(card) => reply::ok(&card),
        Err(message) => reply::json(StatusCode::BAD_REQUEST, &json!({"error": invalid(message)})),
    }
}

/// `GET /a2a/{assistant_id}` and its `/.well-known/agent-card.json` (or `agent.json`): the assistant's card.
pub(crate) async fn card(
    State(app): State<Arc<App>>,
    caller: Caller,
    Path(assistant_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    card_answer(&app, &caller, &headers, &assistant_id).await
}

/// `GET /.well-known/agent-card.json?assistant_id=`: the card of that assistant.
pub(crate) async fn root_card(
    State(app): State<Arc<App>>,
    caller: Caller,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    match query.get("assistant_id").filter(|id| !id.is_empty()) {
        Some(id) => card_answer(&app, &caller, &headers, id).await,
        None => {
            let error = invalid("Missing required query parameter: assistant_id");
            reply::json(StatusCode::BAD_REQUEST, &json!({"error": error}))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{accepts, legacy_form, state_of};

    #[test]
    fn accept_headers_and_wildcards() {
        assert!(accepts("application/json", "application/json"));
        assert!(accepts("text/html, */*;q=0.1", "application/json"));
        assert!(accepts("application/*", "application/json"));
        assert!(!accepts("text/*", "application/json"));
        assert!(!accepts("", "application/json"));
    }

    #[test]
    fn legacy_answers_are_lower_case_and_unwrapped() {
        let task = json!({"task": {"status": {"state": "TASK_STATE_INPUT_REQUIRED"}, "history": [{"role": "ROLE_AGENT"}]}});
        let legacy = legacy_form(Ok(task)).unwrap_or_default();
        assert_eq!(legacy, json!({"status": {"state": "input-required"}, "history": [{"role": "agent"}]}));
        assert_eq!(state_of("success", true), "TASK_STATE_INPUT_REQUIRED");
        assert_eq!(state_of("interrupted", false), "TASK_STATE_CANCELED");
        assert_eq!(state_of("timeout", false), "TASK_STATE_FAILED");
    }
}
