//! The planning of a batch of saves shared by the SQL savers: each op checked and turned into rows, deltas
//! planned in order; each backend collects the rows in its own [`BatchRows`] and writes them its way.

use std::collections::BTreeSet;
use std::sync::Arc;

use weft_graph::checkpoint::{CheckpointConfig, CheckpointError, SaveOp};

use super::delta::{BlobRecord, DeltaPlanner};
use super::rows::{self, WriteRecord};
use crate::savers::writes_checkpoint;

/// A checkpoint of a batch, ready to insert.
#[derive(Debug)]
pub(crate) struct PlannedCheckpoint {
    /// Its thread and namespace, and its parent's id.
    pub(crate) config: Arc<CheckpointConfig>,
    pub(crate) id: String,
    /// The checkpoint without channel values, as JSON text.
    pub(crate) body: String,
    /// The metadata as JSON text.
    pub(crate) metadata: String,
    /// Its channel values (whole, or deltas on their base).
    pub(crate) records: Vec<BlobRecord>,
}

/// The pending writes of a task in a batch, ready to insert.
#[derive(Debug)]
pub(crate) struct PlannedWrites {
    pub(crate) config: Arc<CheckpointConfig>,
    /// The checkpoint the writes belong to.
    pub(crate) checkpoint_id: String,
    pub(crate) task_id: Arc<str>,
    pub(crate) task_path: Arc<str>,
    pub(crate) records: Vec<WriteRecord>,
}

/// The rows of a batch as one backend collects them, in the order of the ops.
pub(crate) trait BatchRows: Default {
    /// Adds a checkpoint with its channel values.
    fn push_checkpoint(&mut self, checkpoint: PlannedCheckpoint);

    /// Adds the writes of a task.
    fn push_writes(&mut self, writes: PlannedWrites);
}

/// Checks every op (with `check` first, the backend's own checks) and turns it into rows, planning deltas
/// in order (each checkpoint's plan sees the ones before it). Nothing is written yet; an invalid op fails
/// the whole batch. `threads` receives the threads of the ops read, even when one is invalid.
pub(crate) fn plan_batch<R: BatchRows>(
    delta: &DeltaPlanner,
    ops: Vec<SaveOp>,
    threads: &mut BTreeSet<String>,
    check: impl Fn(&SaveOp) -> Result<(), CheckpointError>,
) -> Result<R, CheckpointError> {
    let mut rows = R::default();
    for op in ops {
        threads.insert(op.thread_id().to_owned());
        check(&op)?;
        match op {
            SaveOp::Put { config, mut checkpoint, metadata, mut new_versions, appends, .. } => {
                let rows::PreparedPut { body, metadata, values } =
                    rows::prepare_put(&config, &mut checkpoint, &metadata, &mut new_versions)?;
                let mut plan = delta.plan_with_appends(
                    &config.thread_id,
                    &config.checkpoint_ns,
                    values,
                    new_versions,
                    appends,
                );
                let records = std::mem::take(&mut plan.records);
                // The next checkpoint of the batch may extend these lists; a failed batch forgets them.
                delta.commit(plan, &[]);
                rows.push_checkpoint(PlannedCheckpoint {
                    config,
                    id: checkpoint.id,
                    body,
                    metadata,
                    records,
                });
            }
            SaveOp::Writes { config, writes, task_id, task_path } => {
                let checkpoint_id = writes_checkpoint(&config, &task_id)?.to_owned();
                let records = rows::write_records(writes);
                rows.push_writes(PlannedWrites { config, checkpoint_id, task_id, task_path, records });
            }
        }
    }
    Ok(rows)
}
