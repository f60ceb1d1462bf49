//! The instruction-count gate: `cargo xtask bench --counts` runs the key workloads once each (one checked
//! op, the debug build CI's stages share) under valgrind's callgrind, which counts the instructions the
//! process executes (a count that the machine's load does not move), and compares them with the counts
//! stored in `bench/counts.txt`: a rise over 5 % fails. `--update REASON` stores the new counts with the
//! reason, in the same commit as the change that moved them.
//!
//! Counts depend on the compiler, so they are compared only when the stored `rustc` version is the one
//! running; with another, the counts are printed and the gate says it did not judge.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::exec;

/// The workloads the gate counts (`server_run_wait`: one `/runs/wait` run through weft-server in the
/// process, so that the server's request path counts too).
pub(crate) const WORKLOADS: &[&str] = &[
    "loop1000",
    "react10",
    "create_agent10",
    "loop1000_memory",
    "loop1000_sqlite",
    "loop1000_postgres",
    "server_run_wait",
];

/// The rise over the stored count that fails the gate, in percent.
const THRESHOLD_PERCENT: u128 = 5;

/// The environment variable `weft-bench` reads to leave the CPU clock unread under valgrind.
const UNDER_VALGRIND: &str = "WEFT_BENCH_UNDER_VALGRIND";

/// The stored counts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Stored {
    /// The `rustc --version` they were counted with.
    pub(crate) rustc: String,
    /// Workload and count.
    pub(crate) counts: Vec<(String, u64)>,
    /// The comment lines (the header and the reasons of the updates), kept on update.
    pub(crate) comments: Vec<String>,
}

/// Reads `bench/counts.txt`'s text.
pub(crate) fn parse(text: &str) -> Result<Stored, String> {
    let mut stored = Stored::default();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('#') {
            stored.comments.push(line.to_owned());
        } else if let Some(version) = line.strip_prefix("rustc ") {
            stored.rustc = format!("rustc {version}");
        } else {
            let mut words = line.split_whitespace();
            let (Some(name), Some(count), None) = (words.next(), words.next(), words.next()) else {
                return Err(format!("bench/counts.txt:{}: expected `WORKLOAD COUNT`, found `{line}`", n + 1));
            };
            let count =
                count.parse().map_err(|_| format!("bench/counts.txt:{}: `{count}` is not a count", n + 1))?;
            stored.counts.push((name.to_owned(), count));
        }
    }
    Ok(stored)
}

/// The file's text for `stored`.
pub(crate) fn render(stored: &Stored) -> String {
    let mut out = String::new();
    for comment in &stored.comments {
        out.push_str(comment);
        out.push('\n');
    }
    out.push_str(&stored.rustc);
    out.push('\n');
    for (name, count) in &stored.counts {
        out.push_str(&format!("{name} {count}\n"));
    }
    out
}

/// What the gate says about one workload.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Judgement {
    /// Within the threshold (the change as a fraction).
    Within(f64),
    /// Risen past the threshold.
    Risen(f64),
    /// No stored count.
    New,
}

/// Judges `count` of `name` against `stored`.
pub(crate) fn judge(stored: &Stored, name: &str, count: u64) -> Judgement {
    match stored.counts.iter().find(|(n, _)| n == name) {
        Some(&(_, before)) if before > 0 => {
            let change = count as f64 / before as f64 - 1.0;
            // Whole numbers: a rise of exactly 5 % passes.
            let limit = u128::from(before) * (100 + THRESHOLD_PERCENT);
            if u128::from(count) * 100 > limit { Judgement::Risen(change) } else { Judgement::Within(change) }
        }
        _ => Judgement::New,
    }
}

/// The instructions valgrind's summary says the process executed (`Collected : N`).
pub(crate) fn collected(stderr: &str) -> Option<u64> {
    stderr.lines().find_map(|line| line.split("Collected :").nth(1)).and_then(|n| n.trim().parse().ok())
}

fn counts_path() -> PathBuf {
    exec::root().join("bench").join("counts.txt")
}

/// Counts `name` with `binary` under callgrind.
fn count(binary: &Path, name: &str) -> Result<u64, String> {
    let output = Command::new("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(binary)
        .args(["--only", name, "--quick"])
        .env(UNDER_VALGRIND, "1")
        .output()
        .map_err(|err| format!("cannot run valgrind (install Debian's `valgrind`): {err}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!("{name} failed under valgrind ({}):\n{}", output.status, tail.join("\n")));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    if stdout.contains("\"error\"") {
        return Err(format!("{name} failed its check under valgrind: {}", stdout.trim()));
    }
    collected(&stderr).ok_or_else(|| format!("valgrind printed no instruction count for {name}"))
}

/// `rustc --version`.
fn rustc_version() -> Result<String, String> {
    let output =
        Command::new("rustc").arg("--version").output().map_err(|err| format!("cannot run rustc: {err}"))?;
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// Counts every workload of [`WORKLOADS`] with `binary` (the shared debug build) and compares the counts
/// with the stored ones, or with `update` stores them with that reason.
pub(crate) fn run(binary: &Path, update: Option<&str>) -> Result<(), String> {
    let path = counts_path();
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let mut stored = parse(&text)?;
    let rustc = rustc_version()?;
    let mut counted = Vec::new();
    for name in WORKLOADS {
        let n = count(binary, name)?;
        println!("counted  {name:<20} {n:>14} instructions");
        counted.push(((*name).to_owned(), n));
    }
    if let Some(reason) = update {
        stored.rustc = rustc;
        stored.counts = counted;
        stored.comments.push(format!("# {}: {reason}", crate::bench::today()));
        std::fs::write(&path, render(&stored))
            .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
        println!("stored in {}", path.display());
        return Ok(());
    }
    if stored.rustc != rustc {
        println!(
            "the stored counts were taken with `{}`, this is `{rustc}`: not compared (update them with \
             `cargo xtask bench --counts --update REASON`)",
            stored.rustc
        );
        return Ok(());
    }
    let mut risen = Vec::new();
    for (name, n) in &counted {
        match judge(&stored, name, *n) {
            Judgement::Within(change) => println!("ok       {name:<20} {:+.2} %", change * 100.0),
            Judgement::Risen(change) => {
                println!("RISEN    {name:<20} {:+.2} %", change * 100.0);
                risen.push(format!("{name} {:+.1} %", change * 100.0));
            }
            Judgement::New => println!("new      {name:<20} (no stored count)"),
        }
    }
    if risen.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "instruction counts rose over 5 %: {}; find the cause, or store the new counts with \
             `cargo xtask bench --counts --update REASON` in the same commit",
            risen.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str =
        "# header\n# 2026-11-28: first counts\nrustc 1.91.0 (abc 2025-10-01)\nloop1000 1000\nreact10 2000\n";

    #[test]
    fn the_file_reads_and_writes_back_the_same() {
        let stored = parse(FILE).unwrap();
        assert_eq!(stored.rustc, "rustc 1.91.0 (abc 2025-10-01)");
        assert_eq!(stored.counts, [("loop1000".to_owned(), 1000), ("react10".to_owned(), 2000)]);
        assert_eq!(render(&stored), FILE);
        assert!(parse("loop1000 many\n").unwrap_err().contains("not a count"));
        assert!(parse("loop1000\n").unwrap_err().contains("expected `WORKLOAD COUNT`"));
    }

    #[test]
    fn a_rise_over_five_percent_fails_and_less_passes() {
        let stored = parse(FILE).unwrap();
        assert!(matches!(judge(&stored, "loop1000", 1050), Judgement::Within(_)));
        assert!(matches!(judge(&stored, "loop1000", 1051), Judgement::Risen(_)));
        assert!(matches!(judge(&stored, "react10", 1000), Judgement::Within(c) if c < 0.0));
        assert_eq!(judge(&stored, "fanout1000", 5), Judgement::New);
    }

    #[test]
    fn reads_the_count_of_valgrinds_summary() {
        let stderr =
            "==1== Events    : Ir\n==1== Collected : 48216369\n==1==\n==1== I   refs:      48,216,369\n";
        assert_eq!(collected(stderr), Some(48_216_369));
        assert_eq!(collected("no summary"), None);
    }

    #[test]
    fn the_stored_counts_cover_every_workload_counted() {
        let text = std::fs::read_to_string(counts_path()).unwrap();
        let stored = parse(&text).unwrap();
        for name in WORKLOADS {
            assert!(stored.counts.iter().any(|(n, _)| n == name), "bench/counts.txt has no count for {name}");
        }
    }
}
