//! What the saver stores, as self-describing JSON with a format version, and how it is read back.
//!
//! - A channel value: `{"format": 1, "value": ...}`, or `{"format": 1, "empty": true}` for a channel that
//!   had no value at that version (`null` is a value), or `{"format": 1, "base": version, "append": [...]}`
//!   for a list that extends the list stored at `base` (see `delta.rs`).
//! - A pending write: `{"format": 1, "task_id", "idx", "channel", "task_path", "value"}`.
//! - A checkpoint hash: field `format` (`"1"`), `checkpoint` (the checkpoint without its values),
//!   `metadata` (JSON object) and, when it has one, `parent` (the parent checkpoint's id).
//!
//! Reading anything else (bad JSON, a truncated blob, an unknown format) is an error, never a default.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use weft_graph::checkpoint::{Checkpoint, CheckpointError, CheckpointMetadata};

/// The format version this build writes and reads.
pub(crate) const FORMAT: u32 = 1;

/// `FORMAT` as stored in a checkpoint hash.
pub(crate) const FORMAT_FIELD: &str = "1";

/// A channel value (or its absence) as stored whole.
pub(crate) fn encode_value(value: Option<&Value>) -> Result<Vec<u8>, String> {
    #[derive(Serialize)]
    struct Whole<'a> {
        format: u32,
        value: &'a Value,
    }
    #[derive(Serialize)]
    struct Empty {
        format: u32,
        empty: bool,
    }
    let bytes = match value {
        Some(value) => serde_json::to_vec(&Whole { format: FORMAT, value }),
        None => serde_json::to_vec(&Empty { format: FORMAT, empty: true }),
    };
    bytes.map_err(|e| e.to_string())
}

/// A whole list.
pub(crate) fn encode_list(items: &[Value]) -> Result<Vec<u8>, String> {
    #[derive(Serialize)]
    struct Whole<'a> {
        format: u32,
        value: &'a [Value],
    }
    serde_json::to_vec(&Whole { format: FORMAT, value: items }).map_err(|e| e.to_string())
}

/// The elements appended to the list at version `base` of the same channel, of `base_len` elements when
/// known (the length is checked on reading; the engine's own appends do not carry it).
pub(crate) fn encode_append(base: &str, base_len: Option<usize>, items: &[Value]) -> Result<Vec<u8>, String> {
    #[derive(Serialize)]
    struct Append<'a> {
        format: u32,
        base: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        base_len: Option<usize>,
        append: &'a [Value],
    }
    serde_json::to_vec(&Append { format: FORMAT, base, base_len, append: items }).map_err(|e| e.to_string())
}

/// A stored channel value as read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Stored {
    /// A whole value.
    Value(Value),
    /// The channel had no value.
    Empty,
    /// Elements appended to the list at the base version (of the given length, when known).
    Append(Option<usize>, Vec<Value>),
}

/// A stored channel value, whole, empty or appended.
pub(crate) fn decode_stored(bytes: &[u8]) -> Result<Stored, String> {
    let mut envelope = envelope(bytes)?;
    if let Some(value) = envelope.remove("value") {
        return Ok(Stored::Value(value));
    }
    match (envelope.remove("append"), envelope.get("empty")) {
        (Some(Value::Array(items)), _) => {
            let base_len = match envelope.get("base_len") {
                None => None,
                Some(n) => Some(
                    n.as_u64()
                        .and_then(|n| usize::try_from(n).ok())
                        .ok_or_else(|| "appended value with a bad 'base_len'".to_owned())?,
                ),
            };
            Ok(Stored::Append(base_len, items))
        }
        (Some(_), _) => Err("'append' is not a list".to_owned()),
        (None, Some(Value::Bool(true))) => Ok(Stored::Empty),
        (None, _) => Err("stored value has neither 'value', 'append' nor 'empty'".to_owned()),
    }
}

/// A channel's value from its chain of stored versions: `chain[0]` is the version asked for, each next
/// one the base of the one before (`None` where nothing is stored). `Ok(None)`: the channel was empty.
pub(crate) fn decode_chain(chain: &[Option<Vec<u8>>]) -> Result<Option<Value>, String> {
    let mut appended: Vec<(Option<usize>, Vec<Value>)> = Vec::new();
    for (depth, bytes) in chain.iter().enumerate() {
        let Some(bytes) = bytes else {
            return Err(if depth == 0 {
                "no value stored".to_owned()
            } else {
                format!("the base of an appended value is missing ({depth} versions back)")
            });
        };
        let stored = decode_stored(bytes).map_err(|e| match depth {
            0 => e,
            _ => format!("base {depth} versions back: {e}"),
        })?;
        match stored {
            Stored::Append(base_len, items) => appended.push((base_len, items)),
            Stored::Empty if appended.is_empty() => return Ok(None),
            Stored::Value(value) if appended.is_empty() => return Ok(Some(value)),
            Stored::Value(Value::Array(mut items)) => {
                // Each base must be as long as the list its appended value was made from: a base
                // rewritten since (another thread under the same version) is an error, not a wrong list.
                for (back, (base_len, more)) in appended.into_iter().enumerate().rev() {
                    if let Some(base_len) = base_len.filter(|len| *len != items.len()) {
                        return Err(format!(
                            "the base {} versions back has {} elements, the appended value was made on {base_len}",
                            back + 1,
                            items.len()
                        ));
                    }
                    items.extend(more);
                }
                return Ok(Some(Value::Array(items)));
            }
            Stored::Value(_) | Stored::Empty => {
                return Err(format!("the base {depth} versions back of an appended value is not a list"));
            }
        }
    }
    Err("appended value without a whole base".to_owned())
}

/// A pending write as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredWrite {
    pub(crate) task_id: String,
    pub(crate) idx: i64,
    pub(crate) channel: String,
    pub(crate) task_path: String,
    pub(crate) value: Value,
}

#[derive(Serialize)]
struct WriteOut<'a> {
    format: u32,
    #[serde(flatten)]
    write: &'a StoredWrite,
}

pub(crate) fn encode_write(write: &StoredWrite) -> Result<Vec<u8>, String> {
    serde_json::to_vec(&WriteOut { format: FORMAT, write }).map_err(|e| e.to_string())
}

pub(crate) fn decode_write(bytes: &[u8]) -> Result<StoredWrite, String> {
    let envelope = envelope(bytes)?;
    serde_json::from_value(Value::Object(envelope)).map_err(|e| format!("bad pending write: {e}"))
}

/// A checkpoint hash as read: the checkpoint (without values), its metadata and parent id.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub(crate) checkpoint: Checkpoint,
    pub(crate) metadata: CheckpointMetadata,
    /// `metadata` as JSON, for filters.
    pub(crate) metadata_json: Map<String, Value>,
    pub(crate) parent: Option<String>,
}

/// The fields of a checkpoint hash, in the order [`decode_record`] reads them.
pub(crate) const RECORD_FIELDS: [&str; 4] = ["format", "checkpoint", "metadata", "parent"];

/// The `checkpoint` and `metadata` fields of a checkpoint hash.
pub(crate) fn encode_record(
    checkpoint: &Checkpoint,
    metadata: &CheckpointMetadata,
) -> Result<(Vec<u8>, Vec<u8>), String> {
    let checkpoint = serde_json::to_vec(checkpoint).map_err(|e| format!("checkpoint: {e}"))?;
    let metadata = serde_json::to_vec(metadata).map_err(|e| format!("metadata: {e}"))?;
    Ok((checkpoint, metadata))
}

/// A checkpoint hash read with `HMGET` of [`RECORD_FIELDS`]; `Ok(None)` when the hash does not exist.
pub(crate) fn decode_record(fields: &[Option<Vec<u8>>]) -> Result<Option<Record>, String> {
    let [format, checkpoint, metadata, parent] = fields else {
        return Err(format!("checkpoint hash read with {} fields", fields.len()));
    };
    let (Some(format), Some(checkpoint), Some(metadata)) = (format, checkpoint, metadata) else {
        if format.is_none() && checkpoint.is_none() && metadata.is_none() && parent.is_none() {
            return Ok(None);
        }
        return Err("checkpoint hash lacks one of 'format', 'checkpoint', 'metadata'".to_owned());
    };
    if format.as_slice() != FORMAT_FIELD.as_bytes() {
        return Err(format!("unknown format version '{}' (this build reads {FORMAT})", lossy(format)));
    }
    let checkpoint: Checkpoint =
        serde_json::from_slice(checkpoint).map_err(|e| format!("unreadable checkpoint: {e}"))?;
    let metadata_json: Map<String, Value> =
        serde_json::from_slice(metadata).map_err(|e| format!("unreadable metadata: {e}"))?;
    let metadata: CheckpointMetadata = serde_json::from_value(Value::Object(metadata_json.clone()))
        .map_err(|e| format!("unreadable metadata: {e}"))?;
    let parent = match parent {
        Some(bytes) => {
            Some(String::from_utf8(bytes.clone()).map_err(|_| "parent id is not UTF-8".to_owned())?)
        }
        None => None,
    };
    Ok(Some(Record { checkpoint, metadata, metadata_json, parent }))
}

/// A `Corrupt` error for a stored item of a checkpoint.
pub(crate) fn corrupt(thread_id: &str, checkpoint_id: &str, message: String) -> CheckpointError {
    CheckpointError::corrupt(thread_id, checkpoint_id, message)
}

/// The JSON object of a stored item, its format checked.
fn envelope(bytes: &[u8]) -> Result<Map<String, Value>, String> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| format!("unreadable JSON: {e}"))?;
    let Value::Object(map) = value else {
        return Err("stored item is not a JSON object".to_owned());
    };
    match map.get("format") {
        Some(Value::Number(n)) if n.as_u64() == Some(u64::from(FORMAT)) => Ok(map),
        Some(other) => Err(format!("unknown format version {other} (this build reads {FORMAT})")),
        None => Err("stored item has no format version".to_owned()),
    }
}

fn lossy(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    text.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn one(bytes: Vec<u8>) -> Result<Option<Value>, String> {
        decode_chain(&[Some(bytes)])
    }

    #[test]
    fn values_round_trip_and_null_differs_from_empty() {
        for value in [json!(null), json!(0), json!("s"), json!([1, {"a": null}])] {
            assert_eq!(one(encode_value(Some(&value)).unwrap()).unwrap(), Some(value));
        }
        assert_eq!(one(encode_value(None).unwrap()).unwrap(), None);
    }

    #[test]
    fn appended_values_rebuild_the_whole_list() {
        let base = encode_value(Some(&json!([1, 2]))).unwrap();
        let mid = encode_append("v1", Some(2), &[json!(3)]).unwrap();
        let top = encode_append("v2", Some(3), &[json!(4), json!(5)]).unwrap();
        let chain = [Some(top), Some(mid), Some(base)];
        assert_eq!(decode_chain(&chain).unwrap(), Some(json!([1, 2, 3, 4, 5])));
        let err = decode_chain(&chain[..2]).unwrap_err();
        assert!(err.contains("without a whole base"), "{err}");
        let err = decode_chain(&[chain[0].clone(), None]).unwrap_err();
        assert!(err.contains("base of an appended value is missing"), "{err}");
        let short = encode_value(Some(&json!([1]))).unwrap();
        let err = decode_chain(&[chain[0].clone(), chain[1].clone(), Some(short)]).unwrap_err();
        assert!(err.contains("has 1 elements, the appended value was made on 2"), "{err}");
        // An append without a length (the engine's own) is not checked against its base.
        let unsized_top = encode_append("v2", None, &[json!(4)]).unwrap();
        assert!(!String::from_utf8_lossy(&unsized_top).contains("base_len"));
        let any_base = encode_value(Some(&json!([7]))).unwrap();
        assert_eq!(decode_chain(&[Some(unsized_top), Some(any_base)]).unwrap(), Some(json!([7, 4])));
        let bad_len = br#"{"format": 1, "base": "v1", "base_len": "two", "append": []}"#.to_vec();
        assert!(decode_stored(&bad_len).unwrap_err().contains("bad 'base_len'"));
        let not_list = encode_value(Some(&json!({"a": 1}))).unwrap();
        let err = decode_chain(&[chain[0].clone(), Some(not_list)]).unwrap_err();
        assert!(err.contains("not a list"), "{err}");
    }

    #[test]
    fn unknown_format_truncation_and_garbage_are_errors() {
        let err = one(br#"{"format": 2, "value": 1}"#.to_vec()).unwrap_err();
        assert!(err.contains("unknown format version 2"), "{err}");
        let full = encode_value(Some(&json!({"long": "x".repeat(50)}))).unwrap();
        let err = one(full[..full.len() / 2].to_vec()).unwrap_err();
        assert!(err.contains("unreadable JSON"), "{err}");
        assert!(one(b"[1]".to_vec()).unwrap_err().contains("not a JSON object"));
        assert!(one(br#"{"value": 1}"#.to_vec()).unwrap_err().contains("no format version"));
        assert!(one(br#"{"format": 1}"#.to_vec()).unwrap_err().contains("neither"));
        assert!(decode_chain(&[None]).unwrap_err().contains("no value stored"));
    }

    #[test]
    fn writes_round_trip() {
        let write = StoredWrite {
            task_id: "t".into(),
            idx: -3,
            channel: "__interrupt__".into(),
            task_path: "~a".into(),
            value: json!([1]),
        };
        assert_eq!(decode_write(&encode_write(&write).unwrap()).unwrap(), write);
        assert!(decode_write(br#"{"format": 1, "idx": 0}"#).unwrap_err().contains("bad pending write"));
    }

    #[test]
    fn a_missing_hash_is_none_and_a_partial_one_an_error() {
        assert!(decode_record(&[None, None, None, None]).unwrap().is_none());
        let err = decode_record(&[Some(b"1".to_vec()), None, None, None]).unwrap_err();
        assert!(err.contains("lacks"), "{err}");
        let err = decode_record(&[Some(b"9".to_vec()), Some(b"{}".to_vec()), Some(b"{}".to_vec()), None]);
        assert!(err.unwrap_err().contains("unknown format version '9'"));
    }
}
