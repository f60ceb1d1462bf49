#![allow(clippy::unwrap_used, missing_docs)]
//! `keep_latest` retention (a thread pruned to its newest checkpoint, as the server's TTL sweep and
//! `POST /threads/prune` do) on every saver: a thread of 1,000 turns holds, after it, exactly the rows
//! (or keys) of a thread of one turn pruned the same way, that is one checkpoint's, and reads back whole.

#![cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]

#[cfg(feature = "postgres")]
mod common;
#[cfg(feature = "redis")]
mod redis_common;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use weft_graph::checkpoint::{CheckpointConfig, Checkpointer};
use weft_graph::{CompileConfig, CompiledGraph, START, State, StateGraph};
use weft_runnable_core::RunnableConfig;

/// A conversation's turn counter and its last reply.
#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Turn {
    turns: u64,
    said: String,
    reply: String,
}

/// One node that answers what was said and counts the turn.
fn chat(saver: Arc<dyn Checkpointer>) -> CompiledGraph<Turn> {
    let mut graph = StateGraph::<Turn>::new();
    graph.add_node("answer", |s: Turn| {
        Turn::update().turns(s.turns + 1).reply(format!("turn {}: {}", s.turns + 1, s.said))
    });
    graph.add_edge(START, "answer");
    graph.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

/// Runs `turns` turns on `thread_id` (one invoke each), then keeps only its newest checkpoint.
async fn talk_then_keep_latest(saver: Arc<dyn Checkpointer>, thread_id: &str, turns: u64) {
    let app = chat(Arc::clone(&saver));
    let config = RunnableConfig::default().with_configurable("thread_id", thread_id);
    for turn in 1..=turns {
        let out = app.invoke(Turn::update().said(format!("hello {turn}")), &config).await.unwrap();
        assert_eq!(out.value.turns, turn);
    }
    saver.prune(thread_id, 1).await.unwrap();
    let latest = saver.get_tuple(&CheckpointConfig::thread(thread_id)).await.unwrap().unwrap();
    let values = &latest.checkpoint.channel_values;
    assert_eq!(values["turns"], serde_json::json!(turns), "the kept checkpoint reads whole");
    assert_eq!(values["reply"], serde_json::json!(format!("turn {turns}: hello {turns}")));
    assert_eq!(saver.list_ids(&CheckpointConfig::thread(thread_id)).await.unwrap().len(), 1);
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_keeps_one_checkpoints_rows_of_a_thousand_turns() {
    use weft_integrations::sqlite::SqliteSaver;

    let saver = Arc::new(SqliteSaver::in_memory().await.unwrap());
    let rows = |thread: &'static str| {
        let pool = saver.pool().clone();
        async move {
            let mut counts = Vec::new();
            for table in ["checkpoints", "checkpoint_blobs", "checkpoint_writes"] {
                let sql = format!("SELECT count(*) FROM {table} WHERE thread_id = ?");
                let n: i64 =
                    sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(thread).fetch_one(&pool).await.unwrap();
                counts.push(n);
            }
            counts
        }
    };
    talk_then_keep_latest(saver.clone(), "long", 1000).await;
    talk_then_keep_latest(saver.clone(), "short", 1).await;
    let (long, short) = (rows("long").await, rows("short").await);
    assert_eq!(long[0], 1, "one checkpoint row");
    assert_eq!(long, short, "the rows of one checkpoint (checkpoints, blobs, writes)");
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_keeps_one_checkpoints_rows_of_a_thousand_turns() {
    let Some(saver) = common::saver().await else { return };
    let (saver, schema) = saver.into_parts();
    let rows = |thread: &'static str| {
        let (pool, schema) = (saver.pool().clone(), schema.name.clone());
        async move {
            let mut counts = Vec::new();
            for table in ["checkpoints", "checkpoint_blobs", "checkpoint_writes"] {
                let sql = format!("SELECT count(*) FROM \"{schema}\".{table} WHERE thread_id = $1");
                let n: i64 =
                    sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(thread).fetch_one(&pool).await.unwrap();
                counts.push(n);
            }
            counts
        }
    };
    talk_then_keep_latest(saver.clone(), "long", 1000).await;
    talk_then_keep_latest(saver.clone(), "short", 1).await;
    let (long, short) = (rows("long").await, rows("short").await);
    assert_eq!(long[0], 1, "one checkpoint row");
    assert_eq!(long, short, "the rows of one checkpoint (checkpoints, blobs, writes)");
}

/// Every key under `prefix` with its number of entries (fields, members, elements; a string is one).
#[cfg(feature = "redis")]
async fn redis_entries(prefix: &str) -> Vec<(String, i64)> {
    let mut conn = redis_common::raw().await;
    let mut entries = Vec::new();
    for key in redis_common::keys_under(prefix).await {
        let kind: String = redis::cmd("TYPE").arg(&key).query_async(&mut conn).await.unwrap();
        let size: i64 = match kind.as_str() {
            "hash" => redis::cmd("HLEN").arg(&key).query_async(&mut conn).await.unwrap(),
            "zset" => redis::cmd("ZCARD").arg(&key).query_async(&mut conn).await.unwrap(),
            "set" => redis::cmd("SCARD").arg(&key).query_async(&mut conn).await.unwrap(),
            "list" => redis::cmd("LLEN").arg(&key).query_async(&mut conn).await.unwrap(),
            _ => 1,
        };
        entries.push((key.trim_start_matches(prefix).to_owned(), size));
    }
    entries
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_keeps_one_checkpoints_keys_of_a_thousand_turns() -> Result<(), String> {
    let long = Arc::new(saver_or_skip!("keep-latest-long"));
    let short = Arc::new(saver_or_skip!("keep-latest-short"));
    talk_then_keep_latest(long.clone(), "t", 1000).await;
    talk_then_keep_latest(short.clone(), "t", 1).await;
    let long_entries = redis_entries(long.intercept().prefix()).await;
    let short_entries = redis_entries(short.intercept().prefix()).await;
    let (long_keys, short_keys): (Vec<_>, Vec<_>) =
        (long_entries.iter().map(|(_, n)| *n).collect(), short_entries.iter().map(|(_, n)| *n).collect());
    assert_eq!(long_entries.len(), short_entries.len(), "{long_entries:?} against {short_entries:?}");
    assert_eq!(
        long_keys.iter().sum::<i64>(),
        short_keys.iter().sum::<i64>(),
        "one checkpoint's entries: {long_entries:?} against {short_entries:?}"
    );
    Ok(())
}
