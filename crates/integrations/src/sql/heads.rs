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

/// What a batch assumes of the stored head of one thread and namespace: exactly `want` (`None`: no
/// checkpoint) when its first checkpoint there expects a head, else a head below `want` (its first
/// checkpoint's id), so that the checkpoint becomes the head.
#[derive(Debug, Clone)]
pub(crate) struct AssumedHead {
    pub(crate) thread: String,
    pub(crate) ns: String,
    pub(crate) exact: bool,
    pub(crate) want: Option<String>,
}

/// The checks of a batch. A backend either reads the head (the greatest checkpoint id) of each of
/// [`keys`](Self::keys) in the transaction that stores the batch, after locking them, and calls
/// [`verify`](Self::verify); or verifies the [`assumptions`](Self::assumptions) and stores the batch
/// only if the stored heads are those.
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

    /// What the batch assumes of each key's stored head, in the order of [`keys`](Self::keys).
    pub(crate) fn assumptions(&self) -> Vec<AssumedHead> {
        self.keys
            .iter()
            .filter_map(|(thread, ns)| {
                let first = self
                    .puts
                    .iter()
                    .find(|p| p.config.thread_id == *thread && p.config.checkpoint_ns == *ns)?;
                let (exact, want) = match &first.expected {
                    ExpectedHead::Id(id) => (true, Some(id.clone())),
                    ExpectedHead::Empty => (true, None),
                    ExpectedHead::Any => (false, Some(first.id.clone())),
                };
                Some(AssumedHead { thread: thread.clone(), ns: ns.clone(), exact, want })
            })
            .collect()
    }

    /// Checks every checkpoint against `heads` (the stored head of each key; a key left out has no
    /// checkpoint), as updated by the checkpoints before it in the batch.
    pub(crate) fn verify(&self, heads: &HashMap<(String, String), String>) -> Result<(), CheckpointError> {
        let mut current: HashMap<(&str, &str), Option<&str>> = HashMap::new();
        for put in &self.puts {
            let key = (put.config.thread_id.as_str(), put.config.checkpoint_ns.as_str());
            let head = current.entry(key).or_insert_with(|| {
                let stored = heads.get(&(key.0.to_owned(), key.1.to_owned())).map(String::as_str);
                let of_key = |p: &&PutHead| p.config.thread_id == key.0 && p.config.checkpoint_ns == key.1;
                match stored {
                    // The head is a checkpoint of this batch: the batch again (a retry after its reply
                    // was lost). It is checked as it was the first time, from what its first checkpoint
                    // expected.
                    Some(h) if self.puts.iter().filter(of_key).any(|p| p.id == h) => {
                        self.puts.iter().find(of_key).and_then(|first| match &first.expected {
                            ExpectedHead::Id(id) => Some(id.as_str()),
                            _ => None,
                        })
                    }
                    other => other,
                }
            });
            put.expected.check(&put.config, &put.id, *head)?;
            if head.is_none_or(|h| h < put.id.as_str()) {
                *head = Some(put.id.as_str());
            }
        }
        Ok(())
    }
}
