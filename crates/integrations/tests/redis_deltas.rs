//! RedisSaver's storage of growing lists: appended elements with periodic whole copies, read back
//! exactly, stored whole by a prune that drops their bases, and stored whole when a base disappeared
//! behind the saver's back.
#![cfg(feature = "redis")]
#![allow(clippy::unwrap_used, missing_docs)]

mod redis_common;

use redis_common::checkpoints::{key, put, version};
use redis_common::{TestSaver, raw};
use serde_json::{Value, json};
use weft_graph::checkpoint::{CheckpointConfig, Checkpointer, ListOptions};

type TestResult = Result<(), String>;

/// `n` checkpoints of a growing message list on `thread` (one message a step, the list whole in every
/// checkpoint as the engine saves it); returns their addresses.
async fn conversation(saver: &TestSaver, thread: &str, n: u64) -> Vec<CheckpointConfig> {
    let mut parent = CheckpointConfig::thread(thread);
    let mut messages = Vec::new();
    let mut saved = Vec::new();
    for step in 1..=n {
        messages.push(json!({"type": "human", "content": format!("message {step} {}", "x".repeat(200))}));
        parent = put(saver, &parent, &[("messages", step)], &[("messages", step, json!(messages))]).await;
        saved.push(parent.clone());
    }
    saved
}

#[tokio::test]
async fn growing_lists_are_stored_as_appended_elements_and_read_back_exactly() -> TestResult {
    let saver = saver_or_skip!("deltas", |o| o.deltas(16, 100));
    let whole = redis_common::saver_with("deltas-off", |o| o.deltas(0, 0)).await?.unwrap();
    let saved = conversation(&saver, "t", 200).await;
    conversation(&whole, "t", 200).await;
    for (i, config) in saved.iter().enumerate() {
        let got = saver.get_tuple(config).await.unwrap().unwrap();
        let messages = got.checkpoint.channel_values["messages"].as_array().unwrap().clone();
        assert_eq!(messages.len(), i + 1, "checkpoint {i} rebuilds its whole list");
        assert_eq!(
            messages[i]["content"].as_str().unwrap().split(' ').nth(1),
            Some((i + 1).to_string().as_str())
        );
    }
    let listed = saver.list(Some(&CheckpointConfig::thread("t")), ListOptions::default()).await.unwrap();
    let whole_listed =
        whole.list(Some(&CheckpointConfig::thread("t")), ListOptions::default()).await.unwrap();
    let values = |l: &[weft_graph::checkpoint::CheckpointTuple]| -> Vec<Value> {
        l.iter().map(|t| json!(t.checkpoint.channel_values)).collect()
    };
    assert_eq!(values(&listed), values(&whole_listed), "the same values as when every version is whole");
    let (small, big) =
        (saver.inner().stored_bytes("t").await.unwrap(), whole.inner().stored_bytes("t").await.unwrap());
    // Whole: 200 * 201 / 2 messages; appended with a copy every 16: about 200 + 200 * 100 / 16.
    assert!(small * 5 < big, "appended storage is much smaller: {small} bytes against {big}");
    Ok(())
}

#[tokio::test]
async fn prune_stores_a_kept_appended_value_whole() -> TestResult {
    let saver = saver_or_skip!("delta-prune", |o| o.deltas(3, 100));
    let saved = conversation(&saver, "t", 5).await;
    // Versions 1 and 4 are whole; 2, 3 and 5 appended.
    saver.prune("t", 1).await.unwrap();
    let mut conn = raw().await;
    let blobs = key(&saver, "t", "n::blobs");
    let stored: Vec<String> = redis::cmd("HKEYS").arg(&blobs).query_async(&mut conn).await.unwrap();
    let field = |n: u64| format!("messages:{}", version(n));
    assert_eq!(stored, vec![field(5)], "the kept value stays, its base goes");
    let value: String = redis::cmd("HGET").arg(&blobs).arg(field(5)).query_async(&mut conn).await.unwrap();
    assert!(!value.contains("append"), "the kept value is stored whole: {value}");
    let bases: Vec<String> =
        redis::cmd("HKEYS").arg(key(&saver, "t", "n::bases")).query_async(&mut conn).await.unwrap();
    assert!(bases.is_empty(), "{bases:?}");
    let kept = saver.get_tuple(&saved[4]).await.unwrap().unwrap();
    assert_eq!(kept.checkpoint.channel_values["messages"].as_array().unwrap().len(), 5);
    Ok(())
}

#[tokio::test]
async fn a_base_deleted_by_another_process_makes_the_value_whole() -> TestResult {
    let saver = saver_or_skip!("delta-gone", |o| o.deltas(64, 100));
    let root = CheckpointConfig::thread("t");
    let c1 = put(&saver, &root, &[("m", 1)], &[("m", 1, json!([1]))]).await;
    let c2 = put(&saver, &c1, &[("m", 2)], &[("m", 2, json!([1, 2]))]).await;
    let mut conn = raw().await;
    let blobs = key(&saver, "t", "n::blobs");
    let field = |n: u64| format!("m:{}", version(n));
    let stored: String = redis::cmd("HGET").arg(&blobs).arg(field(2)).query_async(&mut conn).await.unwrap();
    assert!(stored.contains("\"append\":[2]"), "version 2 extends version 1: {stored}");
    // As if another process pruned version 2 behind this saver's back.
    let _: i64 = redis::cmd("HDEL").arg(&blobs).arg(field(2)).query_async(&mut conn).await.unwrap();
    let c3 = put(&saver, &c2, &[("m", 3)], &[("m", 3, json!([1, 2, 3]))]).await;
    let stored: String = redis::cmd("HGET").arg(&blobs).arg(field(3)).query_async(&mut conn).await.unwrap();
    assert!(stored.contains("\"value\":[1,2,3]") && !stored.contains("append"), "{stored}");
    let got = saver.get_tuple(&c3).await.unwrap().unwrap();
    assert_eq!(got.checkpoint.channel_values["m"], json!([1, 2, 3]));
    Ok(())
}
