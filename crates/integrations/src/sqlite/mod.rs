//! SQLite backends (feature `sqlite`, on by default): [`SqliteSaver`] (checkpointer) and [`SqliteStore`]
//! (long-term memory), embedded in the process through sqlx's bundled SQLite.
//!
//! # Durability
//!
//! A file database runs in WAL mode. [`SqliteDurability`] sets SQLite's `synchronous`:
//!
//! - [`Normal`](SqliteDurability::Normal) (the default): a commit is durable once it is in the WAL
//!   file, so **a crash of the process loses nothing** that was committed; **a power loss or an
//!   operating-system crash may lose the last commits** (never corrupting the database). Commits cost no
//!   `fsync`, so a checkpoint per superstep is cheap.
//! - [`Full`](SqliteDurability::Full): every commit waits for an `fsync` of the WAL, so committed
//!   checkpoints **survive a power loss** too, at the cost of one `fsync` per commit (milliseconds on
//!   many disks).
//!
//! # Concurrency
//!
//! SQLite has one writer at a time: a saver opened on a file writes through one connection (so the
//! process's writers queue in order instead of retrying on `SQLITE_BUSY`) and reads through a small
//! pool that WAL lets run beside the writer. Other processes may open the same file; their writes wait up
//! to [`SqliteOptions::busy_timeout`] and then fail as
//! [`Unavailable`](weft_graph::checkpoint::CheckpointErrorKind::Unavailable) (database locked: retryable).
//!
//! Batches of saves ([`put_batch`](weft_graph::checkpoint::Checkpointer::put_batch), what a graph's run
//! sends) are committed in groups: the batches that queue while the writer commits go together in its
//! next transaction, so that runs saving at the same time share one commit instead of one each. Each is
//! answered once that transaction is committed (so nothing is acknowledged before it is stored), and a
//! group that fails is written again batch by batch, so that a batch's error (a conflict, below) is its
//! own. [`SqliteSaver::write_with_checkpoints`] puts the caller's own statements in the same queue.
//!
//! A checkpoint's expected head ([`ExpectedHead`](weft_graph::checkpoint::ExpectedHead): one run per
//! thread) is checked inside the write transaction (`BEGIN IMMEDIATE`, so no other writer can move the
//! head in between); a batch whose expectation fails stores nothing and is a
//! [`Conflict`](weft_graph::checkpoint::CheckpointErrorKind::Conflict). A row holding a value of the
//! wrong type (SQLite keeps what it is given) reads as
//! [`Corrupt`](weft_graph::checkpoint::CheckpointErrorKind::Corrupt) naming its thread and checkpoint.
//!
//! # Layout
//!
//! Tables `checkpoints` (one row per checkpoint, with its scalar channel values), `checkpoint_blobs`
//! (every other channel value once per thread, namespace, channel and version; append-only lists as
//! deltas, see [`DeltaStorage`]), `checkpoint_writes` (pending writes), `store_items` and
//! `store_vectors` (the store); applied schema steps are recorded in `weft_migrations`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::sql::Failure;
pub use crate::sql::delta::DeltaStorage;
use crate::sql::migrate::{self, Migration};

mod batch;
mod group;
mod read;
mod saver;
mod schema;
mod statements;
mod store;

pub use crate::sql::StorageStats;
pub use group::{SqlParam, SqlStatement};
pub use saver::SqliteSaver;
pub use store::SqliteStore;

/// What a committed write survives (SQLite's `synchronous` setting); see the [module docs](self).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SqliteDurability {
    /// `synchronous = NORMAL`: survives a crash of the process, not always a power loss (the last
    /// commits may be lost, the database stays consistent). No `fsync` per commit.
    #[default]
    Normal,
    /// `synchronous = FULL`: survives a power loss; one `fsync` per commit.
    Full,
}

/// Settings of a SQLite database opened by weft.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteOptions {
    /// What a commit survives (default [`SqliteDurability::Normal`]).
    pub durability: SqliteDurability,
    /// Connections for reads beside the one writer (default 4).
    pub read_connections: u32,
    /// How long a write waits for another process's write to finish (default 5 s).
    pub busy_timeout: Duration,
    /// How append-only channels are stored (savers only; default: deltas).
    pub delta: DeltaStorage,
    /// The most memory, in KiB, each connection's page cache holds (SQLite's `cache_size`; default
    /// [`DEFAULT_CACHE_KIB`], SQLite's own default is 2,000). Pages beyond it are read again from the
    /// operating system's file cache when needed; a transaction's changed pages beyond it spill to the
    /// WAL before its commit.
    pub cache_kib: u32,
}

/// The default [`SqliteOptions::cache_kib`]: a thread's checkpoints, the tails of the tables a save
/// appends to and the indexes above them fit, and each connection (the writer and every reader) holds
/// at most this much.
pub const DEFAULT_CACHE_KIB: u32 = 512;

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            durability: SqliteDurability::Normal,
            read_connections: 4,
            busy_timeout: Duration::from_secs(5),
            delta: DeltaStorage::default(),
            cache_kib: DEFAULT_CACHE_KIB,
        }
    }
}

impl SqliteOptions {
    /// These options with `durability`.
    pub fn durability(mut self, durability: SqliteDurability) -> Self {
        self.durability = durability;
        self
    }
}

/// The connections of one database: a writer and readers (the same pool for in-memory databases and
/// pools given by the caller).
#[derive(Clone)]
pub(crate) struct Db {
    pub(crate) writer: SqlitePool,
    pub(crate) reader: SqlitePool,
    /// The file, or `None` in memory or for a caller's pool.
    pub(crate) path: Option<PathBuf>,
    pub(crate) durability: Option<SqliteDurability>,
    /// Whether the writer's connections were given the batch checks' table when they connected (the
    /// saver's own pools; a caller's pool gets it from each batch).
    pub(crate) temp_ready: bool,
}

impl fmt::Debug for Db {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = match &self.path {
            Some(path) => path.display().to_string(),
            None => "(memory or caller's pool)".to_owned(),
        };
        f.debug_struct("SqliteDb").field("path", &place).field("durability", &self.durability).finish()
    }
}

impl Db {
    /// Opens (creating it if missing) the database file at `path`.
    pub(crate) async fn open(path: &Path, options: &SqliteOptions) -> Result<Self, Failure> {
        let synchronous = match options.durability {
            SqliteDurability::Normal => SqliteSynchronous::Normal,
            SqliteDurability::Full => SqliteSynchronous::Full,
        };
        let connect = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(synchronous)
            .busy_timeout(options.busy_timeout)
            .foreign_keys(true)
            // A negative `cache_size` is a bound in KiB.
            .pragma("cache_size", format!("-{}", options.cache_kib.max(1)));
        let fail = |e: sqlx::Error| {
            Failure::new(format!("cannot open SQLite database '{}': {e}", path.display()), e)
        };
        // One connection, never pinged before use: a file has no link to lose, and a ping is a round trip
        // to SQLite's worker thread per save.
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .test_before_acquire(false)
            .after_connect(|conn, _| Box::pin(create_checks_table(conn)))
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(connect.clone())
            .await
            .map_err(fail)?;
        // Readers are not pinged before use either: each ping is a round trip to the connection's worker
        // thread, one more per read.
        let reader = SqlitePoolOptions::new()
            .max_connections(options.read_connections.max(1))
            .test_before_acquire(false)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(connect)
            .await
            .map_err(fail)?;
        Ok(Self {
            writer,
            reader,
            path: Some(path.to_owned()),
            durability: Some(options.durability),
            temp_ready: true,
        })
    }

    /// A private in-memory database (gone when the last clone of its pool is dropped).
    pub(crate) async fn in_memory() -> Result<Self, Failure> {
        let connect = SqliteConnectOptions::new().in_memory(true).foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .test_before_acquire(false)
            .after_connect(|conn, _| Box::pin(create_checks_table(conn)))
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(connect)
            .await
            .map_err(|e| Failure::new(format!("cannot open an in-memory SQLite database: {e}"), e))?;
        Ok(Self { temp_ready: true, ..Self::from_pool(pool) })
    }

    /// The caller's pool, for reads and writes.
    pub(crate) fn from_pool(pool: SqlitePool) -> Self {
        Self { writer: pool.clone(), reader: pool, path: None, durability: None, temp_ready: false }
    }

    /// Applies the missing steps of `component` in one write transaction. A refusal or a failure rolls
    /// it back before it returns, not when the connection is next used.
    pub(crate) async fn migrate(&self, component: &str, steps: &[Migration]) -> Result<(), Failure> {
        let fail = |e| migration_failure(component, e);
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await.map_err(fail)?;
        match migrate_in(&mut tx, component, steps).await {
            Ok(()) => tx.commit().await.map_err(fail),
            Err(failure) => {
                // Its own failure says nothing the migration's does not.
                let _ = tx.rollback().await;
                Err(failure)
            }
        }
    }
}

/// A failed statement of `component`'s migration.
fn migration_failure(component: &str, e: sqlx::Error) -> Failure {
    Failure::new(format!("SQLite migration of {component} failed: {e}"), e)
}

async fn migrate_in(
    tx: &mut sqlx::SqliteConnection,
    component: &str,
    steps: &[Migration],
) -> Result<(), Failure> {
    let fail = |e| migration_failure(component, e);
    sqlx::raw_sql(schema::MIGRATIONS_TABLE).execute(&mut *tx).await.map_err(fail)?;
    let has_column: i64 =
        sqlx::query_scalar(schema::HAS_READABLE_FROM).fetch_one(&mut *tx).await.map_err(fail)?;
    if has_column == 0 {
        sqlx::raw_sql(schema::ADD_READABLE_FROM).execute(&mut *tx).await.map_err(fail)?;
    }
    let applied: Vec<migrate::Applied> =
        sqlx::query_as("SELECT version, readable_from FROM weft_migrations WHERE component = ?1")
            .bind(component)
            .fetch_all(&mut *tx)
            .await
            .map_err(fail)?;
    for step in migrate::pending(component, steps, &applied)? {
        sqlx::raw_sql(step.sql).execute(&mut *tx).await.map_err(fail)?;
        sqlx::query(
            "INSERT INTO weft_migrations (component, version, name, applied_at, readable_from) \
             VALUES (?1, ?2, ?3, CAST(strftime('%s', 'now') AS INTEGER), ?4)",
        )
        .bind(component)
        .bind(step.version)
        .bind(step.name)
        .bind(step.readable_from)
        .execute(&mut *tx)
        .await
        .map_err(fail)?;
    }
    Ok(())
}

/// Gives a new connection of the saver's pools the batch checks' table.
async fn create_checks_table(conn: &mut sqlx::SqliteConnection) -> Result<(), sqlx::Error> {
    sqlx::query(batch::CHECKS_TABLE).execute(conn).await.map(drop)
}
