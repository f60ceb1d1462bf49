//! `GET /threads/{thread_id}/stream`: the events of every run on a thread, each run's end, the thread's
//! state updates; its modes, `Last-Event-ID` replays, and who may listen.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::open::{Open, parse};
use common::{builder, post, send, start, thread};
use serde_json::{Value, json};

fn names(events: &[(String, Value, String)]) -> Vec<&str> {
    events.iter().map(|(name, _, _)| name.as_str()).collect()
}

async fn wait_run(addr: SocketAddr, thread_id: &str, body: Value) -> Value {
    post(addr, &format!("/threads/{thread_id}/runs/wait"), body).await.json()
}

#[tokio::test]
async fn a_thread_stream_carries_every_run_and_its_end_until_the_client_leaves() {
    let server = start(builder()).await;
    let addr = server.addr;
    let t = thread(addr).await;
    let mut all = Open::get(addr, &format!("/threads/{t}/stream"), &[]).await;
    assert_eq!(all.status, 200);
    let mut lifecycle = Open::get(addr, &format!("/threads/{t}/stream?stream_mode=lifecycle"), &[]).await;
    let mut updates = Open::get(addr, &format!("/threads/{t}/stream?stream_mode=state_update"), &[]).await;
    let run = json!({"assistant_id": "simple", "input": {"items": []}, "stream_mode": ["values", "updates"]});
    wait_run(addr, &t, run.clone()).await;
    wait_run(addr, &t, run).await;
    let events = all.events(14).await;
    assert_eq!(
        names(&events),
        [
            "metadata", "values", "updates", "values", "updates", "values", "metadata", // the first run
            "metadata", "values", "updates", "values", "updates", "values", "metadata", // the second
        ]
    );
    let (first, second) = (&events[0].1["run_id"], &events[7].1["run_id"]);
    assert_ne!(first, second);
    assert_eq!(events[6].1, json!({"status": "run_done", "run_id": first}));
    assert_eq!(events[13].1, json!({"status": "run_done", "run_id": second}));
    assert_eq!(events[5].1["items"], json!(["a", "b"]));
    assert!(events.iter().all(|(_, _, id)| id.contains('-')), "every event has an id: {events:?}");
    let starts_and_ends = lifecycle.events(4).await;
    assert_eq!(names(&starts_and_ends), ["metadata"; 4]);
    assert_eq!(starts_and_ends[1].1["status"], "run_done");

    // A state written as a node is a `state_update` for those who asked, and nothing for the others.
    let written =
        post(addr, &format!("/threads/{t}/state"), json!({"values": {"items": ["x"]}, "as_node": "b"})).await;
    assert_eq!(written.status, 200, "{}", written.body);
    let update = updates.events(1).await;
    assert_eq!(update[0].0, "state_update");
    assert_eq!(update[0].1["thread_id"], json!(t));
    assert_eq!(update[0].1["state"]["values"]["items"], json!(["a", "b", "a", "b", "x"]));
    assert_eq!(update[0].1["state"]["checkpoint"]["thread_id"], json!(t));
    let rest = all.quiet_for(Duration::from_millis(300)).await;
    assert_eq!(parse(&rest).len(), 14, "no state_update in run_modes: {rest:?}");
}

#[tokio::test]
async fn a_thread_stream_replays_resumable_runs_after_an_id_and_sends_heartbeats() {
    let server = start(builder().keep_alive(Duration::from_millis(100))).await;
    let addr = server.addr;
    let t = thread(addr).await;
    let run = json!({"assistant_id": "simple", "input": {"items": []}, "stream_resumable": true});
    wait_run(addr, &t, run.clone()).await;
    wait_run(addr, &t, json!({"assistant_id": "simple", "input": {"items": []}})).await;
    // Only the resumable run kept its events; `-` replays them all, with the run's end.
    let mut all = Open::get(addr, &format!("/threads/{t}/stream"), &[("last-event-id", "-")]).await;
    let replayed = all.events(5).await;
    assert_eq!(names(&replayed), ["metadata", "values", "values", "values", "metadata"]);
    assert_eq!(replayed[4].1["status"], "run_done");
    let after = replayed[1].2.clone();
    let mut rest = Open::get(addr, &format!("/threads/{t}/stream"), &[("last-event-id", &after)]).await;
    let replayed = rest.events(3).await;
    assert_eq!(names(&replayed), ["values", "values", "metadata"]);
    let quiet = rest.quiet_for(Duration::from_millis(350)).await;
    assert!(quiet.contains(": heartbeat\r\n\r\n"), "{quiet:?}");
    // A run made now follows the replay.
    wait_run(addr, &t, json!({"assistant_id": "simple", "input": {"items": []}})).await;
    let events = rest.events(8).await;
    assert_eq!(names(&events[3..]), ["metadata", "values", "values", "values", "metadata"]);
}

#[tokio::test]
async fn bad_thread_streams_are_refused() {
    let server = start(builder()).await;
    let addr = server.addr;
    let t = thread(addr).await;
    let r = send(addr, "GET", &format!("/threads/{t}/stream?stream_mode=values"), None, &[]).await;
    assert_eq!((r.status, r.detail()), (422, "Invalid stream mode: values".to_owned()));
    let r = send(addr, "GET", &format!("/threads/{t}/stream"), None, &[("last-event-id", "-1")]).await;
    assert_eq!(
        (r.status, r.detail()),
        (422, "Invalid last-event-id: must be a valid Redis stream ID".to_owned())
    );
    let r = send(addr, "GET", "/threads/not-a-uuid/stream", None, &[]).await;
    assert_eq!((r.status, r.detail()), (422, "Invalid thread ID: must be a UUID".to_owned()));
    let missing = uuid_like();
    let r = send(addr, "GET", &format!("/threads/{missing}/stream"), None, &[]).await;
    assert_eq!((r.status, r.body.as_str()), (200, REFUSED), "a missing thread");
}

/// The stream of a thread the caller may not see: one error event, then the end (as LangGraph sends it).
const REFUSED: &str =
    "event: error\r\ndata: {\"error\":\"HTTPException\",\"message\":\"404: Thread not found\"}\r\n\r\n";

fn uuid_like() -> String {
    "01960000-0000-7000-8000-000000000000".to_owned()
}

#[tokio::test]
async fn only_the_threads_owner_may_listen() {
    let server = start(builder().api_keys([("key-alice", "alice"), ("key-bob", "bob")])).await;
    let addr = server.addr;
    let (alice, bob) = (("x-api-key", "key-alice"), ("x-api-key", "key-bob"));
    let made = send(addr, "POST", "/threads", Some(b"{}"), &[alice]).await.json();
    let t = made["thread_id"].as_str().unwrap();
    let r = send(addr, "GET", &format!("/threads/{t}/stream"), None, &[bob]).await;
    assert_eq!((r.status, r.body.as_str()), (200, REFUSED), "another user's thread is a missing one");
    let r = send(addr, "GET", &format!("/threads/{t}/stream"), None, &[]).await;
    assert_eq!(r.status, 401);
    let mut open = Open::get(addr, &format!("/threads/{t}/stream"), &[alice]).await;
    assert_eq!(open.status, 200);
    let body = json!({"assistant_id": "simple", "input": {"items": []}}).to_string();
    send(addr, "POST", &format!("/threads/{t}/runs/wait"), Some(body.as_bytes()), &[alice]).await;
    assert_eq!(names(&open.events(5).await), ["metadata", "values", "values", "values", "metadata"]);
}
