//! The workloads on the durable backends, by name: loop1000_sqlite (and `_normal`, `_dsync`, `_syncoff`),
//! loop1000_postgres (and `_dsync`, `_asynccommit`), loop1000_redis, and messages1000 on each backend; and
//! the three backends of [`DurableRun`], each its own type.

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use weft_graph::checkpoint::{CheckpointConfig, ListOptions};
use weft_graph::{Checkpointer, Durability};
use weft_integrations::postgres::{PostgresOptions, PostgresSaver};
use weft_integrations::redis::{RedisOptions, RedisSaver};
use weft_integrations::sqlite::{SqliteDurability, SqliteOptions, SqliteSaver, StorageStats};

use super::checkpoint::skipped;
use super::durable::{Backend, DurableRun, Fresh, Shape};
use crate::measure::{Info, Line, Options, Threads, err, measure};

/// The PostgreSQL server of WORKLOADS.md (`WEFT_BENCH_PG_URL` overrides it).
pub(crate) fn pg_url() -> String {
    std::env::var("WEFT_BENCH_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// `url` with `SET synchronous_commit = off` on every connection (a startup option).
fn async_commit(url: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20synchronous_commit%3Doff")
}

/// Whether the server at 127.0.0.1:5432 (or the port of `WEFT_BENCH_PG_URL`'s local server) accepts TCP.
pub(crate) fn pg_reachable(url: &str) -> bool {
    let authority = url.split("://").nth(1).unwrap_or("").split(['/', '?']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or("");
    let host_port = if host_port.contains(':') { host_port.to_owned() } else { format!("{host_port}:5432") };
    let host_port = host_port.replace("localhost", "127.0.0.1");
    match host_port.parse::<SocketAddr>() {
        Ok(addr) => TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok(),
        // A host name: let the connection try and report its own error.
        Err(_) => true,
    }
}

/// Runs `shape` on fresh SQLite files.
fn sqlite(
    opts: &Options,
    info: Info,
    shape: Shape,
    durability: Durability,
    sqlite: SqliteDurability,
    sync_off: bool,
) -> Result<Line, String> {
    measure(
        opts,
        info,
        Threads::One,
        |_| {
            let root = std::env::temp_dir().join(format!("weft-bench-{}-{}", info.name, std::process::id()));
            Ok(Sqlite { root, options: SqliteOptions::default().durability(sqlite), sync_off, opened: 0 })
        },
        |backend| Ok(DurableRun::new(backend, shape, durability)),
    )
}

/// Runs `shape` on PostgreSQL in a schema of this process, or prints a skipped line without a server.
fn postgres(
    opts: &Options,
    info: Info,
    shape: Shape,
    durability: Durability,
    asynccommit: bool,
) -> Result<Line, String> {
    let url = pg_url();
    if !pg_reachable(&url) {
        return Ok(skipped(info.name, "no PostgreSQL server at 127.0.0.1:5432 (set WEFT_BENCH_PG_URL)"));
    }
    let url = if asynccommit { async_commit(&url) } else { url };
    let schema = format!("weft_bench_{}_{}", info.name, std::process::id());
    measure(
        opts,
        info,
        Threads::One,
        |rt| {
            let options =
                PostgresOptions { max_connections: 4, ..PostgresOptions::default() }.schema(&schema);
            let saver = rt.block_on(PostgresSaver::connect_with(&url, options)).map_err(err)?;
            Ok(Postgres { saver: Arc::new(saver), schema: schema.clone() })
        },
        |backend| Ok(DurableRun::new(backend, shape, durability)),
    )
}

/// `loop1000_sqlite`: `synchronous = FULL` (an fsync per commit) on both sides: LangGraph's setting (SQLite's
/// default), and weft's `SqliteDurability::Full`.
pub(crate) fn loop1000_sqlite(opts: &Options) -> Result<Line, String> {
    let info = Info::steps("loop1000_sqlite", 1000);
    sqlite(opts, info, Shape::Loop, Durability::Async, SqliteDurability::Full, false)
}

/// `loop1000_sqlite_normal`: `synchronous = NORMAL` (no fsync per commit) on both sides: weft's default.
pub(crate) fn loop1000_sqlite_normal(opts: &Options) -> Result<Line, String> {
    let info = Info::steps("loop1000_sqlite_normal", 1000);
    sqlite(opts, info, Shape::Loop, Durability::Async, SqliteDurability::Normal, false)
}

/// `loop1000_sqlite_dsync`: durability `sync`, weft's default SQLite settings.
pub(crate) fn loop1000_sqlite_dsync(opts: &Options) -> Result<Line, String> {
    let info = Info::steps("loop1000_sqlite_dsync", 1000).supplementary();
    sqlite(opts, info, Shape::Loop, Durability::Sync, SqliteDurability::Normal, false)
}

/// `loop1000_sqlite_syncoff`: `PRAGMA synchronous = OFF`.
pub(crate) fn loop1000_sqlite_syncoff(opts: &Options) -> Result<Line, String> {
    let info = Info::steps("loop1000_sqlite_syncoff", 1000).supplementary();
    sqlite(opts, info, Shape::Loop, Durability::Async, SqliteDurability::Normal, true)
}

/// `loop1000_postgres`: server defaults (`synchronous_commit = on`).
pub(crate) fn loop1000_postgres(opts: &Options) -> Result<Line, String> {
    postgres(opts, Info::steps("loop1000_postgres", 1000), Shape::Loop, Durability::Async, false)
}

/// `loop1000_postgres_dsync`: durability `sync`.
pub(crate) fn loop1000_postgres_dsync(opts: &Options) -> Result<Line, String> {
    let info = Info::steps("loop1000_postgres_dsync", 1000).supplementary();
    postgres(opts, info, Shape::Loop, Durability::Sync, false)
}

/// `loop1000_postgres_asynccommit`: `synchronous_commit = off` on every connection.
pub(crate) fn loop1000_postgres_asynccommit(opts: &Options) -> Result<Line, String> {
    let info = Info::steps("loop1000_postgres_asynccommit", 1000).supplementary();
    postgres(opts, info, Shape::Loop, Durability::Async, true)
}

/// `messages1000_sqlite`: messages1000 on a fresh SQLite file (weft's defaults), with the bytes stored.
pub(crate) fn messages1000_sqlite(opts: &Options) -> Result<Line, String> {
    let info = Info::steps("messages1000_sqlite", 1000).supplementary();
    sqlite(opts, info, Shape::Messages, Durability::Async, SqliteDurability::Normal, false)
}

/// `messages1000_postgres`: messages1000 on PostgreSQL, with the bytes stored.
pub(crate) fn messages1000_postgres(opts: &Options) -> Result<Line, String> {
    let info = Info::steps("messages1000_postgres", 1000).supplementary();
    postgres(opts, info, Shape::Messages, Durability::Async, false)
}

/// The Redis server of the backend tests (`WEFT_BENCH_REDIS_URL` overrides it).
fn redis_url() -> String {
    std::env::var("WEFT_BENCH_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// Runs `shape` on Redis under a key prefix of this process, or prints a skipped line without a server.
fn redis(opts: &Options, info: Info, shape: Shape) -> Result<Line, String> {
    let url = redis_url();
    let reachable = url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.rsplit('@').next())
        .and_then(|hp| hp.split('/').next())
        .and_then(|hp| hp.replace("localhost", "127.0.0.1").parse::<SocketAddr>().ok())
        .is_none_or(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok());
    if !reachable {
        return Ok(skipped(info.name, "no Redis server at 127.0.0.1:6379 (set WEFT_BENCH_REDIS_URL)"));
    }
    let prefix = format!("weft-bench-{}-{}", info.name, std::process::id());
    measure(
        opts,
        info,
        Threads::One,
        |rt| {
            let options = RedisOptions::new(url.clone()).prefix(prefix.clone());
            let saver = rt.block_on(RedisSaver::connect_with(options)).map_err(err)?;
            Ok(Redis { saver: Arc::new(saver) })
        },
        |backend| Ok(DurableRun::new(backend, shape, Durability::Async)),
    )
}

/// `loop1000_redis`: loop1000 on Redis, with the server memory its thread takes.
pub(crate) fn loop1000_redis(opts: &Options) -> Result<Line, String> {
    redis(opts, Info::steps("loop1000_redis", 1000).supplementary(), Shape::Loop)
}

/// `messages1000_redis`: messages1000 on Redis, with the server memory its thread takes.
pub(crate) fn messages1000_redis(opts: &Options) -> Result<Line, String> {
    redis(opts, Info::steps("messages1000_redis", 1000).supplementary(), Shape::Messages)
}

/// A fresh database file per op under `root`.
struct Sqlite {
    /// The folder of this process's databases (removed at the end).
    root: PathBuf,
    /// weft's settings.
    options: SqliteOptions,
    /// `PRAGMA synchronous=OFF` on the writer after opening (loop1000_sqlite_syncoff).
    sync_off: bool,
    /// Databases opened so far.
    opened: u64,
}

/// One op's SQLite saver and its folder.
struct SqliteFile {
    saver: Arc<SqliteSaver>,
    dir: PathBuf,
}

#[async_trait]
impl Backend for Sqlite {
    async fn fresh(&mut self) -> Result<Box<dyn Fresh>, String> {
        self.opened += 1;
        let dir = self.root.join(format!("run-{}", self.opened));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let saver = SqliteSaver::open_with(dir.join("weft.db"), self.options.clone()).await.map_err(err)?;
        if self.sync_off {
            // The writer pool has one connection that never expires: the setting stays.
            sqlx::raw_sql("PRAGMA synchronous = OFF").execute(saver.pool()).await.map_err(err)?;
        }
        Ok(Box::new(SqliteFile { saver: Arc::new(saver), dir }))
    }

    async fn describe(&self, line: &mut Line) -> Result<(), String> {
        let synchronous = match (self.sync_off, self.options.durability) {
            (true, _) => "OFF",
            (false, SqliteDurability::Normal) => "NORMAL",
            (false, SqliteDurability::Full) => "FULL",
        };
        line.insert("sqlite_synchronous".into(), json!(synchronous));
        line.insert("settings".into(), json!(format!("synchronous={synchronous}, WAL")));
        Ok(())
    }

    async fn remove(&self) -> Result<(), String> {
        std::fs::remove_dir_all(&self.root).map_err(err)
    }

    fn bytes_key(&self) -> Option<&'static str> {
        Some("file_bytes")
    }
}

#[async_trait]
impl Fresh for SqliteFile {
    fn checkpointer(&self) -> Arc<dyn Checkpointer> {
        self.saver.clone()
    }

    async fn storage(&self, _: &str) -> Result<(StorageStats, u64), String> {
        let stats = self.saver.storage_stats().await.map_err(err)?;
        let mut bytes = 0;
        for entry in std::fs::read_dir(&self.dir).map_err(err)? {
            bytes += entry.map_err(err)?.metadata().map_err(err)?.len();
        }
        Ok((stats, bytes))
    }

    async fn finish(self: Box<Self>, _: &str) -> Result<(), String> {
        self.saver.close().await;
        std::fs::remove_dir_all(&self.dir).map_err(|e| format!("cannot remove {}: {e}", self.dir.display()))
    }
}

/// One saver in a schema of this process, its tables truncated before each op.
struct Postgres {
    saver: Arc<PostgresSaver>,
    /// Its schema (dropped at the end).
    schema: String,
}

/// One op on the shared PostgreSQL saver.
struct PostgresTables {
    saver: Arc<PostgresSaver>,
    schema: String,
}

#[async_trait]
impl Backend for Postgres {
    async fn fresh(&mut self) -> Result<Box<dyn Fresh>, String> {
        sqlx::raw_sql("TRUNCATE checkpoints, checkpoint_blobs, checkpoint_writes")
            .execute(self.saver.pool())
            .await
            .map_err(err)?;
        Ok(Box::new(PostgresTables { saver: self.saver.clone(), schema: self.schema.clone() }))
    }

    async fn describe(&self, line: &mut Line) -> Result<(), String> {
        let setting: String =
            sqlx::query_scalar("SHOW synchronous_commit").fetch_one(self.saver.pool()).await.map_err(err)?;
        line.insert("settings".into(), json!(format!("synchronous_commit={setting}")));
        line.insert("synchronous_commit".into(), json!(setting));
        Ok(())
    }

    async fn remove(&self) -> Result<(), String> {
        let sql = format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.schema);
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(self.saver.pool()).await.map(drop).map_err(err)
    }

    fn bytes_key(&self) -> Option<&'static str> {
        Some("relation_bytes")
    }

    fn counts_statements(&self) -> bool {
        true
    }
}

#[async_trait]
impl Fresh for PostgresTables {
    fn checkpointer(&self) -> Arc<dyn Checkpointer> {
        self.saver.clone()
    }

    /// `pg_total_relation_size` of the three tables: indexes and TOAST included.
    async fn storage(&self, _: &str) -> Result<(StorageStats, u64), String> {
        let stats = self.saver.storage_stats().await.map_err(err)?;
        let bytes: i64 = sqlx::query_scalar(
            "SELECT coalesce(sum(pg_total_relation_size(format('%I.%I', $1::text, t)::regclass)), 0)\
             ::bigint FROM unnest(ARRAY['checkpoints', 'checkpoint_blobs', 'checkpoint_writes']) t",
        )
        .bind(&self.schema)
        .fetch_one(self.saver.pool())
        .await
        .map_err(err)?;
        Ok((stats, u64::try_from(bytes).unwrap_or(0)))
    }

    async fn finish(self: Box<Self>, _: &str) -> Result<(), String> {
        Ok(())
    }
}

/// One saver under a key prefix of this process; each op's thread is deleted after it is measured.
struct Redis {
    saver: Arc<RedisSaver>,
}

#[async_trait]
impl Backend for Redis {
    async fn fresh(&mut self) -> Result<Box<dyn Fresh>, String> {
        Ok(Box::new(Redis { saver: self.saver.clone() }))
    }

    async fn describe(&self, line: &mut Line) -> Result<(), String> {
        line.insert(
            "redis_durability".into(),
            json!("acknowledged once applied in the server's memory; on disk as the server's AOF/RDB settings say"),
        );
        Ok(())
    }

    /// Each op's thread is deleted by [`Fresh::finish`].
    async fn remove(&self) -> Result<(), String> {
        Ok(())
    }

    fn bytes_key(&self) -> Option<&'static str> {
        None
    }
}

#[async_trait]
impl Fresh for Redis {
    fn checkpointer(&self) -> Arc<dyn Checkpointer> {
        self.saver.clone()
    }

    /// The Redis server memory of the thread's keys (`MEMORY USAGE`); Redis has no value rows apart from
    /// checkpoints and writes, so `blobs` stays 0.
    async fn storage(&self, thread: &str) -> Result<(StorageStats, u64), String> {
        // Counted a page at a time, so that rebuilt values do not pile up in this process.
        let config = CheckpointConfig::thread(thread);
        let (mut checkpoints, mut writes, mut before) = (0_usize, 0_usize, None);
        loop {
            let page = ListOptions { before: before.take(), limit: Some(4), ..ListOptions::default() };
            let tuples = self.saver.list(Some(&config), page).await.map_err(err)?;
            checkpoints += tuples.len();
            writes += tuples.iter().map(|t| t.pending_writes.len()).sum::<usize>();
            match tuples.last() {
                Some(last) => before = Some(last.checkpoint.id.clone()),
                None => break,
            }
        }
        let memory = self.saver.stored_bytes(thread).await.map_err(err)?;
        let stats = StorageStats {
            checkpoints: u64::try_from(checkpoints).unwrap_or(u64::MAX),
            blobs: 0,
            writes: u64::try_from(writes).unwrap_or(u64::MAX),
            data_bytes: memory,
        };
        Ok((stats, memory))
    }

    async fn finish(self: Box<Self>, thread: &str) -> Result<(), String> {
        self.saver.delete_thread(thread).await.map_err(err)
    }
}
