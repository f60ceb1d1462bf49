//! Rows of the checkpoint tables and their conversion to and from weft's checkpoint types, shared by the
//! SQL backends (which differ only in their queries).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};
#[cfg(feature = "sqlite")]
use weft_graph::checkpoint::{ChannelName, ChannelVersion};
use weft_graph::checkpoint::{
    ChannelValues, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointError, CheckpointMetadata,
    CheckpointTuple, PendingWrite, is_inline_scalar, special,
};

use super::codec::{self, Decoded};

/// A row of `checkpoints`.
#[derive(Debug, Clone)]
pub(crate) struct CheckpointRow {
    pub(crate) thread_id: String,
    pub(crate) checkpoint_ns: String,
    pub(crate) checkpoint_id: String,
    pub(crate) parent_checkpoint_id: Option<String>,
    /// The checkpoint with its scalar channel values only (see [`prepare_put`]), as JSON text.
    pub(crate) checkpoint: String,
    /// The metadata as JSON text.
    pub(crate) metadata: String,
}

/// A row of `checkpoint_blobs`: a channel's value at a version (`blob` `None`: the channel was empty),
/// or with `base_version`, the elements appended to the value at that version.
#[derive(Debug, Clone)]
pub(crate) struct BlobRow {
    pub(crate) channel: String,
    pub(crate) version: String,
    pub(crate) base_version: Option<String>,
    pub(crate) blob: Option<Vec<u8>>,
}

/// A row of `checkpoint_writes`.
#[derive(Debug, Clone)]
pub(crate) struct WriteRow {
    pub(crate) task_id: String,
    pub(crate) task_path: String,
    pub(crate) idx: i64,
    pub(crate) channel: String,
    pub(crate) blob: Vec<u8>,
}

/// A pending write ready to insert: its index (position, or the fixed index of a special channel).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WriteRecord {
    pub(crate) idx: i64,
    pub(crate) channel: String,
    pub(crate) blob: Vec<u8>,
}

/// The records of one `put_writes` batch: regular writes at their position, special writes at their
/// fixed index (a later special write of the same channel in the batch replaces an earlier one).
pub(crate) fn write_records<C: AsRef<str>>(writes: Vec<(C, Value)>) -> Vec<WriteRecord> {
    let mut out: Vec<WriteRecord> = Vec::with_capacity(writes.len());
    for (position, (channel, value)) in writes.into_iter().enumerate() {
        let channel = channel.as_ref();
        let fixed = special::fixed_index(channel);
        let idx = fixed.unwrap_or_else(|| i64::try_from(position).unwrap_or(i64::MAX));
        let record = WriteRecord { idx, channel: channel.to_owned(), blob: codec::encode_full(&value) };
        match out.iter_mut().find(|r| r.idx == idx) {
            Some(earlier) => *earlier = record,
            None => out.push(record),
        }
    }
    out
}

/// The metadata as a JSON object (keys of `extra` that repeat `source`, `step` or `parents` appear once).
pub(crate) fn metadata_json(
    metadata: &CheckpointMetadata,
    config: &CheckpointConfig,
    checkpoint_id: &str,
) -> Result<Map<String, Value>, CheckpointError> {
    match serde_json::to_value(metadata) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) | Err(_) => Err(CheckpointError::Invalid(format!(
            "metadata of checkpoint '{checkpoint_id}' in thread '{}' is not a JSON object",
            config.thread_id
        ))),
    }
}

/// A checkpoint ready to store: its body (with its inline scalars) and its metadata as JSON text, and the
/// values that go to blob rows.
#[derive(Debug)]
pub(crate) struct PreparedPut {
    pub(crate) body: String,
    pub(crate) metadata: String,
    pub(crate) values: ChannelValues,
}

/// Checks a checkpoint's id and serializes its body and metadata. The values that are inline scalars
/// ([`is_inline_scalar`]) of channels the checkpoint lists stay in the body, and their channels leave
/// `new_versions` (they get no blob row); the other values are taken out for blob rows.
///
/// A reader finds every scalar of a checkpoint in its body because the engine passes the scalars of
/// unchanged channels too (see `Checkpointer::put`).
pub(crate) fn prepare_put(
    config: &CheckpointConfig,
    checkpoint: &mut Checkpoint,
    metadata: &CheckpointMetadata,
    new_versions: &mut ChannelVersions,
) -> Result<PreparedPut, CheckpointError> {
    if checkpoint.id.is_empty() {
        return Err(CheckpointError::Invalid(format!(
            "checkpoint for thread '{}' has an empty id",
            config.thread_id
        )));
    }
    let metadata = Value::Object(metadata_json(metadata, config, &checkpoint.id)?).to_string();
    let mut values = std::mem::take(&mut checkpoint.channel_values);
    let listed = &checkpoint.channel_versions;
    values.retain(|channel, value| {
        if is_inline_scalar(value) && listed.contains_key(channel) {
            new_versions.remove(channel);
            checkpoint.channel_values.insert(Arc::clone(channel), value.take());
            false
        } else {
            true
        }
    });
    let body = codec::encode_checkpoint(checkpoint).map_err(|message| CheckpointError::Serialize {
        thread_id: config.thread_id.clone(),
        channel: "(checkpoint)".into(),
        message,
    })?;
    Ok(PreparedPut { body, metadata, values })
}

/// Whether stored metadata has every pair of `filter` (top-level keys, equal JSON values).
pub(crate) fn metadata_matches(metadata: &Map<String, Value>, filter: &Map<String, Value>) -> bool {
    filter.iter().all(|(key, wanted)| metadata.get(key) == Some(wanted))
}

/// A checkpoint row read and checked, waiting for its channel values and writes.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub(crate) config: CheckpointConfig,
    pub(crate) parent_id: Option<String>,
    pub(crate) checkpoint: Checkpoint,
    pub(crate) metadata: CheckpointMetadata,
    pub(crate) metadata_json: Map<String, Value>,
}

fn corrupt(config: &CheckpointConfig, id: &str, message: String) -> CheckpointError {
    CheckpointError::corrupt(&config.thread_id, id, message)
}

impl CheckpointRow {
    /// Reads the checkpoint body and metadata; a damaged row is `Corrupt`.
    pub(crate) fn parse(self) -> Result<Parsed, CheckpointError> {
        let config = CheckpointConfig {
            thread_id: self.thread_id,
            checkpoint_ns: self.checkpoint_ns,
            checkpoint_id: Some(self.checkpoint_id.clone()),
        };
        let id = self.checkpoint_id;
        let mut checkpoint =
            codec::decode_checkpoint(&self.checkpoint).map_err(|m| corrupt(&config, &id, m))?;
        if checkpoint.id != id {
            return Err(corrupt(&config, &id, format!("the record holds checkpoint '{}'", checkpoint.id)));
        }
        // The values the writer kept in the row (its scalars) of channels the checkpoint lists. Whatever
        // the row holds is read, not only what `is_inline_scalar` accepts today: the writer decided.
        let listed = &checkpoint.channel_versions;
        checkpoint.channel_values.retain(|channel, _| listed.contains_key(channel));
        let metadata_json: Map<String, Value> = serde_json::from_str(&self.metadata)
            .map_err(|e| corrupt(&config, &id, format!("unreadable metadata: {e}")))?;
        let metadata: CheckpointMetadata = serde_json::from_value(Value::Object(metadata_json.clone()))
            .map_err(|e| corrupt(&config, &id, format!("unreadable metadata: {e}")))?;
        Ok(Parsed { config, parent_id: self.parent_checkpoint_id, checkpoint, metadata, metadata_json })
    }
}

impl Parsed {
    /// The checkpoint's id.
    #[cfg(feature = "sqlite")]
    pub(crate) fn id(&self) -> &str {
        &self.checkpoint.id
    }

    /// Builds the tuple: values from `values`, writes sorted by (task path, task id, index).
    pub(crate) fn finish(
        self,
        values: &mut Values<'_>,
        mut writes: Vec<WriteRow>,
    ) -> Result<CheckpointTuple, CheckpointError> {
        let Parsed { config, parent_id, mut checkpoint, metadata, .. } = self;
        let id = checkpoint.id.clone();
        for (channel, version) in &checkpoint.channel_versions {
            if checkpoint.channel_values.contains_key(channel) {
                continue;
            }
            let value = values.get(channel, version).map_err(|m| {
                corrupt(&config, &id, format!("channel '{channel}' at version '{version}': {m}"))
            })?;
            if let Some(value) = value {
                checkpoint.channel_values.insert(Arc::clone(channel), value);
            }
        }
        writes.sort_by(|a, b| (&a.task_path, &a.task_id, a.idx).cmp(&(&b.task_path, &b.task_id, b.idx)));
        let pending_writes = writes
            .into_iter()
            .map(|w| {
                let value = codec::decode_full(&w.blob).map_err(|m| {
                    corrupt(
                        &config,
                        &id,
                        format!("pending write of task '{}' to '{}': {m}", w.task_id, w.channel),
                    )
                })?;
                Ok(PendingWrite { task_id: w.task_id, channel: w.channel, value })
            })
            .collect::<Result<Vec<_>, CheckpointError>>()?;
        let parent_config = parent_id.map(|p| config.at(p));
        Ok(CheckpointTuple { config, checkpoint, metadata, parent_config, pending_writes })
    }
}

/// The (channel, version) pairs the checkpoints of one thread and namespace need.
#[cfg(feature = "sqlite")]
pub(crate) fn needed_versions<'a>(parsed: impl IntoIterator<Item = &'a Parsed>) -> ChannelVersionList {
    let mut pairs: Vec<(ChannelName, ChannelVersion)> = parsed
        .into_iter()
        .flat_map(|p| {
            let inline = &p.checkpoint.channel_values;
            p.checkpoint
                .channel_versions
                .iter()
                .filter(|(c, _)| !inline.contains_key(*c))
                .map(|(c, v)| (c.clone(), v.clone()))
        })
        .collect();
    pairs.sort();
    pairs.dedup();
    ChannelVersionList(pairs)
}

/// Sorted, distinct (channel, version) pairs.
#[cfg(feature = "sqlite")]
#[derive(Debug, Default)]
pub(crate) struct ChannelVersionList(pub(crate) Vec<(ChannelName, ChannelVersion)>);

#[cfg(feature = "sqlite")]
impl ChannelVersionList {
    /// The pairs as a JSON array of `[channel, version]` (for SQLite's `json_each`).
    pub(crate) fn json(&self) -> String {
        Value::Array(self.0.iter().map(|(c, v)| Value::from(vec![&**c, &**v])).collect()).to_string()
    }

    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Channel values of one thread and namespace, rebuilt from blob rows (following delta chains) and
/// remembered, so checkpoints that share a version decode it once.
#[derive(Debug)]
pub(crate) struct Values<'a> {
    rows: &'a HashMap<(String, String), BlobRow>,
    resolved: HashMap<(String, String), Option<Value>>,
}

impl<'a> Values<'a> {
    /// Values over `rows`, keyed by (channel, version).
    pub(crate) fn new(rows: &'a HashMap<(String, String), BlobRow>) -> Self {
        Self { rows, resolved: HashMap::new() }
    }

    /// The value of `channel` at `version` (`None`: the channel was empty); an error says what is missing
    /// or unreadable.
    pub(crate) fn get(&mut self, channel: &str, version: &str) -> Result<Option<Value>, String> {
        let key = (channel.to_owned(), version.to_owned());
        if let Some(found) = self.resolved.get(&key) {
            return Ok(found.clone());
        }
        let mut appends: Vec<Vec<Value>> = Vec::new();
        let mut at = version.to_owned();
        let base = loop {
            // A chain longer than the rows read must run in a circle.
            if appends.len() > self.rows.len() {
                return Err("delta chain too long (cyclic?)".into());
            }
            if let Some(done) = self.resolved.get(&(channel.to_owned(), at.clone())) {
                break done.clone();
            }
            let Some(row) = self.rows.get(&(channel.to_owned(), at.clone())) else {
                return Err(if at == version {
                    "no value stored".to_owned()
                } else {
                    format!("the base version '{at}' of a delta is missing")
                });
            };
            match (&row.base_version, &row.blob) {
                (None, None) => break None,
                (None, Some(blob)) => match codec::decode(blob)? {
                    Decoded::Full(value) => break Some(value),
                    Decoded::Append(_) => return Err(format!("delta at version '{at}' has no base")),
                },
                (Some(base), Some(blob)) => match codec::decode(blob)? {
                    Decoded::Append(elements) => {
                        appends.push(elements);
                        at = base.clone();
                    }
                    Decoded::Full(_) => return Err(format!("whole value at '{at}' recorded as a delta")),
                },
                (Some(_), None) => return Err(format!("delta at version '{at}' has no data")),
            }
        };
        let value = if appends.is_empty() {
            base
        } else {
            let Some(Value::Array(mut items)) = base else {
                return Err("the base of a delta is not a list".into());
            };
            for elements in appends.into_iter().rev() {
                items.extend(elements);
            }
            Some(Value::Array(items))
        };
        self.resolved.insert(key, value.clone());
        Ok(value)
    }
}

/// Blob rows keyed by (channel, version).
pub(crate) fn blob_map(rows: Vec<BlobRow>) -> HashMap<(String, String), BlobRow> {
    rows.into_iter().map(|r| ((r.channel.clone(), r.version.clone()), r)).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn row(channel: &str, version: &str, base: Option<&str>, blob: Option<Vec<u8>>) -> BlobRow {
        BlobRow { channel: channel.into(), version: version.into(), base_version: base.map(Into::into), blob }
    }

    #[test]
    fn deltas_are_applied_oldest_first() {
        let rows = blob_map(vec![
            row("m", "1", None, Some(codec::encode_full(&json!([1])))),
            row("m", "2", Some("1"), Some(codec::encode_append(&[json!(2)]))),
            row("m", "3", Some("2"), Some(codec::encode_append(&[json!(3), json!(4)]))),
        ]);
        let mut values = Values::new(&rows);
        assert_eq!(values.get("m", "3"), Ok(Some(json!([1, 2, 3, 4]))));
        assert_eq!(values.get("m", "2"), Ok(Some(json!([1, 2]))));
    }

    #[test]
    fn missing_bases_and_cycles_are_errors() {
        let rows = blob_map(vec![row("m", "2", Some("1"), Some(codec::encode_append(&[json!(2)])))]);
        let err = Values::new(&rows).get("m", "2").unwrap_err();
        assert!(err.contains("base version '1'"), "{err}");
        let rows = blob_map(vec![
            row("m", "1", Some("2"), Some(codec::encode_append(&[]))),
            row("m", "2", Some("1"), Some(codec::encode_append(&[]))),
        ]);
        assert!(Values::new(&rows).get("m", "2").unwrap_err().contains("cyclic"));
    }

    #[test]
    fn later_special_writes_replace_earlier_ones_in_a_batch() {
        let records = write_records::<String>(vec![
            ("a".into(), json!(1)),
            (special::ERROR.into(), json!("x")),
            (special::ERROR.into(), json!("y")),
        ]);
        let idx: Vec<i64> = records.iter().map(|r| r.idx).collect();
        assert_eq!(idx, vec![0, -1]);
        assert_eq!(codec::decode_full(&records[1].blob), Ok(json!("y")));
    }
}
