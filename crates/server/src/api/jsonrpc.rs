//! JSON-RPC 2.0 answers of `/mcp` and `/a2a`: error codes, error objects, replies.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::reply;

/// Invalid JSON was received.
pub(super) const PARSE_ERROR: i64 = -32700;
/// The JSON is not a valid request object.
pub(super) const INVALID_REQUEST: i64 = -32600;
/// The method does not exist.
pub(super) const METHOD_NOT_FOUND: i64 = -32601;
/// The method's parameters are invalid.
pub(super) const INVALID_PARAMS: i64 = -32602;
/// The server failed to answer.
pub(super) const INTERNAL_ERROR: i64 = -32603;

/// What a method answers: its result, or an error object.
pub(super) type Outcome = Result<Value, Value>;

/// An error object.
pub(super) fn error(code: i64, message: impl Into<String>) -> Value {
    json!({"code": code, "message": message.into()})
}

/// The `200` reply to the request `id`.
pub(super) fn reply(id: &Value, outcome: Outcome) -> Response {
    match outcome {
        Ok(result) => reply::ok(&json!({"jsonrpc": "2.0", "id": id, "result": result})),
        Err(error) => reply::ok(&json!({"jsonrpc": "2.0", "id": id, "error": error})),
    }
}

/// An HTTP error with `{"error": message}` (the transport refusing a message before JSON-RPC reads it).
pub(super) fn http_error(status: StatusCode, message: &str) -> Response {
    reply::json(status, &json!({"error": message}))
}
