//! Helpers of the conformance cases: fresh threads, ordered ids, checkpoints and checks.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};
use uuid::{NoContext, Timestamp, Uuid};

use crate::checkpoint::{
    ChannelName, ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointError,
    CheckpointMetadata, CheckpointSource, CheckpointTuple, Checkpointer, FlatMap,
};

/// What a case returns: `Err` names the rule that broke.
pub(super) type Outcome = Result<(), String>;

/// A thread id no other case (or run) uses.
pub(super) fn fresh_thread(label: &str) -> String {
    format!("conformance-{label}-{}", Uuid::new_v4().simple())
}

/// `n` UUID v7 ids, one millisecond apart, ending `end_age` before now, oldest first.
pub(super) fn ids_ending(n: usize, end_age: Duration) -> Vec<String> {
    let end = SystemTime::now().checked_sub(end_age).unwrap_or(SystemTime::UNIX_EPOCH);
    (0..n)
        .map(|i| {
            let back = Duration::from_millis(u64::try_from(n - 1 - i).unwrap_or(0));
            let at = end.checked_sub(back).unwrap_or(SystemTime::UNIX_EPOCH);
            let since = at.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
            Uuid::new_v7(Timestamp::from_unix(NoContext, since.as_secs(), since.subsec_nanos())).to_string()
        })
        .collect()
}

/// `n` fresh UUID v7 ids, oldest first, one millisecond apart, each newer than every id an earlier call
/// made (so ids made one after another sort in that order).
pub(super) fn ids(n: usize) -> Vec<String> {
    static LAST_MS: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let now_ms = u64::try_from(now.as_millis()).unwrap_or(u64::MAX);
    let count = u64::try_from(n).unwrap_or(u64::MAX);
    let mut start = now_ms;
    // The closure always returns `Some`, so the update cannot fail.
    let _ = LAST_MS.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| {
        start = now_ms.max(last.saturating_add(1));
        Some(start.saturating_add(count))
    });
    (0..count)
        .map(|i| {
            let ms = start.saturating_add(i);
            let ts =
                Timestamp::from_unix(NoContext, ms / 1000, u32::try_from(ms % 1000).unwrap_or(0) * 1_000_000);
            Uuid::new_v7(ts).to_string()
        })
        .collect()
}

/// A version string with counter `n`.
pub(super) fn version(n: u64) -> ChannelVersion {
    format!("{n:032}.{:016}", 0.5).into()
}

/// Channel versions from pairs.
pub(super) fn versions(pairs: &[(&str, &str)]) -> ChannelVersions {
    pairs.iter().map(|(c, v)| (ChannelName::from(*c), ChannelVersion::from(*v))).collect()
}

/// A checkpoint with `values` (the new ones) and every channel's `versions`.
pub(super) fn checkpoint(
    id: &str,
    values: &[(&str, Value)],
    versions_of_all: &ChannelVersions,
) -> Checkpoint {
    let seen = FlatMap::from([(ChannelName::from("node"), versions_of_all.clone())]);
    Checkpoint {
        v: crate::checkpoint::CHECKPOINT_VERSION,
        id: id.to_owned(),
        ts: "2025-01-02T03:04:05.678901+00:00".to_owned(),
        channel_values: values.iter().map(|(k, v)| (ChannelName::from(*k), v.clone())).collect(),
        channel_versions: versions_of_all.clone(),
        versions_seen: seen,
        updated_channels: values.iter().map(|(k, _)| ChannelName::from(*k)).collect(),
    }
}

/// Loop metadata of `step` with the caller's `extra` keys.
pub(super) fn metadata(step: i64, extra: Value) -> CheckpointMetadata {
    let extra: Map<String, Value> = match extra {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    CheckpointMetadata { source: CheckpointSource::Loop, step, parents: BTreeMap::new(), extra: extra.into() }
}

/// Puts `n` checkpoints in a chain on `base`'s thread and namespace; checkpoint `i` sets channel
/// `"step"` to `i` (a new version each time). Returns their addresses, oldest first.
pub(super) async fn put_chain(
    saver: &dyn Checkpointer,
    base: &CheckpointConfig,
    n: usize,
) -> Result<Vec<CheckpointConfig>, String> {
    let mut parent = CheckpointConfig { checkpoint_id: None, ..base.clone() };
    let mut out = Vec::new();
    for (i, id) in ids(n).iter().enumerate() {
        let v = version(u64::try_from(i).unwrap_or(0) + 1);
        let all = versions(&[("step", &v)]);
        let cp = checkpoint(id, &[("step", json!(i))], &all);
        let step = i64::try_from(i).unwrap_or(0);
        let saved = saver.put(&parent, cp, metadata(step, json!({})), all).await.ctx("put")?;
        out.push(saved.clone());
        parent = saved;
    }
    Ok(out)
}

/// The tuple at `config`, or an error naming `what` when it is missing.
pub(super) async fn must_get(
    saver: &dyn Checkpointer,
    config: &CheckpointConfig,
    what: &str,
) -> Result<CheckpointTuple, String> {
    saver
        .get_tuple(config)
        .await
        .ctx("get_tuple")?
        .ok_or_else(|| format!("{what}: get_tuple returned nothing"))
}

/// Ids of a list result.
pub(super) fn ids_of(tuples: &[CheckpointTuple]) -> Vec<String> {
    tuples.iter().map(|t| t.checkpoint.id.clone()).collect()
}

/// `Err(rule)` when `ok` is false.
pub(super) fn ensure(ok: bool, rule: impl FnOnce() -> String) -> Outcome {
    if ok { Ok(()) } else { Err(rule()) }
}

/// `Err` naming `rule`, `got` and `want` when they differ.
pub(super) fn ensure_eq<T: PartialEq + Debug>(got: T, want: T, rule: &str) -> Outcome {
    if got == want { Ok(()) } else { Err(format!("{rule}: got {got:?}, want {want:?}")) }
}

/// Adds the failed call's name to a saver error.
pub(super) trait Ctx<T> {
    /// `Err` as "`call` failed: error".
    fn ctx(self, call: &str) -> Result<T, String>;
}

impl<T> Ctx<T> for Result<T, CheckpointError> {
    fn ctx(self, call: &str) -> Result<T, String> {
        self.map_err(|e| format!("{call} failed: {e}"))
    }
}
