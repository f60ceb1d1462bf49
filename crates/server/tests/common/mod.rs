//! A server on a free port and a bare HTTP/1.1 client, for the integration tests.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

pub mod open;

use std::net::SocketAddr;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use weft_graph::{ChannelKind, CompiledGraph, END, JsonState, Runtime, START, StateGraph};
use weft_server::ServerBuilder;

/// A running server; stopped when dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Builds and serves `builder` on a free port.
pub async fn start(builder: ServerBuilder) -> TestServer {
    let server = builder.build().await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.serve_with_shutdown(listener, async {
        let _ = stopped.await;
    }));
    TestServer { addr, stop: Some(stop) }
}

/// A response.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    /// The `thread_id`s of a list of threads, in order.
    pub fn thread_ids(&self) -> Vec<String> {
        let list = self.json();
        list.as_array().unwrap().iter().map(|t| t["thread_id"].as_str().unwrap().to_owned()).collect()
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(self.body.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }

    pub fn detail(&self) -> String {
        self.json()["detail"].as_str().unwrap_or_default().to_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

fn unchunk(mut raw: &str) -> String {
    let mut out = String::new();
    loop {
        let Some((size, rest)) = raw.split_once("\r\n") else { return out };
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.push_str(&rest[..size]);
        raw = &rest[size + 2..];
    }
}

/// Sends one request (`Connection: close`) and reads the whole response.
pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
    headers: &[(&str, &str)],
) -> Reply {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = body.unwrap_or_default();
    if !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH" | "DELETE") {
        head.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, rest) = raw.split_once("\r\n\r\n").unwrap();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers.iter().any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked { unchunk(rest) } else { rest.to_owned() };
    Reply { status, headers, body }
}

pub async fn get(addr: SocketAddr, path: &str) -> Reply {
    send(addr, "GET", path, None, &[]).await
}

pub async fn post(addr: SocketAddr, path: &str, body: Value) -> Reply {
    send(addr, "POST", path, Some(body.to_string().as_bytes()), &[]).await
}

pub async fn post_raw(addr: SocketAddr, path: &str, body: &[u8]) -> Reply {
    send(addr, "POST", path, Some(body), &[]).await
}

/// A new thread's id.
pub async fn thread(addr: SocketAddr) -> String {
    post(addr, "/threads", json!({})).await.json()["thread_id"].as_str().unwrap().to_owned()
}

pub fn state() -> JsonState {
    JsonState::builder()
        .channel("items", ChannelKind::Reducer)
        .channel("delay", ChannelKind::LastValue)
        .build()
}

/// `a` → `b`, each appending its name to `items`.
pub fn simple() -> CompiledGraph<JsonState> {
    let mut g = StateGraph::with_initial(state());
    g.add_node("a", |_: &JsonState| json!({"items": ["a"]}));
    g.add_node("b", |_: &JsonState| json!({"items": ["b"]}));
    g.add_edge(START, "a");
    g.add_edge("a", "b");
    g.add_edge("b", END);
    g.compile().unwrap()
}

/// `ask` interrupts with a question, then appends the answer.
pub fn hitl() -> CompiledGraph<JsonState> {
    let mut g = StateGraph::with_initial(state());
    g.add_node("ask", |_: &JsonState, rt: &Runtime| -> weft_runnable_core::Result<Value> {
        let answer: String = rt.interrupt("approve?")?;
        Ok(json!({"items": [answer]}))
    });
    g.add_edge(START, "ask");
    g.compile().unwrap()
}

/// `wait` sleeps `delay` seconds (0 by default), then `b`.
pub fn slow() -> CompiledGraph<JsonState> {
    let mut g = StateGraph::with_initial(state());
    g.add_node("wait", |s: Value| async move {
        let delay = s.get("delay").and_then(Value::as_f64).unwrap_or(0.0);
        tokio::time::sleep(std::time::Duration::from_secs_f64(delay)).await;
        Ok::<_, weft_runnable_core::Error>(json!({"items": ["slept"]}))
    });
    g.add_node("b", |_: &JsonState| json!({"items": ["b"]}));
    g.add_edge(START, "wait");
    g.add_edge("wait", "b");
    g.compile().unwrap()
}

/// `a`, then `stuck`: with a negative `delay` it awaits something that never answers (counted in
/// `stuck_calls`), as a node whose model call or connection hangs; else it appends `done`.
pub fn frozen(stuck_calls: std::sync::Arc<std::sync::atomic::AtomicUsize>) -> CompiledGraph<JsonState> {
    let mut g = StateGraph::with_initial(state());
    g.add_node("a", |_: &JsonState| json!({"items": ["a"]}));
    g.add_node("stuck", move |s: Value| {
        let calls = std::sync::Arc::clone(&stuck_calls);
        async move {
            if s.get("delay").and_then(Value::as_f64).unwrap_or(0.0) < 0.0 {
                calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                std::future::pending::<()>().await;
            }
            Ok::<_, weft_runnable_core::Error>(json!({"items": ["done"]}))
        }
    });
    g.add_edge(START, "a");
    g.add_edge("a", "stuck");
    g.compile().unwrap()
}

/// Where the tests' servers keep things: a SQLite database in memory (the durable mode's code paths), or,
/// with `WEFT_SERVER_TEST_STORAGE=memory`, the in-memory mode (no database at all).
pub fn storage(builder: ServerBuilder) -> ServerBuilder {
    match std::env::var("WEFT_SERVER_TEST_STORAGE").as_deref() {
        Ok("memory") => builder.in_memory(),
        _ => builder.sqlite_in_memory(),
    }
}

/// A server over `simple`, `hitl` and `slow`, without a file (see [`storage`]).
pub fn builder() -> ServerBuilder {
    storage(
        weft_server::Server::builder().graph("simple", simple()).graph("hitl", hitl()).graph("slow", slow()),
    )
}
