//! The stored forms of values: self-describing blobs with a format tag, and checkpoint bodies.
//!
//! Every channel value and every pending write is stored as a blob that starts with an ASCII tag naming
//! its format and version, then the payload:
//!
//! - `json:1:` and JSON text: a whole value.
//! - `json-append:1:` and a JSON array: the elements appended to the value at the row's base version
//!   (delta storage of append-only channels; see [`super::delta`]).
//!
//! A blob whose tag is unknown (written by a newer weft, or damaged), whose payload does not parse, or
//! which is truncated is an error naming what is wrong; it is never read as a default.

use serde_json::Value;
use weft_graph::checkpoint::{CHECKPOINT_VERSION, Checkpoint};

/// Tag of a whole JSON value, format version 1.
pub(crate) const FULL_TAG: &[u8] = b"json:1:";
/// Tag of the elements appended to a base value, format version 1.
pub(crate) const APPEND_TAG: &[u8] = b"json-append:1:";

/// What a blob holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decoded {
    /// A whole value.
    Full(Value),
    /// Elements appended to the base value (a JSON array).
    Append(Vec<Value>),
}

/// A whole value as a tagged blob.
pub(crate) fn encode_full(value: &Value) -> Vec<u8> {
    tagged(FULL_TAG, value)
}

/// A whole list value as a tagged blob (the same bytes as [`encode_full`] of the list).
pub(crate) fn encode_full_list(items: &[Value]) -> Vec<u8> {
    let mut out = FULL_TAG.to_vec();
    // See `encode_append`: cannot fail.
    let _ = serde_json::to_writer(&mut out, items);
    out
}

/// Appended elements as a tagged blob.
pub(crate) fn encode_append(elements: &[Value]) -> Vec<u8> {
    let mut out = APPEND_TAG.to_vec();
    // Writing a `Value` into a Vec cannot fail: keys are strings and numbers are finite.
    let _ = serde_json::to_writer(&mut out, elements);
    out
}

fn tagged(tag: &[u8], value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(tag.len() + 64);
    out.extend_from_slice(tag);
    // See `encode_append`: cannot fail.
    let _ = serde_json::to_writer(&mut out, value);
    out
}

/// Reads a tagged blob; the error says what is wrong with it.
pub(crate) fn decode(blob: &[u8]) -> Result<Decoded, String> {
    if let Some(payload) = blob.strip_prefix(FULL_TAG) {
        return serde_json::from_slice(payload)
            .map(Decoded::Full)
            .map_err(|e| format!("unreadable json:1 payload ({} bytes): {e}", payload.len()));
    }
    if let Some(payload) = blob.strip_prefix(APPEND_TAG) {
        return serde_json::from_slice(payload)
            .map(Decoded::Append)
            .map_err(|e| format!("unreadable json-append:1 payload ({} bytes): {e}", payload.len()));
    }
    Err(match tag_of(blob) {
        Some(tag) => format!("unknown blob format '{tag}' (this build reads json:1 and json-append:1)"),
        None => format!("blob of {} bytes has no format tag", blob.len()),
    })
}

/// Reads a blob that must hold a whole value (pending writes).
pub(crate) fn decode_full(blob: &[u8]) -> Result<Value, String> {
    match decode(blob)? {
        Decoded::Full(value) => Ok(value),
        Decoded::Append(_) => Err("a json-append blob where a whole value is expected".into()),
    }
}

/// The `name:version` tag at the start of a blob, when it looks like one.
fn tag_of(blob: &[u8]) -> Option<String> {
    let head = &blob[..blob.len().min(64)];
    let mut colons = head.iter().enumerate().filter(|(_, b)| **b == b':').map(|(i, _)| i);
    let (first, second) = (colons.next()?, colons.next()?);
    let tag = &head[..second];
    let printable = tag.iter().all(|b| b.is_ascii_graphic());
    (printable && first > 0).then(|| String::from_utf8_lossy(tag).into_owned())
}

/// A checkpoint without its channel values, as stored JSON text.
pub(crate) fn encode_checkpoint(checkpoint: &Checkpoint) -> Result<String, String> {
    serde_json::to_string(checkpoint).map_err(|e| e.to_string())
}

/// Reads a stored checkpoint body, checking its format version.
pub(crate) fn decode_checkpoint(text: &str) -> Result<Checkpoint, String> {
    let checkpoint: Checkpoint =
        serde_json::from_str(text).map_err(|e| format!("unreadable checkpoint record: {e}"))?;
    if checkpoint.v > CHECKPOINT_VERSION {
        return Err(format!(
            "checkpoint format version {} is newer than this build reads ({CHECKPOINT_VERSION})",
            checkpoint.v
        ));
    }
    Ok(checkpoint)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn full_values_round_trip_with_their_tag() {
        let value = json!({"a": [1, "two", null], "b": {"c": 2.5}});
        let blob = encode_full(&value);
        assert!(blob.starts_with(b"json:1:"));
        assert_eq!(decode(&blob), Ok(Decoded::Full(value)));
    }

    #[test]
    fn appended_elements_round_trip() {
        let blob = encode_append(&[json!(1), json!({"m": "x"})]);
        assert_eq!(decode(&blob), Ok(Decoded::Append(vec![json!(1), json!({"m": "x"})])));
    }

    #[test]
    fn unknown_versions_are_named() {
        let err = decode(b"json:9:{}").unwrap_err();
        assert!(err.contains("unknown blob format 'json:9'"), "{err}");
        let err = decode(b"\x00\x01garbage").unwrap_err();
        assert!(err.contains("no format tag"), "{err}");
    }

    #[test]
    fn truncated_payloads_are_errors() {
        let blob = encode_full(&json!({"long": "value", "list": [1, 2, 3]}));
        let err = decode(&blob[..blob.len() - 4]).unwrap_err();
        assert!(err.contains("unreadable json:1 payload"), "{err}");
        assert!(decode(b"json:1:").is_err());
    }

    #[test]
    fn newer_checkpoint_formats_are_refused() {
        let text = r#"{"v": 99, "id": "x", "ts": "t", "channel_values": {}, "channel_versions": {},
                       "versions_seen": {}}"#;
        let err = decode_checkpoint(text).unwrap_err();
        assert!(err.contains("format version 99"), "{err}");
    }
}
