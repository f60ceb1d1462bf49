//! A process running a long graph on Redis is killed with SIGKILL at a random point; a new run resumes
//! the thread. The final state equals an uninterrupted run's, and no task whose writes were saved before
//! the kill runs again (a side file records every execution).
#![cfg(all(feature = "redis", unix))]
#![allow(clippy::unwrap_used, missing_docs)]

mod redis_common;

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use weft_graph::checkpoint::{Checkpointer, InMemorySaver};
use weft_graph::{CompileConfig, CompiledGraph, END, GraphInput, START, State, StateGraph};
use weft_integrations::redis::{RedisOptions, RedisSaver};
use weft_runnable_core::RunnableConfig;

type TestResult = Result<(), String>;

/// Rounds of plan → (left, right) → join: three supersteps each.
const ROUNDS: i64 = 120;
const PREFIX_VAR: &str = "WEFT_REDIS_CRASH_PREFIX";
const SIDE_VAR: &str = "WEFT_REDIS_CRASH_SIDE";

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Work {
    round: i64,
    #[state(append)]
    log: Vec<String>,
}

/// Appends `line` to the side file (one `write` of a whole line, so a kill never leaves half a line).
fn record(side: &Path, line: &str) {
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(side).unwrap();
    file.write_all(format!("{line}\n").as_bytes()).unwrap();
}

fn app(saver: Arc<dyn Checkpointer>, side: PathBuf) -> CompiledGraph<Work> {
    let mut g = StateGraph::<Work>::new();
    let node = |name: &'static str, pause_ms: u64, next_round: bool| {
        let side = side.clone();
        move |s: Work| {
            let side = side.clone();
            async move {
                let entry = format!("{name}:{}", s.round);
                record(&side, &entry);
                tokio::time::sleep(Duration::from_millis(pause_ms)).await;
                let update = WorkUpdate::new().log(vec![entry]);
                if next_round { update.round(s.round + 1) } else { update }
            }
        }
    };
    g.add_node("plan", node("plan", 2, true));
    g.add_node("left", node("left", 3, false));
    g.add_node("right", node("right", 7, false));
    g.add_node("join", node("join", 2, false));
    g.add_edge(START, "plan");
    g.add_edge("plan", "left");
    g.add_edge("plan", "right");
    g.add_edge("left", "join");
    g.add_edge("right", "join");
    g.add_conditional_edges("join", |s: &Work| if s.round < ROUNDS { "plan" } else { END }, None);
    g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

fn config() -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", "crash").with_recursion_limit(1000)
}

fn lines(side: &Path) -> Vec<String> {
    std::fs::read_to_string(side).unwrap_or_default().lines().map(str::to_owned).collect()
}

/// The child process of `a_killed_run_resumes_without_repeating_finished_tasks`: runs the graph when the
/// parent set the environment, does nothing otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_child() -> TestResult {
    let (Ok(prefix), Ok(side)) = (std::env::var(PREFIX_VAR), std::env::var(SIDE_VAR)) else { return Ok(()) };
    let saver =
        RedisSaver::connect_with(RedisOptions::new(redis_common::url()).prefix(prefix)).await.unwrap();
    app(Arc::new(saver), side.into()).invoke(WorkUpdate::new().round(0), &config()).await.unwrap();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_run_resumes_without_repeating_finished_tasks() -> TestResult {
    if redis_common::reachable_or_skip("crash")?.is_none() {
        return Ok(());
    }
    let prefix = redis_common::fresh_prefix("crash");
    let _cleanup = redis_common::Cleanup(prefix.clone());
    let dir = std::env::temp_dir();
    let side = dir.join(format!("weft-redis-crash-{}.log", uuid::Uuid::new_v4().simple()));
    // Kill after a random number of executions (somewhere in the first three quarters of the run) and a
    // random pause, so that the kill lands in a task, between tasks or between a task and its save.
    let random = uuid::Uuid::new_v4();
    let kill_after = 20 + usize::from(random.as_bytes()[0]) % 340;
    let pause = Duration::from_micros(u64::from(random.as_bytes()[1]) * 40);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
        .env(PREFIX_VAR, &prefix)
        .env(SIDE_VAR, &side)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while lines(&side).len() < kill_after {
        assert!(started.elapsed() < Duration::from_secs(60), "the child made no progress");
        assert!(child.try_wait().unwrap().is_none(), "the child ended before the kill");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    tokio::time::sleep(pause).await;
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(!status.success(), "the child was killed, not finished: {status:?}");
    let before = lines(&side);

    let saver = RedisSaver::connect_with(RedisOptions::new(redis_common::url()).prefix(prefix.clone()))
        .await
        .unwrap();
    let latest = saver.get_tuple(&weft_graph::CheckpointConfig::thread("crash")).await.unwrap().unwrap();
    let saved: HashSet<String> = latest
        .pending_writes
        .iter()
        .filter(|w| w.channel == "log")
        .flat_map(|w| w.value.as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    let resumed = app(Arc::new(saver), side.clone()).invoke(GraphInput::Resume, &config()).await.unwrap();

    let reference_side = dir.join(format!("weft-redis-crash-ref-{}.log", uuid::Uuid::new_v4().simple()));
    let reference = app(Arc::new(InMemorySaver::new()), reference_side.clone())
        .invoke(WorkUpdate::new().round(0), &config())
        .await
        .unwrap();
    assert_eq!(resumed.value, reference.value, "the resumed run ends in the uninterrupted run's state");
    assert_eq!(resumed.value.round, ROUNDS);

    let all = lines(&side);
    let again: Vec<&String> = all[before.len()..].iter().filter(|l| before.contains(l)).collect();
    for line in &again {
        assert!(!saved.contains(*line), "{line} had its writes saved before the kill and ran again");
    }
    // Only tasks of the superstep in flight at the kill ran twice.
    assert!(again.len() <= 2, "at most the in-flight superstep reruns: {again:?}");
    let mut counts: HashMap<&String, usize> = HashMap::new();
    for line in &all {
        *counts.entry(line).or_default() += 1;
    }
    assert!(counts.values().all(|n| *n <= 2), "no task ran more than twice");
    assert_eq!(counts.len(), lines(&reference_side).len(), "every task of the run ran");
    let _ = std::fs::remove_file(&side);
    let _ = std::fs::remove_file(&reference_side);
    let _ = writeln!(
        std::io::stderr(),
        "crash test: killed after {} executions, {} ran again ({again:?}), {} writes were saved",
        before.len(),
        again.len(),
        saved.len()
    );
    Ok(())
}
