//! [`RecordsLock`]: the one way to the records. Embedded, a mutex of this process. Scaled out, also
//! PostgreSQL's advisory lock of the records, held on one connection while the guard lives, after which the
//! rows other instances wrote since this one last looked are read in: what a guard shows is never stale,
//! and no other instance changes the records while it is held.

use std::ops::{Deref, DerefMut};

use tokio::sync::{Mutex, MutexGuard};

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
