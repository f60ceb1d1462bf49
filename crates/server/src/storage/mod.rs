//! Where the server keeps assistants, threads, runs and crons: one table of JSON rows, so that they
//! survive a restart, and what memory keeps of it. Beside each body, the few fields reads select and sort
//! on (a run's thread and status, a thread's status, times and TTL) are columns of their own, written from
//! the typed record ([`Columns`]): writing a record parses no JSON. Embedded, the table is in SQLite (on the checkpointer's
//! database) and this process is its only writer. Scaled out (feature `scale`), it is in PostgreSQL, the
//! source of truth shared by every instance: see [`postgres`]. In the in-memory mode (as `langgraph dev`
//! runs), nothing is written through: memory is all there is.
//!
//! Memory holds what is small and always needed (assistants, their versions, crons, and every pending or
//! running run) and a bounded [`Cache`] of the threads and finished runs used lately; the rest is read
//! from the table when asked for ([`Source`]), by id or on an indexed path. So the memory a server needs
//! at start and at rest does not grow with the number of threads or runs it keeps.
//!
//! Every change is a [`Change`] list committed in one transaction before memory is touched: a failed write
//! changes nothing, and the table is never behind memory. Records are changed only through
//! [`RecordsLock::lock`], and read through it or [`RecordsLock::read`].

mod cache;
mod lock;
#[cfg(feature = "scale")]
pub(crate) mod postgres;
mod source;
mod writer;

pub(crate) use lock::{Key, RecordsGuard, RecordsLock, RecordsView, ThreadFilter};
pub(crate) use source::{Columns, Source, ThreadOrder, ThreadScan};
pub(crate) use writer::WriterLock;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use weft_integrations::sqlite::{SqlParam, SqlStatement, SqliteSaver};

use weft_graph::checkpoint::CheckpointError;

use self::cache::Cache;
use crate::error::ServerError;
use crate::model::{Assistant, AssistantVersion, Cron, RunRecord, RunStatus, Thread};

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS weft_server_records (\
    kind TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, parent TEXT, status TEXT, created_at TEXT, \
    updated_at TEXT, sweepable INTEGER, PRIMARY KEY (kind, id))";

/// How many threads, and how many finished runs, memory keeps past their use by default.
pub(crate) const DEFAULT_CACHE: usize = 1_000;

/// The kinds of record, as the table names them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    Assistant,
    Version,
    Thread,
    Run,
    Cron,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Assistant => "assistant",
            Kind::Version => "assistant_version",
            Kind::Thread => "thread",
            Kind::Run => "run",
            Kind::Cron => "cron",
        }
    }
}

/// One change to the records.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    Assistant(Assistant),
    Version(AssistantVersion),
    Thread(Thread),
    Run(Box<RunRecord>),
    Cron(Box<Cron>),
    DeleteAssistant(String),
    DeleteVersion(String, i64),
    DeleteThread(String),
    DeleteRun(String),
    DeleteCron(String),
}

/// Where the records are written through to.
#[derive(Debug)]
enum Backend {
    /// The embedded SQLite file: this process is the only writer. Written through the checkpoint saver's
    /// queue, in the transactions of the checkpoints saved at the same time.
    Sqlite(Arc<SqliteSaver>),
    /// PostgreSQL, shared by every instance.
    #[cfg(feature = "scale")]
    Postgres(Box<postgres::PgRecords>),
    /// Nowhere: the records live and die with the process.
    Memory,
}

/// The records memory keeps, and the table they are written through to.
#[derive(Debug)]
pub(crate) struct Records {
    backend: Backend,
    pub(crate) assistants: BTreeMap<String, Assistant>,
    pub(crate) versions: BTreeMap<(String, i64), AssistantVersion>,
    pub(crate) crons: BTreeMap<String, Cron>,
    /// Threads used lately (every thread, in the in-memory mode).
    threads: Cache<Thread>,
    /// Every pending or running run, by id. Changed through [`Records::commit`] only, which keeps
    /// `active` in step.
    live: HashMap<String, RunRecord>,
    /// Finished runs used lately (every one, in the in-memory mode).
    ended: Cache<RunRecord>,
    /// The ids of each thread's pending and running runs.
    active: HashMap<String, BTreeSet<String>>,
    /// In the in-memory mode, the threads the TTL sweeper kept with their latest checkpoint and that have
    /// not changed since (the table's `sweepable` column elsewhere).
    swept: HashSet<String>,
}

fn version_key(assistant_id: &str, version: i64) -> String {
    format!("{assistant_id}:{version}")
}

fn decode<T: DeserializeOwned>(kind: &str, id: &str, body: &str) -> Result<T, ServerError> {
    serde_json::from_str(body).map_err(|e| source::unreadable(kind, id, e))
}

fn encode<T: Serialize>(value: &T) -> Result<String, ServerError> {
    serde_json::to_string(value)
        .map_err(|e| ServerError::from(CheckpointError::backend_from("cannot encode a record", e)))
}

impl Records {
    /// Creates the table and its indexes if missing and reads what memory keeps from the start; up to
    /// `cache` threads and as many finished runs are kept past their use.
    pub(crate) async fn open(saver: Arc<SqliteSaver>, cache: usize) -> Result<Self, ServerError> {
        let mut tx = saver.pool().begin().await.map_err(storage)?;
        sqlx::query(SCHEMA).execute(&mut *tx).await.map_err(storage)?;
        let columns: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pragma_table_info('weft_server_records') WHERE name = 'parent'",
        )
        .fetch_one(&mut *tx)
        .await
        .map_err(storage)?;
        let by_time: i64 =
            sqlx::query_scalar("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?")
                .bind(source::RUNS_BY_TIME)
                .fetch_one(&mut *tx)
                .await
                .map_err(storage)?;
        // A table of an earlier release, upgraded in this transaction (one process serves the file).
        let mut upgrade = Vec::new();
        if columns == 0 {
            upgrade.extend(source::add_columns());
            upgrade.push(source::fill_columns(source::sqlite_json));
        }
        if columns == 0 || by_time == 0 {
            upgrade.push(source::fill_run_times(source::sqlite_json, ""));
            upgrade.extend(source::old_indexes().map(|name| format!("DROP INDEX IF EXISTS {name}")));
        }
        let indexes = source::indexes("", "", false).into_iter().map(|(_, create)| create);
        for statement in upgrade.into_iter().chain(indexes) {
            sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).execute(&mut *tx).await.map_err(storage)?;
        }
        tx.commit().await.map_err(storage)?;
        let mut records = Records::empty(Backend::Sqlite(saver), cache);
        records.load_resident().await?;
        Ok(records)
    }

    /// Records kept in memory only, written nowhere.
    pub(crate) fn memory() -> Self {
        Records::empty(Backend::Memory, usize::MAX)
    }

    fn empty(backend: Backend, cache: usize) -> Self {
        Records {
            backend,
            assistants: BTreeMap::new(),
            versions: BTreeMap::new(),
            crons: BTreeMap::new(),
            threads: Cache::new(cache),
            live: HashMap::new(),
            ended: Cache::new(cache),
            active: HashMap::new(),
            swept: HashSet::new(),
        }
    }

    /// Where records memory lacks are read from (none in the in-memory mode).
    pub(crate) fn source(&self) -> Option<Source> {
        match &self.backend {
            Backend::Sqlite(saver) => Some(Source::Sqlite(saver.reader().clone())),
            #[cfg(feature = "scale")]
            Backend::Postgres(pg) => Some(Source::Postgres(pg.db().clone())),
            Backend::Memory => None,
        }
    }

    /// Reads the assistants, versions, crons and live runs.
    async fn load_resident(&mut self) -> Result<(), ServerError> {
        let Some(source) = self.source() else { return Ok(()) };
        for (kind, id, body) in source.resident().await? {
            match kind.as_str() {
                "assistant" => {
                    let a: Assistant = decode(&kind, &id, &body)?;
                    self.assistants.insert(a.assistant_id.clone(), a);
                }
                "assistant_version" => {
                    let v: AssistantVersion = decode(&kind, &id, &body)?;
                    self.versions.insert((v.assistant_id.clone(), v.version), v);
                }
                "cron" => {
                    let c: Cron = decode(&kind, &id, &body)?;
                    self.crons.insert(c.cron_id.clone(), c);
                }
                _ => {
                    let r: RunRecord = decode(&kind, &id, &body)?;
                    self.put_run(r);
                }
            }
        }
        Ok(())
    }

    /// The rows of `sql` (made by `source`'s builder) with `binds`: scaled out during a turn, through the
    /// turn's own transaction (a read on another connection while the turn holds its locks could wait
    /// behind a lock queued after them, such as a starting instance's schema check, for ever), else
    /// through [`Source`].
    async fn read_rows(
        &mut self,
        sql: impl Fn(&Source) -> String,
        binds: &[&str],
    ) -> Result<Vec<source::Row>, ServerError> {
        let Some(source) = self.source() else { return Ok(Vec::new()) };
        #[cfg(feature = "scale")]
        if let Backend::Postgres(pg) = &mut self.backend
            && pg.in_turn()
        {
            return pg.rows_in_turn(&sql(&source), binds).await;
        }
        source.rows(&sql(&source), binds).await
    }

    /// One record's body, if it exists (see [`Records::read_rows`]).
    async fn body(&mut self, kind: &str, id: &str) -> Result<Option<String>, ServerError> {
        Ok(self.read_rows(Source::body_sql, &[kind, id]).await?.pop().map(|row| row.2))
    }

    /// The thread, read from the table when memory lacks it.
    pub(crate) async fn thread(&mut self, id: &str) -> Result<Option<&Thread>, ServerError> {
        if !self.threads.contains(id)
            && let Some(body) = self.body("thread", id).await?
        {
            let thread: Thread = decode("thread", id, &body)?;
            self.threads.insert(id.to_owned(), thread);
        }
        Ok(self.threads.get(id))
    }

    /// The thread, if memory holds it (after [`Records::thread`] read it in).
    pub(crate) fn held_thread(&self, id: &str) -> Option<&Thread> {
        self.threads.peek(id)
    }

    /// The run, read from the table when memory lacks it.
    pub(crate) async fn run(&mut self, id: &str) -> Result<Option<&RunRecord>, ServerError> {
        if !self.live.contains_key(id)
            && !self.ended.contains(id)
            && let Some(body) = self.body("run", id).await?
        {
            let record: RunRecord = decode("run", id, &body)?;
            self.put_run(record);
        }
        match self.live.get(id) {
            Some(record) => Ok(Some(record)),
            None => Ok(self.ended.get(id)),
        }
    }

    /// A page of a thread's runs, newest first (ties by id, descending): `limit` of them after
    /// `offset`, of `status` when given. Read from the table a page at a time (see
    /// [`Source::thread_runs_page_sql`]), so it costs the page, not the thread's runs.
    pub(crate) async fn thread_runs_page(
        &mut self,
        thread_id: &str,
        status: Option<RunStatus>,
        (limit, offset): (usize, usize),
    ) -> Result<Vec<RunRecord>, ServerError> {
        if matches!(self.backend, Backend::Memory) {
            let mut runs: Vec<&RunRecord> = (self.live.values().chain(self.ended.values()))
                .filter(|r| r.run.thread_id == thread_id && status.is_none_or(|s| r.run.status == s))
                .collect();
            runs.sort_by(|a, b| (&b.run.created_at, &b.run.run_id).cmp(&(&a.run.created_at, &a.run.run_id)));
            return Ok(runs.into_iter().skip(offset).take(limit).cloned().collect());
        }
        let status = status.and_then(|s| source::wire_name(&s));
        let (limit, offset) = (limit.to_string(), offset.to_string());
        let mut binds = vec![thread_id];
        binds.extend(status.as_deref());
        binds.extend([limit.as_str(), offset.as_str()]);
        let with_status = status.is_some();
        let rows = self.read_rows(|source| source.thread_runs_page_sql(with_status), &binds).await?;
        rows.into_iter().map(|(id, _, body)| decode::<RunRecord>("run", &id, &body)).collect()
    }

    /// Every run of a thread as a [`RunHead`], oldest first (ties by id), no body read: what deleting a
    /// thread and replaying its runs' events need, a few dozen bytes a run however large its input.
    pub(crate) async fn thread_run_heads(&mut self, thread_id: &str) -> Result<Vec<RunHead>, ServerError> {
        if matches!(self.backend, Backend::Memory) {
            let mut runs: Vec<&RunRecord> = (self.live.values().chain(self.ended.values()))
                .filter(|r| r.run.thread_id == thread_id)
                .collect();
            runs.sort_by(|a, b| (&a.run.created_at, &a.run.run_id).cmp(&(&b.run.created_at, &b.run.run_id)));
            return Ok(runs.into_iter().map(|r| RunHead::of(&r.run)).collect());
        }
        // What memory holds of a live run is what the table holds (written first); scaled out, the table
        // may be newer, so it is what is read.
        let rows = self.read_rows(Source::thread_run_heads_sql, &[thread_id]).await?;
        rows.into_iter()
            .map(|(run_id, status, resumable)| {
                let status = status.as_deref().and_then(RunStatus::parse).ok_or_else(|| {
                    ServerError::from(CheckpointError::backend(format!(
                        "run record '{run_id}' has no status its build knows: {status:?}"
                    )))
                })?;
                Ok(RunHead { run_id, status, resumable: resumable == "1" })
            })
            .collect()
    }

    /// Every run memory holds: the live ones and the finished ones used lately.
    #[cfg(test)]
    pub(crate) fn held_runs(&self) -> impl Iterator<Item = &RunRecord> {
        self.live.values().chain(self.ended.values())
    }

    /// Whether the run is pending or running (as memory knows: every live run is there).
    pub(crate) fn is_live(&self, run_id: &str) -> bool {
        self.live.contains_key(run_id)
    }

    /// Every pending or running run.
    pub(crate) fn live_runs(&self) -> impl Iterator<Item = &RunRecord> {
        self.live.values()
    }

    /// Every thread memory holds, in no order: all of them in the in-memory mode.
    pub(crate) fn cached_threads(&self) -> impl Iterator<Item = &Thread> {
        self.threads.values()
    }

    /// Applies one row another instance wrote (scaled out): memory keeps what it kept, up to date, and
    /// every live run; `body` none is a deletion.
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    fn apply_row(&mut self, kind: &str, id: &str, body: Option<&str>) -> Result<(), ServerError> {
        match (kind, body) {
            ("assistant", Some(body)) => {
                let a: Assistant = decode(kind, id, body)?;
                self.assistants.insert(a.assistant_id.clone(), a);
            }
            ("assistant", None) => {
                self.assistants.remove(id);
            }
            ("assistant_version", Some(body)) => {
                let v: AssistantVersion = decode(kind, id, body)?;
                self.versions.insert((v.assistant_id.clone(), v.version), v);
            }
            ("assistant_version", None) => {
                let parsed = id.rsplit_once(':').and_then(|(a, v)| Some((a.to_owned(), v.parse().ok()?)));
                if let Some(key) = parsed {
                    self.versions.remove(&key);
                }
            }
            ("thread", Some(body)) => {
                if self.threads.contains(id) {
                    self.threads.update(id, decode(kind, id, body)?);
                }
            }
            ("thread", None) => {
                self.threads.remove(id);
            }
            ("run", Some(body)) => {
                let r: RunRecord = decode(kind, id, body)?;
                if r.run.status.is_active() || self.live.contains_key(id) || self.ended.contains(id) {
                    self.put_run(r);
                }
            }
            ("run", None) => self.forget_run(id),
            ("cron", Some(body)) => {
                let c: Cron = decode(kind, id, body)?;
                self.crons.insert(c.cron_id.clone(), c);
            }
            ("cron", None) => {
                self.crons.remove(id);
            }
            (other, _) => {
                return Err(CheckpointError::backend(format!("unknown record kind '{other}'")).into());
            }
        }
        Ok(())
    }
    /// Takes the records' turn of `key` (none: every key): scaled out, PostgreSQL's locks, then the rows
    /// written since the last look.
    async fn enter(&mut self, begun: Begun) -> Result<(), ServerError> {
        #[cfg(feature = "scale")]
        if let (Backend::Postgres(pg), Some(begun)) = (&mut self.backend, begun) {
            let (rows, horizon) = pg.enter(begun).await?;
            for (kind, id, body) in &rows {
                if let Err(e) = self.apply_row(kind, id, body.as_deref()) {
                    self.leave();
                    return Err(e);
                }
            }
            if let Backend::Postgres(pg) = &mut self.backend {
                pg.seen(horizon);
            }
        }
        #[cfg(not(feature = "scale"))]
        let _ = begun;
        Ok(())
    }

    /// Brings the records up to date for a reader, without the records' lock (see
    /// [`postgres::PgRecords::catch_up`]). Embedded, nothing to do: this process is the only writer.
    async fn refresh(&mut self) -> Result<(), ServerError> {
        #[cfg(feature = "scale")]
        if let Backend::Postgres(pg) = &mut self.backend {
            let (rows, horizon) = pg.catch_up().await?;
            for (kind, id, body) in &rows {
                self.apply_row(kind, id, body.as_deref())?;
            }
            if let Backend::Postgres(pg) = &mut self.backend {
                pg.seen(horizon);
            }
        }
        Ok(())
    }

    /// Ends the records' turn. Scaled out, a turn that wrote nothing is rolled back, which lets go of
    /// PostgreSQL's lock.
    fn leave(&mut self) {
        #[cfg(feature = "scale")]
        if let Backend::Postgres(pg) = &mut self.backend {
            pg.leave();
        }
    }

    /// Opens the records on PostgreSQL: the tables made (once, whatever the number of instances starting
    /// together), then what memory keeps from the start read; up to `cache` threads and as many finished
    /// runs are kept past their use.
    #[cfg(feature = "scale")]
    pub(crate) async fn open_postgres(db: crate::scale::Db, cache: usize) -> Result<Self, ServerError> {
        postgres::migrate(&db).await?;
        let mut pg = postgres::PgRecords::new(db);
        // Rows of transactions not ended yet are read in again by the first look: applying a row twice is
        // harmless.
        let horizon = pg.current_horizon().await?;
        pg.seen(horizon);
        let mut records = Records::empty(Backend::Postgres(Box::new(pg)), cache);
        records.load_resident().await?;
        Ok(records)
    }

    /// Whether the TTL sweeper has something to do with `thread` (in the in-memory mode; the table's
    /// `sweepable` column elsewhere).
    pub(crate) fn sweepable(&self, thread: &Thread) -> bool {
        thread.ttl.is_some() && !self.swept.contains(&thread.thread_id)
    }

    /// See [`RecordsLock::mark_swept`].
    async fn mark_swept(&mut self, thread_id: &str, updated_at: &str) -> Result<(), ServerError> {
        let (id, at) = (SqlParam::Text(thread_id.to_owned()), SqlParam::Text(updated_at.to_owned()));
        match &mut self.backend {
            Backend::Sqlite(saver) => {
                saver.write_with_checkpoints(vec![SqlStatement::new(SWEPT, vec![id, at])]).await?
            }
            #[cfg(feature = "scale")]
            Backend::Postgres(pg) => pg.mark_swept(thread_id, updated_at).await?,
            Backend::Memory => {
                if self.threads.peek(thread_id).is_some_and(|t| t.updated_at == updated_at) {
                    self.swept.insert(thread_id.to_owned());
                }
            }
        }
        Ok(())
    }

    /// Scaled out, the next commit stores the run `run_id` as claimed by `worker` for `lease` (see
    /// [`postgres::PgRecords::own_on_write`]); any other backend has no queue.
    #[cfg(feature = "scale")]
    pub(crate) fn own_on_write(&mut self, run_id: &str, worker: &str, lease: std::time::Duration) {
        if let Backend::Postgres(pg) = &mut self.backend {
            pg.own_on_write(run_id, worker, lease);
        }
    }

    /// Scaled out, the next commit also reads the latest checkpoint of thread `thread_id`'s root namespace
    /// in its write's statement (see [`postgres::PgRecords::head_on_write`]), for
    /// [`take_head`](Records::take_head); any other backend reads none.
    #[cfg(feature = "scale")]
    pub(crate) fn head_on_write(&mut self, thread_id: &str) {
        if let Backend::Postgres(pg) = &mut self.backend {
            pg.head_on_write(thread_id);
        }
    }

    /// The head the last commit read (see [`head_on_write`](Records::head_on_write)), taken, for a run
    /// made in its turn to start from; `None` when none was read.
    #[cfg(feature = "scale")]
    pub(crate) fn take_head(&mut self) -> Option<Option<weft_graph::checkpoint::CheckpointTuple>> {
        match &mut self.backend {
            Backend::Postgres(pg) => pg.take_head(),
            _ => None,
        }
    }

    /// Scaled out, the next commit of this turn stores `ops`, a run's last saves, through `saver` in its
    /// transaction before the records (see [`postgres::PgRecords::save_on_write`]); `ops` back, to store
    /// otherwise, on any other backend.
    #[cfg(feature = "scale")]
    pub(crate) fn save_on_write(
        &mut self,
        saver: &std::sync::Arc<weft_integrations::postgres::PostgresSaver>,
        ops: Vec<weft_graph::checkpoint::SaveOp>,
    ) -> Vec<weft_graph::checkpoint::SaveOp> {
        match &mut self.backend {
            Backend::Postgres(pg) => {
                pg.save_on_write(saver, ops);
                Vec::new()
            }
            _ => ops,
        }
    }

    /// Whether the records are PostgreSQL's, shared with other instances.
    #[cfg(feature = "scale")]
    pub(crate) fn is_shared(&self) -> bool {
        matches!(self.backend, Backend::Postgres(_))
    }

    /// Scaled out, takes the holding guard's turn out of the records, with the pool its round trips go
    /// through (see [`postgres::TurnState`]); `None` on any other backend.
    #[cfg(feature = "scale")]
    pub(crate) fn take_turn(&mut self) -> Option<(crate::scale::Db, postgres::TurnState)> {
        match &mut self.backend {
            Backend::Postgres(pg) => Some(pg.take_turn()),
            _ => None,
        }
    }

    /// Puts back a turn [`Records::take_turn`] took.
    #[cfg(feature = "scale")]
    pub(crate) fn restore_turn(&mut self, state: postgres::TurnState) {
        if let Backend::Postgres(pg) = &mut self.backend {
            pg.restore_turn(state);
        }
    }

    /// Scaled out, whether the holding guard's turn found `lease` held as it started (when it checked it).
    #[cfg(feature = "scale")]
    pub(crate) fn checked_lease(&self, lease: &Lease) -> Option<bool> {
        match &self.backend {
            Backend::Postgres(pg) => pg.checked(lease),
            _ => None,
        }
    }

    /// Scaled out, the key of the holding guard's last turn when it ended with a write (a second write
    /// under one guard takes a new turn of it); `None` while a turn is open, and on other backends.
    #[cfg(feature = "scale")]
    pub(crate) fn ended_turn(&self) -> Option<Option<String>> {
        match &self.backend {
            Backend::Postgres(pg) => pg.ended_turn(),
            _ => None,
        }
    }

    /// Writes `changes` in one transaction, then applies them in memory.
    pub(crate) async fn commit(&mut self, changes: Vec<Change>) -> Result<(), ServerError> {
        if changes.is_empty() {
            return Ok(());
        }
        if !matches!(self.backend, Backend::Memory) {
            self.write_through(&changes).await?;
        }
        self.apply(changes);
        Ok(())
    }

    /// Writes `changes` to the backend's table in one transaction.
    async fn write_through(&mut self, changes: &[Change]) -> Result<(), ServerError> {
        let ops = ops_of(changes)?;
        match &mut self.backend {
            Backend::Sqlite(saver) => saver.write_with_checkpoints(statements(&ops)).await?,
            // Scaled out, a write goes through its guard's turn (`RecordsGuard::commit`), which lets go of
            // the records around its round trips.
            #[cfg(feature = "scale")]
            Backend::Postgres(_) => return Err(postgres::not_held()),
            Backend::Memory => {}
        }
        Ok(())
    }

    /// Applies `changes` (written already) in memory.
    fn apply(&mut self, changes: Vec<Change>) {
        for change in changes {
            match change {
                Change::Assistant(a) => {
                    self.assistants.insert(a.assistant_id.clone(), a);
                }
                Change::Version(v) => {
                    self.versions.insert((v.assistant_id.clone(), v.version), v);
                }
                Change::Thread(t) => {
                    self.swept.remove(&t.thread_id);
                    self.threads.insert(t.thread_id.clone(), t);
                }
                Change::Run(r) => self.put_run(*r),
                Change::DeleteAssistant(id) => {
                    self.assistants.remove(&id);
                }
                Change::DeleteVersion(id, v) => {
                    self.versions.remove(&(id, v));
                }
                Change::DeleteThread(id) => {
                    self.swept.remove(&id);
                    self.threads.remove(&id);
                }
                Change::DeleteRun(id) => self.forget_run(&id),
                Change::Cron(c) => {
                    self.crons.insert(c.cron_id.clone(), *c);
                }
                Change::DeleteCron(id) => {
                    self.crons.remove(&id);
                }
            }
        }
    }

    /// Keeps `record`: among the live runs (and its thread's active ones) while it is pending or
    /// running, else among the finished runs used lately.
    fn put_run(&mut self, record: RunRecord) {
        let run_id = record.run.run_id.clone();
        self.forget_run(&run_id);
        if record.run.status.is_active() {
            self.active.entry(record.run.thread_id.clone()).or_default().insert(run_id.clone());
            self.live.insert(run_id, record);
        } else {
            self.ended.insert(run_id, record);
        }
    }

    /// Lets go of a run, live or finished.
    fn forget_run(&mut self, run_id: &str) {
        if let Some(old) = self.live.remove(run_id) {
            let thread_id = old.run.thread_id;
            if let Some(ids) = self.active.get_mut(&thread_id) {
                ids.remove(run_id);
                if ids.is_empty() {
                    self.active.remove(&thread_id);
                }
            }
        }
        self.ended.remove(run_id);
    }

    /// The runs of a thread that are pending or running.
    pub(crate) fn active_runs<'a>(&'a self, thread_id: &'a str) -> impl Iterator<Item = &'a RunRecord> + 'a {
        self.active.get(thread_id).into_iter().flatten().filter_map(|id| self.live.get(id))
    }
}

/// A run's lease a turn checks as it starts (scaled out; nothing elsewhere).
#[cfg(feature = "scale")]
pub(crate) use postgres::Lease;

/// A turn's start taken before the records are held (scaled out: see [`postgres::begin`]).
#[cfg(feature = "scale")]
type Begun = Option<postgres::Begun>;

/// A turn's start taken before the records are held: none without scaling out.
#[cfg(not(feature = "scale"))]
type Begun = Option<std::convert::Infallible>;

/// A run's lease a turn checks as it starts: none without scaling out.
#[cfg(not(feature = "scale"))]
#[derive(Debug, Clone)]
pub(crate) enum Lease {}

/// What a thread's listing of every run holds of each ([`Records::thread_run_heads`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunHead {
    pub(crate) run_id: String,
    pub(crate) status: RunStatus,
    pub(crate) resumable: bool,
}

impl RunHead {
    pub(crate) fn of(run: &crate::model::Run) -> Self {
        Self { run_id: run.run_id.clone(), status: run.status, resumable: run.kwargs.resumable }
    }
}

/// One record written: its kind, id, body (none: deleted) and columns.
pub(crate) type Op = (Kind, String, Option<String>, Columns);

/// The rows that write `changes`, in order.
fn ops_of(changes: &[Change]) -> Result<Vec<Op>, ServerError> {
    let mut ops: Vec<Op> = Vec::with_capacity(changes.len());
    for change in changes {
        let none = Columns::default;
        ops.push(match change {
            Change::Assistant(a) => (Kind::Assistant, a.assistant_id.clone(), Some(encode(a)?), none()),
            Change::Version(v) => {
                (Kind::Version, version_key(&v.assistant_id, v.version), Some(encode(v)?), none())
            }
            Change::Thread(t) => (Kind::Thread, t.thread_id.clone(), Some(encode(t)?), Columns::of_thread(t)),
            Change::Run(r) => (Kind::Run, r.run.run_id.clone(), Some(encode(r)?), Columns::of_run(r)),
            Change::DeleteAssistant(id) => (Kind::Assistant, id.clone(), None, none()),
            Change::DeleteVersion(id, v) => (Kind::Version, version_key(id, *v), None, none()),
            Change::DeleteThread(id) => (Kind::Thread, id.clone(), None, none()),
            Change::Cron(c) => (Kind::Cron, c.cron_id.clone(), Some(encode(c)?), none()),
            Change::DeleteRun(id) => (Kind::Run, id.clone(), None, none()),
            Change::DeleteCron(id) => (Kind::Cron, id.clone(), None, none()),
        });
    }
    Ok(ops)
}

const UPSERT: &str = "INSERT INTO weft_server_records \
    (kind, id, body, parent, status, created_at, updated_at, sweepable) VALUES (?, ?, ?, ?, ?, ?, ?, ?) \
    ON CONFLICT (kind, id) DO UPDATE SET body = excluded.body, parent = excluded.parent, \
    status = excluded.status, created_at = excluded.created_at, updated_at = excluded.updated_at, \
    sweepable = excluded.sweepable";
const DELETE: &str = "DELETE FROM weft_server_records WHERE kind = ? AND id = ?";
const SWEPT: &str =
    "UPDATE weft_server_records SET sweepable = NULL WHERE kind = 'thread' AND id = ? AND updated_at = ?";

/// The statements writing `ops` (an upsert with a body, else a delete), committed together.
fn statements(ops: &[Op]) -> Vec<SqlStatement> {
    let text = |value: Option<&str>| value.map_or(SqlParam::Null, |v| SqlParam::Text(v.to_owned()));
    ops.iter()
        .map(|(kind, id, body, columns)| {
            let (kind, id) = (SqlParam::Text(kind.name().to_owned()), SqlParam::Text(id.clone()));
            match body {
                Some(body) => {
                    let mut params = vec![kind, id, SqlParam::Text(body.clone())];
                    params.extend(columns.texts().map(text));
                    params.push(columns.sweepable.map_or(SqlParam::Null, SqlParam::Integer));
                    SqlStatement::new(UPSERT, params)
                }
                None => SqlStatement::new(DELETE, vec![kind, id]),
            }
        })
        .collect()
}

fn storage(e: sqlx::Error) -> ServerError {
    ServerError::from(weft_integrations::sql_checkpoint_error("sqlite".to_owned(), e))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(run_id: &str, thread_id: &str, status: &str) -> RunRecord {
        serde_json::from_value(json!({
            "run": {
                "run_id": run_id, "thread_id": thread_id, "assistant_id": "a", "metadata": {},
                "status": status, "multitask_strategy": "enqueue", "created_at": "t", "updated_at": "t",
                "langsmith_session_name": null,
                "kwargs": {
                    "input": null, "command": null, "config": {}, "context": {}, "stream_mode": ["values"],
                    "interrupt_before": null, "interrupt_after": null, "webhook": null, "feedback_keys": null,
                    "temporary": false, "subgraphs": false, "resumable": false, "checkpoint_during": true,
                    "durability": "async"
                }
            }
        }))
        .unwrap()
    }

    fn active(records: &Records, thread_id: &str) -> Vec<String> {
        let mut ids: Vec<String> = records.active_runs(thread_id).map(|r| r.run.run_id.clone()).collect();
        ids.sort();
        ids
    }

    /// One connection: every connection of `sqlite::memory:` is a database of its own.
    async fn pool() -> sqlx::SqlitePool {
        sqlx::sqlite::SqlitePoolOptions::new().max_connections(1).connect("sqlite::memory:").await.unwrap()
    }

    async fn saver(pool: &sqlx::SqlitePool) -> Arc<SqliteSaver> {
        Arc::new(SqliteSaver::from_pool(pool.clone()).await.unwrap())
    }

    async fn open() -> Records {
        Records::open(saver(&pool().await).await, DEFAULT_CACHE).await.unwrap()
    }

    #[tokio::test]
    async fn active_runs_follow_status_changes_and_deletes() {
        let mut records = open().await;
        let changes = vec![
            Change::Run(Box::new(run("r1", "t1", "pending"))),
            Change::Run(Box::new(run("r2", "t1", "running"))),
            Change::Run(Box::new(run("r3", "t2", "pending"))),
            Change::Run(Box::new(run("r4", "t1", "success"))),
        ];
        records.commit(changes).await.unwrap();
        assert_eq!(active(&records, "t1"), ["r1", "r2"]);
        assert_eq!(active(&records, "t2"), ["r3"]);
        assert!(active(&records, "t3").is_empty());

        records.commit(vec![Change::Run(Box::new(run("r2", "t1", "success")))]).await.unwrap();
        assert_eq!(active(&records, "t1"), ["r1"]);
        records.commit(vec![Change::DeleteRun("r1".into()), Change::DeleteRun("r3".into())]).await.unwrap();
        assert!(active(&records, "t1").is_empty());
        assert!(active(&records, "t2").is_empty());
        assert_eq!(records.held_runs().count(), 2, "r2 and r4 stay, finished");
        assert_eq!(records.run("r4").await.unwrap().unwrap().run.status, RunStatus::Success);
    }

    #[tokio::test]
    async fn a_failed_commit_changes_nothing_and_the_next_one_works() {
        let pool = pool().await;
        let mut records = Records::open(saver(&pool).await, DEFAULT_CACHE).await.unwrap();
        records.commit(vec![Change::Run(Box::new(run("r1", "t1", "pending")))]).await.unwrap();
        // A trigger makes the second statement of the next script fail, after the first has run.
        sqlx::query(
            "CREATE TRIGGER no_r3 BEFORE INSERT ON weft_server_records WHEN NEW.id = 'r3' \
             BEGIN SELECT RAISE(ABORT, 'r3 refused'); END",
        )
        .execute(&pool)
        .await
        .unwrap();
        let failed = records
            .commit(vec![
                Change::Run(Box::new(run("r2", "t1", "pending"))),
                Change::Run(Box::new(run("r3", "t1", "pending"))),
            ])
            .await
            .unwrap_err();
        assert!(failed.to_string().contains("r3 refused"), "{failed}");
        // The saver's error, kept whole: a refused statement is the backend's, not worth another try.
        let ServerError::Storage(storage) = &failed else { panic!("a storage error: {failed:?}") };
        assert_eq!(storage.checkpoint_kind(), Some(weft_graph::checkpoint::CheckpointErrorKind::Backend));
        assert!(!failed.is_retryable());
        assert_eq!(active(&records, "t1"), ["r1"], "memory untouched");
        let stored: Vec<String> = sqlx::query_scalar("SELECT id FROM weft_server_records ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
        assert_eq!(stored, ["r1"], "r2 rolled back with r3");
        records.commit(vec![Change::DeleteRun("r1".into())]).await.unwrap();
        assert!(active(&records, "t1").is_empty());
        let stored: i64 =
            sqlx::query_scalar("SELECT count(*) FROM weft_server_records").fetch_one(&pool).await.unwrap();
        assert_eq!(stored, 0);
    }

    /// A thread record as `Records` writes it.
    fn thread(thread_id: &str, created_at: &str, ttl: bool) -> Thread {
        serde_json::from_value(json!({
            "thread_id": thread_id, "created_at": created_at, "updated_at": created_at,
            "state_updated_at": created_at, "metadata": {}, "status": "busy", "config": {},
            "values": null, "error": null, "interrupts": {},
            "ttl": if ttl { json!({"strategy": "delete", "ttl": 5.0}) } else { json!(null) }
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn a_table_of_an_earlier_release_gets_its_columns_filled_from_the_bodies_once() {
        let pool = pool().await;
        // The table and one of the JSON-expression indexes an earlier release made, with its rows.
        for sql in [
            "CREATE TABLE weft_server_records (kind TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, \
             PRIMARY KEY (kind, id))",
            "CREATE INDEX weft_server_runs_by_thread ON weft_server_records \
             (json_extract(body, '$.run.thread_id')) WHERE kind = 'run'",
        ] {
            sqlx::query(sql).execute(&pool).await.unwrap();
        }
        let rows = [
            ("run", "r1", serde_json::to_string(&run("r1", "t1", "running")).unwrap()),
            ("run", "r2", serde_json::to_string(&run("r2", "t1", "success")).unwrap()),
            ("thread", "t1", serde_json::to_string(&thread("t1", "2026-01-02", true)).unwrap()),
            ("thread", "t2", serde_json::to_string(&thread("t2", "2026-01-01", false)).unwrap()),
        ];
        for (kind, id, body) in &rows {
            sqlx::query("INSERT INTO weft_server_records (kind, id, body) VALUES (?, ?, ?)")
                .bind(kind)
                .bind(id)
                .bind(body)
                .execute(&pool)
                .await
                .unwrap();
        }
        let mut records = Records::open(saver(&pool).await, DEFAULT_CACHE).await.unwrap();
        assert_eq!(active(&records, "t1"), ["r1"], "the running run found by its status column");
        let runs: Vec<(String, RunStatus, bool)> = records
            .thread_run_heads("t1")
            .await
            .unwrap()
            .into_iter()
            .map(|r| (r.run_id, r.status, r.resumable))
            .collect();
        let expected = [("r1", RunStatus::Running, false), ("r2", RunStatus::Success, false)];
        assert_eq!(
            runs,
            expected.map(|(id, s, r)| (id.to_owned(), s, r)),
            "runs found by their thread column"
        );
        type Stored = (String, Option<String>, Option<String>, Option<String>, Option<i64>);
        let columns: Vec<Stored> = sqlx::query_as(
            "SELECT id, parent, status, created_at, sweepable FROM weft_server_records ORDER BY kind, id",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        assert_eq!(
            columns,
            [
                ("r1".into(), Some("t1".into()), Some("running".into()), Some("t".into()), None),
                ("r2".into(), Some("t1".into()), Some("success".into()), Some("t".into()), None),
                ("t1".into(), None, Some("busy".into()), Some("2026-01-02".into()), Some(1)),
                ("t2".into(), None, Some("busy".into()), Some("2026-01-01".into()), None),
            ]
        );
        let old: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'weft_server_runs_by_thread'",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(old, 0, "the JSON-expression index is dropped");
        // What this release writes fills the columns itself; a second open leaves them as they are.
        records.commit(vec![Change::Thread(thread("t3", "2026-01-03", false))]).await.unwrap();
        drop(records);
        let reopened = Records::open(saver(&pool).await, DEFAULT_CACHE).await.unwrap();
        let source = reopened.source().unwrap();
        let mut newest = Vec::new();
        source
            .scan_threads(&ThreadScan::all(ThreadOrder::CreatedAt, false), |id, _| {
                newest.push(id.to_owned());
                Ok(std::ops::ControlFlow::Continue(()))
            })
            .await
            .unwrap();
        assert_eq!(newest, ["t3", "t1", "t2"]);
    }

    #[tokio::test]
    async fn a_table_made_before_runs_had_their_time_gets_it_from_the_bodies_once() {
        let pool = pool().await;
        // The table with its columns, runs without their time and the index of runs by thread alone.
        for sql in
            [SCHEMA, "CREATE INDEX weft_server_run_thread ON weft_server_records (parent) WHERE kind = 'run'"]
        {
            sqlx::query(sql).execute(&pool).await.unwrap();
        }
        let runs = paged_runs();
        for record in &runs {
            sqlx::query(
                "INSERT INTO weft_server_records (kind, id, body, parent, status) VALUES ('run', ?, ?, ?, ?)",
            )
            .bind(&record.run.run_id)
            .bind(serde_json::to_string(record).unwrap())
            .bind(&record.run.thread_id)
            .bind(source::wire_name(&record.run.status))
            .execute(&pool)
            .await
            .unwrap();
        }
        let mut records = Records::open(saver(&pool).await, 4).await.unwrap();
        pages_are_sorted_newest_first(&mut records, &runs).await;
        let indexes: Vec<String> = sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'weft_server_run_thread%'",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        assert_eq!(indexes, [source::RUNS_BY_TIME], "the index by thread alone is dropped");
        // A run written again keeps its time; a second open finds nothing to fill.
        records.commit(vec![Change::Run(Box::new(runs[1].clone()))]).await.unwrap();
        drop(records);
        sqlx::query("UPDATE weft_server_records SET created_at = 'kept' WHERE id = 'r002'")
            .execute(&pool)
            .await
            .unwrap();
        sqlx::query("UPDATE weft_server_records SET created_at = NULL WHERE id = 'r003'")
            .execute(&pool)
            .await
            .unwrap();
        Records::open(saver(&pool).await, 4).await.unwrap();
        let times: Vec<Option<String>> = sqlx::query_scalar(
            "SELECT created_at FROM weft_server_records WHERE id IN ('r001', 'r002', 'r003') ORDER BY id",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        assert_eq!(times, [Some(runs[1].run.created_at.clone()), Some("kept".into()), None]);
    }

    /// Whether the sweeper has something to do with thread `id` of in-memory `records`.
    async fn sweepable_in_memory(records: &mut Records, id: &str) -> bool {
        let thread = records.thread(id).await.unwrap().unwrap().clone();
        records.sweepable(&thread)
    }

    #[tokio::test]
    async fn in_memory_a_kept_thread_is_passed_by_until_it_changes_and_forgotten_when_deleted() {
        let mut records = Records::memory();
        let (t1, t2) = (thread("t1", "2026-01-01", true), thread("t2", "2026-01-01", true));
        records.commit(vec![Change::Thread(t1.clone()), Change::Thread(t2)]).await.unwrap();
        records.commit(vec![Change::Thread(thread("t3", "2026-01-01", false))]).await.unwrap();
        assert!(sweepable_in_memory(&mut records, "t1").await, "a thread with a TTL is for the sweeper");
        assert!(!sweepable_in_memory(&mut records, "t3").await, "one without is not");

        records.mark_swept("t1", "2026-01-01").await.unwrap();
        // Marked at a time the thread no longer has: it changed after the sweeper read it, so it stays.
        records.mark_swept("t2", "2025-12-31").await.unwrap();
        records.mark_swept("gone", "2026-01-01").await.unwrap();
        assert!(!sweepable_in_memory(&mut records, "t1").await, "kept with its latest checkpoint");
        assert!(sweepable_in_memory(&mut records, "t2").await);
        assert_eq!(records.swept.len(), 1, "nothing kept for a thread that is not there");

        // Any write of the thread makes it the sweeper's again.
        let changed = Thread { updated_at: "2026-01-02".into(), ..t1 };
        records.commit(vec![Change::Thread(changed)]).await.unwrap();
        assert!(sweepable_in_memory(&mut records, "t1").await);
        records.mark_swept("t1", "2026-01-02").await.unwrap();
        records.commit(vec![Change::DeleteThread("t1".into())]).await.unwrap();
        assert!(records.swept.is_empty(), "a deleted thread's mark goes with it");
    }

    /// A run of `thread_id` made at `created_at`.
    fn run_at(run_id: &str, thread_id: &str, status: &str, created_at: &str) -> RunRecord {
        let mut record = run(run_id, thread_id, status);
        record.run.created_at = created_at.to_owned();
        record
    }

    /// Runs of two threads in every status, made at times that repeat, with ids whose byte order is
    /// not a case-blind one (`R…` before `r…`).
    fn paged_runs() -> Vec<RunRecord> {
        let statuses = ["pending", "running", "success", "error", "interrupted", "timeout"];
        (0..40)
            .map(|i| {
                let id = if i % 4 == 0 { format!("R{i:03}") } else { format!("r{i:03}") };
                let thread = if i % 5 == 0 { "t2" } else { "t1" };
                run_at(&id, thread, statuses[i % 6], &format!("2026-11-30T00:00:0{}Z", i % 3))
            })
            .collect()
    }

    /// Every page `GET /threads/{thread_id}/runs` can ask of `runs` (filters, sizes, offsets), as
    /// `records` gives it, against the runs sorted here.
    async fn pages_are_sorted_newest_first(records: &mut Records, runs: &[RunRecord]) {
        let statuses = [None, Some(RunStatus::Success), Some(RunStatus::Pending)];
        let pages = [(10, 0), (7, 3), (100, 0), (5, 30), (0, 0), (3, 1_000)];
        for (status, (limit, offset), thread) in statuses
            .into_iter()
            .flat_map(|s| pages.into_iter().flat_map(move |p| ["t1", "t2", "t9"].map(|t| (s, p, t))))
        {
            let mut expected: Vec<(&str, &str)> = (runs.iter())
                .filter(|r| r.run.thread_id == thread && status.is_none_or(|s| r.run.status == s))
                .map(|r| (r.run.created_at.as_str(), r.run.run_id.as_str()))
                .collect();
            expected.sort_by(|a, b| b.cmp(a));
            let expected: Vec<&str> = expected.into_iter().skip(offset).take(limit).map(|k| k.1).collect();
            let page = records.thread_runs_page(thread, status, (limit, offset)).await.unwrap();
            let page: Vec<&str> = page.iter().map(|r| r.run.run_id.as_str()).collect();
            assert_eq!(page, expected, "{thread}, {status:?}, limit {limit}, offset {offset}");
        }
    }

    #[tokio::test]
    async fn a_threads_runs_are_paged_newest_first_from_the_table_as_from_memory() {
        let runs = paged_runs();
        let changes = || runs.iter().map(|r| Change::Run(Box::new(r.clone()))).collect::<Vec<_>>();
        let mut memory = Records::memory();
        memory.commit(changes()).await.unwrap();
        pages_are_sorted_newest_first(&mut memory, &runs).await;
        let pool = pool().await;
        // Memory keeps 4 finished runs: the pages come from the table.
        let mut records = Records::open(saver(&pool).await, 4).await.unwrap();
        records.commit(changes()).await.unwrap();
        pages_are_sorted_newest_first(&mut records, &runs).await;
        // A page is read along the index, in its order: the thread's runs are not sorted.
        let Some(source) = records.source() else { unreachable!("a table") };
        for with_status in [false, true] {
            let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "EXPLAIN QUERY PLAN {}",
                source.thread_runs_page_sql(with_status)
            )))
            .fetch_all(&pool)
            .await
            .unwrap();
            let steps: Vec<&str> = plan.iter().map(|step| step.3.as_str()).collect();
            assert!(
                steps.iter().any(|s| s.contains("USING INDEX weft_server_run_thread_created (parent=?)"))
                    && !steps.iter().any(|s| s.contains("TEMP B-TREE")),
                "{steps:?}"
            );
        }
    }

    #[tokio::test]
    async fn active_runs_are_found_again_after_a_reopen() {
        let pool = pool().await;
        let mut records = Records::open(saver(&pool).await, DEFAULT_CACHE).await.unwrap();
        let changes = vec![
            Change::Run(Box::new(run("r1", "t1", "running"))),
            Change::Run(Box::new(run("r2", "t1", "interrupted"))),
        ];
        records.commit(changes).await.unwrap();
        let reopened = Records::open(saver(&pool).await, DEFAULT_CACHE).await.unwrap();
        assert_eq!(active(&reopened, "t1"), ["r1"]);
    }
}
