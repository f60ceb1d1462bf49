//! `PostgresSaver`: the checkpointer on PostgreSQL.

use std::fmt;

use async_trait::async_trait;
use serde_json::Value;
use weft_graph::checkpoint::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointError, CheckpointMetadata, CheckpointTuple,
    Checkpointer, ListOptions,
};

use super::{Pg, PgPool, PostgresOptions, read, redact, schema};
use crate::sql::StorageStats;
use crate::sql::codec;
use crate::sql::delta::{BlobRecord, DeltaPlanner};
use crate::sql::rows;

/// A checkpointer on PostgreSQL, sharing one connection pool among every thread (no lock of its own).
/// See the [module docs](super) for the layout, pooler support, retries and the handling of secrets.
///
/// ```no_run
/// use weft_integrations::postgres::{PostgresOptions, PostgresSaver};
/// # async fn demo() -> Result<(), weft_graph::CheckpointError> {
/// let saver = PostgresSaver::connect("postgres://app:secret@db.internal/app").await?;
/// // Behind a transaction-mode pooler:
/// let pooled = PostgresSaver::connect_with(
///     "postgres://app:secret@pgbouncer.internal:6432/app",
///     PostgresOptions::default().without_prepared_statements(),
/// )
/// .await?;
/// # Ok(()) }
/// ```
pub struct PostgresSaver {
    pg: Pg,
    delta: DeltaPlanner,
}

impl fmt::Debug for PostgresSaver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresSaver").field("db", &self.pg).finish_non_exhaustive()
    }
}

pub(super) fn backend(e: sqlx::Error) -> CheckpointError {
    CheckpointError::Backend(redact(&format!("postgres: {e}")))
}

impl PostgresSaver {
    /// Connects a pool to `url` with default options and creates or updates weft's tables.
    pub async fn connect(url: &str) -> Result<Self, CheckpointError> {
        Self::connect_with(url, PostgresOptions::default()).await
    }

    /// Connects a pool to `url` with `options` and creates or updates weft's tables.
    pub async fn connect_with(url: &str, options: PostgresOptions) -> Result<Self, CheckpointError> {
        let pg = Pg::connect(url, &options).await.map_err(CheckpointError::Backend)?;
        Self::with_pg(pg, &options).await
    }

    /// A saver on the caller's pool (`options.max_connections`, `acquire_timeout` and `schema` are not
    /// used: the pool has its own settings) after creating or updating weft's tables.
    pub async fn from_pool(pool: PgPool, options: PostgresOptions) -> Result<Self, CheckpointError> {
        Self::with_pg(Pg::from_pool(pool, &options), &options).await
    }

    async fn with_pg(pg: Pg, options: &PostgresOptions) -> Result<Self, CheckpointError> {
        pg.migrate("checkpoint", schema::CHECKPOINT).await.map_err(CheckpointError::Backend)?;
        Ok(Self { pg, delta: DeltaPlanner::new(options.delta) })
    }

    /// The pool (share it with a [`PostgresStore`](super::PostgresStore)).
    pub fn pool(&self) -> &PgPool {
        &self.pg.pool
    }

    /// Row counts and data bytes of every thread.
    pub async fn storage_stats(&self) -> Result<StorageStats, CheckpointError> {
        let pg = &self.pg;
        let (checkpoints, blobs, writes, data_bytes): (i64, i64, i64, i64) = pg
            .retry
            .run("storage_stats", move || {
                sqlx::query_as(
                    "SELECT (SELECT count(*) FROM checkpoints), (SELECT count(*) FROM checkpoint_blobs), \
                     (SELECT count(*) FROM checkpoint_writes), \
                     ((SELECT coalesce(sum(octet_length(checkpoint::text) + octet_length(metadata::text)), 0) \
                        FROM checkpoints) \
                     + (SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_blobs) \
                     + (SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_writes))::bigint",
                )
                .persistent(pg.persistent)
                .fetch_one(&pg.pool)
            })
            .await
            .map_err(backend)?;
        let n = |v: i64| u64::try_from(v).unwrap_or(0);
        Ok(StorageStats {
            checkpoints: n(checkpoints),
            blobs: n(blobs),
            writes: n(writes),
            data_bytes: n(data_bytes),
        })
    }

    /// One statement: the checkpoint, its whole values and its deltas, all written only when every delta's
    /// base is there. Returns whether it was written.
    async fn put_statement(
        &self,
        config: &CheckpointConfig,
        checkpoint: &Checkpoint,
        body: &str,
        metadata: &str,
        records: &[&BlobRecord],
    ) -> Result<bool, CheckpointError> {
        let (mut whole, mut delta) = (Columns::default(), Columns::default());
        for record in records {
            let columns = if record.base_version.is_some() { &mut delta } else { &mut whole };
            columns.channels.push(record.channel.as_str());
            columns.versions.push(record.version.as_str());
            columns.bases.push(record.base_version.as_deref());
            columns.blobs.push(record.blob.as_deref());
        }
        let (pg, whole, delta) = (&self.pg, &whole, &delta);
        let written: i64 = pg
            .retry
            .run("put", move || {
                sqlx::query_scalar(PUT)
                    .bind(&config.thread_id)
                    .bind(&config.checkpoint_ns)
                    .bind(&checkpoint.id)
                    .bind(config.checkpoint_id.as_deref())
                    .bind(body)
                    .bind(metadata)
                    .bind(&whole.channels)
                    .bind(&whole.versions)
                    .bind(&whole.blobs)
                    .bind(&delta.channels)
                    .bind(&delta.versions)
                    .bind(&delta.bases)
                    .bind(&delta.blobs)
                    .persistent(pg.persistent)
                    .fetch_one(&pg.pool)
            })
            .await
            .map_err(backend)?;
        Ok(written > 0)
    }
}

#[derive(Default)]
struct Columns<'a> {
    channels: Vec<&'a str>,
    versions: Vec<&'a str>,
    bases: Vec<Option<&'a str>>,
    blobs: Vec<Option<&'a [u8]>>,
}

/// `$1` thread, `$2` namespace, `$3` id, `$4` parent, `$5` body, `$6` metadata; whole values `$7-$9`;
/// deltas `$10-$13` (channel, version, base, blob).
const PUT: &str = r#"
WITH ok AS (
    SELECT count(*) = cardinality($12::text[]) AS ok FROM checkpoint_blobs b
    JOIN unnest($10::text[], $12::text[]) AS d(channel, base) ON b.channel = d.channel AND b.version = d.base
    WHERE b.thread_key = md5($1)::uuid AND b.ns_key = md5($2)::uuid AND b.thread_id = $1 AND b.checkpoint_ns = $2
),
cp AS (
    INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
    SELECT $1, $2, $3, $4, $5::jsonb, $6::jsonb FROM ok WHERE ok.ok
    ON CONFLICT (thread_key, ns_key, checkpoint_id) DO UPDATE SET
        parent_checkpoint_id = excluded.parent_checkpoint_id, checkpoint = excluded.checkpoint,
        metadata = excluded.metadata
    WHERE checkpoints.thread_id = excluded.thread_id AND checkpoints.checkpoint_ns = excluded.checkpoint_ns
    RETURNING 1
),
whole AS (
    INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, blob)
    SELECT $1, $2, t.channel, t.version, t.blob
    FROM unnest($7::text[], $8::text[], $9::bytea[]) AS t(channel, version, blob), ok WHERE ok.ok
    ON CONFLICT DO NOTHING
),
delta AS (
    INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, base_version, blob)
    SELECT $1, $2, d.channel, d.version, d.base, d.blob
    FROM unnest($10::text[], $11::text[], $12::text[], $13::bytea[]) AS d(channel, version, base, blob), ok
    WHERE ok.ok
    ON CONFLICT DO NOTHING
)
SELECT count(*) FROM cp"#;

const PUT_WRITES: &str = r#"
INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, blob)
SELECT $1, $2, $3, $4, $5, w.idx, w.channel, w.blob
FROM unnest($6::bigint[], $7::text[], $8::bytea[]) AS w(idx, channel, blob)
ON CONFLICT (thread_key, ns_key, checkpoint_id, task_id, idx) DO UPDATE SET
    task_path = excluded.task_path, channel = excluded.channel, blob = excluded.blob
WHERE excluded.idx < 0 AND checkpoint_writes.thread_id = excluded.thread_id
    AND checkpoint_writes.checkpoint_ns = excluded.checkpoint_ns"#;

const DELETE: &str = r#"
WITH a AS (DELETE FROM checkpoints WHERE thread_key = md5($1)::uuid AND thread_id = $1),
     b AS (DELETE FROM checkpoint_blobs WHERE thread_key = md5($1)::uuid AND thread_id = $1)
DELETE FROM checkpoint_writes WHERE thread_key = md5($1)::uuid AND thread_id = $1"#;

/// Keeps the newest `$2` checkpoints per namespace of thread `$1`, their writes and the blobs they need
/// (delta bases included), in one statement.
const PRUNE: &str = r#"
WITH RECURSIVE ranked AS (
    SELECT checkpoint_ns, checkpoint_id, checkpoint,
        row_number() OVER (PARTITION BY checkpoint_ns ORDER BY checkpoint_id DESC) AS rn
    FROM checkpoints WHERE thread_key = md5($1)::uuid AND thread_id = $1
),
dropped AS (
    DELETE FROM checkpoints c USING ranked r
    WHERE c.thread_key = md5($1)::uuid AND c.thread_id = $1 AND c.checkpoint_ns = r.checkpoint_ns
        AND c.checkpoint_id = r.checkpoint_id AND r.rn > $2
),
writes AS (
    DELETE FROM checkpoint_writes w WHERE w.thread_key = md5($1)::uuid AND w.thread_id = $1
        AND NOT EXISTS (SELECT 1 FROM ranked r WHERE r.rn <= $2 AND r.checkpoint_ns = w.checkpoint_ns
            AND r.checkpoint_id = w.checkpoint_id)
),
keep(ns, channel, version) AS (
    SELECT r.checkpoint_ns, v.key COLLATE "C", v.value COLLATE "C" FROM ranked r, jsonb_each_text(
        CASE WHEN jsonb_typeof(r.checkpoint -> 'channel_versions') = 'object'
        THEN r.checkpoint -> 'channel_versions' ELSE '{}'::jsonb END) v
    WHERE r.rn <= $2
    UNION
    SELECT b.checkpoint_ns, b.channel, b.base_version FROM keep k JOIN checkpoint_blobs b
        ON b.thread_key = md5($1)::uuid AND b.thread_id = $1 AND b.checkpoint_ns = k.ns
        AND b.channel = k.channel AND b.version = k.version
    WHERE b.base_version IS NOT NULL
)
DELETE FROM checkpoint_blobs b WHERE b.thread_key = md5($1)::uuid AND b.thread_id = $1
    AND NOT EXISTS (SELECT 1 FROM keep k WHERE k.ns = b.checkpoint_ns AND k.channel = b.channel
        AND k.version = b.version)"#;

const HAS_CHECKPOINTS: &str =
    "SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_key = md5($1)::uuid AND thread_id = $1)";
const COPY: [&str; 3] = [
    "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata) \
     SELECT $2, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata FROM checkpoints \
     WHERE thread_key = md5($1)::uuid AND thread_id = $1",
    "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, base_version, blob) \
     SELECT $2, checkpoint_ns, channel, version, base_version, blob FROM checkpoint_blobs \
     WHERE thread_key = md5($1)::uuid AND thread_id = $1",
    "INSERT INTO checkpoint_writes \
     (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel, blob) \
     SELECT $2, checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel, blob FROM checkpoint_writes \
     WHERE thread_key = md5($1)::uuid AND thread_id = $1",
];

/// What `copy_thread` found.
enum Copy {
    Done,
    NoSource,
    TargetBusy,
}

/// PostgreSQL text cannot hold NUL characters: such ids are refused up front, named.
fn check_text(what: &str, text: &str) -> Result<(), CheckpointError> {
    if text.contains('\0') {
        return Err(CheckpointError::Invalid(format!(
            "{what} {text:?} contains a NUL character, which PostgreSQL text cannot store"
        )));
    }
    Ok(())
}

fn check_config(config: &CheckpointConfig) -> Result<(), CheckpointError> {
    check_text("thread id", &config.thread_id)?;
    check_text("checkpoint namespace", &config.checkpoint_ns)?;
    config.checkpoint_id.as_deref().map_or(Ok(()), |id| check_text("checkpoint id", id))
}

#[async_trait]
impl Checkpointer for PostgresSaver {
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>, CheckpointError> {
        check_config(config)?;
        read::get_tuple(&self.pg, config).await
    }

    async fn list(
        &self,
        config: Option<&CheckpointConfig>,
        options: ListOptions,
    ) -> Result<Vec<CheckpointTuple>, CheckpointError> {
        config.map_or(Ok(()), check_config)?;
        read::list(&self.pg, config, &options).await
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        mut checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig, CheckpointError> {
        check_config(config)?;
        check_text("checkpoint id", &checkpoint.id)?;
        if checkpoint.id.is_empty() {
            return Err(CheckpointError::Invalid(format!(
                "checkpoint for thread '{}' has an empty id",
                config.thread_id
            )));
        }
        let metadata = Value::Object(rows::metadata_json(&metadata, config, &checkpoint.id)?).to_string();
        let values = std::mem::take(&mut checkpoint.channel_values);
        let body = codec::encode_checkpoint(&checkpoint).map_err(|message| CheckpointError::Serialize {
            thread_id: config.thread_id.clone(),
            channel: "(checkpoint)".into(),
            message,
        })?;
        let plan = self.delta.plan(&config.thread_id, &config.checkpoint_ns, values, new_versions);
        let records: Vec<&BlobRecord> = plan.records.iter().collect();
        let mut stored_whole = Vec::new();
        if !self.put_statement(config, &checkpoint, &body, &metadata, &records).await? {
            // A delta's base is gone (pruned or deleted meanwhile): store those values whole.
            let whole: Vec<BlobRecord> = plan
                .records
                .iter()
                .map(|r| match r.base_version {
                    Some(_) => {
                        stored_whole.push(r.channel.clone());
                        BlobRecord { base_version: None, blob: r.whole_blob(), whole: None, ..r.clone() }
                    }
                    None => r.clone(),
                })
                .collect();
            let whole: Vec<&BlobRecord> = whole.iter().collect();
            if !self.put_statement(config, &checkpoint, &body, &metadata, &whole).await? {
                return Err(CheckpointError::Backend(format!(
                    "checkpoint '{}' of thread '{}' was not stored: another thread's row has its key",
                    checkpoint.id, config.thread_id
                )));
            }
        }
        self.delta.commit(plan, &stored_whole);
        Ok(CheckpointConfig {
            thread_id: config.thread_id.clone(),
            checkpoint_ns: config.checkpoint_ns.clone(),
            checkpoint_id: Some(checkpoint.id),
        })
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<(), CheckpointError> {
        check_config(config)?;
        let Some(checkpoint_id) = config.checkpoint_id.as_deref() else {
            return Err(CheckpointError::Invalid(format!(
                "writes of task '{task_id}' in thread '{}' name no checkpoint id",
                config.thread_id
            )));
        };
        check_text("task id", task_id)?;
        let records = rows::write_records(writes);
        let idxs: Vec<i64> = records.iter().map(|r| r.idx).collect();
        let channels: Vec<&str> = records.iter().map(|r| r.channel.as_str()).collect();
        let blobs: Vec<&[u8]> = records.iter().map(|r| r.blob.as_slice()).collect();
        let (pg, idxs, channels, blobs) = (&self.pg, &idxs, &channels, &blobs);
        pg.retry
            .run("put_writes", move || {
                sqlx::query(PUT_WRITES)
                    .bind(&config.thread_id)
                    .bind(&config.checkpoint_ns)
                    .bind(checkpoint_id)
                    .bind(task_id)
                    .bind(task_path)
                    .bind(idxs)
                    .bind(channels)
                    .bind(blobs)
                    .persistent(pg.persistent)
                    .execute(&pg.pool)
            })
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<(), CheckpointError> {
        check_text("thread id", thread_id)?;
        self.delta.forget_thread(thread_id);
        let pg = &self.pg;
        pg.retry
            .run("delete_thread", move || {
                sqlx::query(DELETE).bind(thread_id).persistent(pg.persistent).execute(&pg.pool)
            })
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn copy_thread(&self, src: &str, dst: &str) -> Result<(), CheckpointError> {
        check_text("thread id", src)?;
        check_text("thread id", dst)?;
        let pg = &self.pg;
        let outcome = pg
            .retry
            .run("copy_thread", move || async move {
                let mut tx = pg.pool.begin().await?;
                let has = |thread: &str| {
                    sqlx::query_scalar::<_, bool>(HAS_CHECKPOINTS)
                        .bind(thread.to_owned())
                        .persistent(pg.persistent)
                };
                if !has(src).fetch_one(&mut *tx).await? {
                    tx.rollback().await?;
                    return Ok(Copy::NoSource);
                }
                if has(dst).fetch_one(&mut *tx).await? {
                    tx.rollback().await?;
                    return Ok(Copy::TargetBusy);
                }
                sqlx::query(DELETE).bind(dst).persistent(pg.persistent).execute(&mut *tx).await?;
                for statement in COPY {
                    sqlx::query(statement)
                        .bind(src)
                        .bind(dst)
                        .persistent(pg.persistent)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(Copy::Done)
            })
            .await
            .map_err(backend)?;
        match outcome {
            Copy::Done => {
                self.delta.forget_thread(dst);
                Ok(())
            }
            Copy::NoSource => {
                Err(CheckpointError::Invalid(format!("cannot copy thread '{src}': it has no checkpoints")))
            }
            Copy::TargetBusy => Err(CheckpointError::Invalid(format!(
                "cannot copy thread '{src}' to thread '{dst}': '{dst}' already has checkpoints"
            ))),
        }
    }

    async fn prune(&self, thread_id: &str, keep_latest: usize) -> Result<(), CheckpointError> {
        check_text("thread id", thread_id)?;
        let keep = i64::try_from(keep_latest).unwrap_or(i64::MAX);
        let pg = &self.pg;
        pg.retry
            .run("prune", move || {
                sqlx::query(PRUNE).bind(thread_id).bind(keep).persistent(pg.persistent).execute(&pg.pool)
            })
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn list_ids(&self, config: &CheckpointConfig) -> Result<Vec<String>, CheckpointError> {
        check_config(config)?;
        let pg = &self.pg;
        pg.retry
            .run("list_ids", move || {
                sqlx::query_scalar(
                    "SELECT checkpoint_id FROM checkpoints WHERE thread_key = md5($1)::uuid AND thread_id = $1 \
                     AND ns_key = md5($2)::uuid AND checkpoint_ns = $2 ORDER BY checkpoint_id DESC",
                )
                .bind(&config.thread_id)
                .bind(&config.checkpoint_ns)
                .persistent(pg.persistent)
                .fetch_all(&pg.pool)
            })
            .await
            .map_err(backend)
    }
}
