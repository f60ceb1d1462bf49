//! The SQLite saver's batched saves: the checkpoints and writes a run queued in `async` durability, in
//! one transaction and a few multi-row statements (up to 64 rows each), so a batch of many supersteps
//! costs a handful of round trips to SQLite's worker thread instead of several per superstep.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};
use sqlx::SqliteConnection;
use sqlx::sqlite::{Sqlite, SqliteArguments};
use weft_graph::checkpoint::{CheckpointError, SaveOp};

use super::saver::backend;
use crate::sql::delta::{BlobRecord, DeltaPlanner};
use crate::sql::rows;

/// Rows per statement, largest first: a batch is cut into chunks of these sizes, so only a few
/// statement texts exist (and stay prepared).
const CHUNKS: [usize; 4] = [64, 16, 4, 1];

/// A multi-row `INSERT`: its head, the number of columns per row and its tail (conflict rule).
struct Insert {
    head: &'static str,
    columns: usize,
    tail: &'static str,
    /// The statement text for each chunk size of [`CHUNKS`].
    texts: OnceLock<Vec<String>>,
}

impl Insert {
    const fn new(head: &'static str, columns: usize, tail: &'static str) -> Self {
        Self { head, columns, tail, texts: OnceLock::new() }
    }

    fn text(&self, chunk: usize) -> &str {
        let texts = self.texts.get_or_init(|| {
            let row = format!("({})", vec!["?"; self.columns].join(", "));
            CHUNKS
                .iter()
                .map(|&n| format!("{} VALUES {}{}", self.head, vec![row.as_str(); n].join(", "), self.tail))
                .collect()
        });
        let at = CHUNKS.iter().position(|&n| n == chunk).unwrap_or(CHUNKS.len() - 1);
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

/// How many of the `[thread, ns, channel, base]` rows of `?1` (deltas on versions stored before the
/// batch) have no stored base.
const MISSING_BASES: &str = "SELECT count(*) FROM json_each(?1) d WHERE NOT EXISTS (SELECT 1 \
    FROM checkpoint_blobs b WHERE b.thread_id = d.value ->> 0 AND b.checkpoint_ns = d.value ->> 1 \
    AND b.channel = d.value ->> 2 AND b.version = d.value ->> 3)";

type Query<'q> = sqlx::query::Query<'q, Sqlite, SqliteArguments>;

/// Inserts `rows` through `insert`, in order, in chunks of [`CHUNKS`] sizes.
async fn insert_all<R>(
    conn: &mut SqliteConnection,
    insert: &'static Insert,
    rows: Vec<R>,
    bind: fn(Query<'static>, R) -> Query<'static>,
) -> Result<(), CheckpointError> {
    let mut rows = rows.into_iter().peekable();
    let mut left = rows.len();
    while left > 0 {
        let size = CHUNKS.iter().copied().find(|&n| n <= left).unwrap_or(1);
        let mut query = sqlx::query(insert.text(size));
        for row in rows.by_ref().take(size) {
            query = bind(query, row);
        }
        query.execute(&mut *conn).await.map_err(backend)?;
        left -= size;
    }
    Ok(())
}

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
    channel: Arc<str>,
    version: Arc<str>,
    base: Option<Arc<str>>,
    blob: Option<Vec<u8>>,
    /// For a delta: the whole list, stored instead when its base is gone.
    whole: Option<Vec<u8>>,
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

/// Checks every op and turns it into rows, planning deltas in order (each checkpoint's plan sees the
/// ones before it). Nothing is written yet; an invalid op fails the whole batch.
/// `threads` receives the threads of the ops read, even when one is invalid.
pub(super) fn rows_of(
    delta: &DeltaPlanner,
    ops: Vec<SaveOp>,
    threads: &mut BTreeSet<String>,
) -> Result<Rows, CheckpointError> {
    let mut rows = Rows::default();
    for op in ops {
        threads.insert(op.thread_id().to_owned());
        match op {
            SaveOp::Put { config, mut checkpoint, metadata, new_versions, appends, .. } => {
                let rows::PreparedPut { body, metadata, values } =
                    rows::prepare_put(&config, &mut checkpoint, &metadata)?;
                let mut plan = delta.plan_with_appends(
                    &config.thread_id,
                    &config.checkpoint_ns,
                    values,
                    new_versions,
                    appends,
                );
                let (thread, ns) = (
                    Arc::<str>::from(config.thread_id.as_str()),
                    Arc::<str>::from(config.checkpoint_ns.as_str()),
                );
                for record in std::mem::take(&mut plan.records) {
                    push_blob(&mut rows, &thread, &ns, record);
                }
                // The next checkpoint of the batch may extend these lists; a failed batch forgets them.
                delta.commit(plan, &[]);
                rows.checkpoints.push(CheckpointIn {
                    thread,
                    ns,
                    id: checkpoint.id.into(),
                    parent: config.checkpoint_id.clone(),
                    body,
                    metadata,
                });
            }
            SaveOp::Writes { config, writes, task_id, task_path } => {
                let Some(checkpoint_id) = &config.checkpoint_id else {
                    return Err(CheckpointError::Invalid(format!(
                        "writes of task '{task_id}' in thread '{}' name no checkpoint id",
                        config.thread_id
                    )));
                };
                let (thread, ns) = (
                    Arc::<str>::from(config.thread_id.as_str()),
                    Arc::<str>::from(config.checkpoint_ns.as_str()),
                );
                let (checkpoint, task, path) = (Arc::<str>::from(checkpoint_id.as_str()), task_id, task_path);
                for record in rows::write_records(writes) {
                    rows.writes.push(WriteIn {
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
    }
    Ok(rows)
}

fn push_blob(rows: &mut Rows, thread: &Arc<str>, ns: &Arc<str>, record: BlobRecord) {
    let whole = record.whole_blob();
    rows.has_deltas |= record.base_version.is_some();
    rows.blobs.push(BlobIn {
        thread: Arc::clone(thread),
        ns: Arc::clone(ns),
        channel: record.channel,
        version: record.version,
        base: record.base_version,
        blob: record.blob,
        whole,
    });
}

/// Whether every delta's base is stored: stored before the batch (one query) or written by it.
async fn bases_stored(conn: &mut SqliteConnection, blobs: &[BlobIn]) -> Result<bool, CheckpointError> {
    let mut written = BTreeSet::new();
    let mut outside = Vec::new();
    for b in blobs {
        if let Some(base) = &b.base {
            if !written.contains(&(&b.thread, &b.ns, &b.channel, base)) {
                outside.push(json!([&*b.thread, &*b.ns, b.channel, base]));
            }
        }
        written.insert((&b.thread, &b.ns, &b.channel, &b.version));
    }
    if outside.is_empty() {
        return Ok(true);
    }
    let outside = Value::Array(outside).to_string();
    let missing: i64 =
        sqlx::query_scalar(MISSING_BASES).bind(outside).fetch_one(&mut *conn).await.map_err(backend)?;
    Ok(missing == 0)
}

/// Writes the rows in the open transaction `conn`. Returns `false` when deltas were stored as whole
/// lists because a base they extend is gone (pruned or deleted meanwhile).
pub(super) async fn write(conn: &mut SqliteConnection, rows: Rows) -> Result<bool, CheckpointError> {
    let Rows { checkpoints, mut blobs, has_deltas, writes } = rows;
    let mut kept = true;
    if has_deltas && !bases_stored(conn, &blobs).await? {
        // The engine's appends have no whole list to fall back on.
        if let Some(b) = blobs.iter().find(|b| b.base.is_some() && b.whole.is_none()) {
            let record = BlobRecord {
                channel: b.channel.clone(),
                version: b.version.clone(),
                base_version: b.base.clone(),
                blob: None,
                whole: None,
            };
            return Err(record.missing_base(&b.thread));
        }
        kept = false;
        for blob in &mut blobs {
            if let Some(whole) = blob.whole.take() {
                blob.base = None;
                blob.blob = Some(whole);
            }
        }
    }
    insert_all(conn, &CHECKPOINTS, checkpoints, |q, r| {
        q.bind(r.thread).bind(r.ns).bind(r.id).bind(r.parent).bind(r.body).bind(r.metadata)
    })
    .await?;
    insert_all(conn, &BLOBS, blobs, |q, r| {
        q.bind(r.thread).bind(r.ns).bind(r.channel).bind(r.version).bind(r.base).bind(r.blob)
    })
    .await?;
    insert_all(conn, &WRITES, writes, |q, r| {
        q.bind(r.thread)
            .bind(r.ns)
            .bind(r.checkpoint)
            .bind(r.task)
            .bind(r.idx)
            .bind(r.path)
            .bind(r.channel)
            .bind(r.blob)
    })
    .await?;
    Ok(kept)
}
