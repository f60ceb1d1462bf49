//! `weft-bench-server`: the server benchmarks. A load client (hyper's HTTP/1.1 client on one tokio thread)
//! that starts weft-server (`weft-server-e2e`, the end-to-end suite's graphs, on a SQLite file; with
//! `--weft-in-memory` also in its in-memory mode, as `langgraph dev` runs) and, when comparing,
//! `langgraph dev` with the same graphs in Python, each afresh for every workload, and measures:
//!
//! - `server_ttfe`: time from `POST /threads/{id}/runs/stream` to the first SSE event, one run at a time;
//! - `server_runs_per_s`: streamed runs of a three-node graph per second over a pool of keep-alive
//!   connections, each streaming one run after another on its own thread;
//! - `server_v2_ttfe`: the Agent Streaming Protocol (v2): with a fresh thread's stream
//!   (`POST /threads/{id}/stream/events`) open, time from sending `run.start` to
//!   `POST /threads/{id}/commands` to the run's first event on the stream, one run at a time;
//! - `server_v2_events_per_s`: v2 events per second read from streams held open, each on its own thread
//!   with runs of the three-node graph started one after another (see [`v2`]);
//! - `server_concurrent_1000`: 1,000 runs streamed at once, one connection each: all must complete;
//! - `server_burst_200`: 200 runs started at once, each on a connection it opens then (connects timed):
//!   a connect of a second or more means the listen backlog overflowed and the client's SYN was resent;
//! - `server_paused_10k`: 10,000 threads paused at an interrupt, then the server's resident memory
//!   (`VmRSS` of its processes);
//! - `server_hitl_round_trip`: human in the loop, a streamed run to an interrupt and a streamed run resuming
//!   it (`Command` resume), one thread at a time: from the first request to the second stream's end;
//! - `server_rss_100k`: 100,000 threads created (`POST /threads`) and 10,000 `/runs/wait` runs of the
//!   three-node graph on some of them, over 32 keep-alive connections at once, then the server's resident
//!   memory right after and after 5 s idle (what a leak would show: memory that stays after the work).
//!
//! ```text
//! weft-bench-server --weft-bin PATH [--weft-in-memory] [--langgraph-bin PATH --graphs DIR]
//!                   [--only NAME[,NAME]] [--quick]
//! weft-bench-server --chaos --weft-bin PATH --database-uri URI [--instances N] [--runs N]
//! ```
//!
//! `--chaos` runs the chaos test of a scaled-out server instead (see [`chaos`]); `--soak` its soak test
//! (see [`soak`]), with the same arguments.
//!
//! One JSON line per workload on stdout, every server's figures in it (`weft`, `weft_in_memory`,
//! `langgraph`), with `ratio` (weft on SQLite against LangGraph) and, with `--weft-in-memory`,
//! `ratio_in_memory` (like with like: both in memory); progress on stderr. A failed run or
//! check makes the exit status non-zero. `cargo xtask bench --server [--compare]` builds and runs it.

mod chaos;
mod http;
mod pgstat;
mod servers;
mod soak;
mod sse;
mod stats;
mod v2;
mod workloads;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};

use servers::{Programs, Server, Side};
use workloads::{Figures, NAMES, Params, RssLoad};

const USAGE: &str = "\
usage: weft-bench-server --weft-bin PATH [--weft-in-memory] [--langgraph-bin PATH --graphs DIR]
                         [--only NAME[,NAME...]] [--quick] [--langgraph-paused N] [--connections N]
                         [--seconds S] [--list]

  --weft-in-memory      also weft in its in-memory mode (no database, as langgraph dev runs): the
                        figures under `weft_in_memory`, the like-for-like ratio as `ratio_in_memory`

  --langgraph-paused N  threads server_paused_10k pauses on langgraph dev (10000)
  --connections N       connections of server_runs_per_s (8)
  --seconds S           how long server_runs_per_s runs (weft 10, langgraph 30)
  --weft-arg ARG        one more argument for every weft server started (repeatable), e.g.
                        `--weft-arg --listen-backlog --weft-arg 128`
  --instances N --database-uri URI --redis-uri URI [--redis-prefix P]
                        weft as N instances of one scaled-out server (weft-server-e2e built with
                        `scale`) on PostgreSQL and Redis; the load spreads over the instances

       weft-bench-server --chaos --weft-bin PATH --database-uri URI [--redis-server PATH]
                         [--instances N] [--runs N] [--concurrency N]

  --chaos               the chaos test of a scaled-out server (weft-server-e2e built with `scale`) on
                        the PostgreSQL database URI and a private Redis: N instances (3), one SIGKILLed
                        and restarted, Redis restarted, while N runs (200) stream, N at once (30)
  --soak                the soak test instead: nothing killed, N runs (2000) stream, each must end within
                        60 s, all `success`, the run queue empty after";

/// The parsed command line.
#[derive(Debug, Default)]
struct Args {
    weft: Option<PathBuf>,
    weft_args: Vec<String>,
    weft_in_memory: bool,
    langgraph: Option<PathBuf>,
    graphs: Option<PathBuf>,
    only: Vec<String>,
    quick: bool,
    langgraph_paused: Option<usize>,
    connections: Option<usize>,
    seconds: Option<f64>,
    list: bool,
    chaos: bool,
    soak: bool,
    database_uri: Option<String>,
    redis_server: Option<PathBuf>,
    instances: Option<usize>,
    redis_uri: Option<String>,
    redis_prefix: Option<String>,
    runs: Option<usize>,
    concurrency: Option<usize>,
}

fn count(name: &str, value: &str) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{name} needs a whole number above 0, not `{value}`")),
    }
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args::default();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().cloned().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--weft-bin" => parsed.weft = Some(value(arg)?.into()),
            "--weft-in-memory" => parsed.weft_in_memory = true,
            "--weft-arg" => parsed.weft_args.push(value(arg)?),
            "--langgraph-bin" => parsed.langgraph = Some(value(arg)?.into()),
            "--graphs" => parsed.graphs = Some(value(arg)?.into()),
            "--only" => {
                parsed.only.extend(value(arg)?.split(',').filter(|s| !s.is_empty()).map(str::to_owned))
            }
            "--quick" => parsed.quick = true,
            "--langgraph-paused" => {
                parsed.langgraph_paused =
                    Some(value(arg)?.parse().map_err(|e| format!("--langgraph-paused: {e}"))?)
            }
            "--connections" => {
                parsed.connections = Some(value(arg)?.parse().map_err(|e| format!("--connections: {e}"))?)
            }
            "--seconds" => parsed.seconds = Some(value(arg)?.parse().map_err(|e| format!("--seconds: {e}"))?),
            "--list" => parsed.list = true,
            "--chaos" => parsed.chaos = true,
            "--soak" => parsed.soak = true,
            "--database-uri" => parsed.database_uri = Some(value(arg)?),
            "--redis-server" => parsed.redis_server = Some(value(arg)?.into()),
            "--redis-uri" => parsed.redis_uri = Some(value(arg)?),
            "--redis-prefix" => parsed.redis_prefix = Some(value(arg)?),
            "--instances" => parsed.instances = Some(count(arg, &value(arg)?)?),
            "--runs" => parsed.runs = Some(count(arg, &value(arg)?)?),
            "--concurrency" => parsed.concurrency = Some(count(arg, &value(arg)?)?),
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument `{other}`\n{USAGE}")),
        }
    }
    if let Some(unknown) = parsed.only.iter().find(|name| !NAMES.contains(&name.as_str())) {
        return Err(format!("unknown workload `{unknown}` (workloads: {})", NAMES.join(", ")));
    }
    if parsed.langgraph.is_some() != parsed.graphs.is_some() {
        return Err("--langgraph-bin and --graphs go together".to_owned());
    }
    if parsed.chaos && parsed.soak {
        return Err("--chaos and --soak are two tests: one at a time".to_owned());
    }
    if (parsed.chaos || parsed.soak) && parsed.database_uri.is_none() {
        return Err("--chaos and --soak need --database-uri (a database of their own)".to_owned());
    }
    if !parsed.chaos
        && !parsed.soak
        && parsed.instances.is_some()
        && (parsed.database_uri.is_none() || parsed.redis_uri.is_none())
    {
        return Err("--instances needs --database-uri and --redis-uri (a scaled-out weft)".to_owned());
    }
    if !parsed.list && parsed.weft.is_none() {
        return Err(format!("--weft-bin is required\n{USAGE}"));
    }
    Ok(parsed)
}

/// `server_rss_100k`'s load on every server: 100,000 threads, 10,000 runs, 32 connections, 5 s idle.
const RSS_LOAD: RssLoad =
    RssLoad { threads: 100_000, runs: 10_000, connections: 32, idle: Duration::from_secs(5) };

/// What each workload does on `side`: the full figures, or a few checked runs with `quick`. LangGraph
/// takes about 0.8 s per run at low load, so it gets fewer sequential samples and a longer window.
fn params(side: Side, quick: bool, langgraph_paused: Option<usize>) -> Params {
    if quick {
        return Params {
            ttfe_samples: 5,
            throughput_time: Duration::from_millis(500),
            throughput_connections: 4,
            concurrent_runs: 20,
            burst_runs: 20,
            paused_threads: 50,
            paused_connections: 8,
            hitl_samples: 5,
            rss_load: RssLoad { threads: 200, runs: 20, connections: 8, idle: Duration::from_secs(1) },
        };
    }
    match side {
        Side::Weft | Side::WeftMemory => Params {
            ttfe_samples: 1000,
            throughput_time: Duration::from_secs(10),
            throughput_connections: 8,
            concurrent_runs: 1000,
            burst_runs: 200,
            paused_threads: 10_000,
            paused_connections: 32,
            hitl_samples: 500,
            rss_load: RSS_LOAD,
        },
        Side::LangGraph => Params {
            ttfe_samples: 50,
            throughput_time: Duration::from_secs(30),
            throughput_connections: 8,
            concurrent_runs: 1000,
            burst_runs: 200,
            paused_threads: langgraph_paused.unwrap_or(10_000),
            paused_connections: 32,
            hitl_samples: 30,
            rss_load: RSS_LOAD,
        },
    }
}

/// What a workload measures, for the JSON line.
fn what(name: &str) -> &'static str {
    match name {
        "server_ttfe" => {
            "time from POST /threads/{id}/runs/stream (three-node graph) to the first SSE event, one run at a time on one keep-alive connection"
        }
        "server_runs_per_s" => {
            "streamed runs of a three-node graph per second; each keep-alive connection streams one run after another on its own thread"
        }
        "server_v2_ttfe" => {
            "v2 protocol: with a new thread's stream open (POST /threads/{id}/stream/events, channels values and lifecycle), time from sending run.start (three-node graph) to POST /threads/{id}/commands to the run's first event on the stream, one run at a time"
        }
        "server_v2_events_per_s" => {
            "v2 protocol events per second (six per run of the three-node graph: lifecycle running, four values, lifecycle completed); each worker holds its thread's stream open on one keep-alive connection and starts one run after another by run.start on another"
        }
        "server_hitl_round_trip" => {
            "a streamed run of the hitl graph to its interrupt, then a streamed run resuming it to the end (Command resume), one thread at a time on one keep-alive connection; from the first POST to the second stream's end"
        }
        "server_concurrent_1000" => {
            "runs of the three-node graph streamed at once, one connection and thread each; latency from the request to the stream's end"
        }
        "server_burst_200" => {
            "runs of the three-node graph started at once, each on a connection it opens then (threads made before); latency from the connect to the stream's end, connects timed; connects_resent: connects of 0.9 s or more (a SYN sent again)"
        }
        "server_rss_100k" => {
            "threads created (POST /threads) and /runs/wait runs of the three-node graph on some of them, over keep-alive connections at once; then the server's VmRSS (its processes summed) after it was idle a few seconds (rss_mb) and right after the load (rss_after_load_mb)"
        }
        _ => {
            "threads run to the hitl graph's interrupt (POST /threads, then /runs/wait), then the server's VmRSS (its processes summed)"
        }
    }
}

fn figure(figures: Option<&Figures>, key: &str) -> Option<f64> {
    figures?.get(key)?.as_f64()
}

/// The v2 workloads' goal: issue 39 asks for the figures against LangGraph, with no bound.
const V2_GOAL: &str = "measured against LangGraph (no bound set)";

/// The comparison and the goal of the issue for one workload.
fn verdict(
    name: &str,
    weft: Option<&Figures>,
    langgraph: Option<&Figures>,
) -> (Option<f64>, &'static str, Option<bool>) {
    let ratio = |ours: Option<f64>, theirs: Option<f64>, higher_is_better: bool| match (ours, theirs) {
        (Some(o), Some(t)) if o > 0.0 && t > 0.0 => {
            Some(stats::round(if higher_is_better { o / t } else { t / o }, 1))
        }
        _ => None,
    };
    match name {
        "server_ttfe" => {
            let ours = figure(weft, "median_s");
            let r = ratio(ours, figure(langgraph, "median_s"), false);
            let met = match (ours, r) {
                (Some(median), Some(r)) => Some(median <= 0.002 && r >= 100.0),
                (Some(median), None) if median > 0.002 => Some(false),
                _ => None,
            };
            (r, "median at most 2 ms and 100 times faster than LangGraph", met)
        }
        "server_runs_per_s" => {
            let r = ratio(figure(weft, "runs_per_s"), figure(langgraph, "runs_per_s"), true);
            (r, "20 times LangGraph's runs per second", r.map(|r| r >= 20.0))
        }
        "server_v2_ttfe" => {
            (ratio(figure(weft, "median_s"), figure(langgraph, "median_s"), false), V2_GOAL, None)
        }
        "server_v2_events_per_s" => {
            (ratio(figure(weft, "events_per_s"), figure(langgraph, "events_per_s"), true), V2_GOAL, None)
        }
        "server_hitl_round_trip" => {
            let ours = figure(weft, "median_s");
            let met = ours.map(|median| median <= 0.010);
            (
                ratio(ours, figure(langgraph, "median_s"), false),
                "interrupt + resume round trip at most 10 ms",
                met,
            )
        }
        "server_concurrent_1000" => {
            let all = match (figure(weft, "completed"), figure(weft, "runs")) {
                (Some(done), Some(runs)) => Some(done == runs && runs >= 1000.0),
                _ => None,
            };
            (
                ratio(figure(weft, "p99_s"), figure(langgraph, "p99_s"), false),
                "1,000 at once, all complete",
                all,
            )
        }
        "server_burst_200" => {
            let met = match (figure(weft, "completed"), figure(weft, "runs"), figure(weft, "connects_resent"))
            {
                (Some(done), Some(runs), Some(resent)) => {
                    Some(done == runs && runs >= 200.0 && resent == 0.0)
                }
                _ => None,
            };
            (
                ratio(figure(weft, "p99_s"), figure(langgraph, "p99_s"), false),
                "200 at once, all complete, no connect waiting for a resent SYN",
                met,
            )
        }
        "server_rss_100k" => {
            let r = ratio(figure(weft, "rss_mb"), figure(langgraph, "rss_mb"), false);
            let full = match (figure(weft, "threads"), figure(weft, "runs")) {
                (Some(threads), Some(runs)) => threads >= 100_000.0 && runs >= 10_000.0,
                _ => false,
            };
            let met = r.map(|r| full && r >= 5.0);
            (r, "RSS after 100,000 threads and 10,000 runs at most 1/5 of LangGraph's", met)
        }
        _ => {
            let ours = figure(weft, "rss_mb");
            let met = match (ours, figure(weft, "threads")) {
                (Some(mb), Some(threads)) => Some(mb < 200.0 && threads >= 10_000.0),
                _ => None,
            };
            (ratio(ours, figure(langgraph, "rss_mb"), false), "10,000 paused threads in under 200 MB", met)
        }
    }
}

/// Runs `name` on a fresh server of `side`.
async fn measure(name: &str, side: Side, programs: &Programs, params: &Params) -> Result<Figures, String> {
    eprintln!("{name}: starting the {} server", side.name());
    let load_start = loadavg_1m();
    let server = Server::start(side, programs).await?;
    eprintln!("{name}: measuring {} (pid {})", side.name(), server.pid());
    // Scaled out, what the workload costs PostgreSQL too (the servers' start-up not counted).
    let database = programs.scale.as_ref().filter(|_| side == Side::Weft).map(|s| s.database_uri.as_str());
    let pg_before = database.map(pgstat::PgUsage::now).transpose()?;
    let figures = workloads::run(name, &server, params).await;
    drop(server);
    let mut figures = figures?;
    if let (Some(database), Some(before)) = (database, pg_before) {
        let used = pgstat::PgUsage::after(database, before).await?;
        pg_figures(&mut figures, used);
    }
    // The machine's load while this side ran: the higher of the 1-minute averages at start and end.
    if let Some(load) = load_start.into_iter().chain(loadavg_1m()).reduce(f64::max) {
        figures.insert("loadavg_1m".into(), json!(load));
    }
    Ok(figures)
}

/// PostgreSQL's CPU time and transactions during a workload, in all and per run where it counts runs
/// (the runs it made before timing included: `warmup_runs`).
fn pg_figures(figures: &mut Figures, used: pgstat::PgUsage) {
    figures.insert("pg_cpu_ms".into(), json!(stats::round(used.cpu_s * 1e3, 1)));
    figures.insert("pg_transactions".into(), json!(used.transactions));
    let runs =
        figure(Some(figures), "runs").unwrap_or(0.0) + figure(Some(figures), "warmup_runs").unwrap_or(0.0);
    if runs > 0.0 {
        figures.insert("pg_cpu_ms_per_run".into(), json!(stats::round(used.cpu_s * 1e3 / runs, 3)));
        figures
            .insert("transactions_per_run".into(), json!(stats::round(used.transactions as f64 / runs, 2)));
    }
}

/// The 1-minute load average (`/proc/loadavg`), where there is one.
fn loadavg_1m() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

async fn run(args: Args) -> Result<bool, String> {
    let weft = args.weft.ok_or("--weft-bin is required")?;
    servers::require_file(&weft, "weft-server-e2e")?;
    if let Some(langgraph) = &args.langgraph {
        servers::require_file(langgraph, "langgraph")?;
    }
    // Absolute: `langgraph dev` runs in a folder of its own.
    let absolute = |path: PathBuf| std::path::absolute(&path).map_err(|e| format!("{}: {e}", path.display()));
    let programs = Programs {
        weft: absolute(weft)?,
        weft_args: args.weft_args.clone(),
        langgraph: args.langgraph.clone().map(absolute).transpose()?,
        python_graphs: args.graphs.clone().map(absolute).transpose()?.unwrap_or_default(),
        scale: args.instances.map(|instances| servers::Scale {
            instances,
            database_uri: args.database_uri.clone().unwrap_or_default(),
            redis_uri: args.redis_uri.clone().unwrap_or_default(),
            prefix: args
                .redis_prefix
                .clone()
                .unwrap_or_else(|| format!("weft-bench-{}:", std::process::id())),
        }),
    };
    let mut sides = vec![Side::Weft];
    if args.weft_in_memory {
        sides.push(Side::WeftMemory);
    }
    if programs.langgraph.is_some() {
        sides.push(Side::LangGraph);
    }
    let names: Vec<&str> =
        NAMES.iter().copied().filter(|n| args.only.is_empty() || args.only.iter().any(|o| o == n)).collect();
    let mut ok = true;
    let mut summaries = Vec::new();
    for (index, name) in names.into_iter().enumerate() {
        // The sides take turns going first, so that neither always runs on the machine the other left.
        let order: Vec<Side> =
            if index % 2 == 0 { sides.clone() } else { sides.iter().rev().copied().collect() };
        let mut line = json!({"workload": name, "what": what(name), "quick": args.quick});
        if let Some(instances) = args.instances {
            // weft scaled out: its instances on PostgreSQL and Redis.
            line["weft_instances"] = json!(instances);
        }
        line["order"] = json!(order.iter().map(|side| side.name()).collect::<Vec<_>>());
        if programs.langgraph.is_some() {
            line["langgraph_jobs_per_worker"] = json!(servers::LANGGRAPH_JOBS_PER_WORKER);
        }
        let mut results: Vec<(Side, Option<Figures>)> = Vec::new();
        for &side in &order {
            let mut params = params(side, args.quick, args.langgraph_paused);
            if let Some(connections) = args.connections {
                params.throughput_connections = connections.max(1);
            }
            if let Some(seconds) = args.seconds {
                params.throughput_time =
                    Duration::try_from_secs_f64(seconds).map_err(|e| format!("--seconds: {e}"))?;
            }
            let result = measure(name, side, &programs, &params).await;
            let value = match &result {
                Ok(figures) => Value::Object(figures.clone()),
                Err(err) => {
                    ok = false;
                    eprintln!("{name}: {} FAILED: {err}", side.name());
                    json!({"error": err})
                }
            };
            line[side.name()] = value;
            results.push((side, result.ok()));
        }
        let of =
            |wanted: Side| results.iter().find(|(side, _)| *side == wanted).and_then(|(_, f)| f.as_ref());
        let langgraph = of(Side::LangGraph);
        // weft's configuration (0: one embedded server on SQLite) and, at the top of the line, what the
        // scale-out goals read.
        line["instances"] = json!(args.instances.unwrap_or(0));
        for key in ["runs_per_s", "pg_cpu_ms_per_run", "transactions_per_run"] {
            if let Some(value) = of(Side::Weft).and_then(|f| f.get(key)) {
                line[key] = value.clone();
            }
        }
        let (ratio, goal, met) = verdict(name, of(Side::Weft), langgraph);
        line["ratio"] = json!(ratio);
        line["goal"] = json!(goal);
        // A quick run checks that every workload runs; its counts are too small to judge a goal.
        line["goal_met"] = if args.quick { Value::Null } else { json!(met) };
        if args.weft_in_memory {
            let (ratio, _, met) = verdict(name, of(Side::WeftMemory), langgraph);
            line["ratio_in_memory"] = json!(ratio);
            line["goal_met_in_memory"] = if args.quick { Value::Null } else { json!(met) };
        }
        println!("{line}");
        summaries.push(summary(name, &line));
    }
    eprintln!();
    for text in summaries {
        eprintln!("{text}");
    }
    Ok(ok)
}

/// One side's main figures as text.
fn side_text(name: &str, figures: &Value) -> String {
    if let Some(err) = figures.get("error").and_then(Value::as_str) {
        return format!("FAILED ({err})");
    }
    let get = |key: &str| figures.get(key).and_then(Value::as_f64).unwrap_or(f64::NAN);
    let ms = |key: &str| format!("{:.2} ms", get(key) * 1e3);
    match name {
        "server_ttfe" => format!("median {} p99 {} ({} runs)", ms("median_s"), ms("p99_s"), get("samples")),
        "server_runs_per_s" => {
            format!(
                "{} runs/s ({} connections, run median {})",
                get("runs_per_s"),
                get("connections"),
                ms("run_median_s")
            )
        }
        "server_v2_ttfe" => {
            format!(
                "median {} p99 {} ({} runs, run median {})",
                ms("median_s"),
                ms("p99_s"),
                get("samples"),
                ms("run_median_s")
            )
        }
        "server_v2_events_per_s" => format!(
            "{} events/s ({} runs, {} connections, run median {})",
            get("events_per_s"),
            get("runs"),
            get("connections"),
            ms("run_median_s")
        ),
        "server_hitl_round_trip" => format!(
            "median {} p99 {} (to the interrupt {}, resumed {}; {} round trips)",
            ms("median_s"),
            ms("p99_s"),
            ms("pause_median_s"),
            ms("resume_median_s"),
            get("samples")
        ),
        "server_concurrent_1000" => format!(
            "{}/{} complete, p50 {} p99 {}, all in {:.2} s",
            get("completed"),
            get("runs"),
            ms("p50_s"),
            ms("p99_s"),
            get("wall_s")
        ),
        "server_burst_200" => format!(
            "{}/{} complete, p50 {} p99 {}, slowest connect {} ({} resent), all in {:.2} s",
            get("completed"),
            get("runs"),
            ms("median_s"),
            ms("p99_s"),
            ms("connect_max_s"),
            get("connects_resent"),
            get("wall_s")
        ),
        "server_rss_100k" => format!(
            "{} MB after {} threads and {} runs, idle ({} MB right after, {} MB at start), made in {:.1} s",
            get("rss_mb"),
            get("threads"),
            get("runs"),
            get("rss_after_load_mb"),
            get("rss_start_mb"),
            get("fill_s")
        ),
        _ => format!(
            "{} MB for {} threads ({} MB idle), filled in {:.1} s",
            get("rss_mb"),
            get("threads"),
            get("rss_idle_mb"),
            get("fill_s")
        ),
    }
}

/// The human summary of one workload's line.
fn summary(name: &str, line: &Value) -> String {
    let mut text = format!("{name}\n  weft:      {}", side_text(name, &line["weft"]));
    if !line["weft_in_memory"].is_null() {
        text.push_str(&format!("\n  weft mem:  {}", side_text(name, &line["weft_in_memory"])));
    }
    if !line["langgraph"].is_null() {
        text.push_str(&format!("\n  langgraph: {}", side_text(name, &line["langgraph"])));
    }
    if let Some(ratio) = line["ratio"].as_f64() {
        text.push_str(&format!("\n  ratio:     {ratio}x in weft's favour"));
    }
    if let Some(ratio) = line["ratio_in_memory"].as_f64() {
        text.push_str(&format!("\n  ratio mem: {ratio}x in weft's favour (both in memory)"));
    }
    let met = |judged: &Value| match judged.as_bool() {
        Some(true) => "met",
        Some(false) => "NOT met",
        None if line["quick"] == json!(true) => "not judged by a quick run",
        None => "not known from this run",
    };
    text.push_str(&format!(
        "\n  goal:      {}: {}",
        line["goal"].as_str().unwrap_or(""),
        met(&line["goal_met"])
    ));
    // With weft in memory too, the goal is judged for each mode (the durable one above).
    if line["goal_met_in_memory"].is_boolean() {
        text.push_str(&format!(" (durable), {} (both in memory)", met(&line["goal_met_in_memory"])));
    }
    text
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse(&args) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::FAILURE;
        }
    };
    if args.list {
        for name in NAMES {
            println!("{name}");
        }
        return ExitCode::SUCCESS;
    }
    // One thread for the client: the servers get the rest of the machine.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("weft-bench-server: cannot start tokio: {err}");
            return ExitCode::FAILURE;
        }
    };
    if args.chaos || args.soak {
        return chaos_main(&runtime, args);
    }
    match runtime.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("weft-bench-server: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `--chaos` or `--soak`: runs the chaos or the soak test and prints its report as one JSON line.
fn chaos_main(runtime: &tokio::runtime::Runtime, args: Args) -> ExitCode {
    let defaults = chaos::ChaosConfig::default();
    let config = chaos::ChaosConfig {
        weft: args.weft.unwrap_or_default(),
        database_uri: args.database_uri.unwrap_or_default(),
        redis_server: args.redis_server.unwrap_or(defaults.redis_server),
        instances: args.instances.unwrap_or(defaults.instances).max(2),
        runs: args.runs.unwrap_or(if args.soak { 2000 } else { defaults.runs }),
        concurrency: args.concurrency.unwrap_or(defaults.concurrency),
        delay: defaults.delay,
    };
    if let Err(err) = servers::require_file(&config.weft, "weft-server-e2e") {
        eprintln!("weft-bench-server: {err}");
        return ExitCode::FAILURE;
    }
    let (name, ran) = if args.soak {
        ("soak", runtime.block_on(soak::run(config)))
    } else {
        ("chaos", runtime.block_on(chaos::run(config)))
    };
    match ran {
        Ok(report) => {
            println!("{}", json!({"workload": format!("server_{name}"), "weft": report}));
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("weft-bench-server: the {name} test FAILED: {err}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn parses_and_rejects_arguments() {
        let args = parse(&strings(&["--weft-bin", "/w", "--only", "server_ttfe", "--quick"])).unwrap();
        assert_eq!(args.only, ["server_ttfe"]);
        assert!(args.quick);
        assert!(
            parse(&strings(&["--weft-bin", "/w", "--only", "nope"]))
                .unwrap_err()
                .contains("unknown workload")
        );
        assert!(
            parse(&strings(&["--weft-bin", "/w", "--langgraph-bin", "/l"])).unwrap_err().contains("together")
        );
        assert!(parse(&strings(&["--quick"])).unwrap_err().contains("--weft-bin is required"));
        assert!(parse(&strings(&["--weft-bin"])).unwrap_err().contains("needs a value"));
        let chaos = parse(&strings(&[
            "--chaos",
            "--weft-bin",
            "/w",
            "--database-uri",
            "postgres://x",
            "--runs",
            "5",
        ]))
        .unwrap();
        assert!(chaos.chaos);
        assert_eq!(chaos.runs, Some(5));
        assert!(parse(&strings(&["--chaos", "--weft-bin", "/w"])).unwrap_err().contains("--database-uri"));
        assert!(parse(&strings(&["--soak", "--weft-bin", "/w"])).unwrap_err().contains("--database-uri"));
        assert!(parse(&strings(&["--soak", "--chaos", "--weft-bin", "/w", "--database-uri", "u"])).is_err());
        assert!(parse(&strings(&["--weft-bin", "/w", "--runs", "0"])).unwrap_err().contains("above 0"));
    }

    #[test]
    fn the_summary_judges_each_mode_when_weft_ran_in_memory_too() {
        let line = json!({
            "weft": {"runs_per_s": 800.0, "connections": 8, "run_median_s": 0.009},
            "weft_in_memory": {"runs_per_s": 13000.0, "connections": 8, "run_median_s": 0.0006},
            "langgraph": {"runs_per_s": 120.0, "connections": 8, "run_median_s": 0.06},
            "ratio": 6.7, "ratio_in_memory": 108.3,
            "goal": "20 times LangGraph's runs per second", "goal_met": false, "goal_met_in_memory": true,
        });
        let text = summary("server_runs_per_s", &line);
        assert!(text.ends_with("runs per second: NOT met (durable), met (both in memory)"), "{text}");
        let mut durable_only = line.clone();
        durable_only["goal_met_in_memory"] = Value::Null;
        assert!(summary("server_runs_per_s", &durable_only).ends_with("runs per second: NOT met"));
    }

    #[test]
    fn verdicts_compare_in_the_right_direction() {
        let figures = |pairs: &[(&str, f64)]| -> Figures {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect()
        };
        let (ratio, _, met) = verdict(
            "server_ttfe",
            Some(&figures(&[("median_s", 0.001)])),
            Some(&figures(&[("median_s", 0.8)])),
        );
        assert_eq!((ratio, met), (Some(800.0), Some(true)));
        let (_, _, met) = verdict(
            "server_ttfe",
            Some(&figures(&[("median_s", 0.001)])),
            Some(&figures(&[("median_s", 0.05)])),
        );
        assert_eq!(met, Some(false), "under 2 ms but only 50 times faster");
        let (_, _, met) = verdict("server_ttfe", Some(&figures(&[("median_s", 0.003)])), None);
        assert_eq!(met, Some(false), "over 2 ms misses whatever LangGraph does");
        let (ratio, _, met) = verdict(
            "server_runs_per_s",
            Some(&figures(&[("runs_per_s", 500.0)])),
            Some(&figures(&[("runs_per_s", 50.0)])),
        );
        assert_eq!((ratio, met), (Some(10.0), Some(false)));
        let (_, _, met) = verdict(
            "server_runs_per_s",
            Some(&figures(&[("runs_per_s", 500.0)])),
            Some(&figures(&[("runs_per_s", 20.0)])),
        );
        assert_eq!(met, Some(true));
        let (_, _, met) = verdict("server_runs_per_s", Some(&figures(&[("runs_per_s", 500.0)])), None);
        assert_eq!(met, None, "no goal without LangGraph's figure");
        let (_, _, met) = verdict(
            "server_concurrent_1000",
            Some(&figures(&[("completed", 999.0), ("runs", 1000.0)])),
            None,
        );
        assert_eq!(met, Some(false));
        let burst = |resent: f64| {
            verdict(
                "server_burst_200",
                Some(&figures(&[("completed", 200.0), ("runs", 200.0), ("connects_resent", resent)])),
                None,
            )
            .2
        };
        assert_eq!((burst(0.0), burst(3.0)), (Some(true), Some(false)), "a resent SYN misses the goal");
        let (_, _, met) =
            verdict("server_paused_10k", Some(&figures(&[("rss_mb", 150.0), ("threads", 10_000.0)])), None);
        assert_eq!(met, Some(true));
    }

    #[test]
    fn the_rss_goal_needs_the_full_load_and_a_fifth_of_langgraphs_memory() {
        let figures = |pairs: &[(&str, f64)]| -> Figures {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect()
        };
        let full = |mb| figures(&[("rss_mb", mb), ("threads", 100_000.0), ("runs", 10_000.0)]);
        let langgraph = figures(&[("rss_mb", 600.0)]);
        let (ratio, _, met) = verdict("server_rss_100k", Some(&full(100.0)), Some(&langgraph));
        assert_eq!((ratio, met), (Some(6.0), Some(true)));
        let (ratio, _, met) = verdict("server_rss_100k", Some(&full(200.0)), Some(&langgraph));
        assert_eq!((ratio, met), (Some(3.0), Some(false)));
        let small = figures(&[("rss_mb", 20.0), ("threads", 200.0), ("runs", 20.0)]);
        assert_eq!(verdict("server_rss_100k", Some(&small), Some(&langgraph)).2, Some(false));
        assert_eq!(verdict("server_rss_100k", Some(&full(100.0)), None).2, None, "judged against LangGraph");
        let line = json!({"weft": {"rss_mb": 90.5, "threads": 200, "runs": 20, "rss_after_load_mb": 95.0,
            "rss_start_mb": 10.0, "fill_s": 0.4}, "goal": "g", "quick": true});
        assert!(summary("server_rss_100k", &line).contains("90.5 MB after 200 threads and 20 runs"));
    }

    #[test]
    fn the_hitl_goal_is_a_median_round_trip_of_at_most_10_ms() {
        let figures = |pairs: &[(&str, f64)]| -> Figures {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect()
        };
        let (_, _, met) = verdict("server_hitl_round_trip", Some(&figures(&[("median_s", 0.004)])), None);
        assert_eq!(met, Some(true));
        let (_, _, met) = verdict("server_hitl_round_trip", Some(&figures(&[("median_s", 0.011)])), None);
        assert_eq!(met, Some(false));
        let (ratio, _, _) = verdict(
            "server_hitl_round_trip",
            Some(&figures(&[("median_s", 0.004)])),
            Some(&figures(&[("median_s", 0.8)])),
        );
        assert_eq!(ratio, Some(200.0));
        assert_eq!(verdict("server_hitl_round_trip", None, None).2, None);
    }
}
