//! Cases: awkward input (very long ids, odd characters) and many tasks sharing one saver.

use futures::future::try_join_all;
use serde_json::json;

use super::kit::{
    Ctx, Outcome, checkpoint, ensure, ensure_eq, fresh_thread, ids, ids_of, metadata, must_get, put_chain,
    version, versions,
};
use crate::checkpoint::{CheckpointConfig, Checkpointer, ListOptions};

/// Odd characters for ids and names: quotes, escapes, SQL and glob wildcards, separators, whitespace,
/// non-ASCII.
const ODD: &str = "it's \"odd\" \\ % _ * ? [x] {y} : | / . , ; = + # & ~ \t\n é ü 中文 🦀";

/// Every operation on a thread's data (put, get, list, writes, list_ids, copy, prune, delete).
async fn round_trip(saver: &dyn Checkpointer, thread: CheckpointConfig, channel: &str) -> Outcome {
    let id = ids(1).remove(0);
    let v = versions(&[(channel, &version(1))]);
    let cp = checkpoint(&id, &[(channel, json!(ODD))], &v);
    let meta = metadata(0, json!({"note": ODD}));
    let saved = saver.put(&thread, cp.clone(), meta.clone(), v).await.ctx("put")?;
    saver.put_writes(&saved, vec![(channel.to_owned(), json!(ODD))], ODD, ODD).await.ctx("put_writes")?;
    let got = must_get(saver, &thread, "checkpoint of an awkward thread").await?;
    ensure_eq(&got.config, &saved, "an awkward address is found again")?;
    ensure_eq(&got.checkpoint, &cp, "values under awkward names come back")?;
    ensure_eq(&got.metadata, &meta, "metadata with awkward text comes back")?;
    let write = got.pending_writes.first().map(|w| (w.task_id.as_str(), w.channel.as_str()));
    ensure_eq(write, Some((ODD, channel)), "writes under awkward names come back")?;
    let listed = saver.list(Some(&thread), ListOptions::default()).await.ctx("list")?;
    ensure_eq(ids_of(&listed), vec![id.clone()], "an awkward thread lists its checkpoint")?;
    ensure_eq(saver.list_ids(&thread).await.ctx("list_ids")?, vec![id], "list_ids of an awkward thread")?;
    let copy = format!("{}-copy", thread.thread_id);
    saver.copy_thread(&thread.thread_id, &copy).await.ctx("copy_thread")?;
    let copied = CheckpointConfig { thread_id: copy.clone(), ..thread.clone() };
    ensure(saver.get_tuple(&copied).await.ctx("get_tuple")?.is_some(), || "an awkward thread copies".into())?;
    saver.prune(&thread.thread_id, 1).await.ctx("prune")?;
    ensure(saver.get_tuple(&thread).await.ctx("get_tuple")?.is_some(), || "pruning keeps the latest".into())?;
    for t in [&thread.thread_id, &copy] {
        saver.delete_thread(t).await.ctx("delete_thread")?;
    }
    ensure(saver.get_tuple(&thread).await.ctx("get_tuple")?.is_none(), || "an awkward thread deletes".into())
}

/// A thread id of 10,000 characters is stored and found again.
pub async fn long_thread_id(saver: &dyn Checkpointer) -> Outcome {
    let long = format!("{}{}", fresh_thread("long"), "x".repeat(10_000));
    let long: String = long.chars().take(10_000).collect();
    round_trip(saver, CheckpointConfig::thread(long.as_str()), "channel").await
}

/// Thread ids, namespaces, channels and task ids with odd characters are stored and found again, and a
/// thread whose id is another's plus a wildcard character sees only its own data.
pub async fn odd_characters_in_ids(saver: &dyn Checkpointer) -> Outcome {
    let base = fresh_thread("odd");
    let thread = CheckpointConfig {
        thread_id: format!("{base} {ODD}"),
        checkpoint_ns: format!("node:{ODD}|inner:1"),
        checkpoint_id: None,
    };
    round_trip(saver, thread, &format!("chan {ODD}")).await?;
    let plain = CheckpointConfig::thread(base.as_str());
    let wild = CheckpointConfig::thread(format!("{base}%"));
    put_chain(saver, &plain, 1).await?;
    put_chain(saver, &wild, 2).await?;
    let listed = saver.list(Some(&plain), ListOptions::default()).await.ctx("list")?;
    ensure_eq(listed.len(), 1, "a thread id is matched exactly, never as a pattern")?;
    saver.delete_thread(&plain.thread_id).await.ctx("delete_thread")?;
    let left = saver.list(Some(&wild), ListOptions::default()).await.ctx("list")?;
    ensure_eq(left.len(), 2, "deleting a thread leaves threads whose id it prefixes")
}

/// Many tasks writing to different threads at once through one saver each see only their own data.
pub async fn concurrent_threads_do_not_interfere(saver: &dyn Checkpointer) -> Outcome {
    let threads: Vec<CheckpointConfig> =
        (0..24).map(|i| CheckpointConfig::thread(fresh_thread(&format!("par{i}")))).collect();
    let runs = threads.iter().enumerate().map(|(i, thread)| async move {
        let saved = put_chain(saver, thread, 3).await?;
        for config in &saved {
            saver.put_writes(config, vec![("who".into(), json!(i))], "t", "").await.ctx("put_writes")?;
        }
        Ok::<_, String>(saved)
    });
    let all = try_join_all(runs).await?;
    for (i, (thread, saved)) in threads.iter().zip(&all).enumerate() {
        let listed = saver.list(Some(thread), ListOptions::default()).await.ctx("list")?;
        let want: Vec<String> = saved.iter().rev().filter_map(|c| c.checkpoint_id.clone()).collect();
        ensure_eq(ids_of(&listed), want, "each thread keeps exactly its own checkpoints")?;
        for tuple in &listed {
            let whose: Vec<_> = tuple.pending_writes.iter().map(|w| w.value.clone()).collect();
            ensure_eq(whose, vec![json!(i)], "each checkpoint keeps exactly its own writes")?;
        }
    }
    Ok(())
}
