//! The counting workloads without a checkpointer: chain100, loop1000 (and its scales), the update stream,
//! the async chain alone and 100 at once.

use futures::StreamExt as _;
use serde_json::json;
use tokio::runtime::Runtime;
use weft_graph::{CompiledGraph, StreamData, StreamMode, StreamPart};
use weft_runnable_core::RunnableConfig;

use crate::graphs::{self, CountState, Probe};
use crate::measure::{Info, Line, Options, Threads, Workload, ensure, err, measure, step_profile};

/// One invoke of a counting graph from `{count: 0}`, checked against the final count.
struct CountInvoke {
    graph: CompiledGraph<CountState>,
    config: RunnableConfig,
    expected: i64,
    /// For loops: the limit, to build the instrumented copy of the step profile.
    profile_limit: Option<i64>,
}

impl CountInvoke {
    fn new(graph: CompiledGraph<CountState>, recursion_limit: Option<u32>, expected: i64) -> Self {
        let config = match recursion_limit {
            Some(limit) => RunnableConfig::default().with_recursion_limit(limit),
            None => RunnableConfig::default(),
        };
        Self { graph, config, expected, profile_limit: None }
    }
}

impl Workload for CountInvoke {
    type Ctx = ();
    type Out = weft_graph::GraphOutput<CountState>;

    fn prepare(&mut self, _: &Runtime) -> Result<(), String> {
        Ok(())
    }

    async fn op(&self, _: &mut ()) -> Result<Self::Out, String> {
        self.graph.invoke(CountState::update().count(0), &self.config).await.map_err(err)
    }

    fn check(&self, out: &Self::Out, _: &()) -> Result<(), String> {
        ensure(!out.is_interrupted(), || format!("the run paused: {:?}", out.interrupts))?;
        ensure(out.value.count == self.expected, || {
            format!("final state {:?}, expected {{count: {}}}", out.value, self.expected)
        })
    }

    fn extra(&mut self, rt: &Runtime, opts: &Options) -> Result<Line, String> {
        let mut line = Line::new();
        let Some(limit) = self.profile_limit.filter(|_| !opts.quick) else { return Ok(line) };
        let probe = Probe::default();
        let graph = graphs::counting_loop(limit, Some(probe.clone())).compile().map_err(err)?;
        let mut runs = Vec::new();
        for _ in 0..3 {
            rt.block_on(graph.invoke(CountState::update().count(0), &self.config)).map_err(err)?;
            runs.push(graphs::take(&probe));
        }
        line.insert("us_per_step_at_step".into(), step_profile(&runs, &[100, 500, 900]));
        Ok(line)
    }
}

/// `chain100`: a linear chain of 100 nodes.
pub(crate) fn chain100(opts: &Options) -> Result<Line, String> {
    measure(
        opts,
        Info::steps("chain100", 100),
        Threads::One,
        |_| Ok(()),
        |()| Ok(CountInvoke::new(graphs::chain(100, false).compile().map_err(err)?, None, 100)),
    )
}

/// `chain100_async_single`: chain100 with async nodes, one invoke at a time.
pub(crate) fn chain100_async_single(opts: &Options) -> Result<Line, String> {
    let info = Info::steps("chain100_async_single", 100).supplementary();
    measure(
        opts,
        info,
        Threads::One,
        |_| Ok(()),
        |()| Ok(CountInvoke::new(graphs::chain(100, true).compile().map_err(err)?, None, 100)),
    )
}

/// `loop1000` and the `loop_scale_*` workloads: one node looping `limit` times.
pub(crate) fn counting_loop(opts: &Options, info: Info, limit: i64) -> Result<Line, String> {
    let recursion_limit = if limit == 1000 { 2000 } else { 2 * limit + 10 };
    measure(
        opts,
        info,
        Threads::One,
        |_| Ok(()),
        |()| {
            let graph = graphs::counting_loop(limit, None).compile().map_err(err)?;
            let mut workload = CountInvoke::new(graph, u32::try_from(recursion_limit).ok(), limit);
            if limit == 1000 {
                workload.profile_limit = Some(limit);
            }
            Ok(workload)
        },
    )
}

/// `stream_updates_loop1000`: loop1000 consumed as an `updates` stream.
pub(crate) fn stream_updates_loop1000(opts: &Options) -> Result<Line, String> {
    struct StreamLoop {
        graph: CompiledGraph<CountState>,
        config: RunnableConfig,
    }

    impl Workload for StreamLoop {
        type Ctx = ();
        type Out = (usize, Option<StreamPart<CountState>>);

        fn prepare(&mut self, _: &Runtime) -> Result<(), String> {
            Ok(())
        }

        async fn op(&self, _: &mut ()) -> Result<Self::Out, String> {
            let mut stream =
                self.graph.stream(CountState::update().count(0), &self.config, &[StreamMode::Updates]);
            let mut items = 0;
            let mut last = None;
            while let Some(part) = stream.next().await {
                items += 1;
                last = Some(part.map_err(err)?);
            }
            Ok((items, last))
        }

        fn check(&self, (items, last): &Self::Out, _: &()) -> Result<(), String> {
            ensure(*items == 1000, || format!("expected 1000 items, got {items}"))?;
            let Some(StreamPart { data: StreamData::Updates { node, updates, .. }, .. }) = last else {
                return Err(format!("the last item is not an update: {last:?}"));
            };
            let counts: Vec<Option<i64>> = updates.iter().map(|u| u.count).collect();
            ensure(node == "inc" && counts == [Some(1000)], || {
                format!("the last item is {node}: {updates:?}, expected inc: {{count: 1000}}")
            })
        }
    }

    measure(
        opts,
        Info::steps("stream_updates_loop1000", 1000),
        Threads::One,
        |_| Ok(()),
        |()| {
            let graph = graphs::counting_loop(1000, None).compile().map_err(err)?;
            Ok(StreamLoop { graph, config: RunnableConfig::default().with_recursion_limit(2000) })
        },
    )
}

/// 100 concurrent invokes of the async chain100, each a tokio task.
struct Throughput {
    graph: CompiledGraph<CountState>,
}

impl Throughput {
    async fn batch(graph: &CompiledGraph<CountState>) -> Result<Vec<CountState>, String> {
        let handles: Vec<_> = (0..100)
            .map(|_| {
                let graph = graph.clone();
                tokio::spawn(async move {
                    graph.invoke(CountState::update().count(0), &RunnableConfig::default()).await
                })
            })
            .collect();
        let mut results = Vec::with_capacity(handles.len());
        for handle in handles {
            results.push(handle.await.map_err(err)?.map_err(err)?.value);
        }
        Ok(results)
    }
}

impl Workload for Throughput {
    type Ctx = ();
    type Out = Vec<CountState>;

    fn prepare(&mut self, _: &Runtime) -> Result<(), String> {
        Ok(())
    }

    async fn op(&self, _: &mut ()) -> Result<Self::Out, String> {
        Self::batch(&self.graph).await
    }

    fn check(&self, out: &Self::Out, _: &()) -> Result<(), String> {
        ensure(out.len() == 100 && out.iter().all(|s| s.count == 100), || {
            format!(
                "expected 100 results of {{count: 100}}, got {} ({:?})",
                out.len(),
                out.iter().find(|s| s.count != 100)
            )
        })
    }

    /// The same batch on a single-thread runtime (5 timed batches after one warm-up), for comparison.
    fn extra(&mut self, _: &Runtime, opts: &Options) -> Result<Line, String> {
        let mut line = Line::new();
        if opts.quick {
            return Ok(line);
        }
        let rt = tokio::runtime::Builder::new_current_thread().build().map_err(err)?;
        let mut times = Vec::new();
        for round in 0..6 {
            let started = std::time::Instant::now();
            let results = rt.block_on(Self::batch(&self.graph))?;
            let took = started.elapsed();
            self.check(&results, &())?;
            if round > 0 {
                times.push(took);
            }
        }
        let median = crate::measure::median(&times).as_secs_f64();
        line.insert("one_thread_median_s".into(), json!(crate::procfs::round(median, 9)));
        line.insert("one_thread_invokes_per_s".into(), json!(crate::procfs::round(100.0 / median, 1)));
        Ok(line)
    }
}

/// `throughput_chain100_x100`: 100 concurrent invokes of chain100 with async nodes, on a multi-thread
/// runtime with one worker per available core.
pub(crate) fn throughput_chain100_x100(opts: &Options) -> Result<Line, String> {
    let workers = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    let info = Info::steps("throughput_chain100_x100", 100).unit("invoke (of 100 concurrent)");
    let mut line = measure(
        opts,
        info,
        Threads::Workers(workers),
        |_| Ok(()),
        |()| Ok(Throughput { graph: graphs::chain(100, true).compile().map_err(err)? }),
    )?;
    if let Some(median) = line.get("median_s").and_then(serde_json::Value::as_f64) {
        line.insert("invokes_per_s".into(), json!(crate::procfs::round(100.0 / median, 1)));
        line.insert("total_wall_s".into(), json!(median));
    }
    Ok(line)
}
