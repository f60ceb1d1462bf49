//! The SQLite saver's batched saves: the checkpoints and writes of a batch (a run's saves of one step, or
//! of many when the backend fell behind) as one script, sent to SQLite's worker thread in one round
//! trip: `BEGIN IMMEDIATE`, the checks (expected heads, stored bases of deltas) kept in a temporary
//! table and returned, the rows in a few multi-row `INSERT`s (up to 64 rows each) that store nothing unless the
//! checks passed, `COMMIT`. The round trips to the worker, not SQLite's work, were most of a save's
//! cost; a save is now one.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};
use sqlx::pool::PoolConnection;
use sqlx::sqlite::{Sqlite, SqliteArguments};
use sqlx::{Arguments, AssertSqlSafe, Encode, Row, Type};
use weft_graph::checkpoint::{CheckpointError, SaveOp};

use super::group::{SqlParam, SqlStatement};
use super::saver::backend;
use crate::sql::batch::{BatchRows, PlannedCheckpoint, PlannedWrites, plan_batch};
use crate::sql::delta::{BlobRecord, DeltaPlanner};
use crate::sql::heads::{self, AssumedHead, Attempt, HeadChecks};

/// Rows per statement: a batch of up to [`EXACT`] rows of a table is one statement; more are cut into
/// statements of [`LARGE`], [`EXACT`] and fewer rows, so few statement texts exist (and stay prepared).
const EXACT: usize = 16;
/// See [`EXACT`].
const LARGE: usize = 64;

/// The rows of the next statement when `left` rows remain.
fn chunk(left: usize) -> usize {
    if left >= LARGE { LARGE } else { left.min(EXACT) }
}

/// A multi-row `INSERT`: its head, the number of columns per row and its tail (conflict rule).
struct Insert {
    head: &'static str,
    columns: usize,
    tail: &'static str,
    /// The statement text for 1 to [`EXACT`] rows, then for [`LARGE`].
    texts: OnceLock<Vec<String>>,
}

impl Insert {
    const fn new(head: &'static str, columns: usize, tail: &'static str) -> Self {
        Self { head, columns, tail, texts: OnceLock::new() }
    }

    fn text(&self, rows: usize) -> &str {
        let texts = self.texts.get_or_init(|| {
            let row = format!("({})", vec!["?"; self.columns].join(", "));
            (1..=EXACT)
                .chain([LARGE])
                .map(|n| {
                    let rows = vec![row.as_str(); n].join(", ");
                    format!("{} SELECT * FROM (VALUES {rows}){CHECKED}{};\n", self.head, self.tail)
                })
                .collect()
        });
        let at = if rows == LARGE { EXACT } else { rows.clamp(1, EXACT) - 1 };
        &texts[at]
    }
}

/// A later row of the same id replaces an earlier one.
static CHECKPOINTS: Insert = Insert::new(
    "INSERT INTO checkpoints \
     (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)",
    6,
    " ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET \
     parent_checkpoint_id = excluded.parent_checkpoint_id, checkpoint = excluded.checkpoint, \
     metadata = excluded.metadata",
);

/// The first row of a version stays.
static BLOBS: Insert = Insert::new(
    "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, base_version, blob)",
    6,
    " ON CONFLICT DO NOTHING",
);

/// Regular writes are inserted if absent, special ones (negative index) replace earlier ones.
static WRITES: Insert = Insert::new(
    "INSERT INTO checkpoint_writes \
     (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel, blob)",
    8,
    " ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET \
     task_path = excluded.task_path, channel = excluded.channel, blob = excluded.blob WHERE excluded.idx < 0",
);

/// The script's checks, one row per connection (a temporary table: no other connection sees it): whether
/// the bases are stored, whether the heads are as assumed, and the heads found (a JSON array). Created
/// when the saver's own pools connect, by the script itself on a caller's pool.
pub(super) const CHECKS_TABLE: &str = "CREATE TEMP TABLE IF NOT EXISTS weft_batch_checks \
    (bases INTEGER NOT NULL, heads INTEGER NOT NULL, found TEXT NOT NULL)";

/// The start of the statement that fills the checks.
const CHECKS: &str = "INSERT OR REPLACE INTO temp.weft_batch_checks (rowid, bases, heads, found) SELECT 1, ";

/// The condition of every insert of the script (SQLite needs a `WHERE` before an upsert's `ON CONFLICT`
/// in `INSERT … SELECT`). Kept in a table, not recomputed per insert: the checkpoints inserted move the
/// heads.
const CHECKED: &str = " WHERE (SELECT bases AND heads FROM temp.weft_batch_checks)";

/// Stops a script whose checks failed with an error (an invalid JSON text is one; read from the table so
/// that SQLite does not compute it ahead as a constant), before the callers' statements that follow it.
const CHECKED_OR_FAIL: &str = "SELECT CASE WHEN (SELECT bases AND heads FROM temp.weft_batch_checks) THEN 1 \
    ELSE json('a check of the batch failed: ' || (SELECT found FROM temp.weft_batch_checks)) END;\n";

/// The head of one thread and namespace (binds: thread, namespace).
const HEAD: &str = "(SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?)";

/// Whether every `[thread, ns, channel, version]` of the JSON bound has a stored blob.
const BASES_STORED: &str = "NOT EXISTS (SELECT 1 FROM json_each(?) d WHERE NOT EXISTS (SELECT 1 \
    FROM checkpoint_blobs b WHERE b.thread_id = d.value ->> 0 AND b.checkpoint_ns = d.value ->> 1 \
    AND b.channel = d.value ->> 2 AND b.version = d.value ->> 3))";

#[derive(Debug)]
struct CheckpointIn {
    thread: Arc<str>,
    ns: Arc<str>,
    id: Arc<str>,
    parent: Option<String>,
    body: String,
    metadata: String,
}

#[derive(Debug)]
struct BlobIn {
    thread: Arc<str>,
    ns: Arc<str>,
    /// The value (a delta keeps its whole list, encoded only if its base is gone).
    record: BlobRecord,
}

#[derive(Debug)]
struct WriteIn {
    thread: Arc<str>,
    ns: Arc<str>,
    checkpoint: Arc<str>,
    task: Arc<str>,
    idx: i64,
    path: Arc<str>,
    channel: String,
    blob: Vec<u8>,
}

/// The rows of a batch, per table, in order.
#[derive(Debug, Default)]
pub(super) struct Rows {
    checkpoints: Vec<CheckpointIn>,
    blobs: Vec<BlobIn>,
    has_deltas: bool,
    writes: Vec<WriteIn>,
}

impl Rows {
    /// How many checkpoints, blobs and writes it holds.
    pub(super) fn sizes(&self) -> [usize; 3] {
        [self.checkpoints.len(), self.blobs.len(), self.writes.len()]
    }

    /// Moves `other`'s rows after these (a batch written after this one, in the same transaction).
    pub(super) fn append(&mut self, other: &mut Rows) {
        self.checkpoints.append(&mut other.checkpoints);
        self.blobs.append(&mut other.blobs);
        self.writes.append(&mut other.writes);
        self.has_deltas |= std::mem::take(&mut other.has_deltas);
    }

    /// Cuts appended batches apart again, by their [`sizes`](Rows::sizes) in order.
    pub(super) fn split(mut self, sizes: &[[usize; 3]]) -> Vec<Rows> {
        let mut parts = Vec::with_capacity(sizes.len());
        for &[checkpoints, blobs, writes] in sizes.iter().rev() {
            let cut = |n: usize, len: usize| len.saturating_sub(n);
            let blobs = self.blobs.split_off(cut(blobs, self.blobs.len()));
            parts.push(Rows {
                checkpoints: self.checkpoints.split_off(cut(checkpoints, self.checkpoints.len())),
                has_deltas: blobs.iter().any(|b| b.record.base_version.is_some()),
                blobs,
                writes: self.writes.split_off(cut(writes, self.writes.len())),
            });
        }
        parts.reverse();
        parts
    }
}

/// Whether the batch can go through the batch statements: no NUL characters in names (the check of
/// delta bases passes them as JSON).
pub(super) fn batchable(ops: &[SaveOp]) -> bool {
    let clean = |s: &str| !s.contains('\0');
    ops.iter().all(|op| match op {
        SaveOp::Put { config, checkpoint, new_versions, .. } => {
            clean(&config.thread_id)
                && clean(&config.checkpoint_ns)
                && config.checkpoint_id.as_deref().is_none_or(clean)
                && clean(&checkpoint.id)
                && new_versions.iter().all(|(c, v)| clean(c) && clean(v))
        }
        SaveOp::Writes { config, writes, task_id, task_path } => {
            clean(&config.thread_id)
                && clean(&config.checkpoint_ns)
                && config.checkpoint_id.as_deref().is_none_or(clean)
                && clean(task_id)
                && clean(task_path)
                && writes.iter().all(|(c, _)| clean(c))
        }
    })
}

/// Checks every op and turns it into rows (see [`plan_batch`]); `threads` receives the threads of the ops
/// read, even when one is invalid.
pub(super) fn rows_of(
    delta: &DeltaPlanner,
    ops: Vec<SaveOp>,
    threads: &mut BTreeSet<String>,
) -> Result<Rows, CheckpointError> {
    plan_batch(delta, ops, threads, |_| Ok(()))
}

impl BatchRows for Rows {
    fn push_checkpoint(&mut self, checkpoint: PlannedCheckpoint) {
        let PlannedCheckpoint { config, id, body, metadata, records } = checkpoint;
        let (thread, ns) =
            (Arc::<str>::from(config.thread_id.as_str()), Arc::<str>::from(config.checkpoint_ns.as_str()));
        for record in records {
            push_blob(self, &thread, &ns, record);
        }
        self.checkpoints.push(CheckpointIn {
            thread,
            ns,
            id: id.into(),
            parent: config.checkpoint_id.clone(),
            body,
            metadata,
        });
    }

    fn push_writes(&mut self, writes: PlannedWrites) {
        let PlannedWrites { config, checkpoint_id, task_id, task_path, records } = writes;
        let (thread, ns) =
            (Arc::<str>::from(config.thread_id.as_str()), Arc::<str>::from(config.checkpoint_ns.as_str()));
        let (checkpoint, task, path) = (Arc::<str>::from(checkpoint_id), task_id, task_path);
        for record in records {
            self.writes.push(WriteIn {
                thread: Arc::clone(&thread),
                ns: Arc::clone(&ns),
                checkpoint: Arc::clone(&checkpoint),
                task: Arc::clone(&task),
                idx: record.idx,
                path: Arc::clone(&path),
                channel: record.channel,
                blob: record.blob,
            });
        }
    }
}

fn push_blob(rows: &mut Rows, thread: &Arc<str>, ns: &Arc<str>, record: BlobRecord) {
    rows.has_deltas |= record.base_version.is_some();
    rows.blobs.push(BlobIn { thread: Arc::clone(thread), ns: Arc::clone(ns), record });
}

/// The writer connection while a script runs. A script stopped part-way (an error, or the caller gone
/// while SQLite's worker ran it) leaves its transaction open: it is rolled back before anyone else uses
/// the connection.
pub(super) struct Writer {
    conn: Option<PoolConnection<Sqlite>>,
    open: bool,
    /// Whether the connection has the checks table ([`CHECKS_TABLE`]).
    temp_ready: bool,
}

impl Writer {
    pub(super) fn new(conn: PoolConnection<Sqlite>, temp_ready: bool) -> Self {
        Self { conn: Some(conn), open: false, temp_ready }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let (true, Some(mut conn)) = (self.open, self.conn.take()) else { return };
        match tokio::runtime::Handle::try_current() {
            // Back to the pool once rolled back (an error then: no transaction was open).
            Ok(runtime) => drop(runtime.spawn(async move {
                let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
            })),
            // Closing the connection rolls back too.
            Err(_) => conn.close_on_drop(),
        }
    }
}

/// A script and its arguments, built together (every `?` takes the next argument).
struct Script {
    text: String,
    args: SqliteArguments,
}

impl Script {
    fn arg<'t, T: Encode<'t, Sqlite> + Type<Sqlite> + 't>(
        &mut self,
        value: T,
    ) -> Result<(), CheckpointError> {
        self.args
            .add(value)
            .map_err(|e| CheckpointError::backend(format!("sqlite: cannot bind a value of a batch: {e}")))
    }

    /// Appends the rows through `insert`, in statements of [`chunk`] rows.
    fn insert<R>(
        &mut self,
        insert: &'static Insert,
        rows: &[R],
        bind: fn(&mut Self, &R) -> Result<(), CheckpointError>,
    ) -> Result<(), CheckpointError> {
        let mut rest = rows;
        while !rest.is_empty() {
            let size = chunk(rest.len());
            self.text.push_str(insert.text(size));
            for row in &rest[..size] {
                bind(self, row)?;
            }
            rest = &rest[size..];
        }
        Ok(())
    }
}

/// Stores the rows in one transaction (see the [module docs](self)). Returns `false` when deltas were
/// stored as whole lists because a base they extend is gone (pruned or deleted meanwhile).
pub(super) async fn write(
    writer: &mut Writer,
    rows: &mut Rows,
    checks: Option<&HeadChecks>,
    statements: &[&SqlStatement],
) -> Result<bool, CheckpointError> {
    if run(writer, rows, rows.has_deltas, checks, statements).await? {
        return Ok(true);
    }
    // The engine's appends have no whole list to fall back on.
    if let Some(b) = rows.blobs.iter().find(|b| b.record.base_version.is_some() && b.record.whole.is_none()) {
        return Err(b.record.missing_base(&b.thread));
    }
    for blob in &mut rows.blobs {
        let record = &mut blob.record;
        if record.base_version.is_some() {
            record.blob = record.whole_blob();
            record.base_version = None;
        }
    }
    rows.has_deltas = false;
    if run(writer, rows, false, checks, statements).await? {
        return Ok(false);
    }
    Err(CheckpointError::backend("a batch of checkpoints was not stored: its values' bases are gone"))
}

/// Runs the script, and once more when the stored heads are the batch's own (its reply was lost);
/// `false` when a base stored before the batch is missing (nothing written then).
async fn run(
    writer: &mut Writer,
    rows: &Rows,
    check_bases: bool,
    checks: Option<&HeadChecks>,
    statements: &[&SqlStatement],
) -> Result<bool, CheckpointError> {
    let mut attempts = heads::Attempts::new(checks);
    loop {
        let outcome = run_assuming(writer, rows, check_bases, checks, attempts.assumed(), statements).await?;
        if let Some(stored) = attempts.settle(outcome)? {
            return Ok(stored);
        }
    }
}

/// Runs the script assuming `assumed` heads: `Err` with the heads found when they are others.
async fn run_assuming(
    writer: &mut Writer,
    rows: &Rows,
    check_bases: bool,
    checks: Option<&HeadChecks>,
    assumed: &[AssumedHead],
    statements: &[&SqlStatement],
) -> Result<Attempt, CheckpointError> {
    heads::precheck(checks, assumed)?;
    let script = script(rows, check_bases, assumed, writer.temp_ready, statements)?;
    let Some(conn) = writer.conn.as_mut() else {
        return Err(CheckpointError::backend("sqlite: the writer connection is gone"));
    };
    writer.open = true;
    let result = sqlx::query_with(AssertSqlSafe(script.text), script.args).fetch_all(&mut **conn).await;
    let found = match result {
        Ok(found) => found,
        Err(e) => {
            // A failed statement leaves the transaction open; when none is open the rollback fails.
            let _ = sqlx::query("ROLLBACK").execute(&mut **conn).await;
            writer.open = false;
            return Err(backend(e));
        }
    };
    writer.open = false;
    let Some(checked) = found.first() else {
        return Err(CheckpointError::backend("sqlite: a batch's checks returned no row"));
    };
    let (bases, heads_ok): (bool, bool) =
        (checked.try_get(0).map_err(backend)?, checked.try_get(1).map_err(backend)?);
    if !heads_ok {
        let found: String = checked.try_get(2).map_err(backend)?;
        let found: Vec<Option<String>> = serde_json::from_str(&found).map_err(|e| {
            CheckpointError::backend(format!("sqlite: the heads a batch found do not read back: {e}"))
        })?;
        let heads = assumed
            .iter()
            .zip(found)
            .filter_map(|(h, head)| Some(((h.thread.clone(), h.ns.clone()), head?)))
            .collect();
        return Ok(Err(heads));
    }
    Ok(Ok(bases))
}

/// The script of a batch assuming `assumed` heads; with `check_bases`, the bases of its deltas that it
/// does not write itself must be stored already.
fn script(
    rows: &Rows,
    check_bases: bool,
    assumed: &[AssumedHead],
    temp_ready: bool,
    statements: &[&SqlStatement],
) -> Result<Script, CheckpointError> {
    let mut s = Script { text: String::with_capacity(1024), args: SqliteArguments::default() };
    s.text.push_str("BEGIN IMMEDIATE;\n");
    if !temp_ready {
        s.text.push_str(CHECKS_TABLE);
        s.text.push_str(";\n");
    }
    s.text.push_str(CHECKS);
    let outside = if check_bases { outside_bases(&rows.blobs) } else { Vec::new() };
    if outside.is_empty() {
        s.text.push('1');
    } else {
        s.text.push_str(BASES_STORED);
        s.arg(Value::Array(outside).to_string())?;
    }
    s.text.push_str(", 1");
    for h in assumed {
        s.text.push_str(" AND ");
        if h.exact {
            s.text.push_str(HEAD);
            s.text.push_str(" IS ?");
        } else {
            s.text.push_str("coalesce(");
            s.text.push_str(HEAD);
            s.text.push_str(" < ?, 1)");
        }
        s.arg(h.thread.as_str())?;
        s.arg(h.ns.as_str())?;
        s.arg(h.want.as_deref())?;
    }
    s.text.push_str(", json_array(");
    for (i, h) in assumed.iter().enumerate() {
        if i > 0 {
            s.text.push_str(", ");
        }
        s.text.push_str(HEAD);
        s.arg(h.thread.as_str())?;
        s.arg(h.ns.as_str())?;
    }
    s.text.push_str(") RETURNING bases, heads, found;\n");
    // Checkpoints last: the checks read the heads they move.
    s.insert(&BLOBS, &rows.blobs, |s, r| {
        s.arg(&*r.thread)?;
        s.arg(&*r.ns)?;
        s.arg(&*r.record.channel)?;
        s.arg(&*r.record.version)?;
        s.arg(r.record.base_version.as_deref())?;
        s.arg(r.record.blob.as_deref())
    })?;
    s.insert(&WRITES, &rows.writes, |s, r| {
        s.arg(&*r.thread)?;
        s.arg(&*r.ns)?;
        s.arg(&*r.checkpoint)?;
        s.arg(&*r.task)?;
        s.arg(r.idx)?;
        s.arg(&*r.path)?;
        s.arg(r.channel.as_str())?;
        s.arg(r.blob.as_slice())
    })?;
    s.insert(&CHECKPOINTS, &rows.checkpoints, |s, r| {
        s.arg(&*r.thread)?;
        s.arg(&*r.ns)?;
        s.arg(&*r.id)?;
        s.arg(r.parent.as_deref())?;
        s.arg(r.body.as_str())?;
        s.arg(r.metadata.as_str())
    })?;
    // The callers' own statements, only when the checks passed: otherwise the script stops here with an
    // error (and the transaction is rolled back), so that they are never stored without the batch.
    if !statements.is_empty() {
        s.text.push_str(CHECKED_OR_FAIL);
    }
    for statement in statements {
        s.text.push_str(statement.sql());
        s.text.push_str(";\n");
        for param in statement.params() {
            match param {
                SqlParam::Null => s.arg(Option::<&str>::None)?,
                SqlParam::Integer(n) => s.arg(*n)?,
                SqlParam::Text(t) => s.arg(t.as_str())?,
            }
        }
    }
    s.text.push_str("COMMIT;");
    Ok(s)
}

/// The `[thread, ns, channel, base]` of every delta whose base the batch does not write itself.
fn outside_bases(blobs: &[BlobIn]) -> Vec<Value> {
    let mut written = BTreeSet::new();
    let mut outside = Vec::new();
    for b in blobs {
        let r = &b.record;
        if let Some(base) = &r.base_version {
            if !written.contains(&(&b.thread, &b.ns, &r.channel, base)) {
                outside.push(json!([&*b.thread, &*b.ns, &*r.channel, &**base]));
            }
        }
        written.insert((&b.thread, &b.ns, &r.channel, &r.version));
    }
    outside
}
