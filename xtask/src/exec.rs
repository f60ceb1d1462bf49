//! Running commands from the repository root: echoing them, waiting with a time limit, and counting the
//! tests that cargo test and nextest report.

use std::io::{BufRead as _, BufReader, IsTerminal as _, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The repository root (the parent of this crate's folder).
///
/// Read from `CARGO_MANIFEST_DIR` as `cargo run` sets it for this run, not as it was when xtask was
/// built: cargo does not rebuild xtask when the same sources sit in another checkout sharing the target
/// directory, and the build-time path would then point at that other checkout.
pub(crate) fn root() -> PathBuf {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    manifest_dir.parent().map_or_else(|| manifest_dir.clone(), Path::to_path_buf)
}

/// `cargo ARGS`, run from the repository root with the cargo that started xtask.
pub(crate) fn cargo(args: &[&str]) -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.args(args).current_dir(root());
    // Test output is piped through xtask to count it; keep it coloured when a person is watching.
    if std::env::var_os("CARGO_TERM_COLOR").is_none() && std::io::stdout().is_terminal() {
        command.env("CARGO_TERM_COLOR", "always");
    }
    command
}

/// The command as a person would type it.
pub(crate) fn describe(command: &Command) -> String {
    let program = Path::new(command.get_program())
        .file_name()
        .map_or_else(|| command.get_program().to_string_lossy(), |name| name.to_string_lossy());
    std::iter::once(program.into_owned())
        .chain(command.get_args().map(|arg| arg.to_string_lossy().into_owned()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `command` with the terminal as its output and fails unless it exits with success.
pub(crate) fn run(command: &mut Command) -> Result<(), String> {
    run_with_limit(command, None)
}

/// Like [`run`], killing the command once it has run for `limit`.
pub(crate) fn run_with_limit(command: &mut Command, limit: Option<Duration>) -> Result<(), String> {
    println!("$ {}", describe(command));
    let mut child = spawn(command)?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(format!("`{}` failed ({status})", describe(command))),
            Ok(None) => {}
            Err(err) => return Err(format!("cannot wait for `{}`: {err}", describe(command))),
        }
        if let Some(limit) = limit.filter(|limit| started.elapsed() > *limit) {
            // Best effort: the process may have exited between the two calls.
            let _ = child.kill();
            let _ = child.wait();
            let limit = format_duration(limit);
            return Err(format!("`{}` ran past its limit of {limit} and was killed", describe(command)));
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Runs a test command, echoing its output while counting the tests its summary lines report.
pub(crate) fn run_counting(command: &mut Command, tally: &mut Tally) -> Result<(), String> {
    println!("$ {}", describe(command));
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = spawn(command)?;
    let stdout = child.stdout.take().map(|out| echo_and_count(out, std::io::stdout));
    let stderr = child.stderr.take().map(|err| echo_and_count(err, std::io::stderr));
    for reader in [stdout, stderr].into_iter().flatten() {
        match reader.join() {
            Ok(counted) => tally.add(counted),
            Err(_) => return Err(format!("lost the output of `{}`", describe(command))),
        }
    }
    match child.wait() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("`{}` failed ({status})", describe(command))),
        Err(err) => Err(format!("cannot wait for `{}`: {err}", describe(command))),
    }
}

fn spawn(command: &mut Command) -> Result<Child, String> {
    command.spawn().map_err(|err| format!("cannot start `{}`: {err}", describe(command)))
}

/// Copies `source` line by line to `sink` on a thread of its own, counting the tests it reports.
fn echo_and_count<W: Write + 'static>(
    source: impl Read + Send + 'static,
    sink: fn() -> W,
) -> thread::JoinHandle<Tally> {
    thread::spawn(move || {
        let mut tally = Tally::default();
        let mut reader = BufReader::new(source);
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).is_ok_and(|read| read > 0) {
            // Echoing is best effort: a closed terminal must not stop the command.
            let mut out = sink();
            let _ = out.write_all(&line);
            let _ = out.flush();
            if let Some(counted) = Tally::from_summary_line(&String::from_utf8_lossy(&line)) {
                tally.add(counted);
            }
            line.clear();
        }
        tally
    })
}

/// Tests counted from the summary lines of cargo test (`test result: ...`) and nextest (`Summary [...]`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Tests that passed.
    pub(crate) passed: u64,
    /// Tests that failed or timed out.
    pub(crate) failed: u64,
    /// Tests skipped or ignored.
    pub(crate) skipped: u64,
}

impl Tally {
    /// Adds another count to this one.
    pub(crate) fn add(&mut self, other: Tally) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.skipped += other.skipped;
    }

    /// The counts of one summary line, or `None` for any other line.
    fn from_summary_line(line: &str) -> Option<Tally> {
        let line = strip_ansi(line);
        let line = line.trim_start();
        if !(line.starts_with("test result:") || line.starts_with("Summary [")) {
            return None;
        }
        let words: Vec<&str> =
            line.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
        let mut tally = Tally::default();
        for pair in words.windows(2) {
            let Ok(count) = pair[0].parse::<u64>() else { continue };
            match pair[1] {
                "passed" => tally.passed += count,
                "failed" | "timed" => tally.failed += count,
                "skipped" | "ignored" => tally.skipped += count,
                _ => {}
            }
        }
        Some(tally)
    }
}

/// Removes terminal colour codes (`ESC [ ... m`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|c| c.is_ascii_alphabetic());
        } else {
            out.push(c);
        }
    }
    out
}

/// `1m 02.3s` or `4.5s`.
pub(crate) fn format_duration(duration: Duration) -> String {
    let secs = duration.as_secs_f64();
    if secs < 60.0 {
        format!("{secs:.1}s")
    } else {
        let minutes = (secs / 60.0).floor();
        format!("{minutes:.0}m {:04.1}s", secs - minutes * 60.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_a_cargo_test_result_line() {
        let line = "test result: ok. 12 passed; 1 failed; 2 ignored; 0 measured; 3 filtered out; finished in 0.01s\n";
        assert_eq!(Tally::from_summary_line(line), Some(Tally { passed: 12, failed: 1, skipped: 2 }));
    }

    #[test]
    fn counts_a_coloured_nextest_summary_line() {
        let line = "\u{1b}[32;1m     Summary\u{1b}[0m [   1.234s] 57 tests run: 55 passed, 1 failed, 1 timed out, 4 skipped";
        assert_eq!(Tally::from_summary_line(line), Some(Tally { passed: 55, failed: 2, skipped: 4 }));
    }

    #[test]
    fn ignores_lines_that_are_not_summaries() {
        assert_eq!(Tally::from_summary_line("test retry_counts ... ok 3 passed"), None);
        assert_eq!(Tally::from_summary_line("    Starting 57 tests across 5 binaries (1 skipped)"), None);
    }

    #[test]
    fn formats_durations_in_seconds_then_minutes() {
        assert_eq!(format_duration(Duration::from_millis(4_460)), "4.5s");
        assert_eq!(format_duration(Duration::from_millis(62_340)), "1m 02.3s");
    }

    #[test]
    fn describes_a_command_as_typed() {
        let command = cargo(&["fmt", "--all", "--", "--check"]);
        assert!(describe(&command).ends_with("fmt --all -- --check"), "{}", describe(&command));
    }

    #[test]
    fn run_with_limit_kills_a_command_that_runs_too_long() {
        let mut command = Command::new("sleep");
        command.arg("5");
        let started = Instant::now();
        let err = run_with_limit(&mut command, Some(Duration::from_millis(200))).unwrap_err();
        assert!(err.contains("`sleep 5` ran past its limit"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(4));
    }

    #[test]
    fn run_reports_the_failing_command() {
        let err = run(Command::new("false").arg("x")).unwrap_err();
        assert!(err.starts_with("`false x` failed"), "{err}");
    }
}
