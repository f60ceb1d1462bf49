//! Counts of the runs a server has finished, by how they ended, and how long they took, written in
//! Prometheus' text format (no metrics crate: a few atomics).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The upper bounds of the latency histogram's buckets, in seconds.
const BUCKETS: [f64; 12] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0];

/// How a run ended, as the metrics name it.
const OUTCOMES: [&str; 5] = ["success", "error", "interrupted", "rollback", "timeout"];

/// The server's run metrics.
#[derive(Debug, Default)]
pub(crate) struct RunMetrics {
    ended: [AtomicU64; OUTCOMES.len()],
    /// Runs per bucket (not cumulative: summed when written).
    buckets: [AtomicU64; BUCKETS.len() + 1],
    micros: AtomicU64,
}

impl RunMetrics {
    /// Counts a run that ended with `outcome` after running for `took`.
    pub(crate) fn record(&self, outcome: &str, took: Duration) {
        if let Some(i) = OUTCOMES.iter().position(|o| *o == outcome) {
            self.ended[i].fetch_add(1, Ordering::Relaxed);
        }
        let secs = took.as_secs_f64();
        let bucket = BUCKETS.iter().position(|b| secs <= *b).unwrap_or(BUCKETS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.micros.fetch_add(u64::try_from(took.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// The text format, with the runs now `pending` and `running`.
    pub(crate) fn render(&self, pending: usize, running: usize) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# HELP weft_runs Runs waiting or running now.");
        let _ = writeln!(out, "# TYPE weft_runs gauge");
        let _ = writeln!(out, "weft_runs{{status=\"pending\"}} {pending}");
        let _ = writeln!(out, "weft_runs{{status=\"running\"}} {running}");
        let _ = writeln!(out, "# HELP weft_runs_finished_total Runs that ended, by how they ended.");
        let _ = writeln!(out, "# TYPE weft_runs_finished_total counter");
        for (outcome, count) in OUTCOMES.iter().zip(&self.ended) {
            let _ = writeln!(
                out,
                "weft_runs_finished_total{{status=\"{outcome}\"}} {}",
                count.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(out, "# HELP weft_run_duration_seconds How long runs ran, from start to end.");
        let _ = writeln!(out, "# TYPE weft_run_duration_seconds histogram");
        let mut total = 0;
        for (bound, count) in BUCKETS.iter().zip(&self.buckets) {
            total += count.load(Ordering::Relaxed);
            let _ = writeln!(out, "weft_run_duration_seconds_bucket{{le=\"{bound}\"}} {total}");
        }
        total += self.buckets[BUCKETS.len()].load(Ordering::Relaxed);
        let _ = writeln!(out, "weft_run_duration_seconds_bucket{{le=\"+Inf\"}} {total}");
        let sum = self.micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "weft_run_duration_seconds_sum {sum}");
        let _ = writeln!(out, "weft_run_duration_seconds_count {total}");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_histogram_is_cumulative_and_counts_every_run() {
        let m = RunMetrics::default();
        m.record("success", Duration::from_millis(3));
        m.record("success", Duration::from_millis(300));
        m.record("error", Duration::from_secs(100));
        let text = m.render(2, 1);
        for line in [
            "weft_runs{status=\"pending\"} 2",
            "weft_runs{status=\"running\"} 1",
            "weft_runs_finished_total{status=\"success\"} 2",
            "weft_runs_finished_total{status=\"error\"} 1",
            "weft_run_duration_seconds_bucket{le=\"0.005\"} 1",
            "weft_run_duration_seconds_bucket{le=\"0.25\"} 1",
            "weft_run_duration_seconds_bucket{le=\"0.5\"} 2",
            "weft_run_duration_seconds_bucket{le=\"60\"} 2",
            "weft_run_duration_seconds_bucket{le=\"+Inf\"} 3",
            "weft_run_duration_seconds_count 3",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
    }
}
