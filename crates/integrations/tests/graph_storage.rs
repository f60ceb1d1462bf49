#![allow(clippy::unwrap_used, missing_docs)]
//! Real graphs on the SQL savers: a growing message list is stored as deltas (a fraction of the bytes
//! of whole copies), every checkpoint reads back exactly, pruning keeps what the kept checkpoints list,
//! and a new process continues a thread.

#![cfg(any(feature = "sqlite", feature = "postgres"))]

#[cfg(feature = "postgres")]
mod common;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use weft_graph::checkpoint::{CheckpointConfig, Checkpointer, ListOptions};
use weft_graph::messages::{Message, Messages};
use weft_graph::{CompileConfig, CompiledGraph, END, START, State, StateGraph};
use weft_integrations::DeltaStorage;
use weft_runnable_core::RunnableConfig;

/// LangGraph's messages state.
#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Chat {
    #[state(add_messages)]
    messages: Messages,
}

/// `talk` appends one AI message per superstep until the list holds `n` messages.
fn talk(saver: Arc<dyn Checkpointer>, n: usize) -> CompiledGraph<Chat> {
    let mut graph = StateGraph::<Chat>::new();
    graph.add_node("talk", |s: Chat| {
        Chat::update().messages(vec![Message::ai(format!("m{}", s.messages.len()))])
    });
    graph.add_edge(START, "talk");
    graph.add_conditional_edges(
        "talk",
        move |s: &Chat| if s.messages.len() < n { "talk" } else { END },
        None,
    );
    graph.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id).with_recursion_limit(5_000)
}

/// Runs the thread to `n` messages and checks that every checkpoint holds a prefix of the final list, no
/// longer than the next checkpoint's.
async fn run_and_check(saver: Arc<dyn Checkpointer>, thread_id: &str, n: usize) {
    let app = talk(saver, n);
    let input = Chat::update().messages(vec![Message::human("hi")]);
    let out = app.invoke(input, &thread(thread_id)).await.unwrap();
    assert_eq!(out.value.messages.len(), n);
    let history = app.get_state_history(&thread(thread_id), ListOptions::default()).await.unwrap();
    let last = history[0].values.messages.as_slice().to_vec();
    assert_eq!(last.len(), n);
    let mut previous = usize::MAX;
    for snapshot in &history {
        let messages = snapshot.values.messages.as_slice();
        assert_eq!(messages, &last[..messages.len()], "every checkpoint reads back exactly");
        assert!(messages.len() <= previous, "older checkpoints hold no more messages");
        previous = messages.len();
    }
}

/// `reply` answers each human message with one AI message: a turn of a chat.
fn chat(saver: Arc<dyn Checkpointer>) -> CompiledGraph<Chat> {
    let mut graph = StateGraph::<Chat>::new();
    graph.add_node("reply", |s: Chat| {
        Chat::update().messages(vec![Message::ai(format!("a{}", s.messages.len()))])
    });
    graph.add_edge(START, "reply");
    graph.add_edge("reply", END);
    graph.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

/// The delta storage of the chain tests: a whole list after 8 appended ones.
const SHORT_CHAINS: DeltaStorage =
    DeltaStorage { enabled: true, snapshot_every: 8, cache_entries: 1024, cache_bytes: 64 << 20 };

/// Runs turns `from..to` of a chat on `thread_id` (each its own invoke, as a chat thread has one run
/// per message) and checks that every checkpoint reads back exactly.
async fn chat_turns(saver: Arc<dyn Checkpointer>, thread_id: &str, from: usize, to: usize) {
    let app = chat(saver);
    for turn in from..to {
        let input = Chat::update().messages(vec![Message::human(format!("h{turn}"))]);
        let out = app.invoke(input, &thread(thread_id)).await.unwrap();
        assert_eq!(out.value.messages.len(), 2 * (turn + 1));
    }
    let history = app.get_state_history(&thread(thread_id), ListOptions::default()).await.unwrap();
    let last = history[0].values.messages.as_slice().to_vec();
    assert_eq!(last.len(), 2 * to);
    for snapshot in &history {
        let messages = snapshot.values.messages.as_slice();
        assert_eq!(messages, &last[..messages.len()], "every checkpoint reads back exactly");
    }
}

/// The most links from a stored version of a list to a whole one, from `(version, base_version)` rows.
fn longest_chain(rows: Vec<(String, Option<String>)>) -> usize {
    let bases: std::collections::HashMap<String, Option<String>> = rows.into_iter().collect();
    let links = |version: &String| {
        std::iter::successors(Some(version), |at| bases.get(*at).and_then(Option::as_ref))
            .take(bases.len() + 1)
            .count()
            - 1
    };
    bases.keys().map(links).max().unwrap_or(0)
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use weft_integrations::sqlite::{SqliteOptions, SqliteSaver};

    use super::*;

    fn temp_db() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("weft-graph-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("weft.db")
    }

    async fn open(path: &std::path::Path, delta: DeltaStorage) -> Arc<SqliteSaver> {
        Arc::new(
            SqliteSaver::open_with(path, SqliteOptions { delta, ..SqliteOptions::default() }).await.unwrap(),
        )
    }

    #[tokio::test]
    async fn a_growing_message_list_is_stored_as_deltas_and_read_back_exactly() {
        let path = temp_db();
        let saver = open(&path, DeltaStorage::default()).await;
        run_and_check(saver.clone(), "deltas", 150).await;
        let whole = open(&temp_db(), DeltaStorage::off()).await;
        run_and_check(whole.clone(), "whole", 150).await;
        let (small, big) = (saver.storage_stats().await.unwrap(), whole.storage_stats().await.unwrap());
        assert!(small.data_bytes * 5 < big.data_bytes, "deltas {small:?} against whole copies {big:?}");

        // A new process (no memory of the last lists) continues the thread.
        drop(saver);
        let again = open(&path, DeltaStorage::default()).await;
        run_and_check(again.clone(), "deltas", 200).await;

        again.prune("deltas", 1).await.unwrap();
        let latest = again.get_tuple(&CheckpointConfig::thread("deltas")).await.unwrap().unwrap();
        let messages = latest.checkpoint.channel_values["messages"].as_array().unwrap().len();
        assert_eq!(
            messages, 200,
            "the kept checkpoint still reads whole after pruning its delta bases' peers"
        );
        // The engine hands the savers its appends, a delta row per step; the prune stores the kept list
        // whole and drops the rest: one row per channel.
        let stats = again.storage_stats().await.unwrap();
        let channels = u64::try_from(latest.checkpoint.channel_versions.len()).unwrap();
        assert_eq!(stats.blobs, channels, "pruning keeps the kept checkpoint's values only: {stats:?}");
    }

    async fn chains(saver: &SqliteSaver, thread_id: &str) -> usize {
        let rows = sqlx::query_as(
            "SELECT version, base_version FROM checkpoint_blobs WHERE thread_id = ?1 AND channel = 'messages'",
        )
        .bind(thread_id)
        .fetch_all(saver.pool())
        .await
        .unwrap();
        longest_chain(rows)
    }

    #[tokio::test]
    async fn the_engines_appends_are_stored_whole_every_few_versions() {
        let path = temp_db();
        let saver = open(&path, SHORT_CHAINS).await;
        // A chat: one run per turn, each appending a human and an AI message.
        chat_turns(saver.clone(), "chat", 0, 60).await;
        let longest = chains(&saver, "chat").await;
        // A turn's input checkpoint may still be in flight when its reply's save reaches the count, and
        // is not read: a link or two more before the save after it cuts the chain.
        assert!((1..=10).contains(&longest), "longest chain of appended values: {longest}");
        // One long run: a message per superstep.
        run_and_check(saver.clone(), "long", 150).await;
        let longest = chains(&saver, "long").await;
        // A parent still being stored (the save before the last, in flight) is not read: a link or two
        // more before the cut.
        assert!((1..=10).contains(&longest), "longest chain of appended values in one run: {longest}");
        // Deltas still: far fewer whole lists than versions.
        let (wholes, versions): (i64, i64) = sqlx::query_as(
            "SELECT sum(base_version IS NULL), count(*) FROM checkpoint_blobs WHERE channel = 'messages'",
        )
        .fetch_one(saver.pool())
        .await
        .unwrap();
        assert!(wholes * 6 < versions, "{wholes} whole lists among {versions} versions");
        // A new process counts from nothing: its chains are cut too, if later.
        drop(saver);
        let again = open(&path, SHORT_CHAINS).await;
        chat_turns(again.clone(), "chat", 60, 140).await;
        let longest = chains(&again, "chat").await;
        assert!((1..=16).contains(&longest), "longest chain after a restart: {longest}");
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use weft_integrations::postgres::PostgresOptions;

    use super::*;

    #[tokio::test]
    async fn a_growing_message_list_is_stored_as_deltas_and_read_back_exactly() {
        let Some(deltas) = common::saver().await else { return };
        let Some(whole) = common::saver_with(|o| PostgresOptions { delta: DeltaStorage::off(), ..o }).await
        else {
            return;
        };
        let (saver, schema) = deltas.into_parts();
        run_and_check(saver.clone(), "deltas", 150).await;
        let (whole_saver, _whole_schema) = whole.into_parts();
        run_and_check(whole_saver.clone(), "whole", 150).await;
        let (small, big) = (saver.storage_stats().await.unwrap(), whole_saver.storage_stats().await.unwrap());
        assert!(small.data_bytes * 5 < big.data_bytes, "deltas {small:?} against whole copies {big:?}");

        let again = Arc::new(
            weft_integrations::postgres::PostgresSaver::connect_with(&common::pg_url(), schema.options())
                .await
                .unwrap(),
        );
        run_and_check(again.clone(), "deltas", 200).await;
        again.prune("deltas", 1).await.unwrap();
        let latest = again.get_tuple(&CheckpointConfig::thread("deltas")).await.unwrap().unwrap();
        assert_eq!(latest.checkpoint.channel_values["messages"].as_array().unwrap().len(), 200);
        // The kept list stored whole, one row per channel (see the SQLite case).
        let stats = again.storage_stats().await.unwrap();
        let channels = u64::try_from(latest.checkpoint.channel_versions.len()).unwrap();
        assert_eq!(stats.blobs, channels, "pruning keeps the kept checkpoint's values only: {stats:?}");
        drop(saver);
    }

    #[tokio::test]
    async fn the_engines_appends_are_stored_whole_every_few_versions() {
        let Some(test) = common::saver_with(|o| PostgresOptions { delta: SHORT_CHAINS, ..o }).await else {
            return;
        };
        let (saver, _schema) = test.into_parts();
        let chains = async |thread_id: &str| {
            let rows = sqlx::query_as(
                "SELECT version, base_version FROM checkpoint_blobs WHERE thread_id = $1 AND channel = 'messages'",
            )
            .bind(thread_id)
            .fetch_all(saver.pool())
            .await
            .unwrap();
            longest_chain(rows)
        };
        chat_turns(saver.clone(), "chat", 0, 60).await;
        let longest = chains("chat").await;
        // As in one run below: a turn's input checkpoint may still be in flight when its reply's save
        // reaches the count, and is not read; the save after it cuts the chain.
        assert!((1..=10).contains(&longest), "longest chain of appended values: {longest}");
        run_and_check(saver.clone(), "long", 150).await;
        let longest = chains("long").await;
        // A parent still being stored (the save before the last, in flight) is not read: a link or two
        // more before the cut.
        assert!((1..=10).contains(&longest), "longest chain of appended values in one run: {longest}");
    }

    /// Blob rows PostgreSQL has fetched from `checkpoint_blobs`, as its statistics count them. Every
    /// statement the test runs goes through the pool's one connection, which is told to publish its
    /// counts when it next goes idle (`pg_stat_force_next_flush`, before it answers).
    async fn blobs_fetched(pool: &weft_integrations::postgres::PgPool) -> i64 {
        sqlx::query("SELECT pg_stat_force_next_flush()").execute(pool).await.unwrap();
        sqlx::query_scalar(
            "SELECT coalesce(idx_tup_fetch, 0) + seq_tup_read FROM pg_stat_user_tables \
             WHERE relid = 'checkpoint_blobs'::regclass",
        )
        .fetch_one(pool)
        .await
        .unwrap()
    }

    /// The blob rows one read of the latest checkpoint fetches.
    async fn fetched_by_one_read(saver: &weft_integrations::postgres::PostgresSaver, thread_id: &str) -> i64 {
        let before = blobs_fetched(saver.pool()).await;
        sqlx::query("SELECT pg_stat_force_next_flush()").execute(saver.pool()).await.unwrap();
        let latest = saver.get_tuple(&CheckpointConfig::thread(thread_id)).await.unwrap().unwrap();
        assert!(!latest.checkpoint.channel_values.is_empty());
        blobs_fetched(saver.pool()).await - before
    }

    #[tokio::test]
    async fn reading_a_checkpoint_fetches_its_blobs_whatever_the_history() {
        let one =
            |o: PostgresOptions| PostgresOptions { max_connections: 1, delta: DeltaStorage::off(), ..o };
        let Some(test) = common::saver_with(one).await else { return };
        let (saver, _schema) = test.into_parts();
        run_and_check(saver.clone(), "short", 3).await;
        let short = fetched_by_one_read(&saver, "short").await;
        run_and_check(saver.clone(), "long", 120).await;
        let long = fetched_by_one_read(&saver, "long").await;
        let stored = saver.storage_stats().await.unwrap().blobs;
        // The latest checkpoint of either thread has the same channels, one blob each.
        assert!(short > 0, "the read fetches the checkpoint's blobs");
        assert_eq!(long, short, "120 supersteps of history ({stored} blobs stored) cost the read nothing");
    }

    #[tokio::test]
    async fn a_delta_chain_that_runs_in_a_circle_is_an_error_not_a_hang() {
        let Some(test) = common::saver().await else { return };
        let (saver, _schema) = test.into_parts();
        run_and_check(saver.clone(), "circle", 10).await;
        let damaged = sqlx::query(
            "UPDATE checkpoint_blobs SET base_version = version WHERE thread_id = 'circle' \
             AND base_version IS NOT NULL",
        )
        .execute(saver.pool())
        .await
        .unwrap();
        assert!(damaged.rows_affected() > 0, "the list is stored as deltas");
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            saver.get_tuple(&CheckpointConfig::thread("circle")),
        )
        .await
        .expect("the read ends");
        assert!(read.is_err(), "a delta based on itself is reported: {read:?}");
    }
}

/// Bytes stored by LangGraph's `messages1000` workload (1,000 supersteps, one message each) on each SQL
/// backend, with and without deltas. Run by hand: `cargo test -p weft-integrations --all-features --test
/// graph_storage -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "a measurement, not a check: run by hand"]
async fn report_messages1000_bytes() {
    #[cfg(feature = "sqlite")]
    for (label, delta) in [("deltas", DeltaStorage::default()), ("whole copies", DeltaStorage::off())] {
        use weft_integrations::sqlite::{SqliteOptions, SqliteSaver};
        let dir = std::env::temp_dir().join(format!("weft-report-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("weft.db");
        let saver = Arc::new(
            SqliteSaver::open_with(&path, SqliteOptions { delta, ..SqliteOptions::default() }).await.unwrap(),
        );
        let started = std::time::Instant::now();
        run_and_check(saver.clone(), "messages1000", 1000).await;
        let took = started.elapsed();
        let stats = saver.storage_stats().await.unwrap();
        let files: u64 = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
        println!("sqlite messages1000 ({label}): {stats:?}; db+wal files {files} bytes; run+check {took:?}");
    }
    #[cfg(feature = "postgres")]
    for (label, delta) in [("deltas", DeltaStorage::default()), ("whole copies", DeltaStorage::off())] {
        use weft_integrations::postgres::PostgresOptions;
        let Some(saver) = common::saver_with(|o| PostgresOptions { delta, ..o }).await else { return };
        let (saver, _schema) = saver.into_parts();
        let started = std::time::Instant::now();
        run_and_check(saver.clone(), "messages1000", 1000).await;
        let took = started.elapsed();
        let stats = saver.storage_stats().await.unwrap();
        println!("postgres messages1000 ({label}): {stats:?}; run+check {took:?}");
    }
}

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Count {
    count: i64,
}

/// LangGraph's `loop1000` (one node, 1,000 supersteps) on each SQL backend: time and bytes. Run by hand
/// like [`report_messages1000_bytes`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check: run by hand"]
async fn report_loop1000() {
    fn app(saver: Arc<dyn Checkpointer>) -> CompiledGraph<Count> {
        let mut g = StateGraph::<Count>::new();
        g.add_node("inc", |s: Count| Count::update().count(s.count + 1));
        g.add_edge(START, "inc");
        g.add_conditional_edges("inc", |s: &Count| if s.count < 1000 { "inc" } else { END }, None);
        g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
    }
    #[cfg(feature = "sqlite")]
    for durability in [
        weft_integrations::sqlite::SqliteDurability::Normal,
        weft_integrations::sqlite::SqliteDurability::Full,
    ] {
        use weft_integrations::sqlite::{SqliteOptions, SqliteSaver};
        let mut times = Vec::new();
        let mut last = None;
        for run in 0..5 {
            let dir = std::env::temp_dir().join(format!("weft-loop-{}", uuid::Uuid::new_v4().simple()));
            std::fs::create_dir_all(&dir).unwrap();
            let options = SqliteOptions { durability, ..SqliteOptions::default() };
            let saver = Arc::new(SqliteSaver::open_with(dir.join("weft.db"), options).await.unwrap());
            let graph = app(saver.clone());
            let started = std::time::Instant::now();
            let out = graph.invoke(Count::update().count(0), &thread(&format!("loop{run}"))).await.unwrap();
            times.push(started.elapsed());
            assert_eq!(out.value.count, 1000);
            let files: u64 =
                std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
            last = Some((saver.storage_stats().await.unwrap(), files));
        }
        times.sort();
        println!("sqlite loop1000 ({durability:?}): median {:?}; {:?}", times[2], last.unwrap());
    }
    #[cfg(feature = "postgres")]
    {
        let Some(saver) = common::saver().await else { return };
        let (saver, _schema) = saver.into_parts();
        let graph = app(saver.clone());
        let mut times = Vec::new();
        for run in 0..5 {
            let started = std::time::Instant::now();
            graph.invoke(Count::update().count(0), &thread(&format!("loop{run}"))).await.unwrap();
            times.push(started.elapsed());
        }
        times.sort();
        println!(
            "postgres loop1000: median {:?}; {:?} (5 runs)",
            times[2],
            saver.storage_stats().await.unwrap()
        );
    }
}
