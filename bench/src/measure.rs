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
    let mut samples = Samples::default();
    let min_repeats = if opts.quick { 1 } else { opts.min_repeats.max(1) };
    while samples.count < min_repeats || (!opts.quick && samples.total < opts.min_time) {
        let (took, cpu_took) = timed_op(&mut workload, &rt)?;
        samples.add(took, cpu_took);
        if samples.count >= opts.max_repeats {
            break;
        }
    }
    // Before `extra`, which may run more work.
    let rss_split = procfs::rss_split_mb();
    let extra = workload.extra(&rt, opts)?;
    drop(workload);

    let (median, median_cpu) = samples.medians();
    let mut line = Line::new();
    line.insert("workload".into(), json!(info.name));
    line.insert("median_s".into(), secs(median));
    line.insert("min_s".into(), secs(if samples.count == 0 { Duration::ZERO } else { samples.min }));
    line.insert("max_s".into(), secs(samples.max));
    line.insert("repeats".into(), json!(samples.count));
    line.insert("peak_rss_mb".into(), json!(procfs::peak_rss_mb()));
    line.insert("rss_after_setup_mb".into(), json!(rss_after_setup));
    if let Some((anon, file)) = rss_split {
        line.insert("rss_end_anon_mb".into(), json!(anon));
        line.insert("rss_end_file_mb".into(), json!(file));
    }
    line.insert("compile_s".into(), secs(compile_s));
    line.insert("setup_s".into(), secs(setup_s));
    if let (Some(median_cpu), Some(min_cpu)) = (median_cpu, samples.min_cpu) {
        line.insert("median_cpu_s".into(), secs(median_cpu));
        line.insert("min_cpu_s".into(), secs(min_cpu));
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

/// How many ops' times are kept for the medians: a uniform sample of the ops past that (reservoir
/// sampling), so that a fast op's thousands of repeats do not grow the process, whose peak RSS is a figure.
const KEPT_SAMPLES: usize = 4096;

/// The timed ops: count, sum, extremes, and a uniform sample of their wall and CPU times.
#[derive(Debug)]
struct Samples {
    count: usize,
    total: Duration,
    min: Duration,
    max: Duration,
    /// The least CPU time; `None` once an op had none (the CPU clock unread).
    min_cpu: Option<Duration>,
    kept: Vec<(Duration, Option<Duration>)>,
    /// xorshift64 state: which op replaces which kept one is the same in every sitting.
    rng: u64,
}

impl Default for Samples {
    fn default() -> Self {
        Self {
            count: 0,
            total: Duration::ZERO,
            min: Duration::MAX,
            max: Duration::ZERO,
            min_cpu: Some(Duration::MAX),
            kept: Vec::with_capacity(KEPT_SAMPLES),
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }
}

impl Samples {
    fn add(&mut self, took: Duration, cpu: Option<Duration>) {
        self.count += 1;
        self.total += took;
        self.min = self.min.min(took);
        self.max = self.max.max(took);
        self.min_cpu = match (self.min_cpu, cpu) {
            (Some(least), Some(cpu)) => Some(least.min(cpu)),
            _ => None,
        };
        if self.kept.len() < KEPT_SAMPLES {
            self.kept.push((took, cpu));
            return;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let slot = usize::try_from(self.rng % self.count as u64).unwrap_or(usize::MAX);
        if let Some(kept) = self.kept.get_mut(slot) {
            *kept = (took, cpu);
        }
    }

    /// The median wall time, and the median CPU time when every op had one.
    fn medians(&self) -> (Duration, Option<Duration>) {
        let wall: Vec<Duration> = self.kept.iter().map(|(took, _)| *took).collect();
        let cpu: Option<Vec<Duration>> = self.kept.iter().map(|(_, cpu)| *cpu).collect();
        (median(&wall), self.min_cpu.and(cpu).map(|cpu| median(&cpu)))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_keep_a_bounded_uniform_sample_and_exact_extremes() {
        let mut samples = Samples::default();
        let n = 100_000u64;
        for i in 0..n {
            samples.add(Duration::from_nanos(i + 1), Some(Duration::from_nanos(2 * (i + 1))));
        }
        assert_eq!(samples.count, 100_000);
        assert_eq!(samples.kept.len(), KEPT_SAMPLES);
        assert_eq!(samples.kept.capacity(), KEPT_SAMPLES, "the sample never grows");
        assert_eq!((samples.min, samples.max), (Duration::from_nanos(1), Duration::from_nanos(n)));
        assert_eq!(samples.min_cpu, Some(Duration::from_nanos(2)));
        let (wall, cpu) = samples.medians();
        let wall = wall.as_nanos() as f64;
        assert!((wall - 50_000.0).abs() < 2_500.0, "a uniform sample's median is near the true one: {wall}");
        let cpu = cpu.map(|c| c.as_nanos() as f64);
        assert!(cpu.is_some_and(|c| (c - 100_000.0).abs() < 5_000.0), "{cpu:?}");
    }

    #[test]
    fn few_samples_are_all_kept_and_an_unread_cpu_clock_gives_no_cpu_figure() {
        let mut samples = Samples::default();
        for ms in [5, 1, 3] {
            samples.add(Duration::from_millis(ms), None);
        }
        assert_eq!(samples.medians(), (Duration::from_millis(3), None));
        assert_eq!(samples.min_cpu, None);
    }
}
