//! `cargo xtask bench`: builds `weft-bench` and runs every workload in its own process. `--compare` runs
//! LangGraph's script (in a virtual environment under the target folder) and weft by turns, several
//! rounds per workload, then the server workloads against `langgraph dev`, writes every raw line to a
//! file under `bench/results/` and prints the table; `--render FILE` writes docs/performance.md's results
//! from such a file ([`bench_page`]). `--server` runs the server benchmarks alone (`bench/server`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{bench_counts, bench_page, exec, pyenv, server_e2e, services};

/// The LangGraph packages of the baseline (`bench/langgraph/BASELINE.md`), pinned to its versions except
/// langgraph itself, 1.2.24 (the differential suite's reference, newer than the baseline's 1.2.22), with
/// langchain 1.5.2 for `create_agent` (which needs langchain-core 1.8 and langgraph-prebuilt 1.1.3).
const LANGGRAPH_PACKAGES: &[&str] = &[
    "langgraph==1.2.24",
    "langgraph-checkpoint==4.3.2",
    "langgraph-checkpoint-sqlite==3.1.2",
    "langgraph-checkpoint-postgres==3.2.0",
    "langgraph-prebuilt==1.1.3",
    "langchain-core==1.8.3",
    "langchain==1.5.2",
    "psycopg[binary]==3.3.9",
];

/// What `cargo xtask bench` was asked to do.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Args {
    /// Only these workloads (all when empty).
    pub(crate) only: Vec<String>,
    /// One checked op per workload.
    pub(crate) quick: bool,
    /// Run or read LangGraph's figures and print the comparison.
    pub(crate) compare: bool,
    /// The server benchmarks instead of the engine's.
    pub(crate) server: bool,
    /// With `server`: weft scaled out, once per number of instances (none: embedded, on SQLite).
    pub(crate) instances: Vec<usize>,
    /// With `server`: weft in its in-memory mode too (no database, as `langgraph dev` runs).
    pub(crate) weft_in_memory: bool,
    /// The server binary with jemalloc instead of the allocator a user's binary gets by default.
    pub(crate) jemalloc: bool,
    /// With `compare`: the engine workloads only.
    pub(crate) no_server: bool,
    /// Render docs/performance.md's results from this file of raw lines.
    pub(crate) render: Option<PathBuf>,
    /// The instruction-count gate instead of timings.
    pub(crate) counts: bool,
    /// With `counts`: store the new counts, with this reason.
    pub(crate) update: Option<String>,
}

/// Parses the arguments after `bench`.
pub(crate) fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args::default();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => parsed.quick = true,
            "--compare" => parsed.compare = true,
            "--server" => parsed.server = true,
            "--weft-in-memory" => parsed.weft_in_memory = true,
            "--jemalloc" => parsed.jemalloc = true,
            "--no-server" => parsed.no_server = true,
            "--counts" => parsed.counts = true,
            "--update" => {
                let reason = args.next().ok_or("--update needs the reason the counts changed")?;
                parsed.update = Some(reason.clone());
            }
            "--render" => {
                parsed.render = Some(args.next().ok_or("--render needs a file of raw lines")?.into());
            }
            "--instances" => {
                let list = args.next().ok_or("--instances needs numbers of instances (0,1,2,3)")?;
                for n in list.split(',').filter(|n| !n.is_empty()) {
                    match n.parse::<usize>() {
                        Ok(n) => parsed.instances.push(n),
                        _ => return Err(format!("--instances: `{n}` is not a number of instances")),
                    }
                }
            }
            "--only" => {
                let names = args.next().ok_or("--only needs a workload name")?;
                parsed.only.extend(names.split(',').filter(|n| !n.is_empty()).map(str::to_owned));
            }
            other => return Err(format!("unknown bench argument `{other}`")),
        }
    }
    Ok(parsed)
}

/// Runs `cargo xtask bench ARGS`.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let args = parse(args)?;
    if let Some(file) = &args.render {
        return render(file);
    }
    if args.counts || args.update.is_some() {
        return bench_counts::run(&build(Profile::Dev)?, args.update.as_deref());
    }
    if args.server {
        return server(&args).1;
    }
    let binary = build(Profile::Release)?;
    if args.compare {
        return compare(&binary, &args);
    }
    let lines = run_weft(&binary, &args.only, args.quick)?;
    save(&lines, "weft.jsonl")
}

/// The smoke run of `cargo xtask ci`: every workload once, with its correctness check, built in the
/// debug profile (a release build of the engine takes minutes on a 2-core machine; the smoke run only
/// checks that each workload runs and gives the right result). It first checks that docs/performance.md
/// still shows what the file of raw lines it names says.
pub(crate) fn smoke() -> Result<(), String> {
    bench_page::check_page(&exec::root())?;
    let binary = build(Profile::Dev)?;
    let mut command = Command::new(&binary);
    command.arg("--quick");
    let outcome = capture(&mut command, false);
    let lines = match &outcome {
        Ok(lines) | Err((lines, _)) => lines,
    };
    for line in lines {
        println!("{}", summary(line));
    }
    outcome.map(drop).map_err(|(_, err)| err)?;
    server_smoke()?;
    counts_gate(&binary)
}

/// The instruction-count gate of the smoke run: required in CI (where `.ci/run` installs valgrind),
/// skipped loudly elsewhere when valgrind is missing.
fn counts_gate(binary: &Path) -> Result<(), String> {
    let has_valgrind = Command::new("valgrind").arg("--version").output().is_ok_and(|o| o.status.success());
    if !has_valgrind && !services::is_ci() {
        println!(
            "!!! the instruction-count gate is SKIPPED: valgrind is not installed (in CI this is a failure)"
        );
        return Ok(());
    }
    bench_counts::run(binary, None)
}

/// `--server`: builds the load client and weft's server of the end-to-end graphs in release mode and runs
/// the server workloads, with `langgraph dev` from the server suite's venv beside weft when comparing;
/// returns the lines (also saved under the target folder), those printed before a failure too, and the
/// outcome.
fn server(args: &Args) -> (Vec<String>, Result<(), String>) {
    if !args.instances.is_empty() {
        return (Vec::new(), server_scaled(args));
    }
    let mut build = vec!["build", "--release", "-p", "weft-bench-server", "-p", "weft-server-e2e"];
    if args.jemalloc {
        build.extend(["--features", "weft-server-e2e/jemalloc"]);
    }
    if let Err(err) = exec::run(&mut exec::cargo(&build)) {
        return (Vec::new(), Err(err));
    }
    let release =
        target_dir(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from), &exec::root()).join("release");
    let mut command = server_command(&release, args.quick, &args.only);
    if args.weft_in_memory {
        command.arg("--weft-in-memory");
    }
    if args.compare {
        match server_e2e::python_env() {
            Ok(python) => {
                let graphs = exec::root().join("tests").join("server_e2e").join("python");
                command
                    .arg("--langgraph-bin")
                    .arg(python.with_file_name("langgraph"))
                    .arg("--graphs")
                    .arg(graphs);
            }
            Err(reason) => println!("langgraph dev cannot be run here ({reason}): weft's figures only"),
        }
    }
    let (lines, outcome) = match capture(&mut command, true) {
        Ok(lines) => (lines, Ok(())),
        Err((lines, err)) => (lines, Err(err)),
    };
    let saved = save(&lines, "server.jsonl");
    (lines, outcome.and(saved))
}

/// `--server --instances N,M,...`: the server workloads against weft scaled out, once per number of
/// instances, each on a fresh database of the local PostgreSQL (dropped after) and a key prefix of its own
/// on the local Redis (deleted after); the load spreads over the instances. `0` is the embedded server on
/// a SQLite file, from the same build, in the same sitting. Each scaled line carries what the run cost
/// PostgreSQL (`pg_cpu_ms_per_run`, `transactions_per_run`); the scale-out goals are judged at the end.
fn server_scaled(args: &Args) -> Result<(), String> {
    crate::services::ensure(crate::services::Policy::Required)?;
    exec::run(&mut exec::cargo(&[
        "build",
        "--release",
        "-p",
        "weft-bench-server",
        "-p",
        "weft-server-e2e",
        "--features",
        "weft-server-e2e/scale",
    ]))?;
    let release =
        target_dir(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from), &exec::root()).join("release");
    let mut all = Vec::new();
    let mut failure = None;
    for &instances in &args.instances {
        let unique = format!("{}_{instances}", std::process::id());
        let database = format!("weft_bench_{unique}");
        let prefix = format!("weft-bench-{unique}:");
        let mut command = server_command(&release, args.quick, &args.only);
        if instances == 0 {
            let outcome = capture(&mut command, true);
            let (Ok(lines) | Err((lines, _))) = &outcome;
            all.extend(lines.iter().cloned());
            if let Err((_, err)) = outcome {
                failure = Some(err);
                break;
            }
            continue;
        }
        // Made only for the scaled configurations (the embedded one runs on a SQLite file), and dropped
        // after each.
        server_e2e::psql(&format!("CREATE DATABASE {database}"))?;
        command
            .arg("--instances")
            .arg(instances.to_string())
            .arg("--database-uri")
            .arg(format!("postgres://postgres@127.0.0.1:5432/{database}"))
            .arg("--redis-uri")
            .arg("redis://127.0.0.1:6379/")
            .arg("--redis-prefix")
            .arg(&prefix);
        let outcome = capture(&mut command, true);
        let dropped = server_e2e::psql(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"));
        let deleted = server_e2e::delete_keys(&prefix);
        match outcome {
            Ok(lines) => all.extend(lines),
            Err((lines, err)) => {
                all.extend(lines);
                failure = Some(err);
                break;
            }
        }
        dropped?;
        deleted?;
    }
    save(&all, "server-scaled.jsonl")?;
    if failure.is_none() {
        for line in scale_goals(&all) {
            println!("{line}");
        }
    }
    failure.map_or(Ok(()), Err)
}

/// The scale-out goals (issue 36) read from the `server_runs_per_s` lines of `lines`, one JSON line each:
/// one scaled instance at least half the embedded server's runs/s, two and three instances each at
/// least 95 % of one, and at most 2 ms of PostgreSQL CPU and 5 transactions per run. A goal whose
/// configurations were not run is not judged.
fn scale_goals(lines: &[String]) -> Vec<String> {
    let mut by_instances: Vec<(usize, crate::json::Json)> = Vec::new();
    for line in lines {
        let Ok(json) = crate::json::parse(line) else { continue };
        if json.text("workload") != Some("server_runs_per_s") || json.get("goal").is_none() {
            continue;
        }
        if let Some(n) = json.num("instances") {
            by_instances.push((n as usize, json));
        }
    }
    let runs = |n: usize| by_instances.iter().find(|(i, _)| *i == n).and_then(|(_, j)| j.num("runs_per_s"));
    let judged = |goal: &str, met: Option<bool>, figures: String| {
        let met = met.map_or("null".to_owned(), |m| m.to_string());
        format!(r#"{{"side":"goal","goal":"{goal}","met":{met},"figures":"{figures}"}}"#)
    };
    let show = |v: Option<f64>| v.map_or("not run".to_owned(), |v| v.to_string());
    let mut out = Vec::new();
    let (embedded, one) = (runs(0), runs(1));
    out.push(judged(
        "1 scaled instance >= 50% of the embedded server's runs/s",
        embedded.zip(one).map(|(e, o)| o >= 0.5 * e),
        format!("embedded {}, 1 instance {}", show(embedded), show(one)),
    ));
    for n in [2, 3] {
        let many = runs(n);
        out.push(judged(
            &format!("{n} instances >= 95% of 1 instance's runs/s"),
            one.zip(many).map(|(o, m)| m >= 0.95 * o),
            format!("1 instance {}, {n} instances {}", show(one), show(many)),
        ));
    }
    let scaled: Vec<&crate::json::Json> =
        by_instances.iter().filter(|(n, _)| *n > 0).map(|(_, j)| j).collect();
    for (key, limit, goal) in [
        ("pg_cpu_ms_per_run", 2.0, "PostgreSQL CPU per run <= 2 ms"),
        ("transactions_per_run", 5.0, "transactions per run <= 5"),
    ] {
        let values: Vec<f64> = scaled.iter().filter_map(|j| j.num(key)).collect();
        let met = (!values.is_empty()).then(|| values.iter().all(|v| *v <= limit));
        out.push(judged(goal, met, format!("{key} {values:?}")));
    }
    out
}

/// The command that runs `weft-bench-server` from `dir` (a cargo profile's folder) against the
/// `weft-server-e2e` beside it.
fn server_command(dir: &Path, quick: bool, only: &[String]) -> Command {
    let exe = |name: &str| dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let mut command = Command::new(exe("weft-bench-server"));
    command.arg("--weft-bin").arg(exe("weft-server-e2e"));
    if quick {
        command.arg("--quick");
    }
    if !only.is_empty() {
        command.arg("--only").arg(only.join(","));
    }
    command
}

/// The server workloads once each against weft, a few checked runs apiece, in the debug build of
/// [`DEV_BUILD`] (what `cargo xtask ci` runs after the engine's smoke run).
fn server_smoke() -> Result<(), String> {
    let debug =
        target_dir(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from), &exec::root()).join("debug");
    capture(&mut server_command(&debug, true, &[]), true).map(drop).map_err(|(_, err)| err)
}

/// One line of the smoke run: the workload and whether it ran and passed its check.
pub(crate) fn summary(line: &str) -> String {
    let name = json_field(line, "workload").unwrap_or("?");
    if let Some(error) = json_field(line, "error") {
        return format!("FAILED   {name}: {error}");
    }
    if json_field(line, "skipped") == Some("true") {
        return format!("skipped  {name}: {}", json_field(line, "note").unwrap_or(""));
    }
    match json_field(line, "median_s").and_then(|v| v.parse::<f64>().ok()) {
        Some(secs) => format!("ok       {name} ({}, checked)", format_seconds(secs)),
        None => format!("?        {line}"),
    }
}

/// The cargo profile the bench is built in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Profile {
    /// `--release`: for figures.
    Release,
    /// The debug profile: for the smoke run.
    Dev,
}

/// The debug build CI's later stages share: the features the test and examples stages resolve
/// (dev-dependencies included, which only a workspace build with examples selects), so that the engine
/// built for them is reused as is. It builds every binary, `weft-bench` and `weft-langgraph-diff` among
/// them.
pub(crate) const DEV_BUILD: &[&str] = &["build", "--workspace", "--all-features", "--bins", "--examples"];

/// Builds the bench binaries and returns the path of `weft-bench`.
fn build(profile: Profile) -> Result<PathBuf, String> {
    let args: &[&str] = match profile {
        Profile::Release => &["build", "--release", "-p", "weft-bench", "--bins"],
        Profile::Dev => DEV_BUILD,
    };
    exec::run(&mut exec::cargo(args))?;
    let folder = if profile == Profile::Release { "release" } else { "debug" };
    let binary = target_dir(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from), &exec::root())
        .join(folder)
        .join(format!("weft-bench{}", std::env::consts::EXE_SUFFIX));
    if binary.is_file() {
        Ok(binary)
    } else {
        Err(format!("the build left no binary at {}", binary.display()))
    }
}

/// Cargo's target folder: `CARGO_TARGET_DIR` (relative to the repository root when relative), else
/// `target` in the root.
pub(crate) fn target_dir(from_env: Option<PathBuf>, root: &Path) -> PathBuf {
    match from_env {
        Some(dir) if dir.is_absolute() => dir,
        Some(dir) => root.join(dir),
        None => root.join("target"),
    }
}

/// Where results and the Python environment go.
fn bench_dir() -> PathBuf {
    target_dir(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from), &exec::root()).join("bench")
}

/// Runs `weft-bench` (each workload in its own process), echoing and returning its JSON lines; fails
/// when a workload failed or its check did.
fn run_weft(binary: &Path, only: &[String], quick: bool) -> Result<Vec<String>, String> {
    let programs = if only.is_empty() { Vec::new() } else { weft_programs(binary)? };
    let command = |names: &[&str]| {
        let mut command = Command::new(binary);
        if let [name] = names {
            // `--only` runs in the program's own process: one process per workload, of the program that
            // holds its group (`weft-bench` itself reports a name it does not know).
            command = Command::new(program_of(&programs, name).unwrap_or(binary));
            command.args(["--only", name]);
        }
        if quick {
            command.arg("--quick");
        }
        command
    };
    if only.is_empty() {
        return capture_echo(&mut command(&[]));
    }
    let mut lines = Vec::new();
    for name in only {
        lines.extend(capture_echo(&mut command(&[name.as_str()]))?);
    }
    Ok(lines)
}

/// Runs `command`, passing its stderr through, and returns its stdout lines (echoed when `echo`); on
/// failure, the lines it printed and the error.
fn capture(command: &mut Command, echo: bool) -> Result<Vec<String>, (Vec<String>, String)> {
    let output = match command.stderr(Stdio::inherit()).output() {
        Ok(output) => output,
        Err(err) => return Err((Vec::new(), format!("cannot start `{}`: {err}", exec::describe(command)))),
    };
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    if echo {
        for line in &lines {
            println!("{line}");
        }
    }
    if output.status.success() {
        Ok(lines)
    } else {
        let err = format!(
            "`{}` failed ({}): see the lines with an `error` field",
            exec::describe(command),
            output.status
        );
        Err((lines, err))
    }
}

/// [`capture`] with echo, keeping only the error on failure.
fn capture_echo(command: &mut Command) -> Result<Vec<String>, String> {
    capture(command, true).map_err(|(_, err)| err)
}

/// Writes `lines` to `target/bench/NAME`.
fn save(lines: &[String], name: &str) -> Result<(), String> {
    let dir = bench_dir();
    std::fs::create_dir_all(&dir).map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    let path = dir.join(name);
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(&path, text).map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    println!("results written to {}", path.display());
    Ok(())
}

/// Rounds of each engine comparison: LangGraph and weft take turns, the first side changing every round.
const ROUNDS: usize = 3;

/// The summed op time each side measures per round, in seconds (the figure is the median over rounds).
const ROUND_MIN_TIME: &str = "1";

/// `--compare`: per workload, LangGraph and weft by turns for [`ROUNDS`] rounds, then (unless
/// `--no-server`, or `--only` names engine workloads alone) the server workloads against `langgraph dev`
/// with weft durable and in memory; every raw line goes to a new file under `bench/results/`, and the
/// table is printed. A row LangGraph's script does not list is run on weft's side only.
fn compare(binary: &Path, args: &Args) -> Result<(), String> {
    let engine = list_workloads(binary)?;
    let programs = weft_programs(binary)?;
    let names: Vec<String> = if args.only.is_empty() {
        engine.clone()
    } else {
        args.only.iter().filter(|name| engine.contains(name)).cloned().collect()
    };
    let python = python_env().map_err(|reason| {
        format!("LangGraph cannot be run here ({reason}); --compare measures both sides on this machine")
    })?;
    ensure_langgraph_database();
    let langgraph = langgraph_workloads(&python)?;
    let mut records = vec![machine_line(&python)];
    let mut failed = None;
    let rounds = if args.quick { 1 } else { ROUNDS };
    for name in &names {
        for round in 0..rounds {
            let sides = if round % 2 == 0 { ["langgraph", "weft"] } else { ["weft", "langgraph"] };
            for side in sides {
                // A row LangGraph's script has no workload for is weft's alone (its LangGraph figure: not run).
                if side == "langgraph" && !langgraph.contains(name) {
                    continue;
                }
                let program = program_of(&programs, name).unwrap_or(binary);
                let lines = match capture(&mut side_command(side, &python, program, name, args.quick), true) {
                    Ok(lines) => lines,
                    Err((lines, err)) => {
                        println!("{side}'s {name} failed: {err}");
                        failed = Some(err);
                        lines
                    }
                };
                for line in lines.iter().filter(|line| line.starts_with('{')) {
                    records.push(bench_page::record(side, round, &now_utc(), line)?);
                }
            }
        }
    }
    let server_names: Vec<String> = args.only.iter().filter(|name| !engine.contains(name)).cloned().collect();
    if !args.no_server && (args.only.is_empty() || !server_names.is_empty()) {
        let allocator = if args.jemalloc { "jemalloc" } else { "system allocator" };
        let server_args = Args {
            only: server_names,
            compare: true,
            weft_in_memory: true,
            quick: args.quick,
            jemalloc: args.jemalloc,
            ..Args::default()
        };
        // The lines of the workloads that ran are kept when one fails (a side that cannot finish one).
        let (lines, outcome) = server(&server_args);
        if let Err(err) = outcome {
            failed = Some(err);
        }
        for line in lines.iter().filter(|line| line.starts_with('{')) {
            let tagged = line.replacen('{', &format!("{{\"weft_allocator\":\"{allocator}\","), 1);
            records.push(bench_page::record("server", 0, &now_utc(), &tagged)?);
        }
    }
    let path = results_file()?;
    let mut text = records.join("\n");
    text.push('\n');
    std::fs::write(&path, text).map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    let parsed = bench_page::read(&path)?;
    println!("\n{}", bench_page::results_table(&bench_page::rows(&parsed)));
    println!("raw lines written to {}", path.display());
    println!("render the page from them: cargo xtask bench --render {}", relative(&path));
    failed.map_or(Ok(()), Err)
}

/// The command that runs one round of `name` on `side`.
fn side_command(side: &str, python: &Path, binary: &Path, name: &str, quick: bool) -> Command {
    let mut command = if side == "langgraph" {
        let mut command = Command::new(python);
        command.arg(langgraph_script());
        command
    } else {
        Command::new(binary)
    };
    command.args(["--only", name]);
    match (quick, side) {
        (true, "weft") => command.arg("--quick"),
        (true, _) => command.args(["--min-time", "0.05", "--min-repeats", "1"]),
        (false, _) => command.args(["--min-time", ROUND_MIN_TIME]),
    };
    command
}

/// The output of `program args` (trimmed), or empty.
fn output_of(program: &Path, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .current_dir(exec::root())
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().replace(['"', '\\'], "'"))
        .unwrap_or_default()
}

/// The first raw line: when, where and what was compared.
fn machine_line(python: &Path) -> String {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            let line = info.lines().find(|line| line.starts_with("model name"))?.to_owned();
            Some(line.split(':').nth(1)?.trim().replace(['"', '\\'], "'"))
        })
        .unwrap_or_else(|| "unknown".to_owned());
    let mut commit = output_of(Path::new("git"), &["rev-parse", "--short", "HEAD"]);
    if !output_of(Path::new("git"), &["status", "--porcelain", "--untracked-files=no"]).is_empty() {
        // The working tree differs from the commit: the figures are of uncommitted code.
        commit.push_str(" with uncommitted changes");
    }
    let langgraph =
        output_of(python, &["-c", "import importlib.metadata as m; print(m.version('langgraph'))"]);
    format!(
        "{{\"side\":\"machine\",\"at\":\"{}\",\"cpus\":{cpus},\"cpu_model\":\"{cpu_model}\",\"commit\":\"{commit}\",\"langgraph\":\"{langgraph}\"}}",
        now_utc()
    )
}

/// A new file for a comparison's raw lines: `bench/results/DAY/compare-HHMM.jsonl` (UTC).
fn results_file() -> Result<PathBuf, String> {
    let now = now_utc();
    let dir = exec::root().join("bench").join("results").join(&now[..10]);
    std::fs::create_dir_all(&dir).map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    let stem = format!("compare-{}{}", &now[11..13], &now[14..16]);
    let mut path = dir.join(format!("{stem}.jsonl"));
    let mut n = 2;
    while path.exists() {
        path = dir.join(format!("{stem}-{n}.jsonl"));
        n += 1;
    }
    Ok(path)
}

/// `path` relative to the repository root, with `/` separators.
fn relative(path: &Path) -> String {
    let root = exec::root();
    let rel = path.strip_prefix(&root).unwrap_or(path);
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// `--render FILE`: writes docs/performance.md's generated part from a file of raw lines (`none`: the
/// part that says no comparison was rendered yet).
fn render(file: &Path) -> Result<(), String> {
    let root = exec::root();
    let (source, records) = if file == Path::new(bench_page::NONE) {
        (bench_page::NONE.to_owned(), Vec::new())
    } else {
        let absolute = if file.is_absolute() { file.to_path_buf() } else { root.join(file) };
        (relative(&absolute), bench_page::read(&absolute)?)
    };
    let page_path = root.join("docs").join("performance.md");
    let page = std::fs::read_to_string(&page_path)
        .map_err(|err| format!("cannot read {}: {err}", page_path.display()))?;
    let new = bench_page::replace_generated(&page, &bench_page::generated(&source, &records))?;
    std::fs::write(&page_path, new).map_err(|err| format!("cannot write {}: {err}", page_path.display()))?;
    println!("{} rendered from {source}", page_path.display());
    Ok(())
}

/// Today, in UTC: `2026-11-28`.
pub(crate) fn today() -> String {
    now_utc()[..10].to_owned()
}

/// Now, in UTC, to the second: `2026-11-28T18:30:05Z`.
fn now_utc() -> String {
    let now = jiff::Timestamp::now();
    jiff::Timestamp::from_second(now.as_second()).unwrap_or(now).to_string()
}

/// LangGraph's PostgreSQL workloads use their own database (`lgbench` on the local server, unless
/// `LANGGRAPH_BENCH_PG_URL` names another): made here when missing, so that its tables never meet weft's.
fn ensure_langgraph_database() {
    if std::env::var_os("LANGGRAPH_BENCH_PG_URL").is_some() {
        return;
    }
    let made = Command::new("createdb").args(["-h", "127.0.0.1", "-U", "postgres", "lgbench"]).output();
    match made {
        Ok(out) if out.status.success() => {
            println!("made database lgbench for LangGraph's PostgreSQL workloads")
        }
        Ok(out) if String::from_utf8_lossy(&out.stderr).contains("already exists") => {}
        Ok(out) => println!(
            "cannot make database lgbench (LangGraph's PostgreSQL workloads will be skipped): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(err) => {
            println!("cannot run createdb (LangGraph's PostgreSQL workloads will be skipped): {err}");
        }
    }
}

/// LangGraph's side of the engine workloads.
fn langgraph_script() -> PathBuf {
    exec::root().join("bench").join("langgraph").join("langgraph_bench.py")
}

/// The workloads LangGraph's script runs, by its `--list`.
fn langgraph_workloads(python: &Path) -> Result<Vec<String>, String> {
    let output = Command::new(python)
        .arg(langgraph_script())
        .arg("--list")
        .output()
        .map_err(|err| format!("cannot list LangGraph's workloads: {err}"))?;
    if !output.status.success() {
        return Err(format!("LangGraph's script cannot list its workloads ({})", output.status));
    }
    Ok(compared_names(&String::from_utf8_lossy(&output.stdout)))
}

/// The names `weft-bench --list` prints that LangGraph's script runs too (those marked `weft only`, which
/// have no LangGraph side, left out).
fn list_workloads(binary: &Path) -> Result<Vec<String>, String> {
    let output =
        Command::new(binary).arg("--list").output().map_err(|err| format!("cannot list workloads: {err}"))?;
    Ok(compared_names(&String::from_utf8_lossy(&output.stdout)))
}

/// Each workload `weft-bench --list` prints, with the path of the program that runs it alone (named second
/// on its line, built beside `weft-bench`).
fn weft_programs(binary: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let output =
        Command::new(binary).arg("--list").output().map_err(|err| format!("cannot list workloads: {err}"))?;
    let listed = listed_programs(&String::from_utf8_lossy(&output.stdout));
    Ok(listed
        .into_iter()
        .map(|(name, program)| {
            let path = binary.with_file_name(format!("{program}{}", std::env::consts::EXE_SUFFIX));
            (name, path)
        })
        .collect())
}

/// The (workload, program) pairs of a `weft-bench --list` output: the name, then the program.
fn listed_programs(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            Some((words.next()?.to_owned(), words.next().filter(|w| !w.starts_with('('))?.to_owned()))
        })
        .collect()
}

/// The program that runs `name` alone, if the listing has it.
fn program_of<'a>(programs: &'a [(String, PathBuf)], name: &str) -> Option<&'a Path> {
    programs.iter().find(|(listed, _)| listed == name).map(|(_, path)| path.as_path())
}

/// The names of a `--list` output `text` (weft-bench's or LangGraph's script's: a name first on each line),
/// but those marked `weft only`.
fn compared_names(text: &str) -> Vec<String> {
    text.lines()
        .filter(|line| !line.contains("weft only"))
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// A Python with LangGraph installed, in `target/bench/venv` (made and filled on first use), or why
/// there is none. The differential suite (`cargo xtask langgraph-diff`) runs in it too. A change to the
/// pins refills it (the pins are its stamp), so a venv made under older pins does not pass for current.
pub(crate) fn python_env() -> Result<PathBuf, String> {
    pyenv::ensure(&pyenv::Venv {
        dir: bench_dir().join("venv"),
        install: LANGGRAPH_PACKAGES,
        probe: "import langgraph.graph, langgraph.checkpoint.sqlite, langgraph.checkpoint.postgres, langchain.agents",
        stamp: Some(LANGGRAPH_PACKAGES.join("\n")),
        what: "LangGraph",
    })
}

/// The raw JSON token of a top-level field of a one-line JSON object: a number, `true`/`false`/`null`,
/// or a string's content (without quotes; names and notes here carry no escapes).
pub(crate) fn json_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let quoted = format!("\"{key}\"");
    let mut rest = &line[line.find(&quoted)? + quoted.len()..];
    rest = rest.trim_start().strip_prefix(':')?.trim_start();
    if let Some(string) = rest.strip_prefix('"') {
        return string.find('"').map(|end| &string[..end]);
    }
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim())
}

/// `37.25 ms`, `209.0 µs`, `1.780 s`.
pub(crate) fn format_seconds(secs: f64) -> String {
    if secs >= 1.0 {
        format!("{secs:.3} s")
    } else if secs >= 1e-3 {
        format!("{:.2} ms", secs * 1e3)
    } else {
        format!("{:.1} µs", secs * 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn parses_only_quick_and_compare() {
        let args =
            parse(&strings(&["--only", "chain100,loop1000", "--quick", "--only", "react10", "--compare"]));
        assert_eq!(
            args.unwrap(),
            Args {
                only: strings(&["chain100", "loop1000", "react10"]),
                quick: true,
                compare: true,
                server: false,
                instances: Vec::new(),
                weft_in_memory: false,
                jemalloc: false,
                no_server: false,
                render: None,
                counts: false,
                update: None,
            }
        );
        let render = parse(&strings(&["--render", "bench/results/x.jsonl", "--no-server", "--jemalloc"]));
        let render = render.unwrap();
        assert_eq!(render.render, Some(PathBuf::from("bench/results/x.jsonl")));
        assert!(render.no_server && render.jemalloc);
        assert_eq!(parse(&strings(&["--render"])).unwrap_err(), "--render needs a file of raw lines");
        let update = parse(&strings(&["--counts", "--update", "the save path does less"])).unwrap();
        assert!(update.counts);
        assert_eq!(update.update.as_deref(), Some("the save path does less"));
        assert!(parse(&strings(&["--update"])).unwrap_err().contains("reason"));
        assert!(parse(&strings(&["--server", "--weft-in-memory"])).unwrap().weft_in_memory);
        assert!(parse(&strings(&["--server", "--compare"])).unwrap().server);
        assert_eq!(parse(&strings(&["--server", "--instances", "1,2,3"])).unwrap().instances, [1, 2, 3]);
        assert_eq!(parse(&strings(&["--server", "--instances", "0,1"])).unwrap().instances, [0, 1]);
        assert!(parse(&strings(&["--instances", "x"])).unwrap_err().contains("not a number of instances"));
    }

    #[test]
    fn an_unknown_argument_is_an_error_naming_it() {
        assert_eq!(parse(&strings(&["--fast"])).unwrap_err(), "unknown bench argument `--fast`");
        assert_eq!(parse(&strings(&["--only"])).unwrap_err(), "--only needs a workload name");
    }

    #[test]
    fn reads_fields_of_serde_and_python_json_lines() {
        let weft = r#"{"workload":"chain100","median_s":0.000209,"unit":"superstep","quick":true}"#;
        let python = r#"{"workload": "chain100", "median_s": 0.037247, "min_s": 0.027963}"#;
        assert_eq!(json_field(weft, "workload"), Some("chain100"));
        assert_eq!(json_field(weft, "median_s"), Some("0.000209"));
        assert_eq!(json_field(weft, "quick"), Some("true"));
        assert_eq!(json_field(python, "median_s"), Some("0.037247"));
        assert_eq!(json_field(python, "min_s"), Some("0.027963"));
        assert_eq!(json_field(python, "max_s"), None);
    }

    #[test]
    fn comparisons_leave_out_the_workloads_only_weft_runs() {
        let listed =
            "loop1000\nchain100_async_single  (supplementary)\nserver_run_wait  (supplementary, weft only)\n";
        assert_eq!(compared_names(listed), ["loop1000", "chain100_async_single"]);
        // LangGraph's script lists its names the same way, with notes after them.
        let listed = "startup  (fresh process: import, build, compile, run a 3-node graph)\nloop1000\n\
                      loop1000_sqlite_syncoff  (supplementary)\n";
        assert_eq!(compared_names(listed), ["startup", "loop1000", "loop1000_sqlite_syncoff"]);
    }

    #[test]
    fn each_workload_runs_in_the_program_its_listing_names() {
        let listed = "loop1000  weft-bench-engine\nloop1000_sqlite_dsync  weft-bench-sqlite  (supplementary)\n\
                      server_run_wait  weft-bench-run-wait  (supplementary, weft only)\nstray  (supplementary)\n";
        let pairs = listed_programs(listed);
        let names: Vec<(&str, &str)> = pairs.iter().map(|(n, p)| (n.as_str(), p.as_str())).collect();
        assert_eq!(
            names,
            [
                ("loop1000", "weft-bench-engine"),
                ("loop1000_sqlite_dsync", "weft-bench-sqlite"),
                ("server_run_wait", "weft-bench-run-wait")
            ]
        );
        let paths: Vec<(String, PathBuf)> =
            pairs.into_iter().map(|(n, p)| (n, Path::new("/t/release").join(p))).collect();
        assert_eq!(
            program_of(&paths, "loop1000_sqlite_dsync"),
            Some(Path::new("/t/release/weft-bench-sqlite"))
        );
        assert_eq!(program_of(&paths, "stray"), None);
    }

    #[test]
    fn now_is_utc_to_the_second() {
        let now = now_utc();
        assert_eq!((now.len(), &now[4..5], &now[10..11], &now[19..]), (20, "-", "T", "Z"));
    }

    #[test]
    fn the_smoke_summary_says_ok_skipped_or_failed() {
        assert_eq!(
            summary(r#"{"workload":"loop1000","median_s":0.0155,"quick":true}"#),
            "ok       loop1000 (15.50 ms, checked)"
        );
        assert_eq!(
            summary(
                r#"{"workload":"loop1000_sqlite","skipped":true,"note":"skipped: backend not built yet"}"#
            ),
            "skipped  loop1000_sqlite: skipped: backend not built yet"
        );
        assert_eq!(
            summary(r#"{"workload":"react10","error":"correctness check failed: 21 messages"}"#),
            "FAILED   react10: correctness check failed: 21 messages"
        );
    }

    #[test]
    fn the_target_dir_follows_cargo_target_dir() {
        let root = Path::new("/repo");
        assert_eq!(target_dir(None, root), PathBuf::from("/repo/target"));
        assert_eq!(target_dir(Some(PathBuf::from("/t/x")), root), PathBuf::from("/t/x"));
        assert_eq!(target_dir(Some(PathBuf::from("out")), root), PathBuf::from("/repo/out"));
    }

    #[test]
    fn scale_goals_read_the_runs_per_s_lines_of_each_configuration() {
        let line = |n: usize, runs: f64, cpu: f64, tx: f64| {
            format!(
                r#"{{"workload":"server_runs_per_s","goal":"g","instances":{n},"runs_per_s":{runs},"pg_cpu_ms_per_run":{cpu},"transactions_per_run":{tx}}}"#
            )
        };
        let lines = vec![line(0, 400.0, 0.0, 0.0), line(1, 210.0, 1.5, 5.0), line(2, 190.0, 1.9, 4.0)];
        let goals = scale_goals(&lines);
        assert_eq!(goals.len(), 5);
        assert!(goals[0].contains(r#""met":true"#), "{}", goals[0]);
        assert!(goals[1].contains(r#""met":false"#), "190 < 95 % of 210: {}", goals[1]);
        assert!(goals[2].contains(r#""met":null"#), "3 instances not run: {}", goals[2]);
        assert!(goals[3].contains(r#""met":true"#), "{}", goals[3]);
        assert!(goals[4].contains(r#""met":true"#), "{}", goals[4]);
        let slow = scale_goals(&[line(1, 100.0, 2.5, 6.0)]);
        assert!(slow[3].contains(r#""met":false"#) && slow[4].contains(r#""met":false"#));
        assert!(slow[0].contains(r#""met":null"#), "no embedded line: {}", slow[0]);
    }
}
