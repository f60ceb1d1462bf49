//! The PostgreSQL saver's batched saves: every checkpoint, channel value and write of a batch in one
//! statement (one round trip, one implicit transaction), each table's rows passed as parallel arrays.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use weft_graph::checkpoint::{CheckpointError, SaveOp};

use super::Target;
use super::put::{check_config, check_text};
use super::saver::backend;
use crate::sql::batch::{BatchRows, PlannedCheckpoint, PlannedWrites, plan_batch};
use crate::sql::delta::{BlobRecord, DeltaPlanner};
use crate::sql::heads::{self, AssumedHead, Attempt, HeadChecks};

/// The batch statement: `weft_checkpoint_batch` (see [`super::schema`]) with the batch's rows as arrays.
/// Checkpoints `$1-$6` (thread, ns, id, parent, body, metadata); channel values `$7-$12` (thread, ns,
/// channel, version, base, blob); bases stored before the batch `$13-$16` (thread, ns, channel,
/// version); writes `$17-$24` (thread, ns, checkpoint, task, path, idx, channel, blob); heads the batch
/// assumes `$25-$28` (thread, ns, whether the head must be exactly `$28` (`NULL`: none) or below it),
/// sorted by thread and namespace. Nothing is written unless every base of `$13-$16` is stored and every
/// head is as assumed. Returns whether the bases are there, whether the heads are as assumed, how many
/// checkpoints were written, and the heads found.
const BATCH: &str = "SELECT * FROM weft_checkpoint_batch($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, \
    $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28)";

#[derive(Debug)]
struct CheckpointIn {
    thread: String,
    ns: String,
    id: String,
    parent: Option<String>,
    body: String,
    metadata: String,
}

#[derive(Debug)]
struct BlobIn {
    thread: String,
    ns: String,
    record: BlobRecord,
}

#[derive(Debug)]
struct WriteIn {
    thread: String,
    ns: String,
    checkpoint: String,
    task: String,
    path: String,
    idx: i64,
    channel: String,
    blob: Vec<u8>,
}

/// The rows of a batch, in order, with what one statement cannot hold twice merged as sequential saves
/// would leave it: the last checkpoint of an id, the first value of a version, the first regular write
/// and the last special write of a (task, index).
#[derive(Debug, Default)]
pub(super) struct Rows {
    checkpoints: Vec<CheckpointIn>,
    blobs: Vec<BlobIn>,
    writes: Vec<WriteIn>,
}

/// Checks every op (ids PostgreSQL text can hold) and turns it into rows (see [`plan_batch`]), merging
/// repeats; `threads` receives the threads of the ops read, even when one is invalid.
pub(super) fn rows_of(
    delta: &DeltaPlanner,
    ops: Vec<SaveOp>,
    threads: &mut BTreeSet<String>,
) -> Result<Rows, CheckpointError> {
    let mut rows: Rows = plan_batch(delta, ops, threads, |op| match op {
        SaveOp::Put { config, checkpoint, .. } => {
            check_config(config)?;
            check_text("checkpoint id", &checkpoint.id)
        }
        SaveOp::Writes { config, task_id, .. } => {
            check_config(config)?;
            // Writes naming no checkpoint are refused first, for that.
            if config.checkpoint_id.is_some() {
                check_text("task id", task_id)?;
            }
            Ok(())
        }
    })?;
    rows.merge_repeats();
    Ok(rows)
}

impl BatchRows for Rows {
    fn push_checkpoint(&mut self, checkpoint: PlannedCheckpoint) {
        let PlannedCheckpoint { config, id, body, metadata, records } = checkpoint;
        let config = Arc::unwrap_or_clone(config);
        for record in records {
            self.blobs.push(BlobIn {
                thread: config.thread_id.clone(),
                ns: config.checkpoint_ns.clone(),
                record,
            });
        }
        self.checkpoints.push(CheckpointIn {
            thread: config.thread_id,
            ns: config.checkpoint_ns,
            id,
            parent: config.checkpoint_id,
            body,
            metadata,
        });
    }

    fn push_writes(&mut self, writes: PlannedWrites) {
        let PlannedWrites { config, checkpoint_id, task_id, task_path, records } = writes;
        for record in records {
            self.writes.push(WriteIn {
                thread: config.thread_id.clone(),
                ns: config.checkpoint_ns.clone(),
                checkpoint: checkpoint_id.clone(),
                task: task_id.to_string(),
                path: task_path.to_string(),
                idx: record.idx,
                channel: record.channel,
                blob: record.blob,
            });
        }
    }
}

impl Rows {
    fn merge_repeats(&mut self) {
        // The last checkpoint of an id (rows of one statement have no order among themselves).
        let last: HashMap<(&str, &str, &str), usize> =
            self.checkpoints.iter().enumerate().map(|(i, c)| ((&*c.thread, &*c.ns, &*c.id), i)).collect();
        let keep: Vec<bool> = self
            .checkpoints
            .iter()
            .enumerate()
            .map(|(i, c)| last.get(&(&*c.thread, &*c.ns, &*c.id)) == Some(&i))
            .collect();
        drop(last);
        let mut keep = keep.into_iter();
        self.checkpoints.retain(|_| keep.next().unwrap_or(true));
        // The first value of a version.
        let mut seen = BTreeSet::new();
        self.blobs.retain(|b| {
            seen.insert((b.thread.clone(), b.ns.clone(), b.record.channel.clone(), b.record.version.clone()))
        });
        // The first regular write, the last special write, of a key.
        let mut first: HashMap<(String, String, String, String, i64), usize> = HashMap::new();
        let mut out: Vec<WriteIn> = Vec::with_capacity(self.writes.len());
        for w in self.writes.drain(..) {
            let key = (w.thread.clone(), w.ns.clone(), w.checkpoint.clone(), w.task.clone(), w.idx);
            match first.get(&key) {
                Some(&i) if w.idx < 0 => out[i] = w,
                Some(_) => {}
                None => {
                    first.insert(key, out.len());
                    out.push(w);
                }
            }
        }
        self.writes = out;
    }

    /// Stores every delta of the batch as its whole list.
    fn make_whole(&mut self) {
        for b in &mut self.blobs {
            if b.record.base_version.is_some() {
                b.record.blob = b.record.whole_blob();
                b.record.base_version = None;
            }
        }
    }
}

/// Writes the batch in one statement. Returns `false` when deltas were stored as whole lists because a
/// base they extend is gone (pruned or deleted meanwhile).
pub(super) async fn write(
    target: &mut Target<'_>,
    mut rows: Rows,
    checks: Option<&HeadChecks>,
) -> Result<bool, CheckpointError> {
    if execute(target, &rows, true, checks).await? {
        return Ok(true);
    }
    // The engine's appends have no whole list to fall back on.
    if let Some(b) = rows.blobs.iter().find(|b| b.record.base_version.is_some() && b.record.whole.is_none()) {
        return Err(b.record.missing_base(&b.thread));
    }
    rows.make_whole();
    if execute(target, &rows, false, checks).await? {
        return Ok(false);
    }
    Err(CheckpointError::backend("a batch of checkpoints was not stored: its values' bases are gone"))
}

/// Runs the statement; `false` when a base stored before the batch is missing (nothing written then).
async fn execute(
    target: &mut Target<'_>,
    rows: &Rows,
    check_bases: bool,
    checks: Option<&HeadChecks>,
) -> Result<bool, CheckpointError> {
    let mut attempts = heads::Attempts::new(checks);
    loop {
        let outcome = execute_assuming(target, rows, check_bases, checks, attempts.assumed()).await?;
        if let Some(stored) = attempts.settle(outcome)? {
            return Ok(stored);
        }
    }
}

/// Runs the statement assuming `assumed` heads: `Err` with the heads found when they are others.
async fn execute_assuming(
    target: &mut Target<'_>,
    rows: &Rows,
    check_bases: bool,
    checks: Option<&HeadChecks>,
    assumed: &[AssumedHead],
) -> Result<Attempt, CheckpointError> {
    let c = &rows.checkpoints;
    let (c_thread, c_ns, c_id, c_parent, c_body, c_meta) = (
        c.iter().map(|r| r.thread.as_str()).collect::<Vec<_>>(),
        c.iter().map(|r| r.ns.as_str()).collect::<Vec<_>>(),
        c.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        c.iter().map(|r| r.parent.as_deref()).collect::<Vec<_>>(),
        c.iter().map(|r| r.body.as_str()).collect::<Vec<_>>(),
        c.iter().map(|r| r.metadata.as_str()).collect::<Vec<_>>(),
    );
    let b = &rows.blobs;
    let (b_thread, b_ns, b_channel, b_version, b_base, b_blob) = (
        b.iter().map(|r| r.thread.as_str()).collect::<Vec<_>>(),
        b.iter().map(|r| r.ns.as_str()).collect::<Vec<_>>(),
        b.iter().map(|r| &*r.record.channel).collect::<Vec<_>>(),
        b.iter().map(|r| &*r.record.version).collect::<Vec<_>>(),
        b.iter().map(|r| r.record.base_version.as_deref()).collect::<Vec<_>>(),
        b.iter().map(|r| r.record.blob.as_deref()).collect::<Vec<_>>(),
    );
    // Bases the batch does not write itself must be stored already.
    let mut written = BTreeSet::new();
    let mut outside = BTreeSet::new();
    for r in b {
        if let (true, Some(base)) = (check_bases, &r.record.base_version) {
            if !written.contains(&(&r.thread, &r.ns, &r.record.channel, base)) {
                outside.insert((r.thread.as_str(), r.ns.as_str(), &*r.record.channel, &**base));
            }
        }
        written.insert((&r.thread, &r.ns, &r.record.channel, &r.record.version));
    }
    let (o_thread, o_ns, o_channel, o_version): (Vec<&str>, Vec<&str>, Vec<&str>, Vec<&str>) =
        outside.into_iter().fold(Default::default(), |mut acc, (t, n, c, v)| {
            acc.0.push(t);
            acc.1.push(n);
            acc.2.push(c);
            acc.3.push(v);
            acc
        });
    let w = &rows.writes;
    let (w_thread, w_ns, w_cp, w_task, w_path, w_idx, w_channel, w_blob) = (
        w.iter().map(|r| r.thread.as_str()).collect::<Vec<_>>(),
        w.iter().map(|r| r.ns.as_str()).collect::<Vec<_>>(),
        w.iter().map(|r| r.checkpoint.as_str()).collect::<Vec<_>>(),
        w.iter().map(|r| r.task.as_str()).collect::<Vec<_>>(),
        w.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(),
        w.iter().map(|r| r.idx).collect::<Vec<_>>(),
        w.iter().map(|r| r.channel.as_str()).collect::<Vec<_>>(),
        w.iter().map(|r| r.blob.as_slice()).collect::<Vec<_>>(),
    );
    let (g_thread, g_ns, g_exact, g_want) = (
        assumed.iter().map(|h| h.thread.as_str()).collect::<Vec<_>>(),
        assumed.iter().map(|h| h.ns.as_str()).collect::<Vec<_>>(),
        assumed.iter().map(|h| h.exact).collect::<Vec<_>>(),
        assumed.iter().map(|h| h.want.as_deref()).collect::<Vec<_>>(),
    );
    let query = || {
        sqlx::query_as::<_, (Option<bool>, Option<bool>, i64, Vec<Option<String>>)>(BATCH)
            .bind(&c_thread)
            .bind(&c_ns)
            .bind(&c_id)
            .bind(&c_parent)
            .bind(&c_body)
            .bind(&c_meta)
            .bind(&b_thread)
            .bind(&b_ns)
            .bind(&b_channel)
            .bind(&b_version)
            .bind(&b_base)
            .bind(&b_blob)
            .bind(&o_thread)
            .bind(&o_ns)
            .bind(&o_channel)
            .bind(&o_version)
            .bind(&w_thread)
            .bind(&w_ns)
            .bind(&w_cp)
            .bind(&w_task)
            .bind(&w_path)
            .bind(&w_idx)
            .bind(&w_channel)
            .bind(&w_blob)
            .bind(&g_thread)
            .bind(&g_ns)
            .bind(&g_exact)
            .bind(&g_want)
    };
    heads::precheck(checks, assumed)?;
    let (ok, heads_ok, stored, found) = target.fetch_one("put_batch", query).await.map_err(backend)?;
    if heads_ok != Some(true) {
        let found = assumed
            .iter()
            .zip(found)
            .filter_map(|(h, head)| Some(((h.thread.clone(), h.ns.clone()), head?)))
            .collect();
        return Ok(Err(found));
    }
    if ok != Some(true) {
        return Ok(Ok(false));
    }
    if usize::try_from(stored).unwrap_or(0) < c.len() {
        return Err(CheckpointError::backend(
            "a batch of checkpoints was not stored whole: another thread's row has one of its keys",
        ));
    }
    Ok(Ok(true))
}
