//! Reads of the PostgreSQL saver: one statement returns each checkpoint with the blobs it needs (delta
//! bases included, each looked up by key in `weft_checkpoint_blobs`, see [`super::schema`]) and its
//! pending writes, so a read is one round trip and sees one snapshot, and its cost does not grow with
//! the thread's history.

use serde_json::Value;
use sqlx::Row;
use sqlx::postgres::PgRow;
use weft_graph::checkpoint::{CheckpointConfig, CheckpointError, CheckpointTuple, ListOptions};

use super::saver::backend;
use super::{Pg, Target};
use crate::sql::rows::{self, BlobRow, CheckpointRow, Parsed, Values, WriteRow};

macro_rules! select_tuples {
    ($pick:literal, $order:literal) => {
        concat!(
            r#"SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id,
    c.checkpoint::text, c.metadata::text, b.channel_list, b.version_list, b.base_list, b.blob_list,
    w.task_ids, w.task_paths, w.idxs, w.channels, w.blobs
FROM (SELECT * FROM checkpoints c "#,
            $pick,
            r#") c
CROSS JOIN LATERAL weft_checkpoint_blobs(c.thread_key, c.ns_key, c.thread_id, c.checkpoint_ns,
    c.checkpoint -> 'channel_versions') b
LEFT JOIN LATERAL (
    SELECT array_agg(cw.task_id) AS task_ids, array_agg(cw.task_path) AS task_paths,
        array_agg(cw.idx) AS idxs, array_agg(cw.channel) AS channels, array_agg(cw.blob) AS blobs
    FROM checkpoint_writes cw
    WHERE cw.thread_key = c.thread_key AND cw.ns_key = c.ns_key AND cw.thread_id = c.thread_id
        AND cw.checkpoint_ns = c.checkpoint_ns AND cw.checkpoint_id = c.checkpoint_id
) w ON true
ORDER BY "#,
            $order
        )
    };
}

/// Checkpoints of one thread and namespace, newest first: `$3` an id (or null), `$4` before (or null), `$5`
/// a metadata containment filter (or null), `$6` a limit (or null). `weft_checkpoint_list` (see
/// [`super::schema`]) picks (and limits) them from the thread's newest index entry before it reads their
/// blobs and writes, so a page costs what it holds, not the thread's history.
const OF_THREAD: &str = "SELECT * FROM weft_checkpoint_list($1, $2, $3, $4, $5::jsonb, $6)";

/// One checkpoint of a thread and namespace, the latest when `$3` is null: the same columns as
/// [`select_tuples!`], from `weft_checkpoint_tuple` (see [`super::schema`]), whose queries are planned
/// once per connection.
const ONE: &str = "SELECT * FROM weft_checkpoint_tuple($1, $2, $3)";

/// Checkpoints of every thread: `$1` before, `$2` filter, `$3` limit (each may be null).
const EVERY: &str = select_tuples!(
    "WHERE ($1::text IS NULL OR c.checkpoint_id < $1) AND ($2::jsonb IS NULL OR c.metadata @> $2::jsonb)
ORDER BY c.checkpoint_id DESC, c.thread_id DESC, c.checkpoint_ns DESC LIMIT $3",
    "c.checkpoint_id DESC, c.thread_id DESC, c.checkpoint_ns DESC"
);

/// The checkpoint at `config` (by id or the latest), whole, read on `target`.
pub(super) async fn get_tuple(
    target: &mut Target<'_>,
    config: &CheckpointConfig,
) -> Result<Option<CheckpointTuple>, CheckpointError> {
    let rows = target
        .fetch_all("get_tuple", || {
            sqlx::query(ONE)
                .bind(&config.thread_id)
                .bind(&config.checkpoint_ns)
                .bind(config.checkpoint_id.as_deref())
        })
        .await
        .map_err(backend)?;
    rows.into_iter().next().map(|row| decode(&row, 0)?.finish()).transpose()
}

/// A lateral source of [`ONE`]'s columns for a statement of a caller's: thread `$param`'s latest
/// checkpoint in its root namespace (no row when it has none).
pub(super) fn head_source(param: usize) -> String {
    format!("weft_checkpoint_tuple(${param}, '', NULL)")
}

/// The checkpoint of a row whose columns from `first` on are [`head_source`]'s, whole; `None` when they
/// are null (no checkpoint, through an outer join).
pub(super) fn head_of_row(row: &PgRow, first: usize) -> Result<Option<CheckpointTuple>, CheckpointError> {
    let thread: Option<String> = row.try_get(first).map_err(backend)?;
    if thread.is_none() {
        return Ok(None);
    }
    decode(row, first)?.finish().map(Some)
}

/// `list`: the metadata filter runs in the database as containment, then exactly in weft (containment
/// is looser for numbers, lists and maps; then the limit applies in weft too).
pub(super) async fn list(
    pg: &Pg,
    config: Option<&CheckpointConfig>,
    options: &ListOptions,
) -> Result<Vec<CheckpointTuple>, CheckpointError> {
    let limit = options.limit.unwrap_or(usize::MAX);
    if limit == 0 {
        return Ok(Vec::new());
    }
    let exact_in_sql =
        options.filter.values().all(|v| matches!(v, Value::String(_) | Value::Bool(_) | Value::Null));
    let sql_limit = exact_in_sql.then(|| i64::try_from(limit).ok()).flatten();
    let filter = (!options.filter.is_empty()).then(|| Value::Object(options.filter.clone()).to_string());
    let filter = filter.as_deref();
    let before = options.before.as_deref();
    let rows = pg
        .run("list", move || {
            let query = match config {
                Some(c) => sqlx::query(OF_THREAD)
                    .bind(&c.thread_id)
                    .bind(&c.checkpoint_ns)
                    .bind(c.checkpoint_id.as_deref())
                    .bind(before)
                    .bind(filter)
                    .bind(sql_limit),
                None => sqlx::query(EVERY).bind(before).bind(filter).bind(sql_limit),
            };
            pg.statements.fetch_all(query)
        })
        .await
        .map_err(backend)?;
    let mut out = Vec::new();
    for row in rows {
        let found = decode(&row, 0)?;
        if !rows::metadata_matches(&found.parsed.metadata_json, &options.filter) {
            continue;
        }
        out.push(found.finish()?);
        if out.len() >= limit {
            break;
        }
    }
    Ok(out)
}

/// A checkpoint read with what it needs.
struct Found {
    parsed: Parsed,
    blobs: Vec<BlobRow>,
    writes: Vec<WriteRow>,
}

impl Found {
    fn finish(self) -> Result<CheckpointTuple, CheckpointError> {
        let blobs = rows::blob_map(self.blobs);
        self.parsed.finish(&mut Values::new(&blobs), self.writes)
    }
}

/// One row of [`select_tuples!`] (its columns from `at` on), its checkpoint parsed.
fn decode(row: &PgRow, at: usize) -> Result<Found, CheckpointError> {
    let get = |e: sqlx::Error| backend(e);
    let checkpoint = CheckpointRow {
        thread_id: row.try_get(at).map_err(get)?,
        checkpoint_ns: row.try_get(at + 1).map_err(get)?,
        checkpoint_id: row.try_get(at + 2).map_err(get)?,
        parent_checkpoint_id: row.try_get(at + 3).map_err(get)?,
        checkpoint: row.try_get(at + 4).map_err(get)?,
        metadata: row.try_get(at + 5).map_err(get)?,
    };
    let channels: Vec<String> = row.try_get::<Option<_>, _>(at + 6).map_err(get)?.unwrap_or_default();
    let versions: Vec<String> = row.try_get::<Option<_>, _>(at + 7).map_err(get)?.unwrap_or_default();
    let bases: Vec<Option<String>> = row.try_get::<Option<_>, _>(at + 8).map_err(get)?.unwrap_or_default();
    let blobs: Vec<Option<Vec<u8>>> = row.try_get::<Option<_>, _>(at + 9).map_err(get)?.unwrap_or_default();
    let blob_rows = channels
        .into_iter()
        .zip(versions)
        .zip(bases.into_iter().zip(blobs))
        .map(|((channel, version), (base_version, blob))| BlobRow { channel, version, base_version, blob })
        .collect();
    let task_ids: Vec<String> = row.try_get::<Option<_>, _>(at + 10).map_err(get)?.unwrap_or_default();
    let task_paths: Vec<String> = row.try_get::<Option<_>, _>(at + 11).map_err(get)?.unwrap_or_default();
    let idxs: Vec<i64> = row.try_get::<Option<_>, _>(at + 12).map_err(get)?.unwrap_or_default();
    let write_channels: Vec<String> = row.try_get::<Option<_>, _>(at + 13).map_err(get)?.unwrap_or_default();
    let write_blobs: Vec<Vec<u8>> = row.try_get::<Option<_>, _>(at + 14).map_err(get)?.unwrap_or_default();
    let writes = task_ids
        .into_iter()
        .zip(task_paths)
        .zip(idxs.into_iter().zip(write_channels.into_iter().zip(write_blobs)))
        .map(|((task_id, task_path), (idx, (channel, blob)))| WriteRow {
            task_id,
            task_path,
            idx,
            channel,
            blob,
        })
        .collect();
    Ok(Found { parsed: checkpoint.parse()?, blobs: blob_rows, writes })
}
