//! `SqliteSaver`: the checkpointer on SQLite.

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use async_trait::async_trait;
use serde_json::Value;
use weft_graph::checkpoint::{
    ChannelAppends, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointError, CheckpointMetadata,
    CheckpointTuple, Checkpointer, ExpectedHead, ListOptions, SaveOp,
};

use super::group::{GroupCommit, SqlStatement};
use super::statements::{
    COPY, DELETE, HAS_CHECKPOINTS, HEAD, PRUNE_BLOBS, PRUNE_CHAINS, PRUNE_CHECKPOINTS, PRUNE_WHOLE,
    PRUNE_WRITES, PUT_BLOB, PUT_CHECKPOINT, PUT_DELTA, PUT_WRITE,
};
use super::{Db, DeltaStorage, SqliteOptions, SqlitePool, batch, read, schema};
use crate::savers::{PutOne, copy_refused, put_each, put_one_methods, saved_config, writes_checkpoint};
use crate::sql::StorageStats;
use crate::sql::delta::{BlobRecord, DeltaPlanner, compact_long_chain, compact_long_chains};
use crate::sql::heads::HeadChecks;
use crate::sql::prune::{self, ChainRow, ChainTuple};
use crate::sql::rows;

/// A checkpointer on SQLite: a file (WAL, durability as [`SqliteOptions::durability`] says) or a private
/// in-memory database. See the [module docs](super) for the layout and the durability trade-off.
///
/// ```
/// use weft_integrations::sqlite::SqliteSaver;
/// # tokio_test::block_on(async {
/// let dir = std::env::temp_dir().join(format!("weft-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let saver = SqliteSaver::open(dir.join("weft.db")).await.unwrap();
/// // Give it to a graph: `graph.compile_with(CompileConfig { checkpointer: Some(Arc::new(saver)), .. })`.
/// # drop(saver);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # });
/// ```
pub struct SqliteSaver {
    db: Db,
    delta: DeltaPlanner,
    /// The queue every batch of saves (and [`write_with_checkpoints`](Self::write_with_checkpoints)) goes
    /// through: what queues while one transaction commits goes in the next, together.
    group: GroupCommit,
}

impl fmt::Debug for SqliteSaver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteSaver").field("db", &self.db).finish_non_exhaustive()
    }
}

pub(super) fn backend(e: sqlx::Error) -> CheckpointError {
    crate::sql::checkpoint_error(format!("sqlite: {e}"), e)
}

impl SqliteSaver {
    /// Opens (creating it if missing) the database file at `path` with default options: WAL,
    /// [`SqliteDurability::Normal`](super::SqliteDurability::Normal), delta storage.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, CheckpointError> {
        Self::open_with(path, SqliteOptions::default()).await
    }

    /// Opens (creating it if missing) the database file at `path` with `options`.
    pub async fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, CheckpointError> {
        let db = Db::open(path.as_ref(), &options).await?;
        Self::with_db(db, options.delta).await
    }

    /// A private in-memory database: nothing survives the saver.
    pub async fn in_memory() -> Result<Self, CheckpointError> {
        let db = Db::in_memory().await?;
        Self::with_db(db, DeltaStorage::default()).await
    }

    /// A saver on the caller's pool (its settings are kept; weft's tables are created if missing).
    pub async fn from_pool(pool: SqlitePool) -> Result<Self, CheckpointError> {
        Self::with_db(Db::from_pool(pool), DeltaStorage::default()).await
    }

    async fn with_db(db: Db, delta: DeltaStorage) -> Result<Self, CheckpointError> {
        db.migrate("checkpoint", schema::CHECKPOINT).await?;
        Ok(Self { group: GroupCommit::new(db.clone()), db, delta: DeltaPlanner::new(delta) })
    }

    /// The same saver storing append-only channels as `delta` says.
    pub fn with_delta_storage(mut self, delta: DeltaStorage) -> Self {
        self.delta = DeltaPlanner::new(delta);
        self
    }

    /// The pool writes go through (share it with a [`SqliteStore`](super::SqliteStore)).
    pub fn pool(&self) -> &SqlitePool {
        &self.db.writer
    }

    /// The pool reads go through: connections beside the writer (WAL lets them read while it writes);
    /// the writer's pool itself for an in-memory database.
    pub fn reader(&self) -> &SqlitePool {
        &self.db.reader
    }

    /// Runs `statements` (in order) in one transaction of the saver's writer, the next one: together with
    /// the batches of checkpoints that runs are saving at that moment (group commit), or alone. Returns
    /// once that transaction is committed; on an error none of them is stored. For the rows of the
    /// caller's own tables on the saver's database (a server's records of its runs), written without a
    /// transaction and a commit of their own.
    ///
    /// ```
    /// use weft_integrations::sqlite::{SqlParam, SqlStatement, SqliteSaver};
    /// # tokio_test::block_on(async {
    /// let saver = SqliteSaver::in_memory().await.unwrap();
    /// let create = SqlStatement::new("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)", vec![]);
    /// let insert = SqlStatement::new(
    ///     "INSERT INTO notes (id, body) VALUES (?, ?)",
    ///     vec![SqlParam::Integer(1), SqlParam::Text("hello".into())],
    /// );
    /// saver.write_with_checkpoints(vec![create, insert]).await.unwrap();
    /// # });
    /// ```
    pub async fn write_with_checkpoints(&self, statements: Vec<SqlStatement>) -> Result<(), CheckpointError> {
        if statements.is_empty() {
            return Ok(());
        }
        self.group.commit(batch::Rows::default(), None, statements).await.map(drop)
    }

    /// Closes the saver's connections, waiting until each is closed (its worker thread ended, its
    /// memory freed); every call after it fails. Dropping the saver closes them too, but only once the
    /// runtime next runs its tasks.
    pub async fn close(&self) {
        self.db.writer.close().await;
        self.db.reader.close().await;
    }

    /// Row counts and data bytes of every thread.
    pub async fn storage_stats(&self) -> Result<StorageStats, CheckpointError> {
        let counts: (i64, i64, i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM checkpoints), (SELECT count(*) FROM checkpoint_blobs), \
             (SELECT count(*) FROM checkpoint_writes), \
             (SELECT coalesce(sum(length(CAST(checkpoint AS BLOB)) + length(CAST(metadata AS BLOB))), 0) \
                FROM checkpoints) \
             + (SELECT coalesce(sum(length(blob)), 0) FROM checkpoint_blobs) \
             + (SELECT coalesce(sum(length(blob)), 0) FROM checkpoint_writes)",
        )
        .fetch_one(&self.db.reader)
        .await
        .map_err(backend)?;
        Ok(StorageStats::from_counts(counts))
    }
}

#[async_trait]
impl Checkpointer for SqliteSaver {
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>, CheckpointError> {
        let mut tx = self.db.reader.begin().await.map_err(backend)?;
        let found = read::get_tuple(&mut tx, config).await?;
        tx.commit().await.map_err(backend)?;
        Ok(found)
    }

    async fn list(
        &self,
        config: Option<&CheckpointConfig>,
        options: ListOptions,
    ) -> Result<Vec<CheckpointTuple>, CheckpointError> {
        let mut tx = self.db.reader.begin().await.map_err(backend)?;
        let found = read::list(&mut tx, config, &options).await?;
        tx.commit().await.map_err(backend)?;
        Ok(found)
    }

    put_one_methods!(delta);

    /// One transaction and a fixed number of statements for the whole batch: all or nothing is stored.
    /// Expected heads are checked in that transaction (SQLite has one writer at a time).
    async fn put_batch(&self, ops: Vec<SaveOp>) -> Result<(), CheckpointError> {
        if !batch::batchable(&ops) {
            // One by one, each put's head checked in its own transaction.
            return put_each(self, ops).await;
        }
        let mut threads = BTreeSet::new();
        let result = self.write_batch(ops, &mut threads).await;
        self.delta.settle(&threads, result)
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<(), CheckpointError> {
        let checkpoint_id = writes_checkpoint(config, task_id)?;
        let records = rows::write_records(writes);
        let mut tx = self.db.writer.begin_with("BEGIN IMMEDIATE").await.map_err(backend)?;
        for record in records {
            sqlx::query(PUT_WRITE)
                .bind(&config.thread_id)
                .bind(&config.checkpoint_ns)
                .bind(checkpoint_id)
                .bind(task_id)
                .bind(record.idx)
                .bind(task_path)
                .bind(record.channel)
                .bind(record.blob)
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<(), CheckpointError> {
        self.delta.forget_thread(thread_id);
        let mut tx = self.db.writer.begin_with("BEGIN IMMEDIATE").await.map_err(backend)?;
        for statement in DELETE {
            sqlx::query(statement).bind(thread_id).execute(&mut *tx).await.map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }

    async fn copy_thread(&self, src: &str, dst: &str) -> Result<(), CheckpointError> {
        let mut tx = self.db.writer.begin_with("BEGIN IMMEDIATE").await.map_err(backend)?;
        let has = |thread: &str| sqlx::query_scalar::<_, bool>(HAS_CHECKPOINTS).bind(thread.to_owned());
        let has_source = has(src).fetch_one(&mut *tx).await.map_err(backend)?;
        if !has_source || has(dst).fetch_one(&mut *tx).await.map_err(backend)? {
            tx.rollback().await.map_err(backend)?;
            return Err(copy_refused(src, dst, has_source));
        }
        self.delta.forget_thread(dst);
        for statement in DELETE {
            sqlx::query(statement).bind(dst).execute(&mut *tx).await.map_err(backend)?;
        }
        for statement in COPY {
            sqlx::query(statement).bind(src).bind(dst).execute(&mut *tx).await.map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }

    /// One transaction: the dropped checkpoints and their writes go, every kept value stored as a delta
    /// on a dropped version is stored whole at its version, then every value no kept checkpoint lists
    /// goes.
    async fn prune(&self, thread_id: &str, keep_latest: usize) -> Result<(), CheckpointError> {
        let keep = i64::try_from(keep_latest).unwrap_or(i64::MAX);
        let mut tx = self.db.writer.begin_with("BEGIN IMMEDIATE").await.map_err(backend)?;
        sqlx::query(PRUNE_CHECKPOINTS).bind(thread_id).bind(keep).execute(&mut *tx).await.map_err(backend)?;
        sqlx::query(PRUNE_WRITES).bind(thread_id).execute(&mut *tx).await.map_err(backend)?;
        let chains: Vec<ChainTuple> =
            sqlx::query_as(PRUNE_CHAINS).bind(thread_id).fetch_all(&mut *tx).await.map_err(backend)?;
        for whole in prune::whole_values(thread_id, chains.into_iter().map(ChainRow::from)) {
            sqlx::query(PRUNE_WHOLE)
                .bind(thread_id)
                .bind(&whole.ns)
                .bind(&whole.channel)
                .bind(&whole.version)
                .bind(&whole.blob)
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
        }
        sqlx::query(PRUNE_BLOBS).bind(thread_id).execute(&mut *tx).await.map_err(backend)?;
        tx.commit().await.map_err(backend)
    }

    async fn list_ids(&self, config: &CheckpointConfig) -> Result<Vec<String>, CheckpointError> {
        sqlx::query_scalar(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2 \
             ORDER BY checkpoint_id DESC",
        )
        .bind(&config.thread_id)
        .bind(&config.checkpoint_ns)
        .fetch_all(&self.db.reader)
        .await
        .map_err(backend)
    }
}

#[async_trait]
impl PutOne for SqliteSaver {
    /// One transaction: the head checked, the checkpoint and its values stored.
    async fn put_one(
        &self,
        config: &CheckpointConfig,
        mut checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        mut new_versions: ChannelVersions,
        mut appends: ChannelAppends,
        expected: &ExpectedHead,
    ) -> Result<CheckpointConfig, CheckpointError> {
        let parent =
            if self.delta.reads_parent(config, &appends) { self.get_tuple(config).await? } else { None };
        let compacted = compact_long_chain(&self.delta, config, &mut checkpoint, &mut appends, parent);
        let rows::PreparedPut { body, metadata, values } =
            rows::prepare_put(config, &mut checkpoint, &metadata, &mut new_versions)?;
        let (thread, ns) = (&config.thread_id, &config.checkpoint_ns);
        let plan = self.delta.plan_with_appends(thread, ns, values, new_versions, appends);
        let mut tx = self.db.writer.begin_with("BEGIN IMMEDIATE").await.map_err(backend)?;
        if expected.is_checked() {
            let head: Option<String> =
                sqlx::query_scalar(HEAD).bind(thread).bind(ns).fetch_one(&mut *tx).await.map_err(backend)?;
            expected.check(config, &checkpoint.id, head.as_deref())?;
        }
        sqlx::query(PUT_CHECKPOINT)
            .bind(thread)
            .bind(ns)
            .bind(&checkpoint.id)
            .bind(config.checkpoint_id.as_deref())
            .bind(&body)
            .bind(&metadata)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        let mut stored_whole = Vec::new();
        for record in &plan.records {
            if put_blob(&mut tx, thread, ns, record)
                .await
                .inspect_err(|_| self.delta.forget_thread(thread))?
            {
                stored_whole.push(record.channel.clone());
            }
        }
        tx.commit().await.map_err(backend)?;
        self.delta.commit(plan, &stored_whole);
        self.delta.forget_lists(&compacted);
        Ok(saved_config(config, checkpoint.id))
    }
}

impl SqliteSaver {
    /// Writes a batch in one transaction (with the others queued meanwhile); `Ok(false)` when its deltas
    /// had to be stored whole.
    async fn write_batch(
        &self,
        ops: Vec<SaveOp>,
        threads: &mut BTreeSet<String>,
    ) -> Result<bool, CheckpointError> {
        let mut ops = ops;
        let mut parents = Vec::new();
        for (i, parent) in self.delta.parents_to_read(&ops) {
            parents.push((i, self.get_tuple(&parent).await?));
        }
        let compacted = compact_long_chains(&self.delta, &mut ops, parents);
        let checks = HeadChecks::of(&ops);
        let rows = batch::rows_of(&self.delta, ops, threads);
        self.delta.forget_lists(&compacted);
        self.group.commit(rows?, checks, Vec::new()).await
    }
}

/// Stores one channel value; `true` when a delta had to be stored whole (its base was gone).
async fn put_blob(
    conn: &mut sqlx::SqliteConnection,
    thread: &str,
    ns: &str,
    record: &BlobRecord,
) -> Result<bool, CheckpointError> {
    if let Some(base) = &record.base_version {
        let done = sqlx::query(PUT_DELTA)
            .bind(thread)
            .bind(ns)
            .bind(&record.channel)
            .bind(&record.version)
            .bind(base)
            .bind(record.blob.as_deref())
            .execute(&mut *conn)
            .await
            .map_err(backend)?;
        if done.rows_affected() == 1 {
            return Ok(false);
        }
        if record.whole.is_none() {
            return Err(record.missing_base(thread));
        }
        let whole = record.whole_blob();
        insert_whole(conn, thread, ns, record, whole.as_deref()).await?;
        return Ok(true);
    }
    insert_whole(conn, thread, ns, record, record.blob.as_deref()).await?;
    Ok(false)
}

async fn insert_whole(
    conn: &mut sqlx::SqliteConnection,
    thread: &str,
    ns: &str,
    record: &BlobRecord,
    blob: Option<&[u8]>,
) -> Result<(), CheckpointError> {
    sqlx::query(PUT_BLOB)
        .bind(thread)
        .bind(ns)
        .bind(&record.channel)
        .bind(&record.version)
        .bind(blob)
        .execute(conn)
        .await
        .map_err(backend)?;
    Ok(())
}
