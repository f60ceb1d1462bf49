//! weft's side of the benchmark workloads of `bench/langgraph/WORKLOADS.md`, measured as LangGraph's
//! `langgraph_bench.py` measures its side. `cargo xtask bench` builds the programs in release mode and
//! runs them.
//!
//! Each workload runs alone in a fresh process of the program that holds its group (`weft-bench-engine`,
//! `-agents`, `-sqlite`, `-postgres`, `-redis`, `-run-wait`): that process holds the engine and what its
//! group uses, as LangGraph's script imports a backend's modules only in the workloads that use it.
//! `weft-bench` holds every group: it lists them all, runs each workload in its group's program, and runs
//! any of them in its own process with `--only` (the instruction-count gate counts those).

mod cli;
mod graphs;
mod measure;
mod procfs;
mod workloads;

pub use cli::main;
pub use workloads::{AGENTS, ENGINE, POSTGRES, PROGRAMS, Program, REDIS, RUN_WAIT, SQLITE};
