//! `weft-bench`: weft's side of the benchmark workloads of `bench/langgraph/WORKLOADS.md`, measured as
//! LangGraph's `langgraph_bench.py` measures its side.
//!
//! ```text
//! weft-bench                    every workload, each in a fresh child process
//! weft-bench --quick            each workload once, checked (smoke run)
//! weft-bench --only NAME[,NAME] these workloads, in this process
//! weft-bench --list             the workload names
//! ```
//!
//! Output: one JSON line per workload on stdout (the shape of `langgraph_baseline.jsonl`); progress on
//! stderr. A workload whose op fails or whose result fails its check prints a line with `error` and makes
//! the exit status non-zero. `cargo xtask bench` builds this binary in release mode and runs it.

mod graphs;
mod measure;
mod procfs;
mod workloads;

use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use serde_json::json;

use measure::Options;

const USAGE: &str = "\
usage: weft-bench [--quick] [--only NAME[,NAME...]]... [--min-time SECS] [--min-repeats N]
                  [--max-repeats N] [--no-supplementary] [--list]";

/// The parsed command line.
#[derive(Debug, Default)]
struct Args {
    options: Options,
    only: Vec<String>,
    list: bool,
    no_supplementary: bool,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args::default();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().cloned().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--quick" => parsed.options.quick = true,
            "--list" => parsed.list = true,
            "--no-supplementary" => parsed.no_supplementary = true,
            "--only" => {
                parsed.only.extend(value("--only")?.split(',').filter(|s| !s.is_empty()).map(str::to_owned))
            }
            "--min-time" => {
                let secs: f64 = value("--min-time")?.parse().map_err(|e| format!("--min-time: {e}"))?;
                parsed.options.min_time =
                    Duration::try_from_secs_f64(secs).map_err(|e| format!("--min-time: {e}"))?;
            }
            "--min-repeats" => {
                parsed.options.min_repeats =
                    value("--min-repeats")?.parse().map_err(|e| format!("--min-repeats: {e}"))?;
            }
            "--max-repeats" => {
                parsed.options.max_repeats =
                    value("--max-repeats")?.parse().map_err(|e| format!("--max-repeats: {e}"))?;
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument `{other}`\n{USAGE}")),
        }
    }
    if let Some(unknown) = parsed.only.iter().find(|name| workloads::find(name).is_none()) {
        return Err(format!("unknown workload `{unknown}` (see --list)"));
    }
    Ok(parsed)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse(&args) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    if args.list {
        for entry in workloads::ALL {
            let note = match (entry.supplementary, entry.weft_only) {
                (_, true) => "  (supplementary, weft only)",
                (true, false) => "  (supplementary)",
                (false, false) => "",
            };
            println!("{}{note}", entry.name);
        }
        return ExitCode::SUCCESS;
    }
    if args.only.is_empty() { run_all(&args) } else { run_here(&args) }
}

/// Runs the named workloads in this process, one line each.
fn run_here(args: &Args) -> ExitCode {
    let mut status = ExitCode::SUCCESS;
    for name in &args.only {
        let Some(entry) = workloads::find(name) else { continue };
        match (entry.run)(&args.options) {
            Ok(line) => println!("{}", serde_json::Value::Object(line)),
            Err(error) => {
                println!("{}", json!({"workload": name, "error": error}));
                status = ExitCode::FAILURE;
            }
        }
    }
    status
}

/// Runs every workload (the supplementary ones unless told not to) in a fresh child process of this
/// binary, so that each has its own peak RSS and no state carries over.
fn run_all(args: &Args) -> ExitCode {
    let Ok(exe) = std::env::current_exe() else {
        eprintln!("cannot find this program's path");
        return ExitCode::FAILURE;
    };
    let mut status = ExitCode::SUCCESS;
    for entry in workloads::ALL.iter().filter(|entry| !(entry.supplementary && args.no_supplementary)) {
        eprintln!("[weft-bench] {} ...", entry.name);
        let mut command = Command::new(&exe);
        command.args(["--only", entry.name]).stdout(Stdio::piped());
        if args.options.quick {
            command.arg("--quick");
        }
        command.args(["--min-time", &args.options.min_time.as_secs_f64().to_string()]);
        command.args(["--min-repeats", &args.options.min_repeats.to_string()]);
        command.args(["--max-repeats", &args.options.max_repeats.to_string()]);
        match command.output() {
            Ok(output) => {
                print!("{}", String::from_utf8_lossy(&output.stdout));
                if !output.status.success() {
                    status = ExitCode::FAILURE;
                    if output.stdout.is_empty() {
                        println!(
                            "{}",
                            json!({"workload": entry.name, "error": format!("child exited {}", output.status)})
                        );
                    }
                }
            }
            Err(error) => {
                println!(
                    "{}",
                    json!({"workload": entry.name, "error": format!("cannot start the child: {error}")})
                );
                status = ExitCode::FAILURE;
            }
        }
    }
    status
}
