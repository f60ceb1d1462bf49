//! A route's handler called in-process on a caller's behalf, its answer read back as JSON. `/mcp` and
//! `/a2a` act through the API's own routes this way (as LangGraph's server does through its own client), so
//! authorization, validation and errors are those of the routes they use.

use axum::body::Body;
use axum::http::header::CONTENT_LOCATION;
use axum::response::Response;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};

/// A successful answer: its JSON body and its `Content-Location` header, when it has one.
pub(super) struct Answer {
    /// The body (`null` when empty).
    pub(super) body: Value,
    /// The `Content-Location` header (a run's path, for the routes that start one).
    pub(super) location: Option<String>,
}

/// A request body holding `value`.
pub(super) fn body(value: &Value) -> Body {
    Body::from(value.to_string())
}

/// The handler's answer read to its end: a success as an [`Answer`], an error status as the [`ApiError`]
/// with the answer's `detail`.
pub(super) async fn read(answered: ApiResult<Response>) -> ApiResult<Answer> {
    let response = answered?;
    let status = response.status();
    let location = response.headers().get(CONTENT_LOCATION).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .map_err(|e| ApiError::internal(format!("cannot read an answer: {e}")))?;
    let body = if bytes.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::internal(format!("cannot read an answer: {e}")))?
    };
    if !status.is_success() {
        let detail = match body.get("detail") {
            Some(Value::String(detail)) => detail.clone(),
            Some(other) => other.to_string(),
            None => status.canonical_reason().unwrap_or("error").to_owned(),
        };
        return Err(ApiError::new(status, detail));
    }
    Ok(Answer { body, location })
}
