//! fakellm, a scripted OpenAI-compatible server from PyPI, for the `openai` integration's tests: installed
//! into a virtual environment under the target directory (`target/fakellm-venv`) when missing. The tests
//! start it themselves, on a free port, from the path in `WEFT_FAKELLM_BIN`.
//!
//! `cargo xtask fakellm serve` also serves it with the examples' rules (`examples/fakellm.yaml`), so that
//! the examples run `--live` against an OpenAI-compatible server with no key and no model; the examples
//! stage of CI does so after running them on their scripts.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crate::bench::target_dir;
use crate::exec;

/// The fakellm release the tests are written against.
const VERSION: &str = "0.3.5";

/// How long creating the environment and installing fakellm may take.
const INSTALL_LIMIT: Duration = Duration::from_secs(600);

/// The environment variable that tells the tests where fakellm is.
pub(crate) const ENV: &str = "WEFT_FAKELLM_BIN";

/// Where the virtual environment lives.
fn venv_dir() -> PathBuf {
    target_dir(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from), &exec::root()).join("fakellm-venv")
}

/// The fakellm executable, installed first when missing or of another version.
pub(crate) fn ensure() -> Result<PathBuf, String> {
    let venv = venv_dir();
    let python = venv.join("bin").join("python");
    let executable = venv.join("bin").join("fakellm");
    if executable.is_file() && installed_version(&python).as_deref() == Some(VERSION) {
        return Ok(executable);
    }
    println!("installing fakellm {VERSION} into {}", venv.display());
    if !python.is_file() {
        let mut create = Command::new("python3");
        create.arg("-m").arg("venv").arg(&venv);
        exec::run_with_limit(&mut create, Some(INSTALL_LIMIT)).map_err(|err| {
            format!(
                "cannot create a virtual environment for fakellm (python3 with the venv module needed): {err}"
            )
        })?;
    }
    let mut pip = Command::new(&python);
    pip.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
        .arg(format!("fakellm=={VERSION}"));
    exec::run_with_limit(&mut pip, Some(INSTALL_LIMIT))
        .map_err(|err| format!("cannot install fakellm {VERSION} into {}: {err}", venv.display()))?;
    match installed_version(&python) {
        Some(version) if version == VERSION && executable.is_file() => Ok(executable),
        other => Err(format!("fakellm {VERSION} is not usable after installing it (found {other:?})")),
    }
}

/// The fakellm version installed for `python`, if any.
fn installed_version(python: &Path) -> Option<String> {
    let output = Command::new(python)
        .args(["-c", "import importlib.metadata as m; print(m.version('fakellm'))"])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// `cargo xtask fakellm [serve [--port N] [--rules FILE]]`: installs fakellm when missing and prints the
/// line to export for the tests; with `serve`, serves it until Ctrl-C.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let Some((first, rest)) = args.split_first() else {
        let executable = ensure()?;
        println!("export {ENV}={}", executable.display());
        return Ok(());
    };
    if first != "serve" {
        return Err(format!("fakellm: unknown argument `{first}` (expected `serve`)"));
    }
    let options = ServeOptions::parse(rest)?;
    let executable = ensure()?;
    let server = FakeLlm::start(&executable, &options.rules, options.port, false)?;
    let base = server.base_url();
    println!("\nfakellm is serving the rules of {} at {base}\n", options.rules.display());
    println!("export OPENAI_BASE_URL={base}");
    println!("export OPENAI_API_KEY=sk-fakellm   # not checked by fakellm, but clients want one");
    println!(
        "cargo run --example quickstart --features live -- --live   # only when asked, and built with `live`"
    );
    println!("\nIts dashboard (requests, matched rules): http://127.0.0.1:{}/_fakellm", server.port);
    println!("Ctrl-C stops it.");
    server.wait()
}

/// The examples' rules, in the repository.
pub(crate) fn examples_rules() -> PathBuf {
    exec::root().join("examples").join("fakellm.yaml")
}

/// The options of `fakellm serve`.
#[derive(Debug, PartialEq)]
struct ServeOptions {
    port: Option<u16>,
    rules: PathBuf,
}

impl ServeOptions {
    fn parse(args: &[String]) -> Result<Self, String> {
        let mut options = ServeOptions { port: None, rules: examples_rules() };
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            match arg.as_str() {
                "--port" => {
                    let value = rest.next().ok_or("--port needs a number")?;
                    let port =
                        value.parse::<u16>().map_err(|_| format!("--port: `{value}` is not a port"))?;
                    options.port = Some(port);
                }
                "--rules" => {
                    let value = rest.next().ok_or("--rules needs a file")?;
                    options.rules = PathBuf::from(value);
                }
                other => return Err(format!("fakellm serve: unknown argument `{other}`")),
            }
        }
        if !options.rules.is_file() {
            return Err(format!("fakellm serve: no rules file at {}", options.rules.display()));
        }
        Ok(options)
    }
}

/// How long fakellm gets to start listening.
const START_LIMIT: Duration = Duration::from_secs(60);

/// A fakellm server (under the watchdog shell that stops it when xtask ends), stopped when dropped.
#[derive(Debug)]
pub(crate) struct FakeLlm {
    child: Child,
    /// Closing it stops the server.
    lifeline: Option<ChildStdin>,
    pub(crate) port: u16,
}

impl FakeLlm {
    /// Serves `rules` on `port` (a free one when `None`) and waits until it listens; `quiet`: without its
    /// request log.
    pub(crate) fn start(
        executable: &Path,
        rules: &Path,
        port: Option<u16>,
        quiet: bool,
    ) -> Result<Self, String> {
        let port = match port {
            Some(port) => port,
            None => crate::llm::server::free_port()?,
        };
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(crate::llm::server::WATCHDOG)
            .arg("fakellm")
            .arg(executable)
            .args(["serve", "--host", "127.0.0.1", "--port", &port.to_string(), "--config"])
            .arg(rules)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(if quiet { Stdio::null() } else { Stdio::inherit() })
            .spawn()
            .map_err(|err| format!("cannot start {}: {err}", executable.display()))?;
        let lifeline = child.stdin.take();
        let mut server = FakeLlm { child, lifeline, port };
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!("fakellm exited ({status}) while starting (are the rules valid?)"));
            }
            if started.elapsed() > START_LIMIT {
                return Err(format!("fakellm did not listen on port {port} within {START_LIMIT:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(server)
    }

    /// The OpenAI base URL it serves.
    pub(crate) fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Waits for the server to exit (Ctrl-C reaches it through the terminal's process group).
    fn wait(mut self) -> Result<(), String> {
        let status = self.child.wait().map_err(|err| format!("cannot wait for fakellm: {err}"))?;
        Err(format!("fakellm exited ({status})"))
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        drop(self.lifeline.take());
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn serve_defaults_to_the_examples_rules_and_a_free_port() {
        let options = ServeOptions::parse(&[]).unwrap();
        assert_eq!(options, ServeOptions { port: None, rules: examples_rules() });
    }

    #[test]
    fn serve_reads_a_port_and_rejects_bad_arguments() {
        assert_eq!(ServeOptions::parse(&strings(&["--port", "9000"])).unwrap().port, Some(9000));
        assert_eq!(ServeOptions::parse(&strings(&["--port", "x"])).unwrap_err(), "--port: `x` is not a port");
        assert_eq!(ServeOptions::parse(&strings(&["--port"])).unwrap_err(), "--port needs a number");
        let missing = ServeOptions::parse(&strings(&["--rules", "/nonexistent/rules.yaml"])).unwrap_err();
        assert_eq!(missing, "fakellm serve: no rules file at /nonexistent/rules.yaml");
        let unknown = ServeOptions::parse(&strings(&["--fast"])).unwrap_err();
        assert_eq!(unknown, "fakellm serve: unknown argument `--fast`");
    }

    #[test]
    fn the_environment_lives_under_the_target_directory() {
        let dir = venv_dir();
        assert!(dir.ends_with("fakellm-venv"), "{}", dir.display());
        assert!(dir.parent().is_some_and(|p| p.file_name().is_some()));
    }

    #[test]
    fn a_python_without_fakellm_reports_no_version() {
        assert_eq!(installed_version(Path::new("/nonexistent/python")), None);
    }
}
