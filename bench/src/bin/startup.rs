//! The `startup` workload's program: a fresh process that loads weft's graph engine, builds a three-node
//! graph (`n0 -> n1 -> n2`, each adding 1 to `count`), compiles it and runs it once, then checks the result
//! (`count == 3`) and exits. LangGraph's counterpart is the same program in Python (`startup` in
//! `langgraph_bench.py`, a fresh `python -c` that imports `langgraph.graph`, builds, compiles and invokes).
//!
//! Exits non-zero when the graph cannot be built or run or gives another result. With `--rss` it prints
//! its peak resident set size (`VmHWM`, in KiB) before exiting.

use std::process::ExitCode;

use serde::{Deserialize, Serialize};
use weft_graph::{END, START, State, StateGraph};
use weft_runnable_core::RunnableConfig;

/// `count: integer`, no reducer.
#[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
struct Count {
    count: i64,
}

/// Builds, compiles and runs the graph once; the final count.
fn run() -> Result<i64, String> {
    let mut graph = StateGraph::<Count>::new();
    for name in ["n0", "n1", "n2"] {
        graph.add_node(name, |s: &Count| Count::update().count(s.count + 1));
    }
    graph.add_edge(START, "n0");
    graph.add_edge("n0", "n1");
    graph.add_edge("n1", "n2");
    graph.add_edge("n2", END);
    let compiled = graph.compile().map_err(|e| format!("cannot compile: {e}"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| format!("cannot start the tokio runtime: {e}"))?;
    let out = runtime
        .block_on(compiled.invoke(Count::update().count(0), &RunnableConfig::default()))
        .map_err(|e| format!("the run failed: {e}"))?;
    Ok(out.value.count)
}

fn main() -> ExitCode {
    match run() {
        Ok(3) => {}
        Ok(other) => {
            eprintln!("weft-bench-startup: count {other}, expected 3");
            return ExitCode::FAILURE;
        }
        Err(err) => {
            eprintln!("weft-bench-startup: {err}");
            return ExitCode::FAILURE;
        }
    }
    if std::env::args().nth(1).as_deref() == Some("--rss") {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let kib = status
            .lines()
            .find(|line| line.starts_with("VmHWM:"))
            .and_then(|line| line.split_whitespace().nth(1))
            .unwrap_or("0");
        println!("{kib}");
    }
    ExitCode::SUCCESS
}
