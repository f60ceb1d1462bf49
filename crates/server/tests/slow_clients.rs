//! Clients that do not read: the run goes on at its own pace, the listener is cut once its backlog passes
//! its cap (the stream ends without its last chunk, which the SDK takes as a drop to reconnect from), and a
//! reconnect with `Last-Event-ID` gets every event after the last one read.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{get, post, storage, thread};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use weft_graph::{END, JsonState, Runtime, START, StateGraph};

/// How many `custom` events the run writes, and how big each is: far more than a listener's cap and the
/// sockets' buffers together.
const EVENTS: usize = 6000;
const EVENT_BYTES: usize = 4096;

fn chatty() -> weft_graph::CompiledGraph<JsonState> {
    let mut g = StateGraph::with_initial(common::state());
    g.add_node("talk", |_: &JsonState, rt: &Runtime| -> weft_runnable_core::Result<Value> {
        let filler = "x".repeat(EVENT_BYTES);
        for i in 0..EVENTS {
            rt.write(&json!({"i": i, "filler": filler}));
        }
        Ok(json!({"items": ["done"]}))
    });
    g.add_edge(START, "talk");
    g.add_edge("talk", END);
    g.compile().unwrap()
}

/// Opens a request and leaves its answer unread.
async fn open(addr: SocketAddr, method: &str, path: &str, body: &str, headers: &[(&str, &str)]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

/// What a streamed answer carried: the `i` of each `custom` event, the last event id, and whether the
/// body ended properly (its last chunk) rather than being cut.
struct Read {
    custom: Vec<u64>,
    last_id: Option<String>,
    complete: bool,
}

async fn read_all(mut stream: TcpStream) -> Read {
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw).await;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (_, mut rest) = raw.split_once("\r\n\r\n").unwrap();
    let mut body = String::new();
    let mut complete = false;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        if size == 0 {
            complete = true;
            break;
        }
        let Some(chunk) = after.get(..size) else { break };
        body.push_str(chunk);
        rest = after.get(size + 2..).unwrap_or_default();
    }
    let mut custom = Vec::new();
    let mut last_id = None;
    for frame in body.split("\r\n\r\n") {
        let mut name = "";
        let mut data = None;
        for line in frame.split("\r\n") {
            if let Some(n) = line.strip_prefix("event: ") {
                name = n;
            } else if let Some(d) = line.strip_prefix("data: ") {
                data = Some(d);
            } else if let Some(id) = line.strip_prefix("id: ") {
                last_id = Some(id.to_owned());
            }
        }
        if let (true, Some(data)) = (name == "custom", data) {
            let value: Value = serde_json::from_str(data).unwrap();
            custom.push(value["i"].as_u64().unwrap());
        }
    }
    Read { custom, last_id, complete }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unread_stream_is_cut_without_slowing_the_run_and_resumes_completely() {
    let server = common::start(storage(weft_server::Server::builder().graph("chatty", chatty()))).await;
    let addr = server.addr;
    let thread_id = thread(addr).await;
    let body =
        json!({"assistant_id": "chatty", "input": {}, "stream_mode": "custom", "stream_resumable": true});
    let unread =
        open(addr, "POST", &format!("/threads/{thread_id}/runs/stream"), &body.to_string(), &[]).await;

    // The run ends while nobody reads its stream.
    let started = Instant::now();
    let run = loop {
        let runs = get(addr, &format!("/threads/{thread_id}/runs")).await.json();
        if runs[0]["status"] == "success" {
            break runs[0].clone();
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the run is held up by its reader: {runs}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let first = read_all(unread).await;
    assert!(!first.complete, "the reader fell behind: its stream is cut, not ended");
    // What was queued before the cut goes out as far as the socket takes it: the HTTP layer buffers at
    // most 64 KiB, and what it holds when the body ends in error is dropped (with hyper's default of
    // about 400 KiB this reader got none of the events: 48 of 62 now).
    assert!(!first.custom.is_empty(), "the events queued before the cut reach the reader");
    assert!(first.custom.len() < EVENTS, "{} events before the cut", first.custom.len());
    assert_eq!(first.custom, (0..first.custom.len() as u64).collect::<Vec<_>>(), "in order, none lost");

    let run_id = run["run_id"].as_str().unwrap();
    let last = first.last_id.expect("the cut stream had events with ids");
    let again = open(
        addr,
        "GET",
        &format!("/threads/{thread_id}/runs/{run_id}/stream"),
        "",
        &[("Last-Event-ID", &last)],
    )
    .await;
    let rest = read_all(again).await;
    assert!(rest.complete);
    let mut all = first.custom;
    all.extend(rest.custom);
    assert_eq!(all, (0..EVENTS as u64).collect::<Vec<_>>(), "the reconnect resumes where the cut was");

    // A thread that is still served meanwhile.
    assert_eq!(get(addr, "/ok").await.status, 200);
    assert_eq!(post(addr, "/threads/search", json!({})).await.status, 200);
}
