//! Cases: checkpoints with an [`ExpectedHead`] (one run per thread): a save that would not extend the
//! head of its thread and namespace is refused with a conflict, atomically.

use std::sync::Arc;

use futures::future::join_all;
use serde_json::json;

use super::kit::{
    Ctx, Outcome, checkpoint, ensure, ensure_eq, fresh_thread, ids, metadata, version, versions,
};
use crate::checkpoint::{
    ChannelAppends, CheckpointConfig, CheckpointError, CheckpointErrorKind, Checkpointer, ExpectedHead,
    SaveOp,
};

/// A put of checkpoint `id` made from `parent` (its thread and namespace), expecting `head`.
fn put(parent: &CheckpointConfig, id: &str, n: u64, head: ExpectedHead) -> SaveOp {
    let all = versions(&[("n", &version(n))]);
    SaveOp::Put {
        config: Arc::new(parent.clone()),
        checkpoint: checkpoint(id, &[("n", json!(n))], &all),
        metadata: metadata(i64::try_from(n).unwrap_or(0), json!({})),
        new_versions: all,
        appends: ChannelAppends::new(),
        expected_head: head,
    }
}

fn head(id: &str) -> ExpectedHead {
    ExpectedHead::Id(id.to_owned())
}

/// `Ok` when `result` is a conflict naming `thread`.
fn ensure_conflict(result: Result<(), CheckpointError>, thread: &str, rule: &str) -> Outcome {
    match result {
        Err(e) if e.kind() == CheckpointErrorKind::Conflict && e.thread_id() == Some(thread) => Ok(()),
        Err(e) => Err(format!("{rule}: want a conflict naming thread '{thread}', got {e:?}")),
        Ok(()) => Err(format!("{rule}: want a conflict, the save was stored")),
    }
}

async fn ids_in(saver: &dyn Checkpointer, config: &CheckpointConfig) -> Result<Vec<String>, String> {
    saver.list_ids(config).await.ctx("list_ids")
}

/// A checkpoint is stored only when the head is the one expected (none, or an id); a stale or wrong
/// expectation is a conflict that stores nothing; `Any` stores unconditionally; a fork (a checkpoint made
/// from an older one, expecting the current head) becomes the head; writes to an older checkpoint are
/// fine; a deleted thread is empty again.
pub async fn put_checks_expected_head(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("head"));
    let t = thread.thread_id.as_str();
    let id = ids(6);
    let at = |i: usize| thread.at(id[i].clone());
    saver
        .put_batch(vec![put(&thread, &id[0], 1, ExpectedHead::Empty)])
        .await
        .ctx("first put expecting none")?;
    let again = saver.put_batch(vec![put(&thread, &id[1], 2, ExpectedHead::Empty)]).await;
    ensure_conflict(again, t, "a put expecting no checkpoint on a thread that has one")?;
    ensure_eq(ids_in(saver, &thread).await?, vec![id[0].clone()], "a refused put stores nothing")?;
    saver.put_batch(vec![put(&at(0), &id[1], 2, head(&id[0]))]).await.ctx("put expecting the head")?;
    let stale = saver.put_batch(vec![put(&at(0), &id[2], 3, head(&id[0]))]).await;
    ensure_conflict(stale, t, "a put expecting a head that moved")?;
    let unknown = saver.put_batch(vec![put(&at(1), &id[2], 3, head("no-such-checkpoint"))]).await;
    ensure_conflict(unknown, t, "a put expecting a checkpoint that is not the head")?;
    ensure_eq(
        ids_in(saver, &thread).await?,
        vec![id[1].clone(), id[0].clone()],
        "refused puts store nothing",
    )?;
    // A fork: made from the first checkpoint, expecting the current head.
    saver.put_batch(vec![put(&at(0), &id[2], 3, head(&id[1]))]).await.ctx("a fork expecting the head")?;
    let got = saver.get_tuple(&thread).await.ctx("get_tuple")?.map(|t| (t.checkpoint.id, t.parent_config));
    ensure_eq(got, Some((id[2].clone(), Some(at(0)))), "a fork becomes the head, its parent the older one")?;
    // Writes to a checkpoint that is not the head.
    saver.put_writes(&at(0), vec![("n".into(), json!(9))], "task", "").await.ctx("writes to an older one")?;
    saver.put_batch(vec![put(&at(2), &id[3], 4, ExpectedHead::Any)]).await.ctx("put expecting any head")?;
    saver.delete_thread(t).await.ctx("delete_thread")?;
    saver
        .put_batch(vec![put(&thread, &id[4], 1, ExpectedHead::Empty)])
        .await
        .ctx("put on a deleted thread")?;
    saver.delete_thread(t).await.ctx("delete_thread")
}

/// Heads are per namespace: a subgraph namespace's first checkpoint expects none while the root has
/// some, and a conflict in one namespace leaves the other alone.
pub async fn expected_head_per_namespace(saver: &dyn Checkpointer) -> Outcome {
    let root = CheckpointConfig::thread(fresh_thread("head-ns"));
    let child = CheckpointConfig { checkpoint_ns: "child:1".into(), ..root.clone() };
    let id = ids(4);
    saver.put_batch(vec![put(&root, &id[0], 1, ExpectedHead::Empty)]).await.ctx("root put")?;
    saver
        .put_batch(vec![put(&child, &id[1], 1, ExpectedHead::Empty)])
        .await
        .ctx("first put of a namespace")?;
    let wrong = saver.put_batch(vec![put(&child.at(id[1].clone()), &id[2], 2, head(&id[0]))]).await;
    ensure_conflict(wrong, &root.thread_id, "the root's head is not the namespace's")?;
    saver.put_batch(vec![put(&root.at(id[0].clone()), &id[3], 2, head(&id[0]))]).await.ctx("root again")?;
    ensure_eq(ids_in(saver, &child).await?, vec![id[1].clone()], "the namespace keeps its own chain")?;
    saver.delete_thread(&root.thread_id).await.ctx("delete_thread")
}

/// In a batch, each checkpoint expects the head left by the ops before it: a run's chained saves pass, a
/// batch with a stale expectation is a conflict and its checkpoint is not stored.
pub async fn batch_checks_expected_heads(saver: &dyn Checkpointer) -> Outcome {
    let a = CheckpointConfig::thread(fresh_thread("head-batch-a"));
    let b = CheckpointConfig::thread(fresh_thread("head-batch-b"));
    let id = ids(6);
    let ops = vec![
        put(&a, &id[0], 1, ExpectedHead::Empty),
        SaveOp::Writes {
            config: Arc::new(a.at(id[0].clone())),
            writes: vec![("n".into(), json!(5))],
            task_id: Arc::from("task"),
            task_path: Arc::from(""),
        },
        put(&b, &id[1], 1, ExpectedHead::Empty),
        put(&a.at(id[0].clone()), &id[2], 2, head(&id[0])),
        put(&a.at(id[2].clone()), &id[3], 3, head(&id[2])),
    ];
    saver.put_batch(ops).await.ctx("a batch of chained saves")?;
    ensure_eq(ids_in(saver, &a).await?, vec![id[3].clone(), id[2].clone(), id[0].clone()], "the chain")?;
    let stale = vec![
        put(&b.at(id[1].clone()), &id[4], 2, head(&id[1])),
        put(&a.at(id[2].clone()), &id[5], 4, head(&id[2])),
    ];
    ensure_conflict(saver.put_batch(stale).await, &a.thread_id, "a batch with a stale expectation")?;
    let a_ids = ids_in(saver, &a).await?;
    ensure(!a_ids.contains(&id[5]), || format!("the refused checkpoint is not stored: {a_ids:?}"))?;
    for t in [&a.thread_id, &b.thread_id] {
        saver.delete_thread(t).await.ctx("delete_thread")?;
    }
    Ok(())
}

/// The same put again (a retry after its reply was lost) is not a conflict: the head is that
/// checkpoint itself, and storing it again changes nothing.
pub async fn repeated_put_is_not_a_conflict(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("head-again"));
    let id = ids(2);
    for _ in 0..2 {
        saver.put_batch(vec![put(&thread, &id[0], 1, ExpectedHead::Empty)]).await.ctx("first put")?;
    }
    for _ in 0..2 {
        let again = put(&thread.at(id[0].clone()), &id[1], 2, head(&id[0]));
        saver.put_batch(vec![again]).await.ctx("second put")?;
    }
    ensure_eq(ids_in(saver, &thread).await?, vec![id[1].clone(), id[0].clone()], "stored once each")?;
    saver.delete_thread(&thread.thread_id).await.ctx("delete_thread")
}

/// Saves racing for one head: of 8 puts at once expecting the same head, exactly one is stored, the
/// others are conflicts, and the thread's history stays one chain.
pub async fn concurrent_puts_one_head_one_wins(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("head-race"));
    let id = ids(9);
    saver.put_batch(vec![put(&thread, &id[0], 1, ExpectedHead::Empty)]).await.ctx("first put")?;
    let parent = thread.at(id[0].clone());
    let racing = id[1..].iter().map(|i| saver.put_batch(vec![put(&parent, i, 2, head(&id[0]))]));
    let results = join_all(racing).await;
    let stored = results.iter().filter(|r| r.is_ok()).count();
    ensure_eq(stored, 1, "exactly one of the racing puts is stored")?;
    for r in results.into_iter().filter(Result::is_err) {
        ensure_conflict(r, &thread.thread_id, "a losing put")?;
    }
    ensure_eq(ids_in(saver, &thread).await?.len(), 2, "the history is one chain")?;
    saver.delete_thread(&thread.thread_id).await.ctx("delete_thread")
}
