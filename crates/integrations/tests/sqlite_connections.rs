#![allow(clippy::unwrap_used, missing_docs)]
//! The SQLite saver's connections: each one's page cache is bounded as the options say, readers are no
//! more than the options allow, a closed saver refuses work with an error, and a file migrated by a newer
//! build opens only when its newer steps leave this build working.

#![cfg(feature = "sqlite")]

use std::path::PathBuf;

use serde_json::json;
use weft_graph::checkpoint::{CheckpointConfig, Checkpointer};
use weft_integrations::sqlite::{DEFAULT_CACHE_KIB, SqlStatement, SqliteOptions, SqlitePool, SqliteSaver};

fn file() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-conns-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("weft.db")
}

async fn cache_size(pool: &SqlitePool) -> i64 {
    sqlx::query_scalar("PRAGMA cache_size").fetch_one(pool).await.unwrap()
}

#[tokio::test]
async fn every_connection_bounds_its_page_cache_as_the_options_say() {
    let saver = SqliteSaver::open(file()).await.unwrap();
    let default = -i64::from(DEFAULT_CACHE_KIB);
    assert_eq!((cache_size(saver.pool()).await, cache_size(saver.reader()).await), (default, default));

    let options = SqliteOptions { cache_kib: 300, ..SqliteOptions::default() };
    let saver = SqliteSaver::open_with(file(), options).await.unwrap();
    assert_eq!((cache_size(saver.pool()).await, cache_size(saver.reader()).await), (-300, -300));
}

#[tokio::test]
async fn readers_are_no_more_than_read_connections() {
    let options = SqliteOptions { read_connections: 2, ..SqliteOptions::default() };
    let saver = SqliteSaver::open_with(file(), options).await.unwrap();
    let thread = CheckpointConfig::thread("reads");
    let reads = (0..8).map(|_| saver.get_tuple(&thread));
    for found in futures::future::join_all(reads).await {
        assert!(found.unwrap().is_none());
    }
    assert!(saver.reader().size() <= 2, "{} readers, 2 allowed", saver.reader().size());
}

#[tokio::test]
async fn a_closed_saver_refuses_work_with_an_error() {
    let saver = SqliteSaver::open(file()).await.unwrap();
    let thread = CheckpointConfig::thread("closed");
    saver.put_writes(&with_id(&thread), vec![("n".into(), json!(1))], "task", "").await.unwrap();
    saver.close().await;
    assert!(saver.pool().is_closed() && saver.reader().is_closed());
    assert!(saver.get_tuple(&thread).await.is_err());
    assert!(saver.put_writes(&with_id(&thread), vec![("n".into(), json!(2))], "task", "").await.is_err());
    let statement = SqlStatement::new("SELECT 1", vec![]);
    assert!(saver.write_with_checkpoints(vec![statement]).await.is_err(), "the group committer wrote");
}

/// A file whose migrations table predates `readable_from` gets the column; a newer build's step that
/// leaves older builds working lets this build open the file; one that does not (or that says nothing)
/// is refused by name.
#[tokio::test]
async fn an_older_build_opens_a_newer_schema_only_when_the_newer_steps_allow_it() {
    let path = file();
    let saver = SqliteSaver::open(&path).await.unwrap();
    sqlx::raw_sql("ALTER TABLE weft_migrations DROP COLUMN readable_from")
        .execute(saver.pool())
        .await
        .unwrap();
    saver.close().await;
    let saver = SqliteSaver::open(&path).await.unwrap();
    let steps: Vec<(String, i64, Option<i64>)> =
        sqlx::query_as("SELECT component, version, readable_from FROM weft_migrations ORDER BY component")
            .fetch_all(saver.pool())
            .await
            .unwrap();
    assert_eq!(
        steps,
        vec![("checkpoint".to_owned(), 1, None), ("checkpoint".to_owned(), 2, None)],
        "the column is back, empty for older steps"
    );
    let newer = |readable_from: Option<i64>| {
        sqlx::query(
            "INSERT INTO weft_migrations (component, version, name, applied_at, readable_from) \
             VALUES ('checkpoint', 99, 'a newer build''s step', 0, ?1)",
        )
        .bind(readable_from)
    };
    newer(Some(1)).execute(saver.pool()).await.unwrap();
    saver.close().await;
    let saver = SqliteSaver::open(&path).await.unwrap();
    assert!(saver.get_tuple(&CheckpointConfig::thread("upgraded")).await.unwrap().is_none());
    for refusing in [Some(99), None] {
        sqlx::query("DELETE FROM weft_migrations WHERE version = 99").execute(saver.pool()).await.unwrap();
        newer(refusing).execute(saver.pool()).await.unwrap();
        let Err(err) = SqliteSaver::open(&path).await else {
            panic!("a file this build cannot use was opened");
        };
        let err = err.to_string();
        assert!(
            err.contains("checkpoint schema version 99, which needs a build that knows versions up to 99")
                && err.contains("this build knows versions up to 2"),
            "{err}"
        );
    }
    let fresh = SqliteSaver::open(file()).await.unwrap();
    let recorded: Vec<(i64, Option<i64>)> =
        sqlx::query_as("SELECT version, readable_from FROM weft_migrations")
            .fetch_all(fresh.pool())
            .await
            .unwrap();
    assert_eq!(recorded, vec![(1, Some(0)), (2, Some(2))]);
}

fn with_id(thread: &CheckpointConfig) -> CheckpointConfig {
    CheckpointConfig { checkpoint_id: Some(uuid::Uuid::now_v7().to_string()), ..thread.clone() }
}
