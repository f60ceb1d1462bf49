//! The step `prune` shares between the SQL backends: kept values stored as deltas become whole values.
//!
//! A kept checkpoint's value may be a delta whose chain of bases runs through versions only dropped
//! checkpoints listed. Each backend reads those deltas (the targets) with every row of their chains, in
//! the prune's transaction; [`whole_values`] rebuilds them with the reads' own code ([`Values`]) and the
//! backend stores each one whole at the same version, so the rows of the chain can go with the dropped
//! checkpoints. A delta whose base a kept checkpoint lists stays a delta: its chain ends in kept rows.

use std::collections::HashMap;

use super::codec;
use super::rows::{BlobRow, Values, blob_map};

/// A row read for the rewrite: a target (a kept delta to store whole) or a row of a target's chain.
#[derive(Debug, Clone)]
pub(crate) struct ChainRow {
    pub(crate) ns: String,
    pub(crate) row: BlobRow,
    pub(crate) target: bool,
}

/// A row as the backends' queries return it: namespace, channel, version, base version, blob, whether it
/// is a target.
pub(crate) type ChainTuple = (String, String, String, Option<String>, Option<Vec<u8>>, bool);

impl From<ChainTuple> for ChainRow {
    fn from((ns, channel, version, base_version, blob, target): ChainTuple) -> Self {
        Self { ns, row: BlobRow { channel, version, base_version, blob }, target }
    }
}

/// A kept value to store whole at its version.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WholeValue {
    pub(crate) ns: String,
    pub(crate) channel: String,
    pub(crate) version: String,
    /// The whole value as a tagged blob.
    pub(crate) blob: Vec<u8>,
}

type Namespace = (Vec<(String, String)>, Vec<BlobRow>);

/// The whole value of every target among `rows` (which hold the rows of the targets' chains). A target
/// whose chain is broken or unreadable is left out: it stays a delta and the prune keeps its chain, so a
/// read still reports what is wrong with it.
pub(crate) fn whole_values(thread_id: &str, rows: impl IntoIterator<Item = ChainRow>) -> Vec<WholeValue> {
    // Per namespace: the targets' (channel, version) and every row read.
    let mut by_ns: HashMap<String, Namespace> = HashMap::new();
    for ChainRow { ns, row, target } in rows {
        let (targets, chain) = by_ns.entry(ns).or_default();
        if target {
            targets.push((row.channel.clone(), row.version.clone()));
        }
        chain.push(row);
    }
    let mut out = Vec::new();
    for (ns, (targets, chain)) in by_ns {
        let chain = blob_map(chain);
        let mut values = Values::new(&chain);
        for (channel, version) in targets {
            match values.get(&channel, &version) {
                Ok(Some(value)) => {
                    let blob = codec::encode_full(&value);
                    out.push(WholeValue { ns: ns.clone(), channel, version, blob });
                }
                Ok(None) => {}
                Err(message) => tracing::warn!(
                    thread_id,
                    checkpoint_ns = ns.as_str(),
                    channel,
                    version,
                    message,
                    "prune keeps a delta whose chain cannot be read as it is"
                ),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn row(ns: &str, version: &str, base: Option<&str>, blob: Vec<u8>, target: bool) -> ChainRow {
        let row = BlobRow {
            channel: "m".into(),
            version: version.into(),
            base_version: base.map(Into::into),
            blob: Some(blob),
        };
        ChainRow { ns: ns.into(), row, target }
    }

    #[test]
    fn targets_are_rebuilt_per_namespace_from_their_chains() {
        let rows = vec![
            row("", "1", None, codec::encode_full(&json!([1])), false),
            row("", "2", Some("1"), codec::encode_append(&[json!(2)]), false),
            row("", "3", Some("2"), codec::encode_append(&[json!(3)]), true),
            row("sub", "1", None, codec::encode_full(&json!(["a"])), false),
            row("sub", "2", Some("1"), codec::encode_append(&[json!("b")]), true),
        ];
        let mut whole = whole_values("t", rows);
        whole.sort_by(|a, b| a.ns.cmp(&b.ns));
        assert_eq!(whole.len(), 2);
        assert_eq!((whole[0].ns.as_str(), whole[0].version.as_str()), ("", "3"));
        assert_eq!(codec::decode(&whole[0].blob), Ok(codec::Decoded::Full(json!([1, 2, 3]))));
        assert_eq!(codec::decode(&whole[1].blob), Ok(codec::Decoded::Full(json!(["a", "b"]))));
    }

    #[test]
    fn a_broken_chain_is_left_as_it_is() {
        let rows = vec![row("", "3", Some("2"), codec::encode_append(&[json!(3)]), true)];
        assert!(whole_values("t", rows).is_empty());
    }
}
