//! Where the MCP reference server is: `WEFT_MCP_EVERYTHING` names the `dist/index.js` of
//! `@modelcontextprotocol/server-everything` (installed, pinned, by `cargo xtask ci mcp`, which prints the
//! path). Without it the tests fail in CI (`CI` set) and are skipped loudly elsewhere.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use weft_integrations::mcp::Connection;

/// The variable naming the reference server's entry script.
pub(crate) const ENV: &str = "WEFT_MCP_EVERYTHING";

/// The reference server's entry script, or `None` (after a loud message) when it is not installed.
pub(crate) fn everything() -> Option<PathBuf> {
    let why = match std::env::var_os(ENV).map(PathBuf::from) {
        Some(path) if path.is_file() => return Some(path),
        Some(path) => format!("{ENV}={} is not a file", path.display()),
        None => format!("{ENV} is not set"),
    };
    let hint = format!("run `cargo xtask ci mcp` and export the {ENV} it prints");
    weft_testenv::skip_or_fail(
        "the MCP reference server (@modelcontextprotocol/server-everything)",
        &why,
        &hint,
    );
    None
}

/// The reference server over stdio.
pub(crate) fn stdio(script: &std::path::Path) -> Connection {
    Connection::stdio("node", [script.display().to_string(), "stdio".to_owned()])
}

/// The reference server over Streamable HTTP on a free port, killed on drop.
pub(crate) struct HttpServer {
    child: Child,
    pub(crate) url: String,
}

impl HttpServer {
    pub(crate) fn start(script: &std::path::Path) -> Self {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new("node")
            .arg(script)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("node starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the reference server did not listen on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { child, url: format!("http://127.0.0.1:{port}/mcp") }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether process `pid` is gone: neither running nor a zombie waiting to be reaped.
pub(crate) fn is_gone(pid: u32) -> bool {
    !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Waits up to `limit` for process `pid` to be gone.
pub(crate) fn wait_gone(pid: u32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if is_gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    is_gone(pid)
}

/// Sends SIGKILL to `pid`.
pub(crate) fn kill9(pid: u32) {
    let status = Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
    assert!(status.success());
}
