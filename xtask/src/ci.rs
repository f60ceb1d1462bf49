//! `cargo xtask ci`: every check CI runs, in order, stopping at the first failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::exec::{self, Tally, format_duration};
use crate::{
    bench, docs_lines, fakellm, langgraph_diff, layers, llm, mcp, msrv, names, pgbouncer, phoenix,
    server_e2e, services, studio_e2e,
};

/// How long one example may run before it counts as hung.
const EXAMPLE_LIMIT: Duration = Duration::from_secs(300);

/// One stage of the run.
struct Stage {
    name: &'static str,
    run: fn(&mut Tally) -> Result<(), String>,
}

/// Every stage, in the order they run.
const STAGES: [Stage; 24] = [
    Stage { name: "services", run: services_stage },
    Stage { name: "fmt", run: fmt },
    Stage { name: "names", run: names_stage },
    Stage { name: "layers", run: layers_stage },
    Stage { name: "msrv", run: msrv_stage },
    Stage { name: "clippy", run: clippy },
    Stage { name: "llm", run: llm_stage },
    Stage { name: "mcp", run: mcp::ci_stage },
    Stage { name: "test", run: test },
    Stage { name: "langgraph-diff", run: langgraph_diff_stage },
    Stage { name: "server-e2e", run: server_e2e_stage },
    Stage { name: "server-e2e-memory", run: server_e2e_memory_stage },
    Stage { name: "server-e2e-scaled", run: server_e2e_scaled_stage },
    Stage { name: "server-e2e-pgbouncer", run: server_e2e_pgbouncer_stage },
    Stage { name: "server-chaos", run: server_chaos_stage },
    Stage { name: "server-chaos-pgbouncer", run: server_chaos_pgbouncer_stage },
    Stage { name: "server-soak", run: server_soak_stage },
    Stage { name: "studio-e2e", run: studio_e2e_stage },
    Stage { name: "phoenix", run: phoenix_stage },
    Stage { name: "docs-lines", run: docs_lines_stage },
    Stage { name: "doc", run: doc },
    Stage { name: "examples", run: examples },
    Stage { name: "bench", run: bench_smoke },
    Stage { name: "package", run: package },
];

/// The crates published, in dependency order (cargo orders them too; the list is what CI checks).
const PUBLISHED: [&str; 7] = [
    "weft-macros",
    "weft-runnable-core",
    "weft-graph",
    "weft-integrations",
    "weft-agents",
    "weft-server",
    "weft-llm",
];

/// Runs the stages named in `args` (all when empty), in their fixed order.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let stages = select(args)?;
    let mut tally = Tally::default();
    let mut report: Vec<(&str, Duration, bool)> = Vec::new();
    let mut failure = None;
    for (index, stage) in stages.iter().enumerate() {
        println!("\n==> ci [{}/{}] {}", index + 1, stages.len(), stage.name);
        let started = Instant::now();
        let outcome = (stage.run)(&mut tally);
        let took = started.elapsed();
        report.push((stage.name, took, outcome.is_ok()));
        match outcome {
            Ok(()) => println!("<== {} passed in {}", stage.name, format_duration(took)),
            Err(err) => {
                println!("<== {} FAILED after {}", stage.name, format_duration(took));
                failure = Some(format!("ci stopped at stage `{}`: {err}", stage.name));
                break;
            }
        }
    }
    println!("\nci stages:");
    for (name, took, ok) in &report {
        println!("  {name:<14} {:>10}  {}", format_duration(*took), if *ok { "ok" } else { "FAILED" });
    }
    let total: Duration = report.iter().map(|(_, took, _)| *took).sum();
    println!("  {:<14} {:>10}", "total", format_duration(total));
    if stages.iter().any(|stage| matches!(stage.name, "test" | "doc")) {
        println!("tests: {} passed, {} failed, {} skipped", tally.passed, tally.failed, tally.skipped);
    }
    failure.map_or(Ok(()), Err)
}

/// Every benchmark workload once, with its correctness check (no figures: see `cargo xtask bench`).
fn bench_smoke(_: &mut Tally) -> Result<(), String> {
    bench::smoke()
}

/// The differential suite against LangGraph (skipped with a loud message where Python is missing,
/// except in CI), built as the later stages build, so that the engine is compiled once for them all.
fn langgraph_diff_stage(_: &mut Tally) -> Result<(), String> {
    langgraph_diff::run_with(&[], langgraph_diff::Build::Shared)
}

/// The server suite against weft-server in its in-memory mode alone (`langgraph dev` ran the same suite in
/// the `server-e2e` stage), on the shared debug build.
fn server_e2e_memory_stage(_: &mut Tally) -> Result<(), String> {
    server_e2e::run_in_memory(&[], server_e2e::Build::Shared)
}

/// The server suite with weft as two instances of one scaled-out server on the local PostgreSQL and
/// Redis, requests spread over both.
fn server_e2e_scaled_stage(_: &mut Tally) -> Result<(), String> {
    server_e2e::run_scaled(&[], server_e2e::Build::Shared, 2, false)
}

/// The SDK suite against two instances of a scaled-out server whose PostgreSQL traffic goes through
/// PgBouncer in transaction mode, on the shared debug build.
fn server_e2e_pgbouncer_stage(_: &mut Tally) -> Result<(), String> {
    server_e2e::run_scaled(&[], server_e2e::Build::Shared, 2, true)
}

/// The chaos test of a scaled-out server: three instances, one SIGKILLed and restarted, Redis restarted,
/// while 200 runs stream.
fn server_chaos_stage(_: &mut Tally) -> Result<(), String> {
    server_e2e::chaos(&[], server_e2e::Build::Shared)
}

/// The chaos test with the instances' PostgreSQL traffic through PgBouncer in transaction mode.
fn server_chaos_pgbouncer_stage(_: &mut Tally) -> Result<(), String> {
    server_e2e::chaos(&["--pgbouncer".to_owned()], server_e2e::Build::Shared)
}

/// The soak test of a scaled-out server: 2,000 streamed runs over 2 instances and over 3, five times;
/// every run must end, `success`, within its bound.
fn server_soak_stage(_: &mut Tally) -> Result<(), String> {
    server_e2e::soak(&[], server_e2e::Build::Shared)
}

/// The server suite against weft-server and `langgraph dev` (skipped with a loud message where Python is
/// missing, except in CI), on the shared debug build.
fn server_e2e_stage(_: &mut Tally) -> Result<(), String> {
    server_e2e::run_with(&[], server_e2e::Build::Shared)
}

/// weft Studio in headless Chromium (skipped with a loud message where the browser is missing, except in
/// CI), on the shared debug build.
fn studio_e2e_stage(_: &mut Tally) -> Result<(), String> {
    studio_e2e::run_with(studio_e2e::Build::Shared)
}

/// The quickstart's traces checked in Arize Phoenix (skipped with a loud message where Phoenix cannot be
/// installed, except in CI), on the shared debug build.
fn phoenix_stage(_: &mut Tally) -> Result<(), String> {
    phoenix::run_with(phoenix::Build::Shared)
}

/// The stages named in `args`, in their fixed order; all of them when `args` is empty.
fn select(args: &[String]) -> Result<Vec<&'static Stage>, String> {
    if let Some(unknown) = args.iter().find(|arg| !STAGES.iter().any(|stage| stage.name == arg.as_str())) {
        let names: Vec<&str> = STAGES.iter().map(|stage| stage.name).collect();
        return Err(format!("unknown ci stage `{unknown}` (stages: {})", names.join(", ")));
    }
    Ok(STAGES.iter().filter(|stage| args.is_empty() || args.iter().any(|arg| arg == stage.name)).collect())
}

/// In CI the backends must be up (started if need be); elsewhere an unreachable one is only a warning.
fn services_stage(_: &mut Tally) -> Result<(), String> {
    if services::is_ci() {
        println!("CI is set: PostgreSQL and Redis must be reachable");
        services::ensure(services::Policy::Required)
    } else {
        println!("CI is not set: checking the backends without starting them");
        services::warn_if_unreachable();
        Ok(())
    }
}

/// llama-server and the test models in the cache (built or downloaded when missing), for the test stage.
fn llm_stage(_: &mut Tally) -> Result<(), String> {
    llm::ci_stage()
}

/// The install and run lines of README and the docs work as written.
fn docs_lines_stage(_: &mut Tally) -> Result<(), String> {
    docs_lines::check()
}

/// The declared rust-version is true of the published crates and clippy's msrv agrees.
fn msrv_stage(_: &mut Tally) -> Result<(), String> {
    msrv::check(&PUBLISHED)
}

/// Every published crate's name is free on crates.io or the project's own.
fn names_stage(_: &mut Tally) -> Result<(), String> {
    names::check(&PUBLISHED)
}

fn layers_stage(_: &mut Tally) -> Result<(), String> {
    layers::check()
}

fn fmt(_: &mut Tally) -> Result<(), String> {
    exec::run(&mut exec::cargo(&["fmt", "--all", "--", "--check"]))
}

fn clippy(_: &mut Tally) -> Result<(), String> {
    exec::run(&mut exec::cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--all-features",
        "--",
        "-D",
        "warnings",
    ]))
}

/// Unit and integration tests of every crate: nextest when installed, else cargo test. Doc tests are the
/// next stage (nextest cannot run them), so the cargo test fallback leaves them out too. The real-model
/// tests get the paths of the `llm` stage, the MCP tests the reference server of the `mcp` stage.
fn test(tally: &mut Tally) -> Result<(), String> {
    let fakellm = fakellm_for_tests()?;
    let has_nextest =
        exec::cargo(&["nextest", "--version"]).output().is_ok_and(|output| output.status.success());
    let mut command = if has_nextest {
        exec::cargo(&["nextest", "run", "--workspace", "--all-features"])
    } else {
        println!("cargo-nextest is not installed: running the tests with cargo test");
        exec::cargo(&["test", "--workspace", "--all-features", "--lib", "--bins", "--tests"])
    };
    if let Some(executable) = fakellm {
        command.env(fakellm::ENV, executable);
    }
    // PgBouncer in transaction mode, for the tests that go through a pooler; it runs until this returns.
    let pooler = match pgbouncer::start() {
        Ok(pooler) => Some(pooler),
        Err(err) => {
            weft_testenv::require(
                "PgBouncer for the tests through a pooler",
                &err,
                "see xtask/src/pgbouncer.rs",
            )?;
            None
        }
    };
    if let Some(pooler) = &pooler {
        command.env(pgbouncer::TEST_ENV, pooler.uri(""));
    }
    exec::run_counting(mcp::with_test_env(llm::with_test_env(&mut command)), tally)
}

/// fakellm for the `openai` tests, installed when missing. Without it those tests fail in CI and skip
/// elsewhere, so here a failed install stops CI and is only a warning elsewhere.
fn fakellm_for_tests() -> Result<Option<std::path::PathBuf>, String> {
    match fakellm::ensure() {
        Ok(executable) => {
            println!("{}={}", fakellm::ENV, executable.display());
            Ok(Some(executable))
        }
        Err(err) => {
            weft_testenv::require("fakellm for the `openai` tests", &err, "see xtask/src/fakellm.rs")?;
            Ok(None)
        }
    }
}

/// Every published crate packages and passes `cargo publish --dry-run` (the workspace's unpublished crates
/// stand in for crates.io through cargo's local overlay), and its rustdoc builds without a warning. The
/// packages are not compiled again on their own (`--no-verify`): the earlier stages built the same sources.
fn package(_: &mut Tally) -> Result<(), String> {
    let mut args = vec!["publish", "--dry-run", "--no-verify", "--allow-dirty"];
    for name in PUBLISHED {
        args.extend(["-p", name]);
    }
    exec::run(&mut exec::cargo(&args))?;
    let mut args = vec!["doc", "--no-deps", "--all-features"];
    for name in PUBLISHED {
        args.extend(["-p", name]);
    }
    exec::run(exec::cargo(&args).env("RUSTDOCFLAGS", "-D warnings"))
}

fn doc(tally: &mut Tally) -> Result<(), String> {
    exec::run_counting(&mut exec::cargo(&["test", "--workspace", "--all-features", "--doc"]), tally)
}

/// Checks that a new user's first build stays lean, builds every example of the `examples/` package with
/// every feature (the debug build the later stages share), then runs each one; an example fails the stage
/// by exiting with a failure status (they check their own results).
fn examples(_: &mut Tally) -> Result<(), String> {
    first_build_is_lean()?;
    let names = discover_examples(&exec::root().join("examples").join("examples"))?;
    println!("examples: {}", names.join(", "));
    exec::run(&mut exec::cargo(bench::DEV_BUILD))?;
    let dir = bench::target_dir(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from), &exec::root())
        .join("debug")
        .join("examples");
    let example = |name: &str| {
        let mut command = Command::new(dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX)));
        command.current_dir(exec::root());
        // `mcp_agent` also uses the MCP reference server when the `mcp` stage installed it.
        mcp::with_test_env(&mut command);
        command
    };
    for name in &names {
        exec::run_with_limit(example(name).args(example_args(name)), Some(EXAMPLE_LIMIT))?;
    }
    // Then each example that talks to a model again, `--live` against fakellm serving the examples'
    // rules: the same programs through `ChatOpenAI` and real HTTP, and a check of the rules file. Where
    // the rules answer as the script does, the exact checks apply too (`WEFT_EXAMPLES_EXACT`).
    let fakellm = fakellm::FakeLlm::start(&fakellm::ensure()?, &fakellm::examples_rules(), None, true)?;
    for name in names.iter().filter(|name| runs_live(name)) {
        let mut command = example(name);
        command
            .arg("--live")
            .env("OPENAI_BASE_URL", fakellm.base_url())
            .env("OPENAI_API_KEY", "sk-fakellm")
            .env("OPENAI_MODEL", "gpt-4o-mini")
            .env("WEFT_EXAMPLES_EXACT", if exact_live(name) { "1" } else { "0" });
        exec::run_with_limit(&mut command, Some(EXAMPLE_LIMIT))?;
    }
    Ok(())
}

/// Crates that `cargo run --example quickstart` on a fresh clone must not compile: the server, the MCP
/// SDK, OpenTelemetry, the OpenAI client and its HTTP stack, and the PostgreSQL and Redis backends.
const NOT_IN_FIRST_BUILD: [&str; 9] = [
    "axum",
    "rmcp",
    "opentelemetry",
    "async-openai",
    "reqwest",
    "hyper",
    "sqlx-postgres",
    "redis",
    "weft-server",
];

/// What a new user's first command compiles: the dependency tree of the repository root's default
/// members with their default features (what a bare `cargo run --example quickstart` resolves), checked
/// against [`NOT_IN_FIRST_BUILD`].
fn first_build_is_lean() -> Result<(), String> {
    let mut command = exec::cargo(&["tree", "--locked", "--edges", "normal,build", "--prefix", "none"]);
    println!("$ {}", exec::describe(&command));
    let output = command.output().map_err(|err| format!("cannot run cargo tree: {err}"))?;
    if !output.status.success() {
        return Err(format!("cargo tree failed: {}", String::from_utf8_lossy(&output.stderr)));
    }
    let crates = crate_names(&String::from_utf8_lossy(&output.stdout));
    let heavy: Vec<&str> =
        NOT_IN_FIRST_BUILD.into_iter().filter(|name| crates.iter().any(|c| c == name)).collect();
    if !heavy.is_empty() {
        return Err(format!(
            "`cargo run --example quickstart` would compile {}: an example's feature is on by default, or \
             a default member enables it (see `default-members` in Cargo.toml)",
            heavy.join(", ")
        ));
    }
    println!(
        "a new user's first build compiles {} crates, none of {}",
        crates.len(),
        NOT_IN_FIRST_BUILD.join(", ")
    );
    Ok(())
}

/// The distinct crate names of `cargo tree --prefix none` output, sorted.
fn crate_names(tree: &str) -> Vec<String> {
    let mut names: Vec<String> =
        tree.lines().filter_map(|line| line.split_whitespace().next()).map(str::to_owned).collect();
    names.sort();
    names.dedup();
    names
}

/// Whether an example runs `--live` against fakellm in CI: all but the server, which serves until stopped
/// and whose graphs are scripted.
fn runs_live(name: &str) -> bool {
    name != "server"
}

/// Whether fakellm's rules (`examples/fakellm.yaml`) answer exactly as the example's script, so that its
/// exact checks apply to its live run too. Not yet for `quickstart` (fakellm streams no text beside tool
/// calls, so the streamed tokens differ), `rag_agent` and `reflection` (their rules take a shorter path
/// than the scripts: no rewrites, no rejected drafts); those live runs check the protocol and list the
/// exact checks they could not make.
fn exact_live(name: &str) -> bool {
    !matches!(name, "quickstart" | "rag_agent" | "reflection")
}

/// What an example is run with in CI: the `server` example serves until Ctrl-C, so CI runs its
/// `--check` (a free port, each graph driven through the API, then exit).
fn example_args(name: &str) -> &'static [&'static str] {
    match name {
        "server" => &["--check"],
        _ => &[],
    }
}

/// The examples cargo finds in `dir`: `NAME.rs` and `NAME/main.rs`, sorted by name.
pub(crate) fn discover_examples(dir: &Path) -> Result<Vec<String>, String> {
    let entries = std::fs::read_dir(dir).map_err(|err| format!("cannot list {}: {err}", dir.display()))?;
    let mut names = Vec::new();
    for entry in entries {
        let path = entry.map_err(|err| format!("cannot list {}: {err}", dir.display()))?.path();
        let name = if path.is_dir() && path.join("main.rs").is_file() {
            path.file_name()
        } else if path.is_file() && path.extension().is_some_and(|ext| ext == "rs") {
            path.file_stem()
        } else {
            None
        };
        if let Some(name) = name {
            names.push(name.to_string_lossy().into_owned());
        }
    }
    names.sort();
    if names.is_empty() {
        return Err(format!("no examples found in {}", dir.display()));
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(stages: &[&Stage]) -> Vec<&'static str> {
        stages.iter().map(|stage| stage.name).collect()
    }

    #[test]
    fn no_arguments_select_every_stage_in_order() {
        assert_eq!(
            names(&select(&[]).unwrap()),
            vec![
                "services",
                "fmt",
                "names",
                "layers",
                "msrv",
                "clippy",
                "llm",
                "mcp",
                "test",
                "langgraph-diff",
                "server-e2e",
                "server-e2e-memory",
                "server-e2e-scaled",
                "server-e2e-pgbouncer",
                "server-chaos",
                "server-chaos-pgbouncer",
                "server-soak",
                "studio-e2e",
                "phoenix",
                "docs-lines",
                "doc",
                "examples",
                "bench",
                "package"
            ]
        );
    }

    #[test]
    fn named_stages_run_in_the_fixed_order() {
        let args = vec!["doc".to_owned(), "fmt".to_owned()];
        assert_eq!(names(&select(&args).unwrap()), vec!["fmt", "doc"]);
    }

    #[test]
    fn an_unknown_stage_is_an_error_naming_it() {
        let err = select(&["lint".to_owned()]).err().unwrap();
        assert!(err.starts_with("unknown ci stage `lint`"), "{err}");
    }

    #[test]
    fn examples_are_files_and_folders_with_a_main() {
        let dir = std::env::temp_dir().join(format!("xtask-examples-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("lcel")).unwrap();
        std::fs::create_dir_all(dir.join("not_an_example")).unwrap();
        std::fs::write(dir.join("lcel").join("main.rs"), "fn main() {}").unwrap();
        std::fs::write(dir.join("quickstart.rs"), "fn main() {}").unwrap();
        std::fs::write(dir.join("notes.md"), "").unwrap();
        let found = discover_examples(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(found.unwrap(), vec!["lcel", "quickstart"]);
    }

    #[test]
    fn the_server_example_runs_its_check_and_the_others_run_plain() {
        assert_eq!(example_args("server"), ["--check"]);
        assert!(example_args("quickstart").is_empty());
        let found = discover_examples(&exec::root().join("examples").join("examples")).unwrap();
        assert!(found.iter().any(|name| name == "server"), "{found:?}");
    }

    #[test]
    fn crate_names_are_the_first_word_of_each_line_once() {
        let tree = "weft-examples v0.1.0 (/x/examples)\nweft v0.1.0 (/x/crates/weft)\nserde v1.0.0\n\
                    serde v1.0.0 (*)\nsyn v2.0.1\nsyn v3.0.0\n";
        assert_eq!(crate_names(tree), ["serde", "syn", "weft", "weft-examples"]);
    }

    #[test]
    fn live_runs_check_exactly_where_the_rules_follow_the_script() {
        assert!(exact_live("map_reduce") && exact_live("multi_agent") && exact_live("mcp_agent"));
        assert!(!exact_live("quickstart") && !exact_live("rag_agent") && !exact_live("reflection"));
    }

    #[test]
    fn no_examples_is_an_error() {
        let dir = std::env::temp_dir().join(format!("xtask-no-examples-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let found = discover_examples(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(found.unwrap_err().starts_with("no examples found in"));
    }

    #[test]
    fn the_repository_has_a_quickstart_example() {
        let found = discover_examples(&exec::root().join("examples").join("examples")).unwrap();
        assert!(found.iter().any(|name| name == "quickstart"), "{found:?}");
    }
}
