//! A response read as it comes (an SSE stream that does not end by itself), and its events.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// A response read as it comes: its status, then its chunked body, decoded.
pub struct Open {
    stream: TcpStream,
    raw: Vec<u8>,
    pub status: u16,
    pub body: String,
}

impl Open {
    pub async fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Self {
        Self::send(addr, "GET", path, headers, b"").await
    }

    /// A `POST` of a JSON body, read as it comes.
    #[allow(dead_code)]
    pub async fn post(addr: SocketAddr, path: &str, body: &Value) -> Self {
        let body = body.to_string();
        Self::send(addr, "POST", path, &[("Content-Type", "application/json")], body.as_bytes()).await
    }

    async fn send(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Self {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n");
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if method != "GET" {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(body).await.unwrap();
        let mut open = Self { stream, raw: Vec::new(), status: 0, body: String::new() };
        while open.status == 0 {
            open.read().await;
            if let Some(end) = open.raw.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&open.raw[..end]).to_string();
                open.status = head.split(' ').nth(1).unwrap().parse().unwrap();
                open.raw.drain(..end + 4);
            }
        }
        open
    }

    pub async fn read(&mut self) {
        let mut buf = [0u8; 8192];
        let n = self.stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "the stream closed: {:?}", self.body);
        self.raw.extend_from_slice(&buf[..n]);
    }

    /// Decodes the complete chunks read so far.
    pub fn decode(&mut self) {
        loop {
            let Some(line) = self.raw.windows(2).position(|w| w == b"\r\n") else { return };
            let size = usize::from_str_radix(String::from_utf8_lossy(&self.raw[..line]).trim(), 16).unwrap();
            if self.raw.len() < line + 2 + size + 2 {
                return;
            }
            self.body.push_str(&String::from_utf8_lossy(&self.raw[line + 2..line + 2 + size]));
            self.raw.drain(..line + 2 + size + 2);
        }
    }

    /// Reads until the body holds `n` events (heartbeats aside); panics after 10 s.
    pub async fn events(&mut self, n: usize) -> Vec<(String, Value, String)> {
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                self.decode();
                let events = parse(&self.body);
                if events.len() >= n {
                    return events;
                }
                self.read().await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("fewer than {n} events within 10 s: {:?}", self.body))
    }

    /// What arrives within `wait` (the whole body so far).
    pub async fn quiet_for(&mut self, wait: Duration) -> String {
        let _ = tokio::time::timeout(wait, async {
            loop {
                self.read().await;
            }
        })
        .await;
        self.decode();
        self.body.clone()
    }
}

/// The SSE events of a body: (event, data, id).
pub fn parse(body: &str) -> Vec<(String, Value, String)> {
    body.split("\r\n\r\n")
        .filter(|frame| frame.starts_with("event: "))
        .map(|frame| {
            let field = |name: &str| {
                frame.split("\r\n").find_map(|l| l.strip_prefix(name)).unwrap_or_default().to_owned()
            };
            (field("event: "), serde_json::from_str(&field("data: ")).unwrap(), field("id: "))
        })
        .collect()
}
