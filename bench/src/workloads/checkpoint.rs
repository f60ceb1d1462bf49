//! The checkpointed loops: loop1000_memory (durability `async`, the default) and loop1000_memory_dsync
//! (`sync`); the count of checkpointer calls per run (shared with the durable backends' workloads).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::runtime::Runtime;
use weft_graph::checkpoint::{
    ChannelAppends, ChannelVersions, CheckpointError, Intercept, Intercepted, SaveOp,
};
use weft_graph::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, Checkpointer, CompileConfig, CompiledGraph, Durability,
    GraphOutput, InMemorySaver, RunOptions,
};
use weft_runnable_core::RunnableConfig;

use crate::graphs::{self, CountState};
use crate::measure::{Info, Line, Options, Threads, Workload, ensure, err, measure};

/// LangGraph's traffic for one checkpointed loop1000 (WORKLOADS.md): checkpoints saved, `put_writes`
/// calls, writes in them.
pub(crate) const LANGGRAPH_TRAFFIC: (usize, usize, usize) = (1002, 1001, 2001);

/// A fresh thread id per op, and the previous thread to delete.
#[derive(Debug, Default)]
pub(crate) struct ThreadIds {
    issued: u64,
    previous: Option<String>,
}

impl ThreadIds {
    /// `config` with a new thread id.
    pub(crate) fn next(&mut self, config: RunnableConfig) -> RunnableConfig {
        self.issued += 1;
        let id = format!("bench-thread-{}", self.issued);
        self.previous = Some(id.clone());
        config.with_configurable("thread_id", id)
    }

    /// Deletes the thread of the previous op from `saver`, so that the saver holds one run at a time.
    pub(crate) fn delete_previous(&mut self, saver: &dyn Checkpointer, rt: &Runtime) -> Result<(), String> {
        match self.previous.take() {
            Some(id) => rt.block_on(saver.delete_thread(&id)).map_err(err),
            None => Ok(()),
        }
    }
}

/// Counts the calls made to a checkpointer.
#[derive(Debug, Default)]
struct Counting {
    puts: AtomicUsize,
    put_writes: AtomicUsize,
    writes: AtomicUsize,
    /// Calls that reach the saver as one unit (`put`, `put_writes` or a whole `put_batch`).
    calls: AtomicUsize,
}

impl Counting {
    /// What `op` adds to the counts: (puts, put_writes calls, writes).
    fn tally(op: &SaveOp) -> (usize, usize, usize) {
        match op {
            SaveOp::Put { .. } => (1, 0, 0),
            SaveOp::Writes { writes, .. } => (0, 1, writes.len()),
        }
    }

    /// Adds one call with these counts.
    fn count(&self, (puts, put_writes, writes): (usize, usize, usize)) {
        self.puts.fetch_add(puts, Ordering::Relaxed);
        self.put_writes.fetch_add(put_writes, Ordering::Relaxed);
        self.writes.fetch_add(writes, Ordering::Relaxed);
        self.calls.fetch_add(1, Ordering::Relaxed);
    }
}

#[async_trait]
impl Intercept for Counting {
    async fn put(
        &self,
        inner: &dyn Checkpointer,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig, CheckpointError> {
        self.count((1, 0, 0));
        inner.put(config, checkpoint, metadata, new_versions).await
    }

    async fn put_with_appends(
        &self,
        inner: &dyn Checkpointer,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        appends: ChannelAppends,
    ) -> Result<CheckpointConfig, CheckpointError> {
        self.count((1, 0, 0));
        inner.put_with_appends(config, checkpoint, metadata, new_versions, appends).await
    }

    async fn put_writes(
        &self,
        inner: &dyn Checkpointer,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<(), CheckpointError> {
        self.count((0, 1, writes.len()));
        inner.put_writes(config, writes, task_id, task_path).await
    }

    async fn put_batch(&self, inner: &dyn Checkpointer, ops: Vec<SaveOp>) -> Result<(), CheckpointError> {
        let (puts, put_writes, writes) =
            ops.iter().map(Self::tally).fold((0, 0, 0), |(a, b, c), (x, y, z)| (a + x, b + y, c + z));
        self.count((puts, put_writes, writes));
        inner.put_batch(ops).await
    }

    fn save_now(&self, inner: &dyn Checkpointer, op: SaveOp) -> Result<Option<SaveOp>, CheckpointError> {
        // Counted once saved here: an op handed back reaches `put_batch` and is counted there.
        let tally = Self::tally(&op);
        let back = inner.save_now(op)?;
        if back.is_none() {
            self.count(tally);
        }
        Ok(back)
    }
}

/// Runs `run` once (untimed) with a counting wrapper around `saver` and reports the checkpointer traffic
/// as LangGraph's census does: checkpoints saved, `put_writes` calls, writes.
pub(crate) fn census<F, Fut>(saver: Arc<dyn Checkpointer>, rt: &Runtime, run: F) -> Result<Line, String>
where
    F: FnOnce(Arc<dyn Checkpointer>) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let counted = Arc::new(Intercepted::new(saver, Counting::default()));
    rt.block_on(run(counted.clone()))?;
    let counting = counted.intercept();
    let mut line = Line::new();
    line.insert("checkpoint_puts_per_run".into(), json!(counting.puts.load(Ordering::Relaxed)));
    line.insert("put_writes_calls_per_run".into(), json!(counting.put_writes.load(Ordering::Relaxed)));
    line.insert("pending_writes_per_run".into(), json!(counting.writes.load(Ordering::Relaxed)));
    line.insert("saver_calls_per_run".into(), json!(counting.calls.load(Ordering::Relaxed)));
    Ok(line)
}

/// How a line names a durability mode.
pub(crate) fn durability_name(durability: Durability) -> &'static str {
    match durability {
        Durability::Async => "async (default)",
        Durability::Sync => "sync",
        Durability::Exit => "exit",
    }
}

/// Checks a census of loop1000 against LangGraph's traffic: the same persistence traffic is part of doing
/// the same work, so a run that differs does not count.
pub(crate) fn check_traffic(counted: &Line) -> Result<(), String> {
    let traffic = (
        counted["checkpoint_puts_per_run"].as_u64(),
        counted["put_writes_calls_per_run"].as_u64(),
        counted["pending_writes_per_run"].as_u64(),
    );
    let (puts, calls, writes) = LANGGRAPH_TRAFFIC;
    ensure(traffic == (Some(puts as u64), Some(calls as u64), Some(writes as u64)), || {
        format!("checkpointer traffic {traffic:?} differs from LangGraph's {LANGGRAPH_TRAFFIC:?}")
    })
}

/// loop1000 on a fresh thread of an in-memory checkpointer.
struct CheckpointedLoop {
    graph: CompiledGraph<CountState>,
    saver: Arc<InMemorySaver>,
    threads: ThreadIds,
    durability: Durability,
}

impl Workload for CheckpointedLoop {
    type Ctx = RunnableConfig;
    type Out = GraphOutput<CountState>;

    /// A fresh thread id; the previous op's thread is deleted (untimed) so that peak RSS is that of one run.
    fn prepare(&mut self, rt: &Runtime) -> Result<RunnableConfig, String> {
        self.threads.delete_previous(self.saver.as_ref(), rt)?;
        Ok(self.threads.next(RunnableConfig::default().with_recursion_limit(2000)))
    }

    async fn op(&self, config: &mut RunnableConfig) -> Result<Self::Out, String> {
        let options = RunOptions { durability: self.durability, ..RunOptions::default() };
        self.graph.invoke_with(CountState::update().count(0), config, options).await.map_err(err)
    }

    fn check(&self, out: &Self::Out, _: &RunnableConfig) -> Result<(), String> {
        ensure(out.value.count == 1000, || format!("final state {:?}, expected {{count: 1000}}", out.value))
    }

    fn extra(&mut self, rt: &Runtime, _: &Options) -> Result<Line, String> {
        let mut line = Line::new();
        line.insert("durability".into(), json!(durability_name(self.durability)));
        let config = self.prepare(rt)?;
        let options = RunOptions { durability: self.durability, ..RunOptions::default() };
        let counted = census(self.saver.clone(), rt, move |checkpointer| async move {
            let graph = graphs::counting_loop(1000, None)
                .compile_with(CompileConfig::new().checkpointer(checkpointer))
                .map_err(err)?;
            graph.invoke_with(CountState::update().count(0), &config, options).await.map(drop).map_err(err)
        })?;
        check_traffic(&counted)?;
        line.extend(counted);
        Ok(line)
    }
}

fn checkpointed_loop(opts: &Options, info: Info, durability: Durability) -> Result<Line, String> {
    measure(
        opts,
        info,
        Threads::One,
        |_| Ok(Arc::new(InMemorySaver::new())),
        |saver| {
            let graph = graphs::counting_loop(1000, None)
                .compile_with(CompileConfig::new().checkpointer(saver.clone()))
                .map_err(err)?;
            Ok(CheckpointedLoop { graph, saver, threads: ThreadIds::default(), durability })
        },
    )
}

/// `loop1000_memory`: loop1000 with the in-memory checkpointer, durability `async` (the default).
pub(crate) fn loop1000_memory(opts: &Options) -> Result<Line, String> {
    checkpointed_loop(opts, Info::steps("loop1000_memory", 1000), Durability::Async)
}

/// `loop1000_memory_dsync`: the same with durability `sync`.
pub(crate) fn loop1000_memory_dsync(opts: &Options) -> Result<Line, String> {
    checkpointed_loop(opts, Info::steps("loop1000_memory_dsync", 1000).supplementary(), Durability::Sync)
}

/// The line of a workload that cannot run here (no server): no figures, a note saying why.
pub(crate) fn skipped(name: &str, why: &str) -> Line {
    eprintln!("[weft-bench] {name}: skipped: {why}");
    let mut line = Line::new();
    line.insert("workload".into(), json!(name));
    line.insert("skipped".into(), json!(true));
    line.insert("note".into(), json!(format!("skipped: {why}")));
    line
}
