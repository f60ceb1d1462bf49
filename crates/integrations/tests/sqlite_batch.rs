#![allow(clippy::unwrap_used, missing_docs)]
//! The SQLite saver's one-script batches: a script that fails or is abandoned part-way stores nothing
//! and leaves the writer connection usable (no transaction left open).

#![cfg(feature = "sqlite")]

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use weft_graph::checkpoint::{
    ChannelAppends, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource,
    Checkpointer, ExpectedHead, ListOptions, SaveOp,
};
use weft_integrations::sqlite::SqliteSaver;

async fn saver() -> SqliteSaver {
    let dir = std::env::temp_dir().join(format!("weft-batch-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    SqliteSaver::open(dir.join("weft.db")).await.unwrap()
}

/// The first checkpoint of `thread` and one write of `task` against it, as one batch.
fn batch(thread: &CheckpointConfig, id: &str, task: &str) -> Vec<SaveOp> {
    let versions: ChannelVersions = [("n".into(), "1".into())].into_iter().collect();
    let put = SaveOp::Put {
        config: Arc::new(thread.clone()),
        checkpoint: Checkpoint {
            v: 1,
            id: id.to_owned(),
            ts: "2025-01-01T00:00:00+00:00".to_owned(),
            channel_values: [("n".into(), json!(1))].into_iter().collect(),
            channel_versions: versions.clone(),
            versions_seen: Default::default(),
            updated_channels: Vec::new(),
        },
        metadata: CheckpointMetadata {
            source: CheckpointSource::Loop,
            step: 0,
            parents: Default::default(),
            extra: Default::default(),
        },
        new_versions: versions,
        appends: ChannelAppends::new(),
        expected_head: ExpectedHead::Empty,
    };
    let writes = SaveOp::Writes {
        config: Arc::new(CheckpointConfig { checkpoint_id: Some(id.to_owned()), ..thread.clone() }),
        writes: vec![("n".into(), json!(2))],
        task_id: task.into(),
        task_path: "~__pregel_pull, n".into(),
    };
    vec![writes, put]
}

async fn stored(saver: &SqliteSaver, thread: &CheckpointConfig) -> (usize, usize) {
    let list = saver.list(Some(thread), ListOptions::default()).await.unwrap();
    let writes = list.iter().map(|t| t.pending_writes.len()).sum();
    (list.len(), writes)
}

#[tokio::test]
async fn a_batch_failing_part_way_stores_nothing_and_the_writer_goes_on() {
    let saver = saver().await;
    sqlx::raw_sql(
        "CREATE TRIGGER refuse BEFORE INSERT ON checkpoint_writes WHEN NEW.task_id = 'refused' \
         BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
    )
    .execute(saver.pool())
    .await
    .unwrap();
    let thread = CheckpointConfig::thread("fails-part-way");
    let id = uuid::Uuid::now_v7().to_string();
    let err = saver.put_batch(batch(&thread, &id, "refused")).await.unwrap_err();
    assert!(err.to_string().contains("refused by the test"), "{err}");
    assert_eq!(stored(&saver, &thread).await, (0, 0), "a failed batch stored part of itself");
    // The writer is not left inside the failed batch's transaction.
    saver.put_batch(batch(&thread, &id, "accepted")).await.unwrap();
    assert_eq!(stored(&saver, &thread).await, (1, 1));
}

#[tokio::test]
async fn a_batch_abandoned_part_way_is_all_or_nothing_and_the_writer_goes_on() {
    let saver = saver().await;
    // Inserting the write of task 'slow' takes a while: the caller gives up meanwhile.
    sqlx::raw_sql(
        "CREATE TRIGGER slow BEFORE INSERT ON checkpoint_writes WHEN NEW.task_id = 'slow' BEGIN \
         SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c \
         WHERE x < 3000000) SELECT x FROM c); END",
    )
    .execute(saver.pool())
    .await
    .unwrap();
    let thread = CheckpointConfig::thread("abandoned");
    let id = uuid::Uuid::now_v7().to_string();
    let abandoned =
        tokio::time::timeout(Duration::from_millis(5), saver.put_batch(batch(&thread, &id, "slow")));
    assert!(abandoned.await.is_err(), "the slow batch finished before the caller gave up");
    let other = CheckpointConfig::thread("after-the-abandoned-one");
    saver.put_batch(batch(&other, &uuid::Uuid::now_v7().to_string(), "quick")).await.unwrap();
    assert_eq!(stored(&saver, &other).await, (1, 1));
    let left = stored(&saver, &thread).await;
    assert!(left == (0, 0) || left == (1, 1), "the abandoned batch was stored in part: {left:?}");
}

#[tokio::test]
async fn a_saver_on_the_callers_pool_stores_batches_and_refuses_a_second_first_checkpoint() {
    let dir = std::env::temp_dir().join(format!("weft-batch-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let options =
        sqlx::sqlite::SqliteConnectOptions::new().filename(dir.join("weft.db")).create_if_missing(true);
    let pool = sqlx::sqlite::SqlitePoolOptions::new().max_connections(3).connect_with(options).await.unwrap();
    let saver = SqliteSaver::from_pool(pool).await.unwrap();
    let thread = CheckpointConfig::thread("callers-pool");
    saver.put_batch(batch(&thread, &uuid::Uuid::now_v7().to_string(), "first")).await.unwrap();
    assert_eq!(stored(&saver, &thread).await, (1, 1));
    // Another run's first checkpoint on the same thread: the head is not empty any more.
    let err = saver.put_batch(batch(&thread, &uuid::Uuid::now_v7().to_string(), "second")).await.unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert_eq!(stored(&saver, &thread).await, (1, 1), "a refused batch stored part of itself");
}

/// A checkpoint of `thread` after `parent` whose `messages` list holds `items` (version `version`).
fn list_put(
    thread: &CheckpointConfig,
    parent: Option<&str>,
    id: &str,
    version: &str,
    items: &[&str],
) -> SaveOp {
    let versions: ChannelVersions = [("messages".into(), version.into())].into_iter().collect();
    SaveOp::Put {
        config: Arc::new(CheckpointConfig { checkpoint_id: parent.map(str::to_owned), ..thread.clone() }),
        checkpoint: Checkpoint {
            v: 1,
            id: id.to_owned(),
            ts: "2025-01-01T00:00:00+00:00".to_owned(),
            channel_values: [("messages".into(), json!(items))].into_iter().collect(),
            channel_versions: versions.clone(),
            versions_seen: Default::default(),
            updated_channels: Vec::new(),
        },
        metadata: CheckpointMetadata {
            source: CheckpointSource::Loop,
            step: 0,
            parents: Default::default(),
            extra: Default::default(),
        },
        new_versions: versions,
        appends: ChannelAppends::new(),
        expected_head: ExpectedHead::Any,
    }
}

#[tokio::test]
async fn a_delta_whose_base_is_gone_is_stored_as_the_whole_list() {
    let saver = saver().await;
    let thread = CheckpointConfig::thread("lost-base");
    let ids: Vec<String> = (0..3).map(|_| uuid::Uuid::now_v7().to_string()).collect();
    saver.put_batch(vec![list_put(&thread, None, &ids[0], "1", &["a"])]).await.unwrap();
    saver.put_batch(vec![list_put(&thread, Some(&ids[0]), &ids[1], "2", &["a", "b"])]).await.unwrap();
    let (base,): (Option<String>,) = sqlx::query_as(
        "SELECT base_version FROM checkpoint_blobs WHERE thread_id = 'lost-base' AND version = '2'",
    )
    .fetch_one(saver.pool())
    .await
    .unwrap();
    assert_eq!(base.as_deref(), Some("1"), "the second list is a delta on the first");
    // The stored value the next delta would extend disappears behind the saver's back.
    sqlx::query("DELETE FROM checkpoint_blobs WHERE thread_id = ? AND version = '2'")
        .bind("lost-base")
        .execute(saver.pool())
        .await
        .unwrap();
    saver.put_batch(vec![list_put(&thread, Some(&ids[1]), &ids[2], "3", &["a", "b", "c"])]).await.unwrap();
    let latest = saver.get_tuple(&thread).await.unwrap().unwrap();
    assert_eq!(latest.checkpoint.id, ids[2]);
    assert_eq!(latest.checkpoint.channel_values["messages"], json!(["a", "b", "c"]));
    let (base,): (Option<String>,) = sqlx::query_as(
        "SELECT base_version FROM checkpoint_blobs WHERE thread_id = 'lost-base' AND version = '3'",
    )
    .fetch_one(saver.pool())
    .await
    .unwrap();
    assert_eq!(base, None, "the list was stored whole");
}
