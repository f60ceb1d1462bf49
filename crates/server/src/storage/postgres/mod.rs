//! The records on PostgreSQL, the source of truth of a scaled-out server.
//!
//! - `weft_server_records`: one row per record (`kind`, `id`, the JSON `body`), stamped with `seq` from one
//!   sequence at every write; a deletion keeps the row with no body, so that other instances learn of it.
//! - Writers take turns: a turn is PostgreSQL's advisory lock of the records (one key per schema), held on
//!   one connection for as long as the turn lasts, then the rows with a `seq` past the last one this
//!   instance read. Under the lock no one else writes, so `seq` order is commit order and the instance's
//!   copy is exact when the turn starts.
//! - Round trips: taking the lock and reading the rows written since is one call
//!   (`weft_server_records_enter`, a function whose read takes its snapshot after the lock is granted);
//!   a turn's writes, records and queue rows together, are one call (`weft_server_records_write`, one
//!   statement, so one transaction without `BEGIN` and `COMMIT`).
//! - Readers take no turn: they read the rows past the last `seq` they know without the lock (see
//!   [`PgRecords::catch_up`] for why they never miss one), so requests that only read neither wait for
//!   other instances nor make them wait.
//! - An instance whose own callers wait for the records keeps the lock for the next of them (no unlock,
//!   no lock, no catch-up read: no one else wrote meanwhile), for at most [`KEEP_FOR`] before it lets
//!   the other instances have their turn. When nobody took the kept lock, a timer lets go of it.
//! - `weft_server_queue`: one row per run that is pending or running, kept in the same transaction as the
//!   run's record (see [`crate::scale::queue`]).
//! - The tables and functions are made under another advisory lock, in one transaction, so that instances
//!   may start together.

use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres};
use tokio::sync::oneshot;

use super::Change;
use weft_graph::checkpoint::CheckpointError;

use crate::error::ServerError;

/// How long an instance may keep the records' lock for its own waiting callers before it lets the other
/// instances have it.
pub(crate) const KEEP_FOR: Duration = Duration::from_millis(10);

const UNLOCK: &str =
    "SELECT pg_advisory_unlock(hashtextextended(current_schema() || ':weft_server_records', 0))";

/// The schema, made in one transaction under the migration lock.
const SCHEMA: [&str; 8] = [
    "CREATE SEQUENCE IF NOT EXISTS weft_server_records_seq",
    "CREATE TABLE IF NOT EXISTS weft_server_records (kind TEXT NOT NULL, id TEXT NOT NULL, body TEXT, \
     seq BIGINT NOT NULL, PRIMARY KEY (kind, id))",
    "CREATE INDEX IF NOT EXISTS weft_server_records_by_seq ON weft_server_records (seq)",
    "CREATE TABLE IF NOT EXISTS weft_server_queue (run_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, \
     due_at TIMESTAMPTZ NOT NULL, worker TEXT, lease_until TIMESTAMPTZ, cancel TEXT, \
     attempts INTEGER NOT NULL DEFAULT 0)",
    "CREATE INDEX IF NOT EXISTS weft_server_queue_by_thread ON weft_server_queue (thread_id, due_at, run_id)",
    "CREATE INDEX IF NOT EXISTS weft_server_queue_by_worker ON weft_server_queue (worker)",
    // A turn's start: the lock, then (a volatile function's statement takes a snapshot of its own, after
    // the lock is granted) the rows written since `since`.
    "CREATE OR REPLACE FUNCTION weft_server_records_enter(since BIGINT) \
     RETURNS TABLE (kind TEXT, id TEXT, body TEXT, seq BIGINT) LANGUAGE plpgsql VOLATILE AS $$ \
     BEGIN \
       PERFORM pg_advisory_lock(hashtextextended(current_schema() || ':weft_server_records', 0)); \
       RETURN QUERY SELECT r.kind, r.id, r.body, r.seq FROM weft_server_records r \
         WHERE r.seq > since ORDER BY r.seq; \
     END $$",
    // A turn's writes in order: the records (a null body deletes), then the queue's rows (`add` a run,
    // delete a `run`'s row, delete a `thread`'s rows). Returns the last `seq` written.
    "CREATE OR REPLACE FUNCTION weft_server_records_write(kinds TEXT[], ids TEXT[], bodies TEXT[], \
       queue_ops TEXT[], queue_runs TEXT[], queue_threads TEXT[], queue_due TEXT[]) \
     RETURNS BIGINT LANGUAGE plpgsql VOLATILE AS $$ \
     DECLARE last_seq BIGINT := 0; written BIGINT; \
     BEGIN \
       FOR i IN 1 .. coalesce(array_length(kinds, 1), 0) LOOP \
         INSERT INTO weft_server_records AS r (kind, id, body, seq) \
           VALUES (kinds[i], ids[i], bodies[i], nextval('weft_server_records_seq')) \
           ON CONFLICT (kind, id) DO UPDATE SET body = excluded.body, seq = excluded.seq \
           RETURNING r.seq INTO written; \
         last_seq := greatest(last_seq, written); \
       END LOOP; \
       FOR i IN 1 .. coalesce(array_length(queue_ops, 1), 0) LOOP \
         IF queue_ops[i] = 'add' THEN \
           INSERT INTO weft_server_queue (run_id, thread_id, due_at) \
             VALUES (queue_runs[i], queue_threads[i], queue_due[i]::timestamptz) \
             ON CONFLICT (run_id) DO NOTHING; \
         ELSIF queue_ops[i] = 'run' THEN \
           DELETE FROM weft_server_queue WHERE run_id = queue_runs[i]; \
         ELSIF queue_ops[i] = 'thread' THEN \
           DELETE FROM weft_server_queue WHERE thread_id = queue_threads[i]; \
         ELSE \
           RAISE EXCEPTION 'unknown queue operation %', queue_ops[i]; \
         END IF; \
       END LOOP; \
       RETURN last_seq; \
     END $$",
];

/// Makes the tables when missing, under an advisory lock (instances starting together wait for each
/// other).
pub(crate) async fn migrate(pool: &PgPool) -> Result<(), ServerError> {
    let mut tx = pool.begin().await.map_err(storage)?;
    sqlx::query(
        "SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || ':weft_server_migrate', 0))",
    )
    .execute(&mut *tx)
    .await
    .map_err(storage)?;
    for statement in SCHEMA {
        sqlx::query(statement).execute(&mut *tx).await.map_err(storage)?;
    }
    tx.commit().await.map_err(storage)
}

/// A connection that holds the records' lock; lets go of it when dropped (in a task of its own; when that
/// fails, the connection is closed, which lets go too).
#[derive(Debug)]
struct Held(Option<PoolConnection<Postgres>>);

impl Held {
    fn conn(&mut self) -> Result<&mut PoolConnection<Postgres>, ServerError> {
        self.0
            .as_mut()
            .ok_or_else(|| ServerError::from(CheckpointError::backend("the records' lock is not held")))
    }
}

async fn unlock(mut conn: PoolConnection<Postgres>) {
    if let Err(e) = sqlx::query(UNLOCK).execute(&mut *conn).await {
        tracing::warn!(error = %e, "cannot let go of the records' lock: closing its connection");
        conn.close_on_drop();
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(mut conn) = self.0.take() else { return };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(unlock(conn));
            }
            Err(_) => conn.close_on_drop(),
        }
    }
}

/// The lock while this instance has it: its connection, and since when it is held.
#[derive(Debug)]
struct Turn {
    held: Held,
    since: Instant,
}

/// The records' table and this instance's place in it.
#[derive(Debug)]
pub(crate) struct PgRecords {
    pool: PgPool,
    /// The lock, while a turn lasts or while it is kept for this instance's next caller.
    turn: Option<Turn>,
    /// The last `seq` read or written.
    seq: i64,
}

/// A row read at a turn's start: kind, id, body (none: deleted).
pub(crate) type Row = (String, String, Option<String>);

/// A row as read: kind, id, body, `seq`.
type SeqRow = (String, String, Option<String>, i64);

/// A turn's writes to the run queue, one entry per operation (see `weft_server_records_write`).
#[derive(Debug, Default)]
struct QueueOps {
    ops: Vec<&'static str>,
    runs: Vec<Option<String>>,
    threads: Vec<Option<String>>,
    due: Vec<Option<String>>,
}

impl QueueOps {
    fn push(&mut self, op: &'static str, run: Option<&str>, thread: Option<&str>, due: Option<&str>) {
        self.ops.push(op);
        self.runs.push(run.map(str::to_owned));
        self.threads.push(thread.map(str::to_owned));
        self.due.push(due.map(str::to_owned));
    }

    /// The queue kept in step with one change to the records: a pending or running run has a row, an
    /// ended or deleted one has none, a deleted thread's runs have none.
    fn keep(&mut self, change: &Change) {
        match change {
            Change::Run(record) if record.run.status.is_active() => self.push(
                "add",
                Some(&record.run.run_id),
                Some(&record.run.thread_id),
                Some(&record.run.created_at),
            ),
            Change::Run(record) => self.push("run", Some(&record.run.run_id), None, None),
            Change::DeleteRun(run_id) => self.push("run", Some(run_id), None, None),
            Change::DeleteThread(thread_id) => self.push("thread", None, Some(thread_id), None),
            _ => {}
        }
    }
}

impl PgRecords {
    pub(crate) fn new(pool: PgPool) -> Self {
        Self { pool, turn: None, seq: 0 }
    }

    /// Starts a turn: takes the lock and reads the rows written since the last turn, in one round trip;
    /// returns them and the last `seq` among them (to pass to [`PgRecords::seen`] once applied). When
    /// this instance kept the lock from its previous turn, nothing was written meanwhile: no round trip.
    pub(crate) async fn enter(&mut self) -> Result<(Vec<Row>, i64), ServerError> {
        if self.turn.is_some() {
            return Ok((Vec::new(), self.seq));
        }
        // The lock is taken in a task of its own, so that a caller that goes away while waiting never
        // leaves a connection that holds it behind: the task lets go itself when no one takes it.
        let pool = self.pool.clone();
        let since = self.seq;
        let (tx, rx) = oneshot::channel();
        tokio::spawn(async move {
            let taken = async {
                let mut conn = pool.acquire().await?;
                let rows: Result<Vec<SeqRow>, sqlx::Error> =
                    sqlx::query_as("SELECT kind, id, body, seq FROM weft_server_records_enter($1)")
                        .bind(since)
                        .fetch_all(&mut *conn)
                        .await;
                match rows {
                    Ok(rows) => Ok((Held(Some(conn)), rows)),
                    Err(e) => {
                        // Whether the lock was granted before the failure is unknown: closing the
                        // connection lets go of it.
                        conn.close_on_drop();
                        Err(e)
                    }
                }
            }
            .await;
            if let Err(Ok((held, _))) = tx.send(taken) {
                drop(held);
            }
        });
        let (held, rows) = rx
            .await
            .map_err(|_| ServerError::from(CheckpointError::backend("the records' lock was not taken")))?
            .map_err(storage)?;
        self.turn = Some(Turn { held, since: Instant::now() });
        let last = rows.last().map_or(self.seq, |row| row.3);
        Ok((rows.into_iter().map(|(kind, id, body, _)| (kind, id, body)).collect(), last))
    }

    /// Brings a reader up to date without the lock: the rows written since the last turn or read, on any
    /// pooled connection; returns them and the last `seq` among them, as [`PgRecords::enter`] does. A
    /// read never sees a gap in `seq`: `seq` is drawn only by the lock's holder, and each of its writes
    /// is one transaction, committed before the holder writes again or lets go of the lock; so the
    /// writes every snapshot holds are exactly those up to some point of `seq` order. While this instance
    /// holds or keeps the lock nobody else wrote: no round trip.
    pub(crate) async fn catch_up(&mut self) -> Result<(Vec<Row>, i64), ServerError> {
        if self.turn.is_some() {
            return Ok((Vec::new(), self.seq));
        }
        let rows: Vec<SeqRow> =
            sqlx::query_as("SELECT kind, id, body, seq FROM weft_server_records WHERE seq > $1 ORDER BY seq")
                .bind(self.seq)
                .fetch_all(&self.pool)
                .await
                .map_err(storage)?;
        let last = rows.last().map_or(self.seq, |row| row.3);
        Ok((rows.into_iter().map(|(kind, id, body, _)| (kind, id, body)).collect(), last))
    }

    /// The rows up to `seq` are applied.
    pub(crate) fn seen(&mut self, seq: i64) {
        self.seq = self.seq.max(seq);
    }

    /// Ends the turn. With `keep` (another caller of this instance waits for the records), the lock stays
    /// for that caller's turn unless it has been held for [`KEEP_FOR`] already. Whether it was kept.
    pub(crate) fn leave(&mut self, keep: bool) -> bool {
        match &self.turn {
            Some(turn) if keep && turn.since.elapsed() < KEEP_FOR => true,
            _ => {
                self.turn = None;
                false
            }
        }
    }

    /// Writes `ops` (kind, id, body; none deletes) and keeps the run queue in step with `changes`, in one
    /// statement (so one transaction) on the connection that holds the lock. A failure ends the turn.
    pub(crate) async fn write(
        &mut self,
        ops: &[(&'static str, &str, Option<&str>)],
        changes: &[Change],
    ) -> Result<(), ServerError> {
        let mut queue = QueueOps::default();
        for change in changes {
            queue.keep(change);
        }
        let turn = self
            .turn
            .as_mut()
            .ok_or_else(|| ServerError::from(CheckpointError::backend("the records' lock is not held")))?;
        let conn = turn.held.conn()?;
        let written: Result<i64, sqlx::Error> =
            sqlx::query_scalar("SELECT weft_server_records_write($1, $2, $3, $4, $5, $6, $7)")
                .bind(ops.iter().map(|op| op.0).collect::<Vec<_>>())
                .bind(ops.iter().map(|op| op.1).collect::<Vec<_>>())
                .bind(ops.iter().map(|op| op.2).collect::<Vec<_>>())
                .bind(queue.ops)
                .bind(queue.runs)
                .bind(queue.threads)
                .bind(queue.due)
                .fetch_one(&mut **conn)
                .await;
        match written {
            Ok(last) => {
                self.seq = self.seq.max(last);
                Ok(())
            }
            Err(e) => {
                // The connection may be gone, and the lock with it: the next turn takes it afresh.
                self.turn = None;
                Err(storage(e))
            }
        }
    }
}

fn storage(e: sqlx::Error) -> ServerError {
    ServerError::from(weft_integrations::sql_checkpoint_error("postgres".to_owned(), e))
}

#[cfg(test)]
mod tests;
