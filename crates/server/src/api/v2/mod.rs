//! The Agent Streaming Protocol (v2), thread-centric, as langgraph-api 0.16.7 serves it:
//! `POST /threads/{thread_id}/stream/events` (server-sent protocol events, filtered by the body's
//! channels, namespaces and depth, after its `since`) and `POST /threads/{thread_id}/commands`.
//!
//! A stream reads the thread's joined stream from its start (the kept events of its resumable runs, then
//! each run as it goes, and each run made after) through a [`session::Session`] of its own, which numbers
//! the protocol events; a reconnecting client passes the last `seq` it saw as `since` and gets what came
//! after. The stream stays open until the client leaves.

mod commands;
pub(crate) mod filter;
mod messages;
pub(crate) mod session;
mod state;
mod ws;

pub(crate) use self::ws::socket;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use self::filter::{Filter, count_of};
use self::session::{ProtocolEvent, Session};
use super::guard::Caller;
use super::reply::json as reply_json;
use super::sse::{cut, streamed_or_cut};
use super::thread_stream::{Joined, ThreadSse, join};
use crate::app::{App, require_uuid};
use crate::auth::Action;
use crate::error::ApiResult;
use crate::runs::channel::{Event, Replay};

type AppState = State<Arc<App>>;

/// The body as JSON, or the reference's `400` for anything that is not JSON.
async fn body_json(app: &App, body: Body) -> Result<Value, Response> {
    let invalid = || reply_json(StatusCode::BAD_REQUEST, &json!({"detail": "Invalid JSON body"}));
    let bytes = axum::body::to_bytes(body, app.limits.body_bytes).await.map_err(|_| invalid())?;
    serde_json::from_slice(&bytes).map_err(|_| invalid())
}

/// One protocol event as an SSE frame (its method as the event name, its `seq` as the id).
fn frame(event: &ProtocolEvent) -> String {
    format!("event: {}\r\ndata: {}\r\nid: {}\r\n\r\n", event.method, event.json, event.seq)
}

/// The graph a run runs, as the lifecycle names it.
async fn graph_name(app: &App, run_id: &str) -> (String, Option<String>) {
    let Ok(mut records) = app.records.read().await else { return ("root".to_owned(), None) };
    let Ok(Some(record)) = records.run(run_id).await else { return ("root".to_owned(), None) };
    let run = &record.run;
    let graph =
        run.kwargs.config.pointer("/configurable/graph_id").and_then(Value::as_str).map(str::to_owned);
    let assistant = run.assistant_id.clone();
    let status = serde_json::to_value(run.status).ok().and_then(|v| v.as_str().map(str::to_owned));
    drop(records);
    let graph = match graph {
        Some(graph) => graph,
        None => app.assistant(&assistant).await.map_or(assistant, |a| a.graph_id.clone()),
    };
    (graph, status)
}

/// A run's end: its status, `interrupted` when it left interrupts on the thread.
async fn end_status(app: &App, thread_id: &str, run_id: &str) -> String {
    let (_, status) = graph_name(app, run_id).await;
    let status = status.unwrap_or_else(|| "success".to_owned());
    if status == "success" {
        if let Ok(thread) = app.thread(thread_id).await {
            if thread.interrupts.values().any(|v| v.as_array().is_some_and(|l| !l.is_empty())) {
                return "interrupted".to_owned();
            }
        }
    }
    status
}

/// One listener of `stream/events`.
struct Listener {
    app: Arc<App>,
    thread_id: String,
    joined: ThreadSse,
    session: Session,
    filter: Filter,
    since: Option<u64>,
    pending: std::collections::VecDeque<Arc<ProtocolEvent>>,
}

/// Reads one event of the thread's stream into a session: a run's start and end (`metadata` events) or
/// one of its events.
pub(super) async fn read(app: &App, thread_id: &str, session: &mut Session, event: &Event) {
    if event.name != "metadata" {
        session.ingest(event);
        return;
    }
    let Ok(data) = serde_json::from_str::<Value>(&event.data) else { return };
    let Some(run_id) = data.get("run_id").and_then(Value::as_str) else { return };
    if data.get("status").and_then(Value::as_str) == Some("run_done") {
        if session.is_run(run_id) {
            let status = end_status(app, thread_id, run_id).await;
            session.end_run(&status);
        }
    } else if !session.is_run(run_id) {
        // The run's start moves the clock; its end (`run_done`, whose id is made when it is read) does
        // not, so every listener stamps the end with the time of the run's last event.
        session.tick(&event.id);
        let (graph, _) = graph_name(app, run_id).await;
        session.start_run(run_id, &graph);
    }
}

impl Listener {
    /// The next frame for the client; `None` when the stream ends (`Err` when cut).
    async fn next(&mut self) -> Option<Result<String, std::io::Error>> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(Ok(frame(&event)));
            }
            match self.joined.next_item().await {
                Some(Joined::Event(event)) => {
                    read(&self.app, &self.thread_id, &mut self.session, &event).await;
                    let (filter, since) = (&self.filter, self.since);
                    let made = self.session.take();
                    self.pending.extend(made.into_iter().filter(|e| {
                        since.is_none_or(|s| e.seq > s) && filter.takes(&e.method, &e.namespace, &e.data)
                    }));
                }
                Some(Joined::Heartbeat) => return Some(Ok(": heartbeat\r\n\r\n".to_owned())),
                None if self.joined.was_cut() => return Some(Err(cut())),
                None => return None,
            }
        }
    }
}

/// `POST /threads/{thread_id}/stream/events`.
pub(crate) async fn events(
    State(app): AppState,
    caller: Caller,
    Path(thread_id): Path<String>,
    body: Body,
) -> ApiResult<Response> {
    require_uuid(&thread_id, "thread")?;
    let body = match body_json(&app, body).await {
        Ok(body) => body,
        Err(response) => return Ok(response),
    };
    let filter = match Filter::from_stream_body(&body) {
        Ok(filter) => filter,
        Err(detail) => return Ok(reply_json(StatusCode::BAD_REQUEST, &json!({"detail": detail}))),
    };
    let since = count_of(body.get("since"));
    // A thread made later (by the first `run.start`) is followed once it is; one that exists must be
    // readable by the caller.
    if app.thread(&thread_id).await.is_ok() {
        app.thread_for(&caller, Action::Read, &thread_id).await?;
    }
    let joined = join(&app, &thread_id, Some(Replay::Skip(0)), vec!["run_modes".to_owned()]).await?;
    let listener = Listener {
        app: Arc::clone(&app),
        thread_id,
        joined,
        session: Session::new(app.limits.protocol_buffer),
        filter,
        since,
        pending: std::collections::VecDeque::new(),
    };
    let stream = futures::stream::unfold(listener, |mut listener| async move {
        listener.next().await.map(|item| (item, listener))
    });
    Ok(streamed_or_cut(stream))
}

/// `POST /threads/{thread_id}/commands`.
pub(crate) async fn commands(
    State(app): AppState,
    caller: Caller,
    Path(thread_id): Path<String>,
    body: Body,
) -> ApiResult<Response> {
    let command = match body_json(&app, body).await {
        Ok(command) => command,
        Err(response) => return Ok(response),
    };
    let well_formed = command.get("id").is_some_and(|id| id.is_i64() || id.is_u64())
        && command.get("method").is_some_and(Value::is_string);
    if !well_formed {
        let id = command.get("id").cloned().unwrap_or(Value::Null);
        let message = "Protocol commands must include an integer id and string method.";
        return Ok(reply_json(StatusCode::BAD_REQUEST, &commands::error(&id, "invalid_argument", message)));
    }
    Ok(super::reply::ok(&commands::handle(&app, &caller, &thread_id, &command).await))
}
