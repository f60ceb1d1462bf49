//! The server workloads. Each takes a freshly started server and returns its figures as a JSON
//! object, or why it failed; every run it makes is checked (the first event is `metadata`, no `error`
//! event, the three-node graph ends with `count` 3, a paused thread holds its interrupt).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hyper::Method;
use serde_json::{Map, Value, json};
use tokio::sync::Barrier;
use tokio::task::JoinSet;

use crate::http::{Conn, Streamed};
use crate::servers::Server;
use crate::stats::{percentile, round, secs};

/// The workloads, in the order they run.
pub(crate) const NAMES: [&str; 9] = [
    "server_ttfe",
    "server_runs_per_s",
    "server_v2_ttfe",
    "server_v2_events_per_s",
    "server_concurrent_1000",
    "server_burst_200",
    "server_paused_10k",
    "server_hitl_round_trip",
    "server_rss_100k",
];

/// How much each workload does.
#[derive(Debug, Clone)]
pub(crate) struct Params {
    /// Streamed runs timed one after another for `server_ttfe`.
    pub(crate) ttfe_samples: usize,
    /// How long `server_runs_per_s` keeps its connections busy.
    pub(crate) throughput_time: Duration,
    /// Its connections, each streaming one run after another.
    pub(crate) throughput_connections: usize,
    /// Runs streamed at once by `server_concurrent_1000`.
    pub(crate) concurrent_runs: usize,
    /// Runs started at once, each on a connection it opens then, by `server_burst_200`.
    pub(crate) burst_runs: usize,
    /// Threads paused at an interrupt by `server_paused_10k`.
    pub(crate) paused_threads: usize,
    /// Connections that fill them.
    pub(crate) paused_connections: usize,
    /// Interrupt-and-resume round trips timed one after another for `server_hitl_round_trip`.
    pub(crate) hitl_samples: usize,
    /// Threads `server_rss_100k` creates, and the runs it makes on some of them.
    pub(crate) rss_load: RssLoad,
}

/// What `server_rss_100k` does before reading the server's memory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RssLoad {
    /// Threads created (`POST /threads`).
    pub(crate) threads: usize,
    /// `/runs/wait` runs of the three-node graph, one on each of this many threads spread evenly over them.
    pub(crate) runs: usize,
    /// Keep-alive connections that share the work.
    pub(crate) connections: usize,
    /// How long the server is left idle before the second reading.
    pub(crate) idle: Duration,
}

/// The figures of one workload on one server.
pub(crate) type Figures = Map<String, Value>;

/// How long one run may take before the workload counts as failed.
pub(crate) const RUN_LIMIT: Duration = Duration::from_secs(900);

/// Runs workload `name` against `server`.
pub(crate) async fn run(name: &str, server: &Server, params: &Params) -> Result<Figures, String> {
    match name {
        "server_ttfe" => ttfe(server, params.ttfe_samples).await,
        "server_runs_per_s" => {
            throughput(server, params.throughput_connections, params.throughput_time).await
        }
        "server_v2_ttfe" => crate::v2::ttfe(server, params.ttfe_samples).await,
        "server_v2_events_per_s" => {
            crate::v2::events_per_s(server, params.throughput_connections, params.throughput_time).await
        }
        "server_concurrent_1000" => concurrent(server, params.concurrent_runs).await,
        "server_burst_200" => burst(server, params.burst_runs).await,
        "server_paused_10k" => paused(server, params.paused_threads, params.paused_connections).await,
        "server_hitl_round_trip" => hitl_round_trip(server, params.hitl_samples).await,
        "server_rss_100k" => rss_after_load(server, params.rss_load).await,
        other => Err(format!("unknown workload `{other}`")),
    }
}

/// Creates a thread; its id.
pub(crate) async fn create_thread(conn: &mut Conn) -> Result<String, String> {
    let thread = conn.json(Method::POST, "/threads", Some(&json!({}))).await?;
    thread["thread_id"].as_str().map(str::to_owned).ok_or_else(|| format!("no thread_id in {thread}"))
}

/// Streams the three-node graph on `thread` and checks what came: `metadata` first, no error, the last
/// `values` event with `count` 3.
async fn stream_three(conn: &mut Conn, thread: &str) -> Result<Streamed, String> {
    let body = json!({"assistant_id": "three", "input": {"count": 0}, "stream_mode": ["values"]});
    let streamed = conn.stream(&format!("/threads/{thread}/runs/stream"), &body).await?;
    check_three(&streamed)?;
    Ok(streamed)
}

/// The checks of [`stream_three`].
pub(crate) fn check_three(streamed: &Streamed) -> Result<(), String> {
    let names: Vec<&str> = streamed.events.iter().map(|e| e.name.as_str()).collect();
    if names.first() != Some(&"metadata") {
        return Err(format!("the first event is not metadata: {names:?}"));
    }
    if let Some(error) = streamed.events.iter().find(|e| e.name == "error") {
        return Err(format!("the run failed: {}", error.data));
    }
    let last = streamed.events.iter().rev().find(|e| e.name == "values").ok_or("no values event")?;
    let values: Value = serde_json::from_str(&last.data).map_err(|e| format!("values not JSON: {e}"))?;
    if values["count"] != json!(3) {
        return Err(format!("the run ended with {values}, expected count 3"));
    }
    Ok(())
}

/// Adds the median, p99, min and max of `samples` as `{prefix}median_s` and so on.
pub(crate) fn duration_figures(figures: &mut Figures, prefix: &str, samples: &[Duration]) {
    for (name, p) in [("median", 50.0), ("p99", 99.0), ("min", 0.0), ("max", 100.0)] {
        if let Some(d) = percentile(samples, p) {
            figures.insert(format!("{prefix}{name}_s"), json!(secs(d)));
        }
    }
}

/// Time to first event: one connection, one run at a time, each on a new thread (made untimed).
async fn ttfe(server: &Server, samples: usize) -> Result<Figures, String> {
    let mut conn = Conn::open(&server.addr).await?;
    for _ in 0..3 {
        let thread = create_thread(&mut conn).await?;
        stream_three(&mut conn, &thread).await?;
    }
    let mut firsts = Vec::with_capacity(samples);
    let mut totals = Vec::with_capacity(samples);
    for _ in 0..samples {
        let thread = create_thread(&mut conn).await?;
        let streamed = stream_three(&mut conn, &thread).await?;
        firsts.push(streamed.first_event);
        totals.push(streamed.total);
    }
    let mut figures = Figures::new();
    duration_figures(&mut figures, "", &firsts);
    duration_figures(&mut figures, "run_", &totals);
    figures.insert("samples".into(), json!(samples));
    Ok(figures)
}

/// The timed loop of the throughput workloads: `connections` workers, spread over the server's
/// instances, each made ready untimed by `prepare` (given its instance's address: its connections, its
/// thread and two warm-up runs), then, once all are ready, running `step` one run after another for `time`
/// (runs still going at the end finish and count). Each run's latency, and the time the loop took.
pub(crate) async fn timed_runs<W, Prep, PrepFut, Step, StepFut>(
    server: &Server,
    connections: usize,
    time: Duration,
    prepare: Prep,
    step: Step,
) -> Result<(Vec<Duration>, Duration), String>
where
    W: Send + 'static,
    Prep: Fn(String) -> PrepFut,
    PrepFut: Future<Output = Result<W, String>> + Send + 'static,
    Step: Fn(W) -> StepFut + Clone + Send + 'static,
    StepFut: Future<Output = Result<(W, Duration), String>> + Send + 'static,
{
    let barrier = Arc::new(Barrier::new(connections + 1));
    let mut workers = JoinSet::new();
    for i in 0..connections {
        let prepared = prepare(server.addrs[i % server.addrs.len()].clone());
        let (barrier, step) = (Arc::clone(&barrier), step.clone());
        workers.spawn(async move {
            let prepared = prepared.await;
            barrier.wait().await;
            let mut worker = prepared?;
            let end = Instant::now() + time;
            let mut latencies = Vec::new();
            while Instant::now() < end {
                let (next, latency) = step(worker).await?;
                worker = next;
                latencies.push(latency);
            }
            Ok::<_, String>(latencies)
        });
    }
    barrier.wait().await;
    let started = Instant::now();
    let mut latencies = Vec::new();
    while let Some(joined) = workers.join_next().await {
        latencies.extend(joined.map_err(|e| format!("a worker stopped: {e}"))??);
    }
    Ok((latencies, started.elapsed()))
}

/// The figures every [`timed_runs`] load reports: its runs, their latencies, the warm-up runs, the time
/// and the connections.
pub(crate) fn load_figures(latencies: &[Duration], elapsed: Duration, connections: usize) -> Figures {
    let mut figures = Figures::new();
    figures.insert("runs".into(), json!(latencies.len()));
    // Each worker ran two runs on its thread before the timing started.
    figures.insert("warmup_runs".into(), json!(2 * connections));
    figures.insert("elapsed_s".into(), json!(round(elapsed.as_secs_f64(), 3)));
    figures.insert("connections".into(), json!(connections));
    duration_figures(&mut figures, "run_", latencies);
    figures
}

/// Streamed runs per second: `connections` keep-alive connections, each with its own thread, each
/// streaming one run after another for `time`; runs still going at the end finish and count.
async fn throughput(server: &Server, connections: usize, time: Duration) -> Result<Figures, String> {
    let prepare = |addr: String| async move {
        let mut conn = Conn::open(&addr).await?;
        let thread = create_thread(&mut conn).await?;
        for _ in 0..2 {
            stream_three(&mut conn, &thread).await?;
        }
        Ok::<_, String>((conn, thread))
    };
    let step = |(mut conn, thread): (Conn, String)| async move {
        let total = stream_three(&mut conn, &thread).await?.total;
        Ok::<_, String>(((conn, thread), total))
    };
    let (latencies, elapsed) = timed_runs(server, connections, time, prepare, step).await?;
    let mut figures = load_figures(&latencies, elapsed, connections);
    figures.insert("runs_per_s".into(), json!(round(latencies.len() as f64 / elapsed.as_secs_f64(), 1)));
    Ok(figures)
}

/// `runs` streamed runs at once, each on its own connection and thread (both made untimed before): how
/// many complete, and their latencies from the request to the end of the stream.
async fn concurrent(server: &Server, runs: usize) -> Result<Figures, String> {
    let mut conns = Vec::with_capacity(runs);
    while conns.len() < runs {
        let batch = (runs - conns.len()).min(100);
        let mut opening = JoinSet::new();
        for i in 0..batch {
            let addr = server.addrs[(conns.len() + i) % server.addrs.len()].clone();
            opening.spawn(async move {
                let mut conn = Conn::open(&addr).await?;
                let thread = create_thread(&mut conn).await?;
                Ok::<_, String>((conn, thread))
            });
        }
        while let Some(joined) = opening.join_next().await {
            conns.push(joined.map_err(|e| format!("a connection task stopped: {e}"))??);
        }
    }
    let barrier = Arc::new(Barrier::new(runs + 1));
    let mut streams = JoinSet::new();
    for (mut conn, thread) in conns {
        let barrier = Arc::clone(&barrier);
        streams.spawn(async move {
            barrier.wait().await;
            match tokio::time::timeout(RUN_LIMIT, stream_three(&mut conn, &thread)).await {
                Ok(result) => {
                    result.map(|s| Timed { connect: None, first_event: s.first_event, total: s.total })
                }
                Err(_) => Err(format!("no end after {} s", RUN_LIMIT.as_secs())),
            }
        });
    }
    gather(streams, runs, &barrier).await
}

/// One run of many started at once: its connect (when timed), first event and end, from the start.
struct Timed {
    connect: Option<Duration>,
    first_event: Duration,
    total: Duration,
}

/// Lets `runs` tasks waiting at `barrier` go, then gathers their figures: how many completed, their
/// latencies and first events, and their connects where timed (with how many waited for a resent SYN).
async fn gather(
    mut tasks: JoinSet<Result<Timed, String>>,
    runs: usize,
    barrier: &Barrier,
) -> Result<Figures, String> {
    barrier.wait().await;
    let started = Instant::now();
    let (mut connects, mut firsts, mut latencies, mut errors) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok(timed)) => {
                connects.extend(timed.connect);
                firsts.push(timed.first_event);
                latencies.push(timed.total);
            }
            Ok(Err(err)) => errors.push(err),
            Err(err) => errors.push(format!("a run task stopped: {err}")),
        }
    }
    let wall = started.elapsed();
    let mut figures = Figures::new();
    figures.insert("runs".into(), json!(runs));
    figures.insert("completed".into(), json!(latencies.len()));
    duration_figures(&mut figures, "", &latencies);
    if let Some(d) = percentile(&latencies, 50.0) {
        figures.insert("p50_s".into(), json!(secs(d)));
    }
    duration_figures(&mut figures, "first_event_", &firsts);
    if !connects.is_empty() {
        duration_figures(&mut figures, "connect_", &connects);
        let resent = connects.iter().filter(|&&c| c >= RESENT_SYN).count();
        figures.insert("connects_resent".into(), json!(resent));
    }
    figures.insert("wall_s".into(), json!(round(wall.as_secs_f64(), 3)));
    if let Some(first) = errors.first() {
        return Err(format!("{} of {runs} runs failed; the first: {first}", errors.len()));
    }
    Ok(figures)
}

/// A connect that takes this long waited for its SYN to be sent again (the first resend is 1 s after).
const RESENT_SYN: Duration = Duration::from_millis(900);

/// `runs` streamed runs started at once, each on a connection it opens then, as clients arriving
/// together do (threads made untimed before): the connects are timed with the runs. A connect of a
/// second or more means the server's listen backlog overflowed and the client's SYN was sent again.
async fn burst(server: &Server, runs: usize) -> Result<Figures, String> {
    let mut setup = Conn::open(&server.addr).await?;
    let mut threads = Vec::with_capacity(runs);
    while threads.len() < runs {
        threads.push(create_thread(&mut setup).await?);
    }
    drop(setup);
    let barrier = Arc::new(Barrier::new(runs + 1));
    let mut tasks = JoinSet::new();
    for (i, thread) in threads.into_iter().enumerate() {
        let addr = server.addrs[i % server.addrs.len()].clone();
        let barrier = Arc::clone(&barrier);
        tasks.spawn(async move {
            barrier.wait().await;
            let started = Instant::now();
            let run = async {
                let mut conn = Conn::open(&addr).await?;
                let connected = started.elapsed();
                let streamed = stream_three(&mut conn, &thread).await?;
                let first_event = connected + streamed.first_event;
                Ok::<_, String>(Timed { connect: Some(connected), first_event, total: started.elapsed() })
            };
            match tokio::time::timeout(RUN_LIMIT, run).await {
                Ok(result) => result,
                Err(_) => Err(format!("no end after {} s", RUN_LIMIT.as_secs())),
            }
        });
    }
    gather(tasks, runs, &barrier).await
}

/// `threads` threads, each run to the `hitl` graph's interrupt (by `connections` connections, `/wait`
/// runs), then the server's resident memory.
async fn paused(server: &Server, threads: usize, connections: usize) -> Result<Figures, String> {
    let idle_mb = server.rss_mb()?;
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = JoinSet::new();
    for _ in 0..connections.min(threads.max(1)) {
        let addr = server.addr.clone();
        let next = Arc::clone(&next);
        workers.spawn(async move {
            let mut conn = Conn::open(&addr).await?;
            while next.fetch_add(1, Ordering::Relaxed) < threads {
                let thread = create_thread(&mut conn).await?;
                let body = json!({"assistant_id": "hitl", "input": {"items": ["x"]}});
                let out =
                    conn.json(Method::POST, &format!("/threads/{thread}/runs/wait"), Some(&body)).await?;
                let question = &out["__interrupt__"][0]["value"]["question"];
                if question != "approve?" || out["items"] != json!(["x"]) {
                    return Err(format!("thread {thread} did not pause at the interrupt: {out}"));
                }
            }
            Ok::<_, String>(())
        });
    }
    while let Some(joined) = workers.join_next().await {
        joined.map_err(|e| format!("a worker stopped: {e}"))??;
    }
    let fill = started.elapsed();
    let mut conn = Conn::open(&server.addr).await?;
    let count = conn.json(Method::POST, "/threads/count", Some(&json!({"status": "interrupted"}))).await?;
    if count.as_u64() != Some(threads as u64) {
        return Err(format!("{count} threads are interrupted, expected {threads}"));
    }
    // Let the last runs' bookkeeping settle before reading the memory.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_mb = server.rss_mb()?;
    let mut figures = Figures::new();
    figures.insert("threads".into(), json!(threads));
    figures.insert("rss_mb".into(), json!(round(rss_mb, 1)));
    figures.insert("rss_idle_mb".into(), json!(round(idle_mb, 1)));
    figures
        .insert("kb_per_thread".into(), json!(round((rss_mb - idle_mb) * 1024.0 / threads.max(1) as f64, 2)));
    figures.insert("fill_s".into(), json!(round(fill.as_secs_f64(), 3)));
    figures.insert("threads_per_s".into(), json!(round(threads as f64 / fill.as_secs_f64(), 1)));
    figures.insert("connections".into(), json!(connections));
    figures.insert("server_pid".into(), json!(server.pid()));
    Ok(figures)
}

/// Whether thread number `n` (from 0) of `load` gets a run: every `threads / runs`-th thread, until `runs`
/// of them have one.
fn gets_run(load: RssLoad, n: usize) -> bool {
    if load.runs == 0 {
        return false;
    }
    let stride = (load.threads / load.runs).max(1);
    n.is_multiple_of(stride) && n / stride < load.runs
}

/// Creates `load.threads` threads and makes `load.runs` `/runs/wait` runs of the three-node graph on
/// some of them (each checked to end with `count` 3), over `load.connections` keep-alive connections at
/// once; then the server's resident memory right after, and again after `load.idle` without requests.
async fn rss_after_load(server: &Server, load: RssLoad) -> Result<Figures, String> {
    let start_mb = server.rss_mb()?;
    let next = Arc::new(AtomicUsize::new(0));
    let runs_made = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = JoinSet::new();
    for _ in 0..load.connections.clamp(1, load.threads.max(1)) {
        let addr = server.addr.clone();
        let (next, runs_made) = (Arc::clone(&next), Arc::clone(&runs_made));
        workers.spawn(async move {
            let mut conn = Conn::open(&addr).await?;
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= load.threads {
                    return Ok::<_, String>(());
                }
                let thread = create_thread(&mut conn).await?;
                if !gets_run(load, n) {
                    continue;
                }
                let body = json!({"assistant_id": "three", "input": {"count": 0}});
                let out =
                    conn.json(Method::POST, &format!("/threads/{thread}/runs/wait"), Some(&body)).await?;
                if out["count"] != json!(3) {
                    return Err(format!("the run on thread {thread} ended with {out}, expected count 3"));
                }
                runs_made.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    while let Some(joined) = workers.join_next().await {
        joined.map_err(|e| format!("a worker stopped: {e}"))??;
    }
    let fill = started.elapsed();
    let after_mb = server.rss_mb()?;
    let runs = runs_made.load(Ordering::Relaxed);
    let mut conn = Conn::open(&server.addr).await?;
    let count = conn.json(Method::POST, "/threads/count", Some(&json!({}))).await?;
    if count.as_u64() != Some(load.threads as u64) || runs != load.runs.min(load.threads) {
        return Err(format!("{count} threads and {runs} runs, expected {} and {}", load.threads, load.runs));
    }
    drop(conn);
    tokio::time::sleep(load.idle).await;
    let idle_mb = server.rss_mb()?;
    let mut figures = Figures::new();
    figures.insert("threads".into(), json!(load.threads));
    figures.insert("runs".into(), json!(runs));
    figures.insert("rss_mb".into(), json!(round(idle_mb, 1)));
    figures.insert("rss_after_load_mb".into(), json!(round(after_mb, 1)));
    figures.insert("rss_start_mb".into(), json!(round(start_mb, 1)));
    figures.insert("idle_s".into(), json!(load.idle.as_secs_f64()));
    figures.insert(
        "kb_per_thread".into(),
        json!(round((idle_mb - start_mb) * 1024.0 / load.threads.max(1) as f64, 2)),
    );
    figures.insert("fill_s".into(), json!(round(fill.as_secs_f64(), 3)));
    figures.insert("connections".into(), json!(load.connections));
    figures.insert("server_pid".into(), json!(server.pid()));
    Ok(figures)
}

/// Streams the `hitl` graph on `thread` until it pauses at its interrupt, and checks the question came.
async fn stream_to_interrupt(conn: &mut Conn, thread: &str) -> Result<Streamed, String> {
    let body = json!({"assistant_id": "hitl", "input": {"items": []}, "stream_mode": ["updates"]});
    let streamed = conn.stream(&format!("/threads/{thread}/runs/stream"), &body).await?;
    check_clean(&streamed)?;
    let paused = streamed.events.iter().any(|e| {
        e.name == "updates"
            && serde_json::from_str::<Value>(&e.data)
                .is_ok_and(|v| v["__interrupt__"][0]["value"]["question"] == json!("approve?"))
    });
    if !paused {
        return Err(format!("thread {thread} did not pause at the interrupt"));
    }
    Ok(streamed)
}

/// Resumes the paused `hitl` thread with `yes` and checks the answer reached the state.
async fn stream_resume(conn: &mut Conn, thread: &str) -> Result<Streamed, String> {
    let body = json!({"assistant_id": "hitl", "command": {"resume": "yes"}, "stream_mode": ["values"]});
    let streamed = conn.stream(&format!("/threads/{thread}/runs/stream"), &body).await?;
    check_clean(&streamed)?;
    let last = streamed.events.iter().rev().find(|e| e.name == "values").ok_or("no values event")?;
    let values: Value = serde_json::from_str(&last.data).map_err(|e| format!("values not JSON: {e}"))?;
    if values["items"] != json!(["answer:yes", "b"]) {
        return Err(format!("the resumed run ended with {values}, expected items [answer:yes, b]"));
    }
    Ok(streamed)
}

/// `metadata` first and no `error` event.
fn check_clean(streamed: &Streamed) -> Result<(), String> {
    if streamed.events.first().map(|e| e.name.as_str()) != Some("metadata") {
        return Err("the first event is not metadata".to_owned());
    }
    match streamed.events.iter().find(|e| e.name == "error") {
        Some(error) => Err(format!("the run failed: {}", error.data)),
        None => Ok(()),
    }
}

/// Human in the loop: one connection, on a new thread each time (made untimed), a streamed run to the
/// `hitl` graph's interrupt, then a streamed run resuming it to the end; the round trip is the two
/// requests from the first POST to the second stream's end.
async fn hitl_round_trip(server: &Server, samples: usize) -> Result<Figures, String> {
    let mut conn = Conn::open(&server.addr).await?;
    for _ in 0..3 {
        let thread = create_thread(&mut conn).await?;
        stream_to_interrupt(&mut conn, &thread).await?;
        stream_resume(&mut conn, &thread).await?;
    }
    let (mut trips, mut pauses, mut resumes) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..samples {
        let thread = create_thread(&mut conn).await?;
        let started = Instant::now();
        let paused = stream_to_interrupt(&mut conn, &thread).await?;
        let resumed = stream_resume(&mut conn, &thread).await?;
        trips.push(started.elapsed());
        pauses.push(paused.total);
        resumes.push(resumed.total);
    }
    let mut figures = Figures::new();
    duration_figures(&mut figures, "", &trips);
    duration_figures(&mut figures, "pause_", &pauses);
    duration_figures(&mut figures, "resume_", &resumes);
    figures.insert("samples".into(), json!(samples));
    Ok(figures)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::Event;

    fn streamed(events: &[(&str, &str)]) -> Streamed {
        Streamed {
            first_event: Duration::from_millis(1),
            total: Duration::from_millis(2),
            events: events
                .iter()
                .map(|(n, d)| Event { name: (*n).to_owned(), data: (*d).to_owned(), id: None })
                .collect(),
        }
    }

    #[test]
    fn a_run_passes_only_with_metadata_first_no_error_and_count_three() {
        let good = [("metadata", "{}"), ("values", r#"{"count":0}"#), ("values", r#"{"count":3}"#)];
        assert_eq!(check_three(&streamed(&good)), Ok(()));
        let late = [("values", r#"{"count":3}"#), ("metadata", "{}")];
        assert!(check_three(&streamed(&late)).unwrap_err().contains("not metadata"));
        let failed = [("metadata", "{}"), ("values", r#"{"count":3}"#), ("error", r#"{"error":"X"}"#)];
        assert!(check_three(&streamed(&failed)).unwrap_err().contains("failed"));
        let short = [("metadata", "{}"), ("values", r#"{"count":2}"#)];
        assert!(check_three(&streamed(&short)).unwrap_err().contains("expected count 3"));
        assert!(check_three(&streamed(&[("metadata", "{}")])).unwrap_err().contains("no values"));
    }

    #[test]
    fn runs_spread_evenly_over_the_threads_and_number_exactly_runs() {
        let load = |threads, runs| RssLoad { threads, runs, connections: 1, idle: Duration::ZERO };
        let chosen = |l: RssLoad| (0..l.threads).filter(|&n| gets_run(l, n)).collect::<Vec<_>>();
        assert_eq!(chosen(load(100_000, 10_000)).len(), 10_000);
        assert_eq!(chosen(load(20, 4)), [0, 5, 10, 15]);
        assert_eq!(chosen(load(10, 3)), [0, 3, 6]);
        assert_eq!(chosen(load(3, 5)), [0, 1, 2], "never more runs than threads");
        assert!(chosen(load(10, 0)).is_empty());
    }
}
