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

use std::ops::{Deref, DerefMut};

use async_lock::{Mutex, MutexGuard};

use super::Records;
use crate::error::ServerError;

/// The records behind their lock.
#[derive(Debug)]
pub(crate) struct RecordsLock {
    inner: Mutex<Records>,
}

impl RecordsLock {
    /// Puts `records` behind the lock.
    pub(crate) fn new(records: Records) -> Self {
        Self { inner: Mutex::new(records) }
    }

    /// Waits for the records: this process's turn, and scaled out every instance's, brought up to date
    /// with what the others wrote. Fails when PostgreSQL cannot be reached or holds an unreadable record.
    pub(crate) async fn lock(&self) -> Result<RecordsGuard<'_>, ServerError> {
        let mut guard = self.inner.lock().await;
        guard.enter().await?;
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
