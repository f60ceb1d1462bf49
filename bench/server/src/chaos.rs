//! `weft-bench-server --chaos`: the chaos test of a scaled-out weft-server. It starts a private Redis on a
//! free port (append-only file in a scratch folder, so that a restart keeps its streams) and N instances of
//! `weft-server-e2e --chaos` (built with `scale`) on one PostgreSQL database, then streams `runs` runs of
//! the four-step `chaos` graph (`stream_resumable`), spread over the instances, `concurrency` at a time.
//! Meanwhile it SIGKILLs one instance once a fifth of the runs are done, at the start of one of its
//! steps (so that it always leaves a run to take over), and starts it again, and restarts
//! Redis once half are done. A client whose stream breaks reconnects to the next instance with the
//! `Last-Event-ID` of the last event it got. Then it checks:
//!
//! - every run completed exactly once: one run on its thread, `success`, the thread's state holding each
//!   step once;
//! - no stream lost an event: what each client got, in order, is exactly what the run's workers published
//!   (the run's stream in Redis), ids strictly increasing;
//! - no finished task ran twice: the steps' own log (`WEFT_CHAOS_LOG`, a line per step started) shows each
//!   step once per run, except, in a run the killed instance was running, the step it was in at the kill;
//!   and at least one run was taken over by another instance.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hyper::Method;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::http::{Conn, Partial};
use crate::sse::Event;

/// The graph's steps, in order (`tests/server_e2e/src/graphs.rs`).
const STEPS: [&str; 4] = ["step_1", "step_2", "step_3", "step_4"];

/// What every Redis key of the deployment starts with.
const PREFIX: &str = "chaos:";

/// How long one run may take, reconnections included.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// How long the whole load may take.
const LOAD_LIMIT: Duration = Duration::from_secs(300);

/// What the chaos test does.
#[derive(Debug, Clone)]
pub(crate) struct ChaosConfig {
    /// `weft-server-e2e`, built with the `scale` feature.
    pub(crate) weft: PathBuf,
    /// A PostgreSQL database of its own (made and dropped by the caller).
    pub(crate) database_uri: String,
    /// `redis-server`.
    pub(crate) redis_server: PathBuf,
    /// Server instances.
    pub(crate) instances: usize,
    /// Runs streamed in all.
    pub(crate) runs: usize,
    /// Runs streamed at once.
    pub(crate) concurrency: usize,
    /// Seconds each step waits.
    pub(crate) delay: f64,
}

impl Default for ChaosConfig {
    fn default() -> Self {
        Self {
            weft: PathBuf::new(),
            database_uri: String::new(),
            redis_server: PathBuf::from("redis-server"),
            instances: 3,
            runs: 200,
            concurrency: 30,
            delay: 0.1,
        }
    }
}

/// Sends SIGTERM to `child` and waits up to 10 s for it to exit, then kills it.
async fn terminate(child: &mut Child) {
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The processes of the test: Redis and the instances (killed when dropped) and their scratch folder.
#[derive(Debug)]
pub(crate) struct Deployment {
    config: ChaosConfig,
    pub(crate) scratch: PathBuf,
    redis_port: u16,
    redis: Option<Child>,
    ports: Vec<u16>,
    instances: Vec<Option<Child>>,
}

impl Drop for Deployment {
    fn drop(&mut self) {
        for child in self.instances.iter_mut().flatten().chain(self.redis.as_mut()) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Deployment {
    pub(crate) fn new(config: ChaosConfig) -> Result<Self, String> {
        let scratch = std::env::temp_dir().join(format!("weft-chaos-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&scratch);
        std::fs::create_dir_all(scratch.join("redis"))
            .map_err(|e| format!("cannot create {}: {e}", scratch.display()))?;
        // Redis's port and the instances', all different.
        let mut ports = crate::servers::free_ports(config.instances + 1)?;
        let redis_port = ports.pop().ok_or("no free port")?;
        Ok(Self {
            instances: (0..config.instances).map(|_| None).collect(),
            redis_port,
            redis: None,
            ports,
            scratch,
            config,
        })
    }

    pub(crate) fn redis_addr(&self) -> String {
        format!("127.0.0.1:{}", self.redis_port)
    }

    pub(crate) fn addrs(&self) -> Vec<String> {
        self.ports.iter().map(|port| format!("127.0.0.1:{port}")).collect()
    }

    fn log(&self, name: &str) -> Result<(std::fs::File, std::fs::File), String> {
        let path = self.scratch.join(name);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let copy = file.try_clone().map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        Ok((file, copy))
    }

    /// Starts Redis (again: its append-only file brings its data back) and waits for its `PONG`.
    pub(crate) async fn start_redis(&mut self) -> Result<(), String> {
        let (out, err) = self.log("redis.log")?;
        let child = Command::new(&self.config.redis_server)
            .args(["--bind", "127.0.0.1", "--port", &self.redis_port.to_string()])
            .args(["--save", "", "--appendonly", "yes", "--daemonize", "no"])
            .arg("--dir")
            .arg(self.scratch.join("redis"))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.config.redis_server.display()))?;
        self.redis = Some(child);
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            if redis_answers(&self.redis_addr()).await {
                return Ok(());
            }
            if Instant::now() > end {
                return Err(format!("Redis did not answer within 10 s (see {})", self.scratch.display()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops Redis as an operator would (SIGTERM: it writes its file and exits).
    async fn stop_redis(&mut self) {
        if let Some(mut child) = self.redis.take() {
            terminate(&mut child).await;
        }
    }

    /// Starts instance `i` and waits until it answers `/ok`; returns its process id.
    pub(crate) async fn start_instance(&mut self, i: usize) -> Result<u32, String> {
        let (out, err) = self.log(&format!("instance-{i}.log"))?;
        let child = Command::new(&self.config.weft)
            .args(["--port", &self.ports[i].to_string(), "--chaos"])
            .env("DATABASE_URI", &self.config.database_uri)
            .env("REDIS_URI", format!("redis://{}/", self.redis_addr()))
            .env("REDIS_KEY_PREFIX", PREFIX)
            .env("WEFT_CHAOS_LOG", self.scratch.join("steps.log"))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.config.weft.display()))?;
        let pid = child.id();
        self.instances[i] = Some(child);
        let addr = self.addrs()[i].clone();
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(Ok(Some(status))) = self.instances[i].as_mut().map(Child::try_wait) {
                let log = self.scratch.join(format!("instance-{i}.log"));
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = said.lines().rev().take(20).collect();
                return Err(format!(
                    "instance {i} exited at start-up ({status}); the end of {}:\n{}",
                    log.display(),
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                ));
            }
            if let Ok(mut conn) = Conn::open(&addr).await {
                if conn.json(Method::GET, "/ok", None).await.is_ok() {
                    return Ok(pid);
                }
            }
            if Instant::now() > end {
                return Err(format!("instance {i} did not answer /ok within 30 s"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The process id of instance `i`, while it runs.
    fn pid(&self, i: usize) -> Option<u32> {
        self.instances[i].as_ref().map(Child::id)
    }

    /// SIGKILLs instance `i`; returns its process id.
    fn kill_instance(&mut self, i: usize) -> Option<u32> {
        let mut child = self.instances[i].take()?;
        let pid = child.id();
        let _ = child.kill();
        let _ = child.wait();
        Some(pid)
    }
}

/// What one client saw of its run.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) thread: String,
    pub(crate) run_id: String,
    pub(crate) events: Vec<Event>,
    pub(crate) reconnects: usize,
}

/// The run id in a `Content-Location` (`/threads/{t}/runs/{run_id}`) or a `metadata` event.
fn run_id_of(partial: &Partial) -> Option<String> {
    let from_location = partial
        .location
        .as_deref()
        .and_then(|l| l.split_once("/runs/"))
        .map(|(_, rest)| rest.split('/').next().unwrap_or(rest).to_owned())
        .filter(|id| !id.is_empty());
    from_location.or_else(|| {
        let first = partial.events.iter().find(|e| e.name == "metadata")?;
        let data: Value = serde_json::from_str(&first.data).ok()?;
        data["run_id"].as_str().map(str::to_owned)
    })
}

/// Makes a thread through the first instance that answers, starting at `turn`.
pub(crate) async fn make_thread(
    addrs: &[String],
    turn: &mut usize,
    deadline: Instant,
) -> Result<String, String> {
    loop {
        let addr = &addrs[*turn % addrs.len()];
        let made = async {
            let mut conn = Conn::open(addr).await?;
            let thread = conn.json(Method::POST, "/threads", Some(&json!({}))).await?;
            thread["thread_id"].as_str().map(str::to_owned).ok_or_else(|| format!("no thread_id in {thread}"))
        }
        .await;
        match made {
            Ok(thread) => return Ok(thread),
            Err(e) if Instant::now() > deadline => return Err(format!("cannot make a thread: {e}")),
            Err(_) => {
                *turn += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// The run already on `thread`, if a request that broke made one.
pub(crate) async fn run_on(addr: &str, thread: &str) -> Result<Option<String>, String> {
    let mut conn = Conn::open(addr).await?;
    let runs = conn.json(Method::GET, &format!("/threads/{thread}/runs"), None).await?;
    Ok(runs.as_array().and_then(|r| r.first()).and_then(|r| r["run_id"].as_str()).map(str::to_owned))
}

/// Streams one run of `chaos` from the instance at `first`, reconnecting to the next instance (with the
/// last event's id) whenever the stream breaks, until it ends.
async fn one_run(addrs: Arc<Vec<String>>, first: usize, delay: f64) -> Result<Outcome, String> {
    let deadline = Instant::now() + RUN_LIMIT;
    let mut turn = first;
    let thread = make_thread(&addrs, &mut turn, deadline).await?;
    stream_run(&addrs, turn, thread, delay, deadline).await
}

/// Streams one run of `chaos` on `thread` from the instance at `turn`, reconnecting to the next instance
/// (with the last event's id) whenever the stream breaks, until it ends or `deadline` passes between two
/// connections.
pub(crate) async fn stream_run(
    addrs: &[String],
    mut turn: usize,
    thread: String,
    delay: f64,
    deadline: Instant,
) -> Result<Outcome, String> {
    let body = json!({
        "assistant_id": "chaos",
        "input": {"items": [], "delay": delay},
        "stream_mode": ["values"],
        "stream_resumable": true,
        "on_disconnect": "continue",
    });
    let mut partial = Partial::default();
    let mut run_id: Option<String> = None;
    let mut reconnects = 0;
    let mut last_error = String::new();
    loop {
        if Instant::now() > deadline {
            let run = run_id.as_deref().unwrap_or("(not made)");
            return Err(format!("run {run} on thread {thread} did not end in time: {last_error}"));
        }
        let addr = &addrs[turn % addrs.len()];
        let streamed = async {
            if run_id.is_none() && reconnects > 0 {
                // A request that broke may have made the run: never make a second one.
                run_id = run_on(addr, &thread).await?;
            }
            let mut conn = Conn::open(addr).await?;
            match &run_id {
                None => {
                    let path = format!("/threads/{thread}/runs/stream");
                    conn.stream_events(Method::POST, &path, Some(&body), &[], &mut partial).await
                }
                Some(run_id) => {
                    let last =
                        partial.events.last().and_then(|e| e.id.clone()).unwrap_or_else(|| "-1".into());
                    let path = format!("/threads/{thread}/runs/{run_id}/stream");
                    conn.stream_events(Method::GET, &path, None, &[("last-event-id", &last)], &mut partial)
                        .await
                }
            }
        }
        .await;
        if run_id.is_none() {
            run_id = run_id_of(&partial);
        }
        match streamed {
            Ok(()) if run_id.is_some() => break,
            Ok(()) => last_error = "a stream ended without naming its run".to_owned(),
            Err(e) => last_error = e,
        }
        reconnects += 1;
        turn += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let run_id = run_id.ok_or("no run id")?;
    Ok(Outcome { thread, run_id, events: partial.events, reconnects })
}

/// `<ms>-<seq>` as a pair that orders as the ids do.
fn id_key(id: &str) -> Option<(u64, u64)> {
    let (ms, seq) = id.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// Checks one run: exactly once, its state, and its stream against what Redis holds.
pub(crate) async fn check_run(addr: &str, redis: &str, outcome: &Outcome) -> Result<(), String> {
    let Outcome { thread, run_id, events, .. } = outcome;
    let mut conn = Conn::open(addr).await?;
    let runs = conn.json(Method::GET, &format!("/threads/{thread}/runs"), None).await?;
    let runs = runs.as_array().ok_or("the runs are not a list")?;
    if runs.len() != 1 || runs[0]["run_id"] != json!(run_id) {
        return Err(format!("thread {thread} holds {} runs, not just {run_id}", runs.len()));
    }
    if runs[0]["status"] != json!("success") {
        return Err(format!("run {run_id} ended {}", runs[0]["status"]));
    }
    let state = conn.json(Method::GET, &format!("/threads/{thread}/state"), None).await?;
    if state["values"]["items"] != json!(STEPS) {
        return Err(format!(
            "run {run_id}: the thread holds {}, not each step once",
            state["values"]["items"]
        ));
    }
    let last = events.iter().rev().find(|e| e.name == "values").ok_or("no values event")?;
    let values: Value = serde_json::from_str(&last.data).map_err(|e| format!("values not JSON: {e}"))?;
    if values["items"] != json!(STEPS) {
        return Err(format!("run {run_id}: the stream's last values are {values}"));
    }
    let mut previous = None;
    for event in events {
        let key = event
            .id
            .as_deref()
            .and_then(id_key)
            .ok_or_else(|| format!("run {run_id}: an event without id"))?;
        if previous.is_some_and(|p| p >= key) {
            return Err(format!("run {run_id}: the ids go back or repeat at {:?}", event.id));
        }
        previous = Some(key);
    }
    let key = format!("{PREFIX}run:{run_id}:stream");
    let entries = stream_entries(redis, &key).await?;
    let published: Vec<(String, String, String)> = entries
        .into_iter()
        .filter_map(|(id, fields)| {
            let field = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
            Some((id, field("e")?, field("d")?))
        })
        .filter(|(_, name, _)| name != "__end__")
        .collect();
    let got: Vec<(String, String, String)> =
        events.iter().map(|e| (e.id.clone().unwrap_or_default(), e.name.clone(), e.data.clone())).collect();
    if got != published {
        return Err(format!(
            "run {run_id}: the client got {} events, the workers published {}: {:?} against {:?}",
            got.len(),
            published.len(),
            got.iter().map(|e| &e.0).collect::<Vec<_>>(),
            published.iter().map(|e| &e.0).collect::<Vec<_>>()
        ));
    }
    Ok(())
}

/// A connection to the Redis at `addr` (`host:port`), or why there is none within 10 s.
async fn redis_connection(addr: &str) -> Result<redis::aio::MultiplexedConnection, String> {
    let client =
        redis::Client::open(format!("redis://{addr}/")).map_err(|e| format!("Redis at {addr}: {e}"))?;
    match tokio::time::timeout(Duration::from_secs(10), client.get_multiplexed_async_connection()).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(format!("cannot connect to Redis at {addr}: {e}")),
        Err(_) => Err(format!("Redis at {addr} did not answer within 10 s")),
    }
}

/// Whether the Redis at `addr` answers `PING`.
async fn redis_answers(addr: &str) -> bool {
    let Ok(mut conn) = redis_connection(addr).await else { return false };
    let pong: Result<String, _> = redis::cmd("PING").query_async(&mut conn).await;
    pong.is_ok_and(|pong| pong == "PONG")
}

/// One entry of a Redis stream: its id and its fields, in order.
type StreamEntry = (String, Vec<(String, String)>);

/// The entries of the Redis stream `key` (`XRANGE key - +`).
async fn stream_entries(addr: &str, key: &str) -> Result<Vec<StreamEntry>, String> {
    let mut conn = redis_connection(addr).await?;
    redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query_async(&mut conn)
        .await
        .map_err(|e| format!("XRANGE {key} on Redis at {addr}: {e}"))
}

/// What the steps' log says: per run, the steps started in order, with the process that started each.
fn read_steps(path: &Path) -> Result<HashMap<String, Vec<(String, u32)>>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut runs: HashMap<String, Vec<(String, u32)>> = HashMap::new();
    for line in text.lines() {
        let mut parts = line.split(' ');
        let (Some(run), Some(step), Some(pid)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(format!("a bad line in the steps' log: {line:?}"));
        };
        let pid = pid.parse().map_err(|_| format!("a bad process id in the steps' log: {line:?}"))?;
        runs.entry(run.to_owned()).or_default().push((step.to_owned(), pid));
    }
    Ok(runs)
}

/// Waits until process `pid` starts a step: a line naming it is added to the steps' log (each step
/// writes its line, then waits the graph's delay, so the step is then in flight). Fails after `limit`.
async fn until_step_by(log: &Path, pid: u32, limit: Duration) -> Result<(), String> {
    let read = || std::fs::read_to_string(log).unwrap_or_default();
    let seen = read().len();
    let pid = pid.to_string();
    let end = Instant::now() + limit;
    loop {
        let text = read();
        let added = text.get(seen..).unwrap_or_default();
        // Whole lines only: the last one may still be being written.
        let whole = added.rfind('\n').map_or("", |end| &added[..end]);
        if whole.lines().any(|line| line.rsplit(' ').next() == Some(pid.as_str())) {
            return Ok(());
        }
        if Instant::now() > end {
            return Err(format!("process {pid} started no step within {limit:?}: it runs nothing to kill"));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Checks the steps of one run against the kill, as the runs' durability (`async`, the server's default)
/// promises: each step once, except the last two the killed process started (the step in flight and the
/// step before it, whose save may still have been on its way). Returns whether the run was taken over
/// from the killed process.
fn check_steps(run_id: &str, started: &[(String, u32)], killed: u32) -> Result<bool, String> {
    let by_killed: Vec<&str> =
        started.iter().filter(|(_, pid)| *pid == killed).map(|(s, _)| s.as_str()).collect();
    let taken_over = !by_killed.is_empty() && started.iter().any(|(_, pid)| *pid != killed);
    let may_rerun = if taken_over { &by_killed[by_killed.len().saturating_sub(2)..] } else { &[][..] };
    for step in STEPS {
        let times = started.iter().filter(|(s, _)| s == step).count();
        let allowed = if may_rerun.contains(&step) { 2 } else { 1 };
        if times == 0 || times > allowed {
            return Err(format!(
                "run {run_id}: step {step} started {times} times: {started:?} (killed: {killed})"
            ));
        }
    }
    if started.len() > STEPS.len() + may_rerun.len() {
        return Err(format!("run {run_id}: more steps than allowed: {started:?}"));
    }
    Ok(taken_over)
}

/// Runs the chaos test; its report as JSON, or what went wrong.
pub(crate) async fn run(config: ChaosConfig) -> Result<Value, String> {
    let started = Instant::now();
    let mut deployment = Deployment::new(config.clone())?;
    deployment.start_redis().await?;
    // The first instance makes the tables; the others start once it is up.
    for i in 0..config.instances {
        deployment.start_instance(i).await?;
    }
    eprintln!(
        "chaos: {} instances and Redis up in {:.1} s",
        config.instances,
        started.elapsed().as_secs_f64()
    );
    let addrs = Arc::new(deployment.addrs());
    let done = Arc::new(AtomicUsize::new(0));
    let slots = Arc::new(Semaphore::new(config.concurrency.max(1)));
    let mut clients = JoinSet::new();
    let load = Instant::now();
    for i in 0..config.runs {
        let (addrs, done, slots) = (Arc::clone(&addrs), Arc::clone(&done), Arc::clone(&slots));
        let delay = config.delay;
        clients.spawn(async move {
            let _slot = slots.acquire_owned().await.map_err(|e| e.to_string())?;
            let outcome = one_run(addrs, i, delay).await;
            done.fetch_add(1, Ordering::SeqCst);
            outcome
        });
    }
    let until = |count: usize| {
        let done = Arc::clone(&done);
        async move {
            while done.load(Ordering::SeqCst) < count && load.elapsed() < LOAD_LIMIT {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    until(config.runs / 5).await;
    // Killed only while it is in a step, so that the kill always leaves a run to take over.
    let pid = deployment.pid(0).ok_or("instance 0 is not running")?;
    until_step_by(&deployment.scratch.join("steps.log"), pid, Duration::from_secs(30)).await?;
    let killed = deployment.kill_instance(0).ok_or("instance 0 is not running")?;
    eprintln!("chaos: SIGKILLed instance 0 (pid {killed}) after {} runs", done.load(Ordering::SeqCst));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let restarted = deployment.start_instance(0).await?;
    eprintln!("chaos: instance 0 is back (pid {restarted})");
    until(config.runs / 2).await;
    let before = done.load(Ordering::SeqCst);
    deployment.stop_redis().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    deployment.start_redis().await?;
    eprintln!("chaos: restarted Redis after {before} runs");
    let mut outcomes = Vec::new();
    let mut failures = Vec::new();
    while let Some(joined) =
        tokio::time::timeout(LOAD_LIMIT.saturating_sub(load.elapsed()), clients.join_next())
            .await
            .map_err(|_| format!("the runs did not all end within {LOAD_LIMIT:?}"))?
    {
        match joined {
            Ok(Ok(outcome)) => outcomes.push(outcome),
            Ok(Err(e)) => failures.push(e),
            Err(e) => failures.push(format!("a client failed: {e}")),
        }
    }
    let load_s = load.elapsed().as_secs_f64();
    eprintln!("chaos: {} runs streamed in {load_s:.1} s; checking", outcomes.len());
    let steps = read_steps(&deployment.scratch.join("steps.log"))?;
    let mut taken_over = 0;
    for outcome in &outcomes {
        if let Err(e) = check_run(&addrs[1 % addrs.len()], &deployment.redis_addr(), outcome).await {
            failures.push(e);
        }
        match check_steps(&outcome.run_id, steps.get(&outcome.run_id).map_or(&[][..], Vec::as_slice), killed)
        {
            Ok(true) => taken_over += 1,
            Ok(false) => {}
            Err(e) => failures.push(e),
        }
    }
    if taken_over == 0 {
        failures.push("no run was taken over from the killed instance: the kill tested nothing".to_owned());
    }
    let report = json!({
        "runs": config.runs,
        "completed": outcomes.len(),
        "instances": config.instances,
        "taken_over": taken_over,
        "reconnects": outcomes.iter().map(|o| o.reconnects).sum::<usize>(),
        "streams_reconnected": outcomes.iter().filter(|o| o.reconnects > 0).count(),
        "events": outcomes.iter().map(|o| o.events.len()).sum::<usize>(),
        "load_s": (load_s * 10.0).round() / 10.0,
        "failures": failures.len(),
    });
    if failures.is_empty() {
        let _ = std::fs::remove_dir_all(&deployment.scratch);
        Ok(report)
    } else {
        for failure in failures.iter().take(20) {
            eprintln!("chaos: FAILED: {failure}");
        }
        Err(format!("{} checks failed ({report}); logs in {}", failures.len(), deployment.scratch.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(steps: &[(&str, u32)]) -> Vec<(String, u32)> {
        steps.iter().map(|(s, p)| ((*s).to_owned(), *p)).collect()
    }

    #[test]
    fn a_run_untouched_by_the_kill_runs_each_step_once() {
        let once = started(&[("step_1", 5), ("step_2", 5), ("step_3", 6), ("step_4", 6)]);
        assert_eq!(check_steps("r", &once, 9), Ok(false));
        let twice = started(&[("step_1", 5), ("step_1", 5), ("step_2", 5), ("step_3", 5), ("step_4", 5)]);
        assert!(check_steps("r", &twice, 9).is_err(), "a step run twice without a kill");
        let missing = started(&[("step_1", 5), ("step_2", 5), ("step_3", 5)]);
        assert!(check_steps("r", &missing, 9).is_err());
    }

    #[test]
    fn only_the_steps_whose_saves_may_be_unstored_at_the_kill_run_again() {
        let resumed = started(&[("step_1", 9), ("step_2", 9), ("step_2", 5), ("step_3", 5), ("step_4", 5)]);
        assert_eq!(check_steps("r", &resumed, 9), Ok(true));
        // Step 4 was running and step 3's save was on its way: both run again.
        let two = started(&[
            ("step_1", 9),
            ("step_2", 9),
            ("step_3", 9),
            ("step_4", 9),
            ("step_3", 5),
            ("step_4", 5),
        ]);
        assert_eq!(check_steps("r", &two, 9), Ok(true));
        let finished_again = started(&[
            ("step_1", 9),
            ("step_2", 9),
            ("step_3", 9),
            ("step_1", 5),
            ("step_2", 5),
            ("step_3", 5),
            ("step_4", 5),
        ]);
        assert!(check_steps("r", &finished_again, 9).is_err(), "step_1 was saved before step_3 started");
    }

    #[test]
    fn run_ids_come_from_the_location_or_the_first_event() {
        let mut partial =
            Partial { location: Some("/threads/t/runs/r1/stream".into()), ..Partial::default() };
        assert_eq!(run_id_of(&partial), Some("r1".into()));
        partial.location = None;
        partial.events.push(Event { name: "metadata".into(), data: r#"{"run_id":"r2"}"#.into(), id: None });
        assert_eq!(run_id_of(&partial), Some("r2".into()));
        assert_eq!(id_key("12-3"), Some((12, 3)));
        assert_eq!(id_key("12"), None);
    }

    #[tokio::test]
    async fn redis_streams_are_read_in_order_with_their_fields() {
        let addr = weft_testenv::redis_addr();
        if !redis_answers(&addr).await {
            weft_testenv::skip_or_fail(
                &format!("Redis at {addr}"),
                "no PONG",
                "`cargo xtask services` starts it",
            );
            return;
        }
        assert!(!redis_answers("127.0.0.1:1").await, "nothing listens on port 1");
        let key = format!("weft-bench-chaos-test:{}:{}", std::process::id(), line!());
        let mut conn = redis_connection(&addr).await.unwrap();
        for (event, data) in [("values", "{}"), ("updates", "{\"a\":1}")] {
            let _: String = redis::cmd("XADD")
                .arg(&key)
                .arg("*")
                .arg("e")
                .arg(event)
                .arg("d")
                .arg(data)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
        let entries = stream_entries(&addr, &key).await.unwrap();
        let _: i64 = redis::cmd("DEL").arg(&key).query_async(&mut conn).await.unwrap();
        let fields: Vec<&Vec<(String, String)>> = entries.iter().map(|(_, fields)| fields).collect();
        assert_eq!(
            fields,
            [
                &vec![("e".to_owned(), "values".to_owned()), ("d".to_owned(), "{}".to_owned())],
                &vec![("e".to_owned(), "updates".to_owned()), ("d".to_owned(), "{\"a\":1}".to_owned())],
            ]
        );
        assert!(id_key(&entries[0].0) < id_key(&entries[1].0), "ids increase: {entries:?}");
        assert_eq!(stream_entries(&addr, &key).await.unwrap(), [], "a missing stream has no entries");
    }
}
