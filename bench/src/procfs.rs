//! What the process knows about itself: peak RSS (from `/proc`), CPU time of all its threads, machine load.

use std::time::Duration;

/// Peak resident set size of this process (`VmHWM`), in MB, rounded to 0.1; `None` off Linux.
pub(crate) fn peak_rss_mb() -> Option<f64> {
    Some(round(status_kib("VmHWM:")? / 1024.0, 1))
}

/// Resident set size of this process now (`VmRSS`), in KiB; `None` off Linux.
pub(crate) fn rss_kib() -> Option<f64> {
    status_kib("VmRSS:")
}

/// Resident memory now, in MB rounded to 0.1: the process's own (`RssAnon`: heap, stacks) and its mapped
/// files' (`RssFile` + `RssShmem`: the program's code and data, libraries, SQLite's WAL index). The
/// second depends on the kernel and on what its page cache holds (a file page resident before the
/// process starts is mapped whole, with its neighbours), so it moves between machines and sittings.
pub(crate) fn rss_split_mb() -> Option<(f64, f64)> {
    let anon = status_kib("RssAnon:")?;
    let file = status_kib("RssFile:")? + status_kib("RssShmem:").unwrap_or(0.0);
    Some((round(anon / 1024.0, 1), round(file / 1024.0, 1)))
}

/// A KiB figure of `/proc/self/status`.
fn status_kib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Set by `cargo xtask bench --counts`, which runs the workloads under valgrind: rustix reads the clock
/// through the vDSO, which valgrind does not provide, so the CPU clock is left unread there.
pub(crate) const UNDER_VALGRIND: &str = "WEFT_BENCH_UNDER_VALGRIND";

/// CPU time used so far by all threads of this process (`CLOCK_PROCESS_CPUTIME_ID`), `None` off Unix and
/// under valgrind ([`UNDER_VALGRIND`]).
pub(crate) fn cpu_time() -> Option<Duration> {
    if std::env::var_os(UNDER_VALGRIND).is_some() {
        return None;
    }
    #[cfg(unix)]
    {
        let now = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
        let secs = u64::try_from(now.tv_sec).ok()?;
        let nanos = u32::try_from(now.tv_nsec).ok()?;
        Some(Duration::new(secs, nanos))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The 1-minute load average.
pub(crate) fn loadavg_1m() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// `/proc/pressure/cpu` "some avg10": the share of the last 10 s in which some runnable task waited for a
/// CPU, in percent.
pub(crate) fn cpu_psi_avg10() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    let field = text.lines().next()?.split_whitespace().find(|f| f.starts_with("avg10="))?;
    field.trim_start_matches("avg10=").parse().ok()
}

/// `value` rounded to `digits` decimals.
pub(crate) fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}
