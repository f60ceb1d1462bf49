//! The streamed bodies: a run's events as server-sent events (CRLF framing, `id:` lines for resumable
//! runs, a heartbeat comment after 5 s of silence by default), and `/wait` and `/join` answers (chunked
//! JSON with a newline every 5 s while the run goes on). A client that goes away can cancel the run.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use futures::StreamExt as _;
use serde_json::Value;

use super::reply::with_header;
use crate::runs::Started;
use crate::runs::channel::{CancelAction, Event, RunChannel, Subscription};
use crate::runs::feed::{self, Empty};
use crate::runs::modes::event_matches;

/// Cancels the run when dropped while armed: the client went away before the run ended.
#[derive(Debug)]
struct Disconnect {
    channel: Arc<RunChannel>,
    armed: bool,
}

impl Drop for Disconnect {
    fn drop(&mut self) {
        if self.armed {
            self.channel.cancel(CancelAction::Interrupt);
        }
    }
}

/// One event as SSE text.
pub(crate) fn frame(event: &Event, with_id: bool) -> String {
    let mut out = String::with_capacity(event.name.len() + event.data.len() + 40);
    push_frame(&mut out, event, with_id);
    out
}

/// Appends one event as SSE text to `out`.
fn push_frame(out: &mut String, event: &Event, with_id: bool) {
    out.push_str("event: ");
    out.push_str(&event.name);
    out.push_str("\r\ndata: ");
    out.push_str(&event.data);
    out.push_str("\r\n");
    if with_id {
        out.push_str("id: ");
        out.push_str(&event.id);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
}

/// How much text of events already published one chunk of the body takes at most (more waits for the
/// next chunk).
const CHUNK_BYTES: usize = 64 * 1024;

struct Sse {
    replay: VecDeque<Arc<Event>>,
    live: Option<feed::Receiver<Arc<Event>>>,
    /// The listener fell behind and was cut: the body ends in error once what it was given is out.
    cut: bool,
    filter: Vec<String>,
    with_ids: bool,
    disconnect: Disconnect,
    /// How long a quiet stream waits before it sends a heartbeat.
    keep_alive: Duration,
    /// The run, started as it was made, driven here before the first chunk (see [`Options::started`]).
    started: Option<Started>,
}

impl Sse {
    /// The next chunk of the body: the next event, with the events published since that are already
    /// there (one write for all of them), or a heartbeat; `None` once the run's events are over.
    async fn next(&mut self) -> Option<String> {
        if let Some(started) = self.started.take() {
            started.run_inline().await;
        }
        loop {
            let passes = |e: &Event, filter: &[String]| event_matches(&e.name, filter);
            if let Some(event) = self.replay.pop_front() {
                if passes(&event, &self.filter) {
                    return Some(frame(&event, true));
                }
                continue;
            }
            let live = self.live.as_mut()?;
            // An event already there needs no timer.
            let first = match live.try_recv() {
                Ok(event) => Some(event),
                Err(Empty::Ended) => None,
                Err(Empty::Waiting) => match tokio::time::timeout(self.keep_alive, live.recv()).await {
                    Ok(event) => event,
                    Err(_) => return Some(": heartbeat\r\n\r\n".to_owned()),
                },
            };
            let mut out = String::new();
            let mut ended = first.is_none();
            if let Some(event) = first {
                if passes(&event, &self.filter) {
                    push_frame(&mut out, &event, self.with_ids);
                }
                while out.len() < CHUNK_BYTES {
                    match live.try_recv() {
                        Ok(event) if passes(&event, &self.filter) => {
                            push_frame(&mut out, &event, self.with_ids)
                        }
                        Ok(_) => {}
                        Err(Empty::Waiting) => break,
                        Err(Empty::Ended) => {
                            ended = true;
                            break;
                        }
                    }
                }
            }
            if ended {
                // A cut client is expected back (with `Last-Event-ID`): its leaving cancels nothing.
                self.cut = live.was_cut();
                self.live = None;
                self.disconnect.armed = false;
            }
            if !out.is_empty() {
                return Some(out);
            }
            if ended {
                return None;
            }
        }
    }
}

/// How a stream of a run's events is sent.
#[derive(Debug)]
pub(crate) struct Options {
    /// The modes a listener asked for (none: every event).
    pub(crate) filter: Vec<String>,
    /// Whether events carry their ids.
    pub(crate) resumable: bool,
    /// Whether the client going away cancels the run.
    pub(crate) cancel_on_disconnect: bool,
    /// The run itself, when it was started as it was made for this stream: the body drives it before its
    /// first chunk, in the connection's task, as far as it goes without waiting. A run that never waits
    /// (no I/O, no contended lock) thus runs to its end with no hand-off between tasks, and all its events
    /// go out in one write; one that waits goes on in a task of its own from there, as any other. A body
    /// dropped before it is polled hands the run to a task too.
    pub(crate) started: Option<Started>,
}

/// An SSE response of a run's events: `subscription`'s replayed events (with their ids), then its live
/// ones, filtered as `options` say; a heartbeat comment after `keep_alive` of silence.
pub(crate) fn events(
    keep_alive: Duration,
    subscription: Subscription,
    channel: Arc<RunChannel>,
    options: Options,
    location: &str,
    content_location: &str,
) -> Response {
    let Options { filter, resumable, cancel_on_disconnect, started } = options;
    let state = Sse {
        replay: subscription.replay.into(),
        live: subscription.live,
        cut: false,
        filter,
        with_ids: resumable,
        disconnect: Disconnect { channel, armed: cancel_on_disconnect },
        keep_alive,
        started,
    };
    let stream = futures::stream::unfold(Some(state), |state| async move {
        let mut state = state?;
        match state.next().await {
            Some(text) => Some((Ok(text), Some(state))),
            None if state.cut => Some((Err(cut()), None)),
            None => None,
        }
    });
    let response = streamed_or_cut(stream);
    let response = with_header(response, "location", location);
    with_header(response, "content-location", content_location)
}

/// The error a cut stream ends in: the connection is dropped mid-body, which clients take as a failure
/// to reconnect from (the SDK does, to `Location`, with `Last-Event-ID`), not as the run's end.
pub(crate) fn cut() -> std::io::Error {
    std::io::Error::other("the client fell behind the run's events: reconnect with Last-Event-ID")
}

/// An SSE response of `texts` (frames and heartbeats).
pub(crate) fn streamed(texts: impl futures::Stream<Item = String> + Send + 'static) -> Response {
    streamed_or_cut(texts.map(Ok::<_, std::io::Error>))
}

/// An SSE response of `texts`, cut (the connection dropped) at an error.
pub(crate) fn streamed_or_cut(
    texts: impl futures::Stream<Item = Result<String, std::io::Error>> + Send + 'static,
) -> Response {
    let mut response = Response::new(Body::from_stream(texts.boxed()));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream; charset=utf-8"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// A `/wait` or `/join` response: a newline every `keep_alive` until the run ends, then `answer()` as
/// JSON.
pub(crate) fn wait<F>(
    keep_alive: Duration,
    channel: Arc<RunChannel>,
    cancel_on_disconnect: bool,
    location: &str,
    content_location: &str,
    answer: F,
) -> Response
where
    F: Fn(Option<Value>) -> futures::future::BoxFuture<'static, Value> + Send + Sync + 'static,
{
    let disconnect = Disconnect { channel: Arc::clone(&channel), armed: cancel_on_disconnect };
    let state = (Some(disconnect), Arc::new(answer));
    let stream = futures::stream::unfold(state, move |(disconnect, answer)| {
        let channel = Arc::clone(&channel);
        async move {
            let mut disconnect = disconnect?;
            match tokio::time::timeout(keep_alive, channel.finished()).await {
                Err(_) => Some((Ok::<_, std::io::Error>("\n".to_owned()), (Some(disconnect), answer))),
                Ok(()) if channel.is_drained() => {
                    // The server is shutting down and the run goes on at its next start: no answer,
                    // the body is cut (the client joins the run again).
                    disconnect.armed = false;
                    Some((Err(std::io::Error::other("the server is shutting down")), (None, answer)))
                }
                Ok(()) => {
                    disconnect.armed = false;
                    let body = answer(channel.result()).await;
                    Some((Ok(body.to_string()), (None, answer)))
                }
            }
        }
    });
    let mut response = Response::new(Body::from_stream(stream.boxed()));
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let response = with_header(response, "location", location);
    with_header(response, "content-location", content_location)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_use_crlf_and_ids_follow_the_data() {
        let event = Event { id: "1-0".into(), name: "values".into(), data: "{\"a\":1}".into() };
        assert_eq!(frame(&event, false), "event: values\r\ndata: {\"a\":1}\r\n\r\n");
        assert_eq!(frame(&event, true), "event: values\r\ndata: {\"a\":1}\r\nid: 1-0\r\n\r\n");
    }

    fn event(name: &str) -> Arc<Event> {
        Arc::new(Event { id: "1-0".into(), name: name.into(), data: "{}".into() })
    }

    #[tokio::test]
    async fn events_already_there_go_out_in_one_chunk_then_a_heartbeat_then_the_end() {
        let (tx, rx) = feed::channel(feed::LISTENER_BYTES);
        let channel = Arc::new(RunChannel::new(false));
        let mut sse = Sse {
            replay: VecDeque::new(),
            live: Some(rx),
            cut: false,
            filter: vec!["values".into()],
            with_ids: false,
            disconnect: Disconnect { channel, armed: true },
            keep_alive: Duration::from_millis(20),
            started: None,
        };
        for name in ["values", "updates", "values"] {
            assert!(tx.send(event(name)));
        }
        let both = "event: values\r\ndata: {}\r\n\r\n".repeat(2);
        assert_eq!(sse.next().await.as_deref(), Some(both.as_str()), "the update is filtered out");
        assert_eq!(sse.next().await.as_deref(), Some(": heartbeat\r\n\r\n"));
        assert!(tx.send(event("values")));
        drop(tx);
        assert_eq!(sse.next().await.as_deref(), Some("event: values\r\ndata: {}\r\n\r\n"));
        assert!(!sse.disconnect.armed, "the run's end disarms the cancel on disconnect");
        assert_eq!(sse.next().await, None);
    }
}
