//! The workloads on the durable backends, by name: loop1000_sqlite (and `_normal`, `_dsync`, `_syncoff`),
//! loop1000_postgres (and `_dsync`, `_asynccommit`), loop1000_redis, and messages1000 on each backend.

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use weft_graph::Durability;
use weft_integrations::postgres::{PostgresOptions, PostgresSaver};
use weft_integrations::redis::{RedisOptions, RedisSaver};
use weft_integrations::sqlite::{SqliteDurability, SqliteOptions};

use super::checkpoint::skipped;
use super::durable::{Backend, DurableRun, Shape};
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
            Ok(Backend::Sqlite {
                root,
                options: SqliteOptions::default().durability(sqlite),
                sync_off,
                opened: 0,
            })
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
            Ok(Backend::Postgres { saver: Arc::new(saver), schema: schema.clone() })
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
            Ok(Backend::Redis { saver: Arc::new(saver) })
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
