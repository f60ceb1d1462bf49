//! Cases: `list` (order, filter, before, limit, all threads), `list_ids`, namespaces and threads apart.

use serde_json::{Map, Value, json};

use super::kit::{
    Ctx, Outcome, checkpoint, ensure_eq, fresh_thread, ids, ids_of, metadata, must_get, put_chain, version,
    versions,
};
use crate::checkpoint::{CheckpointConfig, CheckpointSource, Checkpointer, ListOptions};

fn filter(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn newest_first(saved: &[CheckpointConfig]) -> Vec<String> {
    saved.iter().rev().filter_map(|c| c.checkpoint_id.clone()).collect()
}

/// `list` of a thread returns all its checkpoints, newest first, each whole.
pub async fn list_newest_first(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("list"));
    let saved = put_chain(saver, &thread, 4).await?;
    let listed = saver.list(Some(&thread), ListOptions::default()).await.ctx("list")?;
    ensure_eq(ids_of(&listed), newest_first(&saved), "list returns every checkpoint newest first")?;
    for (tuple, i) in listed.iter().zip((0..4).rev()) {
        ensure_eq(tuple.checkpoint.channel_values.get("step"), Some(&json!(i)), "list returns values")?;
        ensure_eq(tuple.metadata.step, i, "list returns metadata")?;
    }
    ensure_eq(listed[0].parent_config.as_ref(), Some(&saved[2]), "list returns parent configs")
}

/// `filter` keeps checkpoints whose metadata has every given top-level pair (source, step, caller keys).
pub async fn list_filters_on_metadata(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("filter"));
    let all = ids(3);
    let extras =
        [json!({"user": "ann", "n": 1}), json!({"user": "bob", "n": 2}), json!({"user": "ann", "n": 3})];
    let mut parent = thread.clone();
    for (i, (id, extra)) in all.iter().zip(extras).enumerate() {
        let mut meta = metadata(i64::try_from(i).unwrap_or(0), extra);
        if i == 0 {
            meta.source = CheckpointSource::Input;
        }
        let cp = checkpoint(id, &[], &versions(&[]));
        parent = saver.put(&parent, cp, meta, versions(&[])).await.ctx("put")?;
    }
    let list =
        |f: Value| saver.list(Some(&thread), ListOptions { filter: filter(f), ..ListOptions::default() });
    let by_user = list(json!({"user": "ann"})).await.ctx("list")?;
    ensure_eq(ids_of(&by_user), vec![all[2].clone(), all[0].clone()], "filter on a caller key")?;
    let by_two = list(json!({"user": "ann", "n": 3})).await.ctx("list")?;
    ensure_eq(ids_of(&by_two), vec![all[2].clone()], "filter with two keys keeps checkpoints matching both")?;
    let by_source = list(json!({"source": "input"})).await.ctx("list")?;
    ensure_eq(ids_of(&by_source), vec![all[0].clone()], "filter on source")?;
    let by_step = list(json!({"step": 1})).await.ctx("list")?;
    ensure_eq(ids_of(&by_step), vec![all[1].clone()], "filter on step")?;
    let none = list(json!({"user": "zed"})).await.ctx("list")?;
    ensure_eq(none.len(), 0, "filter with an unmatched value returns nothing")?;
    let absent = list(json!({"missing_key": "x"})).await.ctx("list")?;
    ensure_eq(absent.len(), 0, "filter on a key no metadata has returns nothing")
}

/// `before` keeps ids below the given one; `limit` caps the count after filtering.
pub async fn list_before_and_limit(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("before"));
    let saved = put_chain(saver, &thread, 5).await?;
    let all = newest_first(&saved);
    let opts = |before: Option<&String>, limit: Option<usize>| ListOptions {
        before: before.cloned(),
        limit,
        ..ListOptions::default()
    };
    let before = saver.list(Some(&thread), opts(Some(&all[1]), None)).await.ctx("list")?;
    ensure_eq(ids_of(&before), all[2..].to_vec(), "before keeps strictly older checkpoints")?;
    let limited = saver.list(Some(&thread), opts(None, Some(2))).await.ctx("list")?;
    ensure_eq(ids_of(&limited), all[..2].to_vec(), "limit keeps the newest n")?;
    let both = saver.list(Some(&thread), opts(Some(&all[0]), Some(2))).await.ctx("list")?;
    ensure_eq(ids_of(&both), all[1..3].to_vec(), "before then limit")?;
    let zero = saver.list(Some(&thread), opts(None, Some(0))).await.ctx("list")?;
    ensure_eq(zero.len(), 0, "limit 0 returns nothing")?;
    let filtered =
        ListOptions { filter: filter(json!({"step": 1})), limit: Some(1), ..ListOptions::default() };
    let filtered = saver.list(Some(&thread), filtered).await.ctx("list")?;
    ensure_eq(ids_of(&filtered), vec![all[3].clone()], "limit applies after the filter")
}

/// A config with a checkpoint id lists that checkpoint only.
pub async fn list_with_checkpoint_id(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("list-id"));
    let saved = put_chain(saver, &thread, 3).await?;
    let listed = saver.list(Some(&saved[1]), ListOptions::default()).await.ctx("list")?;
    ensure_eq(ids_of(&listed), newest_first(&saved[1..2]), "list with a checkpoint id returns only it")
}

/// `list(None)` covers every thread and namespace, newest first across them.
pub async fn list_all_threads(saver: &dyn Checkpointer) -> Outcome {
    let (a, b) = (fresh_thread("all-a"), fresh_thread("all-b"));
    let all = ids(3);
    let child = CheckpointConfig { checkpoint_ns: "child:1".into(), ..CheckpointConfig::thread(a.as_str()) };
    let targets = [CheckpointConfig::thread(a.as_str()), CheckpointConfig::thread(b.as_str()), child];
    // A marker of this run keeps other cases' checkpoints (maybe half-written) out of the listing.
    let marker = json!({"conformance_run": fresh_thread("marker")});
    for (config, id) in targets.iter().zip(&all) {
        let cp = checkpoint(id, &[], &versions(&[]));
        saver.put(config, cp, metadata(0, marker.clone()), versions(&[])).await.ctx("put")?;
    }
    let ours_only = || ListOptions { filter: filter(marker.clone()), ..ListOptions::default() };
    let listed = saver.list(None, ours_only()).await.ctx("list")?;
    let ours: Vec<(String, String, String)> = listed
        .iter()
        .map(|t| (t.config.thread_id.clone(), t.config.checkpoint_ns.clone(), t.checkpoint.id.clone()))
        .collect();
    let want = vec![
        (a.clone(), "child:1".to_owned(), all[2].clone()),
        (b.clone(), String::new(), all[1].clone()),
        (a.clone(), String::new(), all[0].clone()),
    ];
    ensure_eq(ours, want, "list(None) returns every thread and namespace, newest first")?;
    let before = ListOptions { before: Some(all[2].clone()), ..ours_only() };
    let listed = saver.list(None, before).await.ctx("list")?;
    ensure_eq(ids_of(&listed), vec![all[1].clone(), all[0].clone()], "list(None) honours before")?;
    let limited = ListOptions { limit: Some(1), ..ours_only() };
    let listed = saver.list(None, limited).await.ctx("list")?;
    ensure_eq(ids_of(&listed), vec![all[2].clone()], "list(None) honours limit")
}

/// `list_ids` returns the ids of one thread and namespace, newest first.
pub async fn list_ids_newest_first(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("ids"));
    let saved = put_chain(saver, &thread, 3).await?;
    ensure_eq(saver.list_ids(&saved[0]).await.ctx("list_ids")?, newest_first(&saved), "list_ids order")?;
    let other = CheckpointConfig { checkpoint_ns: "child:1".into(), ..thread };
    ensure_eq(saver.list_ids(&other).await.ctx("list_ids")?.len(), 0, "list_ids of another namespace")
}

/// Namespaces of a thread hold separate checkpoints, values (even at equal versions) and writes.
pub async fn namespaces_kept_apart(saver: &dyn Checkpointer) -> Outcome {
    let root = CheckpointConfig::thread(fresh_thread("ns"));
    let child = CheckpointConfig { checkpoint_ns: "child:1".into(), ..root.clone() };
    let all = ids(2);
    let v = versions(&[("x", &version(1))]);
    let r =
        saver.put(&root, checkpoint(&all[0], &[("x", json!("root"))], &v), metadata(0, json!({})), v.clone());
    let r = r.await.ctx("put")?;
    let c = saver.put(
        &child,
        checkpoint(&all[1], &[("x", json!("child"))], &v),
        metadata(0, json!({})),
        v.clone(),
    );
    let c = c.await.ctx("put")?;
    saver.put_writes(&r, vec![("x".into(), json!("w-root"))], "task-r", "").await.ctx("put_writes")?;
    saver.put_writes(&c, vec![("x".into(), json!("w-child"))], "task-c", "").await.ctx("put_writes")?;
    let got_root = must_get(saver, &root, "latest of the root namespace").await?;
    ensure_eq(&got_root.checkpoint.id, &all[0], "the root namespace's latest ignores other namespaces")?;
    ensure_eq(got_root.checkpoint.channel_values.get("x"), Some(&json!("root")), "values per namespace")?;
    ensure_eq(got_root.pending_writes.len(), 1, "writes per namespace")?;
    let got_child = must_get(saver, &child, "latest of the child namespace").await?;
    ensure_eq(got_child.config.checkpoint_ns.as_str(), "child:1", "tuples carry their namespace")?;
    ensure_eq(got_child.checkpoint.channel_values.get("x"), Some(&json!("child")), "values per namespace")?;
    ensure_eq(&got_child.pending_writes[0].value, &json!("w-child"), "writes per namespace")?;
    let listed = saver.list(Some(&root), ListOptions::default()).await.ctx("list")?;
    ensure_eq(ids_of(&listed), vec![all[0].clone()], "list of a namespace returns only that namespace")
}

/// Threads hold separate checkpoints and values even when ids and versions coincide.
pub async fn threads_kept_apart(saver: &dyn Checkpointer) -> Outcome {
    let (a, b) = (CheckpointConfig::thread(fresh_thread("ta")), CheckpointConfig::thread(fresh_thread("tb")));
    let id = ids(1).remove(0);
    let v = versions(&[("x", &version(1))]);
    for (config, value) in [(&a, "in-a"), (&b, "in-b")] {
        let cp = checkpoint(&id, &[("x", json!(value))], &v);
        saver.put(config, cp, metadata(0, json!({})), v.clone()).await.ctx("put")?;
        saver
            .put_writes(&config.at(id.as_str()), vec![("x".into(), json!(value))], "t", "")
            .await
            .ctx("put_writes")?;
    }
    for (config, value) in [(&a, "in-a"), (&b, "in-b")] {
        let got = must_get(saver, config, "checkpoint with a shared id").await?;
        ensure_eq(&got.config.thread_id, &config.thread_id, "a tuple names its own thread")?;
        ensure_eq(got.checkpoint.channel_values.get("x"), Some(&json!(value)), "values per thread")?;
        ensure_eq(got.pending_writes.len(), 1, "writes per thread")?;
        ensure_eq(&got.pending_writes[0].value, &json!(value), "writes per thread")?;
    }
    Ok(())
}
