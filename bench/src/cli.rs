//! The command line every benchmark program shares: `weft-bench` (every workload) and the programs that
//! each hold one group of them (`weft-bench-engine`, `-agents`, `-sqlite`, `-postgres`, `-redis`,
//! `-run-wait`).
//!
//! ```text
//! PROGRAM                    every workload it holds, each in a fresh process of its group's program
//! PROGRAM --quick            each workload once, checked (smoke run)
//! PROGRAM --only NAME[,NAME] these workloads, in this process
//! PROGRAM --list             the workload names, each with the program that runs it alone
//! ```
//!
//! Output: one JSON line per workload on stdout (the shape of `langgraph_baseline.jsonl`); progress on
//! stderr. A workload whose op fails or whose result fails its check prints a line with `error` and makes
//! the exit status non-zero.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::measure::Options;
use crate::workloads::{Entry, Program};

const USAGE: &str = "\
usage: PROGRAM [--quick] [--only NAME[,NAME...]]... [--min-time SECS] [--min-repeats N]
               [--max-repeats N] [--no-supplementary] [--list]";

/// The parsed command line.
#[derive(Debug, Default)]
struct Args {
    options: Options,
    only: Vec<String>,
    list: bool,
    no_supplementary: bool,
}

/// The workload called `name` among `programs`, with its program.
fn find(programs: &[&'static Program], name: &str) -> Option<(&'static Entry, &'static Program)> {
    programs.iter().find_map(|program| Some((program.find(name)?, *program)))
}

fn parse(args: &[String], programs: &[&'static Program]) -> Result<Args, String> {
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
    if let Some(unknown) = parsed.only.iter().find(|name| find(programs, name).is_none()) {
        return Err(format!("unknown workload `{unknown}` (see --list)"));
    }
    Ok(parsed)
}

/// Runs the benchmark program that holds `programs` (every group for `weft-bench`, its own for the
/// others) on this process's command line.
pub fn main(programs: &[&'static Program]) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse(&args, programs) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    if args.list {
        for program in programs {
            for entry in program.entries {
                let note = match (entry.supplementary, entry.weft_only) {
                    (_, true) => "  (supplementary, weft only)",
                    (true, false) => "  (supplementary)",
                    (false, false) => "",
                };
                println!("{}  {}{note}", entry.name, program.name);
            }
        }
        return ExitCode::SUCCESS;
    }
    if args.only.is_empty() { run_all(&args, programs) } else { run_here(&args, programs) }
}

/// Runs the named workloads in this process, one line each.
fn run_here(args: &Args, programs: &[&'static Program]) -> ExitCode {
    let mut status = ExitCode::SUCCESS;
    for name in &args.only {
        let Some((entry, _)) = find(programs, name) else { continue };
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

/// The program `program` beside `exe`: the one process that holds only its group's workloads.
fn program_path(exe: &Path, program: &Program) -> PathBuf {
    exe.with_file_name(format!("{}{}", program.name, std::env::consts::EXE_SUFFIX))
}

/// Runs every workload (the supplementary ones unless told not to) in a fresh process of its group's
/// program, so that each has its own peak RSS, no state carries over, and the process holds the code of
/// its group only (as LangGraph's script imports a backend's modules only for the workloads that use it).
fn run_all(args: &Args, programs: &[&'static Program]) -> ExitCode {
    let Ok(exe) = std::env::current_exe() else {
        eprintln!("cannot find this program's path");
        return ExitCode::FAILURE;
    };
    let mut status = ExitCode::SUCCESS;
    for program in programs {
        let path = program_path(&exe, program);
        for entry in program.entries.iter().filter(|entry| !(entry.supplementary && args.no_supplementary)) {
            eprintln!("[{}] {} ...", program.name, entry.name);
            let mut command = Command::new(&path);
            command.args(["--only", entry.name]).stdout(Stdio::piped());
            if args.options.quick {
                command.arg("--quick");
            }
            command.args(["--min-time", &args.options.min_time.as_secs_f64().to_string()]);
            command.args(["--min-repeats", &args.options.min_repeats.to_string()]);
            command.args(["--max-repeats", &args.options.max_repeats.to_string()]);
            if !run_child(&mut command, entry.name, &path) {
                status = ExitCode::FAILURE;
            }
        }
    }
    status
}

/// Runs one workload's process, passing its lines on; false when it failed.
fn run_child(command: &mut Command, name: &str, path: &Path) -> bool {
    match command.output() {
        Ok(output) => {
            print!("{}", String::from_utf8_lossy(&output.stdout));
            if !output.status.success() && output.stdout.is_empty() {
                println!("{}", json!({"workload": name, "error": format!("child exited {}", output.status)}));
            }
            output.status.success()
        }
        Err(error) => {
            let error = format!(
                "cannot start {} ({error}); build every program with `cargo build -p weft-bench --bins`",
                path.display()
            );
            println!("{}", json!({"workload": name, "error": error}));
            false
        }
    }
}
