//! PostgreSQL backends (feature `postgres`): [`PostgresSaver`] (checkpointer) and [`PostgresStore`]
//! (long-term memory) on an sqlx connection pool.
//!
//! - **Layout**: `checkpoints` (with each checkpoint's scalar channel values), `checkpoint_blobs` (every
//!   other channel value once per thread, namespace, channel and version; growing lists as deltas, see
//!   [`DeltaStorage`]), `checkpoint_writes`, `store_items`, `store_vectors`; applied schema steps are
//!   recorded in `weft_migrations`. Rows are keyed by the MD5 of the thread id and namespace (generated
//!   columns), so ids of any length fit in the indexes (PostgreSQL's B-tree refuses keys over about
//!   2.7 kB); the ids themselves are compared too.
//! - **Migrations** run in one transaction under an advisory lock per schema, so several processes may
//!   start at once.
//! - **No lock in the saver**: every call takes a pooled connection; a `put` is one statement (the
//!   checkpoint and its new values in one implicit transaction), a read is one statement too.
//! - **Poolers**: with [`PostgresOptions::prepared_statements`] off, queries use unnamed statements only
//!   (`persistent(false)`, no statement cache), each in a read-committed transaction of its own (two
//!   round trips more), which a transaction-mode pooler without prepared-statement support (PgBouncer
//!   before 1.21) carries.
//! - **Transient failures** are retried ([`RetryPolicy`], the retry budget: 3 retries from 50 ms to 2 s
//!   apart by default) and then fail as
//!   [`Unavailable`](weft_graph::checkpoint::CheckpointErrorKind::Unavailable) (retryable), the driver's
//!   error kept as the source.
//! - **Outages** are detected fast: a call still waiting for a connection after [`PROBE_AFTER`] (100 ms)
//!   opens one of its own, and when that fails (refused, unresolved name, authentication, no answer
//!   within [`PostgresOptions::connect_timeout`], 5 s by default) the call fails with that cause instead
//!   of waiting out the pool's `acquire_timeout` (10 s) to say "pool timed out". A refused connection
//!   fails in about 0.1 s per attempt.
//! - **Planned once**: a batch of saves is one call of `weft_checkpoint_batch`, a function of the schema
//!   whose statement PostgreSQL plans once per connection (a batch sent as a statement was planned again
//!   at every call), and runs only the inserts that have rows; the same for the blobs' read
//!   (`weft_checkpoint_blobs`), the read of one checkpoint by id or the latest (`weft_checkpoint_tuple`,
//!   what `get_tuple` sends) and a thread's history (`weft_checkpoint_list`, what `list` of a thread
//!   sends).
//! - **One run per thread**: a batch with expected heads
//!   ([`ExpectedHead`](weft_graph::checkpoint::ExpectedHead)) is still one statement: the batch function
//!   takes an advisory lock per thread and namespace (`pg_advisory_xact_lock` on a hash of both, held
//!   until the transaction ends: the statement's own, or the caller's for `put_batch_in`) and then reads
//!   their heads in a statement of its own (in read committed, with a snapshot taken after the locks);
//!   it writes only if every expectation holds. Otherwise nothing is stored and the error is a
//!   [`Conflict`](weft_graph::checkpoint::CheckpointErrorKind::Conflict).
//! - **A long thread costs what is read of it**: a thread's head (for the check, and `get_tuple`'s latest)
//!   and a page of its history (`list`, `weft_checkpoint_list`) are read by walking the primary key
//!   backwards from the thread's newest row (or from `before`), in functions whose settings steer
//!   PostgreSQL away from bitmap scans and sorts: with a generic plan it estimates a thread's rows from
//!   the table's average and, for a few, read all of them, so a long thread's every save read its
//!   history.
//! - **In the caller's transaction**: [`PostgresSaver::put_batch_in`] stores a batch and
//!   [`PostgresSaver::get_tuple_in`] reads a checkpoint with the same statements, in a transaction the
//!   caller holds and commits (a server records a run's end in the transaction that stores the run's last
//!   checkpoint, and reads a thread's head in the one that makes a run on it): no transaction of their
//!   own, no retry.
//! - **Secrets**: the password of a connection string never appears in `Debug` output, errors or logs.

use std::fmt;
use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection};
pub use sqlx::{PgConnection, PgPool};

use crate::sql::Failure;
pub use crate::sql::delta::DeltaStorage;
use crate::sql::migrate::{self, Migration};

mod batch;
mod pooler;
mod put;
mod read;
mod retry;
mod saver;
mod schema;
mod statements;
mod store;

pub use crate::sql::StorageStats;
#[doc(hidden)]
pub use pooler::{PgQuery, PgStatements};
pub use retry::RetryPolicy;
pub use saver::PostgresSaver;
pub use store::PostgresStore;

/// Settings of a PostgreSQL backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// Pool size when weft makes the pool (default 10).
    pub max_connections: u32,
    /// How long a call waits for a pooled connection while the server is up and every connection is
    /// busy (default 10 s).
    pub acquire_timeout: Duration,
    /// How long one attempt to open a connection may take (default 5 s). A call that waits for a
    /// connection for more than [`PROBE_AFTER`] opens one of its own to the server (two such probes at
    /// most at a time): when that fails (connection refused, a name that does not resolve, no answer
    /// within this timeout, refused credentials) the call fails at once with that cause instead of
    /// waiting out `acquire_timeout`; the error is a retryable
    /// [`CheckpointErrorKind::Unavailable`](weft_graph::checkpoint::CheckpointErrorKind::Unavailable)
    /// one, except for refused credentials (a backend error). A server that answers but takes no more
    /// connections for now counts as up. So a refused connection fails in about 0.1 s per attempt.
    pub connect_timeout: Duration,
    /// Use named server-side prepared statements, cached per connection (default `true`). Turn off
    /// behind a transaction-mode pooler (PgBouncer, Supavisor): every query then uses the unnamed
    /// statement, in a transaction of its own so that the pooler keeps its messages on one server
    /// connection (two more round trips per query).
    pub prepared_statements: bool,
    /// The schema weft's tables live in (created if missing), set as the connections' `search_path`
    /// when weft makes the pool (a startup parameter, which some poolers refuse: there, set the search
    /// path on the server role instead). `None`: the server's default search path.
    pub schema: Option<String>,
    /// Retries of operations that fail for a passing reason: the retry budget (default 3 retries, 50 ms
    /// to 2 s apart; [`RetryPolicy::none`] fails at the first error). Pooled connections are not pinged
    /// before use (a round trip per save): one that broke while idle (a server restart, a proxy's idle
    /// timeout) fails its statement, which a retry runs again on a new connection. With
    /// [`RetryPolicy::none`] that first statement after such a break fails instead (as unavailable,
    /// retryable by the caller).
    pub retry: RetryPolicy,
    /// How append-only channels are stored (savers only; default: deltas).
    pub delta: DeltaStorage,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            max_connections: 10,
            acquire_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            prepared_statements: true,
            schema: None,
            retry: RetryPolicy::default(),
            delta: DeltaStorage::default(),
        }
    }
}

impl PostgresOptions {
    /// These options with tables in `schema`.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// These options with `timeout` for opening a connection.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// These options with `retry` as the retry budget.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// These options without server-side prepared statements (for transaction-mode poolers).
    pub fn without_prepared_statements(mut self) -> Self {
        self.prepared_statements = false;
        self
    }
}

/// How long a call waits for a pooled connection before it also tries to open one of its own, to learn
/// whether the server is reachable (see [`PostgresOptions::connect_timeout`]).
pub const PROBE_AFTER: Duration = Duration::from_millis(100);

/// A pool and how to use it.
#[derive(Clone)]
pub(crate) struct Pg {
    /// The pool, and whether statements are prepared on it.
    pub(crate) statements: PgStatements,
    /// Where a probe connects (the pool's options).
    connect: PgConnectOptions,
    connect_timeout: Duration,
    /// Permits for probes running at once (shared by the clones of this pool).
    probes: Arc<tokio::sync::Semaphore>,
    pub(crate) retry: RetryPolicy,
    /// Where it connects, without the password.
    pub(crate) target: String,
    pub(crate) schema: Option<String>,
}

impl fmt::Debug for Pg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Postgres")
            .field("target", &self.target)
            .field("schema", &self.schema)
            .field("prepared_statements", &self.statements.prepared)
            .field("retry", &self.retry)
            .finish()
    }
}

/// Where a statement of the saver runs.
pub(crate) enum Target<'a> {
    /// On a pooled connection, retried as the saver's calls are.
    Pool(&'a Pg),
    /// In a transaction of the caller's, once (a failed statement ends the transaction), prepared as the
    /// saver's statements are or not.
    Transaction { conn: &'a mut PgConnection, prepared: bool },
}

impl Target<'_> {
    /// The first row of the query `make` builds (`op` names the call in the retries' logs).
    pub(crate) async fn fetch_one<Q: PgQuery>(
        &mut self,
        op: &'static str,
        make: impl Fn() -> Q,
    ) -> Result<Q::Row, sqlx::Error> {
        match self {
            Self::Pool(pg) => {
                let pg: &Pg = pg;
                pg.run(op, || pg.statements.fetch_one(make())).await
            }
            Self::Transaction { conn, prepared } => make().persistent(*prepared).fetch_one(conn).await,
        }
    }

    /// Every row of the query `make` builds.
    pub(crate) async fn fetch_all<Q: PgQuery>(
        &mut self,
        op: &'static str,
        make: impl Fn() -> Q,
    ) -> Result<Vec<Q::Row>, sqlx::Error> {
        match self {
            Self::Pool(pg) => {
                let pg: &Pg = pg;
                pg.run(op, || pg.statements.fetch_all(make())).await
            }
            Self::Transaction { conn, prepared } => make().persistent(*prepared).fetch_all(conn).await,
        }
    }
}

/// How many probes (see [`Pg::probed`]) may run at once.
const PROBES: usize = 2;

/// Whether a failed connection attempt says the server cannot be used: not reachable (I/O, TLS,
/// protocol errors, a name that does not resolve), or refusing the credentials or the database (SQLSTATE
/// classes 28 and 3D). "Too many connections" and a server still starting mean it is up.
fn is_outage(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Database(db) => db.code().is_some_and(|c| c.starts_with("28") || c.starts_with("3D")),
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::Configuration(_) => true,
        _ => false,
    }
}

/// `url` with any password (`scheme://user:password@host`, `password=...`) replaced by `***`.
pub(crate) fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(scheme) = rest.find("://") {
        let (head, tail) = rest.split_at(scheme + 3);
        out.push_str(head);
        let end = tail.find(|c: char| c.is_whitespace() || c == '/' || c == '?').unwrap_or(tail.len());
        let authority = &tail[..end];
        match (authority.rfind('@'), authority.find(':')) {
            (Some(at), Some(colon)) if colon < at => {
                out.push_str(&authority[..=colon]);
                out.push_str("***");
                out.push_str(&authority[at..]);
            }
            _ => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    redact_keywords(&out)
}

fn redact_keywords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("password=") {
        let (head, tail) = rest.split_at(at + "password=".len());
        out.push_str(head);
        out.push_str("***");
        let end = tail.find(|c: char| c.is_whitespace() || c == '&').unwrap_or(tail.len());
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

fn describe(options: &PgConnectOptions) -> String {
    let database = options.get_database().unwrap_or("(default)");
    format!("postgres://{}@{}:{}/{database}", options.get_username(), options.get_host(), options.get_port())
}

/// Checks a schema name: letters, digits and `_`, not starting with a digit, at most 63 bytes.
fn check_schema(schema: &str) -> Result<(), String> {
    let ok = !schema.is_empty()
        && schema.len() <= 63
        && !schema.starts_with(|c: char| c.is_ascii_digit())
        && schema.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok { Ok(()) } else { Err(format!("invalid schema name '{schema}' (use letters, digits and _)")) }
}

impl Pg {
    /// Connects a new pool to `url`.
    pub(crate) async fn connect(url: &str, options: &PostgresOptions) -> Result<Self, String> {
        let mut connect = PgConnectOptions::from_str(url)
            .map_err(|e| redact(&format!("invalid PostgreSQL connection string: {e}")))?;
        if !options.prepared_statements {
            connect = connect.statement_cache_capacity(0);
        }
        if let Some(schema) = &options.schema {
            check_schema(schema)?;
            connect = connect.options([("search_path", schema.as_str())]);
        }
        let target = describe(&connect);
        // The pool opens its connections when first used (so an outage at start fails as fast as one
        // later, with its cause, in `migrate`).
        // No ping before each use (a round trip per save): a connection that broke while idle fails its
        // statement, which the retry policy runs again on a new connection.
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(options.acquire_timeout)
            .test_before_acquire(false)
            .connect_lazy_with(connect.clone());
        Ok(Self {
            statements: PgStatements::new(pool, options.prepared_statements),
            connect,
            connect_timeout: options.connect_timeout,
            probes: Arc::new(tokio::sync::Semaphore::new(PROBES)),
            retry: options.retry,
            target,
            schema: options.schema.clone(),
        })
    }

    /// The caller's pool.
    pub(crate) fn from_pool(pool: PgPool, options: &PostgresOptions) -> Self {
        let connect = PgConnectOptions::clone(&pool.connect_options());
        let target = describe(&connect);
        Self {
            statements: PgStatements::new(pool, options.prepared_statements),
            connect,
            connect_timeout: options.connect_timeout,
            probes: Arc::new(tokio::sync::Semaphore::new(PROBES)),
            retry: options.retry,
            target,
            schema: None,
        }
    }

    /// Runs `op` as the retry policy says, each attempt [probed](Self::probed).
    pub(crate) async fn run<T, F, Fut>(&self, what: &str, mut op: F) -> Result<T, sqlx::Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, sqlx::Error>>,
    {
        self.retry.run(what, || self.probed(op())).await
    }

    /// `op`, unless it is still waiting after [`PROBE_AFTER`] and a connection of its own to the server
    /// fails meanwhile: then that connection's error (the cause: refused, unresolved, authentication,
    /// timed out). A pool waiting for a refused server would only say "pool timed out", after its
    /// acquire timeout.
    pub(crate) async fn probed<T>(
        &self,
        op: impl Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, sqlx::Error> {
        let mut op = std::pin::pin!(op);
        // At most `PROBES` probes at a time: under load (every pooled connection busy, the server up)
        // the callers waiting do not flood the server with connections; in an outage each probe fails
        // at once, so every caller still gets its turn within a few milliseconds.
        let permit = loop {
            tokio::select! {
                done = &mut op => return done,
                () = tokio::time::sleep(PROBE_AFTER) => {}
            }
            if let Ok(permit) = self.probes.try_acquire() {
                break permit;
            }
        };
        let probe = async move {
            let _permit = permit;
            match tokio::time::timeout(self.connect_timeout, self.connect.connect()).await {
                Ok(Ok(conn)) => {
                    drop(conn.close().await);
                    None
                }
                // The server answered but will not take this connection now (too many connections, a
                // server starting): it is up, and a pooled connection may come.
                Ok(Err(e)) if !is_outage(&e) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some(sqlx::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("connecting to {} timed out after {:?}", self.target, self.connect_timeout),
                ))),
            }
        };
        tokio::select! {
            done = &mut op => done,
            cause = probe => match cause {
                Some(cause) => Err(cause),
                // The server is up (the pool is busy, or the query slow): wait for `op`.
                None => op.await,
            },
        }
    }

    /// Applies the missing steps of `component` in one transaction, under an advisory lock per schema
    /// (so processes that start together migrate one after another). A refusal or a failure rolls the
    /// transaction back before it returns, not when the connection is next used.
    pub(crate) async fn migrate(&self, component: &str, steps: &[Migration]) -> Result<(), Failure> {
        let fail = |e| self.migration_failure(component, e);
        let mut tx = self.run("begin", || self.statements.pool.begin()).await.map_err(fail)?;
        match self.migrate_in(&mut tx, component, steps).await {
            Ok(()) => tx.commit().await.map_err(fail),
            Err(failure) => {
                // Its own failure says nothing the migration's does not.
                let _ = tx.rollback().await;
                Err(failure)
            }
        }
    }

    /// A failed statement of `component`'s migration, named with the server (its password redacted).
    fn migration_failure(&self, component: &str, e: sqlx::Error) -> Failure {
        let message = format!("PostgreSQL migration of {component} at {} failed: {e}", self.target);
        Failure::new(redact(&message), e)
    }

    async fn migrate_in(
        &self,
        tx: &mut sqlx::PgConnection,
        component: &str,
        steps: &[Migration],
    ) -> Result<(), Failure> {
        let fail = |e| self.migration_failure(component, e);
        let lock_name = self.schema.clone().unwrap_or_default();
        sqlx::query(
            "SELECT pg_advisory_xact_lock(hashtext('weft_migrations'), \
             hashtext(coalesce(nullif($1, ''), current_schema(), '')))",
        )
        .bind(&lock_name)
        .persistent(false)
        .execute(&mut *tx)
        .await
        .map_err(fail)?;
        if let Some(schema) = &self.schema {
            check_schema(schema)?;
            let create = format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"");
            sqlx::raw_sql(sqlx::AssertSqlSafe(create)).execute(&mut *tx).await.map_err(fail)?;
        }
        sqlx::raw_sql(schema::MIGRATIONS_TABLE).execute(&mut *tx).await.map_err(fail)?;
        let applied: Vec<migrate::Applied> =
            sqlx::query_as("SELECT version, readable_from FROM weft_migrations WHERE component = $1")
                .bind(component)
                .persistent(false)
                .fetch_all(&mut *tx)
                .await
                .map_err(fail)?;
        for step in migrate::pending(component, steps, &applied)? {
            sqlx::raw_sql(step.sql).execute(&mut *tx).await.map_err(fail)?;
            sqlx::query(
                "INSERT INTO weft_migrations (component, version, name, readable_from) VALUES ($1, $2, $3, $4)",
            )
            .bind(component)
            .bind(step.version)
            .bind(step.name)
            .bind(step.readable_from)
            .persistent(false)
            .execute(&mut *tx)
            .await
            .map_err(fail)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_from_urls_and_keywords() {
        let text = "cannot connect to postgres://ann:s3cr%40t@db.example:5432/app?sslmode=require: refused";
        let clean = redact(text);
        assert!(!clean.contains("s3cr"), "{clean}");
        assert!(clean.contains("postgres://ann:***@db.example:5432/app"), "{clean}");
        let clean = redact("host=db password=hunter2 user=ann");
        assert_eq!(clean, "host=db password=*** user=ann");
        assert_eq!(redact("postgres://ann@db/app"), "postgres://ann@db/app");
    }

    #[test]
    fn schema_names_are_checked() {
        assert!(check_schema("weft_test_1").is_ok());
        assert!(check_schema("bad\"; DROP").is_err());
        assert!(check_schema("1abc").is_err());
    }
}
