//! Where the server keeps assistants, threads, runs and crons: in memory for reads, written through to one
//! table of JSON rows so that they survive a restart. Embedded, the table is in SQLite (on the
//! checkpointer's database) and this process is its only writer. Scaled out (feature `scale`), it is in
//! PostgreSQL, the source of truth shared by every instance: see [`postgres`].
//!
//! Every change is a [`Change`] list committed in one transaction before memory is touched: a failed write
//! changes nothing. Records are read and changed only through [`RecordsLock::lock`].

mod lock;
#[cfg(feature = "scale")]
pub(crate) mod postgres;

pub(crate) use lock::RecordsLock;

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::SqlitePool;

use crate::error::ServerError;
use crate::model::{Assistant, AssistantVersion, Cron, RunRecord, Thread};

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS weft_server_records (\
    kind TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (kind, id))";

/// The kinds of record, as the table names them.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Assistant,
    Version,
    Thread,
    Run,
    Cron,
}

impl Kind {
    fn name(self) -> &'static str {
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
    /// The embedded SQLite file: this process is the only writer.
    Sqlite(SqlitePool),
    /// PostgreSQL, shared by every instance.
    #[cfg(feature = "scale")]
    Postgres(postgres::PgRecords),
}

/// The records in memory, and the table they are written through to.
#[derive(Debug)]
pub(crate) struct Records {
    backend: Backend,
    pub(crate) assistants: BTreeMap<String, Assistant>,
    pub(crate) versions: BTreeMap<(String, i64), AssistantVersion>,
    pub(crate) threads: HashMap<String, Thread>,
    pub(crate) runs: HashMap<String, RunRecord>,
    pub(crate) crons: BTreeMap<String, Cron>,
}

fn version_key(assistant_id: &str, version: i64) -> String {
    format!("{assistant_id}:{version}")
}

fn decode<T: DeserializeOwned>(kind: &str, id: &str, body: &str) -> Result<T, ServerError> {
    serde_json::from_str(body)
        .map_err(|e| ServerError::Storage(format!("unreadable {kind} record '{id}': {e}")))
}

fn encode<T: Serialize>(value: &T) -> Result<String, ServerError> {
    serde_json::to_string(value).map_err(|e| ServerError::Storage(format!("cannot encode a record: {e}")))
}

impl Records {
    /// Creates the table if missing and reads every record.
    pub(crate) async fn open(pool: SqlitePool) -> Result<Self, ServerError> {
        sqlx::query(SCHEMA).execute(&pool).await.map_err(storage)?;
        let rows: Vec<(String, String, String)> =
            sqlx::query_as("SELECT kind, id, body FROM weft_server_records")
                .fetch_all(&pool)
                .await
                .map_err(storage)?;
        let mut records = Records::empty(Backend::Sqlite(pool));
        for (kind, id, body) in rows {
            records.apply_row(&kind, &id, Some(&body))?;
        }
        Ok(records)
    }

    fn empty(backend: Backend) -> Self {
        Records {
            backend,
            assistants: BTreeMap::new(),
            versions: BTreeMap::new(),
            threads: HashMap::new(),
            runs: HashMap::new(),
            crons: BTreeMap::new(),
        }
    }

    /// Applies one row of the table in memory: its record, or its deletion (`body` none).
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
                let t: Thread = decode(kind, id, body)?;
                self.threads.insert(t.thread_id.clone(), t);
            }
            ("thread", None) => {
                self.threads.remove(id);
            }
            ("run", Some(body)) => {
                let r: RunRecord = decode(kind, id, body)?;
                self.runs.insert(r.run.run_id.clone(), r);
            }
            ("run", None) => {
                self.runs.remove(id);
            }
            ("cron", Some(body)) => {
                let c: Cron = decode(kind, id, body)?;
                self.crons.insert(c.cron_id.clone(), c);
            }
            ("cron", None) => {
                self.crons.remove(id);
            }
            (other, _) => return Err(ServerError::Storage(format!("unknown record kind '{other}'"))),
        }
        Ok(())
    }

    /// Takes the records' turn: scaled out, PostgreSQL's lock, then the rows written since the last turn.
    async fn enter(&mut self) -> Result<(), ServerError> {
        #[cfg(feature = "scale")]
        if let Backend::Postgres(pg) = &mut self.backend {
            let (rows, seq) = pg.enter().await?;
            for (kind, id, body) in &rows {
                if let Err(e) = self.apply_row(kind, id, body.as_deref()) {
                    self.leave();
                    return Err(e);
                }
            }
            if let Backend::Postgres(pg) = &mut self.backend {
                pg.seen(seq);
            }
        }
        Ok(())
    }

    /// Ends the records' turn (scaled out: lets go of PostgreSQL's lock, in a task of its own).
    fn leave(&mut self) {
        #[cfg(feature = "scale")]
        if let Backend::Postgres(pg) = &mut self.backend {
            pg.leave();
        }
    }

    /// Opens the records on PostgreSQL: the tables made (once, whatever the number of instances starting
    /// together) and every record read.
    #[cfg(feature = "scale")]
    pub(crate) async fn open_postgres(pool: sqlx::PgPool) -> Result<Self, ServerError> {
        postgres::migrate(&pool).await?;
        let mut records = Records::empty(Backend::Postgres(postgres::PgRecords::new(pool)));
        records.enter().await?;
        records.leave();
        Ok(records)
    }

    /// Writes `changes` in one transaction, then applies them in memory.
    pub(crate) async fn commit(&mut self, changes: Vec<Change>) -> Result<(), ServerError> {
        if changes.is_empty() {
            return Ok(());
        }
        let mut ops: Vec<(Kind, String, Option<String>)> = Vec::with_capacity(changes.len());
        for change in &changes {
            ops.push(match change {
                Change::Assistant(a) => (Kind::Assistant, a.assistant_id.clone(), Some(encode(a)?)),
                Change::Version(v) => {
                    (Kind::Version, version_key(&v.assistant_id, v.version), Some(encode(v)?))
                }
                Change::Thread(t) => (Kind::Thread, t.thread_id.clone(), Some(encode(t)?)),
                Change::Run(r) => (Kind::Run, r.run.run_id.clone(), Some(encode(r)?)),
                Change::DeleteAssistant(id) => (Kind::Assistant, id.clone(), None),
                Change::DeleteVersion(id, v) => (Kind::Version, version_key(id, *v), None),
                Change::DeleteThread(id) => (Kind::Thread, id.clone(), None),
                Change::Cron(c) => (Kind::Cron, c.cron_id.clone(), Some(encode(c)?)),
                Change::DeleteRun(id) => (Kind::Run, id.clone(), None),
                Change::DeleteCron(id) => (Kind::Cron, id.clone(), None),
            });
        }
        match &mut self.backend {
            Backend::Sqlite(pool) => write_sqlite(pool, &ops).await?,
            #[cfg(feature = "scale")]
            Backend::Postgres(pg) => {
                let ops: Vec<(&'static str, &str, Option<&str>)> =
                    ops.iter().map(|(kind, id, body)| (kind.name(), id.as_str(), body.as_deref())).collect();
                pg.write(&ops, &changes).await?;
            }
        }
        for change in changes {
            match change {
                Change::Assistant(a) => {
                    self.assistants.insert(a.assistant_id.clone(), a);
                }
                Change::Version(v) => {
                    self.versions.insert((v.assistant_id.clone(), v.version), v);
                }
                Change::Thread(t) => {
                    self.threads.insert(t.thread_id.clone(), t);
                }
                Change::Run(r) => {
                    self.runs.insert(r.run.run_id.clone(), *r);
                }
                Change::DeleteAssistant(id) => {
                    self.assistants.remove(&id);
                }
                Change::DeleteVersion(id, v) => {
                    self.versions.remove(&(id, v));
                }
                Change::DeleteThread(id) => {
                    self.threads.remove(&id);
                }
                Change::DeleteRun(id) => {
                    self.runs.remove(&id);
                }
                Change::Cron(c) => {
                    self.crons.insert(c.cron_id.clone(), *c);
                }
                Change::DeleteCron(id) => {
                    self.crons.remove(&id);
                }
            }
        }
        Ok(())
    }

    /// The runs of a thread that are pending or running.
    pub(crate) fn active_runs<'a>(&'a self, thread_id: &'a str) -> impl Iterator<Item = &'a RunRecord> + 'a {
        self.runs.values().filter(move |r| r.run.thread_id == thread_id && r.run.status.is_active())
    }
}

async fn write_sqlite(pool: &SqlitePool, ops: &[(Kind, String, Option<String>)]) -> Result<(), ServerError> {
    let mut tx = pool.begin().await.map_err(storage)?;
    for (kind, id, body) in ops {
        let query = match body {
            Some(body) => sqlx::query(
                "INSERT INTO weft_server_records (kind, id, body) VALUES (?, ?, ?) \
                 ON CONFLICT (kind, id) DO UPDATE SET body = excluded.body",
            )
            .bind(kind.name())
            .bind(id)
            .bind(body),
            None => sqlx::query("DELETE FROM weft_server_records WHERE kind = ? AND id = ?")
                .bind(kind.name())
                .bind(id),
        };
        query.execute(&mut *tx).await.map_err(storage)?;
    }
    tx.commit().await.map_err(storage)
}

fn storage(e: sqlx::Error) -> ServerError {
    ServerError::Storage(format!("sqlite: {e}"))
}
