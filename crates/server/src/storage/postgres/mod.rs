//! The records on PostgreSQL, the source of truth of a scaled-out server.
//!
//! - `weft_server_records`: one row per record (`kind`, `id`, the JSON `body`), stamped with `seq` from one
//!   sequence at every write; a deletion keeps the row with no body, so that other instances learn of it.
//! - Writers take turns: a turn is one transaction that takes PostgreSQL's transaction-level advisory lock
//!   of the records (one key per schema), reads the rows with a `seq` past the last one this instance
//!   read, writes, and commits, which lets go of the lock. Under the lock no one else writes, so `seq`
//!   order is commit order and the instance's copy is exact when the turn starts. No lock outlives its
//!   transaction and no session state is used, so the same code runs behind a pooler in transaction mode.
//! - Round trips: the transaction's start, the lock and the read of the rows written since are one call
//!   (`BEGIN ISOLATION LEVEL READ COMMITTED` and `weft_server_records_turn` in one simple query, a
//!   function whose read takes its snapshot after the lock is granted); a turn's writes, records and queue
//!   rows together, are one call (`weft_server_records_write`); the commit is one more. A turn that
//!   writes nothing is rolled back when its caller lets go (the rollback is sent when its connection goes
//!   back to the pool). A second write under the same [`crate::storage::RecordsGuard`] takes a new turn
//!   (reading in what other instances wrote between the two).
//! - Readers take no turn: they read the rows past the last `seq` they know without the lock (see
//!   [`PgRecords::catch_up`] for why they never miss one), so requests that only read neither wait for
//!   other instances nor make them wait.
//! - `weft_server_queue`: one row per run that is pending or running, kept in the same transaction as the
//!   run's record (see [`crate::scale::queue`]).
//! - The tables and functions are made under another advisory lock, in one transaction, so that instances
//!   may start together.

use sqlx::{Postgres, Row as _, Transaction};
use tokio::sync::oneshot;

use super::Change;
use weft_graph::checkpoint::CheckpointError;

use crate::error::ServerError;
use crate::scale::Db;

/// The schema, made in one transaction under the migration lock.
const SCHEMA: [&str; 9] = [
    // The sweeps that one instance of the deployment runs per interval (see `crate::scale::sweep`).
    "CREATE TABLE IF NOT EXISTS weft_server_sweeps (name TEXT PRIMARY KEY, due_at TIMESTAMPTZ NOT NULL)",
    "CREATE SEQUENCE IF NOT EXISTS weft_server_records_seq",
    "CREATE TABLE IF NOT EXISTS weft_server_records (kind TEXT NOT NULL, id TEXT NOT NULL, body TEXT, \
     seq BIGINT NOT NULL, PRIMARY KEY (kind, id))",
    "CREATE INDEX IF NOT EXISTS weft_server_records_by_seq ON weft_server_records (seq)",
    "CREATE TABLE IF NOT EXISTS weft_server_queue (run_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, \
     due_at TIMESTAMPTZ NOT NULL, worker TEXT, lease_until TIMESTAMPTZ, cancel TEXT, \
     attempts INTEGER NOT NULL DEFAULT 0)",
    "CREATE INDEX IF NOT EXISTS weft_server_queue_by_thread ON weft_server_queue (thread_id, due_at, run_id)",
    "CREATE INDEX IF NOT EXISTS weft_server_queue_by_worker ON weft_server_queue (worker)",
    // A turn's start: the lock until the transaction ends, then (in read committed, a volatile
    // function's statement takes a snapshot of its own, after the lock is granted) the rows written since
    // `since`.
    "CREATE OR REPLACE FUNCTION weft_server_records_turn(since BIGINT) \
     RETURNS TABLE (kind TEXT, id TEXT, body TEXT, seq BIGINT) LANGUAGE plpgsql VOLATILE AS $$ \
     BEGIN \
       PERFORM pg_advisory_xact_lock(hashtextextended(current_schema() || ':weft_server_records', 0)); \
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
pub(crate) async fn migrate(db: &Db) -> Result<(), ServerError> {
    let mut tx = db.pool.begin().await.map_err(storage)?;
    // Simple queries: no prepared statement, whatever stands between this and PostgreSQL.
    sqlx::raw_sql(
        "SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || ':weft_server_migrate', 0))",
    )
    .execute(&mut *tx)
    .await
    .map_err(storage)?;
    for statement in SCHEMA.iter().chain(&super::source::INDEXES_POSTGRES) {
        sqlx::raw_sql(*statement).execute(&mut *tx).await.map_err(storage)?;
    }
    tx.commit().await.map_err(storage)
}

/// The records' table and this instance's place in it.
#[derive(Debug)]
pub(crate) struct PgRecords {
    db: Db,
    /// The turn's transaction, which holds the lock, from its start until its write commits or its
    /// caller lets go.
    turn: Option<Transaction<'static, Postgres>>,
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
    pub(crate) fn new(db: Db) -> Self {
        Self { db, turn: None, seq: 0 }
    }

    /// The pool and how statements reach it.
    pub(crate) fn db(&self) -> &Db {
        &self.db
    }

    /// The last `seq` written by anyone.
    pub(crate) async fn last_seq(&self) -> Result<i64, ServerError> {
        self.db
            .fetch_one(sqlx::query_scalar("SELECT coalesce(max(seq), 0)::BIGINT FROM weft_server_records"))
            .await
            .map_err(storage)
    }

    /// Whether a turn is open (its lock held, nothing committed yet).
    pub(crate) fn in_turn(&self) -> bool {
        self.turn.is_some()
    }

    /// Starts a turn: a transaction that takes the lock and reads the rows written since the last turn,
    /// in one round trip; returns them and the last `seq` among them (to pass to [`PgRecords::seen`]
    /// once applied).
    pub(crate) async fn enter(&mut self) -> Result<(Vec<Row>, i64), ServerError> {
        self.turn = None;
        // Taken in a task of its own, so that a caller that goes away while waiting for the lock never
        // leaves its transaction half read: the task drops it (rolled back) when no one takes it.
        let pool = self.db.pool.clone();
        let since = self.seq;
        let (tx, rx) = oneshot::channel();
        tokio::spawn(async move {
            let taken = async {
                let mut turn = pool.begin_with("BEGIN ISOLATION LEVEL READ COMMITTED").await?;
                // `since` is a number: written into the statement, which then needs no prepared
                // statement and is one simple query.
                let sql = format!("SELECT kind, id, body, seq FROM weft_server_records_turn({since})");
                let rows = sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).fetch_all(&mut *turn).await?;
                let rows = rows
                    .iter()
                    .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?, row.try_get(3)?)))
                    .collect::<Result<Vec<SeqRow>, sqlx::Error>>()?;
                Ok::<_, sqlx::Error>((turn, rows))
            }
            .await;
            drop(tx.send(taken));
        });
        let (turn, rows) = rx
            .await
            .map_err(|_| ServerError::from(CheckpointError::backend("the records' turn was not taken")))?
            .map_err(storage)?;
        self.turn = Some(turn);
        let last = rows.last().map_or(self.seq, |row| row.3);
        Ok((rows.into_iter().map(|(kind, id, body, _)| (kind, id, body)).collect(), last))
    }

    /// Brings a reader up to date without the lock: the rows written since the last turn or read, on any
    /// pooled connection; returns them and the last `seq` among them, as [`PgRecords::enter`] does. A
    /// read never sees a gap in `seq`: `seq` is drawn only by the lock's holder, in the transaction that
    /// holds it, and PostgreSQL makes a transaction's writes visible before it lets go of its locks; so
    /// the writes every snapshot holds are exactly those up to some point of `seq` order.
    pub(crate) async fn catch_up(&mut self) -> Result<(Vec<Row>, i64), ServerError> {
        let since = self.seq;
        let rows: Vec<SeqRow> = self
            .db
            .fetch_all(
                sqlx::query_as(
                    "SELECT kind, id, body, seq FROM weft_server_records WHERE seq > $1 ORDER BY seq",
                )
                .bind(since),
            )
            .await
            .map_err(storage)?;
        let last = rows.last().map_or(self.seq, |row| row.3);
        Ok((rows.into_iter().map(|(kind, id, body, _)| (kind, id, body)).collect(), last))
    }

    /// The rows up to `seq` are applied.
    pub(crate) fn seen(&mut self, seq: i64) {
        self.seq = self.seq.max(seq);
    }

    /// Ends the turn: a transaction still open (nothing written) is rolled back, which lets go of the
    /// lock.
    pub(crate) fn leave(&mut self) {
        self.turn = None;
    }

    /// Writes `ops` (kind, id, body; none deletes) and keeps the run queue in step with `changes`, in one
    /// statement in the turn's transaction, and commits it: the turn ends, with the lock.
    pub(crate) async fn write(
        &mut self,
        ops: &[(&'static str, &str, Option<&str>)],
        changes: &[Change],
    ) -> Result<(), ServerError> {
        let mut queue = QueueOps::default();
        for change in changes {
            queue.keep(change);
        }
        let mut turn = self
            .turn
            .take()
            .ok_or_else(|| ServerError::from(CheckpointError::backend("the records' lock is not held")))?;
        let written: Result<i64, sqlx::Error> = async {
            let last = sqlx::query_scalar("SELECT weft_server_records_write($1, $2, $3, $4, $5, $6, $7)")
                .bind(ops.iter().map(|op| op.0).collect::<Vec<_>>())
                .bind(ops.iter().map(|op| op.1).collect::<Vec<_>>())
                .bind(ops.iter().map(|op| op.2).collect::<Vec<_>>())
                .bind(queue.ops)
                .bind(queue.runs)
                .bind(queue.threads)
                .bind(queue.due)
                .persistent(self.db.prepared)
                .fetch_one(&mut *turn)
                .await?;
            turn.commit().await?;
            Ok(last)
        }
        .await;
        // Either way the turn is over: committed, or (a failure) rolled back or gone with its connection.
        let last = written.map_err(storage)?;
        self.seq = self.seq.max(last);
        Ok(())
    }
}

fn storage(e: sqlx::Error) -> ServerError {
    ServerError::from(weft_integrations::sql_checkpoint_error("postgres".to_owned(), e))
}

#[cfg(test)]
mod tests;
