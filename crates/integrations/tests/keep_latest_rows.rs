#![allow(clippy::unwrap_used, missing_docs)]
//! `keep_latest` retention (a thread pruned to its newest checkpoints, as the server's TTL sweep and
//! `POST /threads/prune` do) on every saver. A chat thread of 1,000 turns, its message list saved as the
//! engine's appends (a delta per step), holds after `prune(thread, 1)` exactly one checkpoint's rows (or
//! keys): the checkpoint, its pending writes and one value per channel (on the SQL savers, per channel
//! whose value is not a scalar the checkpoint's row holds), the same as a thread of one turn.
//! It reads back as it did before the prune and takes new turns. A thread with a subgraph namespace
//! pruned to two checkpoints per namespace holds exactly those checkpoints' rows.

#![cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]

#[cfg(feature = "postgres")]
mod common;
#[cfg(feature = "redis")]
mod redis_common;

use std::collections::BTreeSet;
use std::ops::RangeInclusive;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;
use weft_graph::checkpoint::{
    CheckpointConfig, CheckpointTuple, Checkpointer, ListOptions, is_inline_scalar,
};
use weft_graph::messages::{Message, Messages};
use weft_graph::{CompileConfig, CompiledGraph, END, Runtime, START, State, StateGraph, SubgraphCheckpoints};
use weft_runnable_core::RunnableConfig;

/// A conversation: its messages (saved as the engine's appends), the turns taken and the turn to stop
/// at.
#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Chat {
    #[state(add_messages)]
    messages: Messages,
    turns: u64,
    until: u64,
}

/// What a subgraph (one namespace per node) notes at each turn.
#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Notes {
    #[state(append)]
    notes: Vec<String>,
}

fn note_taker() -> CompiledGraph<Notes> {
    let mut graph = StateGraph::<Notes>::new();
    graph.add_node("note", |_: Notes| Notes::update());
    graph.add_edge(START, "note");
    graph.compile_with(CompileConfig::new().subgraph_checkpoints(SubgraphCheckpoints::PerNode)).unwrap()
}

/// A conversation in turns, each a superstep of `user` saying `hello N` and one of `answer` replying
/// `turn N`, until turn `until`; with `notes`, `answer` also runs a subgraph in namespace `answer` that
/// keeps a note of every turn.
fn chat(saver: Arc<dyn Checkpointer>, notes: bool) -> CompiledGraph<Chat> {
    let child = notes.then(|| Arc::new(note_taker()));
    let mut graph = StateGraph::<Chat>::new();
    graph.add_node("user", |s: Chat| {
        Chat::update().messages(vec![Message::human(format!("hello {}", s.turns + 1))])
    });
    graph.add_node("answer", move |s: Chat, rt: Runtime| {
        let child = child.clone();
        async move {
            let turn = s.turns + 1;
            if let Some(child) = child {
                let note = Notes::update().notes(vec![format!("note {turn}")]);
                child.invoke(note, rt.config()).await.map_err(weft_runnable_core::Error::from)?;
            }
            let reply = Message::ai(format!("turn {turn}"));
            Ok::<_, weft_runnable_core::Error>(Chat::update().turns(turn).messages(vec![reply]))
        }
    });
    graph.add_edge(START, "user");
    graph.add_edge("user", "answer");
    graph.add_conditional_edges("answer", |s: &Chat| if s.turns < s.until { "user" } else { END }, None);
    graph.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id).with_recursion_limit(5_000)
}

/// Talks on `thread_id` until turn `until` (one run).
async fn talk(app: &CompiledGraph<Chat>, thread_id: &str, until: u64) {
    let out = app.invoke(Chat::update().until(until), &thread(thread_id)).await.unwrap();
    assert_eq!(out.value.turns, until);
}

/// The texts a thread of `turns` turns holds.
fn conversation(turns: RangeInclusive<u64>) -> Vec<String> {
    turns.flat_map(|t| [format!("hello {t}"), format!("turn {t}")]).collect()
}

fn texts(messages: &Messages) -> Vec<String> {
    messages.as_slice().iter().map(Message::text).collect()
}

/// What a thread holds in storage, over all its namespaces.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    checkpoints: i64,
    /// Channel values (whole or delta rows; fields of the values hashes on Redis).
    values: i64,
    /// Of those, deltas.
    deltas: i64,
    /// Pending writes.
    writes: i64,
}

impl Counts {
    /// The rows of `kept` checkpoints: each one, its writes and one value per distinct (namespace,
    /// channel, version) they list; with `inline`, none for the values the checkpoints hold themselves
    /// (scalars, on the SQL savers).
    fn of(kept: &[CheckpointTuple], inline: bool) -> Self {
        let values: BTreeSet<(&str, &str, &str)> = kept
            .iter()
            .flat_map(|t| {
                let values = &t.checkpoint.channel_values;
                t.checkpoint
                    .channel_versions
                    .iter()
                    .filter(move |(c, _)| !(inline && values.get(*c).is_some_and(is_inline_scalar)))
                    .map(|(c, v)| (t.config.checkpoint_ns.as_str(), &**c, &**v))
            })
            .collect();
        let writes: usize = kept.iter().map(|t| t.pending_writes.len()).sum();
        let n = |n: usize| i64::try_from(n).unwrap();
        Counts { checkpoints: n(kept.len()), values: n(values.len()), deltas: 0, writes: n(writes) }
    }
}

/// Where a saver keeps its data, to count a thread's rows or keys there.
enum Storage {
    #[cfg(feature = "sqlite")]
    Sqlite(weft_integrations::sqlite::SqlitePool),
    /// The pool and the test's schema.
    #[cfg(feature = "postgres")]
    Postgres(weft_integrations::postgres::PgPool, String),
    /// The saver's key prefix.
    #[cfg(feature = "redis")]
    Redis(String),
}

/// The counting query over the tables (`tables` before each name) with `param` the thread id.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn count_rows(tables: &str, param: &str) -> sqlx::AssertSqlSafe<String> {
    let count = |table: &str, extra: &str| {
        format!("(SELECT count(*) FROM {tables}{table} WHERE thread_id = {param}{extra})")
    };
    sqlx::AssertSqlSafe(format!(
        "SELECT {}, {}, {}, {}",
        count("checkpoints", ""),
        count("checkpoint_blobs", ""),
        count("checkpoint_blobs", " AND base_version IS NOT NULL"),
        count("checkpoint_writes", "")
    ))
}

impl Storage {
    /// Whether the saver keeps scalar values in the checkpoint's row (the SQL savers) rather than as
    /// values of their own.
    fn inlines_scalars(&self) -> bool {
        match self {
            #[cfg(feature = "redis")]
            Storage::Redis(_) => false,
            #[cfg(any(feature = "sqlite", feature = "postgres"))]
            _ => true,
        }
    }

    async fn counts(&self, thread_id: &str) -> Counts {
        let (checkpoints, values, deltas, writes) = match self {
            #[cfg(feature = "sqlite")]
            Storage::Sqlite(pool) => {
                sqlx::query_as(count_rows("", "?1")).bind(thread_id).fetch_one(pool).await.unwrap()
            }
            #[cfg(feature = "postgres")]
            Storage::Postgres(pool, schema) => {
                let tables = format!("\"{schema}\".");
                sqlx::query_as(count_rows(&tables, "$1")).bind(thread_id).fetch_one(pool).await.unwrap()
            }
            #[cfg(feature = "redis")]
            Storage::Redis(prefix) => redis_counts(prefix, thread_id).await,
        };
        Counts { checkpoints, values, deltas, writes }
    }
}

/// A thread's checkpoint hashes, fields of its values and bases hashes, and fields of its writes
/// hashes (see the key layout in `weft_integrations::redis`).
#[cfg(feature = "redis")]
async fn redis_counts(prefix: &str, thread_id: &str) -> (i64, i64, i64, i64) {
    let mut conn = redis_common::raw().await;
    let base = format!("{prefix}:t:{thread_id}:");
    let mut counts = (0, 0, 0, 0);
    for key in redis_common::keys_under(prefix).await {
        let Some(rest) = key.strip_prefix(&base).and_then(|k| k.strip_prefix("n:")) else { continue };
        let Some((_ns, kind)) = rest.split_once(':') else { continue };
        // A checkpoint counts once; a values, bases or writes hash by its fields.
        let (slot, by_fields) = match kind.split(':').next() {
            Some("c") => (&mut counts.0, false),
            Some("blobs") => (&mut counts.1, true),
            Some("bases") => (&mut counts.2, true),
            Some("w") => (&mut counts.3, true),
            _ => continue,
        };
        *slot +=
            if by_fields { redis::cmd("HLEN").arg(&key).query_async(&mut conn).await.unwrap() } else { 1 };
    }
    counts
}

/// 1,000 turns pruned to one checkpoint: that checkpoint's rows only, read back as before, then 3 more
/// turns on top.
async fn a_thousand_turns_keep_one_checkpoints_rows(saver: Arc<dyn Checkpointer>, storage: &Storage) {
    let app = chat(Arc::clone(&saver), false);
    talk(&app, "long", 1000).await;
    talk(&app, "short", 1).await;
    let before = storage.counts("long").await;
    assert!(before.deltas >= 1000, "the list is saved as deltas, one a step: {before:?}");
    for thread_id in ["long", "short"] {
        let latest = CheckpointConfig::thread(thread_id);
        // A pending write of the kept checkpoint, which the prune keeps.
        let head = saver.get_tuple(&latest).await.unwrap().unwrap();
        saver.put_writes(&head.config, vec![("turns".into(), json!(7))], "pending", "").await.unwrap();
        let tuple = saver.get_tuple(&latest).await.unwrap().unwrap();
        let state = app.get_state(&thread(thread_id)).await.unwrap().values;
        saver.prune(thread_id, 1).await.unwrap();
        assert_eq!(
            saver.get_tuple(&latest).await.unwrap().unwrap(),
            tuple,
            "the kept checkpoint reads the same"
        );
        assert_eq!(app.get_state(&thread(thread_id)).await.unwrap().values, state);
        let kept = Counts::of(std::slice::from_ref(&tuple), storage.inlines_scalars());
        assert_eq!(kept.writes, 1);
        assert_eq!(storage.counts(thread_id).await, kept, "one checkpoint, its writes, a value per channel");
    }
    assert_eq!(storage.counts("long").await, storage.counts("short").await, "as a thread of one turn");
    let state = app.get_state(&thread("long")).await.unwrap().values;
    assert_eq!(texts(&state.messages), conversation(1..=1000), "the whole conversation reads back");

    talk(&app, "long", 1003).await;
    let state = app.get_state(&thread("long")).await.unwrap().values;
    assert_eq!(texts(&state.messages), conversation(1..=1003), "new turns go on from the kept list");
    let after = storage.counts("long").await;
    assert!(after.deltas > 0, "new turns are saved as deltas on the list stored whole: {after:?}");
}

/// A thread with a subgraph namespace pruned to two checkpoints per namespace: exactly their rows,
/// both namespaces read back as before, and new turns go on in both.
async fn two_namespaces_keep_two_checkpoints_each(saver: Arc<dyn Checkpointer>, storage: &Storage) {
    let app = chat(Arc::clone(&saver), true);
    talk(&app, "nested", 200).await;
    let root = CheckpointConfig::thread("nested");
    let sub = CheckpointConfig { checkpoint_ns: "answer".into(), ..root.clone() };
    let two = || ListOptions { limit: Some(2), ..ListOptions::default() };
    let mut kept = Vec::new();
    for ns in [&root, &sub] {
        assert!(saver.list_ids(ns).await.unwrap().len() > 2, "{ns:?} has a history to prune");
        kept.extend(saver.list(Some(ns), two()).await.unwrap());
    }
    saver.prune("nested", 2).await.unwrap();
    let mut after = Vec::new();
    for ns in [&root, &sub] {
        after.extend(saver.list(Some(ns), ListOptions::default()).await.unwrap());
    }
    assert_eq!(after, kept, "each namespace keeps its newest two checkpoints, reading the same");
    let counts = storage.counts("nested").await;
    assert_eq!(
        Counts { deltas: 0, ..counts },
        Counts::of(&kept, storage.inlines_scalars()),
        "the kept checkpoints' rows only"
    );

    talk(&app, "nested", 203).await;
    let state = app.get_state(&thread("nested")).await.unwrap().values;
    assert_eq!(texts(&state.messages), conversation(1..=203));
    let notes = saver.get_tuple(&sub).await.unwrap().unwrap().checkpoint.channel_values["notes"].clone();
    let expected: Vec<String> = (1..=203).map(|t| format!("note {t}")).collect();
    assert_eq!(notes, json!(expected), "the subgraph's list goes on from what was kept");
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use weft_integrations::sqlite::SqliteSaver;

    use super::*;

    async fn open() -> (Arc<SqliteSaver>, Storage) {
        let dir = std::env::temp_dir().join(format!("weft-keep-latest-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let saver = Arc::new(SqliteSaver::open(dir.join("weft.db")).await.unwrap());
        let storage = Storage::Sqlite(saver.pool().clone());
        (saver, storage)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_thousand_turns_keep_one_checkpoints_rows() {
        let (saver, storage) = open().await;
        super::a_thousand_turns_keep_one_checkpoints_rows(saver, &storage).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_namespaces_keep_two_checkpoints_each() {
        let (saver, storage) = open().await;
        super::two_namespaces_keep_two_checkpoints_each(saver, &storage).await;
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_thousand_turns_keep_one_checkpoints_rows() {
        let Some(saver) = common::saver().await else { return };
        let (saver, schema) = saver.into_parts();
        let storage = Storage::Postgres(saver.pool().clone(), schema.name.clone());
        super::a_thousand_turns_keep_one_checkpoints_rows(saver, &storage).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_namespaces_keep_two_checkpoints_each() {
        let Some(saver) = common::saver().await else { return };
        let (saver, schema) = saver.into_parts();
        let storage = Storage::Postgres(saver.pool().clone(), schema.name.clone());
        super::two_namespaces_keep_two_checkpoints_each(saver, &storage).await;
    }
}

#[cfg(feature = "redis")]
mod redis_backend {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_thousand_turns_keep_one_checkpoints_keys() -> Result<(), String> {
        let saver = Arc::new(crate::saver_or_skip!("keep-latest-turns"));
        let storage = Storage::Redis(saver.intercept().prefix().to_owned());
        super::a_thousand_turns_keep_one_checkpoints_rows(saver, &storage).await;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_namespaces_keep_two_checkpoints_each() -> Result<(), String> {
        let saver = Arc::new(crate::saver_or_skip!("keep-latest-namespaces"));
        let storage = Storage::Redis(saver.intercept().prefix().to_owned());
        super::two_namespaces_keep_two_checkpoints_each(saver, &storage).await;
        Ok(())
    }
}
