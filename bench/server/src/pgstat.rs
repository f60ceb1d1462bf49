//! What a scaled-out weft costs PostgreSQL during a workload: the CPU time of the PostgreSQL processes
//! on this machine and the transactions of the deployment's database.
//!
//! CPU: user and system time of every live process named `postgres` (the postmaster, its backends and
//! background workers), plus the time of the children the postmaster has reaped (`cutime`/`cstime`), so
//! that a backend whose connection closed during the workload still counts. Transactions: `xact_commit`
//! and `xact_rollback` of `pg_stat_database`, read with `psql`. Read them after the servers have stopped:
//! a backend reports its counters when its connection ends (while idle it may hold them for ten seconds),
//! and [`PgUsage::after`] gives the postmaster time to reap it.

use std::process::Command;
use std::time::Duration;

/// How long the backends of closed connections get to report their counters and be reaped.
const STATS_FLUSH: Duration = Duration::from_secs(2);

/// PostgreSQL's CPU time and the database's transaction count at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PgUsage {
    /// CPU time of PostgreSQL's processes, in seconds.
    pub(crate) cpu_s: f64,
    /// Committed and rolled-back transactions of the database.
    pub(crate) transactions: u64,
}

impl PgUsage {
    /// The usage now, for the database of `database_uri`.
    pub(crate) fn now(database_uri: &str) -> Result<Self, String> {
        Ok(Self { cpu_s: postgres_cpu_s()?, transactions: transactions(database_uri)? })
    }

    /// The usage since `before` (less the one transaction of `before`'s own query), once the backends of
    /// the stopped servers have reported it.
    pub(crate) async fn after(database_uri: &str, before: Self) -> Result<Self, String> {
        tokio::time::sleep(STATS_FLUSH).await;
        let now = Self::now(database_uri)?;
        Ok(Self {
            cpu_s: (now.cpu_s - before.cpu_s).max(0.0),
            transactions: now.transactions.saturating_sub(before.transactions).saturating_sub(1),
        })
    }
}

/// The committed and rolled-back transactions of the database `database_uri` names.
fn transactions(database_uri: &str) -> Result<u64, String> {
    let sql = "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()";
    let output = Command::new("psql")
        .args(["-X", "-At", "-d", database_uri, "-c", sql])
        .output()
        .map_err(|e| format!("cannot run psql (PostgreSQL's client) for the transaction count: {e}"))?;
    if !output.status.success() {
        return Err(format!("psql failed: {}", String::from_utf8_lossy(&output.stderr).trim()));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    text.trim().parse().map_err(|e| format!("psql printed `{}`, not a count: {e}", text.trim()))
}

/// The CPU seconds of every live `postgres` process and of the children they have reaped.
fn postgres_cpu_s() -> Result<f64, String> {
    let ticks_per_s = clock_ticks_per_s();
    let mut ticks = 0u64;
    let entries = std::fs::read_dir("/proc").map_err(|e| format!("cannot read /proc: {e}"))?;
    for entry in entries.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        if let Some(used) = postgres_ticks(&stat) {
            ticks += used;
        }
    }
    Ok(ticks as f64 / ticks_per_s)
}

/// `utime + stime + cutime + cstime` of a `/proc/PID/stat` line, when its command is `postgres`.
fn postgres_ticks(stat: &str) -> Option<u64> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    if stat.get(open + 1..close)? != "postgres" {
        return None;
    }
    // After the command: state (field 3) … utime (14), stime (15), cutime (16), cstime (17).
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(field(14)? + field(15)? + field(16)? + field(17)?)
}

/// The kernel's clock ticks per second for `/proc` times (`getconf CLK_TCK`; 100 on Linux).
fn clock_ticks_per_s() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_read_from_a_postgres_stat_line_only() {
        let line = "4242 (postgres) S 1 4242 4242 0 -1 4194560 900 0 0 0 120 30 7 3 20 0 1 0 100 2 3";
        assert_eq!(postgres_ticks(line), Some(120 + 30 + 7 + 3));
        let other = "4243 (redis-server) S 1 4243 4243 0 -1 4194560 900 0 0 0 120 30 7 3 20 0 1 0 100 2 3";
        assert_eq!(postgres_ticks(other), None);
        // A command with spaces and parentheses ends at the last `)`.
        let odd = "9 (postgres) x) S 1 9 9 0 -1 0 0 0 0 0 1 1 1 1 20 0 1 0 1 1 1";
        assert_eq!(postgres_ticks(odd), None);
        assert_eq!(postgres_ticks("garbage"), None);
        assert_eq!(postgres_ticks("1 (postgres) S 1 2"), None);
    }

    #[test]
    fn the_machines_postgres_cpu_is_readable() {
        assert!(postgres_cpu_s().is_ok_and(|s| s >= 0.0));
    }
}
