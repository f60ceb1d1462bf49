//! Group commit: the batches of every run saving at once, and the rows of callers that write beside the
//! checkpoints ([`SqliteSaver::write_with_checkpoints`](super::SqliteSaver::write_with_checkpoints)),
//! committed in one transaction.
//!
//! Each caller queues its rows and waits for its answer; one committer task (spawned when the first
//! batch comes, again if its runtime ended) takes what has queued since its last commit and writes it as
//! one script: one round trip to SQLite's worker thread and one commit for several runs' saves instead of
//! one each. Nobody is answered before the transaction holding their rows is committed, so durability is
//! as before. When a combined transaction fails (one batch's expected head is not the stored one, a
//! statement fails), each batch is written again alone, so that only its own caller sees its error.

use std::sync::Mutex;

use tokio::sync::{mpsc, oneshot};
use weft_graph::checkpoint::CheckpointError;

use super::Db;
use super::batch::{self, Rows};
use crate::sql::heads::HeadChecks;

/// The most batches committed in one transaction (each one's statements and arguments are bounded).
const MAX_GROUP: usize = 64;

/// A statement run in the saver's next transaction (see
/// [`SqliteSaver::write_with_checkpoints`](super::SqliteSaver::write_with_checkpoints)): SQL text with a
/// `?` per parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlStatement {
    sql: &'static str,
    params: Vec<SqlParam>,
}

impl SqlStatement {
    /// A statement of `sql` (one statement, without a trailing `;`) binding `params` in order.
    pub fn new(sql: &'static str, params: Vec<SqlParam>) -> Self {
        Self { sql, params }
    }

    pub(super) fn sql(&self) -> &'static str {
        self.sql
    }

    pub(super) fn params(&self) -> &[SqlParam] {
        &self.params
    }
}

/// A value bound to a [`SqlStatement`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SqlParam {
    /// `NULL`.
    Null,
    /// An integer.
    Integer(i64),
    /// Text.
    Text(String),
}

/// One caller's part of a transaction.
struct Entry {
    rows: Rows,
    checks: Option<HeadChecks>,
    statements: Vec<SqlStatement>,
    /// The answer: whether the bases of the batch's deltas were stored (see [`batch::write`]).
    done: oneshot::Sender<Result<bool, CheckpointError>>,
}

/// The queue of one database's writes, and its committer.
pub(super) struct GroupCommit {
    db: Db,
    sender: Mutex<Option<mpsc::UnboundedSender<Entry>>>,
}

impl GroupCommit {
    pub(super) fn new(db: Db) -> Self {
        Self { db, sender: Mutex::new(None) }
    }

    /// Queues the rows and waits until the transaction holding them is committed (or has failed).
    pub(super) async fn commit(
        &self,
        rows: Rows,
        checks: Option<HeadChecks>,
        statements: Vec<SqlStatement>,
    ) -> Result<bool, CheckpointError> {
        let (done, answer) = oneshot::channel();
        self.send(Entry { rows, checks, statements, done })?;
        answer
            .await
            .map_err(|_| CheckpointError::backend("sqlite: the group committer stopped before answering"))?
    }

    fn send(&self, entry: Entry) -> Result<(), CheckpointError> {
        let mut sender = self.sender.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = match sender.as_ref() {
            Some(queue) => match queue.send(entry) {
                Ok(()) => return Ok(()),
                Err(mpsc::error::SendError(entry)) => entry,
            },
            None => entry,
        };
        // No committer yet, or its runtime has ended: one on the caller's runtime.
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| CheckpointError::backend("sqlite: a save needs a tokio runtime"))?;
        let (tx, rx) = mpsc::unbounded_channel();
        runtime.spawn(committer(self.db.clone(), rx));
        tx.send(entry).map_err(|_| CheckpointError::backend("sqlite: the group committer did not start"))?;
        *sender = Some(tx);
        Ok(())
    }
}

/// Commits what has queued, as long as the saver lives.
async fn committer(db: Db, mut queue: mpsc::UnboundedReceiver<Entry>) {
    while let Some(first) = queue.recv().await {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(entry) => group.push(entry),
                Err(_) => break,
            }
        }
        commit_group(&db, group).await;
    }
}

/// Writes a group in one transaction, or each of its entries alone when that fails.
async fn commit_group(db: &Db, mut group: Vec<Entry>) {
    if group.len() == 1 {
        if let Some(mut entry) = group.pop() {
            let statements: Vec<&SqlStatement> = entry.statements.iter().collect();
            let result = write(db, &mut entry.rows, entry.checks.as_ref(), &statements).await;
            let _ = entry.done.send(result);
        }
        return;
    }
    let sizes: Vec<[usize; 3]> = group.iter().map(|e| e.rows.sizes()).collect();
    let mut rows = Rows::default();
    for entry in &mut group {
        rows.append(&mut entry.rows);
    }
    let checks = HeadChecks::merge(group.iter().filter_map(|e| e.checks.as_ref()));
    let statements: Vec<&SqlStatement> = group.iter().flat_map(|e| &e.statements).collect();
    let result = write(db, &mut rows, checks.as_ref(), &statements).await;
    drop(statements);
    match result {
        Ok(stored) => {
            for entry in group {
                let _ = entry.done.send(Ok(stored));
            }
        }
        Err(_) => {
            // Each alone, with its own rows and checks, so that an error is its own caller's.
            for (entry, mut part) in group.into_iter().zip(rows.split(&sizes)) {
                let statements: Vec<&SqlStatement> = entry.statements.iter().collect();
                let result = write(db, &mut part, entry.checks.as_ref(), &statements).await;
                let _ = entry.done.send(result);
            }
        }
    }
}

async fn write(
    db: &Db,
    rows: &mut Rows,
    checks: Option<&HeadChecks>,
    statements: &[&SqlStatement],
) -> Result<bool, CheckpointError> {
    let conn = db.writer.acquire().await.map_err(super::saver::backend)?;
    batch::write(&mut batch::Writer::new(conn, db.temp_ready), rows, checks, statements).await
}
