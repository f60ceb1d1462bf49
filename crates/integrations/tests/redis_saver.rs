//! RedisSaver beyond the conformance suite: its key layout (values stored once, nothing left behind),
//! damaged data read as typed errors, awkward names, and TTLs.
#![cfg(feature = "redis")]
#![allow(clippy::unwrap_used, missing_docs)]

mod redis_common;

use std::time::Duration;

use redis_common::checkpoints::{key, put, version};
use redis_common::{TestSaver, keys_under, raw};
use serde_json::json;
use weft_graph::checkpoint::{CheckpointConfig, CheckpointError, Checkpointer, ListOptions};

type TestResult = Result<(), String>;

/// Three checkpoints on `thread`: `a` set once, `b` changed each time.
async fn three(saver: &TestSaver, thread: &str) -> Vec<CheckpointConfig> {
    let root = CheckpointConfig::thread(thread);
    let c1 = put(saver, &root, &[("a", 1), ("b", 1)], &[("a", 1, json!("a")), ("b", 1, json!(["b1"]))]).await;
    let c2 = put(saver, &c1, &[("a", 1), ("b", 2)], &[("b", 2, json!(["b1", "b2"]))]).await;
    let c3 = put(saver, &c2, &[("a", 1), ("b", 3)], &[("b", 3, json!(["b1", "b2", "b3"]))]).await;
    vec![c1, c2, c3]
}

async fn hset(key: &str, field: &str, value: &str) {
    let mut conn = raw().await;
    let _: i64 = redis::cmd("HSET").arg(key).arg(field).arg(value).query_async(&mut conn).await.unwrap();
}

fn expect_corrupt(result: Result<impl std::fmt::Debug, CheckpointError>, needles: &[&str]) -> TestResult {
    match result {
        Err(err @ CheckpointError::Corrupt { .. }) => {
            let text = err.to_string();
            for needle in needles {
                if !text.contains(needle) {
                    return Err(format!("the error names '{needle}': {text}"));
                }
            }
            Ok(())
        }
        other => Err(format!("expected CheckpointError::Corrupt, got {other:?}")),
    }
}

#[tokio::test]
async fn an_unchanged_channel_is_stored_once() -> TestResult {
    let saver = saver_or_skip!("stored-once");
    three(&saver, "t").await;
    let mut conn = raw().await;
    let stored: Vec<String> =
        redis::cmd("HKEYS").arg(key(&saver, "t", "n::blobs")).query_async(&mut conn).await.unwrap();
    // a@1 once, b at three versions.
    assert_eq!(stored.len(), 4, "{stored:?}");
    let latest = saver.get_tuple(&CheckpointConfig::thread("t")).await.unwrap().unwrap();
    assert_eq!(json!(latest.checkpoint.channel_values), json!({"a": "a", "b": ["b1", "b2", "b3"]}));
    Ok(())
}

#[tokio::test]
async fn deleting_every_thread_leaves_no_key_behind() -> TestResult {
    let saver = saver_or_skip!("no-leftovers");
    let saved = three(&saver, "t").await;
    let child = CheckpointConfig { checkpoint_ns: "sub:1".into(), ..CheckpointConfig::thread("t") };
    put(&saver, &child, &[("x", 1)], &[("x", 1, json!(1))]).await;
    saver.put_writes(&saved[1], vec![("b".into(), json!(1))], "task", "").await.unwrap();
    // Writes against a checkpoint that was never put are deleted with the thread too.
    saver.put_writes(&saved[0].at("never-put"), vec![("b".into(), json!(2))], "task", "").await.unwrap();
    saver.copy_thread("t", "u").await.unwrap();
    saver.prune("u", 1).await.unwrap();
    assert!(!keys_under(saver.intercept().prefix()).await.is_empty());
    saver.delete_thread("t").await.unwrap();
    saver.delete_thread("u").await.unwrap();
    assert_eq!(keys_under(saver.intercept().prefix()).await, Vec::<String>::new());
    Ok(())
}

#[tokio::test]
async fn prune_deletes_values_only_dropped_checkpoints_used() -> TestResult {
    let saver = saver_or_skip!("prune-values", |o| o.deltas(0, 0));
    three(&saver, "t").await;
    saver.prune("t", 1).await.unwrap();
    let mut conn = raw().await;
    let mut stored: Vec<String> =
        redis::cmd("HKEYS").arg(key(&saver, "t", "n::blobs")).query_async(&mut conn).await.unwrap();
    stored.sort();
    assert_eq!(stored, vec![format!("a:{}", version(1)), format!("b:{}", version(3))]);
    let kept = saver.get_tuple(&CheckpointConfig::thread("t")).await.unwrap().unwrap();
    assert_eq!(json!(kept.checkpoint.channel_values), json!({"a": "a", "b": ["b1", "b2", "b3"]}));
    Ok(())
}

#[tokio::test]
async fn a_corrupted_checkpoint_is_a_typed_error_and_spares_the_rest() -> TestResult {
    let saver = saver_or_skip!("corrupt-record");
    let saved = three(&saver, "t").await;
    let other = three(&saver, "u").await;
    let id = saved[1].checkpoint_id.clone().unwrap();
    hset(&key(&saver, "t", &format!("n::c:{id}")), "checkpoint", "{\"v\": 1, \"id\": ").await;
    expect_corrupt(saver.get_tuple(&saved[1]).await, &["'t'", &id, "unreadable checkpoint"])?;
    expect_corrupt(saver.list(Some(&CheckpointConfig::thread("t")), ListOptions::default()).await, &[&id])?;
    // Nothing else is lost: the other checkpoints of the thread and other threads still read.
    assert!(saver.get_tuple(&saved[0]).await.unwrap().is_some());
    assert_eq!(saver.get_tuple(&saved[2]).await.unwrap().unwrap().config, saved[2]);
    let older = ListOptions { before: Some(id.clone()), ..ListOptions::default() };
    assert_eq!(saver.list(Some(&CheckpointConfig::thread("t")), older).await.unwrap().len(), 1);
    assert_eq!(
        saver.list(Some(&CheckpointConfig::thread("u")), ListOptions::default()).await.unwrap().len(),
        3
    );
    assert_eq!(saver.get_tuple(&other[2]).await.unwrap().unwrap().config, other[2]);
    Ok(())
}

#[tokio::test]
async fn a_truncated_value_names_thread_checkpoint_and_channel() -> TestResult {
    let saver = saver_or_skip!("truncated");
    let saved = three(&saver, "t").await;
    let blobs = key(&saver, "t", "n::blobs");
    let field = format!("b:{}", version(2));
    let mut conn = raw().await;
    let whole: String = redis::cmd("HGET").arg(&blobs).arg(&field).query_async(&mut conn).await.unwrap();
    hset(&blobs, &field, &whole[..whole.len() - 3]).await;
    let id = saved[1].checkpoint_id.clone().unwrap();
    expect_corrupt(
        saver.get_tuple(&saved[1]).await,
        &["'t'", &id, "channel 'b'", &version(2), "unreadable JSON"],
    )?;
    // `b` at version 3 was stored as the elements appended to version 2: it names the damaged base.
    let id = saved[2].checkpoint_id.clone().unwrap();
    expect_corrupt(saver.get_tuple(&saved[2]).await, &[&id, &version(3), "base 1 versions back"])?;
    // The checkpoint that uses an older version of `b` is intact.
    assert_eq!(saver.get_tuple(&saved[0]).await.unwrap().unwrap().config, saved[0]);
    Ok(())
}

#[tokio::test]
async fn an_unknown_format_version_is_corrupt() -> TestResult {
    let saver = saver_or_skip!("format");
    let saved = three(&saver, "t").await;
    hset(&key(&saver, "t", "n::blobs"), &format!("a:{}", version(1)), r#"{"format": 7, "value": "a"}"#).await;
    let id = saved[2].checkpoint_id.clone().unwrap();
    expect_corrupt(saver.get_tuple(&saved[2]).await, &[&id, "channel 'a'", "unknown format version 7"])?;
    let id = saved[0].checkpoint_id.clone().unwrap();
    hset(&key(&saver, "t", &format!("n::c:{id}")), "format", "2").await;
    expect_corrupt(saver.get_tuple(&saved[0]).await, &[&id, "unknown format version '2'"])
}

#[tokio::test]
async fn a_corrupted_pending_write_is_corrupt() -> TestResult {
    let saver = saver_or_skip!("bad-write");
    let saved = three(&saver, "t").await;
    saver.put_writes(&saved[2], vec![("b".into(), json!(1))], "task-9", "").await.unwrap();
    let id = saved[2].checkpoint_id.clone().unwrap();
    hset(&key(&saver, "t", &format!("n::w:{id}")), "task-9:0", "not json").await;
    expect_corrupt(saver.get_tuple(&saved[2]).await, &[&id, "pending write 'task-9:0'"])
}

#[tokio::test]
async fn a_ten_thousand_character_thread_id_and_dotted_namespaces_work() -> TestResult {
    let saver = saver_or_skip!("long-id");
    let long: String = "thread.with:colons%and.dots/".chars().cycle().take(10_000).collect();
    let config = CheckpointConfig {
        checkpoint_ns: "node.a:1|sub.b:2".into(),
        ..CheckpointConfig::thread(long.clone())
    };
    let c1 = put(&saver, &config, &[("x", 1)], &[("x", 1, json!("one"))]).await;
    put(&saver, &c1, &[("x", 2)], &[("x", 2, json!("two"))]).await;
    saver.put_writes(&c1, vec![("x".into(), json!("w"))], "task", "").await.unwrap();
    let got = saver.get_tuple(&c1).await.unwrap().unwrap();
    assert_eq!(got.config.thread_id.len(), 10_000);
    assert_eq!(got.checkpoint.channel_values.get("x"), Some(&json!("one")));
    assert_eq!(got.pending_writes.len(), 1);
    assert_eq!(saver.list_ids(&config).await.unwrap().len(), 2);
    let everything = saver.list(None, ListOptions::default()).await.unwrap();
    assert_eq!(everything.len(), 2);
    assert_eq!(everything[1].config, c1);
    saver.delete_thread(&long).await.unwrap();
    assert_eq!(keys_under(saver.intercept().prefix()).await, Vec::<String>::new());
    Ok(())
}

async fn pttl(key: &str) -> i64 {
    let mut conn = raw().await;
    redis::cmd("PTTL").arg(key).query_async(&mut conn).await.unwrap()
}

async fn thread_keys(saver: &TestSaver, thread: &str) -> Vec<String> {
    let head = format!("{}:t:{thread}:", saver.intercept().prefix());
    keys_under(saver.intercept().prefix()).await.into_iter().filter(|k| k.starts_with(&head)).collect()
}

#[tokio::test]
async fn a_thread_expires_whole_after_its_ttl_and_reads_refresh_it() -> TestResult {
    let ttl = Duration::from_millis(3000);
    let saver = saver_or_skip!("ttl", |o| o.ttl(ttl));
    let saved = three(&saver, "read").await;
    saver.put_writes(&saved[2], vec![("b".into(), json!(1))], "task", "").await.unwrap();
    three(&saver, "idle").await;
    let keys = thread_keys(&saver, "read").await;
    // Registry, namespaces, ids, values, bases, three checkpoints, one writes hash.
    assert_eq!(keys.len(), 9, "{keys:?}");
    for k in keys.iter().chain(&thread_keys(&saver, "idle").await) {
        let left = pttl(k).await;
        assert!(left > 0 && left <= 3000, "{k} has ttl {left}");
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(saver.get_tuple(&CheckpointConfig::thread("read")).await.unwrap().is_some());
    for k in &keys {
        let left = pttl(k).await;
        assert!(left > 2500, "a read refreshes every key of the thread: {k} has {left} ms left");
    }
    for k in thread_keys(&saver, "idle").await {
        assert!(pttl(&k).await < 1600, "reading one thread leaves the others' ttl alone");
    }
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(thread_keys(&saver, "idle").await, Vec::<String>::new(), "an idle thread expires whole");
    assert!(saver.get_tuple(&CheckpointConfig::thread("idle")).await.unwrap().is_none());
    let listed = saver.list(Some(&CheckpointConfig::thread("read")), ListOptions::default()).await.unwrap();
    assert_eq!(listed.len(), 3, "the thread read in time is whole");
    assert_eq!(listed[0].pending_writes.len(), 1);
    // `list(None)` forgets the expired thread in the thread index.
    saver.list(None, ListOptions::default()).await.unwrap();
    let mut conn = raw().await;
    let members: Vec<String> = redis::cmd("SMEMBERS")
        .arg(format!("{}:threads", saver.intercept().prefix()))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(members, vec!["read".to_owned()]);
    Ok(())
}

#[tokio::test]
async fn writes_refresh_the_ttl_and_reads_do_not_when_told_not_to() -> TestResult {
    let saver = saver_or_skip!("ttl-writes", |o| o.ttl(Duration::from_millis(2000)).refresh_on_read(false));
    let saved = three(&saver, "t").await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    saver.get_tuple(&saved[2]).await.unwrap();
    let registry = key(&saver, "t", "keys");
    assert!(pttl(&registry).await < 1300, "reads do not refresh when refresh_on_read is off");
    saver.put_writes(&saved[2], vec![("b".into(), json!(1))], "task", "").await.unwrap();
    for k in thread_keys(&saver, "t").await {
        assert!(pttl(&k).await > 1500, "a write refreshes every key of the thread: {k}");
    }
    Ok(())
}
