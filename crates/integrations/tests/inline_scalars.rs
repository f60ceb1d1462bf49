#![allow(clippy::unwrap_used, missing_docs)]
//! The SQL savers keep a checkpoint's scalar channel values in its own row and store only the others as
//! blob rows. A graph's history reads back whole, and checkpoints stored before that (every value a
//! blob row, none in the checkpoint's row) still read back and a run goes on from them.

#![cfg(any(feature = "sqlite", feature = "postgres"))]

#[cfg(feature = "postgres")]
mod common;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use weft_graph::checkpoint::{CheckpointConfig, Checkpointer, ListOptions, is_inline_scalar};
use weft_graph::{CompileConfig, CompiledGraph, END, START, State, StateGraph};
use weft_runnable_core::RunnableConfig;

/// A counter (a scalar), its label (a scalar string, set once) and a log (a list).
#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Count {
    count: u64,
    until: u64,
    label: String,
    #[state(append)]
    log: Vec<String>,
}

fn counter(saver: Arc<dyn Checkpointer>) -> CompiledGraph<Count> {
    let mut graph = StateGraph::<Count>::new();
    graph.add_node("step", |s: Count| {
        Count::update().count(s.count + 1).log(vec![format!("step {}", s.count + 1)])
    });
    graph.add_edge(START, "step");
    graph.add_conditional_edges("step", |s: &Count| if s.count < s.until { "step" } else { END }, None);
    graph.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

fn thread() -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", "inline")
}

/// A checkpoint row as stored: its thread, namespace, id and body.
type Row = (String, String, String, String);

/// What the test needs of a saver's tables.
trait Tables {
    /// Every checkpoint row of the thread.
    async fn rows(&self) -> Vec<Row>;
    /// The blob rows' blobs.
    async fn blobs(&self) -> Vec<Option<Vec<u8>>>;
    /// Writes a value as a blob row (as builds before the scalars were kept inline did) and the
    /// checkpoint's body without it.
    async fn to_old_form(&self, row: &Row, channel: &str, version: &str, value: &Value, body: &str);
}

/// Runs to 5, checks the scalars live in the checkpoint rows, rewrites every checkpoint in the old form,
/// checks the history reads the same, and runs on to 8.
async fn old_and_new_rows_read_back(saver: Arc<dyn Checkpointer>, tables: &impl Tables) {
    let app = counter(Arc::clone(&saver));
    let out = app.invoke(Count::update().until(5).label(String::from("kept")), &thread()).await.unwrap();
    assert_eq!(out.value.count, 5);
    let history = || async {
        saver.list(Some(&CheckpointConfig::thread("inline")), ListOptions::default()).await.unwrap()
    };
    let before = history().await;
    assert!(before.len() >= 6, "{} checkpoints", before.len());
    assert_eq!(
        before[0].checkpoint.channel_values.get("label"),
        Some(&Value::from("kept")),
        "an unchanged scalar"
    );
    let rows = tables.rows().await;
    let mut inline = 0;
    for row in &rows {
        let body: Map<String, Value> = serde_json::from_str(&row.3).unwrap();
        let values = body["channel_values"].as_object().unwrap();
        assert!(values.values().all(is_inline_scalar), "only scalars in the row: {values:?}");
        inline += values.len();
    }
    assert!(inline >= 3 * rows.len(), "count, until and label in every row: {inline} in {} rows", rows.len());
    let blobs = tables.blobs().await;
    let scalar = |blob: &Option<Vec<u8>>| {
        let text = blob.as_deref().and_then(|b| b.strip_prefix(b"json:1:".as_slice()));
        text.and_then(|t| serde_json::from_slice::<Value>(t).ok()).is_some_and(|v| is_inline_scalar(&v))
    };
    assert!(!blobs.is_empty() && !blobs.iter().any(scalar), "the log's values as blob rows, no scalar");

    for row in &rows {
        let mut body: Map<String, Value> = serde_json::from_str(&row.3).unwrap();
        let values = std::mem::take(body["channel_values"].as_object_mut().unwrap());
        let old = Value::Object(body.clone()).to_string();
        for (channel, value) in &values {
            let version = body["channel_versions"][channel].as_str().unwrap();
            tables.to_old_form(row, channel, version, value, &old).await;
        }
    }
    assert!(tables.blobs().await.iter().any(scalar), "the scalars are blob rows now");
    assert_eq!(history().await, before, "checkpoints in the old form read the same");

    let out = app.invoke(Count::update().until(8), &thread()).await.unwrap();
    assert_eq!((out.value.count, out.value.label.as_str(), out.value.log.len()), (8, "kept", 8));
    let newest = saver.get_tuple(&CheckpointConfig::thread("inline")).await.unwrap().unwrap();
    let rows = tables.rows().await;
    let row = rows.iter().find(|r| r.2 == newest.checkpoint.id).unwrap();
    let body: Map<String, Value> = serde_json::from_str(&row.3).unwrap();
    assert_eq!(body["channel_values"]["label"], Value::from("kept"), "a new checkpoint holds its scalars");
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use weft_integrations::sqlite::{SqlitePool, SqliteSaver};

    use super::*;

    impl Tables for SqlitePool {
        async fn rows(&self) -> Vec<Row> {
            sqlx::query_as("SELECT thread_id, checkpoint_ns, checkpoint_id, checkpoint FROM checkpoints")
                .fetch_all(self)
                .await
                .unwrap()
        }

        async fn blobs(&self) -> Vec<Option<Vec<u8>>> {
            sqlx::query_scalar("SELECT blob FROM checkpoint_blobs").fetch_all(self).await.unwrap()
        }

        async fn to_old_form(&self, row: &Row, channel: &str, version: &str, value: &Value, body: &str) {
            sqlx::query(
                "INSERT OR IGNORE INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, blob) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .bind(&row.0)
            .bind(&row.1)
            .bind(channel)
            .bind(version)
            .bind(format!("json:1:{value}").into_bytes())
            .execute(self)
            .await
            .unwrap();
            sqlx::query("UPDATE checkpoints SET checkpoint = ?1 WHERE checkpoint_id = ?2")
                .bind(body)
                .bind(&row.2)
                .execute(self)
                .await
                .unwrap();
        }
    }

    #[tokio::test]
    async fn old_and_new_rows_read_back() {
        let dir = std::env::temp_dir().join(format!("weft-inline-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let saver = Arc::new(SqliteSaver::open(dir.join("weft.db")).await.unwrap());
        let pool = saver.pool().clone();
        super::old_and_new_rows_read_back(saver, &pool).await;
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use weft_integrations::postgres::PgPool;

    use super::*;

    struct Schema(PgPool, String);

    impl Tables for Schema {
        async fn rows(&self) -> Vec<Row> {
            let sql = format!(
                "SELECT thread_id, checkpoint_ns, checkpoint_id, checkpoint::text FROM \"{}\".checkpoints",
                self.1
            );
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).fetch_all(&self.0).await.unwrap()
        }

        async fn blobs(&self) -> Vec<Option<Vec<u8>>> {
            let sql = format!("SELECT blob FROM \"{}\".checkpoint_blobs", self.1);
            sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).fetch_all(&self.0).await.unwrap()
        }

        async fn to_old_form(&self, row: &Row, channel: &str, version: &str, value: &Value, body: &str) {
            let sql = format!(
                "INSERT INTO \"{}\".checkpoint_blobs (thread_id, checkpoint_ns, channel, version, blob) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                self.1
            );
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(&row.0)
                .bind(&row.1)
                .bind(channel)
                .bind(version)
                .bind(format!("json:1:{value}").into_bytes())
                .execute(&self.0)
                .await
                .unwrap();
            let sql = format!(
                "UPDATE \"{}\".checkpoints SET checkpoint = $1::jsonb WHERE checkpoint_id = $2",
                self.1
            );
            sqlx::query(sqlx::AssertSqlSafe(sql)).bind(body).bind(&row.2).execute(&self.0).await.unwrap();
        }
    }

    #[tokio::test]
    async fn old_and_new_rows_read_back() {
        let Some(saver) = common::saver().await else { return };
        let (saver, schema) = saver.into_parts();
        let tables = Schema(saver.pool().clone(), schema.name.clone());
        super::old_and_new_rows_read_back(saver, &tables).await;
    }
}
