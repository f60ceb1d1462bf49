//! Bad input shared by the SQL backends' tests: damaged rows (changed behind the saver's back with raw
//! SQL), unknown formats, very long ids, awkward names. Each case gives clear typed errors naming the
//! culprit, and loses nothing else.

#![allow(dead_code, unreachable_pub, clippy::panic)]

use async_trait::async_trait;
use serde_json::{Value, json};
use weft_graph::checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointError, CheckpointErrorKind, CheckpointMetadata, CheckpointSource,
    Checkpointer, ListOptions,
};

/// Runs one statement with the thread id as its only parameter (`$1`).
#[async_trait]
pub trait Raw: Send + Sync {
    async fn exec(&self, sql: &'static str, thread_id: &str);
}

/// The statements that damage a thread's rows, in the backend's dialect.
#[derive(Debug, Clone, Copy)]
pub struct Damage {
    /// Makes the checkpoint records of `$1` unreadable.
    pub checkpoint_record: &'static str,
    /// Makes the checkpoint records of `$1` claim format version 99.
    pub checkpoint_version: &'static str,
    /// Cuts the last bytes off the blobs of channel `count` of `$1`.
    pub truncate_count: &'static str,
    /// Cuts the last bytes off the whole (non-delta) blobs of channel `messages` of `$1`.
    pub truncate_messages_base: &'static str,
    /// Gives the blobs of channel `count` of `$1` the tag `json:9:`.
    pub unknown_format: &'static str,
    /// Replaces the pending write blobs of `$1` with bytes without a tag.
    pub garbage_writes: &'static str,
    /// Each stores a value of the wrong type (or JSON of the wrong shape) in a row of `$1`: a
    /// checkpoint record, its metadata, a channel value, a pending write.
    pub wrong_types: &'static [&'static str],
}

fn metadata(step: i64) -> CheckpointMetadata {
    CheckpointMetadata {
        source: CheckpointSource::Loop,
        step,
        parents: Default::default(),
        extra: Default::default(),
    }
}

fn checkpoint(id: &str, values: Value, versions: &[(&str, &str)]) -> Checkpoint {
    let channel_versions = versions.iter().map(|(c, v)| ((*c).into(), (*v).into())).collect();
    Checkpoint {
        v: 1,
        id: id.to_owned(),
        ts: "2025-01-01T00:00:00+00:00".to_owned(),
        channel_values: serde_json::from_value(values).unwrap_or_default(),
        channel_versions,
        versions_seen: Default::default(),
        updated_channels: Vec::new(),
    }
}

fn version(n: u32) -> String {
    format!("{n:032}.{:016}", 0.25)
}

fn id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A thread of two checkpoints: `messages` grows (stored as a delta the second time), `count` changes, and
/// the second checkpoint has a pending write. Returns the second checkpoint's address.
pub async fn thread_with_history(saver: &dyn Checkpointer, thread_id: &str) -> CheckpointConfig {
    let thread = CheckpointConfig::thread(thread_id);
    let (v1, v2) = (version(1), version(2));
    let first = checkpoint(
        &id(),
        json!({"messages": ["hi"], "count": {"n": 1, "label": "one"}}),
        &[("messages", &v1), ("count", &v1)],
    );
    let new = first.channel_versions.clone();
    let c1 = saver.put(&thread, first, metadata(0), new).await.unwrap();
    let second = checkpoint(
        &id(),
        json!({"messages": ["hi", "there"], "count": {"n": 2, "label": "two"}}),
        &[("messages", &v2), ("count", &v2)],
    );
    let new = second.channel_versions.clone();
    let c2 = saver.put(&c1, second, metadata(1), new).await.unwrap();
    saver.put_writes(&c2, vec![("messages".into(), json!(["more"]))], "task-7", "~a").await.unwrap();
    c2
}

/// `get_tuple` fails with `Corrupt`, naming the thread, the checkpoint and every `needles`.
async fn expect_corrupt(saver: &dyn Checkpointer, at: &CheckpointConfig, needles: &[&str]) -> String {
    match saver.get_tuple(at).await {
        Err(err @ CheckpointError::Corrupt { .. }) => {
            assert_eq!(err.kind(), CheckpointErrorKind::Corrupt);
            assert!(!err.is_retryable());
            assert_eq!(err.thread_id(), Some(at.thread_id.as_str()));
            let text = err.to_string();
            let id = at.checkpoint_id.clone().unwrap_or_default();
            assert!(
                text.contains(&at.thread_id) && text.contains(&id),
                "names thread and checkpoint: {text}"
            );
            for needle in needles {
                assert!(text.contains(needle), "names {needle}: {text}");
            }
            text
        }
        other => panic!("a damaged row reads as CheckpointError::Corrupt, got {other:?}"),
    }
}

/// After the damage, other threads still read whole and the damaged thread can be deleted.
async fn nothing_else_lost(saver: &dyn Checkpointer, healthy: &CheckpointConfig, damaged: &str) {
    let tuple = saver.get_tuple(healthy).await.unwrap().unwrap();
    assert_eq!(tuple.checkpoint.channel_values.get("messages"), Some(&json!(["hi", "there"])));
    assert_eq!(tuple.pending_writes.len(), 1);
    saver.delete_thread(damaged).await.unwrap();
    let left = saver.list(Some(&CheckpointConfig::thread(damaged)), ListOptions::default()).await.unwrap();
    assert!(left.is_empty(), "a damaged thread can still be deleted");
}

fn fresh(label: &str) -> String {
    format!("bad-{label}-{}", uuid::Uuid::new_v4().simple())
}

/// A checkpoint record that does not parse is `Corrupt`; so is one of an unknown format version.
pub async fn corrupted_checkpoint_row(saver: &dyn Checkpointer, raw: &dyn Raw, damage: &Damage) {
    let healthy = thread_with_history(saver, &fresh("healthy")).await;
    for (sql, needle) in [
        (damage.checkpoint_record, "unreadable checkpoint record"),
        (damage.checkpoint_version, "version 99"),
    ] {
        let thread_id = fresh("row");
        let at = thread_with_history(saver, &thread_id).await;
        raw.exec(sql, &thread_id).await;
        expect_corrupt(saver, &at, &[needle]).await;
        let listed =
            saver.list(Some(&CheckpointConfig::thread(thread_id.as_str())), ListOptions::default()).await;
        assert!(matches!(listed, Err(CheckpointError::Corrupt { .. })), "list reports it too: {listed:?}");
        nothing_else_lost(saver, &healthy, &thread_id).await;
    }
}

/// A truncated blob is `Corrupt` naming its channel, also when it is the base of a delta.
pub async fn truncated_blob(saver: &dyn Checkpointer, raw: &dyn Raw, damage: &Damage) {
    let healthy = thread_with_history(saver, &fresh("healthy")).await;
    let thread_id = fresh("truncated");
    let at = thread_with_history(saver, &thread_id).await;
    raw.exec(damage.truncate_count, &thread_id).await;
    expect_corrupt(saver, &at, &["channel 'count'", "unreadable json:1 payload"]).await;
    nothing_else_lost(saver, &healthy, &thread_id).await;

    let thread_id = fresh("truncated-base");
    let at = thread_with_history(saver, &thread_id).await;
    raw.exec(damage.truncate_messages_base, &thread_id).await;
    expect_corrupt(saver, &at, &["channel 'messages'", "unreadable json:1 payload"]).await;
    nothing_else_lost(saver, &healthy, &thread_id).await;
}

/// A blob of an unknown format version is `Corrupt` naming the format, never read as a default.
pub async fn unknown_format_version(saver: &dyn Checkpointer, raw: &dyn Raw, damage: &Damage) {
    let healthy = thread_with_history(saver, &fresh("healthy")).await;
    let thread_id = fresh("format");
    let at = thread_with_history(saver, &thread_id).await;
    raw.exec(damage.unknown_format, &thread_id).await;
    expect_corrupt(saver, &at, &["channel 'count'", "unknown blob format 'json:9'"]).await;
    nothing_else_lost(saver, &healthy, &thread_id).await;
}

/// A pending write that cannot be read back is `Corrupt` naming its task and channel.
pub async fn damaged_pending_write(saver: &dyn Checkpointer, raw: &dyn Raw, damage: &Damage) {
    let healthy = thread_with_history(saver, &fresh("healthy")).await;
    let thread_id = fresh("write");
    let at = thread_with_history(saver, &thread_id).await;
    raw.exec(damage.garbage_writes, &thread_id).await;
    expect_corrupt(saver, &at, &["task 'task-7'", "'messages'", "no format tag"]).await;
    nothing_else_lost(saver, &healthy, &thread_id).await;
}

/// A row holding a value of the wrong type is `Corrupt` naming the thread and checkpoint (never a raw
/// driver error), in `get_tuple` and in `list`; other threads still read and the thread can be deleted.
pub async fn wrong_type_rows(saver: &dyn Checkpointer, raw: &dyn Raw, damage: &Damage) {
    let healthy = thread_with_history(saver, &fresh("healthy")).await;
    for sql in damage.wrong_types {
        let thread_id = fresh("type");
        let at = thread_with_history(saver, &thread_id).await;
        raw.exec(sql, &thread_id).await;
        expect_corrupt(saver, &at, &[]).await;
        let listed =
            saver.list(Some(&CheckpointConfig::thread(thread_id.as_str())), ListOptions::default()).await;
        assert!(
            matches!(&listed, Err(e) if e.kind() == CheckpointErrorKind::Corrupt),
            "list reports it too ({sql}): {listed:?}"
        );
        nothing_else_lost(saver, &healthy, &thread_id).await;
    }
}

/// A thread id of 10,000 random characters (nothing to compress) is stored, found, listed and deleted.
pub async fn ten_thousand_character_thread_id(saver: &dyn Checkpointer) {
    let mut thread_id = String::with_capacity(10_000);
    while thread_id.chars().count() < 10_000 {
        thread_id.push_str(&uuid::Uuid::new_v4().simple().to_string());
    }
    let thread_id: String = thread_id.chars().take(10_000).collect();
    let at = thread_with_history(saver, &thread_id).await;
    let got = saver.get_tuple(&CheckpointConfig::thread(thread_id.as_str())).await.unwrap().unwrap();
    assert_eq!(got.config, at);
    assert_eq!(got.checkpoint.channel_values.get("messages"), Some(&json!(["hi", "there"])));
    assert_eq!(saver.list_ids(&at).await.unwrap().len(), 2);
    saver.prune(&thread_id, 1).await.unwrap();
    assert_eq!(saver.list_ids(&at).await.unwrap().len(), 1);
    saver.delete_thread(&thread_id).await.unwrap();
    assert!(saver.get_tuple(&at).await.unwrap().is_none());
}

use weft_graph::store::{ListNamespacesOptions, SearchOptions, Store, StoreError};

fn labels(l: &[&str]) -> Vec<String> {
    l.iter().map(|s| (*s).to_owned()).collect()
}

/// Namespace labels with dots: a put is `InvalidNamespace` naming the label, and reads through a dotted
/// label never reach the namespace whose labels it joins.
pub async fn namespace_labels_with_dots(store: &dyn Store) {
    let root = fresh("dots");
    let dotted = labels(&[&root, "a.b"]);
    match store.put(&dotted, "k", json!({"v": 1})).await {
        Err(err @ StoreError::InvalidNamespace { .. }) => {
            assert!(err.to_string().contains("'a.b' contains a period"), "{err}");
        }
        other => panic!("a dotted label is InvalidNamespace, got {other:?}"),
    }
    let split = labels(&[&root, "a", "b"]);
    store.put(&split, "k", json!({"v": 2})).await.unwrap();
    assert!(store.get(&dotted, "k").await.unwrap().is_none(), "a dotted label is not a path");
    assert!(store.search(&dotted, SearchOptions::default()).await.unwrap().is_empty());
    let options = ListNamespacesOptions { prefix: Some(dotted.clone()), ..Default::default() };
    assert!(store.list_namespaces(options).await.unwrap().is_empty());
    store.delete(&dotted, "k").await.unwrap();
    assert_eq!(store.get(&split, "k").await.unwrap().map(|i| i.value), Some(json!({"v": 2})));
}

/// An item whose stored value is damaged is a backend error naming its key; other items read fine.
pub async fn damaged_item_value(store: &dyn Store, raw: &dyn Raw, damage_sql: &'static str) {
    let root = fresh("item");
    let namespace = labels(&[&root]);
    let key = fresh("key");
    store.put(&namespace, &key, json!({"v": 1})).await.unwrap();
    store.put(&namespace, "fine", json!({"v": 2})).await.unwrap();
    raw.exec(damage_sql, &key).await;
    match store.get(&namespace, &key).await {
        Err(err @ StoreError::Backend(_)) => assert!(err.to_string().contains(&key), "names the key: {err}"),
        other => panic!("a damaged item is an error, got {other:?}"),
    }
    assert_eq!(store.get(&namespace, "fine").await.unwrap().map(|i| i.value), Some(json!({"v": 2})));
    store.delete(&namespace, &key).await.unwrap();
    assert_eq!(store.search(&namespace, SearchOptions::default()).await.unwrap().len(), 1);
}
