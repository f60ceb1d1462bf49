//! Redis for a scaled-out server: wake-ups and cancels on two pub/sub channels, and each run's events in a
//! Redis stream of its own (`XADD` by the run's worker, `XREAD` by every instance with a listener), so that
//! a run started through one instance streams through any other, resumably: a stream's ids are the SSE
//! ids. Streams are trimmed to their last [`MAX_EVENTS`] events and expire after their run ends.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::StreamExt as _;
use redis::aio::{ConnectionManager, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Client, Value};
use weft_runnable_core::retry::Backoff;

use super::{Scale, queue};
use crate::app::App;
use crate::error::ServerError;
use crate::runs::channel::{Outgoing, OutletReceiver, RemoteChannels, Subscription};
use crate::runs::{CancelAction, RunChannel};

/// The most events a run's stream keeps (`MAXLEN ~`).
const MAX_EVENTS: usize = 100_000;

/// How long a resumable run's stream stays after the run ends (a run that is not resumable: a minute,
/// for listeners still catching up).
const KEEP_RESUMABLE: Duration = Duration::from_secs(3600);
const KEEP_OTHERS: Duration = Duration::from_secs(60);

/// How long a listener's read waits for events before it checks the run is still queued.
pub(super) const BLOCK: Duration = Duration::from_secs(1);

/// The name of the entry that ends a run's stream (its data: the `/wait` answer).
const END: &str = "__end__";

/// This instance's Redis: a client for the connections of its own (listeners, pub/sub) and a shared
/// connection for the rest.
#[derive(Clone)]
pub(crate) struct Bus {
    client: Client,
    conn: ConnectionManager,
    prefix: Arc<str>,
}

impl std::fmt::Debug for Bus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bus").field("prefix", &self.prefix).finish_non_exhaustive()
    }
}

fn redis_error(e: redis::RedisError) -> ServerError {
    ServerError::Redis(e)
}

impl Bus {
    /// Connects to Redis at `uri`; every key and channel starts with `prefix`.
    pub(crate) async fn connect(uri: &str, prefix: &str) -> Result<Self, ServerError> {
        let client = Client::open(uri).map_err(redis_error)?;
        let conn = ConnectionManager::new(client.clone()).await.map_err(redis_error)?;
        Ok(Self { client, conn, prefix: prefix.into() })
    }

    /// What every key and channel of the deployment starts with.
    pub(super) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The connection shared by this instance's short commands.
    pub(super) fn shared(&self) -> ConnectionManager {
        self.conn.clone()
    }

    fn stream_key(&self, run_id: &str) -> String {
        format!("{}run:{run_id}:stream", self.prefix)
    }

    fn wake_channel(&self) -> String {
        format!("{}wake", self.prefix)
    }

    fn cancel_channel(&self) -> String {
        format!("{}cancel", self.prefix)
    }

    /// Wakes the workers of every other instance (in a task of its own; a lost wake-up only delays:
    /// workers poll). The message names the worker `from`, whose own listener passes it by.
    pub(crate) fn publish_wake(&self, from: &str) {
        let mut conn = self.conn.clone();
        let channel = self.wake_channel();
        let from = from.to_owned();
        tokio::spawn(async move {
            let sent: redis::RedisResult<i64> =
                redis::cmd("PUBLISH").arg(channel).arg(from).query_async(&mut conn).await;
            if let Err(e) = sent {
                tracing::debug!(error = %e, "cannot publish a wake-up");
            }
        });
    }

    /// Tells every instance to cancel the run (a lost message only delays: workers read cancels from the
    /// queue when they renew their leases).
    pub(crate) async fn publish_cancel(&self, run_id: &str, action: CancelAction) -> Result<(), ServerError> {
        let mut conn = self.conn.clone();
        let message = format!("{run_id} {}", queue::cancel_name(action));
        let sent: redis::RedisResult<i64> =
            redis::cmd("PUBLISH").arg(self.cancel_channel()).arg(message).query_async(&mut conn).await;
        sent.map(drop).map_err(redis_error)
    }

    /// A connection of its own, for blocking reads.
    pub(super) async fn dedicated(&self) -> redis::RedisResult<MultiplexedConnection> {
        let config = AsyncConnectionConfig::new()
            .set_response_timeout(Some(BLOCK + Duration::from_secs(5)))
            .set_connection_timeout(Some(Duration::from_secs(2)));
        self.client.get_multiplexed_async_connection_with_config(&config).await
    }
}

/// Listens to wake-ups and cancels until the server is gone, reconnecting when Redis goes away (and waking
/// the worker when it is back, in case a wake-up was missed).
pub(crate) async fn listen(scale: Weak<Scale>) {
    let mut pause = Duration::from_millis(100);
    loop {
        let Some(bus) = scale.upgrade().map(|s| s.bus.clone()) else { return };
        let (wake, cancel) = (bus.wake_channel(), bus.cancel_channel());
        let subscribed = async {
            let mut pubsub = bus.client.get_async_pubsub().await?;
            pubsub.subscribe(&wake).await?;
            pubsub.subscribe(&cancel).await?;
            Ok::<_, redis::RedisError>(pubsub)
        }
        .await;
        match subscribed {
            Ok(pubsub) => {
                pause = Duration::from_millis(100);
                if let Some(scale) = scale.upgrade() {
                    scale.wake_here();
                }
                let mut messages = pubsub.into_on_message();
                while let Some(message) = messages.next().await {
                    let Some(scale) = scale.upgrade() else { return };
                    if message.get_channel_name() == wake {
                        // This instance's own wake-ups woke its worker when sent.
                        if message.get_payload::<String>().ok().as_deref() != Some(scale.worker.as_str()) {
                            scale.wake_here();
                        }
                    } else if let Ok(text) = message.get_payload::<String>() {
                        if let Some((run_id, action)) = text.split_once(' ') {
                            if let Some(action) = queue::parse_cancel(action) {
                                scale.cancel_here(run_id, action);
                            }
                        }
                    }
                }
                tracing::warn!("lost the Redis subscription: reconnecting");
            }
            Err(e) => tracing::warn!(error = %e, "cannot subscribe to Redis: retrying"),
        }
        drop(bus);
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(2));
    }
}

/// How long a batch sent to Redis is tried again while Redis fails.
pub(crate) const RETRY_FOR: Duration = Duration::from_secs(60);

/// Sends `pipe`, trying again while Redis fails (waits from 100 ms, doubling to 2 s, the core's
/// [`Backoff`]) for about [`RETRY_FOR`]; the last error when it gives up. `about` names what is sent (a
/// run or thread id) in the warnings.
pub(crate) async fn send_retrying<C: redis::aio::ConnectionLike>(
    conn: &mut C,
    pipe: &redis::Pipeline,
    about: &str,
) -> redis::RedisResult<()> {
    let backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
    let mut waited = Duration::ZERO;
    let mut retry = 0;
    loop {
        match pipe.query_async::<()>(conn).await {
            Ok(()) => return Ok(()),
            Err(e) if waited < RETRY_FOR => {
                tracing::warn!(about, error = %e, "cannot send to Redis: retrying");
                let pause = backoff.delay(retry);
                retry += 1;
                tokio::time::sleep(pause).await;
                waited += pause;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Sends a worker's events to the run's stream, in batches (one round trip for what queued up meanwhile),
/// until the run's end is sent. When Redis fails, a batch is tried again (100 ms, doubling to 2 s) for
/// about a minute before it is dropped. The run's channel holds its run while what is queued here and
/// not yet out passes its bound ([`OUTLET_BYTES`](crate::runs::channel::OUTLET_BYTES)).
///
/// `here`: the channel of this instance's listeners, fed from here with each event once Redis has it
/// (with the id Redis gave it), not read back from Redis: no connection and no reads of its own. Its
/// run's end finishes it even when Redis has not taken the end. Should the run stop here without an end
/// (another worker took it over), or a batch fail to reach Redis at the first try (Redis may have stored
/// part of it, and stores again what is sent again), the channel goes on from the run's stream after
/// the last event fed, so that its listeners get exactly what the stream holds.
pub(crate) async fn publish(
    bus: Bus,
    run_id: String,
    resumable: bool,
    mut outgoing: OutletReceiver,
    mut here: Option<Feed>,
) {
    let key = bus.stream_key(&run_id);
    let mut conn = bus.conn.clone();
    let keep = if resumable { KEEP_RESUMABLE } else { KEEP_OTHERS };
    let mut last = FIRST.to_owned();
    while let Some(first) = outgoing.recv().await {
        let mut batch = vec![first];
        while batch.len() < 512 {
            match outgoing.try_recv() {
                Some(next) => batch.push(next),
                None => break,
            }
        }
        let mut pipe = redis::pipe();
        let mut flushed = Vec::new();
        let mut events = Vec::new();
        let mut ended = None;
        let bytes = batch.iter().map(Outgoing::weight).sum();
        for item in batch {
            match item {
                Outgoing::Event { name, data } => {
                    add(&mut pipe, &key, MAX_EVENTS, &name, &data);
                    events.push((name, data));
                }
                Outgoing::End(result) => {
                    let data = result.as_ref().map_or_else(|| "null".to_owned(), ToString::to_string);
                    add(&mut pipe, &key, MAX_EVENTS, END, &data);
                    pipe.cmd("EXPIRE").arg(&key).arg(keep.as_secs()).ignore();
                    ended = Some(result);
                }
                Outgoing::Flush(done) => flushed.push(done),
            }
        }
        // A batch of flushes alone has nothing to send (and an empty pipeline gets no answer). Answers are
        // read as plain values, which always parse; an answer that is not an id (none should be) hands the
        // listeners to the stream as a failure does, without sending the batch again.
        let ids: Vec<String> = if pipe.is_empty() {
            Vec::new()
        } else {
            match pipe.query_async::<Vec<Value>>(&mut conn).await {
                Ok(answers) => match answers.iter().map(text).collect::<Option<Vec<String>>>() {
                    Some(ids) => ids,
                    None => {
                        hand_over(&mut here, &last);
                        Vec::new()
                    }
                },
                Err(e) => {
                    // Redis may have stored some of the batch before it failed, and a batch sent again is
                    // stored again: from here on the listeners read the stream as it is, from the last
                    // event fed, like every other instance's.
                    hand_over(&mut here, &last);
                    tracing::warn!(run_id, error = %e, "cannot send the run's events to Redis: retrying");
                    if let Err(e) = send_retrying(&mut conn, &pipe, &run_id).await {
                        tracing::error!(run_id, error = %e, "the run's events could not be sent to Redis: dropped");
                    }
                    Vec::new()
                }
            }
        };
        if let Some(feed) = &here {
            // Each event with its id in the stream, in order (the end's id comes last).
            for ((name, data), id) in events.into_iter().zip(&ids) {
                last.clone_from(id);
                feed.channel.deliver(id.clone(), name, data);
            }
        }
        outgoing.done(bytes);
        for done in flushed {
            let _ = done.send(());
        }
        if let Some(result) = ended {
            if let Some(feed) = &here {
                feed.end(result);
            }
            return;
        }
    }
    // The run stopped here without an end: its listeners here go on from its stream.
    hand_over(&mut here, &last);
}

/// The listeners fed from here (if still) go on from the run's stream after entry `last`.
fn hand_over(here: &mut Option<Feed>, last: &str) {
    if let Some(feed) = here.take() {
        tokio::spawn(follow(feed, last.to_owned(), true));
    }
}

/// Queues on `pipe` the `XADD` of an entry (trimmed to about `max` entries), whose answer is the
/// entry's id.
pub(super) fn add(pipe: &mut redis::Pipeline, key: &str, max: usize, name: &str, data: &str) {
    pipe.cmd("XADD").arg(key).arg("MAXLEN").arg("~").arg(max).arg("*").arg("e").arg(name).arg("d").arg(data);
}

/// One entry of a run's stream: id, event name, data.
pub(super) type Entry = (String, String, String);

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// The entries of an `XREAD` answer on one stream (none when it timed out).
pub(super) fn entries(reply: &Value) -> Vec<Entry> {
    let streams: Vec<&Value> = match reply {
        Value::Array(streams) => streams.iter().collect(),
        Value::Map(pairs) => pairs.iter().map(|(_, v)| v).collect(),
        _ => Vec::new(),
    };
    let mut out = Vec::new();
    for stream in streams {
        // RESP2: [key, entries]; RESP3 map values: entries.
        let items = match stream {
            Value::Array(pair) if pair.len() == 2 && text(&pair[0]).is_some() => &pair[1],
            other => other,
        };
        out.extend(range_entries(items));
    }
    out
}

/// The entries of an `XRANGE` or `XREVRANGE` answer (in its order).
pub(super) fn range_entries(reply: &Value) -> Vec<Entry> {
    let Value::Array(items) = reply else { return Vec::new() };
    let mut out = Vec::new();
    for item in items {
        let Value::Array(parts) = item else { continue };
        let (Some(id), Some(Value::Array(fields))) = (parts.first().and_then(text), parts.get(1)) else {
            continue;
        };
        let mut name = None;
        let mut data = None;
        for pair in fields.chunks(2) {
            match (pair.first().and_then(text).as_deref(), pair.get(1).and_then(text)) {
                (Some("e"), value) => name = value,
                (Some("d"), value) => data = value,
                _ => {}
            }
        }
        if let (Some(name), Some(data)) = (name, data) {
            out.push((id, name, data));
        }
    }
    out
}

/// Makes the channels of this instance's listeners, each fed from its run's stream.
#[derive(Debug)]
pub(crate) struct Followers {
    app: Weak<App>,
    scale: Arc<Scale>,
}

impl Followers {
    pub(crate) fn new(app: Weak<App>, scale: Arc<Scale>) -> Self {
        Self { app, scale }
    }
}

impl RemoteChannels for Followers {
    fn open(&self, run_id: &str, resumable: bool) -> Arc<RunChannel> {
        let channel = self.open_fed(run_id, resumable);
        let feed = Feed::new(&self.app, &self.scale, run_id, &channel);
        tokio::spawn(follow(feed, FIRST.to_owned(), true));
        channel
    }

    fn open_fed(&self, run_id: &str, resumable: bool) -> Arc<RunChannel> {
        let scale = Arc::downgrade(&self.scale);
        let id = run_id.to_owned();
        let hook = Box::new(move |action| {
            if let Some(scale) = scale.upgrade() {
                scale.request_cancel(&id, action);
            }
        });
        Arc::new(RunChannel::with_cancel_hook(resumable, hook))
    }
}

/// The id before a stream's first entry.
const FIRST: &str = "0-0";

/// A channel of this instance's listeners and what feeding it from its run's stream takes.
pub(crate) struct Feed {
    app: Weak<App>,
    bus: Bus,
    db: super::Db,
    run_id: String,
    channel: Arc<RunChannel>,
}

impl Feed {
    /// The feed of `channel`, the listeners' channel of run `run_id`.
    pub(crate) fn new(app: &Weak<App>, scale: &Scale, run_id: &str, channel: &Arc<RunChannel>) -> Self {
        Self {
            app: app.clone(),
            bus: scale.bus.clone(),
            db: scale.db.clone(),
            run_id: run_id.to_owned(),
            channel: Arc::clone(channel),
        }
    }

    /// The run has ended with `result`: the channel finishes, and is kept for replays (a resumable run's)
    /// or forgotten.
    fn end(&self, result: Option<serde_json::Value>) {
        self.channel.set_result(result);
        self.channel.finish();
        self.let_go();
    }

    /// The channel is done with: kept for replays when the run is resumable, else forgotten.
    fn let_go(&self) {
        if let Some(app) = self.app.upgrade() {
            if self.channel.is_resumable() {
                app.channels.keep_finished(&self.run_id);
            } else {
                app.channels.remove(&self.run_id);
            }
        }
    }
}

/// A subscription to the run's events from its first, through a channel of the caller's own (not this
/// instance's shared one, which may have sent some already): fed from the run's stream until the run ends
/// or the subscription is dropped.
pub(super) fn follow_alone(app: Weak<App>, scale: &Scale, run_id: &str) -> Subscription {
    let channel = Arc::new(RunChannel::new(false));
    let subscription = channel.subscribe(None);
    tokio::spawn(follow(Feed::new(&app, scale, run_id, &channel), FIRST.to_owned(), false));
    subscription
}

/// Feeds the feed's channel with its run's stream after entry `last` until the run's end entry, or,
/// when the run has left the queue and no end came within a read's wait (its stream expired, or Redis
/// lost it), until then with the run's recorded result. A channel that is not `shared` (this instance's
/// channel of the run) stops being fed once no one listens to it.
async fn follow(feed: Feed, mut last: String, shared: bool) {
    let Feed { app, bus, db, run_id, channel } = &feed;
    let key = bus.stream_key(run_id);
    let mut conn: Option<MultiplexedConnection> = None;
    let mut pause = Duration::from_millis(100);
    let mut gone_since_read = false;
    loop {
        if channel.is_finished() {
            break;
        }
        if !shared && !channel.is_heard() {
            return;
        }
        let read = async {
            let conn = match &mut conn {
                Some(conn) => conn,
                None => conn.insert(bus.dedicated().await?),
            };
            redis::cmd("XREAD")
                .arg("COUNT")
                .arg(1024)
                .arg("BLOCK")
                .arg(BLOCK.as_millis() as u64)
                .arg("STREAMS")
                .arg(&key)
                .arg(&last)
                .query_async::<Value>(conn)
                .await
        }
        .await;
        let got = match read {
            Ok(reply) => {
                pause = Duration::from_millis(100);
                entries(&reply)
            }
            Err(e) => {
                tracing::debug!(run_id, error = %e, "cannot read the run's stream: retrying");
                conn = None;
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
                Vec::new()
            }
        };
        if got.is_empty() {
            // Nothing came: is the run still queued? Once it is not, one more wait for its end entry.
            match queue::is_queued(db, run_id).await {
                Ok(true) => gone_since_read = false,
                Ok(false) if gone_since_read => {
                    let result = recorded_result(app, run_id).await;
                    channel.set_result(result);
                    channel.finish();
                    break;
                }
                Ok(false) => gone_since_read = true,
                Err(e) => tracing::debug!(run_id, error = %e, "cannot check the run is queued"),
            }
            continue;
        }
        for (id, name, data) in got {
            last.clone_from(&id);
            if name == END {
                channel.set_result(
                    serde_json::from_str(&data).ok().filter(|v: &serde_json::Value| !v.is_null()),
                );
                channel.finish();
                break;
            }
            channel.deliver(id, name, data);
        }
    }
    if shared {
        feed.let_go();
    }
}

/// The run's result as recorded, when its stream ended without one.
async fn recorded_result(app: &Weak<App>, run_id: &str) -> Option<serde_json::Value> {
    let app = app.upgrade()?;
    let mut records = app.records.read().await.ok()?;
    records.run(run_id).await.ok()?.and_then(|r| r.result.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::channel::Outlet;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn xread_answers_give_their_entries_in_order() {
        let reply = Value::Array(vec![Value::Array(vec![
            bulk("weft:run:r:stream"),
            Value::Array(vec![
                Value::Array(vec![
                    bulk("1-0"),
                    Value::Array(vec![bulk("e"), bulk("values"), bulk("d"), bulk("{}")]),
                ]),
                Value::Array(vec![
                    bulk("1-1"),
                    Value::Array(vec![bulk("e"), bulk(END), bulk("d"), bulk("null")]),
                ]),
                Value::Array(vec![bulk("1-2"), Value::Array(vec![bulk("x"), bulk("y")])]),
            ]),
        ])]);
        let got = entries(&reply);
        assert_eq!(
            got,
            vec![
                ("1-0".to_owned(), "values".to_owned(), "{}".to_owned()),
                ("1-1".to_owned(), END.to_owned(), "null".to_owned()),
            ]
        );
        assert!(entries(&Value::Nil).is_empty(), "a read that timed out has no entries");
    }

    /// A bus on Redis at 127.0.0.1:6379 (`WEFT_TEST_REDIS_URL` overrides it) under a prefix of the test's
    /// own; `None` when Redis is unreachable (the test skips loudly, and fails in CI).
    async fn bus() -> Option<Bus> {
        let uri = std::env::var("WEFT_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
        let prefix = format!("weft-test-{}:", uuid::Uuid::new_v4().simple());
        match tokio::time::timeout(Duration::from_secs(5), Bus::connect(&uri, &prefix)).await {
            Ok(Ok(bus)) => Some(bus),
            _ => {
                weft_testenv::skip_or_fail(
                    "Redis at 127.0.0.1:6379",
                    "unreachable",
                    "`cargo xtask services`",
                );
                None
            }
        }
    }

    /// The feed of the listeners' channel `channel` of run `run_id` (its database is never reached
    /// here: only a follower whose reads wait in vain asks it whether the run is queued).
    fn feed(bus: &Bus, run_id: &str, channel: &Arc<RunChannel>) -> Feed {
        let pool = sqlx::PgPool::connect_lazy("postgres://postgres@127.0.0.1:5432/postgres").unwrap();
        Feed {
            app: Weak::new(),
            bus: bus.clone(),
            db: super::super::Db::new(pool, true),
            run_id: run_id.to_owned(),
            channel: Arc::clone(channel),
        }
    }

    /// The entries of the run's stream in Redis (its end included), then the stream deleted.
    async fn stored(bus: &Bus, run_id: &str) -> Vec<Entry> {
        let mut conn = bus.shared();
        let reply: Value = redis::cmd("XRANGE")
            .arg(bus.stream_key(run_id))
            .arg("-")
            .arg("+")
            .query_async(&mut conn)
            .await
            .unwrap();
        let _: i64 = redis::cmd("DEL").arg(bus.stream_key(run_id)).query_async(&mut conn).await.unwrap();
        range_entries(&reply)
    }

    fn heard(listeners: &RunChannel) -> Vec<(String, String, String)> {
        let replay = listeners.subscribe(Some("-1")).replay;
        replay.iter().map(|e| (e.id.clone(), e.name.clone(), e.data.clone())).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_here_feeds_its_listeners_with_the_ids_redis_gave_its_events() {
        let Some(bus) = bus().await else { return };
        let listeners = Arc::new(RunChannel::new(true));
        let (outlet, outgoing) = Outlet::bounded(1 << 20);
        let worker = RunChannel::with_outlet(true, outlet);
        let here = Some(feed(&bus, "r1", &listeners));
        let publisher = tokio::spawn(publish(bus.clone(), "r1".into(), true, outgoing, here));
        worker.publish("metadata", r#"{"run_id":"r1"}"#.into());
        worker.publish("values", r#"{"n":1}"#.into());
        worker.set_result(Some(serde_json::json!({"n": 1})));
        worker.finish();
        publisher.await.unwrap();
        assert!(listeners.is_finished(), "the run's end finishes its listeners' channel");
        assert_eq!(listeners.result(), Some(serde_json::json!({"n": 1})));
        let heard = heard(&listeners);
        let mut stored = stored(&bus, "r1").await;
        assert_eq!(stored.pop().map(|(_, name, _)| name).as_deref(), Some(END));
        assert_eq!(heard, stored, "the listeners hear each event with its id in the run's stream");
        assert_eq!(heard.len(), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_that_stops_here_without_its_end_leaves_its_listeners_to_its_stream() {
        let Some(bus) = bus().await else { return };
        let listeners = Arc::new(RunChannel::new(true));
        let (outlet, outgoing) = Outlet::bounded(1 << 20);
        let worker = RunChannel::with_outlet(true, outlet);
        let here = Some(feed(&bus, "r2", &listeners));
        let publisher = tokio::spawn(publish(bus.clone(), "r2".into(), true, outgoing, here));
        worker.publish("metadata", r#"{"run_id":"r2"}"#.into());
        worker.flush().await;
        // The run's task stops here (another worker took the run over): its channel goes, with no end.
        drop(worker);
        publisher.await.unwrap();
        assert!(!listeners.is_finished());
        // The run goes on elsewhere: its next event and its end reach the stream.
        let mut pipe = redis::pipe();
        add(&mut pipe, &bus.stream_key("r2"), MAX_EVENTS, "values", r#"{"n":2}"#);
        add(&mut pipe, &bus.stream_key("r2"), MAX_EVENTS, END, r#"{"n":2}"#);
        let _: Vec<String> = pipe.query_async(&mut bus.shared()).await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), listeners.finished()).await.unwrap();
        assert_eq!(listeners.result(), Some(serde_json::json!({"n": 2})));
        let heard = heard(&listeners);
        let mut stored = stored(&bus, "r2").await;
        stored.pop();
        assert_eq!(heard, stored, "each event once, in order: the first fed here, the next read from Redis");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_that_fails_at_first_leaves_the_listeners_to_the_stream() {
        let Some(bus) = bus().await else { return };
        let listeners = Arc::new(RunChannel::new(true));
        let (outlet, outgoing) = Outlet::bounded(1 << 20);
        let worker = RunChannel::with_outlet(true, outlet);
        let here = Some(feed(&bus, "r3", &listeners));
        let publisher = tokio::spawn(publish(bus.clone(), "r3".into(), true, outgoing, here));
        worker.publish("metadata", r#"{"run_id":"r3"}"#.into());
        worker.flush().await;
        // Redis drops the publisher's connection: its next batch fails at the first try.
        let id: i64 = redis::cmd("CLIENT").arg("ID").query_async(&mut bus.shared()).await.unwrap();
        let mut other = bus.dedicated().await.unwrap();
        let _: Value =
            redis::cmd("CLIENT").arg("KILL").arg("ID").arg(id).query_async(&mut other).await.unwrap();
        worker.publish("values", r#"{"n":3}"#.into());
        worker.set_result(Some(serde_json::json!({"n": 3})));
        worker.finish();
        publisher.await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), listeners.finished()).await.unwrap();
        assert_eq!(listeners.result(), Some(serde_json::json!({"n": 3})));
        let heard = heard(&listeners);
        let mut stored = stored(&bus, "r3").await;
        stored.pop();
        assert_eq!(heard, stored, "the listeners hear what the stream holds");
        assert_eq!(heard.len(), 2);
    }
}
