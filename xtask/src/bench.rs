//! `cargo xtask bench`: builds `weft-bench` and runs every workload in its own process; `--compare` runs
//! LangGraph's script beside it (in a virtual environment under the target folder) or, without Python
//! or network, reads the stored LangGraph baseline, and prints the two side by side. `--server` runs the
//! server benchmarks instead (`bench/server`: weft-server, and `langgraph dev` with `--compare`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{exec, pyenv, server_e2e};

/// The LangGraph packages of the baseline (`bench/langgraph/BASELINE.md`), pinned to its versions, with
/// langchain 1.5.2 for `create_agent` (which needs langchain-core 1.8 and langgraph-prebuilt 1.1.3).
const LANGGRAPH_PACKAGES: &[&str] = &[
    "langgraph==1.2.22",
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
            "--instances" => {
                let list = args.next().ok_or("--instances needs numbers of instances (1,2,3)")?;
                for n in list.split(',').filter(|n| !n.is_empty()) {
                    match n.parse::<usize>() {
                        Ok(n) if n > 0 => parsed.instances.push(n),
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
    if args.server {
        return server(&args);
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
/// checks that each workload runs and gives the right result).
pub(crate) fn smoke() -> Result<(), String> {
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
    server_smoke()
}

/// `--server`: builds the load client and weft's server of the end-to-end graphs in release mode and runs
/// the server workloads, with `langgraph dev` from the server suite's venv beside weft when comparing.
fn server(args: &Args) -> Result<(), String> {
    if !args.instances.is_empty() {
        return server_scaled(args);
    }
    exec::run(&mut exec::cargo(&["build", "--release", "-p", "weft-bench-server", "-p", "weft-server-e2e"]))?;
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
    let outcome = capture(&mut command, true);
    let lines = match &outcome {
        Ok(lines) | Err((lines, _)) => lines,
    };
    save(lines, "server.jsonl")?;
    outcome.map(drop).map_err(|(_, err)| err)
}

/// `--server --instances N,M,...`: the server workloads against weft scaled out, once per number of
/// instances, each on a fresh database of the local PostgreSQL (dropped after) and a key prefix of its own
/// on the local Redis (deleted after); the load spreads over the instances.
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
        server_e2e::psql(&format!("CREATE DATABASE {database}"))?;
        let mut command = server_command(&release, args.quick, &args.only);
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
    failure.map_or(Ok(()), Err)
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
    let command = |names: &[&str]| {
        let mut command = Command::new(binary);
        if let [name] = names {
            // `--only` runs in the binary's own process: one process per workload.
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

/// The name of LangGraph's counterpart of a weft workload.
pub(crate) fn langgraph_name(weft: &str) -> &str {
    if weft == "startup" { "import_langgraph_graph" } else { weft }
}

/// `--compare`: LangGraph and weft per workload, back to back, then the table.
fn compare(binary: &Path, args: &Args) -> Result<(), String> {
    let names = if args.only.is_empty() { list_workloads(binary)? } else { args.only.clone() };
    let python = match python_env() {
        Ok(python) => Some(python),
        Err(reason) => {
            println!("LangGraph cannot be run here ({reason}); comparing with the stored baseline");
            println!("  {}", baseline_path().display());
            None
        }
    };
    if python.is_some() {
        ensure_langgraph_database();
    }
    let script = exec::root().join("bench").join("langgraph").join("langgraph_bench.py");
    let mut langgraph_lines = Vec::new();
    let mut weft_lines = Vec::new();
    let mut failed = None;
    for name in &names {
        if let Some(python) = &python {
            let mut command = Command::new(python);
            command.arg(&script).args(["--only", langgraph_name(name)]);
            if args.quick {
                command.args(["--min-time", "0.2", "--min-repeats", "3"]);
            }
            match capture_echo(&mut command) {
                Ok(lines) => langgraph_lines.extend(lines),
                Err(err) => println!("LangGraph's {name} failed: {err}"),
            }
        }
        let mut command = Command::new(binary);
        command.args(["--only", name]);
        if args.quick {
            command.arg("--quick");
        }
        match capture_echo(&mut command) {
            Ok(lines) => weft_lines.extend(lines),
            Err(err) => failed = Some(err),
        }
    }
    let (source, langgraph_lines) = match python {
        Some(_) => ("LangGraph measured now, on this machine", langgraph_lines),
        None => ("LangGraph from the stored baseline (reference machine)", read_baseline()?),
    };
    save(&weft_lines, "weft.jsonl")?;
    if python.is_some() {
        save(&langgraph_lines, "langgraph.jsonl")?;
    }
    println!("\n{source}; ratio = LangGraph median / weft median\n");
    print!("{}", table(&names, &langgraph_lines, &weft_lines));
    failed.map_or(Ok(()), Err)
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

/// The names `weft-bench --list` prints.
fn list_workloads(binary: &Path) -> Result<Vec<String>, String> {
    let output =
        Command::new(binary).arg("--list").output().map_err(|err| format!("cannot list workloads: {err}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    Ok(text.lines().filter_map(|line| line.split_whitespace().next()).map(str::to_owned).collect())
}

fn baseline_path() -> PathBuf {
    exec::root().join("bench").join("langgraph").join("langgraph_baseline.jsonl")
}

fn read_baseline() -> Result<Vec<String>, String> {
    let path = baseline_path();
    let text =
        std::fs::read_to_string(&path).map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    Ok(text.lines().map(str::to_owned).collect())
}

/// A Python with LangGraph installed, in `target/bench/venv` (made and filled on first use), or why
/// there is none. The differential suite (`cargo xtask langgraph-diff`) runs in it too.
pub(crate) fn python_env() -> Result<PathBuf, String> {
    pyenv::ensure(&pyenv::Venv {
        dir: bench_dir().join("venv"),
        install: LANGGRAPH_PACKAGES,
        probe: "import langgraph.graph, langgraph.checkpoint.sqlite, langgraph.checkpoint.postgres, langchain.agents",
        stamp: None,
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

/// The line of `workload` among `lines`.
fn line_of<'a>(lines: &'a [String], workload: &str) -> Option<&'a str> {
    lines.iter().map(String::as_str).find(|line| json_field(line, "workload") == Some(workload))
}

/// What a line says about the op's median: the figure, or why there is none.
fn median_of(line: Option<&str>) -> Result<f64, String> {
    let Some(line) = line else { return Err("not run".to_owned()) };
    if json_field(line, "skipped") == Some("true") {
        return Err("skipped".to_owned());
    }
    if json_field(line, "error").is_some() {
        return Err("FAILED".to_owned());
    }
    json_field(line, "median_s").and_then(|v| v.parse().ok()).ok_or_else(|| "no median".to_owned())
}

/// The comparison table: workload, LangGraph median, weft median, ratio.
pub(crate) fn table(names: &[String], langgraph: &[String], weft: &[String]) -> String {
    let mut out =
        format!("{:<32} {:>16} {:>14} {:>10}\n", "workload", "LangGraph median", "weft median", "ratio");
    for name in names {
        let theirs = median_of(line_of(langgraph, langgraph_name(name)));
        let ours = median_of(line_of(weft, name));
        let cell = |m: &Result<f64, String>| m.as_ref().map_or_else(Clone::clone, |s| format_seconds(*s));
        let ratio = match (&theirs, &ours) {
            (Ok(t), Ok(o)) if *o > 0.0 => format!("{:.0}x", t / o),
            _ => "-".to_owned(),
        };
        out.push_str(&format!("{name:<32} {:>16} {:>14} {ratio:>10}\n", cell(&theirs), cell(&ours)));
    }
    out
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
            }
        );
        assert!(parse(&strings(&["--server", "--weft-in-memory"])).unwrap().weft_in_memory);
        assert!(parse(&strings(&["--server", "--compare"])).unwrap().server);
        assert_eq!(parse(&strings(&["--server", "--instances", "1,2,3"])).unwrap().instances, [1, 2, 3]);
        assert!(parse(&strings(&["--instances", "0"])).unwrap_err().contains("not a number of instances"));
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
    fn the_table_divides_langgraph_by_weft_and_says_why_a_figure_is_missing() {
        let langgraph = strings(&[
            r#"{"workload": "chain100", "median_s": 0.0372}"#,
            r#"{"workload": "import_langgraph_graph", "median_s": 1.42}"#,
            r#"{"workload": "loop1000_sqlite", "median_s": 1.78}"#,
        ]);
        let weft = strings(&[
            r#"{"workload":"chain100","median_s":0.000186}"#,
            r#"{"workload":"startup","median_s":0.001}"#,
            r#"{"workload":"loop1000_sqlite","skipped":true,"note":"skipped: backend not built yet"}"#,
            r#"{"workload":"react10","error":"correctness check failed"}"#,
        ]);
        let names = strings(&["chain100", "startup", "loop1000_sqlite", "react10"]);
        let table = table(&names, &langgraph, &weft);
        let rows: Vec<Vec<&str>> = table.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(rows[0], ["chain100", "37.20", "ms", "186.0", "µs", "200x"]);
        assert_eq!(rows[1], ["startup", "1.420", "s", "1.00", "ms", "1420x"]);
        assert_eq!(rows[2], ["loop1000_sqlite", "1.780", "s", "skipped", "-"]);
        assert_eq!(rows[3], ["react10", "not", "run", "FAILED", "-"]);
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
    fn the_stored_baseline_has_every_required_workload() {
        let lines = read_baseline().unwrap();
        for name in ["chain100", "loop1000", "fanout1000", "react10", "throughput_chain100_x100"] {
            assert!(median_of(line_of(&lines, name)).is_ok(), "{name}");
        }
        assert!(median_of(line_of(&lines, langgraph_name("startup"))).is_ok());
    }
}
