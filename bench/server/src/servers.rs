//! The servers under test, each started on a free port for one workload and stopped after it: weft
//! (`weft-server-e2e`, the end-to-end suite's graphs, on a SQLite file, or in its in-memory mode) and
//! LangGraph (`langgraph dev` with the suite's Python graphs, in a temporary copy of the project).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hyper::Method;

use crate::http::Conn;

/// The jobs each `langgraph dev` worker runs at once: the LangGraph platform's default
/// (`N_JOBS_PER_WORKER`), set with `--n-jobs-per-worker`.
pub(crate) const LANGGRAPH_JOBS_PER_WORKER: usize = 10;

/// Which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// weft on a SQLite file (or scaled out), its durable default.
    Weft,
    /// weft in its in-memory mode (`--in-memory`: no database), as `langgraph dev` runs.
    WeftMemory,
    LangGraph,
}

impl Side {
    /// The name used in the JSON lines.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Side::Weft => "weft",
            Side::WeftMemory => "weft_in_memory",
            Side::LangGraph => "langgraph",
        }
    }
}

/// Where the servers' programs are.
#[derive(Debug, Clone)]
pub(crate) struct Programs {
    /// `weft-server-e2e`.
    pub(crate) weft: PathBuf,
    /// More arguments for every weft server started (`--weft-arg`).
    pub(crate) weft_args: Vec<String>,
    /// `langgraph` (the CLI of `langgraph-cli[inmem]`), when comparing.
    pub(crate) langgraph: Option<PathBuf>,
    /// The folder of the suite's `graphs.py` and `langgraph.json`.
    pub(crate) python_graphs: PathBuf,
    /// weft scaled out instead of on a SQLite file, when set.
    pub(crate) scale: Option<Scale>,
}

/// weft as several instances of one scaled-out server (`weft-server-e2e` built with `scale`).
#[derive(Debug, Clone)]
pub(crate) struct Scale {
    /// How many instances.
    pub(crate) instances: usize,
    /// PostgreSQL's connection string (`DATABASE_URI`).
    pub(crate) database_uri: String,
    /// Redis' connection string (`REDIS_URI`).
    pub(crate) redis_uri: String,
    /// What the deployment's Redis keys start with (`REDIS_KEY_PREFIX`).
    pub(crate) prefix: String,
}

/// A running server; stopped when dropped.
#[derive(Debug)]
pub(crate) struct Server {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub(crate) addr: String,
    /// The other instances of a scaled-out weft.
    others: Vec<Child>,
    /// Every instance's `127.0.0.1:PORT`, the first being `addr`.
    pub(crate) addrs: Vec<String>,
    /// A folder to remove at the end (the database, the project copy).
    scratch: PathBuf,
}

/// `n` ports free on 127.0.0.1 now, all different: each is held until all are found (ports found one
/// after another, each let go at once, can repeat).
pub(crate) fn free_ports(n: usize) -> Result<Vec<u16>, String> {
    let held = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    held.iter().map(|l| l.local_addr().map(|a| a.port()).map_err(|e| format!("no free port: {e}"))).collect()
}

fn free_port() -> Result<u16, String> {
    Ok(free_ports(1)?[0])
}

fn scratch_dir(side: Side) -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("weft-bench-server-{}-{}", side.name(), std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

impl Server {
    /// Starts `side` and waits until `GET /ok` answers.
    pub(crate) async fn start(side: Side, programs: &Programs) -> Result<Self, String> {
        let port = free_port()?;
        let scratch = scratch_dir(side)?;
        let log =
            std::fs::File::create(scratch.join("server.log")).map_err(|e| format!("server log: {e}"))?;
        let log_err = log.try_clone().map_err(|e| format!("server log: {e}"))?;
        let mut command = match side {
            Side::Weft => {
                let mut command = Command::new(&programs.weft);
                command.arg("--port").arg(port.to_string()).args(&programs.weft_args);
                match &programs.scale {
                    Some(scale) => scaled(&mut command, scale),
                    None => command.arg("--db").arg(scratch.join("weft.db")),
                };
                command
            }
            Side::WeftMemory => {
                let mut command = Command::new(&programs.weft);
                command.arg("--port").arg(port.to_string()).arg("--in-memory").args(&programs.weft_args);
                command
            }
            Side::LangGraph => {
                let program = programs.langgraph.as_ref().ok_or("no langgraph program given")?;
                for name in ["graphs.py", "langgraph.json"] {
                    let from = programs.python_graphs.join(name);
                    std::fs::copy(&from, scratch.join(name))
                        .map_err(|e| format!("cannot copy {}: {e}", from.display()))?;
                }
                let mut command = Command::new(program);
                command
                    .current_dir(&scratch)
                    .args(["dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port"])
                    .arg(port.to_string())
                    // The platform's default concurrency (`langgraph dev` defaults to 1 job per worker,
                    // which queues every run behind the one in flight).
                    .args(["--n-jobs-per-worker", &LANGGRAPH_JOBS_PER_WORKER.to_string()])
                    .args(["--server-log-level", "WARNING"])
                    .env("LANGGRAPH_CLI_NO_ANALYTICS", "1")
                    .env("LANGSMITH_TRACING", "false")
                    .env("PYTHONDONTWRITEBYTECODE", "1");
                for key in ["LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGGRAPH_CLOUD_LICENSE_KEY"] {
                    command.env_remove(key);
                }
                command
            }
        };
        let child = command
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("cannot start the {} server: {e}", side.name()))?;
        let addr = format!("127.0.0.1:{port}");
        let mut server = Self { child, addrs: vec![addr.clone()], addr, others: Vec::new(), scratch };
        let limit = if side == Side::LangGraph { Duration::from_secs(180) } else { Duration::from_secs(30) };
        server
            .wait_ready(limit)
            .await
            .map_err(|e| format!("{e}; its log: {}", server.log_path().display()))?;
        // The first instance has made the tables: the others start now.
        if let (Side::Weft, Some(scale)) = (side, &programs.scale) {
            for _ in 1..scale.instances {
                server.start_other(programs, scale).await?;
            }
        }
        Ok(server)
    }

    /// Starts one more instance of a scaled-out weft and waits until it answers `/ok`.
    async fn start_other(&mut self, programs: &Programs, scale: &Scale) -> Result<(), String> {
        let port = free_port()?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(|e| format!("server log: {e}"))?;
        let log_err = log.try_clone().map_err(|e| format!("server log: {e}"))?;
        let mut command = Command::new(&programs.weft);
        command.arg("--port").arg(port.to_string()).args(&programs.weft_args);
        scaled(&mut command, scale);
        let child = command
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("cannot start a weft instance: {e}"))?;
        self.others.push(child);
        let addr = format!("127.0.0.1:{port}");
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(mut conn) = Conn::open(&addr).await {
                if conn.json(Method::GET, "/ok", None).await.is_ok() {
                    break;
                }
            }
            if Instant::now() > end {
                return Err(format!(
                    "a weft instance did not answer /ok within 30 s; see {}",
                    self.log_path().display()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.addrs.push(addr);
        Ok(())
    }

    fn log_path(&self) -> PathBuf {
        self.scratch.join("server.log")
    }

    async fn wait_ready(&mut self, limit: Duration) -> Result<(), String> {
        let end = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("the server exited at start-up ({status})"));
            }
            if let Ok(mut conn) = Conn::open(&self.addr).await {
                if conn.json(Method::GET, "/ok", None).await.is_ok() {
                    return Ok(());
                }
            }
            if Instant::now() > end {
                return Err(format!("the server did not answer /ok within {} s", limit.as_secs()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The server's resident memory: `VmRSS` of its processes (every instance) and their descendants, in MB.
    pub(crate) fn rss_mb(&self) -> Result<f64, String> {
        let tree = std::iter::once(&self.child).chain(&self.others).flat_map(|child| descendants(child.id()));
        let mut kib = 0.0;
        for pid in tree {
            kib += vm_rss_kib(pid).ok_or_else(|| format!("no VmRSS for process {pid}"))?;
        }
        Ok(kib / 1024.0)
    }

    /// The operating system's id of the server process.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// Sets `command` up as an instance of the scaled-out deployment `scale`.
fn scaled<'a>(command: &'a mut Command, scale: &Scale) -> &'a mut Command {
    command
        .env("DATABASE_URI", &scale.database_uri)
        .env("REDIS_URI", &scale.redis_uri)
        .env("REDIS_KEY_PREFIX", &scale.prefix)
}

impl Drop for Server {
    fn drop(&mut self) {
        for other in &mut self.others {
            let _ = Command::new("kill").arg("-TERM").arg(other.id().to_string()).status();
        }
        let end = Instant::now() + Duration::from_secs(10);
        for other in &mut self.others {
            while Instant::now() < end && matches!(other.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = other.kill();
            let _ = other.wait();
        }
        // SIGTERM first, so that `langgraph dev` stops its own children; then SIGKILL.
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

/// `VmRSS` of `pid` in KiB.
fn vm_rss_kib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_rss_kib(&status)
}

/// The `VmRSS:` figure of a `/proc/PID/status` text, in KiB.
pub(crate) fn parse_vm_rss_kib(status: &str) -> Option<f64> {
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// `pid` and every process below it.
fn descendants(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(child) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
            if let Some(parent) = parse_ppid(&stat) {
                parents.push((child, parent));
            }
        }
    }
    let mut tree = vec![pid];
    let mut index = 0;
    while index < tree.len() {
        let current = tree[index];
        tree.extend(parents.iter().filter(|(_, parent)| *parent == current).map(|(child, _)| *child));
        index += 1;
    }
    tree
}

/// The parent id in a `/proc/PID/stat` line (the field after the command, which may hold spaces and
/// parentheses).
pub(crate) fn parse_ppid(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Whether `path` exists as a file (for clearer errors than a failed spawn).
pub(crate) fn require_file(path: &Path, what: &str) -> Result<(), String> {
    if path.is_file() { Ok(()) } else { Err(format!("{what} not found at {}", path.display())) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_vm_rss_and_the_parent_id() {
        let status = "Name:\tweft\nVmHWM:\t  9000 kB\nVmRSS:\t  8123 kB\nThreads:\t3\n";
        assert_eq!(parse_vm_rss_kib(status), Some(8123.0));
        assert_eq!(parse_vm_rss_kib("Name:\tx\n"), None);
        assert_eq!(parse_ppid("4242 (python3 (dev) x) S 17 4242 4242 0 -1"), Some(17));
        assert_eq!(parse_ppid("garbage"), None);
    }
}
