#![allow(clippy::unwrap_used, missing_docs)]
//! Bad input on SQLite: damaged rows, unknown formats, a 10,000-character thread id, dotted labels.

#![cfg(feature = "sqlite")]

mod bad_input;

use async_trait::async_trait;
use bad_input::{Damage, Raw};
use weft_integrations::sqlite::{SqlitePool, SqliteSaver, SqliteStore};

struct Pool(SqlitePool);

#[async_trait]
impl Raw for Pool {
    async fn exec(&self, sql: &'static str, thread_id: &str) {
        let done = sqlx::query(sql).bind(thread_id).execute(&self.0).await.unwrap();
        assert!(done.rows_affected() > 0, "the damage touched no row: {sql}");
    }
}

const DAMAGE: Damage = Damage {
    checkpoint_record: "UPDATE checkpoints SET checkpoint = '{\"v\": 1, \"id\": ' WHERE thread_id = $1",
    checkpoint_version: "UPDATE checkpoints SET checkpoint = json_set(checkpoint, '$.v', 99) WHERE thread_id = $1",
    truncate_count: "UPDATE checkpoint_blobs SET blob = substr(blob, 1, length(blob) - 2) \
                     WHERE thread_id = $1 AND channel = 'count'",
    truncate_messages_base: "UPDATE checkpoint_blobs SET blob = substr(blob, 1, length(blob) - 2) \
                             WHERE thread_id = $1 AND channel = 'messages' AND base_version IS NULL",
    unknown_format: "UPDATE checkpoint_blobs SET blob = CAST('json:9:' || substr(CAST(blob AS TEXT), 8) AS BLOB) \
                     WHERE thread_id = $1 AND channel = 'count'",
    garbage_writes: "UPDATE checkpoint_writes SET blob = X'00FF1234' WHERE thread_id = $1",
    wrong_types: &[
        "UPDATE checkpoints SET checkpoint = 42 WHERE thread_id = $1",
        "UPDATE checkpoints SET metadata = X'00FF' WHERE thread_id = $1",
        "UPDATE checkpoint_blobs SET blob = 42 WHERE thread_id = $1 AND channel = 'count'",
        "UPDATE checkpoint_writes SET blob = 4.5, idx = 'x' WHERE thread_id = $1",
    ],
};

async fn saver() -> (SqliteSaver, Pool) {
    let dir = std::env::temp_dir().join(format!("weft-bad-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let saver = SqliteSaver::open(dir.join("weft.db")).await.unwrap();
    let pool = Pool(saver.pool().clone());
    (saver, pool)
}

#[tokio::test]
async fn corrupted_checkpoint_row_is_a_typed_error() {
    let (saver, raw) = saver().await;
    bad_input::corrupted_checkpoint_row(&saver, &raw, &DAMAGE).await;
}

#[tokio::test]
async fn truncated_blob_is_a_typed_error() {
    let (saver, raw) = saver().await;
    bad_input::truncated_blob(&saver, &raw, &DAMAGE).await;
}

#[tokio::test]
async fn unknown_format_version_is_a_typed_error() {
    let (saver, raw) = saver().await;
    bad_input::unknown_format_version(&saver, &raw, &DAMAGE).await;
}

#[tokio::test]
async fn damaged_pending_write_is_a_typed_error() {
    let (saver, raw) = saver().await;
    bad_input::damaged_pending_write(&saver, &raw, &DAMAGE).await;
}

#[tokio::test]
async fn rows_of_the_wrong_type_are_corrupt_naming_thread_and_checkpoint() {
    let (saver, raw) = saver().await;
    bad_input::wrong_type_rows(&saver, &raw, &DAMAGE).await;
}

#[tokio::test]
async fn ten_thousand_character_thread_id_round_trips() {
    let (saver, _) = saver().await;
    bad_input::ten_thousand_character_thread_id(&saver).await;
}

#[tokio::test]
async fn namespace_labels_with_dots_are_refused_and_never_match() {
    bad_input::namespace_labels_with_dots(&SqliteStore::in_memory().await.unwrap()).await;
}

#[tokio::test]
async fn damaged_item_value_is_an_error_naming_the_key() {
    let (saver, raw) = saver().await;
    let store = SqliteStore::from_pool(saver.pool().clone()).await.unwrap();
    bad_input::damaged_item_value(&store, &raw, "UPDATE store_items SET value = '{\"v\": ' WHERE key = $1")
        .await;
}
