//! Where the server keeps assistants, threads, runs and crons: in memory for reads, written through to SQLite
//! (one table of JSON rows, on the checkpointer's database) so that they survive a restart.
//!
//! Every change is a [`Change`] list committed in one transaction before memory is touched: a failed write
//! changes nothing.

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

/// The records in memory, and the table they are written through to.
#[derive(Debug)]
pub(crate) struct Records {
    pool: SqlitePool,
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
        let mut records = Records {
            pool,
            assistants: BTreeMap::new(),
            versions: BTreeMap::new(),
            threads: HashMap::new(),
            runs: HashMap::new(),
            crons: BTreeMap::new(),
        };
        for (kind, id, body) in rows {
            match kind.as_str() {
                "assistant" => {
                    let a: Assistant = decode(&kind, &id, &body)?;
                    records.assistants.insert(a.assistant_id.clone(), a);
                }
                "assistant_version" => {
                    let v: AssistantVersion = decode(&kind, &id, &body)?;
                    records.versions.insert((v.assistant_id.clone(), v.version), v);
                }
                "thread" => {
                    let t: Thread = decode(&kind, &id, &body)?;
                    records.threads.insert(t.thread_id.clone(), t);
                }
                "run" => {
                    let r: RunRecord = decode(&kind, &id, &body)?;
                    records.runs.insert(r.run.run_id.clone(), r);
                }
                "cron" => {
                    let c: Cron = decode(&kind, &id, &body)?;
                    records.crons.insert(c.cron_id.clone(), c);
                }
                other => return Err(ServerError::Storage(format!("unknown record kind '{other}'"))),
            }
        }
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
        let mut tx = self.pool.begin().await.map_err(storage)?;
        for (kind, id, body) in &ops {
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
        tx.commit().await.map_err(storage)?;
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

fn storage(e: sqlx::Error) -> ServerError {
    ServerError::Storage(format!("sqlite: {e}"))
}
