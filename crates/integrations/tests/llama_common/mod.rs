//! What the real-model tests share: a llama-server started by the test binary itself on a free loopback
//! port, from the paths `cargo xtask ci` (stage `llm`) exports, and the rule for when they are missing.
//!
//! One server per test process and model, started on first use and shared by the tests of that process.
//! nextest runs each test in a process of its own, so a test binary holds one test that runs its
//! scenarios concurrently, and the `llama-server` test group of `.config/nextest.toml` runs those tests
//! one at a time so that servers do not fight for the cores. The server runs under a small shell that
//! kills it when the test process's end of a pipe closes, so no server outlives its tests, however they
//! end.
#![allow(dead_code)]

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use weft_integrations::openai::ChatOpenAI;

/// How long a server gets to load its model.
const START_LIMIT: Duration = Duration::from_secs(120);

/// Runs the server given as arguments in the background, kills it when standard input closes (the test
/// process ended), and exits with the server's status otherwise.
const WATCHDOG: &str = r#"exec 3<&0
"$@" </dev/null 3<&- &
server=$!
(cat <&3 >/dev/null; kill "$server" 2>/dev/null) &
wait "$server""#;

/// A model the tests can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Model {
    /// Qwen2.5-Coder-0.5B-Instruct with the rewritten chat template (`WEFT_LLAMA_MODEL`,
    /// `WEFT_LLAMA_TEMPLATE`): chat, tools, structured output.
    Qwen,
    /// SmolLM2-135M-Instruct (`WEFT_SMOLLM2_MODEL`): chat only.
    SmolLm2,
}

impl Model {
    /// The environment variables it needs.
    fn env(self) -> &'static [&'static str] {
        match self {
            Model::Qwen => &["WEFT_LLAMA_SERVER_BIN", "WEFT_LLAMA_MODEL", "WEFT_LLAMA_TEMPLATE"],
            Model::SmolLm2 => &["WEFT_LLAMA_SERVER_BIN", "WEFT_SMOLLM2_MODEL"],
        }
    }

    /// The model name sent in requests (llama-server serves whatever it loaded).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Model::Qwen => "qwen2.5-coder-0.5b-instruct",
            Model::SmolLm2 => "smollm2-135m-instruct",
        }
    }
}

/// A running llama-server.
#[derive(Debug)]
pub(crate) struct Server {
    /// Its OpenAI-compatible base URL (`http://127.0.0.1:PORT/v1`).
    pub(crate) base_url: String,
    /// The watchdog shell; kept so that its standard input stays open while the process lives.
    watchdog: Mutex<(Child, ChildStdin)>,
    log: PathBuf,
}

impl Server {
    /// A chat model on this server: temperature 0 (greedy, repeatable), at most `max_tokens`. A request
    /// that fails in transit (a kept-alive connection the busy server closed while the scenarios run in
    /// parallel) is tried again, as in production; an answer the server gives is never retried (4xx).
    pub(crate) fn chat(&self, model: Model, max_tokens: u32) -> ChatOpenAI {
        ChatOpenAI::builder()
            .model(model.name())
            .base_url(self.base_url.clone())
            .api_key("sk-local")
            .temperature(0.0)
            .max_tokens(max_tokens)
            .max_retries(2)
            .retry_delay(Duration::from_millis(200), Duration::from_secs(1))
            .timeout(Duration::from_secs(120))
            .build()
            .expect("a chat model for llama-server")
    }

    /// The last lines of the server's output, for failure messages.
    pub(crate) fn log_tail(&self) -> String {
        log_tail(&self.log)
    }
}

fn log_tail(log: &PathBuf) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(25)..].join("\n")
}

/// The shared server for `model`, started on first use. `None` (the test is skipped, loudly) when the
/// paths are not set or the server does not start and `CI` is not set; with `CI` set that fails the test.
pub(crate) fn server(model: Model, test: &str) -> Option<&'static Server> {
    static QWEN: OnceLock<Result<Server, String>> = OnceLock::new();
    static SMOLLM2: OnceLock<Result<Server, String>> = OnceLock::new();
    let cell = match model {
        Model::Qwen => &QWEN,
        Model::SmolLm2 => &SMOLLM2,
    };
    match cell.get_or_init(|| start(model)) {
        Ok(server) => Some(server),
        Err(reason) => {
            weft_testenv::skip_or_fail(
                &format!("a real model ({test})"),
                reason,
                "`cargo xtask ci llm` prepares llama-server and the models and prints the variables to export",
            );
            None
        }
    }
}

fn start(model: Model) -> Result<Server, String> {
    let mut paths = Vec::new();
    for name in model.env() {
        match std::env::var_os(name).filter(|value| !value.is_empty()) {
            Some(value) => paths.push(PathBuf::from(value)),
            None => return Err(format!("{name} is not set")),
        }
    }
    for (name, path) in model.env().iter().zip(&paths) {
        if !path.is_file() {
            return Err(format!("{name}={} is not a file", path.display()));
        }
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map_err(|err| format!("no free port: {err}"))?
        .port();
    // In the target directory, one per model, replaced by the next run.
    let log = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("llama-server-{}.log", model.name()));
    let log_file =
        std::fs::File::create(&log).map_err(|err| format!("cannot create {}: {err}", log.display()))?;
    let log_err = log_file.try_clone().map_err(|err| format!("cannot open {}: {err}", log.display()))?;
    let mut command = Command::new("sh");
    command.arg("-c").arg(WATCHDOG).arg("llama-server").arg(&paths[0]);
    command.args(["--model".as_ref(), paths[1].as_os_str()]);
    if model == Model::Qwen {
        command.args(["--chat-template-file".as_ref(), paths[2].as_os_str()]);
    }
    command.args(["--host", "127.0.0.1", "--port", &port.to_string(), "-c", "4096", "-t", "2", "--no-webui"]);
    command.arg("--jinja");
    command.stdin(Stdio::piped()).stdout(log_file).stderr(log_err);
    let mut child = command.spawn().map_err(|err| format!("cannot start {}: {err}", paths[0].display()))?;
    let stdin = child.stdin.take().ok_or("the watchdog has no standard input")?;
    let started = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("llama-server exited ({status}) while starting:\n{}", log_tail(&log)));
        }
        if health(port) == Some(200) {
            break;
        }
        if started.elapsed() > START_LIMIT {
            return Err(format!("llama-server was not healthy within {START_LIMIT:?}:\n{}", log_tail(&log)));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("llama-server ({}) ready on port {port} in {:.1?}", model.name(), started.elapsed());
    Ok(Server { base_url: format!("http://127.0.0.1:{port}/v1"), watchdog: Mutex::new((child, stdin)), log })
}

/// The status code of `GET /health`, `None` when nothing answers.
fn health(port: u16) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut head = [0u8; 64];
    let read = stream.read(&mut head).ok()?;
    String::from_utf8_lossy(&head[..read]).split_whitespace().nth(1)?.parse().ok()
}
