//! The durable checkpointers: loop1000 and messages1000 on SQLite (a fresh database file per op) and on
//! PostgreSQL (tables truncated before each op) and on Redis (a fresh thread per op, deleted after it), with
//! the rows and bytes each run leaves behind.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use tokio::runtime::Runtime;
use weft_graph::checkpoint::{CheckpointConfig, ListOptions};
use weft_graph::{Checkpointer, CompileConfig, CompiledGraph, Durability, GraphOutput, RunOptions};
use weft_integrations::postgres::PostgresSaver;
use weft_integrations::redis::RedisSaver;
use weft_integrations::sqlite::{SqliteDurability, SqliteOptions, SqliteSaver, StorageStats};
use weft_runnable_core::RunnableConfig;

use super::checkpoint::{ThreadIds, census, check_traffic, durability_name};
use crate::graphs::{self, ChatState, CountState};
use crate::measure::{Line, Options, Workload, ensure, err};

/// Where each op's checkpoints go.
pub(crate) enum Backend {
    /// A fresh database file per op under `root`.
    Sqlite {
        /// The folder of this process's databases (removed at the end).
        root: PathBuf,
        /// weft's settings.
        options: SqliteOptions,
        /// `PRAGMA synchronous=OFF` on the writer after opening (loop1000_sqlite_syncoff).
        sync_off: bool,
        /// Databases opened so far.
        opened: u64,
    },
    /// One saver in a schema of this process, its tables truncated before each op.
    Postgres {
        /// The saver.
        saver: Arc<PostgresSaver>,
        /// Its schema (dropped at the end).
        schema: String,
    },
    /// One saver under a key prefix of this process; each op's thread is deleted after it is measured.
    Redis {
        /// The saver.
        saver: Arc<RedisSaver>,
    },
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

enum Saver {
    Sqlite(Arc<SqliteSaver>, PathBuf),
    Postgres(Arc<PostgresSaver>),
    Redis(Arc<RedisSaver>),
}

impl Saver {
    fn checkpointer(&self) -> Arc<dyn Checkpointer> {
        match self {
            Saver::Sqlite(saver, _) => saver.clone(),
            Saver::Postgres(saver) => saver.clone(),
            Saver::Redis(saver) => saver.clone(),
        }
    }

    /// Rows and data bytes, and the bytes on disk: database + WAL files, or `pg_total_relation_size` of the
    /// three tables (indexes and TOAST included), or the Redis server memory of the thread's keys
    /// (`MEMORY USAGE`; Redis has no value rows apart from checkpoints and writes, so `blobs` stays 0).
    async fn storage(&self, schema: Option<&str>, thread: &str) -> Result<(StorageStats, u64), String> {
        match self {
            Saver::Sqlite(saver, dir) => {
                let stats = saver.storage_stats().await.map_err(err)?;
                let mut bytes = 0;
                for entry in std::fs::read_dir(dir).map_err(err)? {
                    bytes += entry.map_err(err)?.metadata().map_err(err)?.len();
                }
                Ok((stats, bytes))
            }
            Saver::Postgres(saver) => {
                let stats = saver.storage_stats().await.map_err(err)?;
                let bytes: i64 = sqlx::query_scalar(
                    "SELECT coalesce(sum(pg_total_relation_size(format('%I.%I', $1::text, t)::regclass)), 0)\
                     ::bigint FROM unnest(ARRAY['checkpoints', 'checkpoint_blobs', 'checkpoint_writes']) t",
                )
                .bind(schema.unwrap_or("public"))
                .fetch_one(saver.pool())
                .await
                .map_err(err)?;
                Ok((stats, u64::try_from(bytes).unwrap_or(0)))
            }
            Saver::Redis(saver) => {
                // Counted a page at a time, so that rebuilt values do not pile up in this process.
                let config = CheckpointConfig::thread(thread);
                let (mut checkpoints, mut writes, mut before) = (0_usize, 0_usize, None);
                loop {
                    let page =
                        ListOptions { before: before.take(), limit: Some(4), ..ListOptions::default() };
                    let tuples = saver.list(Some(&config), page).await.map_err(err)?;
                    checkpoints += tuples.len();
                    writes += tuples.iter().map(|t| t.pending_writes.len()).sum::<usize>();
                    match tuples.last() {
                        Some(last) => before = Some(last.checkpoint.id.clone()),
                        None => break,
                    }
                }
                let memory = saver.stored_bytes(thread).await.map_err(err)?;
                let stats = StorageStats {
                    checkpoints: u64::try_from(checkpoints).unwrap_or(u64::MAX),
                    blobs: 0,
                    writes: u64::try_from(writes).unwrap_or(u64::MAX),
                    data_bytes: memory,
                };
                Ok((stats, memory))
            }
        }
    }
}

impl Backend {
    /// An empty saver for the next op (untimed): a new file, or truncated tables.
    async fn fresh(&mut self) -> Result<Saver, String> {
        match self {
            Backend::Sqlite { root, options, sync_off, opened } => {
                *opened += 1;
                let dir = root.join(format!("run-{opened}"));
                std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
                let saver =
                    SqliteSaver::open_with(dir.join("weft.db"), options.clone()).await.map_err(err)?;
                if *sync_off {
                    // The writer pool has one connection that never expires: the setting stays.
                    sqlx::raw_sql("PRAGMA synchronous = OFF").execute(saver.pool()).await.map_err(err)?;
                }
                Ok(Saver::Sqlite(Arc::new(saver), dir))
            }
            Backend::Postgres { saver, .. } => {
                sqlx::raw_sql("TRUNCATE checkpoints, checkpoint_blobs, checkpoint_writes")
                    .execute(saver.pool())
                    .await
                    .map_err(err)?;
                Ok(Saver::Postgres(saver.clone()))
            }
            Backend::Redis { saver } => Ok(Saver::Redis(saver.clone())),
        }
    }

    fn schema(&self) -> Option<&str> {
        match self {
            Backend::Sqlite { .. } | Backend::Redis { .. } => None,
            Backend::Postgres { schema, .. } => Some(schema),
        }
    }

    /// What the line says about the storage's durability.
    async fn describe(&self, line: &mut Line) -> Result<(), String> {
        match self {
            Backend::Sqlite { options, sync_off, .. } => {
                let synchronous = match (sync_off, options.durability) {
                    (true, _) => "OFF",
                    (false, SqliteDurability::Normal) => "NORMAL",
                    (false, SqliteDurability::Full) => "FULL",
                };
                line.insert("sqlite_synchronous".into(), json!(synchronous));
                line.insert("settings".into(), json!(format!("synchronous={synchronous}, WAL")));
            }
            Backend::Postgres { saver, .. } => {
                let setting: String = sqlx::query_scalar("SHOW synchronous_commit")
                    .fetch_one(saver.pool())
                    .await
                    .map_err(err)?;
                line.insert("settings".into(), json!(format!("synchronous_commit={setting}")));
                line.insert("synchronous_commit".into(), json!(setting));
            }
            Backend::Redis { .. } => {
                line.insert(
                    "redis_durability".into(),
                    json!("acknowledged once applied in the server's memory; on disk as the server's AOF/RDB settings say"),
                );
            }
        }
        Ok(())
    }

    /// Removes what this process created: the database folder, or the schema.
    async fn remove(&self) -> Result<(), String> {
        match self {
            Backend::Sqlite { root, .. } => std::fs::remove_dir_all(root).map_err(err),
            Backend::Postgres { saver, schema } => {
                let sql = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(saver.pool()).await.map(drop).map_err(err)
            }
            // Each op's thread is deleted by `cleanup`.
            Backend::Redis { .. } => Ok(()),
        }
    }
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
    saver: Saver,
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
    backend: Backend,
    shape: Shape,
    durability: Durability,
    threads: ThreadIds,
    /// Rows and bytes after the last op.
    last: Option<(StorageStats, u64)>,
}

impl DurableRun {
    /// Runs `shape` on `backend` with `durability`.
    pub(crate) fn new(backend: Backend, shape: Shape, durability: Durability) -> Self {
        Self { backend, shape, durability, threads: ThreadIds::default(), last: None }
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
        let thread = run.config.configurable.get("thread_id").and_then(|v| v.as_str()).unwrap_or_default();
        let (stats, bytes) = rt.block_on(run.saver.storage(self.backend.schema(), thread))?;
        if let Saver::Redis(saver) = &run.saver {
            rt.block_on(saver.delete_thread(thread)).map_err(err)?;
        }
        if self.shape == Shape::Loop {
            let (checkpoints, writes) = LANGGRAPH_ROWS;
            ensure(stats.checkpoints == checkpoints && stats.writes == writes, || {
                format!(
                    "stored {stats:?}, expected {checkpoints} checkpoints and {writes} writes like LangGraph"
                )
            })?;
        }
        self.last = Some((stats, bytes));
        if let Saver::Sqlite(saver, dir) = run.saver {
            drop(run.graph);
            // Closed before the next op opens its database: otherwise its connections' threads end
            // while the next op's start, and the allocator gives those an arena each.
            rt.block_on(saver.close());
            std::fs::remove_dir_all(&dir).map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
        }
        Ok(())
    }

    fn extra(&mut self, rt: &Runtime, opts: &Options) -> Result<Line, String> {
        let mut line = Line::new();
        line.insert("durability".into(), json!(durability_name(self.durability)));
        rt.block_on(self.backend.describe(&mut line))?;
        if let Some((stats, bytes)) = self.last {
            line.insert("rows_checkpoints".into(), json!(stats.checkpoints));
            line.insert("rows_writes".into(), json!(stats.writes));
            if matches!(self.backend, Backend::Redis { .. }) {
                line.insert("redis_memory_bytes".into(), json!(bytes));
            } else {
                line.insert("rows_blobs".into(), json!(stats.blobs));
                line.insert("stored_bytes".into(), json!(stats.data_bytes));
                let key = if self.backend.schema().is_some() { "relation_bytes" } else { "file_bytes" };
                line.insert(key.into(), json!(bytes));
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
            if self.backend.schema().is_some() {
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
