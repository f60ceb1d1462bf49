//! Determinism: whatever order the tasks of a step finish in, the result and the checkpoints are the same.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use weft_graph::{
    CompileConfig, CompiledGraph, Durability, InMemorySaver, ListOptions, RunOptions, START, Send, State,
    StateGraph,
};
use weft_runnable_core::RunnableConfig;

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Trace {
    #[state(append)]
    log: Vec<String>,
    total: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Job {
    n: i64,
    delay_ms: u64,
}

fn graph(delays: [u64; 3], job_delays: Vec<u64>) -> CompiledGraph<Trace> {
    let mut g = StateGraph::<Trace>::new();
    for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
        let d = delays[i];
        g.add_node(name, move |_: Trace| async move {
            tokio::time::sleep(Duration::from_millis(d)).await;
            TraceUpdate::new().log(vec![name.to_owned()])
        });
        g.add_edge(START, name);
    }
    g.add_node("work", |job: Job| async move {
        tokio::time::sleep(Duration::from_millis(job.delay_ms)).await;
        TraceUpdate::new().log(vec![format!("job{}", job.n)])
    });
    g.add_conditional_edges(
        "a",
        move |_: &Trace| {
            job_delays
                .iter()
                .enumerate()
                .map(|(n, d)| Send::new("work", Job { n: n as i64, delay_ms: *d }))
                .collect::<Vec<_>>()
        },
        None,
    );
    g.add_node("join", |s: Trace| TraceUpdate::new().total(s.log.len() as i64).log(vec!["join".to_owned()]));
    g.add_waiting_edge(["b", "c", "work"], "join");
    g.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap()
}

/// Per checkpoint: step, log, next nodes.
type History = Vec<(i64, Vec<String>, Vec<String>)>;

/// The final state and the checkpoints.
fn run(delays: [u64; 3], job_delays: Vec<u64>) -> (Trace, History) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    rt.block_on(async move {
        let app = graph(delays, job_delays);
        let config = RunnableConfig::default().with_configurable("thread_id", "t");
        let options = RunOptions { durability: Durability::Sync, ..RunOptions::default() };
        let out = app.invoke_with(TraceUpdate::new(), &config, options).await.unwrap();
        let history = app.get_state_history(&config, ListOptions::default()).await.unwrap();
        let history = history.into_iter().map(|s| (s.metadata.unwrap().step, s.values.log, s.next)).collect();
        (out.value, history)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn completion_order_does_not_change_results_or_checkpoints(
        delays in proptest::array::uniform3(0u64..40),
        job_delays in proptest::collection::vec(0u64..40, 1..6),
    ) {
        let reference = run([0, 0, 0], vec![0; job_delays.len()]);
        let shuffled = run(delays, job_delays.clone());
        prop_assert_eq!(&shuffled.0, &reference.0);
        prop_assert_eq!(&shuffled.1, &reference.1);
        // Writes land in node-name order, then Send order, whatever finished first.
        let expected_first: Vec<String> = ["a", "b", "c"].iter().map(|s| (*s).to_owned()).collect();
        prop_assert_eq!(&shuffled.0.log[..3], &expected_first[..]);
        let jobs: Vec<String> = (0..job_delays.len()).map(|n| format!("job{n}")).collect();
        prop_assert_eq!(&shuffled.0.log[3..3 + jobs.len()], &jobs[..]);
        prop_assert_eq!(shuffled.0.log.last().map(String::as_str), Some("join"));
        prop_assert_eq!(shuffled.0.total, 3 + jobs.len() as i64);
    }
}
