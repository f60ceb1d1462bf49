//! `weft-bench-server --soak`: the soak test of a scaled-out weft-server. Like the chaos test ([`chaos`])
//! it starts a private Redis and N instances of `weft-server-e2e --chaos` on one PostgreSQL database, then
//! streams `runs` runs of the four-step `chaos` graph (no wait in its steps), spread over the instances,
//! `concurrency` at a time, and nothing is killed. It checks that every run ends within [`RUN_LIMIT`] of
//! its request (a stream that does not end fails the test, naming the run), that each ended `success`
//! exactly once with every event the workers published, and that the run queue is empty afterwards (no
//! run stays `pending` or `running`, none holds a lease). It is what finds a run that hangs once in
//! thousands, as a zombie run whose lease is renewed while it does nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::Method;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::chaos::{self, ChaosConfig, Deployment, Outcome};
use crate::http::Conn;

/// How long one run may take, from its thread's making to its stream's end.
pub(crate) const RUN_LIMIT: Duration = Duration::from_secs(60);

/// How long the checks after the load may take.
const CHECK_LIMIT: Duration = Duration::from_secs(300);

/// One run under [`RUN_LIMIT`]: its stream and, should it not end in time, the run's id and status.
async fn bounded_run(addrs: Arc<Vec<String>>, first: usize) -> Result<Outcome, String> {
    let deadline = Instant::now() + RUN_LIMIT;
    let mut turn = first;
    let thread = chaos::make_thread(&addrs, &mut turn, deadline).await?;
    let streamed = chaos::stream_run(&addrs, turn, thread.clone(), 0.0, deadline);
    match tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), streamed).await {
        Ok(outcome) => outcome,
        Err(_) => {
            let addr = &addrs[turn % addrs.len()];
            let run = chaos::run_on(addr, &thread).await.ok().flatten().unwrap_or_else(|| "(none)".into());
            let status = status_of(addr, &thread, &run).await;
            Err(format!(
                "run {run} on thread {thread}: its stream did not end within {RUN_LIMIT:?} (status {status})"
            ))
        }
    }
}

/// The run's status as the server has it, or why it cannot be read.
async fn status_of(addr: &str, thread: &str, run: &str) -> String {
    let read = async {
        let mut conn = Conn::open(addr).await?;
        conn.json(Method::GET, &format!("/threads/{thread}/runs/{run}"), None).await
    };
    match read.await {
        Ok(run) => run["status"].to_string(),
        Err(e) => format!("unknown: {e}"),
    }
}

/// The run queue's depth from an instance's `/metrics`: (waiting, leased).
async fn queue_depth(addr: &str) -> Result<(u64, u64), String> {
    let text = Conn::open(addr).await?.text(Method::GET, "/metrics").await?;
    let gauge = |state: &str| {
        let name = format!("weft_queue_runs{{state=\"{state}\"}}");
        text.lines()
            .find_map(|line| line.strip_prefix(name.as_str()))
            .and_then(|value| value.trim().parse::<f64>().ok())
            .map(|value| value as u64)
            .ok_or_else(|| format!("no {name} in /metrics"))
    };
    Ok((gauge("waiting")?, gauge("leased")?))
}

/// Runs the soak test; its report as JSON, or what went wrong (each run that failed, by id).
pub(crate) async fn run(config: ChaosConfig) -> Result<Value, String> {
    let started = Instant::now();
    let mut deployment = Deployment::new(config.clone())?;
    deployment.start_redis().await?;
    for i in 0..config.instances {
        deployment.start_instance(i).await?;
    }
    let addrs = Arc::new(deployment.addrs());
    let slots = Arc::new(Semaphore::new(config.concurrency.max(1)));
    let mut clients = JoinSet::new();
    let load = Instant::now();
    for i in 0..config.runs {
        let (addrs, slots) = (Arc::clone(&addrs), Arc::clone(&slots));
        clients.spawn(async move {
            let _slot = slots.acquire_owned().await.map_err(|e| e.to_string())?;
            let begun = Instant::now();
            bounded_run(addrs, i).await.map(|outcome| (outcome, begun.elapsed()))
        });
    }
    let mut outcomes = Vec::new();
    let mut failures = Vec::new();
    let mut slowest = Duration::ZERO;
    // Every client ends by itself within its bound: this waits for them all.
    while let Some(joined) = clients.join_next().await {
        match joined {
            Ok(Ok((outcome, took))) => {
                slowest = slowest.max(took);
                outcomes.push(outcome);
            }
            Ok(Err(e)) => failures.push(e),
            Err(e) => failures.push(format!("a client failed: {e}")),
        }
    }
    let load_s = load.elapsed().as_secs_f64();
    eprintln!("soak: {} runs over {} instances in {load_s:.1} s; checking", outcomes.len(), config.instances);
    let checks = async {
        for (i, outcome) in outcomes.iter().enumerate() {
            if let Err(e) = chaos::check_run(&addrs[i % addrs.len()], &deployment.redis_addr(), outcome).await
            {
                failures.push(e);
            }
        }
        match queue_depth(&addrs[0]).await {
            Ok((0, 0)) => {}
            Ok((waiting, leased)) => {
                failures.push(format!("the queue still holds {waiting} waiting and {leased} leased runs"))
            }
            Err(e) => failures.push(e),
        }
    };
    if tokio::time::timeout(CHECK_LIMIT, checks).await.is_err() {
        return Err(format!("the checks did not end within {CHECK_LIMIT:?}"));
    }
    let report = json!({
        "runs": config.runs,
        "completed": outcomes.len(),
        "instances": config.instances,
        "reconnects": outcomes.iter().map(|o| o.reconnects).sum::<usize>(),
        "slowest_run_s": (slowest.as_secs_f64() * 100.0).round() / 100.0,
        "load_s": (load_s * 10.0).round() / 10.0,
        "total_s": (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
        "failures": failures.len(),
    });
    if failures.is_empty() {
        let _ = std::fs::remove_dir_all(&deployment.scratch);
        Ok(report)
    } else {
        for failure in failures.iter().take(20) {
            eprintln!("soak: FAILED: {failure}");
        }
        Err(format!("{} checks failed ({report}); logs in {}", failures.len(), deployment.scratch.display()))
    }
}
