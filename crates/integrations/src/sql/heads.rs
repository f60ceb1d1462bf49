//! The expected-head checks of a batch of saves (one run per thread): which heads to read, and whether
//! each checkpoint extends the head left by what is stored and the ops before it.

use std::collections::{BTreeSet, HashMap};

use weft_graph::checkpoint::{CheckpointConfig, CheckpointError, ExpectedHead, SaveOp};

/// One checkpoint of the batch on a checked thread and namespace.
#[derive(Debug)]
struct PutHead {
    config: CheckpointConfig,
    id: String,
    expected: ExpectedHead,
}

/// The checks of a batch. The backend reads the head (the greatest checkpoint id) of each of
/// [`keys`](Self::keys) in the transaction that stores the batch, after locking them, and calls
/// [`verify`](Self::verify).
#[derive(Debug)]
pub(crate) struct HeadChecks {
    keys: Vec<(String, String)>,
    puts: Vec<PutHead>,
}

impl HeadChecks {
    /// The checks of `ops`, or `None` when no checkpoint expects a head.
    pub(crate) fn of(ops: &[SaveOp]) -> Option<Self> {
        let mut keys = BTreeSet::new();
        for op in ops {
            if let SaveOp::Put { config, expected_head, .. } = op {
                if expected_head.is_checked() {
                    keys.insert((config.thread_id.clone(), config.checkpoint_ns.clone()));
                }
            }
        }
        if keys.is_empty() {
            return None;
        }
        let puts = ops
            .iter()
            .filter_map(|op| match op {
                SaveOp::Put { config, checkpoint, expected_head, .. }
                    if keys.contains(&(config.thread_id.clone(), config.checkpoint_ns.clone())) =>
                {
                    Some(PutHead {
                        config: CheckpointConfig::clone(config),
                        id: checkpoint.id.clone(),
                        expected: expected_head.clone(),
                    })
                }
                _ => None,
            })
            .collect();
        Some(Self { keys: keys.into_iter().collect(), puts })
    }

    /// The threads and namespaces whose heads are checked, sorted (lock them in this order).
    pub(crate) fn keys(&self) -> &[(String, String)] {
        &self.keys
    }

    /// Checks every checkpoint against `heads` (the stored head of each key; a key left out has no
    /// checkpoint), as updated by the checkpoints before it in the batch.
    pub(crate) fn verify(&self, heads: &HashMap<(String, String), String>) -> Result<(), CheckpointError> {
        let mut current: HashMap<(&str, &str), Option<&str>> = HashMap::new();
        for put in &self.puts {
            let key = (put.config.thread_id.as_str(), put.config.checkpoint_ns.as_str());
            let head = current
                .entry(key)
                .or_insert_with(|| heads.get(&(key.0.to_owned(), key.1.to_owned())).map(String::as_str));
            put.expected.check(&put.config, &put.id, *head)?;
            if head.is_none_or(|h| h < put.id.as_str()) {
                *head = Some(put.id.as_str());
            }
        }
        Ok(())
    }
}
