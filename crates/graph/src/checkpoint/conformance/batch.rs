//! Cases: `put_batch` (a run's queued saves handed over at once).

use std::sync::Arc;

use serde_json::{Value, json};

use super::kit::{Ctx, Outcome, checkpoint, ensure_eq, fresh_thread, ids, metadata, must_get, version};
use crate::checkpoint::{
    AppendDelta, ChannelAppends, ChannelName, ChannelVersion, CheckpointConfig, CheckpointError,
    Checkpointer, ExpectedHead, ListOptions, SaveOp, special,
};

fn put(
    parent: &CheckpointConfig,
    id: &str,
    values: &[(&str, Value)],
    all: &[(&str, u64)],
    new: &[&str],
) -> SaveOp {
    let names: Vec<(ChannelName, ChannelVersion)> =
        all.iter().map(|(c, v)| (ChannelName::from(*c), version(*v))).collect();
    let all_versions = names.iter().cloned().collect();
    let new_versions = names.iter().filter(|(c, _)| new.contains(&&**c)).cloned().collect();
    let step = i64::try_from(all.len()).unwrap_or(0);
    SaveOp::Put {
        config: Arc::new(parent.clone()),
        checkpoint: checkpoint(id, values, &all_versions),
        metadata: metadata(step, json!({"batch": true})),
        new_versions,
        appends: ChannelAppends::new(),
        expected_head: ExpectedHead::Any,
    }
}

fn writes(at: &CheckpointConfig, task: &str, pairs: &[(&str, Value)]) -> SaveOp {
    SaveOp::Writes {
        config: Arc::new(at.clone()),
        writes: pairs.iter().map(|(c, v)| (ChannelName::from(*c), v.clone())).collect(),
        task_id: Arc::from(task),
        task_path: Arc::from(""),
    }
}

/// A batch of chained checkpoints, a growing list, writes (repeated regular and special ones) and a
/// second thread, then a batch with appends, read back exactly as the same saves made one by one would.
pub async fn batch_matches_one_by_one(saver: &dyn Checkpointer) -> Outcome {
    let a = CheckpointConfig::thread(fresh_thread("batch-a"));
    let b = CheckpointConfig::thread(fresh_thread("batch-b"));
    let ids = ids(5);
    let at = |id: &String| a.at(id.clone());
    let mut third = put(&at(&ids[1]), &ids[2], &[("n", json!(3))], &[("n", 3), ("m", 3)], &["n", "m"]);
    if let SaveOp::Put { appends, .. } = &mut third {
        appends.insert("m".into(), AppendDelta { base_version: version(2), items: vec![json!({"k": 3})] });
    }
    let ops = vec![
        put(&a, &ids[0], &[("n", json!(1)), ("m", json!(["x"]))], &[("n", 1), ("m", 1)], &["n", "m"]),
        writes(&at(&ids[0]), "t1", &[("n", json!(2)), (special::ERROR, json!("first"))]),
        put(&b, &ids[3], &[("n", json!("other"))], &[("n", 1)], &["n"]),
        put(
            &at(&ids[0]),
            &ids[1],
            &[("n", json!(2)), ("m", json!(["x", "y"]))],
            &[("n", 2), ("m", 2)],
            &["n", "m"],
        ),
        writes(&at(&ids[1]), "t2", &[("n", json!(3))]),
        writes(&at(&ids[1]), "t2", &[("n", json!(99))]),
        writes(&at(&ids[1]), "t2", &[(special::ERROR, json!("one")), (special::INTERRUPT, json!([1]))]),
        writes(&at(&ids[1]), "t2", &[(special::ERROR, json!("two"))]),
        writes(&b.at(ids[3].clone()), "tb", &[("n", json!("b"))]),
    ];
    saver.put_batch(ops).await.ctx("put_batch")?;
    // Appends on a list the batch before stored.
    let on_third = writes(&at(&ids[2]), "t3", &[("n", json!(4))]);
    saver.put_batch(vec![third, on_third]).await.ctx("put_batch with appends")?;

    let first = must_get(saver, &at(&ids[0]), "first checkpoint of a batch").await?;
    ensure_eq(first.checkpoint.channel_values.get("m"), Some(&json!(["x"])), "first list")?;
    let w: Vec<(String, Value)> =
        first.pending_writes.iter().map(|w| (w.channel.clone(), w.value.clone())).collect();
    ensure_eq(w, vec![(special::ERROR.into(), json!("first")), ("n".into(), json!(2))], "first writes")?;
    let second = must_get(saver, &at(&ids[1]), "second checkpoint of a batch").await?;
    ensure_eq(second.parent_config.as_ref(), Some(&at(&ids[0])), "second checkpoint's parent")?;
    ensure_eq(second.checkpoint.channel_values.get("m"), Some(&json!(["x", "y"])), "second list")?;
    let w: Vec<(String, Value)> =
        second.pending_writes.iter().map(|w| (w.channel.clone(), w.value.clone())).collect();
    let want = vec![
        (special::INTERRUPT.to_owned(), json!([1])),
        (special::ERROR.to_owned(), json!("two")),
        ("n".to_owned(), json!(3)),
    ];
    ensure_eq(w, want, "a regular write stays first, a special one is replaced by the last")?;
    let latest = must_get(saver, &a, "latest checkpoint after a batch").await?;
    ensure_eq(latest.checkpoint.id.clone(), ids[2].clone(), "the batch's last checkpoint is the latest")?;
    ensure_eq(
        latest.checkpoint.channel_values.get("m"),
        Some(&json!(["x", "y", {"k": 3}])),
        "appended list",
    )?;
    ensure_eq(latest.checkpoint.channel_values.get("n"), Some(&json!(3)), "scalar")?;
    ensure_eq(latest.metadata.extra.get("batch"), Some(&json!(true)), "metadata")?;
    ensure_eq(latest.pending_writes.len(), 1, "writes of the appended checkpoint")?;
    let listed = saver.list(Some(&a), ListOptions::default()).await.ctx("list")?;
    ensure_eq(listed.len(), 3, "every checkpoint of the batch is listed")?;
    let other = must_get(saver, &b, "other thread of the batch").await?;
    ensure_eq(other.checkpoint.channel_values.get("n"), Some(&json!("other")), "other thread's value")?;
    ensure_eq(other.pending_writes.len(), 1, "other thread's writes")?;
    for t in [&a, &b] {
        saver.delete_thread(&t.thread_id).await.ctx("delete_thread")?;
    }
    Ok(())
}

/// A batch holding an invalid op (writes that name no checkpoint) is `Invalid`; the ops after it are
/// not stored.
pub async fn batch_with_invalid_op_fails(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("batch-bad"));
    let ids = ids(2);
    let ops = vec![
        put(&thread, &ids[0], &[("n", json!(1))], &[("n", 1)], &["n"]),
        writes(&thread, "t", &[("n", json!(2))]),
        put(&thread.at(ids[0].clone()), &ids[1], &[("n", json!(2))], &[("n", 2)], &["n"]),
    ];
    match saver.put_batch(ops).await {
        Err(CheckpointError::Invalid(_)) => {}
        other => return Err(format!("writes without a checkpoint id in a batch are Invalid, got {other:?}")),
    }
    let got = saver.get_tuple(&thread.at(ids[1].clone())).await.ctx("get_tuple")?;
    ensure_eq(got.is_none(), true, "the op after the invalid one is not stored")?;
    saver.delete_thread(&thread.thread_id).await.ctx("delete_thread")
}
