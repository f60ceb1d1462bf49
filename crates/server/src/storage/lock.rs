//! [`RecordsLock`]: the one way to the records. Embedded, a mutex of this process. Scaled out, also a
//! turn of PostgreSQL's (see [`super::postgres`]): a transaction holding the records' advisory lock, after
//! which the rows other instances wrote since this one last looked are read in: what a guard shows is
//! never stale, and no other instance changes the records until the guard's write commits (or the guard
//! is let go). [`RecordsLock::read`] brings them up to date the same way without PostgreSQL's lock, for
//! callers that only read.
//!
//! Scaled out, a guard lets go of the mutex for the round trips of its turn that change nothing in memory
//! (its writes before the commit, its reads of the thread's head and of a run's lease; see
//! [`RecordsGuard::commit`]): the turns of other keys go on in this process meanwhile, as they do across
//! instances. Turns of one key wait for each other here first ([`KeyLocks`]), so that a guard never waits
//! for PostgreSQL's lock of its key while holding the mutex that the key's holder needs to commit. The
//! mutex is still held for every look at what other instances wrote and its application (a turn's start,
//! a reader's catch-up), and for a commit and its application: memory takes the looks and the commits in
//! the order PostgreSQL made them, so it never goes back to an older body of a record.
//!
//! The mutex is unfair until a waiter has starved for 0.5 ms (`async_lock`'s eventual fairness). A fair
//! mutex hands the lock to the first waiter, which holds it before it is even running again: under load
//! the records were then mostly "taken" by waiters waiting to be scheduled on the other worker, and most
//! turns queued behind them. An unfair one is taken by whoever is running when it is let go.

use std::collections::HashMap;
use std::ops::{ControlFlow, Deref, DerefMut};
use std::sync::Arc;

use async_lock::{Mutex, MutexGuard, MutexGuardArc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::{Change, Lease, Records, Source, ThreadScan};
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
    /// This process's turns by key, taken before `inner`.
    keys: KeyLocks,
    /// Scaled out, the places of turns holding a pooled connection (see [`RecordsLock::slot`]).
    slots: Option<async_lock::Semaphore>,
}

/// This process's turns by key: one at a time per key, and [`Key::All`] alone.
#[derive(Debug, Default)]
struct KeyLocks {
    /// Read by every turn of a key, written by a turn of every key.
    all: RwLock<()>,
    /// The lock of each key with a turn taken or waited for (removed when the last one lets go).
    held: std::sync::Mutex<HashMap<String, Arc<Mutex<()>>>>,
}

/// A turn of a key in this process, until dropped.
#[derive(Debug)]
enum KeyGuard<'a> {
    All { _all: RwLockWriteGuard<'a, ()> },
    One { _one: OneKey<'a> },
}

#[derive(Debug)]
struct OneKey<'a> {
    locks: &'a KeyLocks,
    name: String,
    lock: Arc<Mutex<()>>,
    held: Option<MutexGuardArc<()>>,
    _all: RwLockReadGuard<'a, ()>,
}

impl KeyLocks {
    async fn take(&self, key: Key<'_>) -> KeyGuard<'_> {
        let Some(name) = key.name() else { return KeyGuard::All { _all: self.all.write().await } };
        let all = self.all.read().await;
        let lock = Arc::clone(self.map().entry(name.clone()).or_default());
        // Made before the wait: a caller that goes away while waiting takes the key out of the map.
        let mut one = OneKey { locks: self, name, lock, held: None, _all: all };
        one.held = Some(one.lock.lock_arc().await);
        KeyGuard::One { _one: one }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Mutex<()>>>> {
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for OneKey<'_> {
    fn drop(&mut self) {
        drop(self.held.take());
        let mut map = self.locks.map();
        // Only the map's and this one's: no one else has the key's lock or waits for it.
        if Arc::strong_count(&self.lock) == 2 {
            map.remove(&self.name);
        }
    }
}

/// What a thread search matches, beside its scan's `ids`.
pub(crate) type ThreadFilter<'a> = &'a (dyn Fn(&Thread) -> bool + Sync);

impl RecordsLock {
    /// Puts `records` behind the lock.
    pub(crate) fn new(records: Records) -> Self {
        let source = records.source();
        let slots = match &source {
            #[cfg(feature = "scale")]
            Some(Source::Postgres(db)) => Some(async_lock::Semaphore::new(
                (db.pool.options().get_max_connections() as usize / 2).max(1),
            )),
            _ => None,
        };
        Self { inner: Mutex::new(records), source, keys: KeyLocks::default(), slots }
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

    /// How many keys have a turn taken or waited for in this process.
    #[cfg(all(test, feature = "scale"))]
    pub(crate) fn keys_held(&self) -> usize {
        self.keys.map().len()
    }

    /// Waits for the records to change what `key` names: this process's turn, and scaled out the turn of
    /// `key` across the deployment, brought up to date with what the other instances wrote. Fails when
    /// PostgreSQL cannot be reached or holds an unreadable record.
    pub(crate) async fn lock(&self, key: Key<'_>) -> Result<RecordsGuard<'_>, ServerError> {
        self.lock_checking(key, None).await
    }

    /// [`RecordsLock::lock`], checking `lease` in the turn's first round trip, scaled out (see
    /// [`RecordsGuard::lease_held`]); elsewhere the same as `lock`.
    pub(crate) async fn lock_checking(
        &self,
        key: Key<'_>,
        lease: Option<Lease>,
    ) -> Result<RecordsGuard<'_>, ServerError> {
        let turn = self.keys.take(key).await;
        let slot = self.slot().await;
        let begun = self.begin(key.name(), lease).await?;
        let mut guard = self.inner.lock().await;
        guard.enter(begun).await?;
        Ok(RecordsGuard { lock: self, guard: std::sync::OnceLock::from(guard), _turn: turn, _slot: slot })
    }

    /// Scaled out, a place among the turns that hold a pooled connection while they wait for the
    /// records (at most half the pool: the others are left to the turn that holds them and to readers).
    async fn slot(&self) -> Option<async_lock::SemaphoreGuard<'_>> {
        match &self.slots {
            Some(slots) => Some(slots.acquire().await),
            None => None,
        }
    }

    /// Scaled out, the start of a turn of `key` (none: every key): its transaction and locks, and the
    /// lease checked, before the records are held (see [`super::postgres::begin`]); nothing elsewhere.
    async fn begin(&self, key: Option<String>, lease: Option<Lease>) -> Result<super::Begun, ServerError> {
        #[cfg(feature = "scale")]
        if let Some(Source::Postgres(db)) = &self.source {
            return Ok(Some(super::postgres::begin(db, key, lease).await?));
        }
        let _ = (key, lease);
        Ok(None)
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

    /// A page of a thread's runs, newest first (see [`Records::thread_runs_page`]).
    pub(crate) async fn thread_runs_page(
        &mut self,
        thread_id: &str,
        status: Option<crate::model::RunStatus>,
        page: (usize, usize),
    ) -> Result<Vec<RunRecord>, ServerError> {
        self.guard.thread_runs_page(thread_id, status, page).await
    }

    /// Every run of a thread without its body (see [`Records::thread_run_heads`]).
    #[cfg(all(test, feature = "scale"))]
    pub(crate) async fn thread_run_heads(
        &mut self,
        thread_id: &str,
    ) -> Result<Vec<super::RunHead>, ServerError> {
        self.guard.thread_run_heads(thread_id).await
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
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    lock: &'a RecordsLock,
    /// The records; empty only while one of this guard's own round trips runs without them (see
    /// [`RecordsGuard::commit`]), which holds the guard borrowed. Should such a round trip be
    /// cancelled and the guard used after, it waits for the records again, blocking its thread.
    guard: std::sync::OnceLock<MutexGuard<'a, Records>>,
    _turn: KeyGuard<'a>,
    _slot: Option<async_lock::SemaphoreGuard<'a>>,
}

impl RecordsGuard<'_> {
    /// Writes `changes` in one transaction, then applies them in memory. Scaled out, the write goes
    /// without the records (the turns of other keys go on), then the commit and the application with
    /// them; elsewhere all of it with them ([`Records::commit`]).
    pub(crate) async fn commit(&mut self, changes: Vec<Change>) -> Result<(), ServerError> {
        #[cfg(feature = "scale")]
        if !changes.is_empty() && self.records().is_shared() {
            let ops = super::ops_of(&changes)?;
            // A turn ends with its write: a second write under the same guard takes a new turn of its
            // key, its locks taken without the records held.
            if let Some(key) = self.records().ended_turn() {
                self.let_go();
                let begun = self.lock.begin(key, None).await;
                self.hold().await.enter(begun?).await?;
            }
            if let Some((db, mut state)) = self.records().take_turn() {
                self.let_go();
                let written = state.write(&db, &ops, &changes).await;
                let records = self.hold().await;
                records.restore_turn(state);
                written?.commit().await.map_err(super::postgres::storage)?;
                records.apply(changes);
                return Ok(());
            }
        }
        self.records().commit(changes).await
    }

    /// Scaled out, whether `worker` still holds the run's lease, checked in this turn's transaction (its
    /// queue row stays locked until the turn ends): the answer of the turn's start when it checked this
    /// lease ([`RecordsLock::lock_checking`]), else a round trip without the records meanwhile; any other
    /// backend has no leases.
    #[cfg(feature = "scale")]
    pub(crate) async fn lease_held(&mut self, worker: &str, run_id: &str) -> Result<bool, ServerError> {
        let lease = Lease { run_id: run_id.to_owned(), worker: worker.to_owned() };
        if let Some(held) = self.records().checked_lease(&lease) {
            return Ok(held);
        }
        let Some((db, mut state)) = self.records().take_turn() else { return Ok(true) };
        self.let_go();
        let held = state.holds(&db, worker, run_id).await;
        self.hold().await.restore_turn(state);
        held
    }

    fn records(&mut self) -> &mut Records {
        if self.guard.get().is_none() {
            drop(self.guard.set(self.lock.inner.lock_blocking()));
        }
        match self.guard.get_mut() {
            Some(guard) => guard,
            None => unreachable!("set just above"),
        }
    }

    /// Lets go of the records for a round trip that changes nothing in memory.
    #[cfg(feature = "scale")]
    fn let_go(&mut self) {
        drop(self.guard.take());
    }

    /// Holds the records again after a round trip without them.
    #[cfg(feature = "scale")]
    async fn hold(&mut self) -> &mut Records {
        if self.guard.get().is_none() {
            drop(self.guard.set(self.lock.inner.lock().await));
        }
        self.records()
    }
}

impl Deref for RecordsGuard<'_> {
    type Target = Records;

    fn deref(&self) -> &Records {
        self.guard.get_or_init(|| self.lock.inner.lock_blocking())
    }
}

impl DerefMut for RecordsGuard<'_> {
    fn deref_mut(&mut self) -> &mut Records {
        self.records()
    }
}

impl Drop for RecordsGuard<'_> {
    fn drop(&mut self) {
        if let Some(records) = self.guard.get_mut() {
            records.leave();
        }
    }
}
