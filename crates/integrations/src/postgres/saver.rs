//! `PostgresSaver`: the checkpointer on PostgreSQL.

use std::collections::BTreeSet;
use std::fmt;

use async_trait::async_trait;
use serde_json::Value;
use weft_graph::checkpoint::{
    ChannelAppends, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointError, CheckpointMetadata,
    CheckpointTuple, Checkpointer, ListOptions, SaveOp, put_one_by_one,
};

use super::put::{self, check_config, check_text};
use super::statements::{
    COPY, DELETE, HAS_CHECKPOINTS, PRUNE_BLOBS, PRUNE_CHAINS, PRUNE_CHECKPOINTS, PRUNE_WHOLE, PUT_WRITES,
};
use super::{Pg, PgConnection, PgPool, PostgresOptions, Target, batch, read, redact, schema};
use crate::savers::{copy_refused, saved_config, writes_checkpoint};
use crate::sql::StorageStats;
use crate::sql::delta::{BlobRecord, DeltaPlanner, compact_long_chain, compact_long_chains};
use crate::sql::heads::HeadChecks;
use crate::sql::prune::{self, ChainRow, ChainTuple};
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
    crate::sql::checkpoint_error(redact(&format!("postgres: {e}")), e)
}

impl PostgresSaver {
    /// Connects a pool to `url` with default options and creates or updates weft's tables.
    pub async fn connect(url: &str) -> Result<Self, CheckpointError> {
        Self::connect_with(url, PostgresOptions::default()).await
    }

    /// Connects a pool to `url` with `options` and creates or updates weft's tables.
    pub async fn connect_with(url: &str, options: PostgresOptions) -> Result<Self, CheckpointError> {
        let pg = Pg::connect(url, &options).await.map_err(CheckpointError::backend)?;
        Self::with_pg(pg, &options).await
    }

    /// A saver on the caller's pool (`options.max_connections`, `acquire_timeout` and `schema` are not
    /// used: the pool has its own settings) after creating or updating weft's tables.
    pub async fn from_pool(pool: PgPool, options: PostgresOptions) -> Result<Self, CheckpointError> {
        Self::with_pg(Pg::from_pool(pool, &options), &options).await
    }

    async fn with_pg(pg: Pg, options: &PostgresOptions) -> Result<Self, CheckpointError> {
        pg.migrate("checkpoint", schema::CHECKPOINT).await?;
        Ok(Self { pg, delta: DeltaPlanner::new(options.delta) })
    }

    /// The pool (share it with a [`PostgresStore`](super::PostgresStore)).
    pub fn pool(&self) -> &PgPool {
        &self.pg.statements.pool
    }

    /// Row counts and data bytes of every thread.
    pub async fn storage_stats(&self) -> Result<StorageStats, CheckpointError> {
        let pg = &self.pg;
        let counts: (i64, i64, i64, i64) = pg
            .run("storage_stats", move || {
                pg.statements.fetch_one(sqlx::query_as(
                    "SELECT (SELECT count(*) FROM checkpoints), (SELECT count(*) FROM checkpoint_blobs), \
                     (SELECT count(*) FROM checkpoint_writes), \
                     ((SELECT coalesce(sum(octet_length(checkpoint::text) + octet_length(metadata::text)), 0) \
                        FROM checkpoints) \
                     + (SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_blobs) \
                     + (SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_writes))::bigint",
                ))
            })
            .await
            .map_err(backend)?;
        Ok(StorageStats::from_counts(counts))
    }
}

impl PostgresSaver {
    /// Stores `ops` as [`put_batch`](Checkpointer::put_batch) does (in one statement, the expected
    /// heads checked: a [`Conflict`](weft_graph::checkpoint::CheckpointErrorKind::Conflict) writes
    /// nothing), but in the caller's open transaction on `conn`, which it leaves open: the saves are
    /// stored when, and only if, the caller commits it, together with what else the caller wrote there
    /// (a server records a run's end in the transaction that stores the run's last checkpoint). The
    /// heads checked stay locked until that transaction ends. Not retried: a failed statement ends the
    /// caller's transaction, which is the caller's to roll back; a conflict leaves it usable. Behind a
    /// transaction-mode pooler this is as safe as any statement in a transaction. Should the caller
    /// roll back, a later save that extends a list stored here finds its base missing and stores the
    /// whole list.
    pub async fn put_batch_in(
        &self,
        conn: &mut PgConnection,
        ops: Vec<SaveOp>,
    ) -> Result<(), CheckpointError> {
        if ops.is_empty() {
            return Ok(());
        }
        let checks = HeadChecks::of(&ops);
        let prepared = self.pg.statements.prepared;
        self.write_batch(&mut Target::Transaction { conn, prepared }, ops, checks).await
    }

    /// Reads the checkpoint at `config` (by id, or the latest) as
    /// [`get_tuple`](Checkpointer::get_tuple) does, in the caller's open transaction on `conn` (with
    /// that transaction's view, in one statement, not retried): a server reads a thread's head in the
    /// transaction that makes a run on it, and hands it to the run
    /// ([`ThreadHead`](weft_graph::ThreadHead)).
    pub async fn get_tuple_in(
        &self,
        conn: &mut PgConnection,
        config: &CheckpointConfig,
    ) -> Result<Option<CheckpointTuple>, CheckpointError> {
        check_config(config)?;
        let prepared = self.pg.statements.prepared;
        read::get_tuple(&mut Target::Transaction { conn, prepared }, config).await
    }

    /// For a statement of the caller's that reads a thread's head in the same round trip as its own work
    /// (a server reads it in the statement that records the run it makes): the SQL of a lateral source
    /// (`... LEFT JOIN LATERAL <source> h ON true`) of the latest checkpoint of the thread named by
    /// parameter `$param`, in its root namespace, as [`get_tuple_in`](PostgresSaver::get_tuple_in)
    /// reads it; [`head_of_row`](PostgresSaver::head_of_row) reads its columns back.
    pub fn head_source(param: usize) -> String {
        read::head_source(param)
    }

    /// The checkpoint read by a [`head_source`](PostgresSaver::head_source) whose columns start at
    /// column `first` of `row`; `None` when the thread has none there (the columns are null).
    pub fn head_of_row(
        row: &sqlx::postgres::PgRow,
        first: usize,
    ) -> Result<Option<CheckpointTuple>, CheckpointError> {
        read::head_of_row(row, first)
    }

    /// Writes `ops` as one batch on `target`; a batch not stored as planned makes the delta planner
    /// forget its threads.
    async fn write_batch(
        &self,
        target: &mut Target<'_>,
        ops: Vec<SaveOp>,
        checks: Option<HeadChecks>,
    ) -> Result<(), CheckpointError> {
        let mut ops = ops;
        let mut parents = Vec::new();
        for (i, parent) in self.delta.parents_to_read(&ops) {
            parents.push((i, read::get_tuple(target, &parent).await?));
        }
        let compacted = compact_long_chains(&self.delta, &mut ops, parents);
        let mut threads = BTreeSet::new();
        let planned = batch::rows_of(&self.delta, ops, &mut threads);
        self.delta.forget_lists(&compacted);
        let result = match planned {
            Ok(rows) => batch::write(target, rows, checks.as_ref()).await,
            Err(e) => Err(e),
        };
        self.delta.settle(&threads, result)
    }

    async fn put_one(
        &self,
        config: &CheckpointConfig,
        mut checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        mut new_versions: ChannelVersions,
        mut appends: ChannelAppends,
    ) -> Result<CheckpointConfig, CheckpointError> {
        check_config(config)?;
        check_text("checkpoint id", &checkpoint.id)?;
        let parent = if self.delta.reads_parent(config, &appends) {
            read::get_tuple(&mut Target::Pool(&self.pg), config).await?
        } else {
            None
        };
        let compacted = compact_long_chain(&self.delta, config, &mut checkpoint, &mut appends, parent);
        let rows::PreparedPut { body, metadata, values } =
            rows::prepare_put(config, &mut checkpoint, &metadata, &mut new_versions)?;
        let plan = self.delta.plan_with_appends(
            &config.thread_id,
            &config.checkpoint_ns,
            values,
            new_versions,
            appends,
        );
        let records: Vec<&BlobRecord> = plan.records.iter().collect();
        let mut stored_whole = Vec::new();
        if !put::put_statement(&self.pg, config, &checkpoint, &body, &metadata, &records).await? {
            // A delta's base is gone (pruned or deleted meanwhile): store those values whole; the
            // engine's appends have no whole list to fall back on.
            if let Some(r) = plan.records.iter().find(|r| r.base_version.is_some() && r.whole.is_none()) {
                self.delta.forget_thread(&config.thread_id);
                return Err(r.missing_base(&config.thread_id));
            }
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
            if !put::put_statement(&self.pg, config, &checkpoint, &body, &metadata, &whole).await? {
                return Err(CheckpointError::backend(format!(
                    "checkpoint '{}' of thread '{}' was not stored: another thread's row has its key",
                    checkpoint.id, config.thread_id
                )));
            }
        }
        self.delta.commit(plan, &stored_whole);
        self.delta.forget_lists(&compacted);
        Ok(saved_config(config, checkpoint.id))
    }
}

/// What `copy_thread` found.
enum Copy {
    Done,
    NoSource,
    TargetBusy,
}

#[async_trait]
impl Checkpointer for PostgresSaver {
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>, CheckpointError> {
        check_config(config)?;
        read::get_tuple(&mut Target::Pool(&self.pg), config).await
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
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig, CheckpointError> {
        self.put_one(config, checkpoint, metadata, new_versions, ChannelAppends::new()).await
    }

    /// Stores the engine's appends as rows of new items on their base version (O(new items) a step),
    /// unless delta storage is off.
    fn stores_appends(&self) -> bool {
        self.delta.enabled()
    }

    async fn put_with_appends(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        appends: ChannelAppends,
    ) -> Result<CheckpointConfig, CheckpointError> {
        self.put_one(config, checkpoint, metadata, new_versions, appends).await
    }

    /// The whole batch in one statement (one round trip): all or nothing is stored. With expected
    /// heads, in a transaction that first locks the checked threads and namespaces (advisory locks) and
    /// reads their heads.
    async fn put_batch(&self, ops: Vec<SaveOp>) -> Result<(), CheckpointError> {
        let checks = HeadChecks::of(&ops);
        if ops.len() < 2 && checks.is_none() {
            return put_one_by_one(self, ops).await;
        }
        self.write_batch(&mut Target::Pool(&self.pg), ops, checks).await
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<(), CheckpointError> {
        check_config(config)?;
        let checkpoint_id = writes_checkpoint(config, task_id)?;
        check_text("task id", task_id)?;
        let records = rows::write_records(writes);
        let idxs: Vec<i64> = records.iter().map(|r| r.idx).collect();
        let channels: Vec<&str> = records.iter().map(|r| r.channel.as_str()).collect();
        let blobs: Vec<&[u8]> = records.iter().map(|r| r.blob.as_slice()).collect();
        let (pg, idxs, channels, blobs) = (&self.pg, &idxs, &channels, &blobs);
        pg.run("put_writes", move || {
            pg.statements.execute(
                sqlx::query(PUT_WRITES)
                    .bind(&config.thread_id)
                    .bind(&config.checkpoint_ns)
                    .bind(checkpoint_id)
                    .bind(task_id)
                    .bind(task_path)
                    .bind(idxs)
                    .bind(channels)
                    .bind(blobs),
            )
        })
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<(), CheckpointError> {
        check_text("thread id", thread_id)?;
        self.delta.forget_thread(thread_id);
        let pg = &self.pg;
        pg.run("delete_thread", move || pg.statements.execute(sqlx::query(DELETE).bind(thread_id)))
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn copy_thread(&self, src: &str, dst: &str) -> Result<(), CheckpointError> {
        check_text("thread id", src)?;
        check_text("thread id", dst)?;
        let pg = &self.pg;
        let outcome = pg
            .run("copy_thread", move || async move {
                let mut tx = pg.statements.pool.begin().await?;
                let has = |thread: &str| {
                    sqlx::query_scalar::<_, bool>(HAS_CHECKPOINTS)
                        .bind(thread.to_owned())
                        .persistent(pg.statements.prepared)
                };
                if !has(src).fetch_one(&mut *tx).await? {
                    tx.rollback().await?;
                    return Ok(Copy::NoSource);
                }
                if has(dst).fetch_one(&mut *tx).await? {
                    tx.rollback().await?;
                    return Ok(Copy::TargetBusy);
                }
                sqlx::query(DELETE).bind(dst).persistent(pg.statements.prepared).execute(&mut *tx).await?;
                for statement in COPY {
                    sqlx::query(statement)
                        .bind(src)
                        .bind(dst)
                        .persistent(pg.statements.prepared)
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
            Copy::NoSource => Err(copy_refused(src, dst, false)),
            Copy::TargetBusy => Err(copy_refused(src, dst, true)),
        }
    }

    /// One transaction: the dropped checkpoints and their writes go, every kept value stored as a delta
    /// on a dropped version is stored whole at its version, then every value no checkpoint lists goes.
    async fn prune(&self, thread_id: &str, keep_latest: usize) -> Result<(), CheckpointError> {
        check_text("thread id", thread_id)?;
        let keep = i64::try_from(keep_latest).unwrap_or(i64::MAX);
        let pg = &self.pg;
        pg.run("prune", move || async move {
            let mut tx = pg.statements.pool.begin().await?;
            let query =
                |sql: &'static str| sqlx::query(sql).bind(thread_id).persistent(pg.statements.prepared);
            query(PRUNE_CHECKPOINTS).bind(keep).execute(&mut *tx).await?;
            let chains: Vec<ChainTuple> = sqlx::query_as(PRUNE_CHAINS)
                .bind(thread_id)
                .persistent(pg.statements.prepared)
                .fetch_all(&mut *tx)
                .await?;
            let whole = prune::whole_values(thread_id, chains.into_iter().map(ChainRow::from));
            if !whole.is_empty() {
                let ns: Vec<&str> = whole.iter().map(|w| w.ns.as_str()).collect();
                let channels: Vec<&str> = whole.iter().map(|w| w.channel.as_str()).collect();
                let versions: Vec<&str> = whole.iter().map(|w| w.version.as_str()).collect();
                let blobs: Vec<&[u8]> = whole.iter().map(|w| w.blob.as_slice()).collect();
                query(PRUNE_WHOLE)
                    .bind(ns)
                    .bind(channels)
                    .bind(versions)
                    .bind(blobs)
                    .execute(&mut *tx)
                    .await?;
            }
            query(PRUNE_BLOBS).execute(&mut *tx).await?;
            tx.commit().await
        })
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn list_ids(&self, config: &CheckpointConfig) -> Result<Vec<String>, CheckpointError> {
        check_config(config)?;
        let pg = &self.pg;
        pg.run("list_ids", move || {
            pg.statements.fetch_all(sqlx::query_scalar(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_key = md5($1)::uuid AND thread_id = $1 \
                     AND ns_key = md5($2)::uuid AND checkpoint_ns = $2 ORDER BY checkpoint_id DESC",
            )
            .bind(&config.thread_id)
            .bind(&config.checkpoint_ns))
        })
        .await
        .map_err(backend)
    }
}
