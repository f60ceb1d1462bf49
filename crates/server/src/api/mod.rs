//! The HTTP routes, LangGraph's paths and methods.

mod assistants;
pub(crate) mod body;
mod cors;
pub(crate) mod guard;
pub(crate) mod reply;
pub(crate) mod requests;
mod runs;
mod sse;
mod state;
mod store;
mod threads;
pub(crate) mod validate;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
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
        "flags": {"assistants": true, "crons": false, "langsmith": false},
        "host": {"kind": "self-hosted", "project_id": null, "host_revision_id": null, "revision_id": null, "tenant_id": null},
    }))
}

async fn not_found() -> ApiError {
    ApiError::not_found("Not Found")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
}

/// Every route of the server.
pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/assistants", post(assistants::create))
        .route("/assistants/search", post(assistants::search))
        .route("/assistants/count", post(assistants::count))
        .route(
            "/assistants/{assistant_id}",
            get(assistants::get).patch(assistants::patch).delete(assistants::delete),
        )
        .route("/assistants/{assistant_id}/graph", get(assistants::graph))
        .route("/assistants/{assistant_id}/subgraphs", get(assistants::subgraphs))
        .route("/assistants/{assistant_id}/subgraphs/{namespace}", get(assistants::subgraphs))
        .route("/assistants/{assistant_id}/schemas", get(assistants::schemas))
        .route("/assistants/{assistant_id}/versions", post(assistants::versions))
        .route("/assistants/{assistant_id}/latest", post(assistants::latest))
        .route("/threads", post(threads::create))
        .route("/threads/search", post(threads::search))
        .route("/threads/count", post(threads::count))
        .route("/threads/prune", post(threads::prune))
        .route("/threads/{thread_id}", get(threads::get).patch(threads::patch).delete(threads::delete))
        .route("/threads/{thread_id}/copy", post(threads::copy))
        .route("/threads/{thread_id}/state", get(state::get).post(state::update))
        .route("/threads/{thread_id}/state/checkpoint", post(state::post_at))
        .route("/threads/{thread_id}/state/{checkpoint_id}", get(state::get_at))
        .route("/threads/{thread_id}/history", get(state::history_get).post(state::history_post))
        .route("/threads/{thread_id}/runs", get(runs::list).post(runs::create))
        .route("/threads/{thread_id}/runs/stream", post(runs::stream))
        .route("/threads/{thread_id}/runs/wait", post(runs::wait))
        .route("/threads/{thread_id}/runs/{run_id}", get(runs::get).delete(runs::delete))
        .route("/threads/{thread_id}/runs/{run_id}/join", get(runs::join))
        .route("/threads/{thread_id}/runs/{run_id}/stream", get(runs::join_stream))
        .route("/threads/{thread_id}/runs/{run_id}/cancel", post(runs::cancel))
        .route("/runs", post(runs::create_stateless))
        .route("/runs/stream", post(runs::stream_stateless))
        .route("/runs/wait", post(runs::wait_stateless))
        .route("/runs/batch", post(runs::batch))
        .route("/runs/cancel", post(runs::cancel_many))
        .route("/store/items", get(store::get).put(store::put).delete(store::delete))
        .route("/store/items/search", post(store::search))
        .route("/store/namespaces", post(store::namespaces))
        .route("/ok", get(health))
        .route("/info", get(info))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        // Bodies are read with the server's own limit and error text.
        .layer(DefaultBodyLimit::disable())
        // Every request but `/ok` and `/info` authenticates, unknown routes too (as in LangGraph).
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&app), guard::authenticate))
        .layer(axum::middleware::from_fn(cors::cors))
        .with_state(app)
}
