//! Runs: created as records first (pending), then started by a worker, one at a time per thread, in the
//! order they were made; multitask strategies, cancellation and the thread's status follow LangGraph's
//! server.

pub(crate) mod channel;
mod exec;
pub(crate) mod feed;
mod make;
pub(crate) mod modes;
pub(crate) mod result;
pub(crate) mod settle;
pub(crate) mod taps;
pub(crate) mod wire;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::json;

pub(crate) use self::channel::{CancelAction, RunChannel};
#[cfg(feature = "scale")]
pub(crate) use self::exec::execute_on;
pub(crate) use self::make::create;
use crate::api::guard::Caller;
use crate::app::{App, now};
use crate::auth::{Action, Resource};
use crate::error::{ApiError, ApiResult};
use crate::model::{RunRecord, RunStatus};
use crate::storage::{Change, Key};

/// A run started as it was made (stored running, holding its run slot), not yet handed to a task: the
/// whole of its execution, to the record of its end.
pub(crate) type Start = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A run started as it was made that must run whoever holds it: handed to a task of its own when
/// dropped unrun (its thread would stay busy otherwise).
pub(crate) struct Started(Option<Start>);

impl Started {
    /// Drives the run in the caller's task as far as it goes without waiting (a run that never waits runs
    /// to its end here, its events ready to go out together); one that waits goes on in a task of its own.
    pub(crate) async fn run_inline(mut self) {
        let Some(run) = self.0.as_mut() else { return };
        let done = std::future::poll_fn(|cx| std::task::Poll::Ready(run.as_mut().poll(cx).is_ready())).await;
        if done {
            self.0 = None;
        } else {
            self.spawn();
        }
    }

    /// Hands the run, unless it ran to its end, to a task of its own.
    fn spawn(&mut self) {
        if let Some(run) = self.0.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn(run)),
                Err(_) => {
                    tracing::error!("a started run was dropped outside the runtime; its thread stays busy")
                }
            }
        }
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        self.spawn();
    }
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Started").field(&self.0.is_some()).finish()
    }
}

/// A run just made, with its channel and, when asked for, a subscription made before any worker could
/// start the run (so it sees all of it).
#[derive(Debug)]
pub(crate) struct Created {
    pub(crate) record: RunRecord,
    pub(crate) channel: Arc<RunChannel>,
    pub(crate) subscription: Option<channel::Subscription>,
    /// Whether the run was started as it was made (its thread was free and a run slot too), so that no
    /// worker needs waking for it.
    started: bool,
    /// That run, until [`schedule`](Self::schedule) hands it to a task or a streamed run's body takes it
    /// to drive it first ([`take_started`](Self::take_started)).
    run: Option<Started>,
}

impl Created {
    /// Runs this run if it was started as it was made (in a task of its own, unless taken), else starts
    /// the thread's next run if it can.
    pub(crate) fn schedule(&mut self, app: &Arc<App>) {
        if let Some(mut run) = self.run.take() {
            run.spawn();
        } else if !self.started {
            schedule(app, &self.record.run.thread_id);
        }
    }

    /// The run, when it was started as it was made, for the caller to drive ([`Started::run_inline`]).
    pub(crate) fn take_started(&mut self) -> Option<Started> {
        self.run.take()
    }
}

/// Starts the thread's next pending run when none is running (in a task of its own). Scaled out: wakes
/// the workers of every instance, which claim it from the queue.
pub(crate) fn schedule(app: &Arc<App>, thread_id: &str) {
    #[cfg(feature = "scale")]
    if let Some(scale) = &app.scale {
        scale.wake();
        return;
    }
    let app = Arc::clone(app);
    let thread_id = thread_id.to_owned();
    tokio::spawn(async move {
        if let Err(e) = start_next(&app, &thread_id).await {
            tracing::error!(thread_id, error = %e, "cannot start the next run");
        }
    });
}

async fn start_next(app: &Arc<App>, thread_id: &str) -> Result<(), crate::error::ServerError> {
    let Ok(permit) = Arc::clone(&app.run_slots).acquire_owned().await else { return Ok(()) };
    // A shutdown: the run stays pending for the next start.
    if app.drain.is_drain_requested() {
        return Ok(());
    }
    let mut records = app.records.lock(Key::Thread(thread_id)).await?;
    if records.active_runs(thread_id).any(|r| r.run.status == RunStatus::Running) {
        return Ok(());
    }
    let next = records
        .active_runs(thread_id)
        .filter(|r| r.run.status == RunStatus::Pending)
        .min_by(|a, b| (&a.run.created_at, &a.run.run_id).cmp(&(&b.run.created_at, &b.run.run_id)))
        .cloned();
    let Some(mut next) = next else { return Ok(()) };
    let due = weft_graph::time::parse_rfc3339(&next.run.created_at).unwrap_or(SystemTime::UNIX_EPOCH);
    if let Ok(wait) = due.duration_since(SystemTime::now()) {
        drop(records);
        drop(permit);
        let app = Arc::clone(app);
        let thread_id = thread_id.to_owned();
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            schedule(&app, &thread_id);
        });
        return Ok(());
    }
    next.mark_running();
    records.commit(vec![Change::Run(Box::new(next.clone()))]).await?;
    drop(records);
    let app = Arc::clone(app);
    tokio::spawn(async move {
        exec::execute(&app, next).await;
        drop(permit);
    });
    Ok(())
}

/// Why runs could not be cancelled.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CancelError {
    /// None of the runs is on the thread.
    #[error("No runs found to cancel.")]
    NotFound,
    /// None of them is pending or running any more: nothing is left to cancel.
    #[error(
        "No matching runs to cancel. Please verify the thread ID and run IDs are correct, and the runs haven't \
         been deleted or completed."
    )]
    NotActive,
    /// The records could not be read or written: nothing was cancelled.
    #[error("cannot cancel the runs: {0}")]
    Storage(#[source] crate::error::ServerError),
    /// Scaled out: a run in flight on some instance could not be asked to stop (its cancel could not be
    /// recorded in the run queue); it may go on.
    #[cfg_attr(not(feature = "scale"), allow(dead_code))]
    #[error("cannot ask the run to stop where it runs: {0}")]
    Remote(#[source] crate::error::ServerError),
    /// The runs were cancelled, but the thread's state could not be read back into it.
    #[error("the runs were cancelled but the thread was not settled: {}", .0.detail)]
    Settle(ApiError),
}

impl From<CancelError> for ApiError {
    fn from(e: CancelError) -> Self {
        match e {
            CancelError::NotFound | CancelError::NotActive => ApiError::not_found(e.to_string()),
            CancelError::Storage(e) | CancelError::Remote(e) => ApiError::from(e),
            CancelError::Settle(e) => e,
        }
    }
}

/// Withdraws a run just made (its creation failed after it was stored): deletes it and ends its channel.
/// What fails here is logged; the caller reports the failure that made it withdraw.
async fn withdraw(app: &Arc<App>, thread_id: &str, run_id: &str) {
    let deleted = match app.records.lock(Key::Thread(thread_id)).await {
        Ok(mut records) => records.commit(vec![Change::DeleteRun(run_id.to_owned())]).await,
        Err(e) => Err(e),
    };
    if let Err(e) = deleted {
        tracing::error!(thread_id, run_id, error = %e, "cannot withdraw the run");
        return;
    }
    if let Some(channel) = app.channels.get(run_id) {
        channel.finish();
    }
    app.channels.remove(run_id);
    if let Err(e) = settle::settle_thread(app, thread_id).await {
        tracing::error!(thread_id, error = %e.detail, "cannot settle the thread after withdrawing a run");
    }
}

/// Cancels runs of a thread: a running run is asked to stop (its worker ends it `interrupted`, or deletes
/// it on `rollback`); a pending one ends at once. The pending ones' ends are written first: when that
/// fails, no run is asked to stop. [`CancelError::NotFound`] or [`CancelError::NotActive`] when none of
/// them is pending or running.
pub(crate) async fn cancel(
    app: &Arc<App>,
    thread_id: &str,
    run_ids: &[String],
    action: CancelAction,
) -> Result<(), CancelError> {
    let mut records = app.records.lock(Key::Thread(thread_id)).await.map_err(CancelError::Storage)?;
    let mut found: Vec<RunRecord> = Vec::with_capacity(run_ids.len());
    for id in run_ids {
        let record = records.run(id).await.map_err(CancelError::Storage)?;
        found.extend(record.filter(|r| r.run.thread_id == thread_id).cloned());
    }
    if found.is_empty() {
        return Err(CancelError::NotFound);
    }
    let active: Vec<RunRecord> = found.into_iter().filter(|r| r.run.status.is_active()).collect();
    if active.is_empty() {
        return Err(CancelError::NotActive);
    }
    let mut changes = Vec::new();
    let mut ended = Vec::new();
    let mut running = Vec::new();
    for mut record in active {
        match record.run.status {
            RunStatus::Running => running.push(record),
            _ if action == CancelAction::Rollback => {
                changes.push(Change::DeleteRun(record.run.run_id.clone()));
                ended.push(record.run.run_id);
            }
            _ => {
                record.run.status = RunStatus::Interrupted;
                record.run.updated_at = now();
                ended.push(record.run.run_id.clone());
                changes.push(Change::Run(Box::new(record)));
            }
        }
    }
    records.commit(changes).await.map_err(CancelError::Storage)?;
    #[cfg_attr(not(feature = "scale"), allow(unused_mut))]
    let mut elsewhere: Vec<String> = Vec::new();
    for record in running {
        // The channel is the one the worker listens to (opened now if the worker has not yet).
        let channel = app.channels.open(&record.run.run_id, record.run.kwargs.resumable);
        // Scaled out, the cancel goes to the run's worker below (wherever it is), and its failure to the
        // caller.
        #[cfg(feature = "scale")]
        if app.scale.is_some() {
            elsewhere.push(record.run.run_id);
            continue;
        }
        channel.cancel(action);
    }
    for run_id in ended {
        if let Some(channel) = app.channels.get(&run_id) {
            channel.finish();
        }
        app.channels.remove(&run_id);
    }
    drop(records);
    #[cfg(feature = "scale")]
    let asked = match &app.scale {
        Some(scale) => ask_elsewhere(scale, &elsewhere, action).await,
        None => Ok(()),
    };
    drop(elsewhere);
    // The runs ended here are settled whether or not those elsewhere could be asked to stop.
    settle::settle_thread(app, thread_id).await.map_err(CancelError::Settle)?;
    #[cfg(feature = "scale")]
    asked?;
    Ok(())
}

/// Scaled out: asks each run to stop wherever it runs; the first that could not be asked, as an error.
#[cfg(feature = "scale")]
async fn ask_elsewhere(
    scale: &crate::scale::Scale,
    run_ids: &[String],
    action: CancelAction,
) -> Result<(), CancelError> {
    let mut failed = None;
    for run_id in run_ids {
        if let Err(e) = scale.cancel_everywhere(run_id, action).await {
            tracing::error!(run_id, error = %e, "cannot ask the run to stop where it runs");
            failed.get_or_insert(CancelError::Remote(e));
        }
    }
    failed.map_or(Ok(()), Err)
}

/// A run of the thread and the channel to listen to it on: its live channel while it is pending or
/// running (opened if its worker has not yet), else the one it kept (resumable runs; scaled out, one fed
/// from the run's stream in Redis when this instance kept none), else a closed one holding its result.
/// Decided under the records' lock, as workers close channels under it.
pub(crate) async fn listen(
    app: &App,
    caller: &Caller,
    thread_id: &str,
    run_id: &str,
) -> ApiResult<(RunRecord, Arc<RunChannel>)> {
    crate::app::require_uuid(thread_id, "thread")?;
    crate::app::require_uuid(run_id, "run")?;
    let mut value = json!({"thread_id": thread_id, "run_id": run_id});
    let access = app.authorize(caller, Resource::Threads, Action::Read, &mut value).await?;
    let mut records = app.records.lock(Key::Thread(thread_id)).await?;
    if !records.thread(thread_id).await?.is_some_and(|t| access.allows(&t.metadata)) {
        return Err(ApiError::thread_not_found(thread_id));
    }
    let record = records
        .run(run_id)
        .await?
        .filter(|r| r.run.thread_id == thread_id)
        .cloned()
        .ok_or_else(|| ApiError::not_found("Run not found"))?;
    let channel = if record.run.status.is_active() {
        app.channels.open(run_id, record.run.kwargs.resumable)
    } else if let Some(kept) = app.channels.get(run_id) {
        kept
    } else if record.run.kwargs.resumable && app.channels.is_remote() {
        // Scaled out, a finished resumable run's events are still in its stream in Redis: read from there.
        app.channels.open(run_id, true)
    } else {
        let closed = Arc::new(RunChannel::new(false));
        closed.set_result(record.result.clone());
        closed.finish();
        closed
    };
    Ok((record, channel))
}

/// At start-up: runs a stopped server left running go back to pending, and every thread with pending
/// runs is scheduled. Scaled out, other instances may be running them: the queue's leases say which runs
/// were left, and the worker claims them when their lease expires.
pub(crate) async fn recover(app: &Arc<App>) -> Result<(), crate::error::ServerError> {
    #[cfg(feature = "scale")]
    if let Some(scale) = &app.scale {
        scale.wake_here();
        return Ok(());
    }
    let mut records = app.records.lock(Key::All).await?;
    let mut changes = Vec::new();
    let mut threads = std::collections::BTreeSet::new();
    for record in records.live_runs() {
        threads.insert(record.run.thread_id.clone());
        if record.run.status == RunStatus::Running {
            let mut record = record.clone();
            record.run.status = RunStatus::Pending;
            changes.push(Change::Run(Box::new(record)));
        }
    }
    records.commit(changes).await?;
    drop(records);
    for thread_id in threads {
        schedule(app, &thread_id);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    fn started(run: impl Future<Output = ()> + Send + 'static) -> Started {
        Started(Some(Box::pin(run)))
    }

    #[tokio::test]
    async fn a_run_that_never_waits_runs_to_its_end_in_the_callers_task() {
        let ran = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ran);
        started(async move { flag.store(true, Ordering::SeqCst) }).run_inline().await;
        assert!(ran.load(Ordering::SeqCst), "ran to its end before run_inline returned");
    }

    #[tokio::test]
    async fn a_run_that_waits_goes_on_in_a_task_of_its_own() {
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let (done, finished) = tokio::sync::oneshot::channel::<()>();
        started(async move {
            let _ = wait.await;
            let _ = done.send(());
        })
        .run_inline()
        .await;
        // The caller is back while the run waits; the run finishes without the caller.
        go.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), finished).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_run_dropped_unrun_runs_in_a_task_of_its_own() {
        let (done, finished) = tokio::sync::oneshot::channel::<()>();
        drop(started(async move {
            let _ = done.send(());
        }));
        tokio::time::timeout(Duration::from_secs(5), finished).await.unwrap().unwrap();
    }
}
