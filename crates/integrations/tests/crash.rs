#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]
//! Crash tests: a child process runs a long graph (300 supersteps, parallel branches, every node
//! recording its execution in a side file) on a durable saver and is killed with SIGKILL at a random
//! point; this process resumes the thread. The final state equals an uninterrupted run's, and no task
//! whose writes were saved before the kill ran again (the side file proves it).
//!
//! The child is this test binary run again with `WEFT_CRASH_CHILD` set, running the ignored test
//! `crash_child_process`.

#![cfg(any(feature = "sqlite", feature = "postgres"))]

#[cfg(feature = "postgres")]
mod common;

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_graph::checkpoint::{CheckpointConfig, Checkpointer, InMemorySaver};
use weft_graph::{CompileConfig, CompiledGraph, END, GraphInput, START, State, StateGraph};
use weft_runnable_core::RunnableConfig;

const ROUNDS: i64 = 100;
const CHILD_ENV: &str = "WEFT_CRASH_CHILD";
const THREAD: &str = "crash-thread";

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Work {
    round: i64,
    #[state(append)]
    log: Vec<String>,
}

/// Appends one line to the side file (an `O_APPEND` write: whole lines, kept by the kernel through a
/// SIGKILL).
fn record(side: &Path, label: &str) {
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(side).unwrap();
    file.write_all(format!("{label}\n").as_bytes()).unwrap();
}

/// `a` starts round r+1; `b` and `c` run in parallel; `join` waits for both and loops back to `a` until
/// `ROUNDS` rounds are done: three supersteps a round.
fn graph(saver: Arc<dyn Checkpointer>, side: PathBuf) -> CompiledGraph<Work> {
    let side = Arc::new(side);
    let mut g = StateGraph::<Work>::new();
    for name in ["a", "b", "c", "join"] {
        let side = Arc::clone(&side);
        g.add_node(name, move |s: Work| {
            let side = Arc::clone(&side);
            async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                let round = if name == "a" { s.round + 1 } else { s.round };
                let label = format!("{name}:{round}");
                record(&side, &label);
                let update = Work::update().log(vec![label]);
                if name == "a" { update.round(round) } else { update }
            }
        });
    }
    g.add_edge(START, "a");
    g.add_edge("a", "b");
    g.add_edge("a", "c");
    g.add_waiting_edge(["b", "c"], "join");
    g.add_conditional_edges("join", |s: &Work| if s.round < ROUNDS { "a" } else { END }, None);
    g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

fn thread() -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", THREAD).with_recursion_limit(10_000)
}

/// Where the child keeps its checkpoints.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum Backend {
    Sqlite(PathBuf),
    Postgres(String),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ChildJob {
    backend: Backend,
    side: PathBuf,
}

async fn open(backend: &Backend) -> Arc<dyn Checkpointer> {
    match backend {
        #[cfg(feature = "sqlite")]
        Backend::Sqlite(path) => Arc::new(weft_integrations::sqlite::SqliteSaver::open(path).await.unwrap()),
        #[cfg(feature = "postgres")]
        Backend::Postgres(schema) => {
            let options = weft_integrations::postgres::PostgresOptions::default().schema(schema.clone());
            Arc::new(
                weft_integrations::postgres::PostgresSaver::connect_with(&common::pg_url(), options)
                    .await
                    .unwrap(),
            )
        }
        #[allow(unreachable_patterns)]
        other => panic!("backend {other:?} is not built"),
    }
}

/// The child's work: run the graph from the start (it is killed before it ends).
#[tokio::test]
#[ignore = "the child process of the crash tests; runs only with WEFT_CRASH_CHILD set"]
async fn crash_child_process() {
    let Ok(job) = std::env::var(CHILD_ENV) else { return };
    let job: ChildJob = serde_json::from_str(&job).unwrap();
    let app = graph(open(&job.backend).await, job.side);
    app.invoke(Work::update().round(0), &thread()).await.unwrap();
}

fn lines(side: &Path) -> Vec<String> {
    std::fs::read_to_string(side).unwrap_or_default().lines().map(str::to_owned).collect()
}

/// Labels of the tasks whose writes the saver holds: the log of the latest checkpoint and the `log`
/// writes pending on it.
async fn saved_labels(saver: &dyn Checkpointer) -> HashSet<String> {
    let Some(tuple) = saver.get_tuple(&CheckpointConfig::thread(THREAD)).await.unwrap() else {
        return HashSet::new();
    };
    let mut labels: HashSet<String> = HashSet::new();
    let mut take = |value: &Value| match value {
        Value::Array(items) => labels.extend(items.iter().filter_map(Value::as_str).map(str::to_owned)),
        Value::String(s) => {
            labels.insert(s.clone());
        }
        _ => {}
    };
    if let Some(log) = tuple.checkpoint.channel_values.get("log") {
        take(log);
    }
    for write in tuple.pending_writes.iter().filter(|w| w.channel == "log") {
        take(&write.value);
    }
    labels
}

/// A kill point: after this many recorded executions (of 4 x `ROUNDS`), drawn from the clock.
fn random_kill_point() -> usize {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    20 + usize::try_from(nanos).unwrap() % 260
}

async fn crash_and_resume(backend: Backend, dir: &Path) {
    // The uninterrupted run, in memory.
    let expected = graph(Arc::new(InMemorySaver::new()), dir.join("expected.log"))
        .invoke(Work::update().round(0), &thread())
        .await
        .unwrap()
        .value;
    assert_eq!(expected.log.len(), 4 * usize::try_from(ROUNDS).unwrap());

    let side = dir.join("side.log");
    let job = ChildJob { backend: backend.clone(), side: side.clone() };
    let kill_at = random_kill_point();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child_process", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, serde_json::to_string(&job).unwrap())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while lines(&side).len() < kill_at {
        assert!(child.try_wait().unwrap().is_none(), "the child ended before the kill point {kill_at}");
        assert!(started.elapsed() < Duration::from_secs(120), "the child made no progress");
        std::thread::sleep(Duration::from_millis(2));
    }
    // Saves may trail executions when the server is busy: the kill waits until the child has saved
    // enough work for the check below to mean something.
    let watcher = open(&backend).await;
    while saved_labels(watcher.as_ref()).await.len() < 10 {
        assert!(child.try_wait().unwrap().is_none(), "the child ended before saving 10 executions");
        assert!(started.elapsed() < Duration::from_secs(120), "the child saved no work");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    drop(watcher);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before_resume = lines(&side);
    eprintln!("killed after {} recorded executions (kill point {kill_at})", before_resume.len());

    // A new process (this one, with a fresh saver) resumes the thread.
    let saver = open(&backend).await;
    let saved = saved_labels(saver.as_ref()).await;
    assert!(saved.len() >= 10, "the child saved work before the kill: {saved:?}");
    let out = graph(saver, side.clone()).invoke(GraphInput::Resume, &thread()).await.unwrap();
    assert_eq!(out.value, expected, "the resumed run ends where an uninterrupted run ends");

    let mut runs: HashMap<String, usize> = HashMap::new();
    for label in lines(&side) {
        *runs.entry(label).or_default() += 1;
    }
    for label in &expected.log {
        let n = runs.get(label).copied().unwrap_or(0);
        assert!(n >= 1, "{label} ran");
        if saved.contains(label) {
            assert_eq!(n, 1, "{label} finished and was saved before the kill, yet ran again");
        } else {
            assert!(n <= 2, "{label} ran {n} times");
        }
    }
    assert_eq!(runs.len(), expected.log.len(), "no task ran that an uninterrupted run does not run");
    let again = runs.values().filter(|n| **n > 1).count();
    eprintln!("{} tasks were saved before the kill; {again} unsaved ones ran again", saved.len());
}

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-crash-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_thread_survives_sigkill() {
    let dir = temp_dir();
    crash_and_resume(Backend::Sqlite(dir.join("weft.db")), &dir).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_thread_survives_sigkill() {
    let Some(schema) = common::schema().await else { return };
    crash_and_resume(Backend::Postgres(schema.name.clone()), &temp_dir()).await;
}
