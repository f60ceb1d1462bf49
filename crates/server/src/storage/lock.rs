//! [`RecordsLock`]: the one way to the records. Embedded, a mutex of this process. Scaled out, also
//! PostgreSQL's advisory lock of the records, held on one connection while the guard lives, after which the
//! rows other instances wrote since this one last looked are read in: what a guard shows is never stale,
//! and no other instance changes the records while it is held. [`RecordsLock::read`] brings them up to
//! date the same way without PostgreSQL's lock, for callers that only read.
//!
//! Scaled out, a guard let go while other callers of this process wait for the records keeps
//! PostgreSQL's lock for them (for a bounded time, see [`super::postgres`]): their turns then cost no
//! lock, no unlock and no catch-up read. Should none of them take it (they went away), a timer lets go.
//!
//! The mutex is unfair until a waiter has starved for 0.5 ms (`async_lock`'s eventual fairness). A fair
//! mutex hands the lock to the first waiter, which holds it before it is even running again: under load
//! the records were then mostly "taken" by waiters waiting to be scheduled on the other worker, and most
//! turns queued behind them. An unfair one is taken by whoever is running when it is let go.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_lock::{Mutex, MutexGuard};

use super::Records;
use crate::error::ServerError;

/// How long a lock kept for a waiting caller may stay unused before the timer lets go of it.
const UNUSED_KEPT_LOCK: Duration = Duration::from_millis(2);

/// The records behind their lock.
#[derive(Debug)]
pub(crate) struct RecordsLock {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    inner: Mutex<Records>,
    /// Callers waiting for `inner`.
    waiting: AtomicUsize,
    /// A timer will look whether a kept lock went unused.
    armed: AtomicBool,
}

/// Counts a caller among those waiting until it has the records or goes away.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl RecordsLock {
    /// Puts `records` behind the lock.
    pub(crate) fn new(records: Records) -> Self {
        Self {
            shared: Arc::new(Shared {
                inner: Mutex::new(records),
                waiting: AtomicUsize::new(0),
                armed: AtomicBool::new(false),
            }),
        }
    }

    /// How many callers wait for the records.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.shared.waiting.load(Ordering::SeqCst)
    }

    /// Waits for the records: this process's turn, and scaled out every instance's, brought up to date
    /// with what the others wrote. Fails when PostgreSQL cannot be reached or holds an unreadable record.
    pub(crate) async fn lock(&self) -> Result<RecordsGuard<'_>, ServerError> {
        self.shared.waiting.fetch_add(1, Ordering::SeqCst);
        let waiting = Waiting(&self.shared.waiting);
        let mut guard = self.shared.inner.lock().await;
        drop(waiting);
        guard.enter().await?;
        Ok(RecordsGuard { guard, shared: &self.shared })
    }

    /// Waits for the records to read them: this process's turn, brought up to date with what the other
    /// instances committed, without PostgreSQL's lock of the records (a reader neither waits for the
    /// other instances nor makes them wait). Another instance may change what it shows at once, as with
    /// any read of a shared database; a caller that decides a change on what it read takes
    /// [`RecordsLock::lock`] instead.
    pub(crate) async fn read(&self) -> Result<RecordsView<'_>, ServerError> {
        let mut guard = self.shared.inner.lock().await;
        guard.refresh().await?;
        Ok(RecordsView { guard })
    }
}

/// The records while they are read; let go when dropped. Nothing can be changed through it.
#[derive(Debug)]
pub(crate) struct RecordsView<'a> {
    guard: MutexGuard<'a, Records>,
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
    shared: &'a Arc<Shared>,
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
        let runtime = tokio::runtime::Handle::try_current().ok();
        let keep = runtime.is_some() && self.shared.waiting.load(Ordering::SeqCst) > 0;
        if !self.guard.leave(keep) || self.shared.armed.swap(true, Ordering::SeqCst) {
            return;
        }
        // Kept for a caller that may go away before taking it: the timer lets go of a lock that nobody
        // holds (a caller holding the records decides again when it lets go).
        if let Some(runtime) = runtime {
            let shared = Arc::clone(self.shared);
            runtime.spawn(async move {
                // The timer waits until it finds the records free (nobody holding them), then lets go. A
                // waiter woken meanwhile that finds it gone takes PostgreSQL's lock again in its turn.
                loop {
                    tokio::time::sleep(UNUSED_KEPT_LOCK).await;
                    if let Some(mut records) = shared.inner.try_lock() {
                        records.leave(false);
                        break;
                    }
                }
                shared.armed.store(false, Ordering::SeqCst);
            });
        }
    }
}
