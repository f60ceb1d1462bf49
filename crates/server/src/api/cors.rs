//! Cross-origin requests, as LangGraph's server answers them: any origin, preflights answered with the
//! methods and the headers asked for, and the pagination and location headers readable by browser clients.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

const METHODS: &str = "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT, QUERY";
const EXPOSED: &str = "x-pagination-total, x-pagination-next, content-location";

/// Answers preflights itself; adds the CORS headers to every answer to a request from a browser.
pub(crate) async fn cors(request: Request, next: Next) -> Response {
    let origin = request.headers().contains_key(header::ORIGIN);
    let preflight = request.method() == Method::OPTIONS
        && origin
        && request.headers().contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    if preflight {
        let mut response = Response::new(Body::from("OK"));
        *response.status_mut() = StatusCode::OK;
        let asked = request.headers().get(header::ACCESS_CONTROL_REQUEST_HEADERS).cloned();
        let private = request.headers().contains_key("access-control-request-private-network");
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
        headers.insert(
            header::VARY,
            HeaderValue::from_static("Origin, Access-Control-Request-Method, Access-Control-Request-Headers"),
        );
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
        headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(METHODS));
        headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
        if let Some(asked) = asked {
            headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, asked);
        }
        if private {
            headers.insert("access-control-allow-private-network", HeaderValue::from_static("true"));
        }
        return response;
    }
    let mut response = next.run(request).await;
    if origin {
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
        headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSED));
        headers.insert(header::VARY, HeaderValue::from_static("Origin"));
    }
    response
}
