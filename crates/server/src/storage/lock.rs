//! [`RecordsLock`]: the one way to the records. Embedded, a mutex of this process. Scaled out, also a
//! turn of PostgreSQL's (see [`super::postgres`]): a transaction holding the records' advisory lock, after
//! which the rows other instances wrote since this one last looked are read in: what a guard shows is
//! never stale, and no other instance changes the records until the guard's write commits (or the guard
//! is let go). [`RecordsLock::read`] brings them up to date the same way without PostgreSQL's lock, for
//! callers that only read.
//!
//! The mutex is unfair until a waiter has starved for 0.5 ms (`async_lock`'s eventual fairness). A fair
//! mutex hands the lock to the first waiter, which holds it before it is even running again: under load
//! the records were then mostly "taken" by waiters waiting to be scheduled on the other worker, and most
//! turns queued behind them. An unfair one is taken by whoever is running when it is let go.

use std::ops::{ControlFlow, Deref, DerefMut};

use async_lock::{Mutex, MutexGuard};

use super::{Records, Source, ThreadScan};
use crate::error::ServerError;
use crate::model::{RunRecord, Thread};

/// What a change of the records is about. Scaled out, turns of different keys go on side by side across
/// the instances, and turns of one key one after another; embedded, every turn is this process's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key<'a> {
    /// A thread: its record, its runs, its state.
    Thread(&'a str),
    /// An assistant and its versions.
    Assistant(&'a str),
    /// A cron.
    Cron(&'a str),
    /// Everything at once (start-up): waits for every other turn, and they for it.
    All,
}

impl Key<'_> {
    /// The name of its lock (none for [`Key::All`], the records' own lock).
    fn name(self) -> Option<String> {
        match self {
            Key::Thread(id) => Some(format!("thread:{id}")),
            Key::Assistant(id) => Some(format!("assistant:{id}")),
            Key::Cron(id) => Some(format!("cron:{id}")),
            Key::All => None,
        }
    }
}

/// The records behind their lock.
#[derive(Debug)]
pub(crate) struct RecordsLock {
    inner: Mutex<Records>,
    /// The table, for scans that need no lock (none in the in-memory mode).
    source: Option<Source>,
}

/// What a thread search matches, beside its scan's `ids`.
pub(crate) type ThreadFilter<'a> = &'a (dyn Fn(&Thread) -> bool + Sync);

impl RecordsLock {
    /// Puts `records` behind the lock.
    pub(crate) fn new(records: Records) -> Self {
        let source = records.source();
        Self { inner: Mutex::new(records), source }
    }

    /// A page of the threads `filter` matches (`None`: every thread), in the scan's order, from `offset`,
    /// at most `limit`; and how many match in all. Read from the table without the records' lock, a page
    /// at a time: memory holds one page and the answer, whatever the number of threads; a search without
    /// a filter reads only its page and a count. In the in-memory mode, from memory under the lock.
    pub(crate) async fn search_threads(
        &self,
        scan: ThreadScan<'_>,
        filter: Option<ThreadFilter<'_>>,
        offset: usize,
        limit: usize,
    ) -> Result<(Vec<Thread>, usize), ServerError> {
        let Some(source) = &self.source else {
            let records = self.read().await?;
            let mut found: Vec<&Thread> = records
                .cached_threads()
                .filter(|t| scan.ids.is_none_or(|ids| ids.contains(&t.thread_id)))
                .filter(|t| !scan.sweepable_only || records.sweepable(t))
                .filter(|t| filter.is_none_or(|f| f(t)))
                .collect();
            found.sort_by_cached_key(|t| (scan.order.key(t), t.thread_id.clone()));
            if !scan.ascending {
                found.reverse();
            }
            let page = found.iter().skip(offset).take(limit).map(|t| (*t).clone()).collect();
            return Ok((page, found.len()));
        };
        let mut page = Vec::new();
        if filter.is_none() && scan.ids.is_none() && !scan.sweepable_only {
            let total = source.count_threads().await?;
            if limit > 0 {
                let scan = ThreadScan { skip: offset, ..scan };
                source
                    .scan_threads(&scan, |id, body| {
                        page.push(super::decode::<Thread>("thread", id, body)?);
                        Ok(if page.len() >= limit {
                            ControlFlow::Break(())
                        } else {
                            ControlFlow::Continue(())
                        })
                    })
                    .await?;
            }
            return Ok((page, total));
        }
        let mut total = 0usize;
        source
            .scan_threads(&scan, |id, body| {
                let thread: Thread = super::decode("thread", id, body)?;
                if filter.is_none_or(|f| f(&thread)) {
                    if total >= offset && page.len() < limit {
                        page.push(thread);
                    }
                    total += 1;
                }
                Ok(ControlFlow::Continue(()))
            })
            .await?;
        Ok((page, total))
    }

    /// Notes that the TTL sweeper kept `thread_id` with its latest checkpoint when it was last changed at
    /// `updated_at`: the sweeper's scans pass it by until it changes again (nothing happens if it has
    /// changed already). Kept in the table, so that a restart, or another instance, does not prune it
    /// again; written without a turn, as no instance keeps it in memory.
    pub(crate) async fn mark_swept(&self, thread_id: &str, updated_at: &str) -> Result<(), ServerError> {
        self.inner.lock().await.mark_swept(thread_id, updated_at).await
    }

    /// Waits for the records to change what `key` names: this process's turn, and scaled out the turn of
    /// `key` across the deployment, brought up to date with what the other instances wrote. Fails when
    /// PostgreSQL cannot be reached or holds an unreadable record.
    pub(crate) async fn lock(&self, key: Key<'_>) -> Result<RecordsGuard<'_>, ServerError> {
        let mut guard = self.inner.lock().await;
        guard.enter(key.name()).await?;
        Ok(RecordsGuard { guard })
    }

    /// Waits for the records to read them: this process's turn, brought up to date with what the other
    /// instances committed, without PostgreSQL's lock of the records (a reader neither waits for the
    /// other instances nor makes them wait). Another instance may change what it shows at once, as with
    /// any read of a shared database; a caller that decides a change on what it read takes
    /// [`RecordsLock::lock`] instead.
    pub(crate) async fn read(&self) -> Result<RecordsView<'_>, ServerError> {
        let mut guard = self.inner.lock().await;
        guard.refresh().await?;
        Ok(RecordsView { guard })
    }
}

/// The records while they are read; let go when dropped. Nothing can be changed through it (what it
/// reads from the table on a miss is kept in memory, as it is there).
#[derive(Debug)]
pub(crate) struct RecordsView<'a> {
    guard: MutexGuard<'a, Records>,
}

impl RecordsView<'_> {
    /// The thread, read from the table when memory lacks it (kept in memory then).
    pub(crate) async fn thread(&mut self, id: &str) -> Result<Option<&Thread>, ServerError> {
        self.guard.thread(id).await
    }

    /// The run, read from the table when memory lacks it (kept in memory then).
    pub(crate) async fn run(&mut self, id: &str) -> Result<Option<&RunRecord>, ServerError> {
        self.guard.run(id).await
    }

    /// Every run of a thread, in no order.
    pub(crate) async fn thread_runs(&mut self, thread_id: &str) -> Result<Vec<RunRecord>, ServerError> {
        self.guard.thread_runs(thread_id).await
    }
}

impl Deref for RecordsView<'_> {
    type Target = Records;

    fn deref(&self) -> &Records {
        &self.guard
    }
}

/// The records while they are held; let go when dropped.
#[derive(Debug)]
pub(crate) struct RecordsGuard<'a> {
    guard: MutexGuard<'a, Records>,
}

impl Deref for RecordsGuard<'_> {
    type Target = Records;

    fn deref(&self) -> &Records {
        &self.guard
    }
}

impl DerefMut for RecordsGuard<'_> {
    fn deref_mut(&mut self) -> &mut Records {
        &mut self.guard
    }
}

impl Drop for RecordsGuard<'_> {
    fn drop(&mut self) {
        self.guard.leave();
    }
}
