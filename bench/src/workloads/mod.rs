//! Every workload of WORKLOADS.md, by name, in groups: each group is a program of its own, which holds the
//! engine and what the group uses (a backend, the agents, the server), and nothing else.

mod agents;
mod backends;
mod basic;
mod checkpoint;
mod durable;
mod fanout;
mod messages;
mod react;
mod server;
mod startup;
mod state_reads;

use crate::measure::{Info, Line, Options};

/// A workload's name, whether it is supplementary, and how to run it (in this process).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    /// The name, as in `langgraph_bench.py`.
    pub(crate) name: &'static str,
    /// Not one of the workloads the issue sets targets for.
    pub(crate) supplementary: bool,
    /// weft's alone: LangGraph's script has no counterpart, so comparisons leave it out.
    pub(crate) weft_only: bool,
    /// Runs it and returns its output line.
    pub(crate) run: fn(&Options) -> Result<Line, String>,
}

const fn required(name: &'static str, run: fn(&Options) -> Result<Line, String>) -> Entry {
    Entry { name, supplementary: false, weft_only: false, run }
}

const fn supplementary(name: &'static str, run: fn(&Options) -> Result<Line, String>) -> Entry {
    Entry { name, supplementary: true, weft_only: false, run }
}

const fn weft_only(name: &'static str, run: fn(&Options) -> Result<Line, String>) -> Entry {
    Entry { name, supplementary: true, weft_only: true, run }
}

/// A group of workloads and the program that runs them alone.
#[derive(Debug)]
pub struct Program {
    /// The program's name: `weft-bench-…`, built beside `weft-bench`.
    pub(crate) name: &'static str,
    /// Its workloads, the required ones first.
    pub(crate) entries: &'static [Entry],
}

impl Program {
    /// The workload called `name`, if this group has it.
    pub(crate) fn find(&self, name: &str) -> Option<&'static Entry> {
        self.entries.iter().find(|entry| entry.name == name)
    }
}

/// The engine with the in-memory saver: start-up, the graph shapes, streaming, the in-memory checkpoints.
pub static ENGINE: Program = Program {
    name: "weft-bench-engine",
    entries: &[
        required("startup", startup::startup),
        required("chain100", basic::chain100),
        required("loop1000", |o| basic::counting_loop(o, Info::steps("loop1000", 1000), 1000)),
        required("fanout1000", fanout::fanout1000),
        required("parallel_join", fanout::parallel_join),
        required("messages1000", messages::messages1000),
        required("loop1000_memory", checkpoint::loop1000_memory),
        required("throughput_chain100_x100", basic::throughput_chain100_x100),
        required("stream_updates_loop1000", basic::stream_updates_loop1000),
        required("get_state_1000_memory", state_reads::get_state_1000_memory),
        supplementary("loop_scale_100", |o| {
            basic::counting_loop(o, Info::steps("loop_scale_100", 100).supplementary(), 100)
        }),
        supplementary("loop_scale_4000", |o| {
            basic::counting_loop(o, Info::steps("loop_scale_4000", 4000).supplementary(), 4000)
        }),
        supplementary("messages_scale_250", |o| {
            messages::messages_scale(o, Info::steps("messages_scale_250", 250).supplementary(), 250)
        }),
        supplementary("messages_scale_500", |o| {
            messages::messages_scale(o, Info::steps("messages_scale_500", 500).supplementary(), 500)
        }),
        supplementary("messages_scale_2000", |o| {
            messages::messages_scale(o, Info::steps("messages_scale_2000", 2000).supplementary(), 2000)
        }),
        supplementary("messages1000_memory", messages::messages1000_memory),
        supplementary("loop1000_memory_dsync", checkpoint::loop1000_memory_dsync),
        supplementary("chain100_async_single", basic::chain100_async_single),
    ],
};

/// The prebuilt agents: `create_react_agent` and `create_agent` with its middleware.
pub static AGENTS: Program = Program {
    name: "weft-bench-agents",
    entries: &[
        required("react10", react::react10),
        required("create_agent10", agents::create_agent10),
        required("create_agent10_hitl_summarization", agents::create_agent10_hitl_summarization),
        required("create_agent_build", agents::create_agent_build),
        required("create_agent_memory", agents::create_agent_memory),
    ],
};

/// The SQLite saver.
pub static SQLITE: Program = Program {
    name: "weft-bench-sqlite",
    entries: &[
        required("loop1000_sqlite", backends::loop1000_sqlite),
        required("loop1000_sqlite_normal", backends::loop1000_sqlite_normal),
        required("get_state_1000_sqlite", state_reads::get_state_1000_sqlite),
        required("checkpoint_bytes_per_turn_sqlite", state_reads::checkpoint_bytes_per_turn_sqlite),
        supplementary("messages1000_sqlite", backends::messages1000_sqlite),
        supplementary("loop1000_sqlite_dsync", backends::loop1000_sqlite_dsync),
        supplementary("loop1000_sqlite_syncoff", backends::loop1000_sqlite_syncoff),
    ],
};

/// The PostgreSQL saver.
pub static POSTGRES: Program = Program {
    name: "weft-bench-postgres",
    entries: &[
        required("loop1000_postgres", backends::loop1000_postgres),
        required("get_state_1000_postgres", state_reads::get_state_1000_postgres),
        supplementary("messages1000_postgres", backends::messages1000_postgres),
        supplementary("loop1000_postgres_dsync", backends::loop1000_postgres_dsync),
        supplementary("loop1000_postgres_asynccommit", backends::loop1000_postgres_asynccommit),
    ],
};

/// The Redis saver (weft's side only: LangGraph's script has no Redis saver).
pub static REDIS: Program = Program {
    name: "weft-bench-redis",
    entries: &[
        supplementary("messages1000_redis", backends::messages1000_redis),
        supplementary("loop1000_redis", backends::loop1000_redis),
    ],
};

/// A run through weft-server in this process (weft only).
pub static RUN_WAIT: Program = Program {
    name: "weft-bench-run-wait",
    entries: &[weft_only("server_run_wait", server::server_run_wait)],
};

/// Every group, in the order `weft-bench` lists and runs them.
pub static PROGRAMS: &[&Program] = &[&ENGINE, &AGENTS, &SQLITE, &POSTGRES, &REDIS, &RUN_WAIT];
