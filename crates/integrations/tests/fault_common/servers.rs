//! Private servers for fault injection: a PostgreSQL cluster (`initdb` in a temporary folder) and a
//! `redis-server`, each on a free loopback port, in a process group of its own so that a SIGKILL takes
//! the whole server down at once, as a crash of its machine would. A guard kills the server and removes
//! its folder when it goes, on failure too.
//!
//! A missing server binary skips the test with a loud message, and fails it in CI (`CI` set).

use std::fs::File;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The rule for a missing server binary: a failure in CI, a loud skip elsewhere (`None`).
pub(crate) fn missing<T>(test: &str, what: &str) -> Option<T> {
    weft_testenv::skip_or_fail(&format!("a server binary ({test})"), what, "see `cargo xtask services`");
    None
}

/// A folder under the system's temporary folder, removed (with everything in it) when this goes.
#[derive(Debug)]
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new(label: &str) -> Self {
        let path = std::env::temp_dir().join(format!("weft-{label}-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A port nothing listens on now (the OS's pick for a loopback socket).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Waits until `port` on loopback accepts connections, for up to `limit`.
fn wait_listening(port: u16, limit: Duration, child: &mut Child, log: &Path) {
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the server exited ({status}): {}", std::fs::read_to_string(log).unwrap_or_default());
        }
        assert!(started.elapsed() < limit, "the server did not listen on port {port} within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGKILL to every process of `child`'s group, then reaps it.
fn kill_group(child: &mut Child) {
    let group = format!("-{}", child.id());
    let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
    let _ = child.kill();
    let _ = child.wait();
}

/// Whether this process runs as root (PostgreSQL refuses to; its tools then run as user `postgres`).
fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// A command running `program`, as user `postgres` when this process is root.
fn pg_command(program: &Path) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

/// The folder of PostgreSQL's server binaries: `WEFT_PG_BIN`, else the newest `/usr/lib/postgresql/*/bin`
/// holding `initdb` and `postgres`, else the `PATH`'s.
fn pg_bin() -> Option<PathBuf> {
    let has = |dir: &Path| dir.join("initdb").is_file() && dir.join("postgres").is_file();
    if let Some(dir) = std::env::var_os("WEFT_PG_BIN").map(PathBuf::from) {
        return has(&dir).then_some(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, dir)| has(dir))
        .collect();
    versions.sort();
    if let Some((_, dir)) = versions.pop() {
        return Some(dir);
    }
    std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .find(|dir| has(dir))
}

/// A private PostgreSQL cluster on a free loopback port (trust auth, user `postgres`, database
/// `postgres`), its socket in its own folder.
#[derive(Debug)]
pub(crate) struct PgServer {
    bin: PathBuf,
    pub(crate) port: u16,
    child: Option<Child>,
    // Last: the folder goes after the server is killed.
    dir: TempDir,
}

impl PgServer {
    /// Makes and starts a cluster (`None`: skipped, PostgreSQL is not installed).
    pub(crate) fn start(test: &str) -> Option<Self> {
        let Some(bin) = pg_bin() else {
            return missing(test, "PostgreSQL's server binaries (initdb, postgres) are not installed");
        };
        if is_root() && Command::new("id").arg("postgres").output().map_or(true, |o| !o.status.success()) {
            return missing(test, "running as root without a `postgres` user to run PostgreSQL as");
        }
        let dir = TempDir::new("pg");
        if is_root() {
            let owned = Command::new("chown").args(["-R", "postgres:postgres"]).arg(&dir.0).status().unwrap();
            assert!(owned.success(), "chown of {} failed", dir.0.display());
        }
        let log = File::create(dir.0.join("initdb.log")).unwrap();
        let status = pg_command(&bin.join("initdb"))
            .arg("-D")
            .arg(dir.0.join("data"))
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .status()
            .unwrap();
        assert!(
            status.success(),
            "initdb failed: {}",
            std::fs::read_to_string(dir.0.join("initdb.log")).unwrap()
        );
        let mut server = Self { bin, port: free_port(), child: None, dir };
        server.restart();
        Some(server)
    }

    /// The URL of the server (loopback, no password).
    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Starts the server (again) on its data folder and port, and waits until it takes connections.
    pub(crate) fn restart(&mut self) {
        assert!(self.child.is_none(), "the server is running");
        let log_path = self.dir.0.join("server.log");
        let log = File::options().create(true).append(true).open(&log_path).unwrap();
        let mut command = pg_command(&self.bin.join("postgres"));
        command
            .arg("-D")
            .arg(self.dir.0.join("data"))
            .args(["-p", &self.port.to_string(), "-k"])
            .arg(&self.dir.0)
            // `fsync=off` only spares the disk: a SIGKILL of the server keeps whatever it handed the kernel
            // (a crash of the machine would not).
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=30"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command.spawn().unwrap();
        wait_listening(self.port, Duration::from_secs(30), &mut child, &log_path);
        std::thread::sleep(Duration::from_millis(300));
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "the server exited after listening ({status}): {}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
        }
        self.child = Some(child);
    }

    /// SIGKILL to the server and all its processes.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_group(&mut child);
            // The postmaster, a child of the wrapper that ran it as `postgres`, may linger as a zombie that
            // nobody reaps (PID 1 of a container need not): its lock file would then keep a restart out.
            // It is dead, so the lock is stale.
            let lock = self.dir.0.join("data").join("postmaster.pid");
            let pid = std::fs::read_to_string(&lock)
                .ok()
                .and_then(|t| t.lines().next()?.trim().parse::<u32>().ok());
            if let Some(pid) = pid {
                let started = Instant::now();
                while is_running(pid) && started.elapsed() < Duration::from_secs(5) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                let _ = std::fs::remove_file(&lock);
                // And so are the Unix socket's lock and the socket.
                let socket = format!(".s.PGSQL.{}", self.port);
                let _ = std::fs::remove_file(self.dir.0.join(format!("{socket}.lock")));
                let _ = std::fs::remove_file(self.dir.0.join(socket));
            }
        }
    }
}

/// Whether process `pid` runs (a zombie does not).
fn is_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses.
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A private `redis-server` on a free loopback port, with an append-only file synced at every write (so
/// that a SIGKILL loses nothing it acknowledged).
#[derive(Debug)]
pub(crate) struct RedisServer {
    pub(crate) port: u16,
    child: Option<Child>,
    dir: TempDir,
}

impl RedisServer {
    /// Starts a server (`None`: skipped, `redis-server` is not installed).
    pub(crate) fn start(test: &str) -> Option<Self> {
        let installed =
            Command::new("redis-server").arg("--version").output().is_ok_and(|o| o.status.success());
        if !installed {
            return missing(test, "`redis-server` is not installed");
        }
        let mut server = Self { port: free_port(), child: None, dir: TempDir::new("redis") };
        server.restart();
        Some(server)
    }

    /// Its URL.
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again) on its folder and port, and waits until it takes connections.
    pub(crate) fn restart(&mut self) {
        assert!(self.child.is_none(), "the server is running");
        let log_path = self.dir.0.join("server.log");
        let log = File::options().create(true).append(true).open(&log_path).unwrap();
        let mut command = Command::new("redis-server");
        command
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--dir"])
            .arg(&self.dir.0)
            .args(["--appendonly", "yes", "--appendfsync", "always", "--save", ""])
            .args(["--maxmemory-policy", "noeviction", "--daemonize", "no"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command.spawn().unwrap();
        wait_listening(self.port, Duration::from_secs(20), &mut child, &log_path);
        self.child = Some(child);
    }

    /// SIGKILL to the server.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_group(&mut child);
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
