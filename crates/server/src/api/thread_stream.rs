//! `GET /threads/{thread_id}/stream`: LangGraph's join of a whole thread. The stream carries the events of
//! every run on the thread while it goes (the runs going when it is joined, and each run made after),
//! a `metadata` event `{"status": "run_done", "run_id"}` when a run ends, and the thread's own
//! `state_update` events (`{"state", "thread_id"}`, when its state is written). It never ends by itself:
//! the client leaves. `stream_mode` (the SDK's name; `stream_modes`, LangGraph's, works too) picks
//! `run_modes` (every run event, the default), `lifecycle` (only the start and end of runs) and
//! `state_update`; `Last-Event-ID` first replays what the thread's resumable runs kept after that id. A
//! thread the caller may not read (or that does not exist) gets a stream of one `error` event, as
//! LangGraph answers it.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use super::guard::Caller;
use super::sse::{cut, frame, streamed, streamed_or_cut};
use crate::app::{App, require_uuid};
use crate::auth::Action;
use crate::error::{ApiError, ApiResult};
use crate::model::RunRecord;
use crate::runs::channel::{Event, Replay, RunChannel, Subscription, id_after, parse_id};
use crate::runs::feed;
use crate::runs::taps::ThreadItem;
use crate::storage::RunHead;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use futures::StreamExt as _;
use futures::stream::{BoxStream, SelectAll};
use serde_json::{Value, json};

type AppState = State<Arc<App>>;

/// LangGraph's thread stream modes.
const MODES: [&str; 3] = ["run_modes", "lifecycle", "state_update"];

/// The modes asked for (`stream_mode` or `stream_modes`, repeated or comma-separated); `run_modes` when
/// none.
fn modes(query: &[(String, String)]) -> ApiResult<Vec<String>> {
    let mut modes = Vec::new();
    for (_, value) in query.iter().filter(|(k, _)| k == "stream_mode" || k == "stream_modes") {
        for mode in value.split(',').map(str::trim).filter(|m| !m.is_empty()) {
            if !MODES.contains(&mode) {
                return Err(ApiError::unprocessable(format!("Invalid stream mode: {mode}")));
            }
            modes.push(mode.to_owned());
        }
    }
    if modes.is_empty() {
        modes.push("run_modes".to_owned());
    }
    Ok(modes)
}

/// Whether an event goes to a listener of `modes` (LangGraph's `should_filter_event`, negated).
fn passes(event: &Event, modes: &[String]) -> bool {
    let has = |m: &str| modes.iter().any(|own| own == m);
    if event.name == "state_update" {
        return has("state_update");
    }
    if has("run_modes") {
        return true;
    }
    has("lifecycle") && event.name == "metadata" && {
        let data: Value = serde_json::from_str(&event.data).unwrap_or(Value::Null);
        data.get("status").and_then(Value::as_str) == Some("run_done")
            || (data.get("attempt").is_some() && data.get("run_id").is_some())
    }
}

/// A `Last-Event-ID` as LangGraph takes it (a Redis stream id: `<ms>`, `<ms>-<seq>`, `<ms>-*`, or `-` for
/// everything), as the events to replay; a `422` for any other.
fn replay_of(last_event_id: &str) -> ApiResult<Replay> {
    let invalid = || ApiError::unprocessable("Invalid last-event-id: must be a valid Redis stream ID");
    if last_event_id == "-" {
        return Ok(Replay::Skip(0));
    }
    let (ms, seq) = last_event_id.split_once('-').map_or((last_event_id, None), |(ms, seq)| (ms, Some(seq)));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(ms) {
        return Err(invalid());
    }
    let ms: i128 = ms.parse().map_err(|_| invalid())?;
    match seq {
        // The whole millisecond came before: replay from the next one.
        None | Some("*") => Ok(Replay::After((ms, i128::MAX))),
        Some(seq) if digits(seq) => Ok(Replay::After((ms, seq.parse().map_err(|_| invalid())?))),
        Some(_) => Err(invalid()),
    }
}

/// The `run_done` event of a run whose last event had the id `last`.
fn run_done(run_id: &str, last: Option<&str>) -> Arc<Event> {
    Arc::new(Event {
        id: id_after(last),
        name: "metadata".to_owned(),
        data: json!({"status": "run_done", "run_id": run_id}).to_string(),
    })
}

/// A run's live events, then its `run_done`; `None` when the listener fell behind and was cut.
fn live_run(
    run_id: String,
    live: feed::Receiver<Arc<Event>>,
    last: Option<String>,
) -> BoxStream<'static, Option<Arc<Event>>> {
    futures::stream::unfold(Some((live, last)), move |state| {
        let run_id = run_id.clone();
        async move {
            let (mut live, last) = state?;
            match live.recv().await {
                Some(event) => {
                    let id = Some(event.id.clone());
                    Some((Some(event), Some((live, id))))
                }
                None if live.was_cut() => Some((None, None)),
                None => Some((Some(run_done(&run_id, last.as_deref())), None)),
            }
        }
    })
    .boxed()
}

/// One item of a thread's joined stream.
pub(crate) enum Joined {
    /// An event of one of the thread's runs (or of the thread itself).
    Event(Arc<Event>),
    /// Nothing came for the keep-alive interval.
    Heartbeat,
}

/// The thread's stream, as one listener reads it; when it ends (the client left), the thread forgets it.
pub(crate) struct ThreadSse {
    app: Arc<App>,
    thread_id: String,
    replay: VecDeque<Arc<Event>>,
    taps: feed::Receiver<ThreadItem>,
    runs: SelectAll<BoxStream<'static, Option<Arc<Event>>>>,
    /// The listener fell behind (on the thread or one of its runs) and was cut: the body ends in error.
    cut: bool,
    /// The runs followed (scaled out, a run may be told of twice: by this instance and through Redis).
    followed: HashSet<String>,
    modes: Vec<String>,
    keep_alive: Duration,
}

impl Drop for ThreadSse {
    fn drop(&mut self) {
        self.taps.close();
        self.app.thread_taps.prune(&self.thread_id);
    }
}

impl ThreadSse {
    /// Adds a run's events: the replayed ones to the replay, the live ones to the runs followed. A run
    /// followed already is not followed again.
    fn follow(&mut self, run_id: String, subscription: Subscription) {
        if !self.followed.insert(run_id.clone()) {
            return;
        }
        let last = subscription.replay.last().map(|e| e.id.clone());
        self.replay.extend(subscription.replay);
        if let Some(live) = subscription.live {
            self.runs.push(live_run(run_id, live, last));
        }
    }

    /// Adds a finished run's kept events after `replay`, then its end (when it kept any).
    fn replay_finished(&mut self, run_id: &str, channel: &RunChannel, replay: Replay) {
        let subscription = channel.subscribe_from(Some(replay));
        let kept = channel.subscribe_from(Some(Replay::Skip(0))).replay;
        let done = run_done(run_id, kept.last().map(|e| e.id.as_str()));
        let after = match replay {
            Replay::After(after) => parse_id(&done.id).is_some_and(|own| own > after),
            Replay::Skip(_) => true,
        };
        self.follow(run_id.to_owned(), subscription);
        if after && !kept.is_empty() {
            self.replay.push_back(done);
        }
    }

    /// The next event for the listener (or a heartbeat after a silence); `None` when the stream ends
    /// (see [`ThreadSse::was_cut`]).
    pub(crate) async fn next_item(&mut self) -> Option<Joined> {
        loop {
            if let Some(event) = self.replay.pop_front() {
                if passes(&event, &self.modes) {
                    return Some(Joined::Event(event));
                }
                continue;
            }
            let event = tokio::select! {
                item = self.taps.recv() => match item {
                    Some(ThreadItem::Run { run_id, subscription }) => {
                        self.follow(run_id, subscription);
                        continue;
                    }
                    Some(ThreadItem::Event(event)) => event,
                    None => {
                        self.cut = self.taps.was_cut();
                        return None;
                    }
                },
                Some(event) = self.runs.next(), if !self.runs.is_empty() => match event {
                    Some(event) => event,
                    None => {
                        self.cut = true;
                        return None;
                    }
                },
                () = tokio::time::sleep(self.keep_alive) => return Some(Joined::Heartbeat),
            };
            if passes(&event, &self.modes) {
                return Some(Joined::Event(event));
            }
        }
    }

    /// Whether the stream ended because the listener fell behind.
    pub(crate) fn was_cut(&self) -> bool {
        self.cut
    }

    async fn next(&mut self) -> Option<String> {
        match self.next_item().await? {
            Joined::Event(event) => Some(frame(&event, true)),
            Joined::Heartbeat => Some(": heartbeat\r\n\r\n".to_owned()),
        }
    }
}

/// Joins the thread's stream (the caller's access already checked): the runs going now and each run made
/// after, with the kept events of its runs that `replay` picks first, in the order they were made.
pub(crate) async fn join(
    app: &Arc<App>,
    thread_id: &str,
    replay: Option<Replay>,
    modes: Vec<String>,
) -> ApiResult<ThreadSse> {
    let mut sse = ThreadSse {
        app: Arc::clone(app),
        thread_id: thread_id.to_owned(),
        replay: VecDeque::new(),
        // Replaced below, under the records' lock.
        taps: feed::channel(0).1,
        runs: SelectAll::new(),
        cut: false,
        followed: HashSet::new(),
        modes,
        keep_alive: app.limits.keep_alive,
    };
    // Scaled out, runs made elsewhere come through the thread's stream in Redis, read from what it holds
    // now: a run made after this is either among the records read below or announced after it.
    #[cfg(feature = "scale")]
    let start = match &app.scale {
        Some(scale) => Some(scale.thread_start(thread_id).await),
        None => None,
    };
    // Finished resumable runs whose events this instance does not hold (scaled out: read from Redis).
    let mut elsewhere = Vec::new();
    let (tx, rx) = feed::channel(feed::LISTENER_BYTES);
    {
        // Under the records' lock, as runs are made: each run is either seen here or told to the tap.
        let mut records = app.records.lock(crate::storage::Key::Thread(thread_id)).await?;
        // Memory holds every live run (scaled out, brought up to date as the lock is taken); the table
        // is read for the finished ones only when they are replayed.
        let runs: Vec<RunHead> = match replay {
            Some(_) => records.thread_run_heads(thread_id).await?,
            None => {
                let mut active: Vec<&RunRecord> = records.active_runs(thread_id).collect();
                active.sort_by(|a, b| {
                    (&a.run.created_at, &a.run.run_id).cmp(&(&b.run.created_at, &b.run.run_id))
                });
                active.into_iter().map(|r| RunHead::of(&r.run)).collect()
            }
        };
        for run in runs {
            if run.status.is_active() {
                let channel = app.channels.open(&run.run_id, run.resumable);
                sse.follow(run.run_id.clone(), channel.subscribe_from(replay));
            } else if let Some(replay) = replay {
                // A finished run's kept events, and its end.
                match app.channels.get(&run.run_id) {
                    Some(channel) => sse.replay_finished(&run.run_id, &channel, replay),
                    None if run.resumable && app.channels.is_remote() => elsewhere.push(run.run_id),
                    None => {}
                }
            }
        }
        app.thread_taps.listen_with(thread_id, tx.clone());
        sse.taps = rx;
    }
    #[cfg(feature = "scale")]
    if let (Some(scale), Some(start)) = (&app.scale, start) {
        scale.feed_thread(app, thread_id, start, tx);
    }
    if let Some(replay) = replay {
        // Their streams are read to their ends (kept, as the runs are resumable), all at once, before they
        // are replayed.
        let opened: Vec<_> = elsewhere.into_iter().map(|id| (app.channels.open(&id, true), id)).collect();
        let read = futures::future::join_all(opened.iter().map(|(channel, _)| channel.finished()));
        if tokio::time::timeout(Duration::from_secs(5), read).await.is_err() {
            tracing::warn!(thread_id, "the thread's finished runs are not all read from Redis after 5 s");
        }
        for (channel, run_id) in opened {
            sse.replay_finished(&run_id, &channel, replay);
        }
    }
    // Replayed events in the order they were made, across runs.
    sse.replay.make_contiguous().sort_by_key(|e| parse_id(&e.id));
    Ok(sse)
}

/// `GET /threads/{thread_id}/stream`.
pub(crate) async fn stream(
    State(app): AppState,
    caller: Caller,
    Path(thread_id): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    require_uuid(&thread_id, "thread")?;
    let replay = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(replay_of)
        .transpose()?;
    let modes = modes(&query)?;
    // A thread the caller may not read answers as one that does not exist; as in LangGraph, the refusal
    // comes in the stream, as its only event.
    if let Err(e) = app.thread_for(&caller, Action::Read, &thread_id).await {
        let detail = if e.status == StatusCode::NOT_FOUND { "Thread not found" } else { e.detail.as_str() };
        let message = format!("{}: {detail}", e.status.as_u16());
        let refused = Event {
            id: String::new(),
            name: "error".to_owned(),
            data: json!({"error": "HTTPException", "message": message}).to_string(),
        };
        return Ok(streamed(futures::stream::once(async move { frame(&refused, false) })));
    }
    let sse = join(&app, &thread_id, replay, modes).await?;
    let stream = futures::stream::unfold(Some(sse), |sse| async move {
        let mut sse = sse?;
        match sse.next().await {
            Some(text) => Some((Ok(text), Some(sse))),
            None if sse.cut => Some((Err(cut()), None)),
            None => None,
        }
    });
    Ok(streamed_or_cut(stream))
}

/// Whether the thread may have listeners (scaled out, they may be on any instance: always).
pub(crate) fn is_heard(app: &App, thread_id: &str) -> bool {
    #[cfg(feature = "scale")]
    if app.scale.is_some() {
        return true;
    }
    app.thread_taps.is_heard(thread_id)
}

/// Tells the thread's listeners that its state was written (LangGraph's `state_update`); scaled out,
/// through the thread's stream in Redis, which every instance's listeners read.
pub(crate) fn state_updated(app: &App, thread_id: &str, state: Value) {
    let data = json!({"state": state, "thread_id": thread_id}).to_string();
    #[cfg(feature = "scale")]
    if let Some(scale) = &app.scale {
        scale.publish_thread_event(thread_id, "state_update", data);
        return;
    }
    app.thread_taps.publish(thread_id, "state_update", data);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, data: Value) -> Event {
        Event { id: "1-0".into(), name: name.into(), data: data.to_string() }
    }

    #[test]
    fn modes_are_checked_and_default_to_run_modes() {
        let q = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
        };
        assert_eq!(modes(&q(&[])).unwrap(), ["run_modes"]);
        assert_eq!(
            modes(&q(&[("stream_mode", "lifecycle"), ("stream_mode", "state_update")])).unwrap(),
            ["lifecycle", "state_update"]
        );
        assert_eq!(
            modes(&q(&[("stream_modes", "lifecycle,run_modes")])).unwrap(),
            ["lifecycle", "run_modes"]
        );
        let e = modes(&q(&[("stream_mode", "values")])).unwrap_err();
        assert_eq!((e.status.as_u16(), e.detail.as_str()), (422, "Invalid stream mode: values"));
    }

    #[test]
    fn lifecycle_passes_only_starts_and_ends_of_runs() {
        let lifecycle = vec!["lifecycle".to_owned()];
        assert!(passes(&event("metadata", json!({"run_id": "r", "attempt": 1})), &lifecycle));
        assert!(passes(&event("metadata", json!({"status": "run_done", "run_id": "r"})), &lifecycle));
        assert!(!passes(&event("values", json!({})), &lifecycle));
        assert!(!passes(&event("state_update", json!({})), &lifecycle));
        let runs = vec!["run_modes".to_owned()];
        assert!(passes(&event("values", json!({})), &runs));
        assert!(!passes(&event("state_update", json!({})), &runs));
        assert!(passes(&event("state_update", json!({})), &["state_update".to_owned()]));
    }

    #[test]
    fn last_event_ids_are_redis_stream_ids() {
        assert_eq!(replay_of("-").unwrap(), Replay::Skip(0));
        assert_eq!(replay_of("12-3").unwrap(), Replay::After((12, 3)));
        assert_eq!(replay_of("12").unwrap(), Replay::After((12, i128::MAX)));
        assert_eq!(replay_of("12-*").unwrap(), Replay::After((12, i128::MAX)));
        for bad in ["-1", "x", "12-", "12-x", "1-2-3", ""] {
            let e = replay_of(bad).unwrap_err();
            assert_eq!(e.detail, "Invalid last-event-id: must be a valid Redis stream ID", "{bad}");
        }
    }
}
