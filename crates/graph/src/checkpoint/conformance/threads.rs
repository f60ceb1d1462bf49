//! Cases: whole-thread operations (`delete_thread`, `copy_thread`, `prune`, retention).

use std::time::Duration;

use serde_json::json;

use super::kit::{
    Ctx, Outcome, checkpoint, ensure, ensure_eq, fresh_thread, ids, ids_ending, ids_of, metadata, must_get,
    put_chain, version, versions,
};
use crate::checkpoint::{CheckpointConfig, CheckpointError, Checkpointer, ListOptions, RetentionPolicy};

fn child_of(thread: &CheckpointConfig) -> CheckpointConfig {
    CheckpointConfig {
        checkpoint_ns: "child:1".into(),
        checkpoint_id: None,
        thread_id: thread.thread_id.clone(),
    }
}

async fn count(saver: &dyn Checkpointer, config: &CheckpointConfig) -> Result<usize, String> {
    Ok(saver.list(Some(config), ListOptions::default()).await.ctx("list")?.len())
}

/// `delete_thread` removes every namespace, checkpoint and write of the thread and nothing of others;
/// deleting an unknown thread is not an error.
pub async fn delete_thread_removes_everything(saver: &dyn Checkpointer) -> Outcome {
    let (doomed, kept) =
        (CheckpointConfig::thread(fresh_thread("del")), CheckpointConfig::thread(fresh_thread("keep")));
    let saved = put_chain(saver, &doomed, 2).await?;
    put_chain(saver, &child_of(&doomed), 2).await?;
    saver.put_writes(&saved[1], vec![("x".into(), json!(1))], "t", "").await.ctx("put_writes")?;
    put_chain(saver, &kept, 2).await?;
    saver.delete_thread(&doomed.thread_id).await.ctx("delete_thread")?;
    ensure(saver.get_tuple(&doomed).await.ctx("get_tuple")?.is_none(), || {
        "a deleted thread has no latest".into()
    })?;
    ensure(saver.get_tuple(&saved[0]).await.ctx("get_tuple")?.is_none(), || {
        "deleted checkpoints are gone".into()
    })?;
    ensure_eq(count(saver, &doomed).await?, 0, "a deleted thread lists nothing")?;
    ensure_eq(count(saver, &child_of(&doomed)).await?, 0, "delete_thread removes every namespace")?;
    ensure_eq(count(saver, &kept).await?, 2, "delete_thread leaves other threads alone")?;
    saver.delete_thread(&fresh_thread("never")).await.ctx("delete_thread of an unknown thread")
}

/// `copy_thread` copies every checkpoint (same ids, order, values, metadata, parents) and write, in
/// every namespace; the source is unchanged.
pub async fn copy_thread_copies_everything(saver: &dyn Checkpointer) -> Outcome {
    let (src, dst) =
        (CheckpointConfig::thread(fresh_thread("src")), CheckpointConfig::thread(fresh_thread("dst")));
    let saved = put_chain(saver, &src, 3).await?;
    put_chain(saver, &child_of(&src), 1).await?;
    saver.put_writes(&saved[2], vec![("x".into(), json!("w"))], "task-b", "~b").await.ctx("put_writes")?;
    let batch = vec![("y".into(), json!("v")), ("__error__".into(), json!("boom"))];
    saver.put_writes(&saved[2], batch, "task-a", "~c").await.ctx("put_writes")?;
    let before = saver.list(Some(&src), ListOptions::default()).await.ctx("list")?;
    saver.copy_thread(&src.thread_id, &dst.thread_id).await.ctx("copy_thread")?;
    let copied = saver.list(Some(&dst), ListOptions::default()).await.ctx("list")?;
    ensure_eq(ids_of(&copied), ids_of(&before), "copied checkpoints keep their ids and order")?;
    for (s, d) in before.iter().zip(&copied) {
        ensure_eq(&d.checkpoint, &s.checkpoint, "copied checkpoints keep their values")?;
        ensure_eq(&d.metadata, &s.metadata, "copied checkpoints keep their metadata")?;
        ensure_eq(&d.pending_writes, &s.pending_writes, "copied writes keep their order and values")?;
        ensure_eq(&d.config.thread_id, &dst.thread_id, "copies belong to the target thread")?;
        let parent = d.parent_config.as_ref().map(|p| (&p.thread_id, &p.checkpoint_id));
        let want = s.parent_config.as_ref().map(|p| (&dst.thread_id, &p.checkpoint_id));
        ensure_eq(parent, want, "copied parents point into the target thread")?;
    }
    ensure_eq(copied[0].pending_writes.len(), 3, "copy_thread copies pending writes")?;
    ensure_eq(count(saver, &child_of(&dst)).await?, 1, "copy_thread copies every namespace")?;
    let after = saver.list(Some(&src), ListOptions::default()).await.ctx("list")?;
    ensure_eq(after, before, "copy_thread leaves the source unchanged")
}

/// After a copy, new checkpoints and writes on one thread do not show on the other.
pub async fn copy_thread_keeps_threads_independent(saver: &dyn Checkpointer) -> Outcome {
    let (src, dst) =
        (CheckpointConfig::thread(fresh_thread("src")), CheckpointConfig::thread(fresh_thread("dst")));
    let saved = put_chain(saver, &src, 1).await?;
    saver.copy_thread(&src.thread_id, &dst.thread_id).await.ctx("copy_thread")?;
    let copy_of_first = dst.at(saved[0].checkpoint_id.clone().unwrap_or_default());
    let id = ids(1).remove(0);
    let v = versions(&[("step", &version(9))]);
    let cp = checkpoint(&id, &[("step", json!("dst only"))], &v);
    saver.put(&copy_of_first, cp, metadata(9, json!({})), v).await.ctx("put")?;
    saver.put_writes(&copy_of_first, vec![("x".into(), json!(1))], "t", "").await.ctx("put_writes")?;
    ensure_eq(count(saver, &src).await?, 1, "checkpoints put on the copy do not reach the source")?;
    let first = must_get(saver, &saved[0], "source checkpoint").await?;
    ensure_eq(first.pending_writes.len(), 0, "writes put on the copy do not reach the source")?;
    let latest = must_get(saver, &dst, "latest of the copy").await?;
    ensure_eq(
        latest.checkpoint.channel_values.get("step"),
        Some(&json!("dst only")),
        "the copy grows on its own",
    )
}

/// Copying a thread without checkpoints, or onto a thread that has some, is `Invalid` naming it.
pub async fn copy_thread_rejects_bad_threads(saver: &dyn Checkpointer) -> Outcome {
    let (missing, dst) = (fresh_thread("missing"), fresh_thread("dst"));
    match saver.copy_thread(&missing, &dst).await {
        Err(err @ CheckpointError::Invalid(_)) => {
            ensure(err.to_string().contains(&missing), || {
                format!("the error names the source thread: {err}")
            })?;
        }
        other => return Err(format!("copying a thread without checkpoints is Invalid, got {other:?}")),
    }
    ensure_eq(
        count(saver, &CheckpointConfig::thread(dst.as_str())).await?,
        0,
        "a failed copy writes nothing",
    )?;
    let (src, busy) =
        (CheckpointConfig::thread(fresh_thread("src")), CheckpointConfig::thread(fresh_thread("busy")));
    put_chain(saver, &src, 1).await?;
    put_chain(saver, &busy, 1).await?;
    match saver.copy_thread(&src.thread_id, &busy.thread_id).await {
        Err(err @ CheckpointError::Invalid(_)) => ensure(err.to_string().contains(&busy.thread_id), || {
            format!("the error names the target thread: {err}")
        }),
        other => Err(format!("copying onto a thread with checkpoints is Invalid, got {other:?}")),
    }
}

/// `prune` keeps the newest n checkpoints of each namespace with their writes, drops the rest, and
/// leaves other threads alone; pruning an unknown thread is not an error.
pub async fn prune_keeps_latest_per_namespace(saver: &dyn Checkpointer) -> Outcome {
    let (thread, other) =
        (CheckpointConfig::thread(fresh_thread("prune")), CheckpointConfig::thread(fresh_thread("other")));
    let root = put_chain(saver, &thread, 4).await?;
    let child = put_chain(saver, &child_of(&thread), 3).await?;
    put_chain(saver, &other, 3).await?;
    for config in [&root[3], &root[0]] {
        saver.put_writes(config, vec![("x".into(), json!("w"))], "t", "").await.ctx("put_writes")?;
    }
    saver.prune(&thread.thread_id, 2).await.ctx("prune")?;
    let ids_root: Vec<_> = root.iter().rev().take(2).filter_map(|c| c.checkpoint_id.clone()).collect();
    ensure_eq(saver.list_ids(&thread).await.ctx("list_ids")?, ids_root, "prune keeps the newest n")?;
    let ids_child: Vec<_> = child.iter().rev().take(2).filter_map(|c| c.checkpoint_id.clone()).collect();
    ensure_eq(
        saver.list_ids(&child_of(&thread)).await.ctx("list_ids")?,
        ids_child,
        "prune works per namespace",
    )?;
    let latest = must_get(saver, &root[3], "kept checkpoint").await?;
    ensure_eq(latest.pending_writes.len(), 1, "prune keeps the writes of kept checkpoints")?;
    ensure(saver.get_tuple(&root[0]).await.ctx("get_tuple")?.is_none(), || {
        "pruned checkpoints are gone".into()
    })?;
    ensure_eq(count(saver, &other).await?, 3, "prune leaves other threads alone")?;
    saver.prune(&fresh_thread("never"), 1).await.ctx("prune of an unknown thread")?;
    saver.prune(&thread.thread_id, 0).await.ctx("prune to zero")?;
    ensure_eq(count(saver, &thread).await?, 0, "prune to 0 drops every checkpoint")?;
    ensure_eq(count(saver, &child_of(&thread)).await?, 0, "prune to 0 drops every namespace")
}

/// Values stored by pruned checkpoints stay while a kept checkpoint references their version.
pub async fn prune_keeps_values_still_referenced(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("prune-values"));
    let all = ids(3);
    let (v1, v2, v3) = (version(1), version(2), version(3));
    let steps = [
        // `a`, set once and listed by every checkpoint, is a list: a value stored per version, not one a
        // saver may keep in the checkpoint's record.
        (&all[0], vec![("a", json!(["a1"])), ("b", json!("b1"))], versions(&[("a", &v1), ("b", &v1)])),
        (&all[1], vec![("b", json!("b2"))], versions(&[("b", &v2)])),
        (&all[2], vec![("b", json!("b3"))], versions(&[("b", &v3)])),
    ];
    let mut parent = thread.clone();
    let mut current = versions(&[]);
    for (id, values, new) in steps {
        current.extend(new.clone());
        parent = saver
            .put(&parent, checkpoint(id, &values, &current), metadata(0, json!({})), new)
            .await
            .ctx("put")?;
    }
    saver.prune(&thread.thread_id, 1).await.ctx("prune")?;
    let kept = must_get(saver, &thread, "the kept checkpoint").await?;
    ensure_eq(
        json!(kept.checkpoint.channel_values),
        json!({"a": ["a1"], "b": "b3"}),
        "prune keeps referenced values",
    )
}

/// A list saved as a chain of appends reads back the same after `prune` drops the checkpoints its chain
/// ran through (a kept checkpoint's value at its own version, whatever the saver stores), and appends
/// after the prune go on from it.
pub async fn prune_keeps_appended_values_whole(saver: &dyn Checkpointer) -> Outcome {
    use crate::checkpoint::{AppendDelta, ChannelAppends};
    let thread = CheckpointConfig::thread(fresh_thread("prune-appends"));
    let all = ids(11);
    let append = |base: u64, item: u64| {
        ChannelAppends::from([(
            "m".into(),
            AppendDelta { base_version: version(base), items: vec![json!(item)] },
        )])
    };
    let mut parent = thread.clone();
    for (v, id) in (1..).zip(&all[..10]) {
        let at = versions(&[("m", &version(v))]);
        let (values, appends) = match v {
            1 => (vec![("m", json!([1]))], ChannelAppends::new()),
            _ => (Vec::new(), append(v - 1, v)),
        };
        let cp = checkpoint(id, &values, &at);
        let meta = metadata(i64::try_from(v).unwrap_or(0), json!({}));
        parent =
            saver.put_with_appends(&parent, cp, meta, at.clone(), appends).await.ctx("put_with_appends")?;
    }
    let before = saver.list(Some(&thread), ListOptions::default()).await.ctx("list")?;
    saver.prune(&thread.thread_id, 2).await.ctx("prune")?;
    let after = saver.list(Some(&thread), ListOptions::default()).await.ctx("list")?;
    ensure_eq(after, before[..2].to_vec(), "prune leaves the kept checkpoints as they were")?;
    let at = versions(&[("m", &version(11))]);
    let cp = checkpoint(&all[10], &[], &at);
    parent = saver
        .put_with_appends(&parent, cp, metadata(11, json!({})), at.clone(), append(10, 11))
        .await
        .ctx("put_with_appends after prune")?;
    let list: Vec<u64> = (1..=11).collect();
    let got = must_get(saver, &parent, "the checkpoint appended after the prune").await?;
    ensure_eq(got.checkpoint.channel_values.get("m"), Some(&json!(list)), "an append on a kept value")?;
    saver.prune(&thread.thread_id, 1).await.ctx("prune again")?;
    let got = must_get(saver, &thread, "the one checkpoint kept").await?;
    ensure_eq(got.checkpoint.channel_values.get("m"), Some(&json!(list)), "the list after a second prune")
}

/// `RetentionPolicy::apply` prunes through the saver: by count, and by age read from UUID v7 ids.
pub async fn retention_policy_prunes_old_checkpoints(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("retention"));
    let mut parent = thread.clone();
    let old = ids_ending(3, Duration::from_secs(7200));
    let young = ids(3);
    for id in old.iter().chain(&young) {
        let cp = checkpoint(id, &[], &versions(&[]));
        parent = saver.put(&parent, cp, metadata(0, json!({})), versions(&[])).await.ctx("put")?;
    }
    RetentionPolicy::max_age(Duration::from_secs(3600)).apply(saver, &thread.thread_id).await.ctx("apply")?;
    let newest: Vec<String> = young.iter().rev().cloned().collect();
    ensure_eq(
        saver.list_ids(&thread).await.ctx("list_ids")?,
        newest.clone(),
        "max_age drops old checkpoints",
    )?;
    RetentionPolicy::keep_last(2).apply(saver, &thread.thread_id).await.ctx("apply")?;
    ensure_eq(saver.list_ids(&thread).await.ctx("list_ids")?, newest[..2].to_vec(), "keep_last keeps n")
}
