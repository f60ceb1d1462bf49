//! [`Source`]: the records' table read past what memory keeps. Embedded, the SQLite file (through the
//! saver's readers, beside its writer); scaled out, PostgreSQL. Every read is one statement on an
//! indexed path (see [`COLUMNS`] and [`indexes`]), and a scan goes a page at a time
//! (keyset pagination), so memory holds one page whatever the number of records.

use std::ops::ControlFlow;

use sqlx::SqlitePool;
use weft_graph::checkpoint::CheckpointError;

use crate::error::ServerError;
use crate::model::{RunRecord, Thread};

/// The columns beside a record's body that reads select and sort on, in the order [`Columns::values`]
/// gives them. The writer fills them from the typed record, so a write parses no JSON (indexes on JSON
/// expressions made every write of a record parse its body again, once per index).
pub(crate) const COLUMNS: [&str; 5] = ["parent", "status", "created_at", "updated_at", "sweepable"];

/// The indexes the reads use (partial: a query names `kind` literally for SQLite to use them). `{C}`
/// stands for the byte-order collation of the dialect ([`Source::byte_order`]): a thread's runs are paged
/// newest first in the order memory sorts them.
const INDEXES: [&str; 5] = [
    "weft_server_run_thread_created ON weft_server_records (parent, created_at{C}, id{C}) WHERE kind = 'run'",
    "weft_server_run_status ON weft_server_records (status) WHERE kind = 'run'",
    "weft_server_thread_created ON weft_server_records (created_at, id) WHERE kind = 'thread'",
    "weft_server_thread_updated ON weft_server_records (updated_at, id) WHERE kind = 'thread'",
    "weft_server_thread_sweepable ON weft_server_records (id) WHERE kind = 'thread' AND sweepable IS NOT NULL",
];

/// The indexes on JSON expressions of an earlier release, dropped at start.
const DROPPED_INDEXES: [&str; 5] = [
    "weft_server_runs_by_thread",
    "weft_server_runs_by_status",
    "weft_server_threads_by_created",
    "weft_server_threads_by_updated",
    "weft_server_threads_with_ttl",
];

/// The index of a thread's runs by thread alone, before runs had their `created_at` column.
const RUN_THREAD_INDEX: &str = "weft_server_run_thread";

/// The columns added to a records table made by a release before them.
pub(crate) fn add_columns() -> Vec<String> {
    COLUMNS
        .iter()
        .map(|c| {
            let kind = if *c == "sweepable" { "INTEGER" } else { "TEXT" };
            format!("ALTER TABLE weft_server_records ADD COLUMN {c} {kind}")
        })
        .collect()
}

/// Fills the columns of the records written before there were columns (those without a `status`) from
/// their bodies (`json` spells a body's field in the dialect). It ends in a `WHERE` clause, which a
/// caller may narrow (`AND ...`) to fill a batch.
pub(crate) fn fill_columns(json: impl Fn(&[&str]) -> String) -> String {
    format!(
        "UPDATE weft_server_records SET \
         parent = CASE WHEN kind = 'run' THEN {} END, \
         status = CASE WHEN kind = 'run' THEN {} WHEN kind = 'thread' THEN {} END, \
         created_at = CASE WHEN kind = 'thread' THEN {} WHEN kind = 'run' THEN {} END, \
         updated_at = CASE WHEN kind = 'thread' THEN {} END, \
         sweepable = CASE WHEN kind = 'thread' AND {} IS NOT NULL THEN 1 END \
         WHERE kind IN ('run', 'thread') AND body IS NOT NULL AND status IS NULL",
        json(&["run", "thread_id"]),
        json(&["run", "status"]),
        json(&["status"]),
        json(&["created_at"]),
        json(&["run", "created_at"]),
        json(&["updated_at"]),
        json(&["ttl"]),
    )
}

/// Fills the `created_at` of the runs written before runs filled it, from their bodies; `alive` is the
/// condition of a record that exists. Ends in a `WHERE` clause, as [`fill_columns`].
pub(crate) fn fill_run_times(json: impl Fn(&[&str]) -> String, alive: &str) -> String {
    format!(
        "UPDATE weft_server_records SET created_at = {} WHERE kind = 'run' AND created_at IS NULL{alive}",
        json(&["run", "created_at"])
    )
}

/// The indexes of earlier releases that this one drops: those on JSON expressions, and the index of runs
/// by thread alone (before runs had their `created_at` column).
pub(crate) fn old_indexes() -> impl Iterator<Item = &'static str> {
    DROPPED_INDEXES.into_iter().chain([RUN_THREAD_INDEX])
}

/// The name of the index of a thread's runs by time: its absence says the table predates it.
pub(crate) const RUNS_BY_TIME: &str = "weft_server_run_thread_created";

/// The indexes the reads use, each as its name and the statement making it (`CREATE INDEX`, with
/// `CONCURRENTLY` when `concurrently`, `IF NOT EXISTS`); `alive` is the condition of a record that exists
/// (PostgreSQL keeps a deleted one without a body), `byte_order` the collation of byte order (see
/// [`Source::byte_order`]).
pub(crate) fn indexes(alive: &str, byte_order: &str, concurrently: bool) -> Vec<(&'static str, String)> {
    let create = if concurrently { "CREATE INDEX CONCURRENTLY" } else { "CREATE INDEX" };
    INDEXES
        .iter()
        .map(|index| {
            let name = index.split_once(' ').map_or(*index, |(name, _)| name);
            (name, format!("{create} IF NOT EXISTS {}{alive}", index.replace("{C}", byte_order)))
        })
        .collect()
}

/// PostgreSQL's collation of byte order.
#[cfg(feature = "scale")]
pub(crate) const BYTE_ORDER: &str = " COLLATE \"C\"";

/// PostgreSQL's condition of a record that exists: a deleted one is kept without a body.
#[cfg(feature = "scale")]
pub(crate) const POSTGRES_ALIVE: &str = " AND body IS NOT NULL";

/// A SQLite body's field as SQL.
pub(crate) fn sqlite_json(path: &[&str]) -> String {
    format!("json_extract(body, '$.{}')", path.join("."))
}

/// A PostgreSQL body as `jsonb`. `jsonb` refuses the escape of U+0000 (`\u0000`, which serde_json writes
/// for that character in any string, a message's text among them), and one such body would fail every
/// statement that parses it: a search over all threads, an upgrade's fill. It is read as U+FFFD instead:
/// an escape of the same length, valid wherever the first was. A body without one is parsed as it is.
#[cfg(feature = "scale")]
pub(crate) const POSTGRES_BODY: &str = r"replace(body, E'\\u0000', E'\\ufffd')::jsonb";

/// A PostgreSQL body's field as SQL (see [`POSTGRES_BODY`]).
#[cfg(feature = "scale")]
pub(crate) fn postgres_json(path: &[&str]) -> String {
    match path {
        [field] => format!("({POSTGRES_BODY} ->> '{field}')"),
        _ => format!("({POSTGRES_BODY} #>> '{{{}}}')", path.join(",")),
    }
}

/// A record's [`COLUMNS`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Columns {
    /// A run's thread.
    pub(crate) parent: Option<String>,
    /// A run's or a thread's status, as on the wire.
    pub(crate) status: Option<String>,
    /// A thread's or a run's.
    pub(crate) created_at: Option<String>,
    /// A thread's.
    pub(crate) updated_at: Option<String>,
    /// 1 while the TTL sweeper has something to do with a thread: it has a TTL and has not been kept
    /// with its latest checkpoint since its last change (see [`super::RecordsLock::mark_swept`]).
    pub(crate) sweepable: Option<i64>,
}

/// A status as its wire name.
pub(crate) fn wire_name<T: serde::Serialize>(value: &T) -> Option<String> {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_owned))
}

impl Columns {
    pub(crate) fn of_thread(thread: &Thread) -> Self {
        Self {
            parent: None,
            status: wire_name(&thread.status),
            created_at: Some(thread.created_at.clone()),
            updated_at: Some(thread.updated_at.clone()),
            sweepable: thread.ttl.is_some().then_some(1),
        }
    }

    pub(crate) fn of_run(record: &RunRecord) -> Self {
        Self {
            parent: Some(record.run.thread_id.clone()),
            status: wire_name(&record.run.status),
            created_at: Some(record.run.created_at.clone()),
            ..Self::default()
        }
    }

    /// The text columns, in [`COLUMNS`]' order (without `sweepable`).
    pub(crate) fn texts(&self) -> [Option<&str>; 4] {
        [
            self.parent.as_deref(),
            self.status.as_deref(),
            self.created_at.as_deref(),
            self.updated_at.as_deref(),
        ]
    }
}

/// Rows a scan reads per statement.
const PAGE: usize = 256;

/// A row read: its id, its sort key (a scan's) and its JSON body.
pub(crate) type Row = (String, Option<String>, String);

/// The order of a thread scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ThreadOrder {
    CreatedAt,
    UpdatedAt,
    StateUpdatedAt,
    ThreadId,
    Status,
}

impl ThreadOrder {
    /// The order `POST /threads/search` names (`created_at` by default).
    pub(crate) fn parse(sort_by: Option<&str>) -> Self {
        match sort_by {
            Some("thread_id") => Self::ThreadId,
            Some("status") => Self::Status,
            Some("updated_at") => Self::UpdatedAt,
            Some("state_updated_at") => Self::StateUpdatedAt,
            _ => Self::CreatedAt,
        }
    }

    /// The thread's key in this order (ties are ordered by id).
    pub(crate) fn key(self, thread: &crate::model::Thread) -> String {
        match self {
            Self::ThreadId => thread.thread_id.clone(),
            Self::Status => wire_name(&thread.status).unwrap_or_default(),
            Self::UpdatedAt => thread.updated_at.clone(),
            Self::StateUpdatedAt => thread.state_updated_at.clone(),
            Self::CreatedAt => thread.created_at.clone(),
        }
    }

    /// The key as SQL: a column, or (`state_updated_at`) the body's field `json` spells.
    fn sql(self, json: impl Fn(&[&str]) -> String) -> String {
        match self {
            Self::ThreadId => "id".to_owned(),
            Self::Status => "status".to_owned(),
            Self::UpdatedAt => "updated_at".to_owned(),
            Self::StateUpdatedAt => json(&["state_updated_at"]),
            Self::CreatedAt => "created_at".to_owned(),
        }
    }
}

/// The records' table, read.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// The SQLite file, through the saver's readers.
    Sqlite(SqlitePool),
    /// PostgreSQL, shared by every instance.
    #[cfg(feature = "scale")]
    Postgres(crate::scale::Db),
}

impl Source {
    /// `field` of the body (a path of object keys), as SQL.
    fn json(&self, path: &[&str]) -> String {
        match self {
            Self::Sqlite(_) => sqlite_json(path),
            #[cfg(feature = "scale")]
            Self::Postgres(_) => postgres_json(path),
        }
    }

    /// The `n`th (from 1) bound parameter.
    fn param(&self, n: usize) -> String {
        let _ = n;
        match self {
            Self::Sqlite(_) => "?".to_owned(),
            #[cfg(feature = "scale")]
            Self::Postgres(_) => format!("${n}"),
        }
    }

    /// `INDEXED BY index` on SQLite (whose planner, without statistics, prefers the primary key and
    /// sorts), nothing on PostgreSQL.
    fn indexed_by(&self, index: &str) -> String {
        match self {
            Self::Sqlite(_) => format!(" INDEXED BY {index}"),
            #[cfg(feature = "scale")]
            Self::Postgres(_) => String::new(),
        }
    }

    /// The collation that orders text by its bytes, as Rust orders strings (SQLite's default).
    pub(crate) fn byte_order(&self) -> &'static str {
        match self {
            Self::Sqlite(_) => "",
            #[cfg(feature = "scale")]
            Self::Postgres(_) => BYTE_ORDER,
        }
    }

    /// The condition a record that exists meets (PostgreSQL keeps deleted ones without a body).
    fn alive(&self) -> &'static str {
        match self {
            Self::Sqlite(_) => "",
            #[cfg(feature = "scale")]
            Self::Postgres(_) => POSTGRES_ALIVE,
        }
    }

    /// The rows of `sql` (id, key, body), its parameters `binds` (text).
    pub(crate) async fn rows(&self, sql: &str, binds: &[&str]) -> Result<Vec<Row>, ServerError> {
        match self {
            Self::Sqlite(pool) => {
                let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql.to_owned()));
                for bind in binds {
                    query = query.bind(bind.to_string());
                }
                query.fetch_all(pool).await.map_err(|e| storage("sqlite", e))
            }
            #[cfg(feature = "scale")]
            Self::Postgres(db) => {
                let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql.to_owned()));
                for bind in binds {
                    query = query.bind(bind.to_string());
                }
                db.fetch_all(query).await.map_err(|e| storage("postgres", e))
            }
        }
    }

    /// The statement reading one record (parameters: kind, id).
    pub(crate) fn body_sql(&self) -> String {
        format!(
            "SELECT id, CAST(NULL AS TEXT), body FROM weft_server_records WHERE kind = {} AND id = {}{}",
            self.param(1),
            self.param(2),
            self.alive()
        )
    }

    /// The statement reading every run of a thread without its body, oldest first (ties by id): its id,
    /// status and whether it is resumable (`'1'` or `'0'`). Parameter: the thread's id.
    pub(crate) fn thread_run_heads_sql(&self) -> String {
        let c = self.byte_order();
        format!(
            "SELECT id, status, CASE WHEN CAST({} AS TEXT) IN ('true', '1') THEN '1' ELSE '0' END \
             FROM weft_server_records{} WHERE kind = 'run' AND parent = {}{} ORDER BY created_at{c}, id{c}",
            self.json(&["run", "kwargs", "resumable"]),
            self.indexed_by(RUNS_BY_TIME),
            self.param(1),
            self.alive(),
        )
    }

    /// The statement reading a page of a thread's runs, newest first (ties by id, descending), as
    /// `GET /threads/{thread_id}/runs` lists them. Parameters: the thread's id, the status when
    /// `with_status`, then the page's size and offset. The index of runs by thread and time gives them in
    /// order, so the page costs its offset and size, not the thread's runs.
    pub(crate) fn thread_runs_page_sql(&self, with_status: bool) -> String {
        let c = self.byte_order();
        let status = if with_status { format!(" AND status = {}", self.param(2)) } else { String::new() };
        let n = if with_status { 3 } else { 2 };
        format!(
            "SELECT id, CAST(NULL AS TEXT), body FROM weft_server_records{} WHERE kind = 'run' AND parent = {}{status}{} \
             ORDER BY created_at{c} DESC, id{c} DESC LIMIT CAST({} AS BIGINT) OFFSET CAST({} AS BIGINT)",
            self.indexed_by(RUNS_BY_TIME),
            self.param(1),
            self.alive(),
            self.param(n),
            self.param(n + 1),
        )
    }

    /// What a server keeps in memory from its start: every assistant, version and cron (kind and body),
    /// and every pending or running run.
    pub(crate) async fn resident(&self) -> Result<Vec<(String, String, String)>, ServerError> {
        let mut out = Vec::new();
        for kind in ["assistant", "assistant_version", "cron"] {
            let sql = format!(
                "SELECT id, CAST(NULL AS TEXT), body FROM weft_server_records WHERE kind = {}{}",
                self.param(1),
                self.alive()
            );
            out.extend(
                self.rows(&sql, &[kind]).await?.into_iter().map(|row| (kind.to_owned(), row.0, row.2)),
            );
        }
        let sql = format!(
            "SELECT id, CAST(NULL AS TEXT), body FROM weft_server_records{} \
             WHERE kind = 'run' AND status IN ('pending', 'running'){}",
            self.indexed_by("weft_server_run_status"),
            self.alive()
        );
        out.extend(self.rows(&sql, &[]).await?.into_iter().map(|row| ("run".to_owned(), row.0, row.2)));
        Ok(out)
    }

    /// How many threads there are.
    pub(crate) async fn count_threads(&self) -> Result<usize, ServerError> {
        let sql = format!(
            "SELECT 'count', CAST(NULL AS TEXT), CAST(count(*) AS TEXT) FROM weft_server_records WHERE kind = 'thread'{}",
            self.alive()
        );
        let rows = self.rows(&sql, &[]).await?;
        Ok(rows.first().and_then(|row| row.2.parse().ok()).unwrap_or(0))
    }

    /// Threads in `order` (`ascending` or not; ties by id), among `ids` when given, or only those the TTL
    /// sweeper has to look at (`sweepable_only`), a page at a time, each passed to `visit` (its body) until it breaks. `skip` rows are skipped
    /// by the database first (for a page of threads no filter looks at).
    pub(crate) async fn scan_threads(
        &self,
        scan: &ThreadScan<'_>,
        mut visit: impl FnMut(&str, &str) -> Result<ControlFlow<()>, ServerError>,
    ) -> Result<(), ServerError> {
        let key = scan.order.sql(|path| self.json(path));
        let (cmp, dir) = if scan.ascending { (">", "ASC") } else { ("<", "DESC") };
        let mut filter = format!("kind = 'thread'{}", self.alive());
        if scan.sweepable_only {
            filter.push_str(" AND sweepable IS NOT NULL");
        }
        let mut fixed: Vec<String> = Vec::new();
        filter.push_str(&self.prefilter(scan, &mut fixed));
        let fixed: Vec<&str> = fixed.iter().map(String::as_str).collect();
        let index = match (scan.ids, scan.sweepable_only, scan.order) {
            (None, false, ThreadOrder::CreatedAt) => self.indexed_by("weft_server_thread_created"),
            (None, false, ThreadOrder::UpdatedAt) => self.indexed_by("weft_server_thread_updated"),
            (None, true, ThreadOrder::ThreadId) => self.indexed_by("weft_server_thread_sweepable"),
            _ => String::new(),
        };
        let ids = scan.ids.map(|ids| serde_json::Value::from(ids.to_vec()).to_string());
        let mut after: Option<(String, String)> = None;
        let mut skip = scan.skip;
        loop {
            let mut sql = format!("SELECT id, {key}, body FROM weft_server_records{index} WHERE {filter}");
            let mut binds: Vec<&str> = fixed.clone();
            if let Some(ids) = &ids {
                binds.push(ids);
                sql.push_str(&match self {
                    Self::Sqlite(_) => " AND id IN (SELECT value FROM json_each(?))".to_owned(),
                    #[cfg(feature = "scale")]
                    Self::Postgres(_) => format!(
                        " AND id IN (SELECT jsonb_array_elements_text({}::jsonb))",
                        self.param(binds.len())
                    ),
                });
            }
            if let Some((k, id)) = &after {
                sql.push_str(&self.after(&key, cmp, k, id, &mut binds));
            }
            sql.push_str(&format!(" ORDER BY {key} {dir}, id {dir} LIMIT {PAGE} OFFSET {skip}"));
            skip = 0;
            let rows = self.rows(&sql, &binds).await?;
            let full = rows.len() == PAGE;
            for (id, key, body) in &rows {
                if visit(id, body)?.is_break() {
                    return Ok(());
                }
                after = Some((key.clone().unwrap_or_else(|| id.clone()), id.clone()));
            }
            if !full {
                return Ok(());
            }
        }
    }
}

impl Source {
    /// The conditions that let the database skip threads a scan's metadata and status cannot match, their
    /// values pushed on `binds` (the first parameters of the statement). PostgreSQL tests the metadata's
    /// containment (`@>`, U+0000 read as U+FFFD on both sides); SQLite compares each scalar field (a
    /// superset of the matches: booleans read as 1 and 0, and values that are objects, arrays or null are
    /// left to the caller's check).
    fn prefilter(&self, scan: &ThreadScan<'_>, binds: &mut Vec<String>) -> String {
        use serde_json::Value;
        let mut sql = String::new();
        if let Some(status) = scan.status {
            binds.push(status.to_owned());
            sql.push_str(&format!(" AND status = {}", self.param(binds.len())));
        }
        let Some(metadata) = scan.metadata.filter(|m| !m.is_empty()) else { return sql };
        match self {
            Self::Sqlite(_) => {
                for (key, value) in metadata {
                    if key.contains('"') || key.contains('\'') {
                        continue;
                    }
                    let path = format!("json_extract(body, '$.metadata.\"{key}\"')");
                    match value {
                        Value::String(text) => {
                            binds.push(text.clone());
                            sql.push_str(&format!(" AND {path} = ?"));
                        }
                        Value::Number(n) if n.as_f64().is_some_and(f64::is_finite) => {
                            sql.push_str(&format!(" AND {path} = {n}"));
                        }
                        Value::Bool(b) => sql.push_str(&format!(" AND {path} = {}", i32::from(*b))),
                        _ => {}
                    }
                }
            }
            #[cfg(feature = "scale")]
            Self::Postgres(_) => {
                // The filter read as the bodies are (see `POSTGRES_BODY`): a superset of the matches.
                binds.push(Value::Object(metadata.clone()).to_string());
                sql.push_str(&format!(
                    r" AND ({POSTGRES_BODY} -> 'metadata') @> replace({}::text, E'\\u0000', E'\\ufffd')::jsonb",
                    self.param(binds.len())
                ));
            }
        }
        sql
    }

    /// The condition of a scan's next page: past `(k, id)` in the order `cmp` (`<` or `>`) says, its
    /// values pushed on `binds`. SQLite uses an index range only on the key alone, so the condition is
    /// spelt out; PostgreSQL compares the pair.
    fn after<'a>(&self, key: &str, cmp: &str, k: &'a str, id: &'a str, binds: &mut Vec<&'a str>) -> String {
        if key == "id" {
            binds.push(id);
            return format!(" AND id {cmp} {}", self.param(binds.len()));
        }
        match self {
            Self::Sqlite(_) => {
                binds.extend([k, k, id]);
                format!(" AND {key} {cmp}= ? AND ({key} {cmp} ? OR id {cmp} ?)")
            }
            #[cfg(feature = "scale")]
            Self::Postgres(_) => {
                binds.extend([k, id]);
                format!(" AND ({key}, id) {cmp} (${}, ${})", binds.len() - 1, binds.len())
            }
        }
    }
}

/// What a thread scan reads (see [`Source::scan_threads`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ThreadScan<'a> {
    pub(crate) order: ThreadOrder,
    pub(crate) ascending: bool,
    pub(crate) ids: Option<&'a [String]>,
    /// Only threads with a TTL that the sweeper has not kept with their latest checkpoint since their
    /// last change.
    pub(crate) sweepable_only: bool,
    pub(crate) skip: usize,
    /// Metadata the threads contain, and their status: the database skips the rows that cannot match
    /// (the caller still checks each row it is given).
    pub(crate) metadata: Option<&'a serde_json::Map<String, serde_json::Value>>,
    pub(crate) status: Option<&'a str>,
}

impl ThreadScan<'_> {
    /// A scan of every thread in `order`, ascending or not.
    pub(crate) fn all(order: ThreadOrder, ascending: bool) -> Self {
        Self { order, ascending, ids: None, sweepable_only: false, skip: 0, metadata: None, status: None }
    }
}

fn storage(backend: &str, e: sqlx::Error) -> ServerError {
    ServerError::from(weft_integrations::sql_checkpoint_error(backend.to_owned(), e))
}

/// A record that cannot be read.
pub(crate) fn unreadable(kind: &str, id: &str, e: serde_json::Error) -> ServerError {
    ServerError::from(CheckpointError::backend_from(format!("unreadable {kind} record '{id}'"), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of `n` threads whose creation times repeat (ties are ordered by id), every third with a
    /// TTL.
    async fn table(n: usize) -> Source {
        let pool = empty_table().await;
        for i in 0..n {
            let created = format!("2026-01-01T00:00:{:02}Z", i % 7);
            let body = serde_json::json!({
                "thread_id": format!("t{i:04}"), "created_at": created,
                "ttl": if i % 3 == 0 { serde_json::json!({"strategy": "delete", "ttl": 1.0}) } else { serde_json::Value::Null },
            });
            sqlx::query(
                "INSERT INTO weft_server_records (kind, id, body, created_at, updated_at, sweepable) \
                 VALUES ('thread', ?, ?, ?, ?, ?)",
            )
            .bind(format!("t{i:04}"))
            .bind(body.to_string())
            .bind(&created)
            .bind(&created)
            .bind((i % 3 == 0).then_some(1))
            .execute(&pool)
            .await
            .unwrap();
        }
        Source::Sqlite(pool)
    }

    /// The records' table, with its indexes, in a memory database.
    async fn empty_table() -> sqlx::SqlitePool {
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect("sqlite::memory:")
            .await
            .unwrap();
        sqlx::query(super::super::SCHEMA).execute(&pool).await.unwrap();
        for (_, index) in indexes("", "", false) {
            sqlx::query(sqlx::AssertSqlSafe(index)).execute(&pool).await.unwrap();
        }
        pool
    }

    async fn scan(source: &Source, scan: ThreadScan<'_>) -> Vec<String> {
        let mut ids = Vec::new();
        source
            .scan_threads(&scan, |_, body| {
                let value: serde_json::Value = serde_json::from_str(body).unwrap();
                ids.push(value["thread_id"].as_str().unwrap().to_owned());
                Ok(ControlFlow::Continue(()))
            })
            .await
            .unwrap();
        ids
    }

    fn expected(n: usize, ascending: bool, keep: impl Fn(usize) -> bool) -> Vec<String> {
        let mut all: Vec<(String, String)> = (0..n)
            .filter(|i| keep(*i))
            .map(|i| (format!("2026-01-01T00:00:{:02}Z", i % 7), format!("t{i:04}")))
            .collect();
        all.sort();
        if !ascending {
            all.reverse();
        }
        all.into_iter().map(|(_, id)| id).collect()
    }

    #[tokio::test]
    async fn a_scan_reads_every_thread_once_in_order_across_pages() {
        let n = PAGE * 2 + 37;
        let source = table(n).await;
        let whole = ThreadScan::all(ThreadOrder::CreatedAt, false);
        assert_eq!(scan(&source, whole).await, expected(n, false, |_| true));
        let up = ThreadScan { ascending: true, ..whole };
        assert_eq!(scan(&source, up).await, expected(n, true, |_| true));
        let ttl = ThreadScan { sweepable_only: true, ..whole };
        assert_eq!(scan(&source, ttl).await, expected(n, false, |i| i % 3 == 0));
        let skipped = ThreadScan { skip: PAGE + 5, ..whole };
        assert_eq!(scan(&source, skipped).await, expected(n, false, |_| true)[PAGE + 5..]);
        let ids = vec!["t0003".to_owned(), "t0500".to_owned(), "nope".to_owned()];
        let some = ThreadScan { ids: Some(&ids), ..up };
        assert_eq!(scan(&source, some).await, ["t0003", "t0500"], "the same time (500 % 7 = 3): by id");
        let by_id = ThreadScan { order: ThreadOrder::ThreadId, ..up };
        assert_eq!(scan(&source, by_id).await.len(), n);
        assert_eq!(source.count_threads().await.unwrap(), n);
    }

    #[tokio::test]
    async fn a_scan_stops_where_its_visitor_breaks_and_a_bad_row_is_a_typed_error() {
        let source = table(10).await;
        let whole = ThreadScan::all(ThreadOrder::UpdatedAt, false);
        let mut seen = 0;
        source
            .scan_threads(&whole, |_, _| {
                seen += 1;
                Ok(if seen == 4 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) })
            })
            .await
            .unwrap();
        assert_eq!(seen, 4);
        let failed = source
            .scan_threads(&whole, |id, body| {
                serde_json::from_str::<crate::model::Thread>(body)
                    .map_err(|e| unreadable("thread", id, e))?;
                Ok(ControlFlow::Continue(()))
            })
            .await
            .unwrap_err();
        assert!(failed.to_string().contains("unreadable thread record 't000"), "names the row: {failed}");
    }

    /// The embedded server's twin of the PostgreSQL test of U+0000 in a body: SQLite's JSON functions read
    /// such bodies, so a search by metadata or by `state_updated_at` finds them.
    #[tokio::test]
    async fn a_body_holding_u0000_is_read_by_sqlite_searches() {
        let pool = empty_table().await;
        let threads = [
            ("nul-values", "u1", "a\u{0}b", "03"),
            ("nul-metadata", "u\u{0}1", "", "02"),
            ("plain", "u1", "", "01"),
        ];
        for (id, user, text, second) in threads {
            let body = serde_json::json!({
                "thread_id": id, "metadata": {"user": user}, "values": {"messages": [text]},
                "state_updated_at": format!("2026-01-02T00:00:{second}Z"),
            });
            sqlx::query(
                "INSERT INTO weft_server_records (kind, id, body, created_at, updated_at) \
                 VALUES ('thread', ?, ?, '2026-01-02T00:00:00Z', '2026-01-02T00:00:00Z')",
            )
            .bind(id)
            .bind(body.to_string())
            .execute(&pool)
            .await
            .unwrap();
        }
        let source = Source::Sqlite(pool);
        let by_user = |user: &str| serde_json::json!({"user": user}).as_object().cloned();
        let newest = ThreadScan::all(ThreadOrder::StateUpdatedAt, false);
        assert_eq!(scan(&source, newest).await, ["nul-values", "nul-metadata", "plain"]);
        let u1 = by_user("u1");
        assert_eq!(
            scan(&source, ThreadScan { metadata: u1.as_ref(), ..newest }).await,
            ["nul-values", "plain"]
        );
        let nul = by_user("u\u{0}1");
        assert_eq!(scan(&source, ThreadScan { metadata: nul.as_ref(), ..newest }).await, ["nul-metadata"]);
    }
}
