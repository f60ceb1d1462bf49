//! Reads of the SQLite saver: checkpoint rows, then the blobs and writes they need, in one read
//! transaction (a consistent snapshot under WAL).

use std::collections::HashMap;

use futures::TryStreamExt;
use sqlx::SqliteConnection;
use weft_graph::checkpoint::{CheckpointConfig, CheckpointError, CheckpointTuple, ListOptions};

use super::saver::backend;
use crate::sql::rows::{self, BlobRow, CheckpointRow, Parsed, Values, WriteRow};

type Row = (String, String, String, Option<String>, Vec<u8>, Vec<u8>);
type BlobTuple = (String, String, Option<String>, Option<Vec<u8>>);
type WriteTuple = (String, String, String, i64, String, Vec<u8>);

/// The columns of a checkpoint row, cast to the types they are read as: a value stored with another type
/// (SQLite keeps what it is given) then fails to parse and reads as corrupt, naming its thread and
/// checkpoint, instead of failing the whole query.
macro_rules! checkpoint_columns {
    () => {
        "SELECT CAST(thread_id AS TEXT), CAST(checkpoint_ns AS TEXT), CAST(checkpoint_id AS TEXT), \
         CAST(parent_checkpoint_id AS TEXT), CAST(checkpoint AS BLOB), CAST(metadata AS BLOB) FROM checkpoints "
    };
}

const BY_ID: &str =
    concat!(checkpoint_columns!(), "WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3");
const LATEST: &str = concat!(
    checkpoint_columns!(),
    "WHERE thread_id = ?1 AND checkpoint_ns = ?2 ORDER BY checkpoint_id DESC LIMIT 1"
);
const OF_THREAD: &str = concat!(
    checkpoint_columns!(),
    "WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id < ?3 ORDER BY checkpoint_id DESC"
);
const OF_THREAD_ALL: &str =
    concat!(checkpoint_columns!(), "WHERE thread_id = ?1 AND checkpoint_ns = ?2 ORDER BY checkpoint_id DESC");
const EVERY: &str = concat!(
    checkpoint_columns!(),
    "WHERE checkpoint_id < ?1 ORDER BY checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC"
);
const EVERY_ALL: &str =
    concat!(checkpoint_columns!(), "ORDER BY checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC");

/// The blobs of the (channel, version) pairs in `?3` and, for deltas, of their bases. `CROSS JOIN` keeps
/// the pairs as the outer loop (one key lookup each): with a plain `JOIN` SQLite 3.51 may scan the
/// thread's blobs instead, which grows with the thread's history (4 ms per read after 400 runs).
const BLOBS: &str = "
WITH RECURSIVE need(channel, version) AS (
    SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?3)
    UNION
    SELECT b.channel, b.base_version FROM need CROSS JOIN checkpoint_blobs b
        ON b.thread_id = ?1 AND b.checkpoint_ns = ?2 AND b.channel = need.channel AND b.version = need.version
    WHERE b.base_version IS NOT NULL
)
SELECT CAST(b.channel AS TEXT), CAST(b.version AS TEXT), CAST(b.base_version AS TEXT), CAST(b.blob AS BLOB)
    FROM need CROSS JOIN checkpoint_blobs b
    ON b.thread_id = ?1 AND b.checkpoint_ns = ?2 AND b.channel = need.channel AND b.version = need.version";

const WRITES: &str = "SELECT CAST(checkpoint_id AS TEXT), CAST(task_id AS TEXT), CAST(task_path AS TEXT), \
    CAST(idx AS INTEGER), CAST(channel AS TEXT), CAST(blob AS BLOB) FROM checkpoint_writes \
    WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id IN (SELECT value FROM json_each(?3))";

/// A checkpoint row; a record or metadata that is not UTF-8 text is corrupt.
fn row(
    (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata): Row,
) -> Result<CheckpointRow, CheckpointError> {
    let text = |what: &str, bytes: Vec<u8>| {
        String::from_utf8(bytes).map_err(|e| {
            CheckpointError::corrupt(&thread_id, &checkpoint_id, format!("the {what} is not UTF-8 text: {e}"))
        })
    };
    let checkpoint = text("checkpoint record", checkpoint)?;
    let metadata = text("metadata", metadata)?;
    Ok(CheckpointRow { thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata })
}

/// The checkpoint at `config` (by id or the latest), whole.
pub(super) async fn get_tuple(
    conn: &mut SqliteConnection,
    config: &CheckpointConfig,
) -> Result<Option<CheckpointTuple>, CheckpointError> {
    let query = match &config.checkpoint_id {
        Some(id) => {
            sqlx::query_as::<_, Row>(BY_ID).bind(&config.thread_id).bind(&config.checkpoint_ns).bind(id)
        }
        None => sqlx::query_as::<_, Row>(LATEST).bind(&config.thread_id).bind(&config.checkpoint_ns),
    };
    let Some(found) = query.fetch_optional(&mut *conn).await.map_err(backend)? else {
        return Ok(None);
    };
    let parsed = row(found)?.parse()?;
    Ok(finish_group(conn, vec![parsed]).await?.pop())
}

/// `list`: rows newest first, filtered on metadata as they stream, stopped at the limit.
pub(super) async fn list(
    conn: &mut SqliteConnection,
    config: Option<&CheckpointConfig>,
    options: &ListOptions,
) -> Result<Vec<CheckpointTuple>, CheckpointError> {
    let limit = options.limit.unwrap_or(usize::MAX);
    if limit == 0 {
        return Ok(Vec::new());
    }
    let before = options.before.as_deref();
    let query = match (config, before) {
        (Some(c), _) if c.checkpoint_id.is_some() => sqlx::query_as::<_, Row>(BY_ID)
            .bind(&c.thread_id)
            .bind(&c.checkpoint_ns)
            .bind(c.checkpoint_id.as_deref()),
        (Some(c), Some(b)) => {
            sqlx::query_as::<_, Row>(OF_THREAD).bind(&c.thread_id).bind(&c.checkpoint_ns).bind(b)
        }
        (Some(c), None) => sqlx::query_as::<_, Row>(OF_THREAD_ALL).bind(&c.thread_id).bind(&c.checkpoint_ns),
        (None, Some(b)) => sqlx::query_as::<_, Row>(EVERY).bind(b),
        (None, None) => sqlx::query_as::<_, Row>(EVERY_ALL),
    };
    let mut found = Vec::new();
    {
        let mut stream = query.fetch(&mut *conn);
        while let Some(r) = stream.try_next().await.map_err(backend)? {
            if before.is_some_and(|b| r.2.as_str() >= b) {
                continue;
            }
            let parsed = row(r)?.parse()?;
            if rows::metadata_matches(&parsed.metadata_json, &options.filter) {
                found.push(parsed);
                if found.len() >= limit {
                    break;
                }
            }
        }
    }
    finish_all(conn, found).await
}

/// Finishes checkpoints of several threads and namespaces, keeping their order.
async fn finish_all(
    conn: &mut SqliteConnection,
    parsed: Vec<Parsed>,
) -> Result<Vec<CheckpointTuple>, CheckpointError> {
    let mut groups: HashMap<(String, String), Vec<(usize, Parsed)>> = HashMap::new();
    let count = parsed.len();
    for (i, p) in parsed.into_iter().enumerate() {
        let key = (p.config.thread_id.clone(), p.config.checkpoint_ns.clone());
        groups.entry(key).or_default().push((i, p));
    }
    let mut out: Vec<Option<CheckpointTuple>> = (0..count).map(|_| None).collect();
    for (_, members) in groups {
        let (positions, group): (Vec<usize>, Vec<Parsed>) = members.into_iter().unzip();
        for (i, tuple) in positions.into_iter().zip(finish_group(conn, group).await?) {
            out[i] = Some(tuple);
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// Loads the values and writes of checkpoints of one thread and namespace.
async fn finish_group(
    conn: &mut SqliteConnection,
    parsed: Vec<Parsed>,
) -> Result<Vec<CheckpointTuple>, CheckpointError> {
    let Some(first) = parsed.first() else { return Ok(Vec::new()) };
    let (thread_id, ns) = (first.config.thread_id.clone(), first.config.checkpoint_ns.clone());
    let needed = rows::needed_versions(&parsed);
    let blob_rows: Vec<BlobTuple> = if needed.is_empty() {
        Vec::new()
    } else {
        sqlx::query_as(BLOBS)
            .bind(&thread_id)
            .bind(&ns)
            .bind(needed.json())
            .fetch_all(&mut *conn)
            .await
            .map_err(backend)?
    };
    let blobs = rows::blob_map(
        blob_rows
            .into_iter()
            .map(|(channel, version, base_version, blob)| BlobRow { channel, version, base_version, blob })
            .collect(),
    );
    let ids: Vec<&str> = parsed.iter().map(Parsed::id).collect();
    let ids_json = serde_json::to_string(&ids).unwrap_or_default();
    let write_rows: Vec<WriteTuple> = sqlx::query_as(WRITES)
        .bind(&thread_id)
        .bind(&ns)
        .bind(ids_json)
        .fetch_all(&mut *conn)
        .await
        .map_err(backend)?;
    let mut writes: HashMap<String, Vec<WriteRow>> = HashMap::new();
    for (checkpoint_id, task_id, task_path, idx, channel, blob) in write_rows {
        let row = WriteRow { task_id, task_path, idx, channel, blob };
        writes.entry(checkpoint_id).or_default().push(row);
    }
    let mut values = Values::new(&blobs);
    parsed
        .into_iter()
        .map(|p| {
            let own = writes.remove(p.id()).unwrap_or_default();
            p.finish(&mut values, own)
        })
        .collect()
}
