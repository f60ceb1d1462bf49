//! A thread's stream across instances: every instance appends to a Redis stream per thread the runs it
//! makes on the thread and the thread's state updates, and every instance serving
//! `GET /threads/{thread_id}/stream` reads that stream from the moment the listener joined, following each
//! run it names through the run's own stream (from the run's first event), wherever the run executes.
//!
//! A listener reads the thread's stream after the last entry it had before looking at the records, so a
//! run is never missed: made before that look, it is among the records; made after, its entry comes
//! after (a run is announced once it is committed). A run seen both ways is followed once (the listener
//! keeps the ids it follows).

use std::sync::{Arc, Weak};
use std::time::Duration;

use redis::Value;
use redis::aio::MultiplexedConnection;
use serde_json::json;

use super::Scale;
use super::bus::{self, Bus};
use crate::app::App;
use crate::runs::channel::{Event, id_now};
use crate::runs::feed;
use crate::runs::taps::ThreadItem;

/// The most entries a thread's stream keeps (`MAXLEN ~`): listeners read it as it grows.
const MAX_ENTRIES: usize = 1000;

/// How long a thread's stream stays after its last entry.
const KEEP: Duration = Duration::from_secs(3600);

/// The name of the entry that announces a run (its data: `{"run_id"}`).
const RUN: &str = "__run__";

impl Bus {
    fn thread_key(&self, thread_id: &str) -> String {
        format!("{}thread:{thread_id}:stream", self.prefix())
    }

    /// Appends an entry to the thread's stream, in a task of its own; when Redis fails, tried again (100 ms,
    /// doubling to 2 s) for about a minute before it is dropped (lost to the thread's listeners only).
    fn append_thread(&self, thread_id: &str, name: &str, data: String) {
        let key = self.thread_key(thread_id);
        let mut pipe = redis::pipe();
        bus::add(&mut pipe, &key, MAX_ENTRIES, name, &data);
        pipe.cmd("EXPIRE").arg(&key).arg(KEEP.as_secs()).ignore();
        let mut conn = self.shared();
        let thread_id = thread_id.to_owned();
        tokio::spawn(async move {
            if let Err(e) = bus::send_retrying(&mut conn, &pipe, &thread_id).await {
                tracing::error!(thread_id, error = %e, "the thread's entry could not be sent to Redis: dropped");
            }
        });
    }

    /// The id a new listener of the thread reads after: the last entry of the thread's stream, or the
    /// time now when Redis cannot say.
    async fn thread_tail(&self, thread_id: &str) -> String {
        let mut conn = self.shared();
        let last: redis::RedisResult<Value> = redis::cmd("XREVRANGE")
            .arg(self.thread_key(thread_id))
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .query_async(&mut conn)
            .await;
        match last {
            Ok(reply) => bus::range_entries(&reply).pop().map_or_else(|| "0-0".to_owned(), |(id, _, _)| id),
            Err(e) => {
                tracing::warn!(thread_id, error = %e, "cannot read the end of the thread's stream");
                id_now()
            }
        }
    }
}

impl Scale {
    /// Tells the thread's listeners on every instance that the run was made (call once it is committed).
    pub(crate) fn announce_run(&self, thread_id: &str, run_id: &str) {
        self.bus.append_thread(thread_id, RUN, json!({"run_id": run_id}).to_string());
    }

    /// Sends an event of the thread itself (`state_update`) to its listeners on every instance.
    pub(crate) fn publish_thread_event(&self, thread_id: &str, name: &str, data: String) {
        self.bus.append_thread(thread_id, name, data);
    }

    /// Where a new listener of the thread starts reading its stream (to take before the records are read).
    pub(crate) async fn thread_start(&self, thread_id: &str) -> String {
        self.bus.thread_tail(thread_id).await
    }

    /// Feeds `tx` with what the thread's stream gets after `after`: each run made on the thread (with a
    /// subscription to its events from the first), each event of the thread. Stops when `tx` closes.
    pub(crate) fn feed_thread(
        self: &Arc<Self>,
        app: &Arc<App>,
        thread_id: &str,
        after: String,
        tx: feed::Sender<ThreadItem>,
    ) {
        tokio::spawn(read_thread(Arc::downgrade(app), Arc::downgrade(self), thread_id.to_owned(), after, tx));
    }
}

/// The `ThreadItem` a thread's stream entry makes (none for an entry that cannot be read).
fn item(app: &Weak<App>, scale: &Scale, id: String, name: String, data: String) -> Option<ThreadItem> {
    if name != RUN {
        return Some(ThreadItem::Event(Arc::new(Event { id, name, data })));
    }
    let announced: serde_json::Value = serde_json::from_str(&data).ok()?;
    let run_id = announced.get("run_id")?.as_str()?.to_owned();
    let subscription = bus::follow_alone(app.clone(), scale, &run_id);
    Some(ThreadItem::Run { run_id, subscription })
}

async fn read_thread(
    app: Weak<App>,
    scale: Weak<Scale>,
    thread_id: String,
    mut last: String,
    tx: feed::Sender<ThreadItem>,
) {
    let mut conn: Option<MultiplexedConnection> = None;
    let mut pause = Duration::from_millis(100);
    while !tx.is_closed() {
        let Some(bus) = scale.upgrade().map(|s| s.bus.clone()) else { return };
        let key = bus.thread_key(&thread_id);
        let read = async {
            let conn = match &mut conn {
                Some(conn) => conn,
                None => conn.insert(bus.dedicated().await?),
            };
            redis::cmd("XREAD")
                .arg("COUNT")
                .arg(256)
                .arg("BLOCK")
                .arg(bus::BLOCK.as_millis() as u64)
                .arg("STREAMS")
                .arg(&key)
                .arg(&last)
                .query_async::<Value>(conn)
                .await
        }
        .await;
        drop(bus);
        let got = match read {
            Ok(reply) => {
                pause = Duration::from_millis(100);
                bus::entries(&reply)
            }
            Err(e) => {
                tracing::debug!(thread_id, error = %e, "cannot read the thread's stream: retrying");
                conn = None;
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
                continue;
            }
        };
        let Some(scale) = scale.upgrade() else { return };
        for (id, name, data) in got {
            last.clone_from(&id);
            if let Some(item) = item(&app, &scale, id, name, data) {
                if !tx.send(item) {
                    return;
                }
            }
        }
    }
}
