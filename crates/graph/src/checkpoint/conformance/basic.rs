//! Cases: put, get (latest and by id), parents, values rebuilt from versions, metadata.

use serde_json::json;

use super::kit::{
    Ctx, Outcome, checkpoint, ensure, ensure_eq, fresh_thread, ids, metadata, must_get, put_chain, version,
    versions,
};
use crate::checkpoint::{CheckpointConfig, CheckpointError, CheckpointSource, Checkpointer};

/// `put` returns the new checkpoint's address and `get_tuple` without an id returns the latest checkpoint
/// whole: id, ts, values, versions, versions seen, updated channels and metadata.
pub async fn put_then_get_latest(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("latest"));
    let id = &ids(1)[0];
    let all = versions(&[("a", &version(1)), ("b", &version(1))]);
    let cp = checkpoint(id, &[("a", json!({"x": [1, 2]})), ("b", json!("text"))], &all);
    let meta = metadata(0, json!({"user": "u1"}));
    let saved = saver.put(&thread, cp.clone(), meta.clone(), all).await.ctx("put")?;
    ensure_eq(&saved, &thread.at(id.as_str()), "put returns the thread, namespace and new checkpoint id")?;
    let got = must_get(saver, &thread, "latest checkpoint after one put").await?;
    ensure_eq(&got.config, &saved, "get_tuple returns the checkpoint's address")?;
    ensure_eq(&got.checkpoint, &cp, "get_tuple returns the checkpoint as it was put")?;
    ensure_eq(&got.metadata, &meta, "get_tuple returns the metadata as it was put")?;
    ensure_eq(got.pending_writes.len(), 0, "a new checkpoint has no pending writes")
}

/// `get_tuple` with an id returns that checkpoint; without one, the newest.
pub async fn get_by_id(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("by-id"));
    let saved = put_chain(saver, &thread, 3).await?;
    for (i, config) in saved.iter().enumerate() {
        let got = must_get(saver, config, "checkpoint by id").await?;
        ensure_eq(&got.config, config, "get_tuple by id returns the checkpoint asked for")?;
        ensure_eq(
            got.checkpoint.channel_values.get("step"),
            Some(&json!(i)),
            "values of a checkpoint by id",
        )?;
    }
    let latest = must_get(saver, &thread, "latest of three").await?;
    ensure_eq(Some(&latest.config), saved.last(), "get_tuple without id returns the newest checkpoint")
}

/// Unknown threads, namespaces and ids are `None`, not errors.
pub async fn get_missing_returns_none(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("missing"));
    ensure(saver.get_tuple(&thread).await.ctx("get_tuple")?.is_none(), || {
        "get_tuple of an unknown thread returns None".into()
    })?;
    put_chain(saver, &thread, 1).await?;
    let unknown_id = thread.at(ids(1)[0].as_str());
    ensure(saver.get_tuple(&unknown_id).await.ctx("get_tuple")?.is_none(), || {
        "get_tuple of an unknown checkpoint id returns None".into()
    })?;
    let other_ns = CheckpointConfig { checkpoint_ns: "child:1".into(), ..thread };
    ensure(saver.get_tuple(&other_ns).await.ctx("get_tuple")?.is_none(), || {
        "get_tuple of a namespace without checkpoints returns None".into()
    })
}

/// The first checkpoint has no parent; each later one names the checkpoint it was put from.
pub async fn parent_config_points_to_parent(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("parent"));
    let saved = put_chain(saver, &thread, 3).await?;
    let first = must_get(saver, &saved[0], "first checkpoint").await?;
    ensure_eq(&first.parent_config, &None, "the first checkpoint has no parent")?;
    for pair in saved.windows(2) {
        let child = must_get(saver, &pair[1], "child checkpoint").await?;
        ensure_eq(child.parent_config.as_ref(), Some(&pair[0]), "parent_config is the config put was given")?;
    }
    Ok(())
}

/// `put` receives the values of changed channels only; reads rebuild every channel from the version the
/// checkpoint lists, including values stored by older checkpoints.
pub async fn values_rebuilt_from_versions(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("values"));
    let [id1, id2, id3] = <[String; 3]>::try_from(ids(3)).map_err(|_| "three ids".to_owned())?;
    let (v1, v2, v3) = (version(1), version(2), version(3));
    let all1 = versions(&[("a", &v1), ("b", &v1)]);
    let cp1 = checkpoint(&id1, &[("a", json!("a1")), ("b", json!(["b1"]))], &all1);
    let c1 = saver.put(&thread, cp1, metadata(0, json!({})), all1).await.ctx("put")?;
    let all2 = versions(&[("a", &v1), ("b", &v2)]);
    // `a` is unchanged: its value is passed, being a scalar (see `Checkpointer::put`).
    let cp2 = checkpoint(&id2, &[("a", json!("a1")), ("b", json!(["b1", "b2"]))], &all2);
    let c2 = saver.put(&c1, cp2, metadata(1, json!({})), versions(&[("b", &v2)])).await.ctx("put")?;
    let all3 = versions(&[("a", &v3), ("b", &v2)]);
    let cp3 = checkpoint(&id3, &[("a", json!({"n": 3}))], &all3);
    let c3 = saver.put(&c2, cp3, metadata(2, json!({})), versions(&[("a", &v3)])).await.ctx("put")?;
    let expect = [
        (&c1, json!({"a": "a1", "b": ["b1"]})),
        (&c2, json!({"a": "a1", "b": ["b1", "b2"]})),
        (&c3, json!({"a": {"n": 3}, "b": ["b1", "b2"]})),
    ];
    for (config, want) in expect {
        let got = must_get(saver, config, "checkpoint with older values").await?;
        ensure_eq(json!(got.checkpoint.channel_values), want, "values rebuilt from channel versions")?;
    }
    let listed = saver.list(Some(&thread), Default::default()).await.ctx("list")?;
    let values: Vec<_> = listed.iter().map(|t| json!(t.checkpoint.channel_values)).collect();
    let want = vec![
        json!({"a": {"n": 3}, "b": ["b1", "b2"]}),
        json!({"a": "a1", "b": ["b1", "b2"]}),
        json!({"a": "a1", "b": ["b1"]}),
    ];
    ensure_eq(values, want, "list rebuilds values from channel versions too")
}

/// Values move between scalars a saver may keep in the checkpoint's record and values it stores per
/// version (long strings, strings with NUL, floats, lists, objects), and each checkpoint reads back with
/// the values it was saved with; an unchanged scalar is passed along with each checkpoint, as the engine
/// passes it.
pub async fn scalar_values_round_trip(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("scalars"));
    let long = "x".repeat(crate::checkpoint::INLINE_STRING_MAX + 1);
    let values = [
        json!(1),
        json!(long),
        json!("nul\u{0}inside"),
        json!(null),
        json!(-0.0),
        json!(1.5),
        json!(u64::MAX),
        json!(i64::MIN),
        json!({"o": 1}),
        json!(true),
        json!([1, 2]),
        json!(""),
    ];
    let ids = ids(values.len());
    let mut parent = thread.clone();
    let mut saved = Vec::new();
    for (i, (id, value)) in ids.iter().zip(&values).enumerate() {
        let v = version(u64::try_from(i).unwrap_or(0) + 1);
        let all = versions(&[("s", &v), ("kept", &version(1))]);
        let new = if i == 0 { all.clone() } else { versions(&[("s", &v)]) };
        let cp = checkpoint(id, &[("s", value.clone()), ("kept", json!(7))], &all);
        let meta = metadata(i64::try_from(i).unwrap_or(0), json!({}));
        parent = saver.put(&parent, cp, meta, new).await.ctx("put")?;
        saved.push(parent.clone());
    }
    for (config, value) in saved.iter().zip(&values) {
        let got = must_get(saver, config, "checkpoint with a scalar or a stored value").await?;
        let want = json!({"s": value, "kept": 7});
        ensure_eq(json!(got.checkpoint.channel_values), want, &format!("values with {value}"))?;
    }
    let listed = saver.list(Some(&thread), Default::default()).await.ctx("list")?;
    let got: Vec<_> = listed.iter().map(|t| t.checkpoint.channel_values.get("s").cloned()).collect();
    let want: Vec<_> = values.iter().rev().cloned().map(Some).collect();
    ensure_eq(got, want, "list reads each checkpoint's value")
}

/// A channel in `new_versions` without a value in `channel_values` was empty at that version: reads
/// leave it out of `channel_values` but keep its version.
pub async fn empty_channel_has_no_value(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("empty"));
    let all = versions(&[("full", &version(1)), ("empty", &version(1))]);
    let cp = checkpoint(&ids(1)[0], &[("full", json!(1))], &all);
    let saved = saver.put(&thread, cp, metadata(0, json!({})), all.clone()).await.ctx("put")?;
    let got = must_get(saver, &saved, "checkpoint with an empty channel").await?;
    ensure_eq(json!(got.checkpoint.channel_values), json!({"full": 1}), "an empty channel has no value")?;
    ensure_eq(&got.checkpoint.channel_versions, &all, "an empty channel keeps its version")
}

/// A checkpoint that lists a channel version whose value was never stored is reported as corrupt, with
/// the thread, checkpoint and channel named, never read as a default.
pub async fn missing_value_is_corrupt(saver: &dyn Checkpointer) -> Outcome {
    let thread = CheckpointConfig::thread(fresh_thread("corrupt"));
    let id = ids(1).remove(0);
    let all = versions(&[("known", &version(1)), ("ghost_channel", &version(7))]);
    let cp = checkpoint(&id, &[("known", json!(1))], &all);
    let saved = saver.put(&thread, cp, metadata(0, json!({})), versions(&[("known", &version(1))])).await;
    let saved = saved.ctx("put")?;
    let outcome = corrupt_error_names_culprits(saver.get_tuple(&saved).await, &thread.thread_id, &id);
    // A corrupt checkpoint would break other cases' `list(None)` on a shared saver.
    saver.delete_thread(&thread.thread_id).await.ctx("delete_thread")?;
    outcome
}

fn corrupt_error_names_culprits(
    read: Result<Option<crate::checkpoint::CheckpointTuple>, CheckpointError>,
    thread_id: &str,
    id: &str,
) -> Outcome {
    match read {
        Err(err @ CheckpointError::Corrupt { .. }) => {
            let text = err.to_string();
            ensure(text.contains(thread_id) && text.contains(id) && text.contains("ghost_channel"), || {
                format!("the corrupt error names thread, checkpoint and channel: {text}")
            })
        }
        Err(other) => Err(format!("a missing channel value is CheckpointError::Corrupt, got {other:?}")),
        Ok(t) => {
            Err(format!("a missing channel value is an error, got values {:?}", t.map(|t| t.checkpoint)))
        }
    }
}

/// Metadata comes back as it was put: source, step, parents and the caller's nested keys.
pub async fn metadata_round_trips(saver: &dyn Checkpointer) -> Outcome {
    let thread =
        CheckpointConfig { checkpoint_ns: "sub:1".into(), ..CheckpointConfig::thread(fresh_thread("meta")) };
    let mut meta =
        metadata(-1, json!({"user": "ann", "score": 2.5, "tags": ["a", "b"], "deep": {"k": null}}));
    meta.source = CheckpointSource::Input;
    meta.parents.insert(String::new(), "parent-checkpoint".into());
    let cp = checkpoint(&ids(1)[0], &[], &versions(&[]));
    let saved = saver.put(&thread, cp, meta.clone(), versions(&[])).await.ctx("put")?;
    let got = must_get(saver, &saved, "checkpoint with metadata").await?;
    ensure_eq(got.metadata, meta, "metadata round-trips")
}

/// A list channel saved through `put_with_appends` as the items appended to its previous version reads
/// back whole at every checkpoint (appends, an empty append, a whole replacement, appends again), however
/// the saver stores it; a delta whose base version was never stored is `Invalid`.
pub async fn appended_values_rebuilt(saver: &dyn Checkpointer) -> Outcome {
    use crate::checkpoint::{AppendDelta, ChannelAppends};
    let thread = CheckpointConfig::thread(fresh_thread("appends"));
    let ids = ids(6);
    let delta = |base: u64, items: Vec<serde_json::Value>| {
        ChannelAppends::from([("m".into(), AppendDelta { base_version: version(base), items })])
    };
    // (version, whole value or delta, the value it must read back as)
    let steps = [
        (1, Some(json!([1, {"a": 2}])), None, json!([1, {"a": 2}])),
        (2, None, Some(delta(1, vec![json!(3)])), json!([1, {"a": 2}, 3])),
        (3, None, Some(delta(2, vec![])), json!([1, {"a": 2}, 3])),
        (4, Some(json!(["x"])), None, json!(["x"])),
        (5, None, Some(delta(4, vec![json!("y"), json!({"z": [true]})])), json!(["x", "y", {"z": [true]}])),
    ];
    let mut parent = thread.clone();
    let mut saved = Vec::new();
    for (i, (v, whole, appends, _)) in steps.iter().enumerate() {
        let all = versions(&[("m", &version(*v)), ("k", &version(1))]);
        // `k` is unchanged after the first step; its value is passed, being a scalar.
        let values: Vec<(&str, serde_json::Value)> = match whole {
            Some(w) => vec![("m", w.clone()), ("k", json!("kept"))],
            None => vec![("k", json!("kept"))],
        };
        let new = if i == 0 { all.clone() } else { versions(&[("m", &version(*v))]) };
        let cp = checkpoint(&ids[i], &values, &all);
        let meta = metadata(i64::try_from(i).unwrap_or(0), json!({}));
        parent = saver
            .put_with_appends(&parent, cp, meta, new, appends.clone().unwrap_or_default())
            .await
            .ctx("put_with_appends")?;
        saved.push(parent.clone());
    }
    for (config, (v, _, _, expected)) in saved.iter().zip(&steps) {
        let got = must_get(saver, config, "checkpoint saved with appends").await?;
        ensure_eq(got.checkpoint.channel_values.get("m"), Some(expected), &format!("list at version {v}"))?;
        ensure_eq(got.checkpoint.channel_values.get("k"), Some(&json!("kept")), "an unchanged channel")?;
    }
    let listed = saver.list(Some(&thread), crate::checkpoint::ListOptions::default()).await.ctx("list")?;
    let newest_first: Vec<_> = steps.iter().rev().map(|s| Some(&s.3)).collect();
    let got: Vec<_> = listed.iter().map(|t| t.checkpoint.channel_values.get("m")).collect();
    ensure_eq(got, newest_first, "list rebuilds every checkpoint's list")?;

    let all = versions(&[("m", &version(7)), ("k", &version(1))]);
    let cp = checkpoint(&ids[5], &[], &all);
    let unknown = delta(6, vec![json!(0)]);
    let new = versions(&[("m", &version(7))]);
    match saver.put_with_appends(&parent, cp, metadata(9, json!({})), new, unknown).await {
        Err(CheckpointError::Invalid(_)) => Ok(()),
        other => Err(format!("a delta on a version never stored is Invalid, got {other:?}")),
    }
}
