//! RedisSaver on damaged data: keys lost (evicted, deleted by hand) or holding another type. Each reads
//! as `Corrupt` naming the thread (and the checkpoint where one is hit), never as an empty or shorter
//! thread; other threads still read, and the damaged thread can be deleted.
#![cfg(feature = "redis")]
#![allow(clippy::unwrap_used, missing_docs)]

mod redis_common;

use redis_common::checkpoints::{key, put};
use redis_common::{TestSaver, raw};
use serde_json::json;
use weft_graph::checkpoint::{
    CheckpointConfig, CheckpointError, CheckpointErrorKind, Checkpointer, ListOptions,
};

type TestResult = Result<(), String>;

/// Three checkpoints on `thread`, the last with a pending write.
async fn three(saver: &TestSaver, thread: &str) -> Vec<CheckpointConfig> {
    let root = CheckpointConfig::thread(thread);
    let c1 = put(saver, &root, &[("a", 1), ("b", 1)], &[("a", 1, json!("a")), ("b", 1, json!(["b1"]))]).await;
    let c2 = put(saver, &c1, &[("a", 1), ("b", 2)], &[("b", 2, json!(["b1", "b2"]))]).await;
    let c3 = put(saver, &c2, &[("a", 1), ("b", 3)], &[("b", 3, json!(["b1", "b2", "b3"]))]).await;
    saver.put_writes(&c3, vec![("b".into(), json!(["w"]))], "task", "").await.unwrap();
    vec![c1, c2, c3]
}

fn id(config: &CheckpointConfig) -> &str {
    config.checkpoint_id.as_deref().unwrap_or_default()
}

/// `Err` unless `result` is `Corrupt` naming `thread` and every needle.
fn expect_corrupt<T: std::fmt::Debug>(
    result: Result<T, CheckpointError>,
    thread: &str,
    needles: &[&str],
) -> TestResult {
    match result {
        Err(err) if err.kind() == CheckpointErrorKind::Corrupt && err.thread_id() == Some(thread) => {
            let text = err.to_string();
            match needles.iter().find(|n| !text.contains(**n)) {
                Some(missing) => Err(format!("the error names '{missing}': {text}")),
                None => Ok(()),
            }
        }
        other => Err(format!("expected a corrupt error naming thread '{thread}', got {other:?}")),
    }
}

/// The damaged thread reads as corrupt in `get_tuple` and `list`; the healthy one still reads whole;
/// the damaged one can be deleted and is then empty.
async fn reads_corrupt_then_deletes(saver: &TestSaver, needles: &[&str]) -> TestResult {
    let thread = CheckpointConfig::thread("t");
    expect_corrupt(saver.get_tuple(&thread).await, "t", needles)?;
    expect_corrupt(saver.list(Some(&thread), ListOptions::default()).await, "t", &[])?;
    let healthy = saver.get_tuple(&CheckpointConfig::thread("healthy")).await.unwrap().unwrap();
    assert_eq!(healthy.checkpoint.channel_values.get("b"), Some(&json!(["b1", "b2", "b3"])));
    assert_eq!(healthy.pending_writes.len(), 1);
    saver.delete_thread("t").await.unwrap();
    assert!(saver.get_tuple(&thread).await.unwrap().is_none(), "the damaged thread deletes");
    assert!(saver.list(Some(&thread), ListOptions::default()).await.unwrap().is_empty());
    Ok(())
}

async fn del(key: &str) {
    let mut conn = raw().await;
    let n: i64 = redis::cmd("DEL").arg(key).query_async(&mut conn).await.unwrap();
    assert_eq!(n, 1, "the damage deleted {key}");
}

async fn set_string(key: &str) {
    let mut conn = raw().await;
    let _: i64 = redis::cmd("DEL").arg(key).query_async(&mut conn).await.unwrap();
    let _: () = redis::cmd("SET").arg(key).arg("not the right type").query_async(&mut conn).await.unwrap();
}

#[tokio::test]
async fn a_lost_latest_checkpoint_is_corrupt_not_an_older_or_empty_thread() -> TestResult {
    let saver = saver_or_skip!("lost-latest");
    three(&saver, "healthy").await;
    let saved = three(&saver, "t").await;
    del(&key(&saver, "t", &format!("n::c:{}", id(&saved[2])))).await;
    // By id too: the index still lists it.
    expect_corrupt(saver.get_tuple(&saved[2]).await, "t", &[id(&saved[2])])?;
    reads_corrupt_then_deletes(&saver, &[id(&saved[2]), "evicted or deleted"]).await
}

#[tokio::test]
async fn a_lost_index_is_corrupt_not_an_empty_thread() -> TestResult {
    let saver = saver_or_skip!("lost-index");
    three(&saver, "healthy").await;
    three(&saver, "t").await;
    del(&key(&saver, "t", "n::ids")).await;
    reads_corrupt_then_deletes(&saver, &["index of checkpoints"]).await
}

#[tokio::test]
async fn lost_pending_writes_are_corrupt_not_dropped() -> TestResult {
    let saver = saver_or_skip!("lost-writes");
    three(&saver, "healthy").await;
    let saved = three(&saver, "t").await;
    del(&key(&saver, "t", &format!("n::w:{}", id(&saved[2])))).await;
    reads_corrupt_then_deletes(&saver, &[id(&saved[2]), "pending writes"]).await
}

#[tokio::test]
async fn keys_of_the_wrong_type_are_corrupt_naming_thread_and_checkpoint() -> TestResult {
    let saver = saver_or_skip!("wrong-type");
    three(&saver, "healthy").await;
    for (rest, names_checkpoint) in
        [("n::c:{id}", true), ("n::blobs", true), ("n::w:{id}", true), ("n::ids", false)]
    {
        let saved = three(&saver, "t").await;
        let last = id(&saved[2]).to_owned();
        set_string(&key(&saver, "t", &rest.replace("{id}", &last))).await;
        let needles: &[&str] = if names_checkpoint { &[&last, "wrong"] } else { &["wrong"] };
        reads_corrupt_then_deletes(&saver, needles).await.map_err(|e| format!("{rest}: {e}"))?;
    }
    // A put on a key of the wrong type is corrupt too.
    let saved = three(&saver, "t").await;
    set_string(&key(&saver, "t", &format!("n::w:{}", id(&saved[2])))).await;
    let write = saver.put_writes(&saved[2], vec![("b".into(), json!(1))], "task-2", "").await;
    expect_corrupt(write, "t", &[id(&saved[2])])?;
    saver.delete_thread("t").await.unwrap();
    Ok(())
}
