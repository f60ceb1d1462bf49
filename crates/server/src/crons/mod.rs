//! Crons: runs made on a schedule. A cron is a record like the server's others, with the time it fires
//! next; the scheduler wakes at the earliest of those times, makes each due cron's run through the same
//! path as `POST /runs` (or `POST /threads/{id}/runs` for a thread's cron), and moves the cron's next time
//! past now. A fire missed while the server was down happens once at the next start, not once per missed
//! time (as in LangGraph). The run is saved before the cron's next time, as LangGraph orders them: a
//! process that dies between the two makes that run again at its next start rather than lose it.

pub(crate) mod schedule;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};

use self::schedule::Schedule;
use crate::api::guard::Caller;
use crate::api::requests::RunCreate;
use crate::app::{App, now, object};
use crate::auth::User;
use crate::model::Cron;
use crate::storage::{Change, Key};

/// The longest the scheduler sleeps without looking again (a cron made or changed wakes it sooner).
const IDLE_WAIT: Duration = Duration::from_secs(60);

/// How long the scheduler of a scaled-out instance sleeps at most: crons made or changed through other
/// instances wake no one here.
const SCALED_WAIT: Duration = Duration::from_secs(1);

/// `t` as Python's `isoformat()` writes an aware UTC time: microseconds only when there are some.
pub(crate) fn iso(t: SystemTime) -> String {
    let text = weft_graph::time::format_rfc3339(t);
    text.replace(".000000+", "+")
}

/// The cron's schedule, as it was checked when the cron was made.
fn schedule_of(cron: &Cron) -> Result<Schedule, schedule::ScheduleError> {
    Schedule::parse(&cron.schedule, cron.timezone.as_deref())
}

/// The time the cron fires next after `after`, as the record keeps it; none for a schedule that no
/// longer parses (a time zone gone from the system), which then never fires.
pub(crate) fn next_run_date(cron: &Cron, after: SystemTime) -> Option<String> {
    match schedule_of(cron).and_then(|s| s.next_after(after)) {
        Ok(next) => Some(iso(next)),
        Err(e) => {
            tracing::error!(cron_id = cron.cron_id, error = %e, "the cron's schedule has no next time");
            None
        }
    }
}

/// Whether the cron is to fire at `now`.
fn is_due(cron: &Cron, now: SystemTime) -> bool {
    let at = |text: &Option<String>| text.as_deref().and_then(schedule::parse_time);
    cron.enabled
        && at(&cron.next_run_date).is_some_and(|next| next <= now)
        && at(&cron.end_time).is_none_or(|end| end >= now)
}

/// The run a cron makes: its payload as a run request, with the cron's metadata under the payload's,
/// `on_completion: keep` for a stateless cron that keeps its threads, and the cron's id in the run's
/// configuration.
fn run_request(cron: &Cron) -> Result<RunCreate, serde_json::Error> {
    let mut payload = cron.payload.clone();
    let metadata = crate::app::merge(&[&cron.metadata, &object(payload.get("metadata"))]);
    payload.insert("metadata".into(), Value::Object(metadata));
    if cron.on_run_completed.as_deref() == Some("keep") {
        payload.entry("on_completion").or_insert_with(|| json!("keep"));
    }
    // The cron's id rides in `configurable`, which a run may not have next to a context: the run takes
    // it apart from both.
    if let Some(Value::Object(config)) = payload.get_mut("config") {
        if let Some(Value::Object(configurable)) = config.get_mut("configurable") {
            configurable.remove("cron_id");
            if configurable.is_empty() {
                config.remove("configurable");
            }
        }
    }
    let mut request: RunCreate = serde_json::from_value(Value::Object(payload))?;
    request.cron_id = Some(cron.cron_id.clone());
    Ok(request)
}

/// Makes the run of every cron due at `now` and moves each one's next time past `now` (see
/// [`fire_all`]). Returns the ids of the runs made.
#[cfg(test)]
pub(crate) async fn fire_due(app: &Arc<App>, now: SystemTime) -> Vec<String> {
    match look(app, now).await {
        Some((due, _)) => fire_all(app, due, now).await,
        None => Vec::new(),
    }
}

/// One look at the crons (one read of the records): those due at `now`, and how long to sleep before
/// the earliest next time of an enabled one (at most [`IDLE_WAIT`], or [`SCALED_WAIT`] scaled out).
/// `None` when the records cannot be read.
async fn look(app: &App, now: SystemTime) -> Option<(Vec<Cron>, Duration)> {
    let records = match app.records.read().await {
        Ok(records) => records,
        Err(e) => {
            tracing::error!(error = %e, "cannot read the crons");
            return None;
        }
    };
    let due = records.crons.values().filter(|c| is_due(c, now)).cloned().collect();
    let most = if app.is_scaled() { SCALED_WAIT } else { IDLE_WAIT };
    let wait = records
        .crons
        .values()
        .filter(|c| c.enabled)
        .filter_map(|c| c.next_run_date.as_deref().and_then(schedule::parse_time))
        .min()
        .map_or(most, |next| next.duration_since(now).unwrap_or(Duration::ZERO))
        .min(most);
    Some((due, wait))
}

/// Makes the run of each cron of `due` and moves its next time past `now`. Returns the ids of the runs
/// made. Embedded, a cron's run is saved before its next time; scaled out, the next time is moved first
/// (under the records' lock, which every instance shares), so that one instance only makes the run.
async fn fire_all(app: &Arc<App>, due: Vec<Cron>, now: SystemTime) -> Vec<String> {
    let claim_first = app.is_scaled();
    let mut made = Vec::new();
    for cron in due {
        if claim_first && !advance(app, &cron, now).await {
            continue;
        }
        match fire(app, &cron).await {
            Ok(run_id) => made.push(run_id),
            Err(detail) => {
                tracing::error!(cron_id = cron.cron_id, error = detail, "the cron's run was not made")
            }
        }
        if !claim_first {
            advance(app, &cron, now).await;
        }
    }
    made
}

/// Moves the cron's next time past `now`, unless it was deleted or changed meanwhile (a change sets its
/// own next time) or another instance moved it. Whether it moved it.
async fn advance(app: &Arc<App>, cron: &Cron, now: SystemTime) -> bool {
    let mut records = match app.records.lock(Key::Cron(&cron.cron_id)).await {
        Ok(records) => records,
        Err(e) => {
            tracing::error!(cron_id = cron.cron_id, error = %e, "cannot save the cron's next time");
            return false;
        }
    };
    let Some(mut current) = records.crons.get(&cron.cron_id).cloned() else { return false };
    if current.next_run_date != cron.next_run_date {
        return false;
    }
    current.next_run_date = next_run_date(&current, now);
    match records.commit(vec![Change::Cron(Box::new(current))]).await {
        Ok(()) => true,
        Err(e) => {
            tracing::error!(cron_id = cron.cron_id, error = %e, "cannot save the cron's next time");
            false
        }
    }
}

/// Who a cron's runs are made as: its owner (LangGraph's user of that identity, without permissions), or
/// nobody on a server without authentication or for a cron made without it.
fn owner(app: &App, cron: &Cron) -> Caller {
    match cron.user_id.as_deref().filter(|id| !id.is_empty()) {
        Some(identity) if app.auth.is_some() => Caller::new(User::new(identity)),
        _ => Caller::default(),
    }
}

/// Makes one run of the cron, as its owner: authorized as the owner's run, on a thread it owns.
async fn fire(app: &Arc<App>, cron: &Cron) -> Result<String, String> {
    let request = run_request(cron).map_err(|e| format!("the cron's payload is not a run request: {e}"))?;
    let caller = owner(app, cron);
    let mut created = match &cron.thread_id {
        Some(thread_id) => crate::runs::create(app, &caller, Some(thread_id), request, false, false).await,
        None => crate::runs::create(app, &caller, None, request, true, false).await,
    }
    .map_err(|e| e.detail)?;
    created.schedule(app);
    tracing::debug!(cron_id = cron.cron_id, run_id = created.record.run.run_id, "cron fired");
    Ok(created.record.run.run_id)
}

/// The scheduler: fires due crons, then sleeps until the next one is due or a cron changes. Runs until
/// its task is dropped. One read of the records a turn: a turn that fired crons looks again at once
/// (their next times have moved), one that fired none sleeps as that read says.
pub(crate) async fn run_scheduler(app: Arc<App>) {
    loop {
        // Registered before looking, so that a change made while firing is not missed.
        let woken = app.cron_wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let now = SystemTime::now();
        let wait = match look(&app, now).await {
            Some((due, wait)) if due.is_empty() => wait,
            Some((due, _)) => {
                fire_all(&app, due, now).await;
                Duration::ZERO
            }
            None => SCALED_WAIT,
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = woken => {}
        }
    }
}

/// A new cron's record (its payload already holds the resolved assistant id and the cron's id).
pub(crate) fn new_record(
    cron_id: String,
    assistant_id: String,
    thread_id: Option<String>,
    schedule: &Schedule,
    request: &crate::api::requests::CronCreate,
    payload: Map<String, Value>,
    end_time: Option<String>,
) -> Result<Cron, schedule::ScheduleError> {
    let stamp = now();
    let next = schedule.next_after(SystemTime::now())?;
    let on_run_completed = if thread_id.is_some() {
        None
    } else {
        Some(request.on_run_completed.clone().unwrap_or_else(|| "delete".to_owned()))
    };
    Ok(Cron {
        cron_id,
        assistant_id,
        thread_id,
        // The user of a server without authentication, as LangGraph writes it (the route sets the caller's).
        user_id: Some(String::new()),
        end_time,
        schedule: request.schedule.clone(),
        timezone: request.timezone.clone(),
        payload,
        next_run_date: Some(iso(next)),
        metadata: request.metadata.clone().unwrap_or_default(),
        on_run_completed,
        enabled: request.enabled.unwrap_or(true),
        created_at: stamp.clone(),
        updated_at: stamp,
    })
}

#[cfg(test)]
mod tests;
