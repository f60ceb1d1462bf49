//! Graphs persisting to Redis: 200 threads running at once through one saver, and a thread resumed by a
//! second saver (another process would see the same).
#![cfg(feature = "redis")]
#![allow(clippy::unwrap_used, missing_docs)]

mod redis_common;

use std::io::Write;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use weft_graph::checkpoint::{Checkpointer, ListOptions};
use weft_graph::messages::{Message, Messages};
use weft_graph::{CompileConfig, CompiledGraph, END, START, State, StateGraph};
use weft_integrations::redis::{RedisOptions, RedisSaver};
use weft_runnable_core::RunnableConfig;

type TestResult = Result<(), String>;

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Trail {
    owner: String,
    #[state(append)]
    log: Vec<String>,
}

#[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
struct Chat {
    #[state(add_messages)]
    messages: Messages,
}

fn step(name: &'static str) -> impl Fn(Trail) -> TrailUpdate + Send + Sync + 'static {
    move |s: Trail| TrailUpdate::new().log(vec![format!("{}:{name}", s.owner)])
}

/// START → a → (b, c in parallel) → d → END.
fn app(saver: Arc<dyn Checkpointer>) -> CompiledGraph<Trail> {
    let mut g = StateGraph::<Trail>::new();
    for name in ["a", "b", "c", "d"] {
        g.add_node(name, step(name));
    }
    g.add_edge(START, "a");
    g.add_edge("a", "b");
    g.add_edge("a", "c");
    g.add_edge("b", "d");
    g.add_edge("c", "d");
    g.add_edge("d", END);
    g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

fn input(owner: &str, round: usize) -> TrailUpdate {
    TrailUpdate::new().owner(owner.to_owned()).log(vec![format!("{owner}:in{round}")])
}

fn expected_log(owner: &str, rounds: usize) -> Vec<String> {
    (0..rounds)
        .flat_map(|r| {
            [format!("in{r}"), "a".into(), "b".into(), "c".into(), "d".into()].map(|s| format!("{owner}:{s}"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_threads_at_once_each_keep_their_own_history() -> TestResult {
    let saver = saver_or_skip!("graph-200");
    let app = Arc::new(app(Arc::new(saver.inner().clone())));
    let runs = (0..200).map(|i| {
        let app = app.clone();
        tokio::spawn(async move {
            let owner = format!("owner-{i}");
            for round in 0..2 {
                app.invoke(input(&owner, round), &thread(&owner))
                    .await
                    .map_err(|e| format!("{owner}: {e}"))?;
            }
            Ok::<_, String>(owner)
        })
    });
    let owners: Vec<String> = futures::future::try_join_all(runs)
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .collect::<Result<_, _>>()?;
    let checks = owners.into_iter().map(|owner| {
        let app = app.clone();
        tokio::spawn(async move {
            let history = app.get_state_history(&thread(&owner), ListOptions::default()).await.unwrap();
            // Per round: the input checkpoint, then a, b+c, d and the final step.
            let steps: Vec<i64> = history.iter().map(|s| s.metadata.as_ref().unwrap().step).collect();
            assert_eq!(steps, vec![8, 7, 6, 5, 4, 3, 2, 1, 0, -1], "{owner}: every checkpoint is there");
            assert_eq!(history[0].values.log, expected_log(&owner, 2), "{owner}: the final state");
            for snapshot in &history {
                assert_eq!(snapshot.config.as_ref().unwrap().thread_id, owner);
                let mine = snapshot.values.log.iter().all(|line| line.starts_with(&format!("{owner}:")));
                assert!(mine, "{owner} sees only its own data: {:?}", snapshot.values.log);
                assert!(snapshot.values.owner == owner || snapshot.values.owner.is_empty());
            }
        })
    });
    futures::future::try_join_all(checks).await.map_err(|e| e.to_string())?;
    let all = saver.list(None, ListOptions::default()).await.unwrap();
    assert_eq!(all.len(), 200 * 10, "list(None) sees every checkpoint of every thread");
    Ok(())
}

#[tokio::test]
async fn a_second_saver_on_the_same_prefix_continues_a_thread() -> TestResult {
    let first = saver_or_skip!("graph-resume");
    app(Arc::new(first.inner().clone())).invoke(input("t", 0), &thread("t")).await.unwrap();
    let second = RedisSaver::connect_with(
        RedisOptions::new(redis_common::url()).prefix(first.intercept().prefix().to_owned()),
    )
    .await
    .unwrap();
    let out = app(Arc::new(second)).invoke(input("t", 1), &thread("t")).await.unwrap();
    assert_eq!(out.value.log, expected_log("t", 2));
    Ok(())
}

/// The `messages1000` workload (../shared/bench/WORKLOADS.md): one node appends a message per step until
/// there are 1,000, every checkpoint saved.
async fn messages1000(saver: &redis_common::TestSaver) -> u64 {
    let mut g = StateGraph::<Chat>::new();
    g.add_node("talk", |s: Chat| {
        Chat::update().messages(vec![Message::ai(format!("m{}", s.messages.len()))])
    });
    g.add_edge(START, "talk");
    g.add_conditional_edges("talk", |s: &Chat| if s.messages.len() < 1000 { "talk" } else { END }, None);
    let app = g.compile_with(CompileConfig::new().checkpointer(Arc::new(saver.inner().clone()))).unwrap();
    let config = thread("messages1000").with_recursion_limit(2000);
    let out = app.invoke(Chat::update().messages(vec![]), &config).await.unwrap();
    assert_eq!(out.value.messages.len(), 1000);
    assert_eq!(out.value.messages[999].text(), "m999");
    let state = app.get_state(&config).await.unwrap();
    assert_eq!(state.values.messages.len(), 1000, "the latest checkpoint reads back whole");
    saver.inner().stored_bytes("messages1000").await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages1000_stores_a_fraction_of_the_whole_copies() -> TestResult {
    let appended = saver_or_skip!("messages1000");
    let whole = redis_common::saver_with("messages1000-whole", |o| o.deltas(0, 0)).await?.unwrap();
    let (small, big) = (messages1000(&appended).await, messages1000(&whole).await);
    // Written past the harness's capture, for the record.
    let _ = writeln!(
        std::io::stderr(),
        "messages1000 on Redis: {small} bytes with appended lists, {big} bytes with every version whole"
    );
    assert!(small * 10 < big, "appended lists store a fraction: {small} against {big}");
    Ok(())
}

/// A chat that answers until its list holds a multiple of five messages.
fn chat_app(saver: Arc<dyn Checkpointer>) -> CompiledGraph<Chat> {
    let mut g = StateGraph::<Chat>::new();
    g.add_node("talk", |s: Chat| {
        Chat::update().messages(vec![Message::ai(format!("m{}", s.messages.len()))])
    });
    g.add_edge(START, "talk");
    g.add_conditional_edges(
        "talk",
        |s: &Chat| if s.messages.len().is_multiple_of(5) { END } else { "talk" },
        None,
    );
    g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

fn texts(chat: &Chat) -> Vec<String> {
    chat.messages.iter().map(Message::text).collect()
}

#[tokio::test]
async fn the_engines_appends_continue_after_a_restart_and_from_a_fork() -> TestResult {
    let first = saver_or_skip!("graph-appends");
    let config = thread("chat");
    let first_app = chat_app(Arc::new(first.inner().clone()));
    let out = first_app.invoke(Chat::update().messages(vec![Message::human("hi")]), &config).await.unwrap();
    assert_eq!(out.value.messages.len(), 5);
    // A second saver on the same prefix remembers nothing of the lists: the engine's appends still find
    // their base, stored by the first.
    let second = RedisSaver::connect_with(
        RedisOptions::new(redis_common::url()).prefix(first.intercept().prefix().to_owned()),
    )
    .await
    .unwrap();
    assert!(second.stores_appends());
    let app = chat_app(Arc::new(second));
    let out = app.invoke(Chat::update().messages(vec![Message::human("again")]), &config).await.unwrap();
    let expected = ["hi", "m1", "m2", "m3", "m4", "again", "m6", "m7", "m8", "m9"];
    assert_eq!(texts(&out.value), expected);
    // Every checkpoint reads back as the list it saved: a prefix of the final one.
    let history = app.get_state_history(&config, ListOptions::default()).await.unwrap();
    assert_eq!(history.len(), 12);
    for snapshot in &history {
        let got = texts(&snapshot.values);
        assert_eq!(got[..], expected[..got.len()], "checkpoint {:?}", snapshot.config);
    }
    // Forking from the checkpoint with three messages appends to that version, not to the latest.
    let at_three = history.iter().find(|s| s.values.messages.len() == 3).unwrap();
    let fork = config
        .clone()
        .with_configurable("checkpoint_id", at_three.config.clone().unwrap().checkpoint_id.unwrap());
    let out = app.invoke(Chat::update().messages(vec![Message::human("fork")]), &fork).await.unwrap();
    assert_eq!(texts(&out.value), ["hi", "m1", "m2", "fork", "m4"]);
    let latest = app.get_state(&config).await.unwrap();
    assert_eq!(texts(&latest.values), ["hi", "m1", "m2", "fork", "m4"]);
    let history = app.get_state_history(&config, ListOptions::default()).await.unwrap();
    assert!(history.iter().any(|s| texts(&s.values) == expected), "the first branch still reads back whole");
    Ok(())
}

#[tokio::test]
async fn the_engines_appends_are_stored_whole_every_few_versions() -> TestResult {
    let saver = saver_or_skip!("graph-append-chains", |o| o.deltas(4, 100));
    let app = chat_app(Arc::new(saver.inner().clone()));
    let config = thread("chat");
    for round in 0..4 {
        let input = Chat::update().messages(vec![Message::human(format!("round {round}"))]);
        assert_eq!(app.invoke(input, &config).await.unwrap().value.messages.len(), 5 * (round + 1));
    }
    // Every value reads back whole, and no chain of appended values is longer than 4 links.
    let history = app.get_state_history(&config, ListOptions::default()).await.unwrap();
    let last = texts(&app.get_state(&config).await.unwrap().values);
    for snapshot in &history {
        let got = texts(&snapshot.values);
        assert_eq!(got[..], last[..got.len()], "checkpoint {:?}", snapshot.config);
    }
    let mut conn = redis_common::raw().await;
    let bases: std::collections::HashMap<String, String> = redis::cmd("HGETALL")
        .arg(format!("{}:t:chat:n::bases", saver.intercept().prefix()))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(bases.len() >= 10, "most versions are appended: {} links", bases.len());
    let longest = bases
        .keys()
        .map(|field| std::iter::successors(Some(field), |f| bases.get(*f)).count() - 1)
        .max()
        .unwrap_or(0);
    assert!((1..=4).contains(&longest), "longest chain of appended values: {longest}");
    Ok(())
}
