//! The HTTP routes, LangGraph's paths and methods.

mod a2a;
mod assistants;
pub(crate) mod body;
mod cors;
mod crons;
pub(crate) mod guard;
mod jsonrpc;
mod loopback;
mod mcp;
mod metrics;
mod openapi;
pub(crate) mod reply;
pub(crate) mod requests;
mod runs;
mod sse;
mod state;
mod store;
mod thread_stream;
pub(crate) mod threads;
pub(crate) mod v2;
pub(crate) mod validate;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::Method;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{MethodFilter, MethodRouter, on};
use serde_json::json;

use crate::app::App;
use crate::error::ApiError;

/// `GET /ok`.
async fn health() -> Response {
    reply::ok(&json!({"ok": true, "services": {}}))
}

/// `GET /info`.
async fn info() -> Response {
    reply::ok(&json!({
        "version": env!("CARGO_PKG_VERSION"),
        "server": "weft",
        "flags": {"assistants": true, "crons": true, "langsmith": false},
        "host": {"kind": "self-hosted", "project_id": null, "host_revision_id": null, "revision_id": null, "tenant_id": null},
    }))
}

async fn not_found() -> ApiError {
    ApiError::not_found("Not Found")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
}

/// One method of a route: its method, what it does (the OpenAPI summary), its handler.
struct Endpoint {
    method: Method,
    summary: &'static str,
    handler: MethodRouter<Arc<App>>,
}

/// A path and its methods.
pub(crate) struct Route {
    path: &'static str,
    endpoints: Vec<Endpoint>,
}

impl Route {
    fn new(path: &'static str) -> Self {
        Self { path, endpoints: Vec::new() }
    }

    fn on<H, T>(mut self, method: Method, summary: &'static str, handler: H) -> Self
    where
        H: axum::handler::Handler<T, Arc<App>>,
        T: 'static,
    {
        let filter = match method {
            Method::GET => MethodFilter::GET,
            Method::POST => MethodFilter::POST,
            Method::PUT => MethodFilter::PUT,
            Method::PATCH => MethodFilter::PATCH,
            _ => MethodFilter::DELETE,
        };
        self.endpoints.push(Endpoint { method, summary, handler: on(filter, handler) });
        self
    }

    fn get<H: axum::handler::Handler<T, Arc<App>>, T: 'static>(self, summary: &'static str, h: H) -> Self {
        self.on(Method::GET, summary, h)
    }

    fn post<H: axum::handler::Handler<T, Arc<App>>, T: 'static>(self, summary: &'static str, h: H) -> Self {
        self.on(Method::POST, summary, h)
    }

    fn put<H: axum::handler::Handler<T, Arc<App>>, T: 'static>(self, summary: &'static str, h: H) -> Self {
        self.on(Method::PUT, summary, h)
    }

    fn patch<H: axum::handler::Handler<T, Arc<App>>, T: 'static>(self, summary: &'static str, h: H) -> Self {
        self.on(Method::PATCH, summary, h)
    }

    fn delete<H: axum::handler::Handler<T, Arc<App>>, T: 'static>(self, summary: &'static str, h: H) -> Self {
        self.on(Method::DELETE, summary, h)
    }
}

/// Every route of the server: the router and `/openapi.json` are both made from this table.
pub(crate) fn routes() -> Vec<Route> {
    vec![
        Route::new("/ok").get("Health check", health),
        Route::new("/info").get("Server information", info),
        Route::new("/openapi.json").get("This document", openapi::serve),
        Route::new("/metrics").get("Run counts and latencies, in Prometheus' text format", metrics::serve),
        Route::new("/assistants").post("Create an assistant", assistants::create),
        Route::new("/assistants/search").post("Search assistants", assistants::search),
        Route::new("/assistants/count").post("Count assistants", assistants::count),
        Route::new("/assistants/{assistant_id}")
            .get("Get an assistant", assistants::get)
            .patch("Update an assistant (a new version)", assistants::patch)
            .delete("Delete an assistant", assistants::delete),
        Route::new("/assistants/{assistant_id}/graph").get("Draw an assistant's graph", assistants::graph),
        Route::new("/assistants/{assistant_id}/subgraphs")
            .get("An assistant's subgraphs", assistants::subgraphs),
        Route::new("/assistants/{assistant_id}/subgraphs/{namespace}")
            .get("An assistant's subgraphs under a namespace", assistants::subgraphs),
        Route::new("/assistants/{assistant_id}/schemas").get("An assistant's schemas", assistants::schemas),
        Route::new("/assistants/{assistant_id}/versions")
            .post("An assistant's versions", assistants::versions),
        Route::new("/assistants/{assistant_id}/latest")
            .post("Make a version the assistant's latest", assistants::latest),
        Route::new("/threads").post("Create a thread", threads::create),
        Route::new("/threads/search").post("Search threads", threads::search),
        Route::new("/threads/count").post("Count threads", threads::count),
        Route::new("/threads/prune").post("Delete threads or prune their checkpoints", threads::prune),
        Route::new("/threads/{thread_id}")
            .get("Get a thread", threads::get)
            .patch("Update a thread's metadata", threads::patch)
            .delete("Delete a thread", threads::delete),
        Route::new("/threads/{thread_id}/copy").post("Copy a thread", threads::copy),
        Route::new("/threads/{thread_id}/stream").get("Join a thread's stream", thread_stream::stream),
        Route::new("/threads/{thread_id}/stream/events")
            .post("Agent Streaming Protocol: the thread's protocol events (SSE)", v2::events)
            .get(
                "Agent Streaming Protocol: the thread's protocol events and commands (WebSocket)",
                v2::socket,
            ),
        Route::new("/threads/{thread_id}/commands")
            .post("Agent Streaming Protocol: one command", v2::commands),
        Route::new("/threads/{thread_id}/state")
            .get("A thread's latest state", state::get)
            .post("Update a thread's state", state::update),
        Route::new("/threads/{thread_id}/state/checkpoint")
            .post("A thread's state at a checkpoint", state::post_at),
        Route::new("/threads/{thread_id}/state/{checkpoint_id}")
            .get("A thread's state at a checkpoint", state::get_at),
        Route::new("/threads/{thread_id}/history")
            .get("A thread's past states", state::history_get)
            .post("A thread's past states, filtered", state::history_post),
        Route::new("/threads/{thread_id}/runs")
            .get("A thread's runs", runs::list)
            .post("Start a run in the background", runs::create),
        Route::new("/threads/{thread_id}/runs/stream").post("Start a run and stream it", runs::stream),
        Route::new("/threads/{thread_id}/runs/wait").post("Start a run and wait for its end", runs::wait),
        Route::new("/threads/{thread_id}/runs/crons")
            .post("Create a cron on a thread", crons::create_for_thread),
        Route::new("/threads/{thread_id}/runs/{run_id}")
            .get("Get a run", runs::get)
            .delete("Delete a run", runs::delete),
        Route::new("/threads/{thread_id}/runs/{run_id}/join").get("Wait for a run's end", runs::join),
        Route::new("/threads/{thread_id}/runs/{run_id}/stream").get("Join a run's stream", runs::join_stream),
        Route::new("/threads/{thread_id}/runs/{run_id}/cancel").post("Cancel a run", runs::cancel),
        Route::new("/runs").post("Start a stateless run in the background", runs::create_stateless),
        Route::new("/runs/stream").post("Start a stateless run and stream it", runs::stream_stateless),
        Route::new("/runs/wait").post("Start a stateless run and wait for its end", runs::wait_stateless),
        Route::new("/runs/batch").post("Start several stateless runs", runs::batch),
        Route::new("/runs/cancel").post("Cancel runs", runs::cancel_many),
        Route::new("/runs/crons").post("Create a stateless cron", crons::create_stateless),
        Route::new("/runs/crons/search").post("Search crons", crons::search),
        Route::new("/runs/crons/count").post("Count crons", crons::count),
        Route::new("/runs/crons/{cron_id}")
            .get("Get a cron", crons::get)
            .patch("Update a cron", crons::patch)
            .delete("Delete a cron", crons::delete),
        Route::new("/store/items")
            .get("Get a store item", store::get)
            .put("Put a store item", store::put)
            .delete("Delete a store item", store::delete),
        Route::new("/store/items/search").post("Search store items", store::search),
        Route::new("/store/namespaces").post("List store namespaces", store::namespaces),
        // `GET /mcp` (no event stream) and `DELETE /a2a/{assistant_id}` (no session) are the router's 405.
        Route::new("/mcp")
            .post("MCP: one JSON-RPC message, each assistant a tool", mcp::post)
            .delete("MCP: no session to end (404)", mcp::delete),
        Route::new("/a2a/{assistant_id}")
            .get("A2A: the assistant's agent card", a2a::card)
            .post("A2A: one JSON-RPC message to the assistant", a2a::post),
        Route::new("/a2a/{assistant_id}/.well-known/agent-card.json")
            .get("A2A: the assistant's agent card", a2a::card),
        Route::new("/a2a/{assistant_id}/.well-known/agent.json")
            .get("A2A: the assistant's agent card", a2a::card),
        Route::new("/.well-known/agent-card.json")
            .get("A2A: the agent card of `?assistant_id=`", a2a::root_card),
    ]
}

/// Every route of the server.
pub(crate) fn router(app: Arc<App>) -> Router {
    let mut router = Router::new();
    for route in routes() {
        let mut methods: Option<MethodRouter<Arc<App>>> = None;
        for endpoint in route.endpoints {
            methods = Some(match methods {
                None => endpoint.handler,
                Some(m) => m.merge(endpoint.handler),
            });
        }
        if let Some(methods) = methods {
            router = router.route(route.path, methods);
        }
    }
    let routed = router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        // Bodies are read with the server's own limit and error text.
        .layer(DefaultBodyLimit::disable())
        // Every request but `/ok` and `/info` authenticates, unknown routes too (as in LangGraph).
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&app), guard::authenticate))
        .layer(axum::middleware::from_fn(cors::cors))
        .with_state(app)
        // The studio's files carry no data: served without authentication (its API calls authenticate).
        .merge(crate::studio::router());
    // Ids in paths are read as LangGraph reads them, before routing: every form of one UUID is one id.
    Router::new().fallback_service(routed).layer(axum::middleware::map_request(canonical_path))
}

/// The request with each path segment that is a UUID in another form (upper case, `urn:uuid:…`,
/// braces) written in the canonical one.
async fn canonical_path(mut request: axum::extract::Request) -> axum::extract::Request {
    let uri = request.uri();
    let path = uri.path();
    let segments: Vec<String> = path.split('/').map(canonical_segment).collect();
    let rewritten = segments.join("/");
    if rewritten != path {
        let target = match uri.query() {
            Some(query) => format!("{rewritten}?{query}"),
            None => rewritten,
        };
        let mut parts = uri.clone().into_parts();
        if let Ok(path_and_query) = target.parse() {
            parts.path_and_query = Some(path_and_query);
            if let Ok(uri) = axum::http::Uri::from_parts(parts) {
                *request.uri_mut() = uri;
            }
        }
    }
    request
}

/// A path segment: a UUID in any of its forms as the canonical one, anything else as it is.
fn canonical_segment(segment: &str) -> String {
    let decoded = percent_decoded(segment);
    match uuid::Uuid::parse_str(&decoded) {
        Ok(id) => id.hyphenated().to_string(),
        Err(_) => segment.to_owned(),
    }
}

/// `%XX` escapes decoded (a segment that does not decode to UTF-8 is kept as it is).
fn percent_decoded(segment: &str) -> String {
    if !segment.contains('%') {
        return segment.to_owned();
    }
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| segment.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_of_a_uuid_is_the_canonical_one() {
        let id = "01a22356-c2bf-773d-aca8-9ecf26ecb1b4";
        for form in [
            id.to_uppercase(),
            format!("urn:uuid:{id}"),
            format!("%7B{id}%7D"),
            format!("{{{id}}}"),
            id.replace('-', ""),
            format!("urn%3Auuid%3A{id}"),
        ] {
            assert_eq!(canonical_segment(&form), id, "{form}");
        }
        for other in ["simple", "not-a-uuid", "%zz", "%E2%82", ""] {
            assert_eq!(canonical_segment(other), other);
        }
    }
}
