#![allow(clippy::unwrap_used, missing_docs)]
//! Concurrent graph runs on every durable saver, on the real servers: 200 threads at once (each one
//! chain of its own checkpoints, no deadlock) and two runs of one thread at once (exactly one conflict
//! error, the history one chain).

#![cfg(all(feature = "sqlite", feature = "postgres", feature = "redis"))]

mod common;
mod concurrency;
mod redis_common;

use std::sync::Arc;

use weft_graph::checkpoint::InMemorySaver;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_memory_200_threads_at_once_stay_apart() {
    concurrency::many_threads_at_once(Arc::new(InMemorySaver::new()), "memory", 200, 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_memory_two_runs_of_one_thread_one_conflict() {
    concurrency::two_runs_of_one_thread(Arc::new(InMemorySaver::new()), "memory").await;
}

#[tokio::test]
async fn in_memory_forks_make_new_heads() {
    concurrency::forks_make_new_heads(Arc::new(InMemorySaver::new()), "memory").await;
}

mod sqlite {
    use weft_integrations::sqlite::SqliteSaver;

    use super::*;

    async fn saver() -> Arc<SqliteSaver> {
        let dir = std::env::temp_dir().join(format!("weft-conc-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        Arc::new(SqliteSaver::open(dir.join("weft.db")).await.unwrap())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite_200_threads_at_once_stay_apart() {
        concurrency::many_threads_at_once(saver().await, "sqlite", 200, 4).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite_two_runs_of_one_thread_one_conflict() {
        concurrency::two_runs_of_one_thread(saver().await, "sqlite").await;
    }

    #[tokio::test]
    async fn sqlite_a_batch_stored_again_is_not_a_conflict() {
        concurrency::a_batch_stored_again_is_not_a_conflict(saver().await.as_ref()).await;
    }

    #[tokio::test]
    async fn sqlite_forks_make_new_heads() {
        concurrency::forks_make_new_heads(saver().await, "sqlite").await;
    }
}

mod postgres {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres_200_threads_at_once_stay_apart() {
        let Some(saver) = common::saver().await else { return };
        concurrency::many_threads_at_once(Arc::new(saver), "postgres", 200, 4).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres_two_runs_of_one_thread_one_conflict() {
        let Some(saver) = common::saver().await else { return };
        concurrency::two_runs_of_one_thread(Arc::new(saver), "postgres").await;
    }

    #[tokio::test]
    async fn postgres_a_batch_stored_again_is_not_a_conflict() {
        let Some(saver) = common::saver().await else { return };
        concurrency::a_batch_stored_again_is_not_a_conflict(&saver).await;
    }

    #[tokio::test]
    async fn postgres_forks_make_new_heads() {
        let Some(saver) = common::saver().await else { return };
        concurrency::forks_make_new_heads(Arc::new(saver), "postgres").await;
    }
}

mod redis {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn redis_200_threads_at_once_stay_apart() -> Result<(), String> {
        let saver = saver_or_skip!("concurrency-200");
        concurrency::many_threads_at_once(Arc::new(saver), "redis", 200, 4).await;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn redis_two_runs_of_one_thread_one_conflict() -> Result<(), String> {
        let saver = saver_or_skip!("concurrency-two-runs");
        concurrency::two_runs_of_one_thread(Arc::new(saver), "redis").await;
        Ok(())
    }

    #[tokio::test]
    async fn redis_forks_make_new_heads() -> Result<(), String> {
        let saver = saver_or_skip!("concurrency-forks");
        concurrency::forks_make_new_heads(Arc::new(saver), "redis").await;
        Ok(())
    }
}
