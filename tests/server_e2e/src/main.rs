//! Serves the end-to-end suite's graphs with weft-server: `weft-server-e2e --port N [--db PATH |
//! --in-memory] [--auth] [--chaos]` (a SQLite database in memory without `--db`; with `--in-memory`, no
//! database at all, as `langgraph dev` runs; with `--auth`, the users of `python/auth.py` by API key; with
//! `--chaos`, also the lifecycle tests' graphs (`chaos`, `long_reply`); built with the `scale` feature and `DATABASE_URI` and
//! `REDIS_URI` set, one instance of a scaled-out server; `--header-timeout`, `--idle-timeout` and
//! `--body-timeout` in seconds and `--max-connections` set those limits, for the lifecycle tests). `python/run.py` starts it beside
//! `langgraph dev` and runs the same suite against both.

mod graphs;

use std::process::ExitCode;

use std::time::Duration;

use weft_server::{Server, ServerBuilder};

/// jemalloc with the `jemalloc` feature, as docs/server.md recommends for a server binary: a run allocates a few large futures and
/// keeps its records and checkpoints, and glibc's malloc serves that mix from the top of its per-thread
/// heaps, faulting fresh pages in as they grow; jemalloc's size classes and thread caches do not (in
/// memory, 16.5 % more streamed runs per second at the median, bench/results/history.md).
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The connection limits given on the command line.
#[derive(Default)]
struct Limits {
    header: Option<Duration>,
    idle: Option<Duration>,
    body: Option<Duration>,
    connections: Option<usize>,
    backlog: Option<u32>,
}

impl Limits {
    fn apply(&self, mut builder: ServerBuilder) -> ServerBuilder {
        if let Some(t) = self.header {
            builder = builder.header_timeout(t);
        }
        if let Some(t) = self.idle {
            builder = builder.idle_timeout(t);
        }
        if let Some(t) = self.body {
            builder = builder.body_timeout(t);
        }
        if let Some(n) = self.connections {
            builder = builder.max_connections(n);
        }
        if let Some(n) = self.backlog {
            builder = builder.listen_backlog(n);
        }
        builder
    }
}

/// A number of seconds (positive, finite).
fn seconds(arg: Option<&String>) -> Option<Duration> {
    arg.and_then(|s| s.parse::<f64>().ok()).and_then(|s| Duration::try_from_secs_f64(s).ok())
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: weft-server-e2e --port PORT [--db PATH | --in-memory] [--auth] [--chaos] [--header-timeout S] \
         [--idle-timeout S] [--body-timeout S] [--max-connections N] [--listen-backlog N]"
    );
    ExitCode::FAILURE
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut port = None;
    let mut db = None;
    let mut auth = false;
    let mut chaos = false;
    let mut in_memory = false;
    let mut limits = Limits::default();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--port" => port = rest.next().and_then(|p| p.parse::<u16>().ok()),
            "--db" => db = rest.next().cloned(),
            "--auth" => auth = true,
            "--chaos" => chaos = true,
            "--in-memory" => in_memory = true,
            "--header-timeout" => match seconds(rest.next()) {
                Some(t) => limits.header = Some(t),
                None => return usage(),
            },
            "--idle-timeout" => match seconds(rest.next()) {
                Some(t) => limits.idle = Some(t),
                None => return usage(),
            },
            "--body-timeout" => match seconds(rest.next()) {
                Some(t) => limits.body = Some(t),
                None => return usage(),
            },
            "--max-connections" => match rest.next().and_then(|n| n.parse().ok()) {
                Some(n) => limits.connections = Some(n),
                None => return usage(),
            },
            "--listen-backlog" => match rest.next().and_then(|n| n.parse().ok()) {
                Some(n) => limits.backlog = Some(n),
                None => return usage(),
            },
            _ => return usage(),
        }
    }
    let Some(port) = port else { return usage() };
    if in_memory && db.is_some() {
        return usage();
    }
    let built = async {
        let builder = Server::builder()
            .graph("simple", graphs::simple()?)
            .graph("hitl", graphs::hitl()?)
            .graph("chat", graphs::chat()?)
            .graph("nested", graphs::nested()?)
            .graph("slow", graphs::slow()?)
            .graph("fail", graphs::fail()?)
            .graph("three", graphs::three()?)
            .graph("root", graphs::root()?)
            .graph("tool_calls", graphs::tool_calls()?)
            .graph("usage", graphs::usage()?)
            // The suite's webhook receivers listen on this machine (`python/langgraph.json` allows them too).
            .allow_loopback_webhooks(true);
        // The lifecycle tests' graphs, served for them alone (the suite compares the assistants with
        // LangGraph's).
        let builder = if chaos {
            builder.graph("chaos", graphs::chaos()?).graph("long_reply", graphs::long_reply()?)
        } else {
            builder
        };
        // The users of `python/auth.py`, each seeing what it made.
        let builder = if auth {
            let users = [("key-alice", "alice"), ("key-bob", "bob")];
            builder.api_keys(users).bearer_tokens(users)
        } else {
            builder
        };
        let builder = limits.apply(builder);
        let builder = match db {
            Some(path) => builder.sqlite(path),
            None if in_memory => builder.in_memory(),
            None => builder.sqlite_in_memory(),
        };
        #[cfg(feature = "scale")]
        let builder = builder.scale_from_env().run_lease(std::time::Duration::from_secs(3));
        Ok::<_, Box<dyn std::error::Error>>(builder.build().await?)
    };
    let server = match built.await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("weft-server-e2e: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mode = if in_memory { " (in memory, no database)" } else { "" };
    println!("weft-server-e2e listening on http://127.0.0.1:{port}{mode}");
    match server.serve(format!("127.0.0.1:{port}")).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weft-server-e2e: {e}");
            ExitCode::FAILURE
        }
    }
}
