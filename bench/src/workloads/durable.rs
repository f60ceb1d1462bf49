//! The durable checkpointers: loop1000 and messages1000 on SQLite (a fresh database file per op) and on
//! PostgreSQL (tables truncated before each op) and on Redis (a fresh thread per op, deleted after it), with
//! the rows and bytes each run leaves behind.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;
use tokio::runtime::Runtime;
use weft_graph::{Checkpointer, CompileConfig, CompiledGraph, Durability, GraphOutput, RunOptions};
use weft_integrations::sqlite::StorageStats;
use weft_runnable_core::RunnableConfig;

use super::checkpoint::{ThreadIds, census, check_traffic, durability_name};
use crate::graphs::{self, ChatState, CountState};
use crate::measure::{Line, Options, Workload, ensure, err};

/// Where each op's checkpoints go: one backend of this process (its folder of database files, its schema,
/// its key prefix). Each backend is its own type, so that a program links only the backends it runs.
#[async_trait]
pub(crate) trait Backend: Send + Sync {
    /// An empty saver for the next op (untimed): a new file, truncated tables, or the shared saver.
    async fn fresh(&mut self) -> Result<Box<dyn Fresh>, String>;

    /// What the line says about the storage's durability.
    async fn describe(&self, line: &mut Line) -> Result<(), String>;

    /// Removes what this process created: the database folder, or the schema.
    async fn remove(&self) -> Result<(), String>;

    /// The line's key for the bytes [`Fresh::storage`] returns beside the rows; `None` when those bytes
    /// are the server's memory (Redis), which has no separate data bytes or blob rows either.
    fn bytes_key(&self) -> Option<&'static str>;

    /// Whether each saver call is one statement on one pooled connection (PostgreSQL): the line then says
    /// how many statements a superstep takes.
    fn counts_statements(&self) -> bool {
        false
    }
}

/// One op's saver.
#[async_trait]
pub(crate) trait Fresh: Send + Sync {
    /// The checkpointer the graph is compiled on.
    fn checkpointer(&self) -> Arc<dyn Checkpointer>;

    /// Rows and data bytes of `thread`, and the bytes on disk (database + WAL files, or
    /// `pg_total_relation_size` of the three tables), or the Redis server memory of the thread's keys.
    async fn storage(&self, thread: &str) -> Result<(StorageStats, u64), String>;

    /// Ends the op once its graph is dropped: closes and removes its database, or deletes its thread.
    async fn finish(self: Box<Self>, thread: &str) -> Result<(), String>;
}

/// The graph an op runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// loop1000.
    Loop,
    /// messages1000.
    Messages,
}

enum Graph {
    Loop(CompiledGraph<CountState>),
    Messages(CompiledGraph<ChatState>),
}

fn compile(shape: Shape, saver: Arc<dyn Checkpointer>) -> Result<Graph, String> {
    let config = CompileConfig::new().checkpointer(saver);
    Ok(match shape {
        Shape::Loop => Graph::Loop(graphs::counting_loop(1000, None).compile_with(config).map_err(err)?),
        Shape::Messages => {
            Graph::Messages(graphs::message_loop(1000, None).compile_with(config).map_err(err)?)
        }
    })
}

/// One prepared op: an empty saver, the graph compiled on it, a fresh thread.
pub(crate) struct Run {
    saver: Box<dyn Fresh>,
    graph: Graph,
    config: RunnableConfig,
}

/// What an op returned.
pub(crate) enum Outcome {
    Loop(GraphOutput<CountState>),
    Messages(GraphOutput<ChatState>),
}

/// loop1000 or messages1000 on a durable checkpointer.
pub(crate) struct DurableRun {
    backend: Box<dyn Backend>,
    shape: Shape,
    durability: Durability,
    threads: ThreadIds,
    /// Rows and bytes after the last op.
    last: Option<(StorageStats, u64)>,
}

impl DurableRun {
    /// Runs `shape` on `backend` with `durability`.
    pub(crate) fn new(backend: impl Backend + 'static, shape: Shape, durability: Durability) -> Self {
        Self { backend: Box::new(backend), shape, durability, threads: ThreadIds::default(), last: None }
    }

    fn options(&self) -> RunOptions {
        RunOptions { durability: self.durability, ..RunOptions::default() }
    }
}

/// The rows LangGraph's savers hold after one loop1000: checkpoints, writes.
const LANGGRAPH_ROWS: (u64, u64) = (1002, 2001);

impl Workload for DurableRun {
    type Ctx = Run;
    type Out = Outcome;

    fn prepare(&mut self, rt: &Runtime) -> Result<Run, String> {
        let saver = rt.block_on(self.backend.fresh())?;
        let graph = compile(self.shape, saver.checkpointer())?;
        Ok(Run {
            saver,
            graph,
            config: self.threads.next(RunnableConfig::default().with_recursion_limit(2000)),
        })
    }

    async fn op(&self, run: &mut Run) -> Result<Outcome, String> {
        match &run.graph {
            Graph::Loop(graph) => graph
                .invoke_with(CountState::update().count(0), &run.config, self.options())
                .await
                .map(Outcome::Loop)
                .map_err(err),
            Graph::Messages(graph) => graph
                .invoke_with(ChatState::update().messages(Vec::new()), &run.config, self.options())
                .await
                .map(Outcome::Messages)
                .map_err(err),
        }
    }

    fn check(&self, out: &Outcome, _: &Run) -> Result<(), String> {
        match out {
            Outcome::Loop(out) => ensure(out.value.count == 1000, || {
                format!("final state {:?}, expected {{count: 1000}}", out.value)
            }),
            Outcome::Messages(out) => graphs::check_messages(&out.value.messages, 1000),
        }
    }

    /// Reads what the op stored (checking loop1000's rows against LangGraph's) and drops the saver.
    fn cleanup(&mut self, run: Run, rt: &Runtime) -> Result<(), String> {
        let Run { saver, graph, config } = run;
        let thread = config.configurable.get("thread_id").and_then(|v| v.as_str()).unwrap_or_default();
        let (stats, bytes) = rt.block_on(saver.storage(thread))?;
        // The graph holds the saver: dropped first, so that closing it ends its connections before the
        // next op opens its own (otherwise their threads overlap, and the allocator gives each an arena).
        drop(graph);
        rt.block_on(saver.finish(thread))?;
        if self.shape == Shape::Loop {
            let (checkpoints, writes) = LANGGRAPH_ROWS;
            ensure(stats.checkpoints == checkpoints && stats.writes == writes, || {
                format!(
                    "stored {stats:?}, expected {checkpoints} checkpoints and {writes} writes like LangGraph"
                )
            })?;
        }
        self.last = Some((stats, bytes));
        Ok(())
    }

    fn extra(&mut self, rt: &Runtime, opts: &Options) -> Result<Line, String> {
        let mut line = Line::new();
        line.insert("durability".into(), json!(durability_name(self.durability)));
        rt.block_on(self.backend.describe(&mut line))?;
        if let Some((stats, bytes)) = self.last {
            line.insert("rows_checkpoints".into(), json!(stats.checkpoints));
            line.insert("rows_writes".into(), json!(stats.writes));
            match self.backend.bytes_key() {
                Some(key) => {
                    line.insert("rows_blobs".into(), json!(stats.blobs));
                    line.insert("stored_bytes".into(), json!(stats.data_bytes));
                    line.insert(key.into(), json!(bytes));
                }
                None => {
                    line.insert("redis_memory_bytes".into(), json!(bytes));
                }
            }
        }
        if !opts.quick {
            let run = self.prepare(rt)?;
            let (shape, config, options) = (self.shape, run.config.clone(), self.options());
            let counted = census(run.saver.checkpointer(), rt, move |checkpointer| async move {
                match compile(shape, checkpointer)? {
                    Graph::Loop(g) => {
                        g.invoke_with(CountState::update().count(0), &config, options).await.map(drop)
                    }
                    Graph::Messages(g) => g
                        .invoke_with(ChatState::update().messages(Vec::new()), &config, options)
                        .await
                        .map(drop),
                }
                .map_err(err)
            })?;
            if shape == Shape::Loop {
                check_traffic(&counted)?;
            }
            if self.backend.counts_statements() {
                // Each saver call (`put`, `put_writes`, or a whole `put_batch` of the queued saves) is one
                // statement on one pooled connection: one round trip.
                let calls = counted["saver_calls_per_run"].as_u64().unwrap_or(0);
                line.insert("statements_per_superstep".into(), json!(calls as f64 / 1000.0));
            }
            line.extend(counted);
            self.cleanup(run, rt)?;
        }
        rt.block_on(self.backend.remove())?;
        Ok(line)
    }
}
