//! `cargo xtask phoenix`: the quickstart agent's traces in a real tracing backend. Starts Arize Phoenix
//! (pinned, installed into `target/phoenix-venv` when missing) offline on free ports, runs the quickstart
//! example with OTLP export to it, then checks the span tree through Phoenix's REST API
//! (`tests/phoenix/check_trace.py`): graph runs → nodes → model and tool calls, token counts, the approval
//! interrupt.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::llm::server::free_ports;
use crate::pyenv::{self, Venv};
use crate::{bench, exec};

/// The Phoenix release the check runs against.
const PHOENIX: &str = "arize-phoenix==20.26.1";
/// How long Phoenix may take to start (it migrates its SQLite database first).
const START_LIMIT: Duration = Duration::from_secs(180);
/// How long the example and the check may each run.
const LIMIT: Duration = Duration::from_secs(300);
/// The Phoenix project the example's spans go to.
const PROJECT: &str = "weft-quickstart";

/// How the quickstart example is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Build {
    /// Only the example.
    Alone,
    /// The debug build CI's later stages share ([`bench::DEV_BUILD`]).
    Shared,
}

/// `cargo xtask phoenix`.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    if let Some(arg) = args.first() {
        return Err(format!("unknown phoenix argument `{arg}`"));
    }
    run_with(Build::Alone)
}

/// A Phoenix server this task started; stopped when dropped.
struct Phoenix(Child);

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the check.
pub(crate) fn run_with(build: Build) -> Result<(), String> {
    let target = bench::target_dir(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from), &exec::root());
    let venv = Venv {
        dir: target.join("phoenix-venv"),
        install: &[PHOENIX],
        probe: "import phoenix",
        stamp: Some(PHOENIX.to_owned()),
        what: PHOENIX,
    };
    let python = match pyenv::ensure(&venv) {
        Ok(python) => python,
        Err(err) => {
            weft_testenv::require("the phoenix stage's Python", &err, "see xtask/src/pyenv.rs")?;
            return Ok(());
        }
    };
    let build_args: &[&str] = match build {
        Build::Alone => &["build", "-p", "weft-examples", "--features", "otel", "--example", "quickstart"],
        Build::Shared => bench::DEV_BUILD,
    };
    exec::run(&mut exec::cargo(build_args))?;
    let example =
        target.join("debug").join("examples").join(format!("quickstart{}", std::env::consts::EXE_SUFFIX));

    let work = target.join("phoenix-run");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|err| format!("cannot make {}: {err}", work.display()))?;
    let log_path = work.join("phoenix.log");
    let log = std::fs::File::create(&log_path)
        .map_err(|err| format!("cannot make {}: {err}", log_path.display()))?;
    let log_err = log.try_clone().map_err(|err| format!("cannot open {}: {err}", log_path.display()))?;
    let ports = free_ports(2)?;
    let (port, grpc_port) = (ports[0], ports[1]);
    let phoenix_bin = venv.dir.join("bin").join("phoenix");
    println!("starting Phoenix on 127.0.0.1:{port} (log: {})", log_path.display());
    let child = Command::new(&phoenix_bin)
        .arg("serve")
        .env("PHOENIX_HOST", "127.0.0.1")
        .env("PHOENIX_PORT", port.to_string())
        .env("PHOENIX_GRPC_PORT", grpc_port.to_string())
        .env("PHOENIX_WORKING_DIR", &work)
        .env("PHOENIX_TELEMETRY_ENABLED", "false")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .map_err(|err| format!("cannot start {}: {err}", phoenix_bin.display()))?;
    let mut phoenix = Phoenix(child);
    let started = Instant::now();
    while healthz(port) != Some(200) {
        if let Ok(Some(status)) = phoenix.0.try_wait() {
            return Err(format!("Phoenix exited ({status}) before serving; see {}", log_path.display()));
        }
        if started.elapsed() > START_LIMIT {
            return Err(format!("Phoenix did not answer within {START_LIMIT:?}; see {}", log_path.display()));
        }
        std::thread::sleep(Duration::from_millis(500));
    }

    let mut quickstart = Command::new(&example);
    quickstart
        .env("WEFT_OTEL_ENDPOINT", format!("http://127.0.0.1:{port}"))
        .env("WEFT_OTEL_PROJECT", PROJECT)
        // The scripted model, whatever the environment says.
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL");
    exec::run_with_limit(&mut quickstart, Some(LIMIT))?;
    let mut check = Command::new(&python);
    check
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg(exec::root().join("tests").join("phoenix").join("check_trace.py"))
        .arg(port.to_string())
        .arg(PROJECT);
    exec::run_with_limit(&mut check, Some(LIMIT))
}

/// The status of Phoenix's `GET /healthz`, `None` when nothing answers.
fn healthz(port: u16) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut head = [0u8; 64];
    let read = stream.read(&mut head).ok()?;
    String::from_utf8_lossy(&head[..read]).split_whitespace().nth(1)?.parse().ok()
}
