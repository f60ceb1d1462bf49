//! The Agent Streaming Protocol (v2): `POST /threads/{id}/commands` answering bad input with the
//! protocol's typed errors, and `POST /threads/{id}/stream/events` numbering a run's protocol events,
//! filtering them, and replaying what came after a `since`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::net::SocketAddr;

use common::open::Open;
use common::{builder, post, post_raw, start};
use serde_json::{Value, json};

async fn command(addr: SocketAddr, thread: &str, body: Value) -> (u16, Value) {
    let reply = post(addr, &format!("/threads/{thread}/commands"), body).await;
    (reply.status, reply.json())
}

fn new_thread() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Starts a run of `assistant` on `thread` (input `{"items": []}`) with `run.start`; the answer.
async fn run_start(addr: SocketAddr, thread: &str, assistant: &str) -> Value {
    let params = json!({"assistant_id": assistant, "input": {"items": []}});
    command(addr, thread, json!({"id": 1, "method": "run.start", "params": params})).await.1
}

#[tokio::test]
async fn commands_answer_bad_input_with_typed_errors() {
    let server = start(builder()).await;
    let addr = server.addr;
    let t = new_thread();
    let raw = post_raw(addr, &format!("/threads/{t}/commands"), b"{not json").await;
    assert_eq!((raw.status, raw.json()), (400, json!({"detail": "Invalid JSON body"})));
    let malformed = json!({"type": "error", "id": "x", "error": "invalid_argument",
        "message": "Protocol commands must include an integer id and string method."});
    assert_eq!(command(addr, &t, json!({"id": "x", "method": "run.start"})).await, (400, malformed));
    assert_eq!(command(addr, &t, json!([1, 2])).await.0, 400);
    for method in ["state.get", "input.inject", "state.fork", "nope"] {
        let (status, body) = command(addr, &t, json!({"id": 1, "method": method})).await;
        assert_eq!((status, &body["error"]), (200, &json!("unknown_command")), "{method}");
        assert_eq!(body["message"], format!("Unknown protocol command: {method}"));
    }
    let (_, body) = command(addr, &t, json!({"id": 2, "method": "run.start", "params": {}})).await;
    assert_eq!(
        body,
        json!({"type": "error", "id": 2, "error": "invalid_argument", "message": "run.start requires an assistant_id."})
    );
    let fork = json!({"assistant_id": "simple", "config": {"configurable": {"checkpoint_id": "x"}}});
    let (_, body) = command(addr, &t, json!({"id": 3, "method": "run.start", "params": fork})).await;
    assert_eq!(body["message"], "Invalid config.configurable.checkpoint_id: 'x'.");
    let (_, body) =
        command(addr, &t, json!({"id": 4, "method": "run.start", "params": {"assistant_id": "zzz"}})).await;
    assert_eq!(body["error"], "unknown_error");
    assert!(body["message"].as_str().unwrap().starts_with("422: Invalid assistant: 'zzz'."), "{body}");
    let (_, body) = command(
        addr,
        "not-a-uuid",
        json!({"id": 5, "method": "run.start", "params": {"assistant_id": "simple"}}),
    )
    .await;
    assert_eq!(body["error"], "unknown_error", "{body}");
    let (_, body) = command(
        addr,
        &t,
        json!({"id": 6, "method": "subscription.subscribe", "params": {"channels": ["debug"]}}),
    )
    .await;
    assert_eq!(body["message"], "subscription.subscribe received an unsupported channel.");
    let (_, body) =
        command(addr, &t, json!({"id": 7, "method": "input.respond", "params": {"responses": []}})).await;
    assert_eq!(body["message"], "input.respond requires at least one response.");
    let (_, body) =
        command(addr, &t, json!({"id": 8, "method": "input.respond", "params": {"interrupt_id": "i"}})).await;
    assert_eq!(body["error"], "no_such_run");
    let (_, body) = command(addr, &t, json!({"id": 9, "method": "agent.getTree"})).await;
    assert_eq!(body["error"], "no_such_run");
    let (_, body) = command(
        addr,
        &t,
        json!({"id": 10, "method": "subscription.unsubscribe", "params": {"subscription_id": "s"}}),
    )
    .await;
    assert_eq!(body["error"], "no_such_subscription");
}

#[tokio::test]
async fn event_streams_refuse_bad_filters() {
    let server = start(builder()).await;
    let addr = server.addr;
    let path = format!("/threads/{}/stream/events", new_thread());
    let reply = post(addr, &path, json!({"channels": ["values", "debug"]})).await;
    assert_eq!(reply.status, 400);
    assert!(
        reply.detail().starts_with("channels contains unsupported entries: debug."),
        "{}",
        reply.detail()
    );
    let reply = post(addr, &path, json!({"channels": []})).await;
    assert_eq!(
        (reply.status, reply.detail()),
        (400, "channels is required and must be a non-empty array".to_owned())
    );
    let reply = post_raw(addr, &path, b"[").await;
    assert_eq!((reply.status, reply.detail()), (400, "Invalid JSON body".to_owned()));
    let reply = post(addr, "/threads/not-a-uuid/stream/events", json!({"channels": ["values"]})).await;
    assert_eq!(reply.status, 422);
}

/// Whether a protocol event is a run's end (the root's `completed`, `failed` or `interrupted`).
fn is_end(event: &Value) -> bool {
    event["method"] == "lifecycle"
        && event["params"]["namespace"] == json!([])
        && event["params"]["data"]["event"] != "running"
}

/// The protocol events of a stream up to the `runs`-th run's end.
async fn until_ends(open: &mut Open, runs: usize) -> Vec<Value> {
    let mut n = 1;
    loop {
        let mut events: Vec<Value> = open.events(n).await.into_iter().map(|(_, data, _)| data).collect();
        let ends: Vec<usize> = events.iter().enumerate().filter(|(_, e)| is_end(e)).map(|(i, _)| i).collect();
        if let Some(&end) = ends.get(runs - 1) {
            events.truncate(end + 1);
            return events;
        }
        n = events.len() + 1;
    }
}

async fn until_end(open: &mut Open) -> Vec<Value> {
    until_ends(open, 1).await
}

#[tokio::test]
async fn a_run_streams_numbered_events_and_a_reconnect_replays_after_since() {
    let server = start(builder()).await;
    let addr = server.addr;
    let t = new_thread();
    let (status, started) = command(
        addr,
        &t,
        json!({"id": 1, "method": "run.start",
        "params": {"assistant_id": "simple", "input": {"items": []}}}),
    )
    .await;
    assert_eq!(
        (status, &started["type"], &started["meta"]),
        (200, &json!("success"), &json!({"applied_through_seq": 0}))
    );
    let all = json!([
        "values",
        "updates",
        "messages",
        "tools",
        "custom",
        "lifecycle",
        "input",
        "tasks",
        "checkpoints"
    ]);
    let path = format!("/threads/{t}/stream/events");
    let mut open = Open::post(addr, &path, &json!({"channels": all})).await;
    assert_eq!(open.status, 200);
    let events = until_end(&mut open).await;
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    let methods: Vec<&str> = events.iter().filter_map(|e| e["method"].as_str()).collect();
    assert_eq!(methods.first(), Some(&"lifecycle"));
    assert_eq!(events[0]["params"]["data"], json!({"event": "running", "graph_name": "simple"}));
    assert_eq!(
        events.last().unwrap()["params"]["data"],
        json!({"event": "completed", "graph_name": "simple"})
    );
    let values: Vec<&Value> =
        events.iter().filter(|e| e["method"] == "values").map(|e| &e["params"]["data"]).collect();
    assert_eq!(values, [&json!({"items": []}), &json!({"items": ["a"]}), &json!({"items": ["a", "b"]})]);
    let updates: Vec<(&Value, &Value)> = events
        .iter()
        .filter(|e| e["method"] == "updates")
        .map(|e| (&e["params"]["node"], &e["params"]["data"]))
        .collect();
    assert_eq!(updates, [(&json!("a"), &json!({"items": ["a"]})), (&json!("b"), &json!({"items": ["b"]}))]);
    assert_eq!(events.iter().filter(|e| e["method"] == "tasks").count(), 4, "a start and a result per task");

    // A reconnect gets what came after `since`, the same events byte for byte.
    let mut again = Open::post(addr, &path, &json!({"channels": all, "since": 3})).await;
    let replayed = until_end(&mut again).await;
    assert_eq!(replayed, events[3..].to_vec());
    // A filter keeps the numbering.
    let mut values_only = Open::post(addr, &path, &json!({"channels": ["values", "lifecycle"]})).await;
    let filtered = until_end(&mut values_only).await;
    let kept: Vec<Value> =
        events.iter().filter(|e| e["method"] == "values" || e["method"] == "lifecycle").cloned().collect();
    assert_eq!(filtered, kept);
}

#[tokio::test]
async fn an_interrupt_is_asked_for_and_answered_with_input_respond() {
    let server = start(builder()).await;
    let addr = server.addr;
    let t = new_thread();
    run_start(addr, &t, "hitl").await;
    let path = format!("/threads/{t}/stream/events");
    let mut open = Open::post(addr, &path, &json!({"channels": ["input", "lifecycle", "values"]})).await;
    let events = until_end(&mut open).await;
    let asked: Vec<&Value> = events.iter().filter(|e| e["method"] == "input.requested").collect();
    assert_eq!(asked.len(), 1, "{events:?}");
    assert_eq!(asked[0]["params"]["data"]["payload"], "approve?");
    assert_eq!(events.last().unwrap()["params"]["data"]["event"], "interrupted");
    let interrupt = asked[0]["params"]["data"]["interrupt_id"].clone();
    let (_, wrong) = command(
        addr,
        &t,
        json!({"id": 2, "method": "input.respond", "params": {"interrupt_id": "nope", "response": 1}}),
    )
    .await;
    assert_eq!(wrong["error"], "no_such_interrupt");
    let (_, answered) = command(
        addr,
        &t,
        json!({"id": 3, "method": "input.respond", "params": {"interrupt_id": interrupt, "response": "yes"}}),
    )
    .await;
    assert_eq!(answered["type"], "success", "{answered}");
    let both = until_ends(&mut open, 2).await;
    assert_eq!(both.last().unwrap()["params"]["data"]["event"], "completed");
    let last = both.iter().rev().find(|e| e["method"] == "values").unwrap();
    assert_eq!(last["params"]["data"], json!({"items": ["yes"]}));
}

/// A WebSocket client, as much as these tests need: the handshake, masked text frames out, frames in.
struct Socket {
    stream: tokio::net::TcpStream,
    buffered: Vec<u8>,
}

impl Socket {
    async fn connect(addr: SocketAddr, path: &str) -> Self {
        use tokio::io::AsyncWriteExt as _;
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut socket = Self { stream, buffered: Vec::new() };
        let end = loop {
            if let Some(end) = socket.buffered.windows(4).position(|w| w == b"\r\n\r\n") {
                break end;
            }
            socket.fill().await;
        };
        let head = String::from_utf8_lossy(&socket.buffered[..end]).to_string();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        socket.buffered.drain(..end + 4);
        socket
    }

    async fn fill(&mut self) {
        use tokio::io::AsyncReadExt as _;
        let mut buf = [0u8; 65536];
        let n = tokio::time::timeout(std::time::Duration::from_secs(20), self.stream.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "the socket closed");
        self.buffered.extend_from_slice(&buf[..n]);
    }

    async fn send(&mut self, value: &Value) {
        use tokio::io::AsyncWriteExt as _;
        let payload = value.to_string().into_bytes();
        let mut frame = vec![0x81u8];
        match payload.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
        }
        let mask = [1u8, 2, 3, 4];
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.stream.write_all(&frame).await.unwrap();
    }

    /// The next text frame, as JSON.
    async fn next(&mut self) -> Value {
        loop {
            if self.buffered.len() >= 2 {
                let (opcode, len7) = (self.buffered[0] & 0x0f, usize::from(self.buffered[1] & 0x7f));
                let (len, start) = match len7 {
                    126 if self.buffered.len() >= 4 => {
                        (usize::from(u16::from_be_bytes([self.buffered[2], self.buffered[3]])), 4)
                    }
                    127 if self.buffered.len() >= 10 => (
                        usize::try_from(u64::from_be_bytes(self.buffered[2..10].try_into().unwrap()))
                            .unwrap(),
                        10,
                    ),
                    n if n < 126 => (n, 2),
                    _ => (usize::MAX, 0),
                };
                if len != usize::MAX && self.buffered.len() >= start + len {
                    let payload: Vec<u8> = self.buffered.drain(..start + len).skip(start).collect();
                    assert_ne!(opcode, 0x8, "the socket closed: {}", String::from_utf8_lossy(&payload));
                    if opcode == 0x1 {
                        return serde_json::from_slice(&payload).unwrap();
                    }
                    continue;
                }
            }
            self.fill().await;
        }
    }

    /// A socket on `thread`'s events subscribed to `channels` (command 1), and the events it sent up to the
    /// end of the thread's run.
    async fn subscribed(addr: SocketAddr, thread: &str, channels: Value) -> (Self, Vec<Value>) {
        let mut ws = Self::connect(addr, &format!("/threads/{thread}/stream/events")).await;
        ws.send(&json!({"id": 1, "method": "subscription.subscribe", "params": {"channels": channels}}))
            .await;
        let mut seen = Vec::new();
        while !seen.last().is_some_and(is_end) {
            let frame = ws.next().await;
            if frame["type"] == "event" {
                seen.push(frame);
            }
        }
        (ws, seen)
    }

    /// Frames up to the answer to command `id`: (the events before it, the answer).
    async fn until_answer(&mut self, id: u64) -> (Vec<Value>, Value) {
        let mut events = Vec::new();
        loop {
            let frame = self.next().await;
            if frame["type"] == "event" {
                events.push(frame);
            } else if frame["id"] == json!(id) {
                return (events, frame);
            }
        }
    }
}

/// `chatty`: one node writing more custom events than a stream keeps.
fn chatty() -> weft_graph::CompiledGraph<weft_graph::JsonState> {
    let mut g = weft_graph::StateGraph::with_initial(common::state());
    g.add_node("talk", |_: &weft_graph::JsonState, rt: &weft_graph::Runtime| {
        for i in 0..10_050 {
            rt.write(&i);
        }
        json!({"items": ["done"]})
    });
    g.add_edge(weft_graph::START, "talk");
    g.compile().unwrap()
}

#[tokio::test]
async fn a_websocket_replays_after_since_or_answers_resume_gap() {
    let server = start(builder().graph("chatty", chatty())).await;
    let addr = server.addr;
    let t = new_thread();
    let started = run_start(addr, &t, "chatty").await;
    let run_id = started["result"]["run_id"].as_str().unwrap().to_owned();
    assert_eq!(common::get(addr, &format!("/threads/{t}/runs/{run_id}/join")).await.status, 200);

    let (mut ws, lifecycle) = Socket::subscribed(addr, &t, json!(["lifecycle"])).await;
    let last = lifecycle.last().unwrap()["seq"].as_u64().unwrap();
    assert_eq!(lifecycle.last().unwrap()["params"]["data"]["event"], "completed", "{lifecycle:?}");
    assert!(last > 10_050, "every custom event is numbered: {last}");

    // The stream keeps its last 10 000 events: a `since` before them is a gap.
    ws.send(
        &json!({"id": 2, "method": "subscription.reconnect", "params": {"channels": ["custom"], "since": 0}}),
    )
    .await;
    let (replayed, gap) = ws.until_answer(2).await;
    assert!(replayed.is_empty());
    let min = last - 9_999;
    assert_eq!(
        (&gap["error"], &gap["since"], &gap["min_available_seq"]),
        (&json!("resume_gap"), &json!(0), &json!(min))
    );
    assert_eq!(gap["message"], format!("resume gap: since=0 is older than min_available_seq={min}"));

    // A `since` within them replays what came after, filtered.
    ws.send(&json!({"id": 3, "method": "subscription.reconnect", "params": {"channels": ["lifecycle", "values"], "since": min - 1}})).await;
    let (replayed, answer) = ws.until_answer(3).await;
    assert_eq!(answer["type"], "success", "{answer}");
    assert_eq!(answer["result"]["replayed_events"], json!(replayed.len()));
    assert_eq!(replayed.last().unwrap(), lifecycle.last().unwrap());
    assert!(replayed.iter().all(|e| e["method"] == "values" || e["method"] == "lifecycle"));

    // Commands that are not JSON, or not commands, are typed errors on the socket.
    ws.send(&json!({"id": "x", "method": 1})).await;
    let frame = ws.next().await;
    assert_eq!((&frame["error"], &frame["id"]), (&json!("invalid_argument"), &json!("x")));
    ws.send(&json!({"id": 4, "method": "subscription.unsubscribe", "params": {"subscription_id": "nope"}}))
        .await;
    assert_eq!(ws.until_answer(4).await.1["error"], "no_such_subscription");
    ws.send(&json!({"id": 5, "method": "agent.getTree"})).await;
    let tree = ws.until_answer(5).await.1;
    assert_eq!(
        tree["result"]["tree"],
        json!({"namespace": [], "status": "completed", "graph_name": "chatty"})
    );
}

#[tokio::test]
async fn a_websocket_checks_an_answers_namespace_against_the_interrupt() {
    let server = start(builder()).await;
    let addr = server.addr;
    let t = new_thread();
    run_start(addr, &t, "hitl").await;
    let (mut ws, seen) = Socket::subscribed(addr, &t, json!(["input", "lifecycle"])).await;
    let asked = seen.iter().find(|e| e["method"] == "input.requested").expect("an input request");
    let interrupt = asked["params"]["data"]["interrupt_id"].clone();
    let elsewhere = json!({"interrupt_id": interrupt, "namespace": ["other"], "response": "no"});
    ws.send(&json!({"id": 2, "method": "input.respond", "params": elsewhere})).await;
    let (_, refused) = ws.until_answer(2).await;
    assert_eq!(refused["error"], "no_such_interrupt");
    assert_eq!(refused["message"], "Interrupt namespace does not match the pending interrupt.");
    ws.send(&json!({"id": 3, "method": "input.respond", "params": {"interrupt_id": interrupt, "response": "yes"}})).await;
    let (_, answered) = ws.until_answer(3).await;
    assert_eq!(answered["type"], "success", "{answered}");
    // The resumed run's events come on the same socket, numbered on.
    let end = loop {
        let frame = ws.next().await;
        if frame["type"] == "event" && is_end(&frame) {
            break frame;
        }
    };
    assert_eq!(end["params"]["data"]["event"], "completed");
    assert!(end["seq"].as_u64().unwrap() > seen.last().unwrap()["seq"].as_u64().unwrap());
}

#[tokio::test]
async fn the_replay_buffer_holds_what_the_server_is_built_with_and_zero_is_a_typed_error() {
    let Err(refused) = builder().protocol_v2_buffer(0).build().await else {
        panic!("a buffer of no events is refused");
    };
    assert!(matches!(refused, weft_server::ServerError::ProtocolBuffer(_)), "{refused:?}");
    assert_eq!(
        refused.to_string(),
        "invalid v2 protocol buffer size: the buffer must be a positive integer, got 0"
    );

    let server = start(builder().graph("chatty", chatty()).protocol_v2_buffer(100)).await;
    let addr = server.addr;
    let t = new_thread();
    let run_id = run_start(addr, &t, "chatty").await["result"]["run_id"].as_str().unwrap().to_owned();
    assert_eq!(common::get(addr, &format!("/threads/{t}/runs/{run_id}/join")).await.status, 200);
    let (mut ws, lifecycle) = Socket::subscribed(addr, &t, json!(["lifecycle"])).await;
    let last = lifecycle.last().unwrap()["seq"].as_u64().unwrap();
    let reconnect = |id: u64, since: u64| json!({"id": id, "method": "subscription.reconnect", "params": {"channels": ["custom"], "since": since}});
    ws.send(&reconnect(2, last - 101)).await;
    let (_, gap) = ws.until_answer(2).await;
    assert_eq!((&gap["error"], &gap["min_available_seq"]), (&json!("resume_gap"), &json!(last - 99)));
    ws.send(&reconnect(3, last - 100)).await;
    let (replayed, answer) = ws.until_answer(3).await;
    assert_eq!(answer["type"], "success", "{answer}");
    // The last 100 events: the run's last custom events, then its state and lifecycle ends.
    assert_eq!(replayed.first().unwrap()["seq"], json!(last - 99));
}
