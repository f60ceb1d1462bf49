//! A scaled-out server (feature `scale`): many stateless instances on one PostgreSQL and one Redis.
//!
//! - **PostgreSQL is the source of truth**: the records ([`crate::storage::postgres`]), the run queue
//!   ([`queue`]), the checkpoints and the store. Instances keep no state of their own that another
//!   instance needs.
//! - **Workers** ([`worker`]): each instance claims due runs from the queue (`FOR UPDATE SKIP LOCKED`, at
//!   most its `max_concurrent_runs` at a time) under a lease that it renews; a run whose lease expires
//!   (its instance died) is claimed again by any instance and continues from its last checkpoint.
//! - **Redis** ([`bus`]) wakes idle workers, carries cancels to the worker of a run, and fans each run's
//!   events out: the worker appends them to a Redis stream per run (trimmed, expiring after the run), and
//!   any instance serving a stream or a join reads them from there, by id, so `Last-Event-ID` resumes
//!   anywhere. Losing Redis delays work (the queue is polled, cancels are read at lease renewal) but loses
//!   none of it; the events sent while it was down are lost to listeners.

pub(crate) mod bus;
pub(crate) mod queue;
pub(crate) mod sweep;
mod threads;
pub(crate) mod worker;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use tokio::sync::Notify;

use crate::app::App;
use crate::error::ServerError;
use crate::runs::{CancelAction, RunChannel};

/// How long a worker's claim on a run lasts unless renewed, by default.
pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// How often an idle worker looks at the queue without being woken, by default.
pub(crate) const DEFAULT_POLL: Duration = Duration::from_secs(1);

/// Where a scaled-out server keeps its state, and its timings.
#[derive(Clone)]
pub(crate) struct ScaleConfig {
    /// PostgreSQL's connection string (`DATABASE_URI`).
    pub(crate) database_uri: String,
    /// Redis' connection string (`REDIS_URI`).
    pub(crate) redis_uri: String,
    /// What every Redis key and channel of this deployment starts with.
    pub(crate) prefix: String,
    /// How long a claim lasts unless renewed (renewed every third of it).
    pub(crate) lease: Duration,
    /// How often an idle worker looks at the queue without being woken.
    pub(crate) poll: Duration,
    /// The run watchdog ([`crate::ServerBuilder::run_watchdog`]): a run stalled for it plus a lease has
    /// its lease no longer renewed.
    pub(crate) watchdog: Option<Duration>,
    /// PostgreSQL is reached through a transaction-mode pooler without prepared statements
    /// ([`crate::ServerBuilder::postgres_transaction_pooler`]).
    pub(crate) transaction_pooler: bool,
}

/// The scaled server's PostgreSQL pool, and whether statements are prepared on it (not behind a
/// transaction-mode pooler: there each runs unnamed in a transaction of its own, see
/// [`PgStatements`](weft_integrations::postgres::PgStatements)).
pub(crate) type Db = weft_integrations::postgres::PgStatements;

impl fmt::Debug for ScaleConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Connection strings may hold passwords: never shown.
        f.debug_struct("ScaleConfig")
            .field("database_uri", &"<redacted>")
            .field("redis_uri", &"<redacted>")
            .field("prefix", &self.prefix)
            .field("lease", &self.lease)
            .field("poll", &self.poll)
            .field("watchdog", &self.watchdog)
            .field("transaction_pooler", &self.transaction_pooler)
            .finish()
    }
}

/// A run this instance's worker is running.
#[derive(Debug)]
struct Working {
    /// When this worker started it (a renewal asked before then cannot have renewed it).
    since: std::time::Instant,
    channel: Arc<RunChannel>,
    abort: Option<tokio::task::AbortHandle>,
    /// Its end is being recorded: a lease that ends now is the run's own end.
    finishing: bool,
}

/// This instance's part in a scaled-out deployment.
#[derive(Debug)]
pub(crate) struct Scale {
    pub(crate) db: Db,
    /// The checkpointer (the server's own), to store a run's last saves in the turn that records its end.
    pub(crate) saver: Arc<weft_integrations::postgres::PostgresSaver>,
    pub(crate) bus: bus::Bus,
    /// This instance's worker id (a new UUID per process).
    pub(crate) worker: String,
    pub(crate) lease: Duration,
    pub(crate) poll: Duration,
    /// Past how long without progress a run's lease is no longer renewed (the watchdog plus a lease).
    pub(crate) stall: Option<Duration>,
    wake: Notify,
    working: Mutex<HashMap<String, Working>>,
    /// Runs claimed and not yet running here (their leases are renewed meanwhile).
    claimed: Mutex<std::collections::HashSet<String>>,
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
}

impl Drop for Scale {
    fn drop(&mut self) {
        for task in self.tasks.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).drain(..) {
            task.abort();
        }
    }
}

/// Connects to PostgreSQL (a pool for the records and the queue) and Redis.
pub(crate) async fn connect(config: &ScaleConfig) -> Result<(Db, bus::Bus), ServerError> {
    let failed = |e| weft_integrations::sql_checkpoint_error("postgres: cannot connect".to_owned(), e);
    let mut options = config.database_uri.parse::<PgConnectOptions>().map_err(failed)?;
    options = if config.transaction_pooler {
        // Named statements would stay on whichever server connection prepared them.
        options.statement_cache_capacity(0)
    } else {
        // Plans made for each query's values: a plan cached while the tables were small (a scan of the
        // records for "the rows written since seq N") would stay, and cost more as they grow. A startup
        // parameter, so no round trip; through a pooler (which refuses or ignores startup parameters)
        // every statement is unnamed and planned for its values anyway.
        options.options([("plan_cache_mode", "force_custom_plan")])
    };
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(10))
        // No ping before each use: a round trip per query (a broken connection fails its query instead,
        // and the pool drops it).
        .test_before_acquire(false)
        .connect_with(options)
        .await
        .map_err(failed)?;
    let bus = bus::Bus::connect(&config.redis_uri, &config.prefix).await?;
    Ok((Db::new(pool, !config.transaction_pooler), bus))
}

impl Scale {
    pub(crate) fn new(
        config: &ScaleConfig,
        db: Db,
        bus: bus::Bus,
        saver: Arc<weft_integrations::postgres::PostgresSaver>,
    ) -> Self {
        Self {
            db,
            saver,
            bus,
            worker: uuid::Uuid::new_v4().to_string(),
            lease: config.lease,
            poll: config.poll,
            stall: config.watchdog.map(|w| w + config.lease),
            wake: Notify::new(),
            working: Mutex::new(HashMap::new()),
            claimed: Mutex::new(std::collections::HashSet::new()),
            tasks: Mutex::new(Vec::new()),
        }
    }

    /// Starts this instance's worker, lease renewal and Redis listener (they stop with the server).
    pub(crate) fn start(self: &Arc<Self>, app: &Arc<App>) {
        app.channels.set_remote(Arc::new(bus::Followers::new(Arc::downgrade(app), Arc::clone(self))));
        let tasks = [
            tokio::spawn(worker::claim_loop(Arc::downgrade(app), Arc::downgrade(self))).abort_handle(),
            tokio::spawn(worker::renew_loop(Arc::downgrade(self))).abort_handle(),
            tokio::spawn(bus::listen(Arc::downgrade(self))).abort_handle(),
        ];
        self.tasks.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(tasks);
    }

    /// Wakes the workers of every instance (a run was queued or a thread's run ended).
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
        self.bus.publish_wake(&self.worker);
    }

    /// Lets go of a drained run for another instance to take over now, and wakes their workers; should
    /// that fail, the run's lease lapses and it is taken over then.
    pub(crate) async fn release(&self, run_id: &str) {
        match queue::release(&self.db, &self.worker, run_id).await {
            Ok(()) => self.bus.publish_wake(&self.worker),
            Err(e) => {
                tracing::warn!(run_id, error = %e, "cannot let go of a drained run: its lease will lapse")
            }
        }
    }

    /// Wakes this instance's worker.
    pub(crate) fn wake_here(&self) {
        self.wake.notify_one();
    }

    /// Asks for the run to be cancelled wherever it runs: recorded in the queue (read at its worker's
    /// next renewal) and sent through Redis (at once).
    /// That is fire-and-forget (failures are logged); [`cancel_everywhere`](Scale::cancel_everywhere)
    /// answers whether the cancel was recorded.
    pub(crate) fn request_cancel(self: &Arc<Self>, run_id: &str, action: CancelAction) {
        let scale = Arc::clone(self);
        let run_id = run_id.to_owned();
        tokio::spawn(async move {
            if let Err(e) = scale.cancel_everywhere(&run_id, action).await {
                tracing::warn!(run_id, error = %e, "cannot record a cancel in the queue");
            }
        });
    }

    /// Cancels the run wherever it runs, and answers once the cancel is recorded in the run's queue row,
    /// which its worker reads at its next lease renewal (a third of a lease at most), whichever instance
    /// it is on; Redis then tells every instance at once, a speed-up whose failure is only logged. An
    /// error: the cancel was not recorded, and the run may go on. A run that has already left the queue
    /// (it ended) needs no cancel: that is no error.
    ///
    /// Nothing waits here for the run to stop: the queue itself starts no later run of the thread before
    /// the cancelled run's row is gone ([`queue::claim`]).
    pub(crate) async fn cancel_everywhere(
        &self,
        run_id: &str,
        action: CancelAction,
    ) -> Result<(), ServerError> {
        // Recorded first: when that fails, no run is asked to stop, here or elsewhere.
        queue::ask_cancel(&self.db, run_id, action).await.map_err(queue_error)?;
        self.cancel_here(run_id, action);
        if let Err(e) = self.bus.publish_cancel(run_id, action).await {
            tracing::warn!(run_id, error = %e, "cannot publish a cancel: its worker reads it at its next renewal");
        }
        Ok(())
    }

    /// Cancels the run when this instance runs it.
    pub(crate) fn cancel_here(&self, run_id: &str, action: CancelAction) {
        let working = self.working.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(working) = working.get(run_id) {
            working.channel.cancel_here(action);
        }
    }

    /// Before a run's end is recorded: sends out its last events (waiting at most a few seconds for
    /// Redis). Whether this worker still holds the run is checked in the turn that records the end
    /// ([`Scale::end_turn`]).
    pub(crate) async fn before_finish(&self, run_id: &str, channel: &RunChannel) {
        if let Some(working) =
            self.working.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get_mut(run_id)
        {
            working.finishing = true;
        }
        if tokio::time::timeout(Duration::from_secs(5), channel.flush()).await.is_err() {
            tracing::warn!(run_id, "the run's last events are not out after 5 s: recording its end anyway");
        }
    }

    /// In the records' turn that records a run's end: whether this worker still holds the run (its
    /// queue row then stays locked until the turn commits, so no other worker claims it meanwhile).
    /// False: another worker has it; record nothing, and store nothing more (the run goes on there from
    /// its last stored checkpoint). True: the run's last saves (`saves`, see
    /// [`weft_graph::EndState::with_last_saves`]) are stored in the turn's transaction with its end, or
    /// not at all; then its end is not recorded either, and whoever takes the run over runs its last
    /// step again, as after a crash there.
    pub(crate) async fn end_turn(
        &self,
        records: &mut crate::storage::RecordsGuard<'_>,
        run_id: &str,
        saves: Vec<weft_graph::checkpoint::SaveOp>,
    ) -> bool {
        if !self.still_holds(records, run_id).await {
            return false;
        }
        let left = records.save_on_write(&self.saver, saves);
        // Records elsewhere than in PostgreSQL (never so scaled out) store them now.
        if !left.is_empty()
            && let Err(e) = weft_graph::checkpoint::Checkpointer::put_batch(self.saver.as_ref(), left).await
        {
            tracing::error!(run_id, error = %e, "cannot store the last step of a run");
        }
        true
    }

    /// Whether this worker holds the run's lease, checked in the turn (a failed check counts as held:
    /// the turn's write fails then too).
    async fn still_holds(&self, records: &mut crate::storage::RecordsGuard<'_>, run_id: &str) -> bool {
        match records.lease_held(&self.worker, run_id).await {
            Ok(held) => {
                if !held {
                    tracing::warn!(
                        run_id,
                        "the run's lease went to another worker: its end is theirs to record"
                    );
                }
                held
            }
            // The end is recorded through the records' turn, which fails too when PostgreSQL is gone.
            Err(e) => {
                tracing::warn!(run_id, error = %e, "cannot check the run's lease");
                true
            }
        }
    }
}

/// A queue query's error as the server reports storage errors.
fn queue_error(e: sqlx::Error) -> ServerError {
    ServerError::from(weft_integrations::sql_checkpoint_error("postgres: the run queue".to_owned(), e))
}
