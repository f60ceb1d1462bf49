//! Starting llama-server on a free loopback port and waiting until it answers `/health`.

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// How long the server gets to load its model.
const START_LIMIT: Duration = Duration::from_secs(120);

/// Runs the server given as arguments in the background and kills it when standard input closes, which
/// happens when xtask ends however it ends (Ctrl-C, a kill, a panic); exits with the server's status.
pub(crate) const WATCHDOG: &str = r#"exec 3<&0
"$@" </dev/null 3<&- &
server=$!
(cat <&3 >/dev/null; kill "$server" 2>/dev/null) &
wait "$server""#;

/// A llama-server process (under its watchdog shell), stopped when dropped.
#[derive(Debug)]
pub(crate) struct Server {
    /// The watchdog shell.
    child: Child,
    /// Its standard input: closing it stops the server.
    lifeline: Option<ChildStdin>,
    /// The port it listens on (127.0.0.1).
    pub(crate) port: u16,
    /// Where its output goes.
    pub(crate) log: PathBuf,
}

/// What to run.
#[derive(Debug)]
pub(crate) struct Launch<'a> {
    pub(crate) binary: &'a Path,
    pub(crate) model: &'a Path,
    /// The chat template file, when the model's own is not used as is.
    pub(crate) template: Option<&'a Path>,
    /// A fixed port, else a free one.
    pub(crate) port: Option<u16>,
    pub(crate) log: PathBuf,
}

/// `n` ports nobody listens on right now, all different: each is held until all are found (ports found
/// one after another, each let go at once, can repeat).
pub(crate) fn free_ports(n: usize) -> Result<Vec<u16>, String> {
    let fail = |err: std::io::Error| format!("cannot find a free port: {err}");
    let held =
        (0..n).map(|_| TcpListener::bind("127.0.0.1:0").map_err(fail)).collect::<Result<Vec<_>, _>>()?;
    held.iter().map(|listener| listener.local_addr().map(|addr| addr.port()).map_err(fail)).collect()
}

/// A port nobody listens on right now.
pub(crate) fn free_port() -> Result<u16, String> {
    Ok(free_ports(1)?[0])
}

/// The arguments of llama-server: the project's settings (4096 tokens of context, 2 threads, no web UI);
/// temperature and the rest come with each request.
pub(crate) fn arguments(launch: &Launch<'_>, port: u16) -> Vec<String> {
    let mut args = vec![
        "--model".to_owned(),
        launch.model.display().to_string(),
        "--host".to_owned(),
        "127.0.0.1".to_owned(),
        "--port".to_owned(),
        port.to_string(),
        "-c".to_owned(),
        "4096".to_owned(),
        "-t".to_owned(),
        "2".to_owned(),
        "--no-webui".to_owned(),
        "--jinja".to_owned(),
    ];
    if let Some(template) = launch.template {
        args.push("--chat-template-file".to_owned());
        args.push(template.display().to_string());
    }
    args
}

impl Server {
    /// Starts the server and waits until it is healthy.
    pub(crate) fn start(launch: &Launch<'_>) -> Result<Server, String> {
        let port = match launch.port {
            Some(port) => port,
            None => free_port()?,
        };
        let log = File::create(&launch.log)
            .map_err(|err| format!("cannot create {}: {err}", launch.log.display()))?;
        let log_err =
            log.try_clone().map_err(|err| format!("cannot open {}: {err}", launch.log.display()))?;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg("llama-server")
            .arg(launch.binary)
            .args(arguments(launch, port))
            .stdin(Stdio::piped())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|err| format!("cannot start {}: {err}", launch.binary.display()))?;
        let lifeline = child.stdin.take();
        let mut server = Server { child, lifeline, port, log: launch.log.clone() };
        server.wait_healthy(START_LIMIT)?;
        Ok(server)
    }

    fn wait_healthy(&mut self, limit: Duration) -> Result<(), String> {
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("llama-server exited ({status}) while starting:\n{}", self.log_tail()));
            }
            if health(self.port) == Some(200) {
                return Ok(());
            }
            if started.elapsed() > limit {
                return Err(format!("llama-server was not healthy within {limit:?}:\n{}", self.log_tail()));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// The last lines of the server's output.
    pub(crate) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Waits for the server to exit (a Ctrl-C stops it: it reaches the server through the terminal's
    /// process group, and ends xtask, whose end stops the server through the watchdog).
    pub(crate) fn wait(mut self) -> Result<(), String> {
        let status = self.child.wait().map_err(|err| format!("cannot wait for llama-server: {err}"))?;
        Err(format!("llama-server exited ({status}):\n{}", self.log_tail()))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Closing the pipe makes the watchdog stop the server; then the watchdog exits.
        drop(self.lifeline.take());
        let _ = self.child.wait();
    }
}

/// The status code of `GET /health`, `None` when nothing answers.
pub(crate) fn health(port: u16) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut head = [0u8; 64];
    let read = stream.read(&mut head).ok()?;
    let line = String::from_utf8_lossy(&head[..read]);
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_with_the_project_settings_and_the_template() {
        let launch = Launch {
            binary: Path::new("/bin/llama-server"),
            model: Path::new("/m.gguf"),
            template: Some(Path::new("/t.jinja")),
            port: None,
            log: PathBuf::from("/l"),
        };
        let args = arguments(&launch, 4242).join(" ");
        assert_eq!(
            args,
            "--model /m.gguf --host 127.0.0.1 --port 4242 -c 4096 -t 2 --no-webui --jinja --chat-template-file /t.jinja"
        );
    }

    #[test]
    fn the_watchdog_stops_the_server_when_its_input_closes() {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg("llama-server")
            .args(["sleep", "30"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        drop(child.stdin.take());
        let status = child.wait().unwrap();
        assert!(!status.success(), "{status}");
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    }

    #[test]
    fn a_server_that_exits_while_starting_is_an_error_with_its_output() {
        let log = std::env::temp_dir().join(format!("xtask-llm-false-{}.log", std::process::id()));
        let launch = Launch {
            binary: Path::new("false"),
            model: Path::new("/m.gguf"),
            template: None,
            port: None,
            log: log.clone(),
        };
        let err = Server::start(&launch).unwrap_err();
        let _ = std::fs::remove_file(&log);
        assert!(err.starts_with("llama-server exited"), "{err}");
    }

    #[test]
    fn health_reads_the_status_code() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0u8; 256];
            let _ = stream.read(&mut request).unwrap();
            stream.write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n").unwrap();
        });
        assert_eq!(health(port), Some(503));
        server.join().unwrap();
        assert_eq!(health(free_port().unwrap()), None);
    }
}
