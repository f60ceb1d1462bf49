//! This instance's worker: claims due runs from the queue while it has room for them, runs them, renews
//! their leases, and gives up a run whose lease another worker has taken.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;

use super::{Scale, Working, queue};
use crate::app::App;
use crate::model::RunRecord;
use crate::runs::channel::{OUTLET_BYTES, Outlet};
use crate::runs::{CancelAction, RunChannel};
use crate::storage::{Change, Key};

/// Claims runs until the server is gone: one per free slot (`max_concurrent_runs`), waiting for a wake-up
/// (or the poll interval) when none is due, or none other was when it claimed one.
pub(crate) async fn claim_loop(app: Weak<App>, scale: Weak<Scale>) {
    loop {
        let (Some(app_now), Some(scale_now)) = (app.upgrade(), scale.upgrade()) else { return };
        // A shutdown: no new run here.
        if app_now.drain.is_drain_requested() {
            return;
        }
        let Ok(permit) = Arc::clone(&app_now.run_slots).acquire_owned().await else { return };
        let woken = scale_now.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let claimed = queue::claim(&scale_now.db, &scale_now.worker, scale_now.lease).await;
        let poll = scale_now.poll;
        match claimed {
            Ok(Some(claimed)) => {
                let more = claimed.more;
                start(&app_now, &scale_now, claimed, permit).await;
                // No other run was due: none is until a wake-up (a run made or freed since wakes the
                // workers, and `woken` listens from before the claim) or the next poll (a lapsed lease).
                if more {
                    continue;
                }
            }
            Ok(None) => drop(permit),
            Err(e) => {
                drop(permit);
                tracing::warn!(error = %e, "cannot claim a run from the queue");
            }
        }
        // The server may go while this waits: only the scale part is held (the next turn finds the server
        // gone and stops).
        drop(app_now);
        tokio::select! {
            () = woken => {}
            () = tokio::time::sleep(poll) => {}
        }
    }
}

/// Starts a claimed run: marks it running (a new attempt) and runs it in a task of its own, holding the
/// slot until it ends.
async fn start(app: &Arc<App>, scale: &Arc<Scale>, claimed: queue::Claimed, permit: OwnedSemaphorePermit) {
    let queue::Claimed { run_id, thread_id, cancel, .. } = claimed;
    // Its lease is renewed from its claim until it runs here (or is given up: then it lapses).
    let _claim = Claiming::new(scale, &run_id);
    let mut records = match app.records.lock(Key::Thread(&thread_id)).await {
        Ok(records) => records,
        Err(e) => {
            // The lease lapses and the run is claimed again.
            tracing::error!(run_id, error = %e, "cannot start a claimed run");
            return;
        }
    };
    // Gone or ended meanwhile: its queue row went with it.
    let found = match records.run(&run_id).await {
        Ok(found) => found.cloned().filter(|r| r.run.status.is_active()),
        Err(e) => {
            tracing::error!(run_id, error = %e, "cannot read a claimed run");
            return;
        }
    };
    let Some(mut record) = found else { return };
    record.mark_running();
    if let Err(e) = records.commit(vec![Change::Run(Box::new(record.clone()))]).await {
        tracing::error!(run_id, error = %e, "cannot mark a claimed run running");
        return;
    }
    drop(records);
    launch(app, scale, record, Launch { cancel, head: None, here: None }, permit);
}

/// How [`launch`] starts a run beside its record: a cancel asked for already, the thread's head read
/// where the run was made, and the channel of this instance's listeners when the run was made here (fed
/// by the run's publisher instead of from Redis; see [`super::bus::publish`]).
pub(crate) struct Launch {
    pub(crate) cancel: Option<CancelAction>,
    pub(crate) head: Option<weft_graph::ThreadHead>,
    pub(crate) here: Option<Arc<RunChannel>>,
}

/// Runs a run this worker holds (claimed, or made here on a free thread and stored as this worker's, see
/// [`crate::runs::make`], which may hand it its thread's head and its listeners' channel: [`Launch`]) and
/// recorded running, in a task of its own that holds the run slot `permit` until the run ends; its events
/// go out through Redis and its lease is renewed while it runs.
pub(crate) fn launch(
    app: &Arc<App>,
    scale: &Arc<Scale>,
    record: RunRecord,
    how: Launch,
    permit: OwnedSemaphorePermit,
) {
    let Launch { cancel, head, here } = how;
    let run_id = record.run.run_id.clone();
    let (outlet, outgoing) = Outlet::bounded(OUTLET_BYTES);
    let channel = Arc::new(RunChannel::with_outlet(record.run.kwargs.resumable, outlet));
    let here = here.map(|listeners| super::bus::Feed::new(&Arc::downgrade(app), scale, &run_id, &listeners));
    tokio::spawn(super::bus::publish(
        scale.bus.clone(),
        run_id.clone(),
        record.run.kwargs.resumable,
        outgoing,
        here,
    ));
    if let Some(action) = cancel {
        channel.cancel_here(action);
    }
    lock(scale).insert(
        run_id.clone(),
        Working {
            since: std::time::Instant::now(),
            channel: Arc::clone(&channel),
            abort: None,
            finishing: false,
        },
    );
    let (app_for_run, scale_for_run, id) = (Arc::clone(app), Arc::clone(scale), run_id.clone());
    let task = tokio::spawn(async move {
        crate::runs::execute_on(&app_for_run, record, channel, head).await;
        drop(permit);
        lock(&scale_for_run).remove(&id);
    });
    if let Some(working) = lock(scale).get_mut(&run_id) {
        working.abort = Some(task.abort_handle());
    }
}

/// A run claimed and not yet running here, for as long as this lives.
struct Claiming<'a> {
    scale: &'a Scale,
    run_id: String,
}

impl<'a> Claiming<'a> {
    fn new(scale: &'a Scale, run_id: &str) -> Self {
        claimed(scale).insert(run_id.to_owned());
        Self { scale, run_id: run_id.to_owned() }
    }
}

impl Drop for Claiming<'_> {
    fn drop(&mut self) {
        claimed(self.scale).remove(&self.run_id);
    }
}

fn claimed(scale: &Scale) -> std::sync::MutexGuard<'_, HashSet<String>> {
    scale.claimed.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn lock(scale: &Scale) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Working>> {
    scale.working.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The runs of this worker stalled past the watchdog plus a lease (their own watchdog should have ended
/// them by then), whose end is not being recorded: their leases are no longer renewed.
fn stalled(scale: &Scale) -> Vec<String> {
    let Some(stall) = scale.stall else { return Vec::new() };
    lock(scale)
        .iter()
        .filter(|(_, run)| !run.finishing && run.channel.progress().idle() > stall)
        .map(|(run_id, _)| run_id.clone())
        .collect()
}

/// Renews this worker's leases every third of the lease until the server is gone, but not those of runs
/// stalled past the watchdog (see [`stalled`]); passes on the cancels recorded in the queue, and stops
/// the runs whose lease another worker took (or whose run was deleted, or that stalled).
pub(crate) async fn renew_loop(scale: Weak<Scale>) {
    loop {
        let Some(scale_now) = scale.upgrade() else { return };
        let every = (scale_now.lease / 3).max(Duration::from_millis(10));
        let stalled = stalled(&scale_now);
        let asked = std::time::Instant::now();
        let mut runs: Vec<String> =
            lock(&scale_now).keys().filter(|id| !stalled.contains(id)).cloned().collect();
        runs.extend(claimed(&scale_now).iter().cloned());
        // Nothing to renew (and no run here to stop): no statement.
        if runs.is_empty() && lock(&scale_now).is_empty() {
            drop(scale_now);
            tokio::time::sleep(every).await;
            continue;
        }
        match queue::renew(&scale_now.db, &scale_now.worker, scale_now.lease, &runs).await {
            Ok(held) => {
                let ids: HashSet<&str> = held.iter().map(|(id, _)| id.as_str()).collect();
                let mut working = lock(&scale_now);
                for (run_id, cancel) in &held {
                    if let (Some(action), Some(run)) = (cancel, working.get(run_id)) {
                        run.channel.cancel_here(*action);
                    }
                }
                working.retain(|run_id, run| {
                    // A run started after the renewal was asked is not in its answer, and still this
                    // worker's.
                    if ids.contains(run_id.as_str()) || run.finishing || run.since >= asked {
                        return true;
                    }
                    if stalled.contains(run_id) {
                        tracing::error!(
                            run_id,
                            "the run made no progress past the watchdog and its task did not end it: its \
                             lease is left to lapse, for another instance to take it over"
                        );
                    } else {
                        tracing::warn!(run_id, "this worker no longer holds the run: stopping it here");
                    }
                    if let Some(abort) = &run.abort {
                        abort.abort();
                    }
                    false
                });
            }
            Err(e) => tracing::warn!(error = %e, "cannot renew the leases of this worker's runs"),
        }
        drop(scale_now);
        tokio::time::sleep(every).await;
    }
}
