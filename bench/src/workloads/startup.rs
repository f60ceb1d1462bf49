//! `startup`: a fresh process that loads the engine, builds a three-node graph, compiles it and runs it
//! once (`weft-bench-startup`), against the same program in Python on LangGraph's side (`startup` in
//! `langgraph_bench.py`).
//!
//! As LangGraph's script: one untimed run to warm the file cache, then the median of 5 runs; the start-up
//! of a bare process (`true`) is reported beside it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::measure::{Line, Options, err, median, secs};
use crate::procfs::round;

/// Runs of the binary after the warm-up.
const RUNS: usize = 5;

/// The start-up program, built beside this one.
fn startup_binary() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(err)?;
    let path = exe.with_file_name(format!("weft-bench-startup{}", std::env::consts::EXE_SUFFIX));
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!("{} is missing; build it with `cargo build -p weft-bench --bins`", path.display()))
    }
}

/// Wall times of `RUNS` fresh processes of `program`, after one untimed run.
fn time_runs(program: &Path) -> Result<Vec<Duration>, String> {
    let run = || -> Result<Duration, String> {
        let started = Instant::now();
        let status = Command::new(program).stdout(Stdio::null()).status().map_err(err)?;
        let took = started.elapsed();
        if status.success() { Ok(took) } else { Err(format!("{} failed ({status})", program.display())) }
    };
    run()?;
    (0..RUNS).map(|_| run()).collect()
}

/// Measures the start-up program and a bare process.
pub(crate) fn startup(_: &Options) -> Result<Line, String> {
    let binary = startup_binary()?;
    let times = time_runs(&binary)?;
    let bare = time_runs(Path::new("/bin/true")).or_else(|_| time_runs(Path::new("true")))?;
    let output = Command::new(&binary).arg("--rss").output().map_err(err)?;
    let rss_kib: f64 = String::from_utf8_lossy(&output.stdout).trim().parse().map_err(err)?;
    let binary_bytes = std::fs::metadata(&binary).map_err(err)?.len();
    let mut line = Line::new();
    line.insert("workload".into(), json!("startup"));
    line.insert("median_s".into(), secs(median(&times)));
    line.insert("min_s".into(), secs(times.iter().copied().min().unwrap_or_default()));
    line.insert("max_s".into(), secs(times.iter().copied().max().unwrap_or_default()));
    line.insert("repeats".into(), json!(times.len()));
    line.insert("peak_rss_mb".into(), json!(round(rss_kib / 1024.0, 1)));
    line.insert(
        "what".into(),
        json!("wall time of a fresh process that loads the engine, builds, compiles and runs a 3-node graph once (process start included)"),
    );
    line.insert("bare_process_median_s".into(), secs(median(&bare)));
    line.insert("binary_bytes".into(), json!(binary_bytes));
    Ok(line)
}
