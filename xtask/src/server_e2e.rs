//! `cargo xtask server-e2e [TEST...]`: the end-to-end suite of `tests/server_e2e/`. Builds the weft half
//! (`weft-server-e2e`, the suite's graphs served by weft-server), makes the pinned Python environment
//! (`langgraph-sdk`, the official MCP and A2A clients, and `langgraph-cli[inmem]` for the reference server)
//! under `target/server-e2e/venv`, and runs `python/run.py`: every test with the official SDK against weft
//! and against `langgraph dev`, side by side. The suite's JS SDK check (`tests/server_e2e/js`, node with a pinned
//! `@langchain/langgraph-sdk`) is installed into `target/server-e2e/js` and runs as one of its tests.
//!
//! `cargo xtask server-e2e --instances N [TEST...]` (N > 1) runs the weft half as N instances of one
//! scaled-out server (the binary built with `scale`) on the machine's PostgreSQL and Redis: a fresh
//! database per pair of servers (made with `psql`, dropped after) and a Redis key prefix per run (its keys
//! deleted after); the suite's clients send each request to the next instance in turn.
//!
//! With `--pgbouncer` too, the instances reach PostgreSQL through PgBouncer in transaction mode
//! ([`pgbouncer`]), started for the suite.
//!
//! `cargo xtask server-e2e --in-memory [TEST...]` runs the weft half in its in-memory mode (no database,
//! as `langgraph dev` runs) instead of on a SQLite database; CI's `server-e2e-memory` stage runs it against
//! weft alone (`langgraph dev` ran the same tests in the `server-e2e` stage).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::{bench, exec, nodeenv, pgbouncer, pyenv, services};

/// How long the suite may run (both servers, every test) before it counts as hung.
const LIMIT: Duration = Duration::from_secs(900);

/// How the weft half is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Build {
    /// Only the suite's package.
    Alone,
    /// The debug build CI's later stages share ([`bench::DEV_BUILD`]), which makes the binary too.
    Shared,
}

fn suite_dir() -> PathBuf {
    exec::root().join("tests").join("server_e2e").join("python")
}

/// The suite's Python: the pinned requirements in `target/server-e2e/venv` (`langgraph dev` beside it).
pub(crate) fn python_env() -> Result<PathBuf, String> {
    let requirements = suite_dir().join("requirements.txt");
    let stamp = std::fs::read_to_string(&requirements)
        .map_err(|err| format!("cannot read {}: {err}", requirements.display()))?;
    let target = bench::target_dir(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from), &exec::root());
    let requirements = requirements.to_string_lossy().into_owned();
    pyenv::ensure(&pyenv::Venv {
        dir: target.join("server-e2e").join("venv"),
        install: &["-r", &requirements],
        probe: "import langgraph_sdk, langgraph_api, langgraph_runtime_inmem, mcp, a2a",
        stamp: Some(stamp),
        what: "langgraph-sdk, mcp, a2a-sdk and langgraph-cli[inmem]",
    })
}

/// The JS SDK check installed under the target folder, or why it cannot be (a failure in CI; elsewhere the
/// check is left out with a loud message).
fn js_env() -> Result<Option<PathBuf>, String> {
    let source = exec::root().join("tests").join("server_e2e").join("js");
    let target = bench::target_dir(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from), &exec::root());
    match nodeenv::ensure(&source, &target.join("server-e2e").join("js")) {
        Ok(dir) => Ok(Some(dir)),
        Err(reason) => {
            let why = format!("it cannot be installed ({reason})");
            weft_testenv::require("the JS SDK check", &why, "see xtask/src/nodeenv.rs")?;
            Ok(None)
        }
    }
}

/// `cargo xtask server-e2e [--instances N | --in-memory] [TEST...]`.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let mut instances = 1;
    let mut in_memory = false;
    let mut pooled = false;
    let mut tests = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--instances" => {
                instances = rest
                    .next()
                    .and_then(|n| n.parse::<u32>().ok())
                    .filter(|n| *n >= 1)
                    .ok_or("--instances needs a number of at least 1")?;
            }
            "--in-memory" => in_memory = true,
            "--pgbouncer" => pooled = true,
            flag if flag.starts_with('-') => return Err(format!("unknown server-e2e argument `{flag}`")),
            test => tests.push(test.to_owned()),
        }
    }
    if pooled && instances == 1 {
        return Err("--pgbouncer goes with --instances N (a scaled-out server)".to_owned());
    }
    match (instances, in_memory) {
        (1, true) => suite(&tests, Build::Alone, 1, &[], Mode::InMemory),
        (1, false) => run_with(&tests, Build::Alone),
        (_, false) => run_scaled(&tests, Build::Alone, instances, pooled),
        (_, true) => Err("--in-memory is one process's mode: it does not go with --instances".to_owned()),
    }
}

/// Runs the suite with weft as `instances` instances of one scaled-out server, on a fresh PostgreSQL
/// database per pair of servers and a Redis key prefix of its own, removed afterwards; `pooled`: through
/// PgBouncer in transaction mode, weft alone.
pub(crate) fn run_scaled(tests: &[String], build: Build, instances: u32, pooled: bool) -> Result<(), String> {
    services::ensure(services::Policy::Required)?;
    let pooler = if pooled { Some(pgbouncer::start()?) } else { None };
    let unique = format!(
        "{}_{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis())
    );
    let databases = [format!("weft_e2e_{unique}"), format!("weft_e2e_{unique}_auth")];
    let prefix = format!("weft-e2e-{unique}:");
    for database in &databases {
        psql(&format!("CREATE DATABASE {database}"))?;
    }
    let uri = |database: &str| match &pooler {
        Some(pooler) => pooler.uri(database),
        None => format!("postgres://postgres@127.0.0.1:5432/{database}"),
    };
    let env = [
        ("DATABASE_URI", uri(&databases[0])),
        ("DATABASE_URI_AUTH", uri(&databases[1])),
        ("DATABASE_POOL_MODE", pool_mode(pooled).to_owned()),
        ("REDIS_URI", "redis://127.0.0.1:6379/".to_owned()),
        ("REDIS_KEY_PREFIX", prefix.clone()),
    ];
    // Behind the pooler weft runs alone: `langgraph dev` keeps its own store and ran the same tests
    // beside weft in the `server-e2e` and `server-e2e-scaled` stages.
    let mode = if pooled { Mode::DurableAlone } else { Mode::Durable };
    let ran = suite(tests, build, instances, &env, mode);
    let mut cleaned = Vec::new();
    for database in &databases {
        cleaned.push(psql(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)")));
    }
    cleaned.push(delete_keys(&prefix));
    ran?;
    cleaned.into_iter().collect()
}

/// What the servers' `DATABASE_POOL_MODE` says: `transaction` behind PgBouncer, else `session`.
fn pool_mode(pooled: bool) -> &'static str {
    if pooled { "transaction" } else { "session" }
}

pub(crate) fn psql(sql: &str) -> Result<(), String> {
    exec::run(Command::new("psql").args([
        "-h",
        "127.0.0.1",
        "-U",
        "postgres",
        "-d",
        "postgres",
        "-q",
        "-c",
        sql,
    ]))
}

/// Deletes the keys under `prefix` (the streams of the runs, expiring anyway).
pub(crate) fn delete_keys(prefix: &str) -> Result<(), String> {
    let script = "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end return 0";
    let output = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", "6379", "EVAL", script, "0", &format!("{prefix}*")])
        .output()
        .map_err(|err| format!("cannot run redis-cli: {err}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!("redis-cli could not delete the keys under {prefix}"))
    }
}

/// `cargo xtask server-chaos [--instances N] [--runs N] [--pgbouncer]`: the chaos test of a scaled-out server
/// (`weft-bench-server --chaos`, see `bench/server/src/chaos.rs`) on a fresh database of the local
/// PostgreSQL, dropped after, and a private Redis the test starts itself.
pub(crate) fn chaos(args: &[String], build: Build) -> Result<(), String> {
    let mut extra = Vec::new();
    let mut pooled = false;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--instances" | "--runs" => {
                let value = rest.next().ok_or_else(|| format!("{arg} needs a number"))?;
                extra.push(arg.clone());
                extra.push(value.clone());
            }
            "--pgbouncer" => pooled = true,
            other => return Err(format!("unknown server-chaos argument `{other}`")),
        }
    }
    bench_server_test("--chaos", &extra, build, CHAOS_LIMIT, pooled)
}

/// `cargo xtask server-soak [--instances N,N] [--rounds N] [--runs N]`: the soak test of a scaled-out
/// server (`weft-bench-server --soak`, see `bench/server/src/soak.rs`): `runs` streamed runs (2,000) over
/// 2 instances and again over 3 (`--instances`), the pair repeated `rounds` times (5), each sitting on a
/// fresh database of the local PostgreSQL (dropped after) and a private Redis. Any run that does not end
/// within its bound, or does not end `success`, fails it, naming the run.
pub(crate) fn soak(args: &[String], build: Build) -> Result<(), String> {
    let mut instances = vec![2, 3];
    let mut rounds = 5;
    let mut runs = 2000;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let value = rest.next().ok_or_else(|| format!("{arg} needs a value"));
        let number = |text: &str| text.parse::<u32>().ok().filter(|n| *n >= 1);
        match arg.as_str() {
            "--instances" => {
                instances = value?
                    .split(',')
                    .map(|n| number(n).filter(|n| *n >= 2))
                    .collect::<Option<Vec<_>>>()
                    .ok_or("--instances needs numbers of at least 2, comma-separated")?;
            }
            "--rounds" => rounds = value.and_then(|v| number(v).ok_or_else(|| format!("{arg}: a number")))?,
            "--runs" => runs = value.and_then(|v| number(v).ok_or_else(|| format!("{arg}: a number")))?,
            other => return Err(format!("unknown server-soak argument `{other}`")),
        }
    }
    let started = std::time::Instant::now();
    for round in 1..=rounds {
        for n in &instances {
            eprintln!("server-soak: round {round} of {rounds}, {runs} runs over {n} instances");
            let extra = ["--instances".to_owned(), n.to_string(), "--runs".to_owned(), runs.to_string()];
            // Built once: later sittings find the build fresh.
            bench_server_test("--soak", &extra, build, SOAK_LIMIT, false)?;
        }
    }
    eprintln!("server-soak: {rounds} rounds passed in {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// How long one sitting of the soak test may run before it counts as hung.
const SOAK_LIMIT: Duration = Duration::from_secs(600);

/// Builds `weft-bench-server` and `weft-server-e2e` (with `scale`) and runs `weft-bench-server flag
/// extra...` against a fresh database of the local PostgreSQL, dropped after; `pooled`: reached through
/// PgBouncer in transaction mode.
fn bench_server_test(
    flag: &str,
    extra: &[String],
    build: Build,
    limit: Duration,
    pooled: bool,
) -> Result<(), String> {
    services::ensure(services::Policy::Required)?;
    let pooler = if pooled { Some(pgbouncer::start()?) } else { None };
    let build_args: &[&str] = match build {
        Build::Alone => &[
            "build",
            "-p",
            "weft-bench-server",
            "-p",
            "weft-server-e2e",
            "--features",
            "weft-server-e2e/scale",
        ],
        Build::Shared => bench::DEV_BUILD,
    };
    exec::run(&mut exec::cargo(build_args))?;
    let debug = bench::target_dir(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from), &exec::root())
        .join("debug");
    let exe = |name: &str| debug.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let database = format!(
        "weft_{}_{}_{}",
        flag.trim_start_matches('-'),
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis())
    );
    psql(&format!("CREATE DATABASE {database}"))?;
    let ran = exec::run_with_limit(
        Command::new(exe("weft-bench-server"))
            .arg(flag)
            .arg("--weft-bin")
            .arg(exe("weft-server-e2e"))
            .arg("--database-uri")
            .arg(match &pooler {
                Some(pooler) => pooler.uri(&database),
                None => format!("postgres://postgres@127.0.0.1:5432/{database}"),
            })
            // Inherited by the instances it starts.
            .env("DATABASE_POOL_MODE", pool_mode(pooled))
            .args(extra),
        Some(limit),
    );
    let dropped = psql(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"));
    ran?;
    dropped
}

/// How long the chaos test may run before it counts as hung.
const CHAOS_LIMIT: Duration = Duration::from_secs(600);

/// Runs the suite; `tests` are test names (all when empty).
pub(crate) fn run_with(tests: &[String], build: Build) -> Result<(), String> {
    suite(tests, build, 1, &[], Mode::Durable)
}

/// Runs the suite against weft in its in-memory mode alone (CI's `server-e2e-memory` stage: `langgraph dev`
/// ran the same tests in the `server-e2e` stage).
pub(crate) fn run_in_memory(tests: &[String], build: Build) -> Result<(), String> {
    suite(tests, build, 1, &[], Mode::InMemoryAlone)
}

/// How weft runs in the suite, and beside what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// On its database, beside `langgraph dev`.
    Durable,
    /// In memory, beside `langgraph dev`.
    InMemory,
    /// On its database, alone.
    DurableAlone,
    /// In memory, alone.
    InMemoryAlone,
}

/// Runs the suite with `instances` weft instances and `env` set for the servers, weft as `mode` says.
fn suite(
    tests: &[String],
    build: Build,
    instances: u32,
    env: &[(&str, String)],
    mode: Mode,
) -> Result<(), String> {
    let build_args: &[&str] = match (build, instances) {
        (Build::Alone, 1) => &["build", "-p", "weft-server-e2e"],
        (Build::Alone, _) => &["build", "-p", "weft-server-e2e", "--features", "scale"],
        (Build::Shared, _) => bench::DEV_BUILD,
    };
    exec::run(&mut exec::cargo(build_args))?;
    let binary = bench::target_dir(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from), &exec::root())
        .join("debug")
        .join(format!("weft-server-e2e{}", std::env::consts::EXE_SUFFIX));
    let python = match python_env() {
        Ok(python) => python,
        Err(reason) => {
            let why = format!("it cannot be made here ({reason})");
            weft_testenv::require(
                "server-e2e's Python (LangGraph, its SDK)",
                &why,
                "see xtask/src/pyenv.rs",
            )?;
            return Ok(());
        }
    };
    let langgraph = python.with_file_name("langgraph");
    let js = js_env()?;
    let mut command = Command::new(&python);
    if let Some(dir) = js {
        command.env("WEFT_E2E_JS_DIR", dir);
    }
    command
        .current_dir(suite_dir())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg("run.py")
        .arg("--weft-bin")
        .arg(&binary)
        .arg("--langgraph-bin")
        .arg(&langgraph);
    if !tests.is_empty() {
        command.arg("--only").arg(tests.join(","));
    }
    if instances > 1 {
        command.arg("--weft-instances").arg(instances.to_string());
    }
    if matches!(mode, Mode::InMemory | Mode::InMemoryAlone) {
        command.arg("--weft-in-memory");
    }
    if matches!(mode, Mode::DurableAlone | Mode::InMemoryAlone) {
        command.args(["--servers", "weft"]);
    }
    for (key, value) in env {
        command.env(key, value);
    }
    exec::run_with_limit(&mut command, Some(LIMIT))
}
