//! What the fault-injection tests share: private servers ([`servers`]) and a run whose every task
//! records when it starts and finishes, so that a test can say which tasks ran after a fault and which
//! ran twice.
#![allow(dead_code, unreachable_pub)]

pub(crate) mod servers;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_graph::checkpoint::{CheckpointConfig, Checkpointer, InMemorySaver};
use weft_graph::{CompileConfig, CompiledGraph, END, GraphError, GraphInput, START, State, StateGraph};
use weft_runnable_core::RunnableConfig;

/// Rounds of the run: four tasks in three supersteps each.
pub(crate) const ROUNDS: i64 = 40;
const THREAD: &str = "fault-thread";

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Work {
    round: i64,
    #[state(append)]
    log: Vec<String>,
}

/// What the tasks did: labels (`node:round`) of the tasks started and finished, in order.
#[derive(Debug, Default)]
pub(crate) struct Record {
    started: Mutex<Vec<String>>,
    finished: Mutex<Vec<String>>,
}

impl Record {
    pub(crate) fn started(&self) -> Vec<String> {
        self.started.lock().unwrap().clone()
    }
    pub(crate) fn finished(&self) -> Vec<String> {
        self.finished.lock().unwrap().clone()
    }
}

/// The superstep a label's task runs in: `a` of round r in 3r-2, `b` and `c` in 3r-1, `join` in 3r.
pub(crate) fn step_of(label: &str) -> i64 {
    let (node, round) = label.split_once(':').unwrap();
    let round: i64 = round.parse().unwrap();
    match node {
        "a" => 3 * round - 2,
        "b" | "c" => 3 * round - 1,
        _ => 3 * round,
    }
}

/// `a` starts round r+1; `b` and `c` run in parallel; `join` waits for both and loops back to `a` until
/// [`ROUNDS`] rounds are done. Each task takes a few milliseconds.
pub(crate) fn graph(saver: Arc<dyn Checkpointer>, record: Arc<Record>) -> CompiledGraph<Work> {
    let mut g = StateGraph::<Work>::new();
    for name in ["a", "b", "c", "join"] {
        let record = Arc::clone(&record);
        g.add_node(name, move |s: Work| {
            let record = Arc::clone(&record);
            async move {
                let round = if name == "a" { s.round + 1 } else { s.round };
                let label = format!("{name}:{round}");
                record.started.lock().unwrap().push(label.clone());
                tokio::time::sleep(Duration::from_millis(8)).await;
                record.finished.lock().unwrap().push(label.clone());
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

pub(crate) fn thread() -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", THREAD).with_recursion_limit(10_000)
}

/// The error and all its sources, as one text.
pub(crate) fn chain(err: &GraphError) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        text.push_str(" <- ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// What the first run left: the steps started around the fault, the tasks, and the run's error.
#[derive(Debug)]
pub(crate) struct Faulted {
    pub(crate) record: Arc<Record>,
    /// The newest superstep started before the fault was injected.
    pub(crate) step_before_fault: i64,
    /// The newest superstep started once the fault was in place (the run may go on meanwhile).
    pub(crate) step_at_fault: i64,
    pub(crate) error: GraphError,
}

/// Runs the graph on `saver` (async durability, the default), calls `fault` once `after` tasks have
/// finished, and waits (up to `limit`) for the run to fail. Panics if it ends well or takes longer.
pub(crate) async fn run_into_fault<F: std::future::Future<Output = ()>>(
    saver: Arc<dyn Checkpointer>,
    after: usize,
    limit: Duration,
    fault: impl FnOnce() -> F,
) -> Faulted {
    let record = Arc::new(Record::default());
    let app = graph(saver, Arc::clone(&record));
    let mut run = tokio::spawn(async move { app.invoke(Work::update().round(0), &thread()).await });
    let started = Instant::now();
    while record.finished.lock().unwrap().len() < after {
        assert!(!run.is_finished(), "the run ended before the fault");
        assert!(started.elapsed() < Duration::from_secs(60), "the run made no progress");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let step_before_fault = record.started().iter().map(|l| step_of(l)).max().unwrap();
    fault().await;
    let step_at_fault = record.started().iter().map(|l| step_of(l)).max().unwrap();
    let faulted = Instant::now();
    let result = match tokio::time::timeout(limit, &mut run).await {
        Ok(joined) => joined.unwrap(),
        Err(_) => {
            run.abort();
            panic!("the run was still going {limit:?} after the fault");
        }
    };
    let error = match result {
        Ok(out) => panic!("the run ended well after the fault (round {})", out.value.round),
        Err(e) => e,
    };
    eprintln!(
        "fault at step {step_at_fault}; the run stopped {:?} later at step {}: {}",
        faulted.elapsed(),
        record.started().iter().map(|l| step_of(l)).max().unwrap(),
        chain(&error)
    );
    Faulted { record, step_before_fault, step_at_fault, error }
}

/// Labels of the tasks whose writes `saver` holds (the log of the thread's latest checkpoint and the
/// writes pending on it), with that checkpoint's step.
pub(crate) async fn saved(saver: &dyn Checkpointer) -> (i64, HashSet<String>) {
    let tuple = saver.get_tuple(&CheckpointConfig::thread(THREAD)).await.unwrap().unwrap();
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
    (tuple.metadata.step, labels)
}

/// The checks after a fault: the run stopped within one step of overlap, and after `resume` on
/// `saver` (the backend back up) the thread ends as an uninterrupted run ends, with nothing saved lost
/// and no finished task run again beyond the step that overlapped the failed save.
pub(crate) async fn resume_and_check(saver: Arc<dyn Checkpointer>, faulted: Faulted) {
    let Faulted { record, step_before_fault, step_at_fault, error } = faulted;
    // The error is the checkpointer's.
    assert!(matches!(error, GraphError::Storage(_)), "not a checkpointer error: {error:?}");
    let (latest, saved_labels) = saved(saver.as_ref()).await;
    // Nothing confirmed is lost: step S started only once step S-2's saves were stored.
    assert!(
        latest >= step_before_fault - 2,
        "the latest checkpoint is step {latest}, while step {step_before_fault} had started before the fault"
    );
    // The run never got more than one step ahead of its last stored checkpoint, so it stopped within one
    // step of overlap: the step running at the fault, and the one overlapping its failed save.
    let last_started = record.started().iter().map(|l| step_of(l)).max().unwrap();
    assert!(
        last_started <= latest + 2 && last_started <= step_at_fault + 2,
        "step {last_started} started, with step {latest}'s checkpoint the last stored (the fault came at step \
         {step_at_fault}): {}",
        chain(&error)
    );

    let out =
        graph(Arc::clone(&saver), Arc::clone(&record)).invoke(GraphInput::Resume, &thread()).await.unwrap();
    let expected = graph(Arc::new(InMemorySaver::new()), Arc::new(Record::default()))
        .invoke(Work::update().round(0), &thread())
        .await
        .unwrap()
        .value;
    assert_eq!(out.value, expected, "the resumed run ends where an uninterrupted run ends");

    let mut runs: HashMap<String, usize> = HashMap::new();
    for label in record.finished() {
        *runs.entry(label).or_default() += 1;
    }
    for label in &saved_labels {
        assert_eq!(runs.get(label), Some(&1), "{label} was saved before the fault, yet ran again");
    }
    let mut again: Vec<(&String, &usize)> = runs.iter().filter(|(_, n)| **n > 1).collect();
    again.sort();
    for (label, n) in &again {
        assert_eq!(**n, 2, "{label} ran {n} times");
        let step = step_of(label);
        assert!(
            step > latest && step <= latest + 2,
            "{label} (step {step}) ran again, though the latest checkpoint is step {latest}: re-runs {again:?}"
        );
    }
    eprintln!("latest saved step {latest}; finished tasks run again: {again:?}");
}
