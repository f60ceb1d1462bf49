#![allow(clippy::unwrap_used, missing_docs)]
//! Bad input on PostgreSQL: damaged rows, unknown formats, a 10,000-character thread id, dotted labels,
//! NUL characters.

#![cfg(feature = "postgres")]

mod bad_input;
mod common;

use async_trait::async_trait;
use bad_input::{Damage, Raw};
use weft_graph::checkpoint::{CheckpointConfig, CheckpointError, Checkpointer};
use weft_integrations::postgres::{PgPool, PostgresStore};

struct Pool(PgPool);

#[async_trait]
impl Raw for Pool {
    async fn exec(&self, sql: &'static str, thread_id: &str) {
        let done = sqlx::query(sql).bind(thread_id).execute(&self.0).await.unwrap();
        assert!(done.rows_affected() > 0, "the damage touched no row: {sql}");
    }
}

const DAMAGE: Damage = Damage {
    checkpoint_record: "UPDATE checkpoints SET checkpoint = '{\"v\": 1, \"id\": 5}'::jsonb \
                        WHERE thread_key = md5($1)::uuid AND thread_id = $1",
    checkpoint_version: "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{v}', '99') \
                         WHERE thread_key = md5($1)::uuid AND thread_id = $1",
    truncate_count: "UPDATE checkpoint_blobs SET blob = substr(blob, 1, length(blob) - 2) \
                     WHERE thread_key = md5($1)::uuid AND thread_id = $1 AND channel = 'count'",
    truncate_messages_base: "UPDATE checkpoint_blobs SET blob = substr(blob, 1, length(blob) - 2) \
                             WHERE thread_key = md5($1)::uuid AND thread_id = $1 AND channel = 'messages' \
                             AND base_version IS NULL",
    unknown_format: "UPDATE checkpoint_blobs SET blob = 'json:9:'::bytea || substr(blob, 8) \
                     WHERE thread_key = md5($1)::uuid AND thread_id = $1 AND channel = 'count'",
    garbage_writes: "UPDATE checkpoint_writes SET blob = '\\x00ff1234'::bytea \
                     WHERE thread_key = md5($1)::uuid AND thread_id = $1",
    wrong_types: &[
        "UPDATE checkpoints SET checkpoint = '42'::jsonb WHERE thread_key = md5($1)::uuid AND thread_id = $1",
        "UPDATE checkpoints SET metadata = '[1, 2]'::jsonb WHERE thread_key = md5($1)::uuid AND thread_id = $1",
        "UPDATE checkpoint_blobs SET blob = ''::bytea \
         WHERE thread_key = md5($1)::uuid AND thread_id = $1 AND channel = 'count'",
    ],
};

macro_rules! saver_or_skip {
    () => {{
        let Some(saver) = common::saver().await else { return };
        let raw = Pool(saver.inner().pool().clone());
        (saver, raw)
    }};
}

#[tokio::test]
async fn corrupted_checkpoint_row_is_a_typed_error() {
    let (saver, raw) = saver_or_skip!();
    bad_input::corrupted_checkpoint_row(&saver, &raw, &DAMAGE).await;
}

#[tokio::test]
async fn rows_of_the_wrong_type_are_corrupt_naming_thread_and_checkpoint() {
    let (saver, raw) = saver_or_skip!();
    bad_input::wrong_type_rows(&saver, &raw, &DAMAGE).await;
}

#[tokio::test]
async fn truncated_blob_is_a_typed_error() {
    let (saver, raw) = saver_or_skip!();
    bad_input::truncated_blob(&saver, &raw, &DAMAGE).await;
}

#[tokio::test]
async fn unknown_format_version_is_a_typed_error() {
    let (saver, raw) = saver_or_skip!();
    bad_input::unknown_format_version(&saver, &raw, &DAMAGE).await;
}

#[tokio::test]
async fn damaged_pending_write_is_a_typed_error() {
    let (saver, raw) = saver_or_skip!();
    bad_input::damaged_pending_write(&saver, &raw, &DAMAGE).await;
}

#[tokio::test]
async fn ten_thousand_character_thread_id_round_trips() {
    let (saver, _) = saver_or_skip!();
    bad_input::ten_thousand_character_thread_id(&saver).await;
}

#[tokio::test]
async fn nul_characters_in_ids_are_refused_by_name() {
    let (saver, _) = saver_or_skip!();
    let thread = CheckpointConfig::thread("a\0b");
    match saver.get_tuple(&thread).await {
        Err(err @ CheckpointError::Invalid(_)) => assert!(err.to_string().contains("NUL"), "{err}"),
        other => panic!("a NUL in a thread id is Invalid, got {other:?}"),
    }
    assert!(matches!(saver.delete_thread("x\0").await, Err(CheckpointError::Invalid(_))));
}

#[tokio::test]
async fn namespace_labels_with_dots_are_refused_and_never_match() {
    let Some(store) = common::store(None).await else { return };
    bad_input::namespace_labels_with_dots(&store).await;
}

#[tokio::test]
async fn damaged_item_value_is_an_error_naming_the_key() {
    let Some(schema) = common::schema().await else { return };
    let store = PostgresStore::connect_with(&common::pg_url(), schema.options()).await.unwrap();
    let raw = Pool(
        sqlx::PgPool::connect_with(
            common::pg_url()
                .parse::<sqlx::postgres::PgConnectOptions>()
                .unwrap()
                .options([("search_path", schema.name.as_str())]),
        )
        .await
        .unwrap(),
    );
    bad_input::damaged_item_value(&store, &raw, "UPDATE store_items SET value = '{\"v\": ' WHERE key = $1")
        .await;
}
