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
use weft_integrations::sqlite::{SqlParam, SqlStatement, SqliteSaver};

async fn saver() -> SqliteSaver {
    let dir = std::env::temp_dir().join(format!("weft-batch-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    SqliteSaver::open(dir.join("weft.db")).await.unwrap()
}

/// The first checkpoint of `thread` and one write of `task` against it, as one batch.
fn batch(thread: &CheckpointConfig, id: &str, task: &str) -> Vec<SaveOp> {
    let put = one_channel_put(thread, None, id, ("n", "1", json!(1)), ExpectedHead::Empty);
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

fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

async fn notes(saver: &SqliteSaver) -> Vec<String> {
    sqlx::query_scalar("SELECT id FROM notes ORDER BY id").fetch_all(saver.pool()).await.unwrap()
}

fn note(id: &str) -> SqlStatement {
    SqlStatement::new("INSERT INTO notes (id) VALUES (?)", vec![SqlParam::Text(id.to_owned())])
}

#[tokio::test]
async fn batches_queued_together_commit_together_and_a_conflict_fails_only_its_own() {
    let saver = saver().await;
    let create = SqlStatement::new("CREATE TABLE notes (id TEXT PRIMARY KEY)", Vec::new());
    saver.write_with_checkpoints(vec![create]).await.unwrap();
    let taken = CheckpointConfig::thread("group-taken");
    saver.put_batch(batch(&taken, &new_id(), "first")).await.unwrap();
    let (a, b) = (CheckpointConfig::thread("group-a"), CheckpointConfig::thread("group-b"));
    // Queued in one turn of this single-threaded runtime: the committer takes them as one group. The
    // second batch expects an empty thread, which `taken` is not.
    let (saved_a, refused, saved_b, noted) = tokio::join!(
        saver.put_batch(batch(&a, &new_id(), "a")),
        saver.put_batch(batch(&taken, &new_id(), "second")),
        saver.put_batch(batch(&b, &new_id(), "b")),
        saver.write_with_checkpoints(vec![note("n1")]),
    );
    saved_a.unwrap();
    saved_b.unwrap();
    // Stored once: a group whose checks failed stored none of its statements before it was split up (the
    // note's second insert would fail on its key).
    noted.unwrap();
    assert!(refused.as_ref().is_err_and(|e| e.is_conflict()), "{refused:?}");
    assert_eq!(stored(&saver, &a).await, (1, 1));
    assert_eq!(stored(&saver, &b).await, (1, 1));
    assert_eq!(stored(&saver, &taken).await, (1, 1), "the refused batch stored part of itself");
    assert_eq!(notes(&saver).await, ["n1"]);
}

#[tokio::test]
async fn a_failing_statement_fails_its_own_caller_and_not_the_checkpoints_beside_it() {
    let saver = saver().await;
    let create = SqlStatement::new("CREATE TABLE notes (id TEXT PRIMARY KEY)", Vec::new());
    let refuse = SqlStatement::new(
        "CREATE TRIGGER refuse BEFORE INSERT ON notes WHEN NEW.id = 'bad' \
         BEGIN SELECT RAISE(ABORT, 'note refused by the test'); END",
        Vec::new(),
    );
    saver.write_with_checkpoints(vec![create, refuse]).await.unwrap();
    let thread = CheckpointConfig::thread("beside-a-bad-note");
    let (saved, refused, noted) = tokio::join!(
        saver.put_batch(batch(&thread, &new_id(), "t")),
        saver.write_with_checkpoints(vec![note("before-bad"), note("bad")]),
        saver.write_with_checkpoints(vec![note("good")]),
    );
    saved.unwrap();
    noted.unwrap();
    let err = refused.unwrap_err();
    assert!(err.to_string().contains("note refused by the test"), "{err}");
    assert_eq!(stored(&saver, &thread).await, (1, 1));
    assert_eq!(notes(&saver).await, ["good"], "the refused caller's statements are all or nothing");
    // And nothing is left open: the next write goes through.
    saver.write_with_checkpoints(vec![note("after")]).await.unwrap();
    assert_eq!(notes(&saver).await, ["after", "good"]);
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
    one_channel_put(thread, parent, id, ("messages", version, json!(items)), ExpectedHead::Any)
}

/// A checkpoint `id` of `thread` after `parent` that stores one channel: its name, version and value.
fn one_channel_put(
    thread: &CheckpointConfig,
    parent: Option<&str>,
    id: &str,
    (channel, version, value): (&str, &str, serde_json::Value),
    expected_head: ExpectedHead,
) -> SaveOp {
    let versions: ChannelVersions = [(channel.into(), version.into())].into_iter().collect();
    SaveOp::Put {
        config: Arc::new(CheckpointConfig { checkpoint_id: parent.map(str::to_owned), ..thread.clone() }),
        checkpoint: Checkpoint {
            v: 1,
            id: id.to_owned(),
            ts: "2025-01-01T00:00:00+00:00".to_owned(),
            channel_values: [(channel.into(), value)].into_iter().collect(),
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
        expected_head,
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
