//! Building checkpoints for the saver tests: ordered ids, versions, puts, and key names of the layout.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use serde_json::Value;
use uuid::{NoContext, Timestamp, Uuid};
use weft_graph::checkpoint::{
    CHECKPOINT_VERSION, ChannelName, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSource, Checkpointer, FlatMap,
};

use super::TestSaver;

/// UUID v7 ids, each newer than the last.
pub(crate) fn next_id() -> String {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_millis() as u64;
    let mut ms = now;
    LAST.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| {
        ms = now.max(last + 1);
        Some(ms)
    })
    .unwrap();
    Uuid::new_v7(Timestamp::from_unix(NoContext, ms / 1000, (ms % 1000) as u32 * 1_000_000)).to_string()
}

pub(crate) fn version(n: u64) -> String {
    format!("{n:032}.{:016}", 0.5)
}

pub(crate) fn meta(step: i64) -> CheckpointMetadata {
    CheckpointMetadata {
        source: CheckpointSource::Loop,
        step,
        parents: BTreeMap::new(),
        extra: Default::default(),
    }
}

/// Puts a checkpoint on `parent` with every channel at `all` and the values of `new` (name, version n,
/// value); returns its address.
pub(crate) async fn put(
    saver: &TestSaver,
    parent: &CheckpointConfig,
    all: &[(&str, u64)],
    new: &[(&str, u64, Value)],
) -> CheckpointConfig {
    let versions: ChannelVersions = all.iter().map(|(c, n)| ((*c).into(), version(*n).into())).collect();
    let new_versions: ChannelVersions =
        new.iter().map(|(c, n, _)| ((*c).into(), version(*n).into())).collect();
    let checkpoint = Checkpoint {
        v: CHECKPOINT_VERSION,
        id: next_id(),
        ts: "2025-01-01T00:00:00+00:00".into(),
        channel_values: new.iter().map(|(c, _, v)| (ChannelName::from(*c), v.clone())).collect(),
        channel_versions: versions,
        versions_seen: FlatMap::new(),
        updated_channels: new.iter().map(|(c, _, _)| (*c).into()).collect(),
    };
    saver.put(parent, checkpoint, meta(0), new_versions).await.unwrap()
}

pub(crate) fn key(saver: &TestSaver, thread: &str, rest: &str) -> String {
    format!("{}:t:{thread}:{rest}", saver.intercept().prefix())
}
