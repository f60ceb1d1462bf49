//! The measurement protocol of WORKLOADS.md: setup and compilation timed apart, one warm-up op, then
//! repeats until at least `min_repeats` and `min_time` of summed op time, every op checked; median, min and
//! max wall time, CPU time per op, peak RSS; one JSON line.

use std::fmt::Display;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio::runtime::Runtime;

use crate::procfs::{self, round};

/// One JSON output line.
pub(crate) type Line = Map<String, Value>;

/// How long and how often to measure.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// Smoke mode: one checked op, no warm-up, no diagnostics.
    pub(crate) quick: bool,
    /// Repeat until the timed ops add up to this much...
    pub(crate) min_time: Duration,
    /// ... and at least this many were timed.
    pub(crate) min_repeats: usize,
    /// Stop after this many timed ops whatever the time.
    pub(crate) max_repeats: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self { quick: false, min_time: Duration::from_secs(2), min_repeats: 5, max_repeats: 1_000_000 }
    }
}

/// What a workload is called and what its per-unit figure divides by.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Info {
    /// The workload's name (as in `langgraph_bench.py`).
    pub(crate) name: &'static str,
    /// Units of work per op (supersteps, Send tasks, rounds, ...).
    pub(crate) units: u64,
    /// What one unit is.
    pub(crate) unit: &'static str,
    /// Not one of the workloads the issue sets targets for.
    pub(crate) supplementary: bool,
}

impl Info {
    /// A required workload counted in supersteps.
    pub(crate) const fn steps(name: &'static str, units: u64) -> Self {
        Self { name, units, unit: "superstep", supplementary: false }
    }

    /// Marks the workload as supplementary.
    pub(crate) const fn supplementary(mut self) -> Self {
        self.supplementary = true;
        self
    }

    /// Sets the unit.
    pub(crate) const fn unit(mut self, unit: &'static str) -> Self {
        self.unit = unit;
        self
    }
}

/// The tokio runtime a workload runs on.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Threads {
    /// A current-thread runtime: everything on the calling thread (like Python's single thread).
    One,
    /// A multi-thread runtime with this many workers.
    Workers(usize),
}

impl Threads {
    fn runtime(self) -> Result<Runtime, String> {
        let built = match self {
            Threads::One => tokio::runtime::Builder::new_current_thread().enable_all().build(),
            Threads::Workers(n) => {
                tokio::runtime::Builder::new_multi_thread().worker_threads(n).enable_all().build()
            }
        };
        built.map_err(|e| format!("cannot start the tokio runtime: {e}"))
    }

    fn count(self) -> usize {
        match self {
            Threads::One => 1,
            Threads::Workers(n) => n,
        }
    }
}

/// A workload: per-repeat preparation (untimed), the op (timed), its check (untimed), cleanup (untimed)
/// and extra diagnostics (untimed, after the repeats).
pub(crate) trait Workload {
    /// What `prepare` hands the op (a fresh thread id, a fresh fake model, ...).
    type Ctx;
    /// What the op returns, for the check.
    type Out;

    /// Prepares one op.
    fn prepare(&mut self, rt: &Runtime) -> Result<Self::Ctx, String>;

    /// The timed operation.
    async fn op(&self, ctx: &mut Self::Ctx) -> Result<Self::Out, String>;

    /// Checks the result; an error voids the run.
    fn check(&self, out: &Self::Out, ctx: &Self::Ctx) -> Result<(), String>;

    /// Cleans up after one op.
    fn cleanup(&mut self, ctx: Self::Ctx, rt: &Runtime) -> Result<(), String> {
        let _ = (ctx, rt);
        Ok(())
    }

    /// Extra fields for the output line, computed after the timed repeats.
    fn extra(&mut self, rt: &Runtime, opts: &Options) -> Result<Line, String> {
        let _ = (rt, opts);
        Ok(Line::new())
    }
}

/// Runs a workload under the protocol and returns its output line.
///
/// `setup` (opening connections and the like, reported as `setup_s`) and `build` (graph construction and
/// compilation, reported as `compile_s`) are timed apart from the ops.
pub(crate) fn measure<W, E>(
    opts: &Options,
    info: Info,
    threads: Threads,
    setup: impl FnOnce(&Runtime) -> Result<E, String>,
    build: impl FnOnce(E) -> Result<W, String>,
) -> Result<Line, String>
where
    W: Workload,
{
    let load_start = procfs::loadavg_1m();
    let psi_start = procfs::cpu_psi_avg10();
    let rt = threads.runtime()?;
    let started = Instant::now();
    let env = setup(&rt)?;
    let setup_s = started.elapsed();
    let started = Instant::now();
    let mut workload = build(env)?;
    let compile_s = started.elapsed();
    let rss_after_setup = procfs::peak_rss_mb();

    let mut first_run = None;
    if !opts.quick {
        let (took, _) = timed_op(&mut workload, &rt)?;
        first_run = Some(took);
    }
    let mut times = Vec::new();
    let mut cpu = Vec::new();
    let min_repeats = if opts.quick { 1 } else { opts.min_repeats.max(1) };
    while times.len() < min_repeats || (!opts.quick && times.iter().sum::<Duration>() < opts.min_time) {
        let (took, cpu_took) = timed_op(&mut workload, &rt)?;
        times.push(took);
        cpu.extend(cpu_took);
        if times.len() >= opts.max_repeats {
            break;
        }
    }
    let extra = workload.extra(&rt, opts)?;
    drop(workload);

    let median = median(&times);
    let mut line = Line::new();
    line.insert("workload".into(), json!(info.name));
    line.insert("median_s".into(), secs(median));
    line.insert("min_s".into(), secs(times.iter().copied().min().unwrap_or_default()));
    line.insert("max_s".into(), secs(times.iter().copied().max().unwrap_or_default()));
    line.insert("repeats".into(), json!(times.len()));
    line.insert("peak_rss_mb".into(), json!(procfs::peak_rss_mb()));
    line.insert("rss_after_setup_mb".into(), json!(rss_after_setup));
    line.insert("compile_s".into(), secs(compile_s));
    line.insert("setup_s".into(), secs(setup_s));
    if cpu.len() == times.len() {
        line.insert("median_cpu_s".into(), secs(self::median(&cpu)));
        line.insert("min_cpu_s".into(), secs(cpu.iter().copied().min().unwrap_or_default()));
    }
    line.insert("loadavg_1m_start".into(), json!(load_start));
    line.insert("loadavg_1m_end".into(), json!(procfs::loadavg_1m()));
    line.insert("cpu_psi_avg10_start".into(), json!(psi_start));
    line.insert("cpu_psi_avg10_end".into(), json!(procfs::cpu_psi_avg10()));
    if let Some(first) = first_run {
        line.insert("first_run_s".into(), secs(first));
    }
    line.insert("units_per_op".into(), json!(info.units));
    line.insert("unit".into(), json!(info.unit));
    line.insert(
        "median_us_per_unit".into(),
        json!(round(median.as_secs_f64() * 1e6 / info.units.max(1) as f64, 4)),
    );
    line.insert("supplementary".into(), json!(info.supplementary));
    line.insert("threads".into(), json!(threads.count()));
    if opts.quick {
        line.insert("quick".into(), json!(true));
    }
    line.extend(extra);
    Ok(line)
}

/// One prepared, timed and checked op: its wall time and, when `/proc` has it, its CPU time.
fn timed_op<W: Workload>(workload: &mut W, rt: &Runtime) -> Result<(Duration, Option<Duration>), String> {
    let mut ctx = workload.prepare(rt)?;
    let cpu_before = procfs::cpu_time();
    let started = Instant::now();
    let out = rt.block_on(workload.op(&mut ctx));
    let took = started.elapsed();
    let cpu_after = procfs::cpu_time();
    let out = out.map_err(|e| format!("the op failed: {e}"))?;
    workload.check(&out, &ctx).map_err(|e| format!("correctness check failed: {e}"))?;
    drop(out);
    workload.cleanup(ctx, rt)?;
    let cpu = cpu_before.zip(cpu_after).map(|(before, after)| after.saturating_sub(before));
    Ok((took, cpu))
}

/// The median (the mean of the two middle values for an even count), as Python's `statistics.median`.
pub(crate) fn median(values: &[Duration]) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    match n {
        0 => Duration::ZERO,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2,
    }
}

/// Seconds with nanosecond precision, as a JSON number.
pub(crate) fn secs(duration: Duration) -> Value {
    json!(round(duration.as_secs_f64(), 9))
}

/// The untimed step profile of WORKLOADS.md (`us_per_step_at_step`): for each point `p`, the median gap
/// between consecutive node entries over steps `[p - 50, p + 50)`, pooled over the given runs, in µs.
pub(crate) fn step_profile(runs: &[Vec<Instant>], points: &[usize]) -> Value {
    const WINDOW: usize = 50;
    let mut out = Map::new();
    for &point in points {
        let mut pooled = Vec::new();
        for entries in runs {
            let gaps: Vec<Duration> = entries.windows(2).map(|w| w[1].duration_since(w[0])).collect();
            let from = point.saturating_sub(WINDOW).min(gaps.len());
            let to = (point + WINDOW).min(gaps.len());
            pooled.extend_from_slice(&gaps[from..to]);
        }
        if !pooled.is_empty() {
            out.insert(point.to_string(), json!(round(median(&pooled).as_secs_f64() * 1e6, 3)));
        }
    }
    Value::Object(out)
}

/// Turns any displayable error into the harness's error text.
pub(crate) fn err<E: Display>(error: E) -> String {
    error.to_string()
}

/// `Ok(())` when `condition` holds, else the error `message`.
pub(crate) fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), String> {
    if condition { Ok(()) } else { Err(message()) }
}
