//! Building responses: JSON bodies (compact, `application/json`), empty ones, pagination headers.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde::Serialize;

/// A JSON response.
pub(crate) fn json<T: Serialize + ?Sized>(status: StatusCode, body: &T) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_else(|e| {
        tracing::error!(error = %e, "cannot encode a response");
        b"null".to_vec()
    });
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A `200` JSON response.
pub(crate) fn ok<T: Serialize + ?Sized>(body: &T) -> Response {
    json(StatusCode::OK, body)
}

/// A response with no body.
pub(crate) fn empty(status: StatusCode) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    response
}

/// Adds a header whose value is built from request data; a value that cannot be a header is left out.
pub(crate) fn with_header(mut response: Response, name: &'static str, value: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(value) {
        response.headers_mut().insert(name, value);
    }
    response
}

/// A page of `items` with only the `select`ed fields of each (every field without a selection).
pub(crate) fn selected_page<T: Serialize>(
    items: &[T],
    select: Option<&[String]>,
    total: usize,
    offset: usize,
) -> Response {
    let Some(select) = select.filter(|s| !s.is_empty()) else { return page(items, total, offset) };
    let picked: Vec<serde_json::Value> = items
        .iter()
        .map(|item| match serde_json::to_value(item) {
            Ok(serde_json::Value::Object(mut map)) => {
                map.retain(|k, _| select.contains(k));
                serde_json::Value::Object(map)
            }
            Ok(other) => other,
            Err(e) => {
                tracing::error!(error = %e, "cannot encode a response");
                serde_json::Value::Null
            }
        })
        .collect();
    page(&picked, total, offset)
}

/// A list with LangGraph's `x-pagination-total` header (`x-pagination-next` when more follow).
pub(crate) fn page<T: Serialize>(items: &[T], total: usize, offset: usize) -> Response {
    let response = with_header(ok(items), "x-pagination-total", &total.to_string());
    let next = offset + items.len();
    if next < total { with_header(response, "x-pagination-next", &next.to_string()) } else { response }
}
