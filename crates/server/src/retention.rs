//! Thread retention, as LangGraph's Agent Server has it: a thread may carry a TTL (`{"strategy", "ttl"}`,
//! minutes) given when it is made or patched, or the deployment's default (`checkpointer.ttl` of
//! `langgraph.json`). A thread whose last activity (its `updated_at`: made, patched, a run started or
//! ended, its state updated) is older than its TTL is swept: `delete` removes the thread with its runs
//! and checkpoints, `keep_latest` keeps the thread and only its newest checkpoint of each namespace. A
//! thread with a pending or running run is never swept. The sweep uses the same mechanism as
//! `POST /threads/prune` ([`prune_thread`]), and the checkpointer's `prune`.
//!
//! The sweeper wakes every `sweep_interval`; scaled out, each wake first claims the sweep in PostgreSQL
//! (one statement, see `crate::scale::sweep`), so that one instance sweeps per interval.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::guard::Access;
use crate::app::App;
use crate::crons::schedule::parse_time;
use crate::error::{ApiError, ApiResult, ServerError};
use crate::model::Thread;
use crate::storage::{ThreadOrder, ThreadScan};

/// What happens to a thread whose TTL has passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TtlStrategy {
    /// The thread, its runs and its checkpoints are deleted.
    #[default]
    Delete,
    /// The thread stays with only its newest checkpoint of each namespace.
    KeepLatest,
}

impl TtlStrategy {
    /// The strategy LangGraph names `name`.
    pub(crate) fn parse(name: &str) -> Option<Self> {
        match name {
            "delete" => Some(Self::Delete),
            "keep_latest" => Some(Self::KeepLatest),
            _ => None,
        }
    }
}

/// A thread's TTL as its record keeps it (and as LangGraph's API takes it).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct ThreadTtl {
    pub(crate) strategy: TtlStrategy,
    /// Minutes after the thread's last activity.
    pub(crate) ttl: f64,
}

impl ThreadTtl {
    /// The TTL of a request's `ttl` object (checked by its schema already): its `ttl` in minutes and
    /// its strategy, or `default` when it names none. None without a positive `ttl`.
    pub(crate) fn from_request(value: &Value, default: TtlStrategy) -> Option<Self> {
        let minutes = value.get("ttl").and_then(Value::as_f64).filter(|m| *m > 0.0)?;
        let strategy = value.get("strategy").and_then(Value::as_str).and_then(TtlStrategy::parse);
        Some(Self { strategy: strategy.unwrap_or(default), ttl: minutes })
    }

    /// When a thread last active at `since` expires.
    fn expiry(&self, since: SystemTime) -> Option<SystemTime> {
        let ttl = Duration::try_from_secs_f64(self.ttl * 60.0).ok()?;
        since.checked_add(ttl)
    }
}

/// The deployment's thread TTL settings (`checkpointer.ttl` of `langgraph.json`).
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadTtlConfig {
    /// The strategy of threads whose TTL names none (`strategy`; `delete` by default).
    pub strategy: TtlStrategy,
    /// The TTL of threads made without one, in minutes (`default_ttl`); none: such threads never expire.
    pub default_ttl: Option<f64>,
    /// How often the sweeper looks for expired threads (`sweep_interval_minutes`; 5 minutes by default).
    pub sweep_interval: Duration,
    /// The most threads one sweep handles (`sweep_limit`; 1,000 by default).
    pub sweep_limit: usize,
}

impl Default for ThreadTtlConfig {
    fn default() -> Self {
        Self {
            strategy: TtlStrategy::Delete,
            default_ttl: None,
            sweep_interval: Duration::from_secs(5 * 60),
            sweep_limit: 1000,
        }
    }
}

impl ThreadTtlConfig {
    /// Reads `checkpointer.ttl` of a `langgraph.json` document; none when it has no such object.
    pub fn from_langgraph_json(config: &Value) -> Result<Option<Self>, ServerError> {
        let Some(ttl) = config.get("checkpointer").and_then(|c| c.get("ttl")) else { return Ok(None) };
        if ttl.is_null() {
            return Ok(None);
        }
        let invalid = |what: &str| ServerError::TtlConfig(format!("checkpointer.ttl.{what}"));
        let mut parsed = Self::default();
        if let Some(strategy) = ttl.get("strategy").filter(|s| !s.is_null()) {
            parsed.strategy = strategy
                .as_str()
                .and_then(TtlStrategy::parse)
                .ok_or_else(|| invalid("strategy must be \"delete\" or \"keep_latest\""))?;
        }
        if let Some(minutes) = ttl.get("default_ttl").filter(|s| !s.is_null()) {
            let minutes = minutes.as_f64().filter(|m| *m > 0.0);
            parsed.default_ttl =
                Some(minutes.ok_or_else(|| invalid("default_ttl must be a positive number"))?);
        }
        if let Some(minutes) = ttl.get("sweep_interval_minutes").filter(|s| !s.is_null()) {
            let every = minutes.as_f64().and_then(|m| Duration::try_from_secs_f64(m * 60.0).ok());
            parsed.sweep_interval =
                every.ok_or_else(|| invalid("sweep_interval_minutes must be a number of minutes"))?;
        }
        if let Some(limit) = ttl.get("sweep_limit").filter(|s| !s.is_null()) {
            let limit = limit.as_u64().and_then(|l| usize::try_from(l).ok()).filter(|l| *l > 0);
            parsed.sweep_limit = limit.ok_or_else(|| invalid("sweep_limit must be a positive integer"))?;
        }
        Ok(Some(parsed))
    }

    /// The TTL a new thread gets: the one asked for, else the default.
    pub(crate) fn for_new_thread(&self, asked: Option<&Value>) -> Option<ThreadTtl> {
        match asked.filter(|v| !v.is_null()) {
            Some(value) => ThreadTtl::from_request(value, self.strategy),
            None => self.default_ttl.map(|ttl| ThreadTtl { strategy: self.strategy, ttl }),
        }
    }
}

/// The sweeper's floor between two wakes, so that a zero interval is no hot loop (as in LangGraph).
const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// Prunes one thread as `POST /threads/prune` does: deletes it (`delete`), or keeps only its newest
/// checkpoint of each namespace (`keep_latest`). With `idle_since`, only a thread whose `updated_at`
/// is still that and that has no pending or running run (the sweeper's case, checked under the records'
/// lock for a deletion). `false` when there was no such thread for the caller.
pub(crate) async fn prune_thread(
    app: &Arc<App>,
    thread_id: &str,
    strategy: TtlStrategy,
    access: &Access,
    idle_since: Option<&str>,
) -> ApiResult<bool> {
    match strategy {
        TtlStrategy::Delete => {
            crate::api::threads::delete_thread_when(app, thread_id, access, idle_since).await
        }
        TtlStrategy::KeepLatest => {
            let known = {
                let mut records = app.records.read().await?;
                let idle = records.active_runs(thread_id).next().is_none();
                records.thread(thread_id).await?.is_some_and(|t| {
                    access.allows(&t.metadata) && idle_since.is_none_or(|since| t.updated_at == since && idle)
                })
            };
            if known {
                app.checkpointer.prune(thread_id, 1).await.map_err(|e| ApiError::internal(e.to_string()))?;
            }
            Ok(known)
        }
    }
}

/// A thread due for a sweep at `now`: its id, its strategy and the activity time it expired at.
fn due(thread: &Thread, now: SystemTime) -> Option<(String, TtlStrategy, String)> {
    let ttl = thread.ttl?;
    let expiry = ttl.expiry(parse_time(&thread.updated_at)?)?;
    (expiry <= now).then(|| (thread.thread_id.clone(), ttl.strategy, thread.updated_at.clone()))
}

/// What one sweep did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Swept {
    pub(crate) deleted: usize,
    pub(crate) pruned: usize,
}

/// One sweep: every expired thread with no pending or running run (at most `limit`), deleted or pruned
/// by its strategy. A thread kept with its latest checkpoint is marked so (in the table, see
/// [`crate::storage::RecordsLock::mark_swept`]): it is not read or pruned again until it changes.
pub(crate) async fn sweep(app: &Arc<App>, limit: usize) -> ApiResult<Swept> {
    let now = SystemTime::now();
    let expired: Vec<(String, TtlStrategy, String)> = {
        // Threads with a TTL, read a page at a time; those with a live run are skipped (as memory knows
        // them now: the deletion checks again under the records' lock).
        let busy: HashSet<String> = {
            let records = app.records.read().await?;
            records.live_runs().map(|r| r.run.thread_id.clone()).collect()
        };
        let scan = ThreadScan { sweepable_only: true, ..ThreadScan::all(ThreadOrder::ThreadId, true) };
        let filter = |t: &Thread| due(t, now).is_some_and(|(id, _, _)| !busy.contains(&id));
        let (found, _) = app.records.search_threads(scan, Some(&filter), 0, limit).await?;
        found.iter().filter_map(|t| due(t, now)).collect()
    };
    let mut swept = Swept::default();
    for (thread_id, strategy, since) in expired {
        if !prune_thread(app, &thread_id, strategy, &Access::default(), Some(&since)).await? {
            continue;
        }
        match strategy {
            TtlStrategy::Delete => swept.deleted += 1,
            TtlStrategy::KeepLatest => {
                swept.pruned += 1;
                app.records.mark_swept(&thread_id, &since).await?;
            }
        }
    }
    Ok(swept)
}

/// Whether this instance sweeps now: embedded always; scaled out, when it claims this interval's sweep.
async fn claim(app: &App, interval: Duration) -> Result<bool, ServerError> {
    #[cfg(feature = "scale")]
    if let Some(scale) = &app.scale {
        return crate::scale::sweep::claim(&scale.db, interval).await;
    }
    let _ = (app, interval);
    Ok(true)
}

/// Sweeps expired threads every interval, for as long as the server serves.
pub(crate) async fn run_sweeper(app: Arc<App>) {
    let config = app.thread_ttl.clone();
    let interval = config.sweep_interval.max(MIN_INTERVAL);
    loop {
        tokio::time::sleep(interval).await;
        match claim(&app, interval).await {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "cannot claim the thread TTL sweep");
                continue;
            }
        }
        match sweep(&app, config.sweep_limit).await {
            Ok(swept) if swept != Swept::default() => {
                tracing::info!(deleted = swept.deleted, pruned = swept.pruned, "thread TTL sweep completed");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e.detail, "thread TTL sweep failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn langgraph_json_settings_are_read_and_checked() {
        let config = json!({"checkpointer": {"ttl": {
            "strategy": "keep_latest", "default_ttl": 43200, "sweep_interval_minutes": 0.5, "sweep_limit": 10
        }}});
        let parsed = ThreadTtlConfig::from_langgraph_json(&config).unwrap().unwrap();
        assert_eq!(parsed.strategy, TtlStrategy::KeepLatest);
        assert_eq!(parsed.default_ttl, Some(43200.0));
        assert_eq!(parsed.sweep_interval, Duration::from_secs(30));
        assert_eq!(parsed.sweep_limit, 10);
        assert_eq!(ThreadTtlConfig::from_langgraph_json(&json!({"graphs": {}})).unwrap(), None);
        let defaults = ThreadTtlConfig::from_langgraph_json(&json!({"checkpointer": {"ttl": {}}})).unwrap();
        assert_eq!(defaults, Some(ThreadTtlConfig::default()));
        for bad in [json!({"strategy": "archive"}), json!({"default_ttl": -1}), json!({"sweep_limit": 0})] {
            let config = json!({"checkpointer": {"ttl": bad}});
            assert!(ThreadTtlConfig::from_langgraph_json(&config).is_err(), "{config}");
        }
    }

    #[test]
    fn a_new_thread_takes_its_own_ttl_or_the_default() {
        let config = ThreadTtlConfig { default_ttl: Some(60.0), ..ThreadTtlConfig::default() };
        let own = config.for_new_thread(Some(&json!({"strategy": "keep_latest", "ttl": 5})));
        assert_eq!(own, Some(ThreadTtl { strategy: TtlStrategy::KeepLatest, ttl: 5.0 }));
        let unnamed = config.for_new_thread(Some(&json!({"ttl": 5})));
        assert_eq!(unnamed, Some(ThreadTtl { strategy: TtlStrategy::Delete, ttl: 5.0 }));
        assert_eq!(config.for_new_thread(None), Some(ThreadTtl { strategy: TtlStrategy::Delete, ttl: 60.0 }));
        assert_eq!(ThreadTtlConfig::default().for_new_thread(None), None);
    }

    #[test]
    fn a_thread_is_due_once_its_ttl_has_passed_since_its_last_activity() {
        let at = parse_time("2026-01-01T00:00:00+00:00").unwrap();
        let thread: Thread = serde_json::from_value(json!({
            "thread_id": "t", "created_at": "2026-01-01T00:00:00+00:00",
            "updated_at": "2026-01-01T00:00:00+00:00", "state_updated_at": "2026-01-01T00:00:00+00:00",
            "metadata": {}, "status": "idle", "config": {}, "values": null, "error": null, "interrupts": {},
            "ttl": {"strategy": "keep_latest", "ttl": 2}
        }))
        .unwrap();
        assert_eq!(due(&thread, at + Duration::from_secs(119)), None);
        let expected = Some(("t".to_owned(), TtlStrategy::KeepLatest, thread.updated_at.clone()));
        assert_eq!(due(&thread, at + Duration::from_secs(120)), expected);
        let without = Thread { ttl: None, ..thread };
        assert_eq!(due(&without, at + Duration::from_secs(3600)), None);
    }
}
