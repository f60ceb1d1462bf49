//! A run's event channel: what the worker publishes (SSE events with resumable ids), who listens, the
//! events kept for replay (resumable runs only, as in LangGraph), and the cancel signal.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, watch};

use weft_runnable_core::QueueGate;

use super::feed;

/// One event of a run's stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    /// `<ms>-<seq>`: the resumable id.
    pub(crate) id: String,
    /// The SSE event name (`values`, `updates|ns`, `metadata`, `error`, ...).
    pub(crate) name: String,
    /// The data line: compact JSON.
    pub(crate) data: String,
}

/// Which kept events a listener replays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replay {
    /// Those whose id comes after `(ms, seq)`.
    After((i128, i128)),
    /// All but the first n.
    Skip(usize),
}

/// How a cancel asks the run to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CancelAction {
    /// Stop, keeping what the run saved (the run ends `interrupted`).
    Interrupt,
    /// Stop and undo the run (the run is deleted).
    Rollback,
}

/// What a listener gets: the events to replay, then the live ones (`None` when the run is over), at most
/// [`feed::LISTENER_BYTES`] of them waiting for the client (a listener that falls further behind is cut).
#[derive(Debug)]
pub(crate) struct Subscription {
    pub(crate) replay: Vec<Arc<Event>>,
    pub(crate) live: Option<feed::Receiver<Arc<Event>>>,
}

/// A listener: where its events go, and the id it has seen up to (events up to it are not sent again).
#[derive(Debug)]
struct Listener {
    tx: feed::Sender<Arc<Event>>,
    after: Option<(i128, i128)>,
}

impl Listener {
    /// Sends `event` unless the listener has seen it; false when the listener is gone or was cut.
    fn send(&self, event: &Arc<Event>) -> bool {
        if self.after.is_some_and(|after| parse_id(&event.id).is_some_and(|own| own <= after)) {
            return true;
        }
        self.tx.send(Arc::clone(event))
    }
}

/// What a worker's channel sends elsewhere instead of to listeners of this process (a scaled-out server
/// publishes every event through Redis, and every instance's listeners read them from there).
#[cfg_attr(not(feature = "scale"), allow(dead_code))]
#[derive(Debug)]
pub(crate) enum Outgoing {
    /// An event of the run.
    Event {
        /// The SSE event name.
        name: String,
        /// The data line.
        data: String,
    },
    /// The run has ended; what `/wait` and `/join` answer.
    End(Option<serde_json::Value>),
    /// Answers once everything sent before it is out.
    Flush(tokio::sync::oneshot::Sender<()>),
}

impl Outgoing {
    /// The bytes it holds, as the outlet's bound counts them.
    pub(crate) fn weight(&self) -> usize {
        match self {
            Outgoing::Event { name, data } => name.len() + data.len(),
            Outgoing::End(_) | Outgoing::Flush(_) => 0,
        }
    }
}

/// The most bytes of events a worker's channel holds for Redis (queued or in flight) before its run waits.
///
/// Redis holds the run's stream for every listener on every instance, resumable by id: an event dropped
/// there is a gap nobody can replay. So when Redis is slow, the run waits for it ([`RunChannel::room`])
/// instead of dropping events, as LangGraph's API server awaits each publish; a batch Redis refuses for
/// about a minute (the publisher's retries) is dropped, and the run goes on.
#[cfg_attr(not(feature = "scale"), allow(dead_code))]
pub(crate) const OUTLET_BYTES: usize = 4 << 20;

/// Where a worker's channel sends its events: a queue to the task that publishes them, bounded in bytes
/// by a gate that the publisher counts off once Redis has them.
#[derive(Debug, Clone)]
pub(crate) struct Outlet {
    tx: mpsc::UnboundedSender<Outgoing>,
    gate: QueueGate,
}

impl Outlet {
    /// An outlet of at most `bytes` (the publisher's end second).
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    pub(crate) fn bounded(bytes: usize) -> (Self, OutletReceiver) {
        let (tx, rx) = mpsc::unbounded_channel();
        let gate = QueueGate::new(bytes);
        (Self { tx, gate: gate.clone() }, OutletReceiver { rx, gate })
    }

    fn send(&self, item: Outgoing) -> bool {
        let weight = item.weight();
        let sent = self.tx.send(item).is_ok();
        if sent {
            self.gate.add(weight);
        }
        sent
    }
}

/// The publisher's end of an [`Outlet`]; closes the outlet's bound when dropped.
#[derive(Debug)]
pub(crate) struct OutletReceiver {
    rx: mpsc::UnboundedReceiver<Outgoing>,
    gate: QueueGate,
}

#[cfg_attr(not(feature = "scale"), allow(dead_code))]
impl OutletReceiver {
    /// The next item; `None` once every sender is gone.
    pub(crate) async fn recv(&mut self) -> Option<Outgoing> {
        self.rx.recv().await
    }

    /// The next item if one is queued.
    pub(crate) fn try_recv(&mut self) -> Option<Outgoing> {
        self.rx.try_recv().ok()
    }

    /// Counts `bytes` of items ([`Outgoing::weight`]) as out (sent, or given up on): room for the run.
    pub(crate) fn done(&self, bytes: usize) {
        self.gate.take(bytes);
    }
}

impl Drop for OutletReceiver {
    fn drop(&mut self) {
        self.gate.close();
    }
}

/// Asks for a cancel beyond this process (the worker of the run may be another instance).
pub(crate) type CancelHook = Box<dyn Fn(CancelAction) + Send + Sync>;

#[derive(Default)]
struct Remote {
    outlet: Option<Outlet>,
    cancel: Option<CancelHook>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("outlet", &self.outlet.is_some())
            .field("cancel", &self.cancel.is_some())
            .finish()
    }
}

#[derive(Debug, Default)]
struct State {
    resumable: bool,
    kept: Vec<Arc<Event>>,
    listeners: Vec<Listener>,
    finished: bool,
    /// What `/wait` and `/join` answer, once the run has ended.
    result: Option<serde_json::Value>,
    /// Finished by a shutdown, not by the run's end: the run goes on at the next start.
    drained: bool,
    /// The last id given: (milliseconds, sequence within that millisecond).
    last: (u64, u64),
}

/// The channel of one run.
#[derive(Debug)]
pub(crate) struct RunChannel {
    state: Mutex<State>,
    remote: Remote,
    cancel: watch::Sender<Option<CancelAction>>,
    done: watch::Sender<bool>,
    /// Noted by each event published and, through the run's config, by the engine's steps and saves.
    progress: weft_graph::Progress,
}

/// The milliseconds since the epoch.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// An id for an event published outside a run's channel: `<ms>-0`, now.
pub(crate) fn id_now() -> String {
    format!("{}-0", now_ms())
}

/// The id following both `after` (an id given before, if any) and now: `<ms>-0` now, or the next
/// sequence number of `after`'s millisecond when that is not past yet.
pub(crate) fn id_after(after: Option<&str>) -> String {
    let now = i128::from(now_ms());
    match after.and_then(parse_id) {
        Some((ms, seq)) if ms >= now => format!("{ms}-{}", seq + 1),
        _ => format!("{now}-0"),
    }
}

/// An event id as `(ms, seq)`: `<ms>-<seq>`, or a plain integer `n` (LangGraph's index form: events after
/// the n-th, so `-1` replays everything).
pub(crate) fn parse_id(id: &str) -> Option<(i128, i128)> {
    match id.split_once('-') {
        Some((ms, seq)) if !ms.is_empty() => Some((ms.parse().ok()?, seq.parse().ok()?)),
        _ => None,
    }
}

impl RunChannel {
    pub(crate) fn new(resumable: bool) -> Self {
        Self {
            state: Mutex::new(State { resumable, ..State::default() }),
            remote: Remote::default(),
            cancel: watch::channel(None).0,
            done: watch::channel(false).0,
            progress: weft_graph::Progress::new(),
        }
    }

    /// The run's sign of life (what the watchdog reads).
    pub(crate) fn progress(&self) -> &weft_graph::Progress {
        &self.progress
    }

    /// A worker's channel whose events, end and result go to `outlet` instead of to listeners here.
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    pub(crate) fn with_outlet(resumable: bool, outlet: Outlet) -> Self {
        let mut channel = Self::new(resumable);
        channel.remote.outlet = Some(outlet);
        channel
    }

    /// A listener's channel whose cancels also go to `hook` (to the run's worker, wherever it is).
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    pub(crate) fn with_cancel_hook(resumable: bool, hook: CancelHook) -> Self {
        let mut channel = Self::new(resumable);
        channel.remote.cancel = Some(hook);
        channel
    }

    /// Hands an event read elsewhere (with its id there) to the listeners, and keeps it when the run is
    /// resumable. Events must come in the order of their ids.
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    pub(crate) fn deliver(&self, id: String, name: String, data: String) {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let event = Arc::new(Event { id, name, data });
        if state.resumable {
            state.kept.push(Arc::clone(&event));
        }
        state.listeners.retain(|listener| listener.send(&event));
    }

    /// Whether the run's events are kept for replays.
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    pub(crate) fn is_resumable(&self) -> bool {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner).resumable
    }

    /// Whether someone still listens to the run's live events.
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    pub(crate) fn is_heard(&self) -> bool {
        let state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        state.listeners.iter().any(|listener| !listener.tx.is_closed())
    }

    /// Whether the run has finished.
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    pub(crate) fn is_finished(&self) -> bool {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner).finished
    }

    /// Waits until everything this worker's channel sent elsewhere is out (at once without an outlet).
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    pub(crate) async fn flush(&self) {
        if let Some(outlet) = &self.remote.outlet {
            let (tx, rx) = tokio::sync::oneshot::channel();
            if outlet.send(Outgoing::Flush(tx)) {
                let _ = rx.await;
            }
        }
    }

    /// Waits while the events this worker's channel sent elsewhere hold [`OUTLET_BYTES`] not yet out (at
    /// once without an outlet, or once its publisher is gone). The run waits here between its chunks.
    pub(crate) async fn room(&self) {
        if let Some(outlet) = &self.remote.outlet {
            outlet.gate.ready().await;
        }
    }

    /// Publishes an event to every listener (and keeps it when the run is resumable). Returns the event.
    pub(crate) fn publish(&self, name: impl Into<String>, data: String) -> Arc<Event> {
        self.progress.note();
        if let Some(outlet) = &self.remote.outlet {
            let name = name.into();
            outlet.send(Outgoing::Event { name: name.clone(), data: data.clone() });
            return Arc::new(Event { id: String::new(), name, data });
        }
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let ms = now_ms();
        let (last_ms, last_seq) = state.last;
        state.last = if ms > last_ms { (ms, 0) } else { (last_ms, last_seq + 1) };
        let event =
            Arc::new(Event { id: format!("{}-{}", state.last.0, state.last.1), name: name.into(), data });
        if state.resumable {
            state.kept.push(Arc::clone(&event));
        }
        state.listeners.retain(|listener| listener.send(&event));
        event
    }

    /// Listens from now on, after replaying the kept events that come after `last_event_id` (none without
    /// one).
    pub(crate) fn subscribe(&self, last_event_id: Option<&str>) -> Subscription {
        let after = last_event_id.map(|id| match (parse_id(id), id.trim().parse::<i64>()) {
            (Some(after), _) => Replay::After(after),
            (None, Ok(index)) => Replay::Skip(usize::try_from(index.saturating_add(1)).unwrap_or(0)),
            (None, Err(_)) => Replay::Skip(usize::MAX),
        });
        self.subscribe_from(after)
    }

    /// Listens from now on, after replaying the kept events `replay` picks (none without one).
    pub(crate) fn subscribe_from(&self, replay: Option<Replay>) -> Subscription {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let after = match &replay {
            Some(Replay::After(after)) => Some(*after),
            _ => None,
        };
        let replay = match replay {
            None => Vec::new(),
            Some(Replay::After(after)) => state
                .kept
                .iter()
                .filter(|e| parse_id(&e.id).is_some_and(|own| own > after))
                .cloned()
                .collect(),
            Some(Replay::Skip(skip)) => state.kept.iter().skip(skip).cloned().collect(),
        };
        let live = if state.finished {
            None
        } else {
            let (tx, rx) = feed::channel(feed::LISTENER_BYTES);
            let after = replay.last().and_then(|e| parse_id(&e.id)).max(after);
            state.listeners.push(Listener { tx, after });
            Some(rx)
        };
        Subscription { replay, live }
    }

    /// Sets what `/wait` and `/join` answer (before [`finish`](RunChannel::finish)).
    pub(crate) fn set_result(&self, result: Option<serde_json::Value>) {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner).result = result;
    }

    /// What `/wait` and `/join` answer, once set.
    pub(crate) fn result(&self) -> Option<serde_json::Value> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner).result.clone()
    }

    /// Ends the stream: listeners see their channel close.
    pub(crate) fn finish(&self) {
        if let Some(outlet) = &self.remote.outlet {
            outlet.send(Outgoing::End(self.result()));
        }
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        state.finished = true;
        state.listeners.clear();
        drop(state);
        self.done.send_replace(true);
    }

    /// Ends the stream for a shutdown ([`finish`](RunChannel::finish) here only: nothing goes to an
    /// outlet, the run is not over): listeners see their stream end cleanly and resume it on the next
    /// process with `Last-Event-ID`; `/wait` and `/join` see [`is_drained`](RunChannel::is_drained).
    pub(crate) fn finish_drained(&self) {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if state.finished {
            return;
        }
        state.drained = true;
        state.finished = true;
        state.listeners.clear();
        drop(state);
        self.done.send_replace(true);
    }

    /// Whether the stream was ended by a shutdown while the run goes on.
    pub(crate) fn is_drained(&self) -> bool {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner).drained
    }

    /// Asks the run to stop.
    pub(crate) fn cancel(&self, action: CancelAction) {
        if let Some(hook) = &self.remote.cancel {
            hook(action);
        }
        self.cancel.send_replace(Some(action));
    }

    /// Asks the run to stop, in this process only (a cancel that came from elsewhere).
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    pub(crate) fn cancel_here(&self, action: CancelAction) {
        self.cancel.send_replace(Some(action));
    }

    /// Resolves when a cancel is asked for, with its action.
    pub(crate) async fn cancelled(&self) -> CancelAction {
        let mut rx = self.cancel.subscribe();
        loop {
            if let Some(action) = *rx.borrow_and_update() {
                return action;
            }
            if rx.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// Resolves when the run has finished.
    pub(crate) async fn finished(&self) {
        let mut rx = self.done.subscribe();
        while !*rx.borrow_and_update() {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }
}

/// How many finished resumable runs keep their events for replay (the oldest go first).
const KEPT_FINISHED: usize = 1024;

/// The channels of the runs that are pending or running, and of the last finished resumable runs (kept
/// so that their streams can be replayed; dropped with the run or its thread, or when newer ones push
/// them out).
#[derive(Debug, Default)]
pub(crate) struct Channels {
    by_run: Mutex<HashMap<String, Arc<RunChannel>>>,
    finished: Mutex<std::collections::VecDeque<String>>,
    /// Scaled out: makes channels fed from elsewhere (the run's events as its worker published them).
    remote: std::sync::OnceLock<Arc<dyn RemoteChannels>>,
}

/// Makes the channels of a scaled-out server: each fed with its run's events from wherever the run's
/// worker is, and passing its cancels there.
pub(crate) trait RemoteChannels: Send + Sync + std::fmt::Debug {
    /// A new channel for the run, already being fed.
    fn open(&self, run_id: &str, resumable: bool) -> Arc<RunChannel>;

    /// A new channel for a run whose worker is in this process, which feeds it itself (no reads from
    /// elsewhere); its cancels go where [`open`](RemoteChannels::open)'s do.
    fn open_fed(&self, run_id: &str, resumable: bool) -> Arc<RunChannel>;
}

impl Channels {
    /// Feeds every channel made from now on from elsewhere (see [`RemoteChannels`]).
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    pub(crate) fn set_remote(&self, remote: Arc<dyn RemoteChannels>) {
        let _ = self.remote.set(remote);
    }

    /// Whether channels are fed from elsewhere (a scaled-out server).
    pub(crate) fn is_remote(&self) -> bool {
        self.remote.get().is_some()
    }

    /// The run's channel, made when missing.
    pub(crate) fn open(&self, run_id: &str, resumable: bool) -> Arc<RunChannel> {
        let mut map = self.by_run.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let remote = self.remote.get();
        Arc::clone(map.entry(run_id.to_owned()).or_insert_with(|| match remote {
            Some(remote) => remote.open(run_id, resumable),
            None => Arc::new(RunChannel::new(resumable)),
        }))
    }

    /// The channel of a run that this process's worker runs and feeds ([`RemoteChannels::open_fed`]),
    /// made here; `None` when the run has a channel already (fed from elsewhere) or channels are not fed
    /// from elsewhere (then the worker's own channel is the listeners').
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    pub(crate) fn open_fed(&self, run_id: &str, resumable: bool) -> Option<Arc<RunChannel>> {
        let remote = self.remote.get()?;
        let mut map = self.by_run.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match map.entry(run_id.to_owned()) {
            std::collections::hash_map::Entry::Occupied(_) => None,
            std::collections::hash_map::Entry::Vacant(slot) => {
                Some(Arc::clone(slot.insert(remote.open_fed(run_id, resumable))))
            }
        }
    }

    /// The run's channel, if it has one.
    pub(crate) fn get(&self, run_id: &str) -> Option<Arc<RunChannel>> {
        self.by_run.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(run_id).cloned()
    }

    /// Forgets the run's channel.
    pub(crate) fn remove(&self, run_id: &str) {
        self.by_run.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(run_id);
    }

    /// Ends every stream still open for a shutdown ([`RunChannel::finish_drained`]).
    pub(crate) fn drain_all(&self) {
        let open: Vec<Arc<RunChannel>> =
            self.by_run.lock().unwrap_or_else(std::sync::PoisonError::into_inner).values().cloned().collect();
        for channel in open {
            channel.finish_drained();
        }
    }

    /// Keeps a finished resumable run's channel for replays, forgetting the oldest beyond
    /// [`KEPT_FINISHED`].
    pub(crate) fn keep_finished(&self, run_id: &str) {
        let mut finished = self.finished.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        finished.push_back(run_id.to_owned());
        while finished.len() > KEPT_FINISHED {
            if let Some(oldest) = finished.pop_front() {
                self.remove(&oldest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_increase_within_a_millisecond() {
        let channel = RunChannel::new(true);
        let a = channel.publish("values", "{}".into());
        let b = channel.publish("values", "{}".into());
        assert!(parse_id(&b.id) > parse_id(&a.id), "{} then {}", a.id, b.id);
    }

    #[test]
    fn resumable_runs_replay_after_an_id_and_minus_one_replays_all() {
        let channel = RunChannel::new(true);
        let first = channel.publish("metadata", "{}".into());
        channel.publish("values", "1".into());
        channel.publish("values", "2".into());
        assert_eq!(channel.subscribe(Some(&first.id)).replay.len(), 2);
        assert_eq!(channel.subscribe(Some("-1")).replay.len(), 3);
        assert_eq!(channel.subscribe(Some("0")).replay.len(), 2);
        assert!(channel.subscribe(None).replay.is_empty());
    }

    #[test]
    fn runs_that_are_not_resumable_keep_nothing() {
        let channel = RunChannel::new(false);
        channel.publish("values", "1".into());
        assert!(channel.subscribe(Some("-1")).replay.is_empty());
    }

    #[test]
    fn only_the_last_finished_resumable_runs_keep_their_channels() {
        let channels = Channels::default();
        for i in 0..=KEPT_FINISHED {
            channels.open(&i.to_string(), true);
            channels.keep_finished(&i.to_string());
        }
        assert!(channels.get("0").is_none(), "the oldest is forgotten");
        assert!(channels.get("1").is_some());
        assert!(channels.get(&KEPT_FINISHED.to_string()).is_some());
    }

    #[tokio::test]
    async fn a_worker_channel_holds_its_run_until_redis_has_its_events_and_loses_none() {
        let (outlet, mut out) = Outlet::bounded(1000);
        let channel = RunChannel::with_outlet(false, outlet);
        let wait = std::time::Duration::from_millis(50);
        channel.publish("values", "a".repeat(600));
        tokio::time::timeout(wait, channel.room()).await.expect("under the bound: no wait");
        channel.publish("values", "b".repeat(600));
        assert!(tokio::time::timeout(wait, channel.room()).await.is_err(), "past the bound: the run waits");
        let mut sizes = 0;
        for expected in ['a', 'b'] {
            let Some(Outgoing::Event { name, data }) = out.recv().await else { panic!("an event") };
            assert_eq!((name.as_str(), data.chars().next()), ("values", Some(expected)));
            sizes += name.len() + data.len();
        }
        assert!(tokio::time::timeout(wait, channel.room()).await.is_err(), "taken, not yet out: still waits");
        out.done(sizes);
        tokio::time::timeout(wait, channel.room()).await.expect("out: room again");
        channel.publish("values", "c".repeat(2000));
        drop(out);
        tokio::time::timeout(wait, channel.room()).await.expect("a publisher gone holds nobody");
    }

    #[tokio::test]
    async fn a_drain_ends_every_open_stream_but_not_the_finished_ones() {
        let channels = Channels::default();
        let going = channels.open("going", false);
        let done = channels.open("done", false);
        done.finish();
        let mut sub = going.subscribe(None);
        going.publish("values", "1".into());
        channels.drain_all();
        let live = sub.live.as_mut().unwrap();
        assert_eq!(live.recv().await.unwrap().data, "1", "what was published still goes out");
        assert!(live.recv().await.is_none());
        going.finished().await;
        assert!(going.is_drained());
        assert!(!done.is_drained(), "a run that ended is not drained");
    }

    #[tokio::test]
    async fn listeners_get_live_events_until_the_run_finishes() {
        let channel = RunChannel::new(false);
        let mut sub = channel.subscribe(None);
        channel.publish("values", "1".into());
        channel.finish();
        let live = sub.live.as_mut().unwrap();
        assert_eq!(live.recv().await.unwrap().data, "1");
        assert!(live.recv().await.is_none());
        assert!(channel.subscribe(None).live.is_none());
        channel.finished().await;
    }
}
