//! Reading request bodies: a size limit, JSON that parses, the route's schema, then the typed form.

use axum::body::Body;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::validate::{Schema, check};
use crate::error::{ApiError, ApiResult};

/// The body as JSON (an empty body is `{}`), over the size limit a `413`.
pub(crate) async fn json_value(body: Body, limit: usize) -> ApiResult<Value> {
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|e| {
        if crate::conn::is_body_timeout(&e) {
            return ApiError::new(StatusCode::REQUEST_TIMEOUT, "The request body did not arrive in time");
        }
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("Request body too large (limit: {limit} bytes)"))
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    serde_json::from_slice(&bytes).map_err(|_| ApiError::unprocessable("Invalid JSON in request body"))
}

/// The body checked against `schema` and read as `T`.
pub(crate) async fn read<T: DeserializeOwned>(
    body: Body,
    limit: usize,
    schema: &Schema,
) -> ApiResult<(T, Value)> {
    let value = json_value(body, limit).await?;
    check(schema, &value)?;
    let typed = serde_json::from_value(value.clone()).map_err(|e| ApiError::unprocessable(e.to_string()))?;
    Ok((typed, value))
}
