//! The records on PostgreSQL, the source of truth of a scaled-out server.
//!
//! - `weft_server_records`: one row per record (`kind`, `id`, the JSON `body`), stamped with `seq` from one
//!   sequence at every write; a deletion keeps the row with no body, so that other instances learn of it.
//! - Writers take turns: a turn is PostgreSQL's advisory lock of the records (one key per schema), held on
//!   one connection for as long as the turn lasts, then the rows with a `seq` past the last one this
//!   instance read. Under the lock no one else writes, so `seq` order is commit order and the instance's
//!   copy is exact when the turn starts.
//! - `weft_server_queue`: one row per run that is pending or running, kept in the same transaction as the
//!   run's record (see [`crate::scale::queue`]).
//! - The tables are made under another advisory lock, in one transaction, so that instances may start
//!   together.

use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres};
use tokio::sync::oneshot;

use super::Change;
use crate::error::ServerError;

/// The advisory lock of the records, per schema.
const LOCK: &str = "SELECT pg_advisory_lock(hashtextextended(current_schema() || ':weft_server_records', 0))";
const UNLOCK: &str =
    "SELECT pg_advisory_unlock(hashtextextended(current_schema() || ':weft_server_records', 0))";

/// The schema, made in one transaction under the migration lock.
const SCHEMA: [&str; 6] = [
    "CREATE SEQUENCE IF NOT EXISTS weft_server_records_seq",
    "CREATE TABLE IF NOT EXISTS weft_server_records (kind TEXT NOT NULL, id TEXT NOT NULL, body TEXT, \
     seq BIGINT NOT NULL, PRIMARY KEY (kind, id))",
    "CREATE INDEX IF NOT EXISTS weft_server_records_by_seq ON weft_server_records (seq)",
    "CREATE TABLE IF NOT EXISTS weft_server_queue (run_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, \
     due_at TIMESTAMPTZ NOT NULL, worker TEXT, lease_until TIMESTAMPTZ, cancel TEXT, \
     attempts INTEGER NOT NULL DEFAULT 0)",
    "CREATE INDEX IF NOT EXISTS weft_server_queue_by_thread ON weft_server_queue (thread_id, due_at, run_id)",
    "CREATE INDEX IF NOT EXISTS weft_server_queue_by_worker ON weft_server_queue (worker)",
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
        self.0.as_mut().ok_or_else(|| ServerError::Storage("the records' lock is not held".into()))
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

/// The records' table and this instance's place in it.
#[derive(Debug)]
pub(crate) struct PgRecords {
    pool: PgPool,
    held: Option<Held>,
    /// The last `seq` read or written.
    seq: i64,
}

/// A row read at a turn's start: kind, id, body (none: deleted).
pub(crate) type Row = (String, String, Option<String>);

impl PgRecords {
    pub(crate) fn new(pool: PgPool) -> Self {
        Self { pool, held: None, seq: 0 }
    }

    /// Takes the lock and reads the rows written since the last turn; returns them and the last `seq`
    /// among them (to pass to [`PgRecords::seen`] once applied).
    pub(crate) async fn enter(&mut self) -> Result<(Vec<Row>, i64), ServerError> {
        // The lock is taken in a task of its own, so that a caller that goes away while waiting never
        // leaves a connection that holds it behind: the task lets go itself when no one takes it.
        let pool = self.pool.clone();
        let (tx, rx) = oneshot::channel();
        tokio::spawn(async move {
            let taken = async {
                let mut conn = pool.acquire().await?;
                sqlx::query(LOCK).execute(&mut *conn).await?;
                Ok::<_, sqlx::Error>(conn)
            }
            .await;
            if let Err(Ok(conn)) = tx.send(taken.map(|conn| Held(Some(conn)))) {
                drop(conn);
            }
        });
        let mut held = rx
            .await
            .map_err(|_| ServerError::Storage("the records' lock was not taken".into()))?
            .map_err(storage)?;
        let rows: Vec<(String, String, Option<String>, i64)> =
            sqlx::query_as("SELECT kind, id, body, seq FROM weft_server_records WHERE seq > $1 ORDER BY seq")
                .bind(self.seq)
                .fetch_all(&mut **held.conn()?)
                .await
                .map_err(storage)?;
        self.held = Some(held);
        let last = rows.last().map_or(self.seq, |row| row.3);
        Ok((rows.into_iter().map(|(kind, id, body, _)| (kind, id, body)).collect(), last))
    }

    /// The rows up to `seq` are applied.
    pub(crate) fn seen(&mut self, seq: i64) {
        self.seq = self.seq.max(seq);
    }

    /// Ends the turn.
    pub(crate) fn leave(&mut self) {
        self.held = None;
    }

    /// Writes `ops` (kind, id, body; none deletes) and keeps the run queue in step with `changes`, in one
    /// transaction on the connection that holds the lock.
    pub(crate) async fn write(
        &mut self,
        ops: &[(&'static str, &str, Option<&str>)],
        changes: &[Change],
    ) -> Result<(), ServerError> {
        let held =
            self.held.as_mut().ok_or_else(|| ServerError::Storage("the records' lock is not held".into()))?;
        let conn = held.conn()?;
        let mut tx = sqlx::Connection::begin(&mut **conn).await.map_err(storage)?;
        let mut last = self.seq;
        for (kind, id, body) in ops {
            let seq: i64 = sqlx::query_scalar(
                "INSERT INTO weft_server_records (kind, id, body, seq) \
                 VALUES ($1, $2, $3, nextval('weft_server_records_seq')) \
                 ON CONFLICT (kind, id) DO UPDATE SET body = excluded.body, seq = excluded.seq RETURNING seq",
            )
            .bind(kind)
            .bind(id)
            .bind(body)
            .fetch_one(&mut *tx)
            .await
            .map_err(storage)?;
            last = last.max(seq);
        }
        for change in changes {
            crate::scale::queue::keep(&mut tx, change).await.map_err(storage)?;
        }
        tx.commit().await.map_err(storage)?;
        self.seq = last;
        Ok(())
    }
}

fn storage(e: sqlx::Error) -> ServerError {
    ServerError::Storage(format!("postgres: {e}"))
}
