//! The protocol's WebSocket on `/threads/{thread_id}/stream/events`, as langgraph-api serves it: the socket
//! reads the thread from its start through a session of its own; each event goes out once when one of the
//! socket's subscriptions takes it. Commands come in as text frames and are answered on the socket:
//! `subscription.subscribe` (replaying the matching events kept), `subscription.reconnect` (replaying after
//! its `since`, or `resume_gap`), `subscription.unsubscribe`, `agent.getTree`, and the HTTP commands
//! (`run.start`, `input.respond`). The socket closes (1011) if the thread's stream ends.

use std::sync::Arc;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::response::Response;
use serde_json::{Value, json};

use super::commands::{error, handle_at, success};
use super::filter::{Filter, count_of};
use super::session::{ProtocolEvent, Session};
use super::{AppState, read};
use crate::api::guard::Caller;
use crate::api::thread_stream::{Joined, ThreadSse, join};
use crate::app::{App, new_id, require_uuid};
use crate::auth::Action;
use crate::error::ApiResult;
use crate::runs::channel::Replay;

/// One socket's state.
struct Socket {
    app: Arc<App>,
    caller: Caller,
    thread_id: String,
    session: Session,
    subscriptions: Vec<(String, Filter)>,
}

/// A subscription's filter from a command's params, or the reference's error for it.
fn filter_of(id: &Value, params: &Value, method: &str) -> Result<Filter, Value> {
    Filter::from_params(params).ok_or_else(|| {
        let listed = params.get("channels").and_then(Value::as_array).is_some_and(|c| !c.is_empty());
        let message = if listed {
            format!("{method} received an unsupported channel.")
        } else {
            format!("{method} requires a non-empty channels array.")
        };
        error(id, "invalid_argument", message)
    })
}

impl Socket {
    fn meta(&self) -> Value {
        json!({"applied_through_seq": self.session.seq()})
    }

    fn with_meta(&self, mut answer: Value) -> Value {
        if let Some(a) = answer.as_object_mut() {
            a.insert("meta".to_owned(), self.meta());
        }
        answer
    }

    /// Whether one of the subscriptions takes `event`.
    fn wanted(&self, event: &ProtocolEvent) -> bool {
        self.subscriptions.iter().any(|(_, f)| f.takes(&event.method, &event.namespace, &event.data))
    }

    /// Installs a subscription after the kept events it takes (after `since`): the replay, and the answer.
    fn install(
        &mut self,
        id: &Value,
        sub_id: String,
        filter: Filter,
        since: Option<u64>,
    ) -> (Vec<String>, Value) {
        let kept = match self.session.replay(since) {
            Ok(kept) => kept,
            Err(gap) => {
                let answer = json!({"type": "error", "id": id, "error": "resume_gap", "message": gap.to_string(),
                    "since": gap.since, "min_available_seq": gap.min_available_seq});
                return (Vec::new(), self.with_meta(answer));
            }
        };
        let replay: Vec<String> = kept
            .iter()
            .filter(|e| filter.takes(&e.method, &e.namespace, &e.data))
            .map(|e| e.json.clone())
            .collect();
        let count = replay.len();
        self.subscriptions.push((sub_id.clone(), filter));
        (
            replay,
            success(id, json!({"subscription_id": sub_id, "replayed_events": count}), self.session.seq()),
        )
    }

    /// Whether an `input.respond` names an interrupt this socket saw asked for in another namespace (an
    /// omitted namespace is the root).
    fn namespace_mismatch(&self, params: &Value) -> bool {
        let one = [params.clone()];
        let entries = params.get("responses").and_then(Value::as_array).map_or(&one[..], Vec::as_slice);
        entries.iter().any(|entry| {
            let Some(id) = entry.get("interrupt_id").and_then(Value::as_str) else { return false };
            let Some(pending) = self.session.interrupt_namespace(id) else { return false };
            let claimed: Vec<String> = entry
                .get("namespace")
                .and_then(Value::as_array)
                .map(|ns| ns.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default();
            claimed != pending
        })
    }

    /// Answers one command: the frames to send (a replay, then the answer).
    async fn command(&mut self, command: &Value) -> Vec<String> {
        let id = command.get("id").cloned().unwrap_or(Value::Null);
        let method = command.get("method").and_then(Value::as_str).unwrap_or_default();
        let empty = json!({});
        let params = command.get("params").filter(|p| p.is_object()).unwrap_or(&empty);
        let answer = match method {
            "subscription.subscribe" => match filter_of(&id, params, method) {
                Ok(filter) => {
                    let (mut frames, answer) = self.install(&id, new_id(), filter, None);
                    frames.push(answer.to_string());
                    return frames;
                }
                Err(answer) => self.with_meta(answer),
            },
            "subscription.reconnect" => match (filter_of(&id, params, method), count_of(params.get("since")))
            {
                (Err(answer), _) => self.with_meta(answer),
                (Ok(_), None) => self.with_meta(error(
                    &id,
                    "invalid_argument",
                    "subscription.reconnect requires a non-negative integer since.",
                )),
                (Ok(_), Some(_)) if !self.session.has_run() => {
                    error(&id, "no_such_run", "No active run is bound to this thread.")
                }
                (Ok(filter), Some(since)) => {
                    let sub_id =
                        params.get("subscription_id").and_then(Value::as_str).filter(|s| !s.is_empty());
                    let sub_id = sub_id.map_or_else(new_id, str::to_owned);
                    let (mut frames, answer) = self.install(&id, sub_id, filter, Some(since));
                    frames.push(answer.to_string());
                    return frames;
                }
            },
            "subscription.unsubscribe" => match params.get("subscription_id").and_then(Value::as_str) {
                None => {
                    error(&id, "invalid_argument", "subscription.unsubscribe requires a subscription_id.")
                }
                Some(sub) if self.subscriptions.iter().any(|(own, _)| own == sub) => {
                    self.subscriptions.retain(|(own, _)| own != sub);
                    success(&id, json!({}), self.session.seq())
                }
                Some(sub) => error(&id, "no_such_subscription", format!("Unknown subscription: {sub}")),
            },
            "input.respond" if self.namespace_mismatch(params) => {
                error(&id, "no_such_interrupt", "Interrupt namespace does not match the pending interrupt.")
            }
            "agent.getTree" if self.session.has_run() => {
                success(&id, json!({"tree": self.session.tree(&[])}), self.session.seq())
            }
            _ => handle_at(&self.app, &self.caller, &self.thread_id, command, self.session.seq()).await,
        };
        vec![answer.to_string()]
    }
}

/// A text frame's answer: its command's, or the reference's error for a frame that is not one.
async fn text_frame(socket: &mut Socket, text: &str) -> Vec<String> {
    let Ok(command) = serde_json::from_str::<Value>(text) else {
        let message = "Protocol commands must be valid JSON.";
        return vec![error(&Value::Null, "invalid_argument", message).to_string()];
    };
    let well_formed = command.get("id").is_some_and(|id| id.is_i64() || id.is_u64())
        && command.get("method").is_some_and(Value::is_string);
    if !well_formed {
        let id = command.get("id").cloned().unwrap_or(Value::Null);
        let message = "Protocol commands must include an integer id and string method.";
        return vec![error(&id, "invalid_argument", message).to_string()];
    }
    socket.command(&command).await
}

/// Sends frames; false when the client is gone.
async fn send_all(ws: &mut WebSocket, frames: Vec<String>) -> bool {
    for frame in frames {
        if ws.send(Message::Text(frame.into())).await.is_err() {
            return false;
        }
    }
    true
}

/// Serves one socket until the client leaves or the thread's stream ends.
async fn serve(mut ws: WebSocket, mut socket: Socket, mut joined: ThreadSse) {
    loop {
        tokio::select! {
            incoming = ws.recv() => match incoming {
                Some(Ok(Message::Text(text))) => {
                    let frames = text_frame(&mut socket, text.as_str()).await;
                    if !send_all(&mut ws, frames).await {
                        return;
                    }
                }
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => {}
            },
            item = joined.next_item() => match item {
                Some(Joined::Event(event)) => {
                    read(&socket.app, &socket.thread_id, &mut socket.session, &event).await;
                    let made = socket.session.take();
                    let frames: Vec<String> = made.iter().filter(|e| socket.wanted(e)).map(|e| e.json.clone()).collect();
                    if !send_all(&mut ws, frames).await {
                        return;
                    }
                }
                Some(Joined::Heartbeat) => {}
                None => {
                    let close = CloseFrame { code: 1011, reason: "thread stream ended".into() };
                    let _ = ws.send(Message::Close(Some(close))).await;
                    return;
                }
            },
        }
    }
}

/// `GET /threads/{thread_id}/stream/events` (a WebSocket upgrade).
pub(crate) async fn socket(
    State(app): AppState,
    caller: Caller,
    Path(thread_id): Path<String>,
    upgrade: WebSocketUpgrade,
) -> ApiResult<Response> {
    require_uuid(&thread_id, "thread")?;
    if app.thread(&thread_id).await.is_ok() {
        app.thread_for(&caller, Action::Read, &thread_id).await?;
    }
    let joined = join(&app, &thread_id, Some(Replay::Skip(0)), vec!["run_modes".to_owned()]).await?;
    let session = Session::new(app.limits.protocol_buffer);
    let socket = Socket { app, caller, thread_id, session, subscriptions: Vec::new() };
    Ok(upgrade.on_upgrade(move |ws| serve(ws, socket, joined)))
}
