//! The real `weft-server-e2e` binary in a child process, on a free port, and a small blocking HTTP/1.1
//! client for it (requests with `Connection: close`; SSE read as it arrives).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code, missing_docs, unreachable_pub)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A scratch folder, removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("weft-lifecycle-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A free TCP port on loopback.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A running `weft-server-e2e` (killed when dropped).
pub struct Weft {
    child: Option<Child>,
    pub port: u16,
}

impl Weft {
    /// Starts the binary on `db` (a SQLite file) with the chaos graph and `extra` arguments; `env` is set
    /// for it.
    pub fn start_with(db: &Path, extra: &[&str], env: &[(&str, &Path)]) -> Self {
        let port = free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_weft-server-e2e"));
        command.args(["--port", &port.to_string(), "--db"]).arg(db).arg("--chaos").args(extra);
        for (key, value) in env {
            command.env(key, value);
        }
        command.stdout(Stdio::null()).stderr(Stdio::piped());
        Self { child: Some(command.spawn().unwrap()), port }
    }

    /// Starts the binary with the chaos graph as one instance of a scaled-out server (built with
    /// `scale`): `env` names its database and Redis (`DATABASE_URI`, `REDIS_URI`, `REDIS_KEY_PREFIX`)
    /// and whatever else it reads.
    pub fn start_scaled(env: &[(&str, &str)]) -> Self {
        let port = free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_weft-server-e2e"));
        command.args(["--port", &port.to_string(), "--chaos"]).envs(env.iter().copied());
        command.stdout(Stdio::null()).stderr(Stdio::piped());
        Self { child: Some(command.spawn().unwrap()), port }
    }

    pub fn start(db: &Path, extra: &[&str]) -> Self {
        Self::start_with(db, extra, &[])
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Waits until `/ok` answers (at most 60 s: the first start of a test run may be slow).
    pub fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("weft-server-e2e exited at start ({status}): {}", self.stderr());
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() && self.get("/ok").0 == 200 {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("weft-server-e2e did not answer /ok within 60 s");
    }

    /// Waits for the process to exit by itself, at most `limit`; kills it past that.
    pub fn wait_exit(mut self, limit: Duration) -> Output {
        let mut child = self.child.take().unwrap();
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if child.try_wait().unwrap().is_some() {
                return child.wait_with_output().unwrap();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let output = child.wait_with_output().unwrap();
        panic!("weft-server-e2e did not exit within {limit:?}: {}", String::from_utf8_lossy(&output.stderr));
    }

    /// Sends `signal` (`TERM`, `INT`) with `kill`.
    #[cfg(unix)]
    pub fn signal(&self, signal: &str) {
        let status =
            Command::new("kill").arg(format!("-{signal}")).arg(self.pid().to_string()).status().unwrap();
        assert!(status.success(), "kill -{signal} failed");
    }

    /// SIGKILL, and waits for the end.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// What the process wrote to stderr (once it has exited).
    fn stderr(&mut self) -> String {
        let mut text = String::new();
        if let Some(err) = self.child.as_mut().and_then(|c| c.stderr.as_mut()) {
            let _ = err.read_to_string(&mut text);
        }
        text
    }

    pub fn get(&self, path: &str) -> (u16, String) {
        request(self.port, "GET", path, None, &[])
    }

    pub fn post(&self, path: &str, body: &str) -> (u16, String) {
        request(self.port, "POST", path, Some(body), &[])
    }

    /// Opens a streamed request (`POST` with `body`, or `GET` without) and reads its head.
    pub fn stream(&self, method: &str, path: &str, body: Option<&str>, headers: &[(&str, &str)]) -> Sse {
        let mut stream = connect(self.port);
        write_request(&mut stream, method, path, body, headers);
        let mut reader = BufReader::new(stream);
        let (status, chunked) = read_head(&mut reader);
        Sse { reader, status, chunked, left: 0, buffer: String::new() }
    }
}

impl Drop for Weft {
    fn drop(&mut self) {
        self.kill();
    }
}

fn connect(port: u16) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    stream
}

fn write_request(
    stream: &mut TcpStream,
    method: &str,
    path: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        head.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    if let Some(body) = body {
        stream.write_all(body.as_bytes()).unwrap();
    }
}

/// Reads a response head: the status, and whether the body is chunked.
fn read_head(reader: &mut BufReader<TcpStream>) -> (u16, bool) {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status = line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut chunked = false;
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        if line.to_ascii_lowercase().starts_with("transfer-encoding:") && line.contains("chunked") {
            chunked = true;
        }
    }
    (status, chunked)
}

/// One request, its whole answer: the status and the body.
pub fn request(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let mut stream = connect(port);
    write_request(&mut stream, method, path, body, headers);
    let mut reader = BufReader::new(stream);
    let (status, chunked) = read_head(&mut reader);
    let mut sse = Sse { reader, status, chunked, left: 0, buffer: String::new() };
    let mut text = String::new();
    while let Some(piece) = sse.read_piece() {
        text.push_str(&piece);
    }
    (status, text)
}

/// A field of a JSON object's text.
pub fn field(json: &str, name: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(json).unwrap();
    value[name].as_str().unwrap_or_default().to_owned()
}

/// An SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub id: Option<String>,
    pub name: String,
    pub data: String,
}

/// A streamed answer, read as it arrives.
pub struct Sse {
    reader: BufReader<TcpStream>,
    pub status: u16,
    chunked: bool,
    /// Bytes left of the current chunk.
    left: usize,
    buffer: String,
}

/// How a stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The body ended as HTTP says it should (the last chunk, or the connection closed after an
    /// unchunked body).
    Clean,
    /// The connection broke mid-body.
    Cut,
}

impl Sse {
    /// The next piece of the body; none at its end.
    fn read_piece(&mut self) -> Option<String> {
        self.read_piece_or_end().ok()
    }

    fn read_piece_or_end(&mut self) -> Result<String, End> {
        if !self.chunked {
            let mut buf = [0u8; 4096];
            return match self.reader.read(&mut buf) {
                Ok(0) => Err(End::Clean),
                Ok(n) => Ok(String::from_utf8_lossy(&buf[..n]).into_owned()),
                Err(_) => Err(End::Cut),
            };
        }
        if self.left == 0 {
            let mut line = String::new();
            match self.reader.read_line(&mut line) {
                Ok(0) | Err(_) => return Err(End::Cut),
                Ok(_) => {}
            }
            let size = usize::from_str_radix(line.trim(), 16).map_err(|_| End::Cut)?;
            if size == 0 {
                return Err(End::Clean);
            }
            self.left = size;
        }
        let mut buf = vec![0u8; self.left.min(4096)];
        let n = self.reader.read(&mut buf).map_err(|_| End::Cut)?;
        if n == 0 {
            return Err(End::Cut);
        }
        self.left -= n;
        if self.left == 0 {
            let mut crlf = String::new();
            self.reader.read_line(&mut crlf).map_err(|_| End::Cut)?;
        }
        Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    /// The next event (heartbeats skipped), or how the stream ended.
    pub fn next_event(&mut self) -> Result<Event, End> {
        loop {
            let normalized = self.buffer.replace("\r\n", "\n");
            if let Some(at) = normalized.find("\n\n") {
                let block = normalized[..at].to_owned();
                self.buffer = normalized[at + 2..].to_owned();
                let mut event = Event { id: None, name: String::new(), data: String::new() };
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        event.id = Some(v.to_owned());
                    } else if let Some(v) = line.strip_prefix("event: ") {
                        event.name = v.to_owned();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        event.data = v.to_owned();
                    }
                }
                if event.name.is_empty() && event.data.is_empty() {
                    continue; // a comment (`: heartbeat`)
                }
                return Ok(event);
            }
            self.buffer = normalized;
            let piece = self.read_piece_or_end()?;
            self.buffer.push_str(&piece);
        }
    }
}
