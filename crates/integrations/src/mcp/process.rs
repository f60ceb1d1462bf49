//! The child process of a stdio server: started with piped stdin, stdout and stderr, its stderr kept
//! (last lines) for error messages, and killed and reaped when its session ends, even without a runtime.

use std::collections::VecDeque;
use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::process::{ChildStdin, ChildStdout};

use super::connection::StdioConnection;
use super::error::{McpError, Result};

/// How many stderr lines are kept for error messages.
const STDERR_LINES: usize = 20;

/// How long a server may take to exit on its own once its stdin is closed, before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// A running server process.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    child: Option<Child>,
    pid: u32,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// Set once the stderr reader has read to the end of the pipe.
    stderr_read: Arc<std::sync::atomic::AtomicBool>,
}

impl ServerProcess {
    /// Starts `config`'s command; returns the process and the pipes to speak MCP over.
    pub(crate) fn spawn(server: &str, config: &StdioConnection) -> Result<(Self, ChildStdout, ChildStdin)> {
        let command_line = std::iter::once(config.command.as_str())
            .chain(config.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        if config.command.trim().is_empty() {
            return Err(McpError::Config(format!("mcp server '{server}' has an empty command")));
        }
        let mut command = Command::new(&config.command);
        command
            .args(&config.args)
            .envs(&config.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(dir) = &config.cwd {
            command.current_dir(dir);
        }
        let spawn_error =
            |source| McpError::Spawn { server: server.to_owned(), command: command_line.clone(), source };
        let mut child = command.spawn().map_err(spawn_error)?;
        let pid = child.id();
        let pipes = (child.stdout.take(), child.stdin.take(), child.stderr.take());
        let mut process =
            Self { child: Some(child), pid, stderr: Arc::default(), stderr_read: Arc::default() };
        let (Some(stdout), Some(stdin), stderr) = pipes else {
            return Err(spawn_error(std::io::Error::other("the child's pipes are missing")));
        };
        if let Some(stderr) = stderr {
            process.keep_stderr(server, stderr);
        }
        let stdout = ChildStdout::from_std(stdout).map_err(spawn_error)?;
        let stdin = ChildStdin::from_std(stdin).map_err(spawn_error)?;
        Ok((process, stdout, stdin))
    }

    /// Reads stderr on a thread of its own: each line goes to `tracing` (debug) and the last ones are kept.
    fn keep_stderr(&mut self, server: &str, stderr: std::process::ChildStderr) {
        let lines = Arc::clone(&self.stderr);
        let read = Arc::clone(&self.stderr_read);
        let server = server.to_owned();
        let spawned = std::thread::Builder::new().name(format!("mcp-stderr-{}", self.pid)).spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                tracing::debug!(target: "weft::mcp", server = %server, "stderr: {line}");
                let mut kept = lines.lock().unwrap_or_else(PoisonError::into_inner);
                if kept.len() == STDERR_LINES {
                    kept.pop_front();
                }
                kept.push_back(line);
            }
            read.store(true, std::sync::atomic::Ordering::Release);
        });
        if let Err(err) = spawned {
            tracing::warn!(target: "weft::mcp", "cannot read the stderr of mcp server process {}: {err}", self.pid);
        }
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// How the process ended (if it did) and its last stderr lines, for error messages.
    pub(crate) async fn describe_exit(&mut self) -> Option<String> {
        // The pipe closes a moment before the exit is visible: give it a little time.
        let deadline = Instant::now() + Duration::from_millis(200);
        let status = loop {
            match self.child.as_mut().map(Child::try_wait) {
                Some(Ok(Some(status))) => break Some(status),
                Some(Ok(None)) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                _ => break None,
            }
        };
        // Once it has exited, its last lines may still be on their way through the pipe: wait (until the
        // same deadline) for the reader to reach the end.
        if status.is_some() {
            while !self.stderr_read.load(std::sync::atomic::Ordering::Acquire) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        let stderr: Vec<String> =
            self.stderr.lock().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect();
        let mut parts = Vec::new();
        if let Some(status) = status {
            parts.push(format!("process {} {}", self.pid, exit_text(status)));
        }
        if !stderr.is_empty() {
            parts.push(format!("stderr: {}", stderr.join(" | ")));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// Waits up to a grace period for the process to exit on its own (its stdin closed), then kills it;
    /// either way it is reaped.
    pub(crate) async fn shutdown(mut self) {
        if let Some(mut child) = self.child.take() {
            let reaped = tokio::task::spawn_blocking(move || {
                let deadline = Instant::now() + EXIT_GRACE;
                while Instant::now() < deadline {
                    if !matches!(child.try_wait(), Ok(None)) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                kill_and_reap(child);
            })
            .await;
            if let Err(err) = reaped {
                tracing::warn!(target: "weft::mcp", "cannot reap mcp server process {}: {err}", self.pid);
            }
        }
    }
}

fn exit_text(status: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt as _;
        if let Some(signal) = status.signal() {
            return format!("was killed by signal {signal}");
        }
    }
    match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => "exited".to_owned(),
    }
}

/// Kills the process (if still running) and waits for it, so that no zombie remains.
fn kill_and_reap(mut child: Child) {
    if matches!(child.try_wait(), Ok(None)) {
        let _ = child.kill();
    }
    let _ = child.wait();
}

impl Drop for ServerProcess {
    /// Kills and reaps the process on a short-lived thread (a killed process exits at once, and no async
    /// runtime is needed, so dropping a session anywhere leaves no process and no zombie behind).
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = self.pid;
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
            }
            let spawned = std::thread::Builder::new().name(format!("mcp-reap-{pid}")).spawn(move || {
                let _ = child.wait();
            });
            if let Err(err) = spawned {
                tracing::warn!(target: "weft::mcp", "cannot reap mcp server process {pid}: {err}");
            }
        }
    }
}
