//! The records on PostgreSQL, the source of truth of a scaled-out server.
//!
//! - `weft_server_records`: one row per record (`kind`, `id`, the JSON `body`), stamped with the id of the
//!   transaction that last wrote it (`xid`, PostgreSQL's `xid8`); a deletion keeps the row with no body,
//!   so that other instances learn of it.
//! - Writers take turns per key: a turn is one transaction that takes PostgreSQL's transaction-level
//!   advisory lock of its key (a thread, an assistant, a cron: `thread:<id>`…), with the records' lock
//!   shared (a turn without a key takes that one alone, exclusively: start-up), reads what other
//!   instances wrote since this one last looked, writes, and commits, which lets go of the locks. So
//!   changes to one thread are serialized across the deployment (the multitask strategies, a run's end and
//!   the next one's start), and changes to different threads go on side by side. No lock outlives its
//!   transaction and no session state is used, so the same code runs behind a pooler in transaction mode.
//! - What was written since: the rows whose `xid` is at least the *horizon* this instance last read, with
//!   the horizon of the reading snapshot (`pg_snapshot_xmin`: every transaction older than it has ended).
//!   A transaction at or past the horizon that had not committed when read is read again at the next look,
//!   as its `xid` stays past the new horizon; so nothing is missed, and a row may be read twice (applying
//!   it again changes nothing). A transaction left open anywhere on the database holds the horizon back:
//!   the rows written since it began are read at every look until it ends.
//! - Round trips: the transaction's start and the locks are one call (`BEGIN ISOLATION LEVEL READ
//!   COMMITTED` and `weft_server_records_lock` in one simple query, with the lease check of a turn that
//!   records a run's end; the transaction is this module's [`OpenTurn`], as sqlx's own would take a
//!   round trip of its own to begin), taken before the instance holds its records in memory; the read
//!   of the rows written since is one more, once it holds them (`weft_server_records_since`, whose
//!   snapshot is taken after the locks are granted). Nothing that waits for a lock runs while the
//!   records are held in memory: a turn there may wait only for PostgreSQL's answer to a read or a
//!   commit. A turn's writes, records and queue rows together, are one call
//!   (`weft_server_records_write`); the commit is one more. A turn that writes nothing is rolled back
//!   when its caller lets go (in a task of its own, before its connection goes back to the pool). A second write under the same [`crate::storage::RecordsGuard`] takes a new turn
//!   of the same key (reading in what other instances wrote between the two).
//! - The turn that records a run's end also stores the run's last checkpoints (the saves of its last
//!   step, which the engine leaves to the server: [`weft_graph::EndState::with_last_saves`]), through
//!   the checkpointer's [`PostgresSaver::put_batch_in`], as one statement before the records' write in
//!   the same transaction: a run recorded ended has its last checkpoint, and a crash or a failure before
//!   the commit leaves neither (whoever takes the run over runs its last step again).
//! - Readers take no turn: they read the rows written since the horizon without a lock, in one statement,
//!   so requests that only read neither wait for other instances nor make them wait.
//! - `weft_server_queue`: one row per run that is pending or running, kept in the same transaction as the
//!   run's record (see [`crate::scale::queue`]).
//! - The tables and functions are made under another advisory lock, in one transaction, so that instances
//!   may start together. Instances of a release before the per-key turns (which read by `seq` under the
//!   one lock) must all be stopped before instances of this one start.

use std::sync::Arc;

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, Postgres, Row as _};
use tokio::sync::oneshot;
use weft_graph::checkpoint::{CheckpointError, CheckpointTuple, SaveOp};
use weft_integrations::postgres::PostgresSaver;

use super::{Change, Op, source};

use crate::error::ServerError;
use crate::scale::Db;

mod migrate;

pub(crate) use migrate::migrate;

/// The schema, made in one transaction under the migration lock.
const SCHEMA: &[&str] = &[
    // The sweeps that one instance of the deployment runs per interval (see `crate::scale::sweep`) are
    // in `weft_server_sweeps`, made by the migration before it reads the upgrade's lease there.
    "CREATE SEQUENCE IF NOT EXISTS weft_server_records_seq",
    "CREATE TABLE IF NOT EXISTS weft_server_records (kind TEXT NOT NULL, id TEXT NOT NULL, body TEXT, \
     seq BIGINT NOT NULL, PRIMARY KEY (kind, id))",
    "ALTER TABLE weft_server_records ADD COLUMN IF NOT EXISTS xid xid8 NOT NULL DEFAULT '0'",
    "CREATE INDEX IF NOT EXISTS weft_server_records_by_xid ON weft_server_records (xid)",
    "CREATE TABLE IF NOT EXISTS weft_server_queue (run_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, \
     due_at TIMESTAMPTZ NOT NULL, worker TEXT, lease_until TIMESTAMPTZ, cancel TEXT, \
     attempts INTEGER NOT NULL DEFAULT 0)",
    "CREATE INDEX IF NOT EXISTS weft_server_queue_by_thread ON weft_server_queue (thread_id, due_at, run_id)",
    "CREATE INDEX IF NOT EXISTS weft_server_queue_by_worker ON weft_server_queue (worker)",
    // A turn's locks until its transaction ends (the key's, and the records' shared; without a key, the
    // records' alone), without the read: a turn takes them before this instance holds its records in
    // memory, and reads what changed once it holds them (`weft_server_records_since`), so that it never
    // waits for a lock while holding what another of its turns needs to commit.
    // Planned once per connection (`force_generic_plan`): its statements take the argument `lock_key`,
    // so under the connection's `force_custom_plan` they were planned at every call.
    "CREATE OR REPLACE FUNCTION weft_server_records_lock(lock_key TEXT) RETURNS INTEGER \
     LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $$ \
     BEGIN \
       IF lock_key IS NULL THEN \
         PERFORM pg_advisory_xact_lock(hashtextextended(current_schema() || ':weft_server_records', 0)); \
       ELSE \
         PERFORM pg_advisory_xact_lock_shared(hashtextextended(current_schema() || ':weft_server_records', 0)); \
         PERFORM pg_advisory_xact_lock( \
           hashtextextended(current_schema() || ':weft_server_records:' || lock_key, 0)); \
       END IF; \
       RETURN 1; \
     END $$",
    // The rows written since the horizon `since`, each with the horizon of the snapshot (one row without
    // a record when there are none). In read committed, a volatile function's statement takes a snapshot
    // of its own, after the turn's locks are granted. Planned once per connection (`force_generic_plan`;
    // a plan for each call's horizon cost more than the read): the read's upper bound, the snapshot's
    // `xmax` (no row written at or after it is visible anyway), makes the generic plan's estimate a
    // narrow range, so it keeps to the `xid` index however large the table.
    "CREATE OR REPLACE FUNCTION weft_server_records_since(since TEXT) \
     RETURNS TABLE (kind TEXT, id TEXT, body TEXT, horizon TEXT) LANGUAGE plpgsql VOLATILE \
     SET plan_cache_mode = force_generic_plan AS $$ \
     BEGIN \
       RETURN QUERY WITH s AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS horizon) \
         SELECT r.kind, r.id, r.body, s.horizon FROM s \
         LEFT JOIN weft_server_records r ON r.xid >= since::xid8 \
           AND r.xid < pg_snapshot_xmax(pg_current_snapshot()); \
     END $$",
    // A turn's start as releases before records schema 4 take it: the locks, then the read.
    "CREATE OR REPLACE FUNCTION weft_server_records_enter(lock_key TEXT, since TEXT) \
     RETURNS TABLE (kind TEXT, id TEXT, body TEXT, horizon TEXT) LANGUAGE plpgsql VOLATILE AS $$ \
     BEGIN \
       PERFORM weft_server_records_lock(lock_key); \
       RETURN QUERY SELECT * FROM weft_server_records_since(since); \
     END $$",
    // A turn's writes in order: the records (a null body deletes), then the queue's rows (`add` a run,
    // `own` a run claimed by `owner` for `lease_ms` from the start, delete a `run`'s row, delete a
    // `thread`'s rows). Returns the last `seq` written. Its statements are planned once per connection
    // (each is a lookup or write by key, which a plan per call only made dearer). A run's `created_at`
    // comes from its body when the caller passes none: the writes of a build before records schema 6,
    // during a rolling upgrade (this build passes it, and the body is not parsed).
    "CREATE OR REPLACE FUNCTION weft_server_records_write(kinds TEXT[], ids TEXT[], bodies TEXT[], \
       parents TEXT[], statuses TEXT[], created TEXT[], updated TEXT[], ttls INTEGER[], \
       queue_ops TEXT[], queue_runs TEXT[], queue_threads TEXT[], queue_due TEXT[], owner TEXT, \
       lease_ms DOUBLE PRECISION) \
     RETURNS BIGINT LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $$ \
     DECLARE last_seq BIGINT := 0; written BIGINT; \
     BEGIN \
       FOR i IN 1 .. coalesce(array_length(kinds, 1), 0) LOOP \
         INSERT INTO weft_server_records AS r \
           (kind, id, body, parent, status, created_at, updated_at, sweepable, seq, xid) \
           VALUES (kinds[i], ids[i], bodies[i], parents[i], statuses[i], \
             coalesce(created[i], CASE WHEN kinds[i] = 'run' THEN bodies[i]::jsonb #>> '{run,created_at}' END), \
             updated[i], ttls[i], nextval('weft_server_records_seq'), pg_current_xact_id()) \
           ON CONFLICT (kind, id) DO UPDATE SET body = excluded.body, parent = excluded.parent, \
             status = excluded.status, created_at = excluded.created_at, updated_at = excluded.updated_at, \
             sweepable = excluded.sweepable, seq = excluded.seq, xid = excluded.xid \
           RETURNING r.seq INTO written; \
         last_seq := greatest(last_seq, written); \
       END LOOP; \
       FOR i IN 1 .. coalesce(array_length(queue_ops, 1), 0) LOOP \
         IF queue_ops[i] = 'add' THEN \
           INSERT INTO weft_server_queue (run_id, thread_id, due_at) \
             VALUES (queue_runs[i], queue_threads[i], queue_due[i]::timestamptz) \
             ON CONFLICT (run_id) DO NOTHING; \
         ELSIF queue_ops[i] = 'own' THEN \
           INSERT INTO weft_server_queue (run_id, thread_id, due_at, worker, lease_until, attempts) \
             VALUES (queue_runs[i], queue_threads[i], queue_due[i]::timestamptz, owner, \
                     now() + lease_ms * interval '1 millisecond', 1) \
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
    // Whether `worker` holds the lease of `run`, its queue row locked until the transaction ends. A
    // function so that its lookup by key is planned once per connection (as a statement of its own it was
    // planned at every call, which cost more than the lookup).
    "CREATE OR REPLACE FUNCTION weft_server_lease_held(run TEXT, owner TEXT) RETURNS BOOLEAN \
     LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $$ \
     BEGIN \
       PERFORM 1 FROM weft_server_queue q WHERE q.run_id = run AND q.worker = owner \
         AND q.lease_until >= now() FOR UPDATE; \
       RETURN FOUND; \
     END $$",
    // The writes of instances of a release before the columns and `own`, during a rolling upgrade: the
    // columns read from the bodies.
    "CREATE OR REPLACE FUNCTION weft_server_records_write(kinds TEXT[], ids TEXT[], bodies TEXT[], \
       queue_ops TEXT[], queue_runs TEXT[], queue_threads TEXT[], queue_due TEXT[]) \
     RETURNS BIGINT LANGUAGE sql VOLATILE AS $$ \
       WITH u AS (SELECT k, b::jsonb AS j, n FROM unnest(kinds, bodies) WITH ORDINALITY AS u(k, b, n)) \
       SELECT weft_server_records_write(kinds, ids, bodies, \
         ARRAY(SELECT CASE WHEN k = 'run' THEN j #>> '{run,thread_id}' END FROM u ORDER BY n), \
         ARRAY(SELECT CASE k WHEN 'run' THEN j #>> '{run,status}' WHEN 'thread' THEN j ->> 'status' END \
           FROM u ORDER BY n), \
         ARRAY(SELECT CASE WHEN k = 'thread' THEN j ->> 'created_at' END FROM u ORDER BY n), \
         ARRAY(SELECT CASE WHEN k = 'thread' THEN j ->> 'updated_at' END FROM u ORDER BY n), \
         ARRAY(SELECT CASE WHEN k = 'thread' AND j ->> 'ttl' IS NOT NULL THEN 1 END FROM u ORDER BY n), \
         queue_ops, queue_runs, queue_threads, queue_due, NULL, 0) $$",
];

/// A turn's write of its records and queue rows (see `weft_server_records_write` in [`SCHEMA`]).
const WRITE: &str =
    "SELECT weft_server_records_write($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)";

/// The version of [`SCHEMA`] (and the indexes and upgrade of [`source`]); bumped with every change to
/// them. A start that finds it (or a newer one) recorded runs no DDL: even `IF NOT EXISTS` forms take
/// locks on the tables the running instances use, and a lock queued behind a turn makes every later
/// statement on the table wait behind it.
const SCHEMA_VERSION: i32 = 6;

/// The oldest build, by its [`SCHEMA_VERSION`], that works on a database at this version: recorded with
/// the version, so that a build older than this one (a rolling upgrade's old instances, a rollback) starts
/// when it can work with the schema and refuses to when it cannot. Versions 3 and 4 added functions and
/// replaced others with the same signatures and results, so builds of version 2 work with them; version 5
/// only gave `weft_server_records_lock` a generic plan; version 6 filled runs' `created_at` and indexed
/// runs by thread and time, the write function filling the column for the builds that do not.
const SCHEMA_READABLE_FROM: i32 = 2;

/// The records' table and this instance's place in it.
#[derive(Debug)]
pub(crate) struct PgRecords {
    db: Db,
    /// The horizon of the last look: every transaction before it had ended (see the module's doc).
    horizon: u64,
    /// The turn of the guard that holds the records now (none outside a turn; see [`TurnState`]).
    state: TurnState,
}

/// One guard's turn: its transaction, which holds the key's lock from the turn's start until its write
/// commits or its caller lets go, and what its next write stores with the records. It lives in
/// [`PgRecords`] while its guard holds the records, and goes with the guard while the guard lets go of
/// them for a round trip that changes nothing in memory ([`PgRecords::take_turn`]): the turns of other
/// keys go on meanwhile.
#[derive(Debug, Default)]
pub(crate) struct TurnState {
    tx: Option<OpenTurn>,
    /// The key of the guard (none: every key), for a second write under it to take a turn of the same
    /// key; unset before the guard's first turn.
    key: Option<Option<String>>,
    /// The run that the next write stores as claimed (see [`PgRecords::own_on_write`]).
    owned: Option<Owned>,
    /// Checkpoints that the next write of this turn stores with the records (see
    /// [`PgRecords::save_on_write`]).
    saves: Option<Saves>,
    /// The lease checked at the turn's start (see [`Lease`]), and whether it was held.
    lease: Option<(Lease, bool)>,
    /// The thread whose head the next write reads (see [`PgRecords::head_on_write`]), through the saver
    /// that stores its checkpoints.
    head: Option<String>,
    /// The head the last write read, until taken.
    head_read: Option<Option<CheckpointTuple>>,
}

/// A run's lease that a turn checks as it starts, in its first round trip: the run and its worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lease {
    pub(crate) run_id: String,
    pub(crate) worker: String,
}

/// A turn's transaction on a pooled connection, begun in the simple query that starts the turn:
/// committed by [`OpenTurn::commit`], rolled back when dropped open (in a task of its own; a connection
/// that cannot roll back is closed, which ends the transaction too).
#[derive(Debug)]
pub(crate) struct OpenTurn {
    /// `None` only once committed or dropped.
    conn: Option<PoolConnection<Postgres>>,
}

impl OpenTurn {
    /// The connection, to run the turn's statements on (an error once committed).
    pub(crate) fn conn(&mut self) -> Result<&mut PgConnection, sqlx::Error> {
        self.conn.as_deref_mut().ok_or_else(|| sqlx::Error::Protocol("the turn has ended".into()))
    }

    /// Commits the transaction: the turn's locks go with it.
    pub(crate) async fn commit(mut self) -> Result<(), sqlx::Error> {
        let Some(mut conn) = self.conn.take() else { return Ok(()) };
        let committed = sqlx::raw_sql("COMMIT").execute(&mut *conn).await;
        if committed.is_err() {
            // Whatever state it is in, it does not go back to the pool.
            conn.close_on_drop();
        }
        committed.map(drop)
    }
}

impl Drop for OpenTurn {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else { return };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await.is_err() {
                        conn.close_on_drop();
                    }
                });
            }
            Err(_) => conn.close_on_drop(),
        }
    }
}

/// A run's last saves and the saver that stores them in a turn's transaction.
#[derive(Debug)]
struct Saves {
    saver: Arc<PostgresSaver>,
    ops: Vec<SaveOp>,
}

/// A run stored as claimed by the instance that makes it: its id, the worker, the lease in milliseconds.
#[derive(Debug)]
struct Owned {
    run_id: String,
    worker: String,
    lease_ms: f64,
}

/// A row read at a turn's start: kind, id, body (none: deleted).
pub(crate) type Row = (String, String, Option<String>);

/// A row as read: kind, id, body (none for the row that says there were none), the horizon.
type HorizonRow = (Option<String>, Option<String>, Option<String>, String);

/// The rows and the horizon of one look.
fn split(rows: Vec<HorizonRow>, horizon: u64) -> Result<(Vec<Row>, u64), ServerError> {
    let mut seen = horizon;
    let mut out = Vec::with_capacity(rows.len());
    for (kind, id, body, at) in rows {
        let at: u64 = at.parse().map_err(|_| {
            ServerError::from(CheckpointError::backend(format!("an unreadable horizon: {at}")))
        })?;
        seen = seen.max(at);
        if let (Some(kind), Some(id)) = (kind, id) {
            out.push((kind, id, body));
        }
    }
    Ok((out, seen))
}

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

    /// The queue kept in step with one change to the records: a pending or running run has a row (the
    /// `owned` run's claimed already), an ended or deleted one has none, a deleted thread's runs have none.
    fn keep(&mut self, change: &Change, owned: Option<&str>) {
        match change {
            Change::Run(record) if record.run.status.is_active() => self.push(
                if owned == Some(record.run.run_id.as_str()) { "own" } else { "add" },
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

/// `text` as an SQL string literal of a simple query: an escape string (`E'…'`, backslashes and quotes
/// doubled), which reads back as `text` whatever the server's `standard_conforming_strings` (with it off,
/// a plain `'…'` literal would take a backslash before a quote as an escape, and a key ending in a
/// backslash would end the literal later than meant).
pub(crate) fn literal(text: &str) -> String {
    format!("E'{}'", text.replace('\\', "\\\\").replace('\'', "''"))
}

/// A turn's start, taken before the instance holds its records: its transaction, with the locks of
/// its key and the answer of the lease it checked (see [`begin`]).
#[derive(Debug)]
pub(crate) struct Begun {
    turn: OpenTurn,
    key: Option<String>,
    lease: Option<(Lease, bool)>,
}

/// Starts a turn of `key` (none: the records' lock alone, exclusively): a transaction that takes the
/// locks and, with `lease`, checks it ([`TurnState::holds`]), in one simple query. Taken before the
/// records are held in memory (a turn waiting for a lock there could wait for a transaction that waits
/// for them), and in a task of its own, so that a caller that goes away while waiting leaves no
/// transaction behind: the task drops it (rolled back) when no one takes it.
pub(crate) async fn begin(db: &Db, key: Option<String>, lease: Option<Lease>) -> Result<Begun, ServerError> {
    // A simple query (no prepared statement): the key and the lease's ids are written as literals.
    let name = key.as_deref().map_or_else(|| "NULL".to_owned(), literal);
    let mut sql = format!("BEGIN ISOLATION LEVEL READ COMMITTED; SELECT weft_server_records_lock({name})");
    if let Some(lease) = &lease {
        let (run, worker) = (literal(&lease.run_id), literal(&lease.worker));
        sql.push_str(&format!("; SELECT weft_server_lease_held({run}, {worker})"));
    }
    let pool = db.pool.clone();
    let checks = lease.is_some();
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let taken = async {
            let mut turn = OpenTurn { conn: Some(pool.acquire().await?) };
            let rows = sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).fetch_all(turn.conn()?).await?;
            // The lease's answer is the last row.
            let held = match rows.last() {
                Some(row) if checks => Some(row.try_get::<bool, _>(0)?),
                _ => None,
            };
            Ok::<_, sqlx::Error>((turn, held))
        }
        .await;
        drop(tx.send(taken));
    });
    let (turn, held) = rx
        .await
        .map_err(|_| ServerError::from(CheckpointError::backend("the records' turn was not taken")))?
        .map_err(storage)?;
    Ok(Begun { turn, key, lease: lease.zip(held) })
}

impl PgRecords {
    pub(crate) fn new(db: Db) -> Self {
        Self { db, horizon: 0, state: TurnState::default() }
    }

    /// The pool and how statements reach it.
    pub(crate) fn db(&self) -> &Db {
        &self.db
    }

    /// The horizon now: what a start reads from (the rows of every transaction not ended yet are read
    /// again at the first look).
    pub(crate) async fn current_horizon(&self) -> Result<u64, ServerError> {
        let at: String = self
            .db
            .fetch_one(sqlx::query_scalar("SELECT pg_snapshot_xmin(pg_current_snapshot())::text"))
            .await
            .map_err(storage)?;
        at.parse()
            .map_err(|_| ServerError::from(CheckpointError::backend(format!("an unreadable horizon: {at}"))))
    }

    /// Whether a turn is open (its locks held, nothing committed yet).
    pub(crate) fn in_turn(&self) -> bool {
        self.state.tx.is_some()
    }

    /// See [`TurnState::checked`].
    pub(crate) fn checked(&self, lease: &Lease) -> Option<bool> {
        self.state.checked(lease)
    }

    /// Takes the holding guard's turn out, for the guard to keep while it lets go of the records (see
    /// [`TurnState`]); with the pool its round trips go through.
    pub(crate) fn take_turn(&mut self) -> (Db, TurnState) {
        (self.db.clone(), std::mem::take(&mut self.state))
    }

    /// Puts back the turn of the guard that holds the records again.
    pub(crate) fn restore_turn(&mut self, state: TurnState) {
        self.state = state;
    }

    /// Takes the turn [`begin`] started (its locks held) and reads, in its transaction, the rows written
    /// since the last look; returns them and the horizon (to pass to [`PgRecords::seen`] once applied).
    pub(crate) async fn enter(&mut self, begun: Begun) -> Result<(Vec<Row>, u64), ServerError> {
        let Begun { mut turn, key, lease } = begun;
        let rows: Vec<HorizonRow> =
            sqlx::query_as("SELECT kind, id, body, horizon FROM weft_server_records_since($1)")
                .bind(self.horizon.to_string())
                .persistent(self.db.prepared)
                .fetch_all(turn.conn().map_err(storage)?)
                .await
                .map_err(storage)?;
        self.state = TurnState { tx: Some(turn), key: Some(key), lease, ..TurnState::default() };
        split(rows, self.horizon)
    }

    /// The key of the guard's last turn when it has none open (scaled out, a second write under one
    /// guard takes a new turn of its key); `None` while a turn is open or before the first.
    pub(crate) fn ended_turn(&self) -> Option<Option<String>> {
        if self.in_turn() { None } else { self.state.key.clone() }
    }

    /// Brings a reader up to date without a lock: the rows written since the last look, on any pooled
    /// connection, in one statement; returns them and the horizon, as [`PgRecords::enter`] does.
    pub(crate) async fn catch_up(&mut self) -> Result<(Vec<Row>, u64), ServerError> {
        let rows: Vec<HorizonRow> = self
            .db
            .fetch_all(
                sqlx::query_as("SELECT kind, id, body, horizon FROM weft_server_records_since($1)")
                    .bind(self.horizon.to_string()),
            )
            .await
            .map_err(storage)?;
        split(rows, self.horizon)
    }

    /// The rows read at `horizon` are applied.
    pub(crate) fn seen(&mut self, horizon: u64) {
        self.horizon = self.horizon.max(horizon);
    }

    /// Ends the turn: a transaction still open (nothing written) is rolled back, which lets go of the
    /// lock.
    pub(crate) fn leave(&mut self) {
        self.state = TurnState::default();
    }

    /// The next write of this turn stores `ops` (a run's last saves, see
    /// [`weft_graph::EndState::with_last_saves`]) through `saver` in its transaction, before the records:
    /// the records are written only if the saves are stored, and the saves are stored only when the
    /// records commit. A turn left without a write stores neither.
    pub(crate) fn save_on_write(&mut self, saver: &Arc<PostgresSaver>, ops: Vec<SaveOp>) {
        self.state.saves = (!ops.is_empty()).then(|| Saves { saver: Arc::clone(saver), ops });
    }

    /// The next write also reads the latest checkpoint of thread `thread_id`'s root namespace (in its
    /// statement: no round trip of its own), for [`PgRecords::take_head`] once the turn commits.
    pub(crate) fn head_on_write(&mut self, thread_id: &str) {
        self.state.head = Some(thread_id.to_owned());
    }

    /// The head the last write read ([`PgRecords::head_on_write`]), taken: `None` when none was read,
    /// `Some(None)` for a thread without a checkpoint.
    pub(crate) fn take_head(&mut self) -> Option<Option<CheckpointTuple>> {
        self.state.head_read.take()
    }

    /// The next write stores the run `run_id`, running, as claimed by `worker` for `lease` (in its
    /// transaction: no claim and no turn of its own to start it).
    pub(crate) fn own_on_write(&mut self, run_id: &str, worker: &str, lease: std::time::Duration) {
        self.state.owned = Some(Owned {
            run_id: run_id.to_owned(),
            worker: worker.to_owned(),
            lease_ms: lease.as_secs_f64() * 1000.0,
        });
    }
}

/// A turn's statement without an open turn.
pub(super) fn not_held() -> ServerError {
    ServerError::from(CheckpointError::backend("the records' lock is not held"))
}

impl TurnState {
    /// The open turn's connection.
    fn conn(&mut self) -> Result<&mut PgConnection, ServerError> {
        self.tx.as_mut().ok_or_else(not_held)?.conn().map_err(storage)
    }

    /// The answer of the lease checked as the turn started, when it was this one.
    pub(crate) fn checked(&self, lease: &Lease) -> Option<bool> {
        self.lease.as_ref().filter(|(checked, _)| checked == lease).map(|(_, held)| *held)
    }

    /// Whether `worker` holds the run's lease, checked in the turn's transaction (no transaction of its
    /// own), whose queue row it locks until the turn ends: no other worker claims the run meanwhile.
    pub(crate) async fn holds(&mut self, db: &Db, worker: &str, run_id: &str) -> Result<bool, ServerError> {
        let held: bool = sqlx::query_scalar("SELECT weft_server_lease_held($1, $2)")
            .bind(run_id)
            .bind(worker)
            .persistent(db.prepared)
            .fetch_one(self.conn()?)
            .await
            .map_err(storage)?;
        Ok(held)
    }

    /// Writes `ops` (kind, id, body; none deletes) and keeps the run queue in step with `changes`, in one
    /// statement in the turn's transaction, after the run's last saves if any: returns the transaction,
    /// for the caller to commit. The turn is over either way (on a failure its transaction is rolled
    /// back, or gone with its connection).
    pub(crate) async fn write(
        &mut self,
        db: &Db,
        ops: &[Op],
        changes: &[Change],
    ) -> Result<OpenTurn, ServerError> {
        let owned = self.owned.take();
        let mut queue = QueueOps::default();
        for change in changes {
            queue.keep(change, owned.as_ref().map(|o| o.run_id.as_str()));
        }
        let saves = self.saves.take();
        let mut turn = self.tx.take().ok_or_else(not_held)?;
        if let Some(Saves { saver, ops }) = saves {
            // First: a failure rolls the turn back (dropped), and no record says what was not stored.
            saver.put_batch_in(turn.conn().map_err(storage)?, ops).await?;
        }
        let text = |n: usize| ops.iter().map(|op| op.3.texts()[n]).collect::<Vec<_>>();
        let head = self.head.take();
        let sql = match &head {
            None => WRITE.to_owned(),
            // The head read beside the write (one round trip): the write once (a materialized CTE), the
            // read in the same statement's snapshot, after the turn's locks.
            Some(_) => format!(
                "WITH w AS MATERIALIZED ({WRITE}) SELECT w.*, h.* FROM w LEFT JOIN LATERAL {} h ON true",
                PostgresSaver::head_source(15)
            ),
        };
        let query = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(ops.iter().map(|op| op.0.name()).collect::<Vec<_>>())
            .bind(ops.iter().map(|op| op.1.as_str()).collect::<Vec<_>>())
            .bind(ops.iter().map(|op| op.2.as_deref()).collect::<Vec<_>>())
            .bind(text(0))
            .bind(text(1))
            .bind(text(2))
            .bind(text(3))
            .bind(ops.iter().map(|op| op.3.sweepable.and_then(|n| i32::try_from(n).ok())).collect::<Vec<_>>())
            .bind(queue.ops)
            .bind(queue.runs)
            .bind(queue.threads)
            .bind(queue.due)
            .bind(owned.as_ref().map(|o| o.worker.as_str()))
            .bind(owned.as_ref().map_or(0.0, |o| o.lease_ms));
        let query = match head.as_deref() {
            Some(thread_id) => query.bind(thread_id),
            None => query,
        };
        let row =
            query.persistent(db.prepared).fetch_one(turn.conn().map_err(storage)?).await.map_err(storage)?;
        if head.is_some() {
            self.head_read = Some(PostgresSaver::head_of_row(&row, 1)?);
        }
        Ok(turn)
    }
}

impl PgRecords {
    /// The rows of `sql` (id, key, body) with `binds` (text), through the turn's transaction.
    pub(crate) async fn rows_in_turn(
        &mut self,
        sql: &str,
        binds: &[&str],
    ) -> Result<Vec<source::Row>, ServerError> {
        let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql.to_owned()));
        for bind in binds {
            query = query.bind(bind.to_string());
        }
        query.persistent(self.db.prepared).fetch_all(self.state.conn()?).await.map_err(storage)
    }

    /// See [`crate::storage::RecordsLock::mark_swept`]: one statement, outside any turn (the column is
    /// not in the body other instances read in).
    pub(crate) async fn mark_swept(&self, thread_id: &str, updated_at: &str) -> Result<(), ServerError> {
        let query = sqlx::query(
            "UPDATE weft_server_records SET sweepable = NULL \
             WHERE kind = 'thread' AND id = $1 AND updated_at = $2 AND body IS NOT NULL",
        )
        .bind(thread_id)
        .bind(updated_at);
        self.db.execute(query).await.map_err(storage)?;
        Ok(())
    }
}

pub(super) fn storage(e: sqlx::Error) -> ServerError {
    ServerError::from(weft_integrations::sql_checkpoint_error("postgres".to_owned(), e))
}

#[cfg(test)]
mod tests;
