#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]
//! Fault injection on each durable backend, on real servers: a private PostgreSQL cluster and a private
//! `redis-server` (each on a free loopback port, in a temporary folder) are killed with SIGKILL in the
//! middle of a run, and a SQLite database is locked by another connection. With the default `async`
//! durability the run must stop within one step of overlap with the checkpointer's error naming the
//! cause; once the backend is back, resuming the thread loses nothing that was saved and runs no
//! finished task again beyond the step that overlapped the failed save.
//!
//! A missing server binary skips a test loudly, and fails it in CI (`CI` set).

#![cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]

mod fault_common;

use std::sync::Arc;
use std::time::Duration;

use fault_common::{chain, resume_and_check, run_into_fault};

/// Tasks that finish before the fault.
const BEFORE_FAULT: usize = 24;
/// How long the run may go on after the fault.
const STOP_WITHIN: Duration = Duration::from_secs(15);

/// Whether `err`'s text (with its sources) names one of `causes`.
fn names_cause(text: &str, causes: &[&str]) -> bool {
    let text = text.to_lowercase();
    causes.iter().any(|c| text.contains(c))
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_killed_mid_run_stops_the_run_and_a_resume_loses_nothing() {
    use fault_common::servers::PgServer;
    use weft_integrations::postgres::{PostgresOptions, PostgresSaver, RetryPolicy};

    let test = "postgres_killed_mid_run_stops_the_run_and_a_resume_loses_nothing";
    let Some(mut server) = PgServer::start(test) else { return };
    let options = PostgresOptions {
        acquire_timeout: Duration::from_secs(2),
        retry: RetryPolicy { retries: 1, ..RetryPolicy::default() },
        ..PostgresOptions::default()
    };
    let saver = Arc::new(PostgresSaver::connect_with(&server.url(), options.clone()).await.unwrap());
    let faulted = run_into_fault(saver.clone(), BEFORE_FAULT, STOP_WITHIN, || async { server.kill() }).await;
    let text = chain(&faulted.error);
    assert!(
        names_cause(
            &text,
            &[
                "connection refused",
                "connection reset",
                "broken pipe",
                "unexpected eof",
                "unexpected postmaster exit"
            ]
        ),
        "the error does not say why: {text}"
    );
    drop(saver);
    server.restart();
    let saver = Arc::new(PostgresSaver::connect_with(&server.url(), options).await.unwrap());
    resume_and_check(saver, faulted).await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_mid_run_stops_the_run_and_a_resume_loses_nothing() {
    use fault_common::servers::RedisServer;
    use weft_integrations::redis::{RedisOptions, RedisSaver};

    let test = "redis_killed_mid_run_stops_the_run_and_a_resume_loses_nothing";
    let Some(mut server) = RedisServer::start(test) else { return };
    let options = || {
        RedisOptions::new(server.url())
            .retries(2, Duration::from_millis(50))
            .timeouts(Duration::from_secs(2), Duration::from_millis(500))
    };
    let saver = Arc::new(RedisSaver::connect_with(options()).await.unwrap());
    let options_after = options();
    let faulted = run_into_fault(saver.clone(), BEFORE_FAULT, STOP_WITHIN, || async { server.kill() }).await;
    let text = chain(&faulted.error);
    assert!(
        names_cause(&text, &["connection refused", "connection reset", "broken pipe", "connection closed"]),
        "the error does not say why: {text}"
    );
    drop(saver);
    server.restart();
    let saver = Arc::new(RedisSaver::connect_with(options_after).await.unwrap());
    resume_and_check(saver, faulted).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_locked_by_another_connection_stops_the_run_and_a_resume_loses_nothing() {
    use fault_common::servers::TempDir;
    use sqlx::Connection as _;
    use weft_integrations::sqlite::{SqliteOptions, SqliteSaver};

    let dir = TempDir::new("sqlite-lock");
    let path = dir.0.join("checkpoints.db");
    let options = SqliteOptions { busy_timeout: Duration::from_millis(300), ..SqliteOptions::default() };
    let saver = Arc::new(SqliteSaver::open_with(&path, options.clone()).await.unwrap());
    let mut other = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    // Mid-run, another connection takes the database's write lock and holds it.
    let faulted = run_into_fault(saver.clone(), BEFORE_FAULT, STOP_WITHIN, || async {
        sqlx::raw_sql("BEGIN EXCLUSIVE").execute(&mut other).await.unwrap();
    })
    .await;
    let text = chain(&faulted.error);
    assert!(names_cause(&text, &["database is locked", "busy"]), "the error does not say why: {text}");
    // The lock goes (its holder rolls back), and a new process resumes the thread.
    sqlx::raw_sql("ROLLBACK").execute(&mut other).await.unwrap();
    other.close().await.unwrap();
    drop(saver);
    let saver = Arc::new(SqliteSaver::open_with(&path, options).await.unwrap());
    resume_and_check(saver, faulted).await;
}
