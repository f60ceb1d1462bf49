//! One keep-alive HTTP/1.1 connection (hyper's client connection, no pool on top: each load worker owns
//! one), JSON requests, and streamed runs read as server-sent events.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::sse::{Event, Parser};

/// A connection to the server under test.
#[derive(Debug)]
pub(crate) struct Conn {
    sender: SendRequest<Full<Bytes>>,
    host: String,
}

/// What a streamed run gave.
#[derive(Debug)]
pub(crate) struct Streamed {
    /// From sending the request to the first whole event.
    pub(crate) first_event: Duration,
    /// From sending the request to the end of the body.
    pub(crate) total: Duration,
    /// Every event, in order.
    pub(crate) events: Vec<Event>,
}

impl Conn {
    /// Opens a connection to `addr` (`127.0.0.1:PORT`).
    pub(crate) async fn open(addr: &str) -> Result<Self, String> {
        let stream = TcpStream::connect(addr).await.map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| format!("TCP_NODELAY: {e}"))?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("HTTP handshake with {addr}: {e}"))?;
        tokio::spawn(async move {
            // The connection ends when its sender is dropped or the server closes it; either is fine here.
            let _ = connection.await;
        });
        Ok(Self { sender, host: addr.to_owned() })
    }

    async fn send(
        &mut self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, String> {
        self.send_with(method, path, body, &[]).await
    }

    async fn send_with(
        &mut self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> Result<hyper::Response<hyper::body::Incoming>, String> {
        self.sender.ready().await.map_err(|e| format!("connection lost before {method} {path}: {e}"))?;
        let bytes = body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string()));
        let mut request = Request::builder()
            .method(method.clone())
            .uri(path)
            .header("host", &self.host)
            .header("content-type", "application/json")
            .header("accept", "*/*");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request =
            request.body(Full::new(bytes)).map_err(|e| format!("bad request {method} {path}: {e}"))?;
        self.sender.send_request(request).await.map_err(|e| format!("{method} {path}: {e}"))
    }

    /// `method path` with a JSON body; the answer's JSON (`null` for an empty body). A status other than
    /// 2xx is an error quoting the body.
    pub(crate) async fn json(
        &mut self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, String> {
        let bytes = self.bytes(method.clone(), path, body).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&bytes).map_err(|e| {
            format!("{method} {path}: the answer is not JSON ({e}): {}", String::from_utf8_lossy(&bytes))
        })
    }

    /// `method path` without a body; the answer as text (`/metrics`). A status other than 2xx is an
    /// error quoting the body.
    pub(crate) async fn text(&mut self, method: Method, path: &str) -> Result<String, String> {
        let bytes = self.bytes(method, path, None).await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// `method path` with a JSON body; the answer's body, read to its end.
    async fn bytes(&mut self, method: Method, path: &str, body: Option<&Value>) -> Result<Bytes, String> {
        let response = self.send(method.clone(), path, body).await?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("{method} {path}: reading the body: {e}"))?
            .to_bytes();
        check_status(status, &method, path, &bytes)?;
        Ok(bytes)
    }

    /// `POST path` with `body`, read to its end as server-sent events.
    pub(crate) async fn stream(&mut self, path: &str, body: &Value) -> Result<Streamed, String> {
        let started = Instant::now();
        let response = self.send(Method::POST, path, Some(body)).await?;
        let status = response.status();
        let mut body = response.into_body();
        if !status.is_success() {
            let bytes = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
            return Err(format!("POST {path}: {status}: {}", String::from_utf8_lossy(&bytes)));
        }
        let mut parser = Parser::default();
        let mut events = Vec::new();
        let mut first_event = None;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("POST {path}: the stream broke: {e}"))?;
            if let Ok(data) = frame.into_data() {
                parser.feed(&data, &mut events);
                if first_event.is_none() && !events.is_empty() {
                    first_event = Some(started.elapsed());
                }
            }
        }
        let total = started.elapsed();
        let first_event =
            first_event.ok_or_else(|| format!("POST {path}: the stream ended without an event"))?;
        Ok(Streamed { first_event, total, events })
    }
}

/// What [`Conn::stream_events`] learnt before the stream ended or broke.
#[derive(Debug, Default)]
pub(crate) struct Partial {
    /// The events, as they came (kept when the stream breaks).
    pub(crate) events: Vec<Event>,
    /// The response's `Content-Location` header.
    pub(crate) location: Option<String>,
}

impl Conn {
    /// Sends a request whose answer is an SSE stream and adds its events to `into` as they come: `Ok` when
    /// the stream ended, an error when the request failed or the stream broke (what came before stays).
    pub(crate) async fn stream_events(
        &mut self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
        into: &mut Partial,
    ) -> Result<(), String> {
        let response = self.send_with(method.clone(), path, body, headers).await?;
        let status = response.status();
        if let Some(location) = response.headers().get("content-location").and_then(|v| v.to_str().ok()) {
            into.location = Some(location.to_owned());
        }
        let mut body = response.into_body();
        if !status.is_success() {
            let bytes = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
            return Err(format!("{method} {path}: {status}: {}", String::from_utf8_lossy(&bytes)));
        }
        let mut parser = Parser::default();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("{method} {path}: the stream broke: {e}"))?;
            if let Ok(data) = frame.into_data() {
                parser.feed(&data, &mut into.events);
            }
        }
        Ok(())
    }
}

/// An SSE stream that stays open (a v2 thread stream): its events as they arrive, each with the instant it
/// was read, from a task that owns the connection; dropping it closes the connection.
#[derive(Debug)]
pub(crate) struct Follow {
    events: mpsc::UnboundedReceiver<Result<(Instant, Event), String>>,
    reader: JoinHandle<()>,
}

impl Conn {
    /// `POST path` with `body`; once the answer's headers came (a 2xx status), its events are read on.
    pub(crate) async fn follow(mut self, path: &str, body: &Value) -> Result<Follow, String> {
        let response = self.send(Method::POST, path, Some(body)).await?;
        let status = response.status();
        let mut body = response.into_body();
        if !status.is_success() {
            let bytes = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
            return Err(format!("POST {path}: {status}: {}", String::from_utf8_lossy(&bytes)));
        }
        let (sender, events) = mpsc::unbounded_channel();
        let path = path.to_owned();
        let reader = tokio::spawn(async move {
            let _conn = self;
            let mut parser = Parser::default();
            let mut parsed = Vec::new();
            while let Some(frame) = body.frame().await {
                let data = match frame {
                    Ok(frame) => frame.into_data(),
                    Err(err) => {
                        let _ = sender.send(Err(format!("POST {path}: the stream broke: {err}")));
                        return;
                    }
                };
                let Ok(data) = data else { continue };
                let read = Instant::now();
                parser.feed(&data, &mut parsed);
                for event in parsed.drain(..) {
                    if sender.send(Ok((read, event))).is_err() {
                        return;
                    }
                }
            }
            let _ = sender.send(Err(format!("POST {path}: the stream ended")));
        });
        Ok(Follow { events, reader })
    }
}

impl Follow {
    /// The next event and when it was read, or why none will come.
    pub(crate) async fn next(&mut self) -> Result<(Instant, Event), String> {
        self.events.recv().await.unwrap_or_else(|| Err("the stream's reader stopped".to_owned()))
    }
}

impl Drop for Follow {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

fn check_status(status: StatusCode, method: &Method, path: &str, body: &[u8]) -> Result<(), String> {
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("{method} {path}: {status}: {}", String::from_utf8_lossy(body)))
    }
}
