//! Cases: pending writes (insert-if-absent, special upserts, order, ownership, errors).

use serde_json::{Value, json};

use super::kit::{Ctx, Outcome, ensure, ensure_eq, fresh_thread, must_get, put_chain};
use crate::checkpoint::{CheckpointConfig, CheckpointError, Checkpointer, special};

fn writes(pairs: &[(&str, Value)]) -> Vec<(String, Value)> {
    pairs.iter().map(|(c, v)| ((*c).to_owned(), v.clone())).collect()
}

fn summary(tuple: &crate::checkpoint::CheckpointTuple) -> Vec<(String, String, Value)> {
    tuple.pending_writes.iter().map(|w| (w.task_id.clone(), w.channel.clone(), w.value.clone())).collect()
}

fn row(task: &str, channel: &str, value: Value) -> (String, String, Value) {
    (task.to_owned(), channel.to_owned(), value)
}

/// A regular write is stored at its position in the batch and never replaced: saving the batch again
/// (a retried task) keeps the first values; other tasks' writes are separate.
pub async fn regular_writes_insert_if_absent(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("insert"));
    let cp = put_chain(saver, &thread, 1).await?.remove(0);
    let first = writes(&[("a", json!(1)), ("b", json!({"k": "v"}))]);
    saver.put_writes(&cp, first, "task-1", "").await.ctx("put_writes")?;
    saver.put_writes(&cp, writes(&[("a", json!(99))]), "task-1", "").await.ctx("put_writes")?;
    saver.put_writes(&cp, writes(&[("a", json!(2))]), "task-2", "").await.ctx("put_writes")?;
    let got = must_get(saver, &cp, "checkpoint with writes").await?;
    let want = vec![
        row("task-1", "a", json!(1)),
        row("task-1", "b", json!({"k": "v"})),
        row("task-2", "a", json!(2)),
    ];
    ensure_eq(summary(&got), want, "regular writes are inserted if absent, per task and index")
}

/// Special writes (error, interrupt, resume) sit at fixed indexes and replace earlier ones of the task.
pub async fn special_writes_replace(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("special"));
    let cp = put_chain(saver, &thread, 1).await?.remove(0);
    let batch =
        writes(&[(special::ERROR, json!("first failure")), (special::INTERRUPT, json!([{"value": 1}]))]);
    saver.put_writes(&cp, batch, "task", "").await.ctx("put_writes")?;
    let again = writes(&[(special::ERROR, json!("second failure")), (special::RESUME, json!(["yes"]))]);
    saver.put_writes(&cp, again, "task", "").await.ctx("put_writes")?;
    let got = must_get(saver, &cp, "checkpoint with special writes").await?;
    // Fixed indexes: resume -4, interrupt -3, error -1.
    let want = vec![
        row("task", special::RESUME, json!(["yes"])),
        row("task", special::INTERRUPT, json!([{"value": 1}])),
        row("task", special::ERROR, json!("second failure")),
    ];
    ensure_eq(summary(&got), want, "special writes are upserted at their fixed index")
}

/// Pending writes come back ordered by task path, then task id, then index (special writes first).
pub async fn pending_writes_ordered(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("order"));
    let cp = put_chain(saver, &thread, 1).await?.remove(0);
    let calls = [
        ("task-a", "~b", writes(&[("x", json!("a0")), ("y", json!("a1"))])),
        ("task-z", "~a", writes(&[("x", json!("z0"))])),
        ("task-c", "~a", writes(&[("x", json!("c0")), (special::ERROR, json!("c-err"))])),
        ("task-a", "~b", writes(&[(special::INTERRUPT, json!("a-int"))])),
    ];
    for (task, path, batch) in calls {
        saver.put_writes(&cp, batch, task, path).await.ctx("put_writes")?;
    }
    let got = must_get(saver, &cp, "checkpoint with writes of several tasks").await?;
    let want = vec![
        row("task-c", special::ERROR, json!("c-err")),
        row("task-c", "x", json!("c0")),
        row("task-z", "x", json!("z0")),
        row("task-a", special::INTERRUPT, json!("a-int")),
        row("task-a", "x", json!("a0")),
        row("task-a", "y", json!("a1")),
    ];
    ensure_eq(summary(&got), want, "pending writes are ordered by (task path, task id, index)")
}

/// Writes belong to the checkpoint they were saved against: the next checkpoint starts with none, and
/// the old one keeps its own.
pub async fn writes_belong_to_their_checkpoint(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("owner"));
    let saved = put_chain(saver, &thread, 2).await?;
    saver.put_writes(&saved[0], writes(&[("x", json!(1))]), "t", "").await.ctx("put_writes")?;
    let newer = must_get(saver, &saved[1], "newer checkpoint").await?;
    ensure_eq(newer.pending_writes.len(), 0, "a newer checkpoint does not see older writes")?;
    let older = must_get(saver, &saved[0], "older checkpoint").await?;
    ensure_eq(older.pending_writes.len(), 1, "a checkpoint keeps its writes after newer ones")
}

/// Writes against a config without a checkpoint id are rejected, naming the thread.
pub async fn put_writes_without_checkpoint_id_is_invalid(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("no-id"));
    match saver.put_writes(&thread, writes(&[("x", json!(1))]), "t", "").await {
        Err(err @ CheckpointError::Invalid(_)) => ensure(err.to_string().contains(&thread.thread_id), || {
            format!("the error names the thread: {err}")
        }),
        other => {
            Err(format!("put_writes without a checkpoint id is CheckpointError::Invalid, got {other:?}"))
        }
    }
}

/// Values of every JSON kind come back unchanged from writes.
pub async fn write_values_round_trip(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("kinds"));
    let cp = put_chain(saver, &thread, 1).await?.remove(0);
    let values = vec![
        json!(null),
        json!(true),
        json!(-12),
        json!(1.5),
        json!("text with \"quotes\" and \u{1F600}"),
        json!([1, [2, {"a": null}]]),
        json!({"nested": {"deep": [1, 2, 3]}, "empty": {}}),
    ];
    let batch: Vec<(String, Value)> =
        values.iter().enumerate().map(|(i, v)| (format!("c{i}"), v.clone())).collect();
    saver.put_writes(&cp, batch, "t", "").await.ctx("put_writes")?;
    let got = must_get(saver, &cp, "checkpoint with writes of every kind").await?;
    let got: Vec<Value> = got.pending_writes.into_iter().map(|w| w.value).collect();
    ensure_eq(got, values, "write values round-trip")
}
