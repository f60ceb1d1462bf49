//! `InMemorySaver` beyond the conformance suite: storage sharing, errors, retention, versions.
#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use weft_graph::checkpoint::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointError, CheckpointMetadata, CheckpointSource,
    Checkpointer, InMemorySaver, ListOptions, RetentionPolicy, get_next_version, version_counter,
};

fn checkpoint(id: &str, values: serde_json::Value, versions: &ChannelVersions) -> Checkpoint {
    Checkpoint {
        v: 1,
        id: id.to_owned(),
        ts: "2025-01-01T00:00:00+00:00".to_owned(),
        channel_values: serde_json::from_value(values).unwrap(),
        channel_versions: versions.clone(),
        versions_seen: Default::default(),
        updated_channels: Vec::new(),
    }
}

fn metadata(step: i64) -> CheckpointMetadata {
    CheckpointMetadata {
        source: CheckpointSource::Loop,
        step,
        parents: BTreeMap::new(),
        extra: Default::default(),
    }
}

fn id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Three steps: `a` set once, `b` changed every step. Versions come from `get_next_version`.
async fn three_steps(saver: &InMemorySaver, thread: &str) -> Vec<CheckpointConfig> {
    let mut config = CheckpointConfig::thread(thread);
    let mut all = ChannelVersions::new();
    let mut out = Vec::new();
    for step in 0..3 {
        let mut new = ChannelVersions::new();
        let mut values = serde_json::Map::new();
        if step == 0 {
            new.insert("a".into(), get_next_version(None));
            values.insert("a".into(), json!("fixed"));
        }
        new.insert("b".into(), get_next_version(all.get("b").map(|v| &**v)));
        values.insert("b".into(), json!(step));
        all.extend(new.clone());
        let cp = checkpoint(&id(), serde_json::Value::Object(values), &all);
        config = saver.put(&config, cp, metadata(step), new).await.unwrap();
        out.push(config.clone());
    }
    out
}

#[tokio::test]
async fn unchanged_channel_is_stored_once() {
    let saver = InMemorySaver::new();
    three_steps(&saver, "t").await;
    // `a` once, `b` three times.
    assert_eq!(saver.stored_value_count(), 4);
    let latest = saver.get_tuple(&CheckpointConfig::thread("t")).await.unwrap().unwrap();
    assert_eq!(json!(latest.checkpoint.channel_values), json!({"a": "fixed", "b": 2}));
    assert_eq!(version_counter(&latest.checkpoint.channel_versions["b"]), Some(3));
}

#[tokio::test]
async fn prune_drops_values_no_checkpoint_references() {
    let saver = InMemorySaver::new();
    three_steps(&saver, "t").await;
    saver.prune("t", 1).await.unwrap();
    // The kept checkpoint needs `a` (from step 0) and the last `b`.
    assert_eq!(saver.stored_value_count(), 2);
    saver.prune("t", 0).await.unwrap();
    assert_eq!(saver.stored_value_count(), 0);
}

#[tokio::test]
async fn delete_thread_drops_its_values() {
    let saver = InMemorySaver::new();
    three_steps(&saver, "t").await;
    three_steps(&saver, "u").await;
    saver.delete_thread("t").await.unwrap();
    assert_eq!(saver.stored_value_count(), 4);
}

#[tokio::test]
async fn put_rejects_an_empty_checkpoint_id() {
    let saver = InMemorySaver::new();
    let err = saver
        .put(
            &CheckpointConfig::thread("t-empty"),
            checkpoint("", json!({}), &Default::default()),
            metadata(0),
            Default::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, CheckpointError::Invalid(_)));
    assert!(err.to_string().contains("'t-empty'"), "{err}");
}

#[tokio::test]
async fn corrupt_error_message_names_thread_checkpoint_and_channel() {
    let saver = InMemorySaver::new();
    let versions: ChannelVersions = [("lost".into(), get_next_version(None))].into();
    let cp_id = id();
    let cp = checkpoint(&cp_id, json!({}), &versions);
    saver.put(&CheckpointConfig::thread("t1"), cp, metadata(0), Default::default()).await.unwrap();
    let err = saver.list(None, ListOptions::default()).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("thread 't1'") && text.contains(&cp_id) && text.contains("channel 'lost'"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_saver_serves_many_spawned_tasks() {
    let saver = Arc::new(InMemorySaver::new());
    let handles: Vec<_> = (0..16)
        .map(|i| {
            let saver = Arc::clone(&saver);
            tokio::spawn(async move { three_steps(&saver, &format!("thread-{i}")).await })
        })
        .collect();
    for handle in handles {
        handle.await.unwrap();
    }
    let all = saver.list(None, ListOptions::default()).await.unwrap();
    assert_eq!(all.len(), 48);
    assert_eq!(saver.stored_value_count(), 64);
}

#[tokio::test]
async fn retention_keep_last_prunes_every_namespace() {
    let saver = InMemorySaver::new();
    three_steps(&saver, "t").await;
    RetentionPolicy::keep_last(2).apply(&saver, "t").await.unwrap();
    assert_eq!(saver.list_ids(&CheckpointConfig::thread("t")).await.unwrap().len(), 2);
}

#[tokio::test]
async fn default_retention_policy_keeps_everything() {
    let saver = InMemorySaver::new();
    three_steps(&saver, "t").await;
    RetentionPolicy::default().apply(&saver, "t").await.unwrap();
    assert_eq!(saver.list_ids(&CheckpointConfig::thread("t")).await.unwrap().len(), 3);
}

#[tokio::test]
async fn list_ids_ignores_the_configs_checkpoint_id() {
    let saver = InMemorySaver::new();
    let saved = three_steps(&saver, "t").await;
    assert_eq!(saver.list_ids(&saved[0]).await.unwrap().len(), 3);
}

#[tokio::test]
async fn writes_saved_before_their_checkpoint_join_it() {
    let saver = InMemorySaver::new();
    let thread = CheckpointConfig::thread("early-writes");
    let later = id();
    saver.put_writes(&thread.at(later.clone()), vec![("x".into(), json!(1))], "task", "p").await.unwrap();
    let versions = ChannelVersions::from([("x".into(), get_next_version(None))]);
    let cp = checkpoint(&later, json!({"x": 0}), &versions);
    saver.put(&thread, cp, metadata(0), versions.clone()).await.unwrap();
    let tuple = saver.get_tuple(&thread).await.unwrap().unwrap();
    assert_eq!(tuple.checkpoint.id, later);
    assert_eq!(tuple.pending_writes.len(), 1);
    assert_eq!(tuple.pending_writes[0].value, json!(1));
}

#[tokio::test]
async fn checkpoints_put_out_of_id_order_are_listed_by_id_and_a_repeated_id_keeps_its_writes() {
    let saver = InMemorySaver::new();
    let thread = CheckpointConfig::thread("out-of-order");
    let (first, second, third) = (id(), id(), id());
    let versions = ChannelVersions::from([("x".into(), get_next_version(None))]);
    for (n, cid) in [&third, &first, &second].into_iter().enumerate() {
        let cp = checkpoint(cid, json!({"x": n}), &versions);
        saver.put(&thread, cp, metadata(n as i64), versions.clone()).await.unwrap();
    }
    let listed: Vec<String> = saver
        .list(Some(&thread), ListOptions::default())
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.checkpoint.id)
        .collect();
    assert_eq!(listed, vec![third.clone(), second.clone(), first.clone()]);
    assert_eq!(saver.list_ids(&thread).await.unwrap(), listed);
    assert_eq!(saver.get_tuple(&thread).await.unwrap().unwrap().checkpoint.id, third);

    // The same id again replaces the checkpoint, not the writes saved against it.
    saver.put_writes(&thread.at(first.clone()), vec![("x".into(), json!("w"))], "t", "p").await.unwrap();
    let again = checkpoint(&first, json!({"x": 9}), &versions);
    saver.put(&thread, again, metadata(7), versions.clone()).await.unwrap();
    let tuple = saver.get_tuple(&thread.at(first.clone())).await.unwrap().unwrap();
    assert_eq!(tuple.metadata.step, 7);
    assert_eq!(tuple.pending_writes.len(), 1);
    assert_eq!(saver.list_ids(&thread).await.unwrap().len(), 3);
}
