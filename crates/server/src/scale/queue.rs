//! The run queue in PostgreSQL: `weft_server_queue` holds one row per run that is pending or running,
//! written in the same transaction as the run's record (by [`crate::storage::postgres`]). Workers claim rows with
//! `FOR UPDATE SKIP LOCKED` ([`claim`]): only the first row of a thread (by due time, then run id) can be
//! claimed, and only when it is due and no live lease holds it, so a thread runs one run at a time
//! whichever instance runs it. A claim is a lease that its worker renews ([`renew`]); a lease that
//! expires (its worker died) makes the row claimable again, and the next worker continues the run from its
//! last checkpoint.

use std::time::Duration;

use super::Db;

use crate::runs::CancelAction;

/// Claims the next run this worker may start: the first of its thread, due, not leased (or its lease
/// expired). Returns the run's id, the cancel already asked of it, if any, and whether another run was
/// claimable when it was claimed (in the statement's snapshot: one made later wakes the workers itself).
pub(crate) async fn claim(db: &Db, worker: &str, lease: Duration) -> Result<Option<Claimed>, sqlx::Error> {
    let row: Option<(String, String, Option<String>, bool)> = db
        .fetch_optional(
            sqlx::query_as(
                "WITH next AS ( \
           SELECT q.run_id FROM weft_server_queue q \
           WHERE q.due_at <= now() AND (q.worker IS NULL OR q.lease_until < now()) \
             AND NOT EXISTS (SELECT 1 FROM weft_server_queue e WHERE e.thread_id = q.thread_id \
                             AND (e.due_at, e.run_id) < (q.due_at, q.run_id)) \
           ORDER BY q.due_at, q.run_id LIMIT 1 FOR UPDATE SKIP LOCKED) \
         UPDATE weft_server_queue q SET worker = $1, lease_until = now() + $2 * interval '1 millisecond', \
           attempts = q.attempts + 1 \
         FROM next WHERE q.run_id = next.run_id RETURNING q.run_id, q.thread_id, q.cancel, \
           EXISTS (SELECT 1 FROM weft_server_queue o \
             WHERE o.run_id <> q.run_id AND o.due_at <= now() AND (o.worker IS NULL OR o.lease_until < now()) \
               AND NOT EXISTS (SELECT 1 FROM weft_server_queue e WHERE e.thread_id = o.thread_id \
                               AND (e.due_at, e.run_id) < (o.due_at, o.run_id)))",
            )
            .bind(worker)
            .bind(millis(lease)),
        )
        .await?;
    Ok(row.map(|(run_id, thread_id, cancel, more)| Claimed {
        run_id,
        thread_id,
        cancel: cancel.as_deref().and_then(parse_cancel),
        more,
    }))
}

/// A run claimed from the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claimed {
    pub(crate) run_id: String,
    pub(crate) thread_id: String,
    /// The cancel asked of it, if any.
    pub(crate) cancel: Option<CancelAction>,
    /// Another run was claimable too: the worker claims again at once rather than waiting for a wake-up.
    pub(crate) more: bool,
}

/// Renews the leases of this worker's `runs` (those it is running and that have not stalled); returns
/// the runs it renewed, with the cancel asked of each (a run missing from the answer has been taken from
/// it, deleted or ended). A lease of this worker's that is not among `runs` (a run it no longer runs,
/// whatever the reason) is left to lapse, so that another worker takes the run: every run ends.
pub(crate) async fn renew(
    db: &Db,
    worker: &str,
    lease: Duration,
    runs: &[String],
) -> Result<Vec<(String, Option<CancelAction>)>, sqlx::Error> {
    let rows: Vec<(String, Option<String>)> = db
        .fetch_all(
            sqlx::query_as(
                "UPDATE weft_server_queue SET lease_until = now() + $2 * interval '1 millisecond' \
         WHERE worker = $1 AND run_id = ANY($3) RETURNING run_id, cancel",
            )
            .bind(worker)
            .bind(millis(lease))
            .bind(runs),
        )
        .await?;
    Ok(rows.into_iter().map(|(run_id, cancel)| (run_id, cancel.as_deref().and_then(parse_cancel))).collect())
}

/// Records that a run is to be cancelled (its worker reads it at its next renewal, or at once through
/// Redis).
pub(crate) async fn ask_cancel(db: &Db, run_id: &str, action: CancelAction) -> Result<(), sqlx::Error> {
    db.execute(
        sqlx::query("UPDATE weft_server_queue SET cancel = $2 WHERE run_id = $1")
            .bind(run_id)
            .bind(cancel_name(action)),
    )
    .await?;
    Ok(())
}

/// Lets go of this worker's lease on the run (a drained run, left for another worker to claim at once).
pub(crate) async fn release(db: &Db, worker: &str, run_id: &str) -> Result<(), sqlx::Error> {
    db.execute(sqlx::query(
        "UPDATE weft_server_queue SET worker = NULL, lease_until = NULL WHERE run_id = $1 AND worker = $2",
    )
    .bind(run_id)
    .bind(worker))
    .await?;
    Ok(())
}

/// Whether the run is still queued (pending or running).
pub(crate) async fn is_queued(db: &Db, run_id: &str) -> Result<bool, sqlx::Error> {
    let found: Option<i32> = db
        .fetch_optional(sqlx::query_scalar("SELECT 1 FROM weft_server_queue WHERE run_id = $1").bind(run_id))
        .await?;
    Ok(found.is_some())
}

/// How many runs wait (due, unclaimed or with an expired lease) and how many are leased.
pub(crate) async fn depth(db: &Db) -> Result<(i64, i64), sqlx::Error> {
    db.fetch_one(sqlx::query_as(
        "SELECT count(*) FILTER (WHERE worker IS NULL OR lease_until < now()), \
                count(*) FILTER (WHERE worker IS NOT NULL AND lease_until >= now()) FROM weft_server_queue",
    ))
    .await
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// How a cancel is written in the queue.
pub(crate) fn cancel_name(action: CancelAction) -> &'static str {
    match action {
        CancelAction::Interrupt => "interrupt",
        CancelAction::Rollback => "rollback",
    }
}

/// A cancel as written in the queue or sent through Redis.
pub(crate) fn parse_cancel(name: &str) -> Option<CancelAction> {
    match name {
        "interrupt" => Some(CancelAction::Interrupt),
        "rollback" => Some(CancelAction::Rollback),
        _ => None,
    }
}
