//! The expected-head checks of a batch of saves (one run per thread): which heads to read, and whether
//! each checkpoint extends the head left by what is stored and the ops before it.

use std::collections::{BTreeSet, HashMap};

use weft_graph::checkpoint::{CheckpointConfig, CheckpointError, ExpectedHead, HeadConflict, SaveOp};

/// One checkpoint of the batch on a checked thread and namespace.
#[derive(Debug, Clone)]
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

/// The checks of a batch. A backend stores the batch only if the stored heads (the greatest checkpoint
/// id of each thread and namespace, read where no other writer can move them) are the
/// [`assumptions`](Self::assumptions), and on a mismatch reads the heads found and asks
/// [`reassume`] (the batch again) or [`conflict`]; [`verify`](Self::verify) names the checkpoint
/// that fails.
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

    /// The checks of several batches written as one (in order), or `None` when none checks a head.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub(crate) fn merge<'a>(checks: impl IntoIterator<Item = &'a HeadChecks>) -> Option<Self> {
        let mut keys = BTreeSet::new();
        let mut puts = Vec::new();
        for c in checks {
            keys.extend(c.keys.iter().cloned());
            puts.extend(c.puts.iter().cloned());
        }
        if keys.is_empty() {
            return None;
        }
        Some(Self { keys: keys.into_iter().collect(), puts })
    }

    /// What the batch assumes of each checked thread and namespace's stored head, sorted by both.
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

/// What one attempt of a batch that checks heads in the database did: stored it (`Ok`, with whether the
/// bases of its deltas were there; nothing is written when they are not), or wrote nothing because the
/// stored heads (`Err`, the head of each assumed key that has one) are not those it assumed.
pub(crate) type Attempt = Result<bool, HashMap<(String, String), String>>;

/// The attempts of a batch that checks heads in the database: the first assumes the heads `checks`
/// expects; when the stored heads are others, a second assumes those found if the batch's checks still
/// pass on them (see [`reassume`]); other heads found again are a conflict.
///
/// ```text
/// let mut attempts = Attempts::new(checks);
/// loop {
///     let outcome = run(attempts.assumed()).await?;
///     if let Some(stored) = attempts.settle(outcome)? { return Ok(stored); }
/// }
/// ```
pub(crate) struct Attempts<'a> {
    checks: Option<&'a HeadChecks>,
    assumed: Vec<AssumedHead>,
    retried: bool,
}

impl<'a> Attempts<'a> {
    pub(crate) fn new(checks: Option<&'a HeadChecks>) -> Self {
        Self { checks, assumed: checks.map(HeadChecks::assumptions).unwrap_or_default(), retried: false }
    }

    /// The heads the next attempt assumes.
    pub(crate) fn assumed(&self) -> &[AssumedHead] {
        &self.assumed
    }

    /// What an attempt's outcome means: `Some` when the batch is done (with whether the bases of its
    /// deltas were there), `None` when it is to be tried again with [`Attempts::assumed`].
    pub(crate) fn settle(&mut self, outcome: Attempt) -> Result<Option<bool>, CheckpointError> {
        match outcome {
            Ok(stored) => Ok(Some(stored)),
            Err(found) if self.retried => Err(conflict(self.checks, &self.assumed, &found)),
            Err(found) => {
                self.assumed = reassume(self.checks, &self.assumed, &found)?;
                self.retried = true;
                Ok(None)
            }
        }
    }
}

/// Before an attempt assuming `assumed`: the batch fails for any stored heads if it fails for these.
pub(crate) fn precheck(checks: Option<&HeadChecks>, assumed: &[AssumedHead]) -> Result<(), CheckpointError> {
    let Some(checks) = checks else { return Ok(()) };
    let heads = assumed
        .iter()
        .filter(|h| h.exact)
        .filter_map(|h| Some(((h.thread.clone(), h.ns.clone()), h.want.clone()?)))
        .collect();
    checks.verify(&heads)
}

/// After an attempt found heads other than those it assumed: the heads a second attempt assumes when the
/// batch's checks still pass on the found ones (a head is a checkpoint of the batch itself: the batch
/// again, after its reply was lost), or the conflict.
pub(crate) fn reassume(
    checks: Option<&HeadChecks>,
    assumed: &[AssumedHead],
    found: &HashMap<(String, String), String>,
) -> Result<Vec<AssumedHead>, CheckpointError> {
    match checks.map(|c| c.verify(found)) {
        Some(Ok(())) => Ok(assumed
            .iter()
            .map(|h| AssumedHead {
                exact: true,
                want: found.get(&(h.thread.clone(), h.ns.clone())).cloned(),
                ..h.clone()
            })
            .collect()),
        Some(Err(conflict)) => Err(conflict),
        None => Err(conflict_without_detail(assumed)),
    }
}

/// The conflict of a second attempt that found other heads again.
pub(crate) fn conflict(
    checks: Option<&HeadChecks>,
    assumed: &[AssumedHead],
    found: &HashMap<(String, String), String>,
) -> CheckpointError {
    checks.and_then(|c| c.verify(found).err()).unwrap_or_else(|| conflict_without_detail(assumed))
}

/// A conflict when the stored heads differ from those a batch assumed, in a way its own checks do not
/// name (a thread whose first checkpoint in the batch expected nothing, stored after a newer one).
fn conflict_without_detail(assumed: &[AssumedHead]) -> CheckpointError {
    let first = assumed.first();
    CheckpointError::Conflict(Box::new(HeadConflict {
        thread_id: first.map(|h| h.thread.clone()).unwrap_or_default(),
        checkpoint_ns: first.map(|h| h.ns.clone()).unwrap_or_default(),
        checkpoint_id: String::new(),
        expected: first.and_then(|h| h.want.clone()),
        found: None,
    }))
}
