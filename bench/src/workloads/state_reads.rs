//! The rows users ask about: `get_state` on a thread of 1,000 checkpoints (in memory, SQLite, PostgreSQL)
//! and the bytes a chat thread stores per turn after 1,000 turns (SQLite).
//!
//! - `get_state_1000_*`: loop1000 runs once on one thread (untimed, in setup: 1,002 checkpoints); the op is
//!   one `get_state` of that thread's latest checkpoint, checked (`count == 1000`, nothing next).
//! - `checkpoint_bytes_per_turn_sqlite`: a chat graph (`reply` appends one AI message to the
//!   conversation) on a fresh SQLite file at `synchronous = FULL`; 1,000 turns on one thread, each an
//!   invoke with one human message. The figure is the database's size after a WAL checkpoint
//!   (`page_count * page_size`) divided by the turns; the time of the 1,000 turns is reported beside it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use tokio::runtime::Runtime;
use weft_graph::{
    Checkpointer, CompileConfig, CompiledGraph, END, InMemorySaver, START, StateGraph, StateSnapshot,
};
use weft_integrations::postgres::{PostgresOptions, PostgresSaver};
use weft_integrations::sqlite::{SqliteDurability, SqliteOptions, SqliteSaver};
use weft_runnable_core::{Message, RunnableConfig};

use super::backends::{pg_reachable, pg_url};
use super::checkpoint::skipped;
use crate::graphs::{self, ChatState, CountState};
use crate::measure::{Info, Line, Options, Threads, Workload, ensure, err, measure, secs};
use crate::procfs::{self, round};

/// The thread the checkpoints are on.
const THREAD: &str = "bench-get-state";

/// Turns of the chat thread.
const TURNS: usize = 1000;

/// Removes what a `get_state` row made (its database folder, its schema) at the end; a closure, so that a
/// program links only the backend it runs.
type Remove = Box<dyn FnOnce(&Runtime) -> Result<(), String>>;

struct GetState {
    graph: CompiledGraph<CountState>,
    config: RunnableConfig,
    remove: Option<Remove>,
}

impl Workload for GetState {
    type Ctx = ();
    type Out = StateSnapshot<CountState>;

    fn prepare(&mut self, _: &Runtime) -> Result<(), String> {
        Ok(())
    }

    async fn op(&self, (): &mut ()) -> Result<Self::Out, String> {
        self.graph.get_state(&self.config).await.map_err(err)
    }

    fn check(&self, out: &Self::Out, (): &()) -> Result<(), String> {
        ensure(out.values.count == 1000 && out.next.is_empty(), || {
            format!("state {:?}, next {:?}: expected count 1000 and nothing next", out.values, out.next)
        })
    }

    /// Removes the database folder or the schema.
    fn extra(&mut self, rt: &Runtime, _: &Options) -> Result<Line, String> {
        if let Some(remove) = self.remove.take() {
            remove(rt)?;
        }
        let mut line = Line::new();
        line.insert("checkpoints_on_thread".into(), json!(1002));
        Ok(line)
    }
}

/// Compiles loop1000 on `saver` and runs it once on [`THREAD`] (the setup of a `get_state` row).
fn filled(rt: &Runtime, saver: Arc<dyn Checkpointer>, remove: Option<Remove>) -> Result<GetState, String> {
    let graph = graphs::counting_loop(1000, None)
        .compile_with(CompileConfig::new().checkpointer(saver))
        .map_err(err)?;
    let config = RunnableConfig::default().with_recursion_limit(2000).with_configurable("thread_id", THREAD);
    let out = rt.block_on(graph.invoke(CountState::update().count(0), &config)).map_err(err)?;
    ensure(out.value.count == 1000, || format!("the filling run ended at {:?}", out.value))?;
    Ok(GetState { graph, config, remove })
}

fn get_state(
    opts: &Options,
    name: &'static str,
    open: impl FnOnce(&Runtime) -> Result<GetState, String>,
) -> Result<Line, String> {
    let info = Info::steps(name, 1).unit("get_state of the latest of 1,002 checkpoints");
    measure(opts, info, Threads::One, open, Ok::<GetState, String>)
}

/// `get_state_1000_memory`: on the in-memory saver.
pub(crate) fn get_state_1000_memory(opts: &Options) -> Result<Line, String> {
    get_state(opts, "get_state_1000_memory", |rt| filled(rt, Arc::new(InMemorySaver::new()), None))
}

/// A fresh folder for this process's SQLite file.
fn sqlite_dir(name: &str) -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("weft-bench-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// Opens a SQLite saver at `synchronous = FULL` in `dir`.
fn open_sqlite(rt: &Runtime, dir: &std::path::Path) -> Result<SqliteSaver, String> {
    let options = SqliteOptions::default().durability(SqliteDurability::Full);
    rt.block_on(SqliteSaver::open_with(dir.join("weft.db"), options)).map_err(err)
}

/// `get_state_1000_sqlite`: on a SQLite file.
pub(crate) fn get_state_1000_sqlite(opts: &Options) -> Result<Line, String> {
    get_state(opts, "get_state_1000_sqlite", |rt| {
        let dir = sqlite_dir("get_state_1000_sqlite")?;
        let saver = open_sqlite(rt, &dir)?;
        let remove: Remove = Box::new(move |_| std::fs::remove_dir_all(&dir).map_err(err));
        filled(rt, Arc::new(saver), Some(remove))
    })
}

/// `get_state_1000_postgres`: on PostgreSQL, in a schema of this process.
pub(crate) fn get_state_1000_postgres(opts: &Options) -> Result<Line, String> {
    let url = pg_url();
    if !pg_reachable(&url) {
        return Ok(skipped(
            "get_state_1000_postgres",
            "no PostgreSQL server at 127.0.0.1:5432 (set WEFT_BENCH_PG_URL)",
        ));
    }
    get_state(opts, "get_state_1000_postgres", |rt| {
        let schema = format!("weft_bench_get_state_{}", std::process::id());
        let options = PostgresOptions { max_connections: 4, ..PostgresOptions::default() }.schema(&schema);
        let saver = Arc::new(rt.block_on(PostgresSaver::connect_with(&url, options)).map_err(err)?);
        let pool = saver.pool().clone();
        let remove: Remove = Box::new(move |rt| {
            let sql = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
            rt.block_on(sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&pool)).map(drop).map_err(err)
        });
        filled(rt, saver, Some(remove))
    })
}

/// The chat graph: `reply` appends one AI message.
fn chat(saver: Arc<dyn Checkpointer>) -> Result<CompiledGraph<ChatState>, String> {
    let mut graph = StateGraph::<ChatState>::new();
    graph.add_node("reply", |s: &ChatState| {
        ChatState::update().messages(vec![Message::ai(format!("reply {}", s.messages.len() / 2))])
    });
    graph.add_edge(START, "reply");
    graph.add_edge("reply", END);
    graph.compile_with(CompileConfig::new().checkpointer(saver)).map_err(err)
}

/// `checkpoint_bytes_per_turn_sqlite`: the bytes a chat thread's database holds per turn after 1,000 turns.
/// A quick run (the smoke run of CI) takes 50 turns.
pub(crate) fn checkpoint_bytes_per_turn_sqlite(opts: &Options) -> Result<Line, String> {
    let name = "checkpoint_bytes_per_turn_sqlite";
    let turns = if opts.quick { 50 } else { TURNS };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(err)?;
    let dir = sqlite_dir(name)?;
    let saver = Arc::new(open_sqlite(&rt, &dir)?);
    let graph = chat(saver.clone())?;
    let config = RunnableConfig::default().with_configurable("thread_id", THREAD);
    let load_start = procfs::loadavg_1m();
    let started = Instant::now();
    let mut last = 0;
    for turn in 0..turns {
        let input = ChatState::update().messages(vec![Message::human(format!("turn {turn}"))]);
        last = rt.block_on(graph.invoke(input, &config)).map_err(err)?.value.messages.len();
    }
    let took = started.elapsed();
    let rss_split = procfs::rss_split_mb();
    ensure(last == 2 * turns, || format!("{last} messages after {turns} turns, expected {}", 2 * turns))?;
    let bytes: i64 = rt
        .block_on(async {
            sqlx::raw_sql("PRAGMA wal_checkpoint(TRUNCATE)").execute(saver.pool()).await?;
            sqlx::query_scalar("SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()")
                .fetch_one(saver.pool())
                .await
        })
        .map_err(err)?;
    drop(graph);
    drop(saver);
    std::fs::remove_dir_all(&dir).map_err(err)?;
    let mut line = Line::new();
    line.insert("workload".into(), json!(name));
    line.insert("value".into(), json!(round(bytes as f64 / turns as f64, 1)));
    line.insert("value_unit".into(), json!("bytes"));
    line.insert("database_bytes".into(), json!(bytes));
    line.insert("turns".into(), json!(turns));
    if opts.quick {
        line.insert("quick".into(), json!(true));
    }
    line.insert("median_s".into(), secs(took));
    line.insert("repeats".into(), json!(1));
    line.insert("peak_rss_mb".into(), json!(procfs::peak_rss_mb()));
    if let Some((anon, file)) = rss_split {
        line.insert("rss_end_anon_mb".into(), json!(anon));
        line.insert("rss_end_file_mb".into(), json!(file));
    }
    line.insert("settings".into(), json!("synchronous=FULL, WAL"));
    line.insert("loadavg_1m_start".into(), json!(load_start));
    line.insert("loadavg_1m_end".into(), json!(procfs::loadavg_1m()));
    line.insert(
        "what".into(),
        json!("database size after a WAL checkpoint (page_count * page_size) per turn, after 1,000 turns of a chat thread (one human message in, one AI message out); median_s: the 1,000 turns"),
    );
    Ok(line)
}
