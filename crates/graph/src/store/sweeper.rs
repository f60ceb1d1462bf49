//! A periodic TTL sweep: a task that calls [`Store::sweep_ttl`] every interval.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::Store;

/// The shortest interval between two sweeps, so that a zero interval is no hot loop.
const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// A running TTL sweeper; it stops when dropped or [`stop`](Self::stop)ped.
#[derive(Debug)]
pub struct TtlSweeper {
    task: JoinHandle<()>,
}

impl TtlSweeper {
    /// Stops the sweeper.
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for TtlSweeper {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a task on the current tokio runtime that sweeps `store` every `every` (at least 100 ms),
/// as LangGraph's `start_ttl_sweeper(sweep_interval_minutes)` does. A failed sweep is logged (at `warn`)
/// and the next one runs on time.
pub fn spawn_ttl_sweeper(store: Arc<dyn Store>, every: Duration) -> TtlSweeper {
    let every = every.max(MIN_INTERVAL);
    let task = tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            match store.sweep_ttl().await {
                Ok(0) => {}
                Ok(swept) => tracing::debug!(swept, "store TTL sweep"),
                Err(error) => tracing::warn!(%error, "store TTL sweep failed"),
            }
        }
    });
    TtlSweeper { task }
}
