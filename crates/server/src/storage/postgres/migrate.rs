//! The records' schema: made, or upgraded from an earlier release's, when an instance starts.

use std::time::Duration;

use sqlx::{PgConnection, Row as _};
use tokio::sync::watch;

use super::{SCHEMA, SCHEMA_READABLE_FROM, SCHEMA_VERSION, source, storage};
use crate::error::ServerError;
use crate::scale::Db;

/// How often a start tries the schema's change when it waits too long for a lock (each try gives up
/// after the `lock_timeout` it sets).
const MIGRATE_ATTEMPTS: u32 = 12;

/// How many records one transaction of an upgrade's fill reads and writes.
const FILL_BATCH: i64 = 1_000;

/// The size of the records' table, in bytes, up to which an upgrade is done in the migration's
/// transaction (a second or less of holding the table); a larger table is upgraded online.
const ONLINE_FROM_BYTES: i64 = 8 << 20;

/// What the name of the online upgrade's lease in `weft_server_sweeps` starts with; the rest is the id of
/// the start that holds it. Its row says until when: the start renews it while it works on, and deletes
/// it when done.
const UPGRADE_LEASE: &str = "records_upgrade:";

/// How long the online upgrade's lease lasts past its last renewal (renewed every third of it).
const UPGRADE_LEASE_FOR: Duration = Duration::from_secs(60);

/// How long a concurrent index change waits for older transactions before the sessions it waits for are
/// named in a warning (and again every such time).
const WAIT_REPORT_EVERY: Duration = Duration::from_secs(30);

/// Makes or upgrades the tables, under an advisory lock (instances starting together wait for each
/// other); nothing when the recorded version is current. A change that cannot have its locks within 5 s
/// gives up (so that the instances at work go on) and is tried again a second later.
///
/// A table of an earlier release larger than [`ONLINE_FROM_BYTES`] is upgraded online, by one start at
/// a time (the one holding the [`UPGRADE_LEASE`]; the others starting meanwhile wait, taking no lock):
/// the migration's transaction makes the functions and adds the columns, and commits; then the records
/// written before are filled in batches of [`FILL_BATCH`], each its own transaction, and the indexes are
/// built and the old ones dropped `CONCURRENTLY`, so that the instances at work (this release's and the
/// earlier one's, whose writes the functions fill in) write on meanwhile; then the version is recorded.
/// Each step can be done again, so that a start that dies midway leaves the next one to finish it, and
/// one that loses its lease (held up past it) stops and waits for whoever took it over.
pub(crate) async fn migrate(db: &Db) -> Result<(), ServerError> {
    migrate_leased(db, UPGRADE_LEASE_FOR).await
}

/// [`migrate`] with a lease of `lease_for`.
pub(super) async fn migrate_leased(db: &Db, lease_for: Duration) -> Result<(), ServerError> {
    let lease = Lease { name: format!("{UPGRADE_LEASE}{}", uuid::Uuid::new_v4().simple()), lasts: lease_for };
    let mut held = false;
    let migrated = migrate_as(db, &lease, &mut held).await;
    if migrated.is_err() && held {
        // Let go at once, so that the next start need not wait for the lease to lapse.
        let free = sqlx::query("DELETE FROM weft_server_sweeps WHERE name = $1").bind(&lease.name);
        if let Err(e) = db.execute(free).await {
            tracing::warn!(error = %e, "cannot let go of the lease of the records' upgrade");
        }
    }
    migrated
}

/// The online upgrade's lease of one start: its row's name, and how long it lasts past a renewal.
#[derive(Debug)]
struct Lease {
    name: String,
    lasts: Duration,
}

impl Lease {
    fn millis(&self) -> i64 {
        i64::try_from(self.lasts.as_millis()).unwrap_or(i64::MAX)
    }
}

/// The loop of [`migrate`]; `held` says whether this start has taken the lease.
async fn migrate_as(db: &Db, lease: &Lease, held: &mut bool) -> Result<(), ServerError> {
    let (mut attempt, mut waits) = (1, 0_u32);
    // Renews the lease from its taking until this returns, the version's recording included.
    let mut renewal: Option<Renewal> = None;
    loop {
        match migrate_once(db, lease, *held).await {
            Ok(Migration::Refused(refused)) => return Err(refused),
            Ok(Migration::Current) => return Ok(()),
            Ok(Migration::Online) if renewal.is_none() => {
                *held = true;
                let renewing = renewal.insert(Renewal::start(db.clone(), lease));
                tokio::select! {
                    upgraded = upgrade_online(db) => upgraded.map_err(storage)?,
                    () = renewing.lost() => {}
                }
            }
            Ok(Migration::Online) => {
                return Err(storage(sqlx::Error::Protocol(
                    "the records' upgrade left an index missing or invalid".into(),
                )));
            }
            Ok(Migration::Lost) => {
                tracing::warn!(
                    "the lease of the records' upgrade lapsed before it was done: leaving the upgrade to \
                     whoever takes it over"
                );
                (*held, renewal) = (false, None);
            }
            Ok(Migration::Wait) => {
                if waits % 30 == 0 {
                    tracing::info!("another instance is upgrading the records' table: waiting for it");
                }
                waits += 1;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(sqlx::Error::Database(e))
                if e.code().as_deref() == Some("55P03") && attempt < MIGRATE_ATTEMPTS =>
            {
                tracing::warn!(attempt, "the records' schema waited too long for a lock; trying again");
                attempt += 1;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => return Err(storage(e)),
        }
    }
}

/// What one try of [`migrate`] found.
enum Migration {
    /// The schema is this build's (recorded now or before).
    Current,
    /// The functions and columns are made and this start holds the upgrade's lease; the fill and the
    /// indexes are left to [`upgrade_online`].
    Online,
    /// This start held the lease, and it lapsed (another may hold it now).
    Lost,
    /// Another start is upgrading the table online.
    Wait,
    /// The database needs a newer build.
    Refused(ServerError),
}

/// Renews a lease every third of its length, in a task of its own that ends when this goes or when a
/// renewal finds the lease no longer this start's (lapsed, or taken over).
struct Renewal {
    task: tokio::task::JoinHandle<()>,
    lost: watch::Receiver<bool>,
}

impl Renewal {
    fn start(db: Db, lease: &Lease) -> Self {
        let (tell, lost) = watch::channel(false);
        let (name, millis, every) = (lease.name.clone(), lease.millis(), lease.lasts / 3);
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let renew = sqlx::query(
                    "UPDATE weft_server_sweeps SET due_at = now() + $2 * interval '1 millisecond' \
                     WHERE name = $1 AND due_at > now()",
                )
                .bind(&name)
                .bind(millis);
                match db.execute(renew).await {
                    Ok(done) if done.rows_affected() == 0 => {
                        let _ = tell.send(true);
                        return;
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "cannot renew the lease of the records' upgrade"),
                }
            }
        });
        Self { task, lost }
    }

    /// Once a renewal has found the lease lost (never, while it holds).
    async fn lost(&mut self) {
        if self.lost.wait_for(|lost| *lost).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Renewal {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One try of [`migrate`] (`held`: this start has taken the online upgrade's lease): the version is
/// recorded once the indexes are all there and valid.
async fn migrate_once(db: &Db, lease: &Lease, held: bool) -> Result<Migration, sqlx::Error> {
    let mut tx = db.pool.begin().await?;
    // Simple queries: no prepared statement, whatever stands between this and PostgreSQL. The table of
    // sweeps holds the online upgrade's lease.
    sqlx::raw_sql(
        "SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || ':weft_server_migrate', 0)); \
         CREATE TABLE IF NOT EXISTS weft_server_schema (version INTEGER NOT NULL, readable_from INTEGER); \
         CREATE TABLE IF NOT EXISTS weft_server_sweeps (name TEXT PRIMARY KEY, due_at TIMESTAMPTZ NOT NULL)",
    )
    .execute(&mut *tx)
    .await?;
    // Read through `to_jsonb`: a table made before `readable_from` lacks the column (no DDL here). The
    // leases in force: this start's, and others' (another start upgrading the table online).
    let row = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "SELECT coalesce(max(version), 0), max((to_jsonb(s) ->> 'readable_from')::integer), \
           (SELECT count(*) FILTER (WHERE name = '{mine}') FROM weft_server_sweeps \
             WHERE starts_with(name, '{UPGRADE_LEASE}') AND due_at > now()), \
           (SELECT count(*) FILTER (WHERE name <> '{mine}') FROM weft_server_sweeps \
             WHERE starts_with(name, '{UPGRADE_LEASE}') AND due_at > now()) \
         FROM weft_server_schema s",
        mine = lease.name
    )))
    .fetch_one(&mut *tx)
    .await?;
    let (version, readable_from): (i32, Option<i32>) = (row.try_get(0)?, row.try_get(1)?);
    let (mine, others): (i64, i64) = (row.try_get(2)?, row.try_get(3)?);
    // Recorded without `readable_from` (before it existed): only builds that know the version.
    let needs = readable_from.unwrap_or(version);
    if version > SCHEMA_VERSION && needs > SCHEMA_VERSION {
        tx.rollback().await?;
        return Ok(Migration::Refused(ServerError::SchemaTooNew {
            found: version,
            needs,
            knows: SCHEMA_VERSION,
        }));
    }
    if version >= SCHEMA_VERSION {
        return tx.commit().await.map(|()| Migration::Current);
    }
    if held && mine == 0 {
        tx.rollback().await?;
        return Ok(Migration::Lost);
    }
    if others > 0 && !held {
        tx.rollback().await?;
        return Ok(Migration::Wait);
    }
    sqlx::raw_sql("SET LOCAL lock_timeout = '5s'").execute(&mut *tx).await?;
    for statement in SCHEMA {
        sqlx::raw_sql(*statement).execute(&mut *tx).await?;
    }
    let (columns, bytes): (i64, i64) = sqlx::raw_sql(
        "SELECT (SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() \
           AND table_name = 'weft_server_records' AND column_name = 'parent'), \
         pg_total_relation_size('weft_server_records')",
    )
    .fetch_one(&mut *tx)
    .await
    .and_then(|row| Ok((row.try_get(0)?, row.try_get(1)?)))?;
    if columns == 0 {
        for statement in source::add_columns() {
            sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).execute(&mut *tx).await?;
        }
    }
    if !indexes_done(&mut tx).await? {
        if held || bytes > ONLINE_FROM_BYTES {
            if !held && !take_lease(&mut tx, lease).await? {
                tx.rollback().await?;
                return Ok(Migration::Wait);
            }
            tx.commit().await?;
            return Ok(Migration::Online);
        }
        upgrade_in(&mut tx).await?;
    }
    let record = format!(
        "ALTER TABLE weft_server_schema ADD COLUMN IF NOT EXISTS readable_from INTEGER; \
         DELETE FROM weft_server_schema; \
         INSERT INTO weft_server_schema (version, readable_from) VALUES ({SCHEMA_VERSION}, {SCHEMA_READABLE_FROM}); \
         DELETE FROM weft_server_sweeps WHERE starts_with(name, '{UPGRADE_LEASE}')"
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(record)).execute(&mut *tx).await?;
    tx.commit().await.map(|()| Migration::Current)
}

/// Takes the online upgrade's lease, in the migration's transaction (the lapsed ones deleted); `false`
/// when another's is in force after all (renewed by a transaction that committed after this one looked:
/// the rows a renewal holds are deleted only if they are still lapsed once it has committed).
async fn take_lease(conn: &mut PgConnection, lease: &Lease) -> Result<bool, sqlx::Error> {
    sqlx::query("DELETE FROM weft_server_sweeps WHERE starts_with(name, $1) AND due_at <= now()")
        .bind(UPGRADE_LEASE)
        .persistent(false)
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        "INSERT INTO weft_server_sweeps (name, due_at) VALUES ($1, now() + $2 * interval '1 millisecond')",
    )
    .bind(&lease.name)
    .bind(lease.millis())
    .persistent(false)
    .execute(&mut *conn)
    .await?;
    let others: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM weft_server_sweeps WHERE starts_with(name, $1) AND name <> $2",
    )
    .bind(UPGRADE_LEASE)
    .bind(&lease.name)
    .persistent(false)
    .fetch_one(conn)
    .await?;
    Ok(others == 0)
}

/// The upgrade of a small table, in the migration's transaction: the fills, the indexes (an invalid one
/// left by a build cut short made again), the old indexes dropped.
async fn upgrade_in(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    let mut statements = vec![
        source::fill_columns(source::postgres_json),
        source::fill_run_times(source::postgres_json, source::POSTGRES_ALIVE),
    ];
    for (name, create) in source::indexes(source::POSTGRES_ALIVE, source::BYTE_ORDER, false) {
        if index_state(&mut *conn, name).await?.is_some_and(|(valid, _)| !valid) {
            statements.push(format!("DROP INDEX {name}"));
        }
        statements.push(create);
    }
    statements.extend(source::old_indexes().map(|name| format!("DROP INDEX IF EXISTS {name}")));
    for statement in statements {
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).execute(&mut *conn).await?;
    }
    Ok(())
}

/// Whether the index `name` is valid, and whether a build of an index of its table is going on in
/// another session; `None` when there is no such index.
async fn index_state(conn: &mut PgConnection, name: &str) -> Result<Option<(bool, bool)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT i.indisvalid, EXISTS (SELECT 1 FROM pg_stat_progress_create_index p \
           WHERE p.relid = i.indrelid AND p.pid <> pg_backend_pid()) \
         FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
         WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace",
    )
    .bind(name)
    .persistent(false)
    .fetch_optional(conn)
    .await
}

/// Whether the indexes the reads use are all there and valid, and the old ones gone.
async fn indexes_done(conn: &mut PgConnection) -> Result<bool, sqlx::Error> {
    let wanted: Vec<&str> = source::indexes("", "", true).into_iter().map(|(name, _)| name).collect();
    let old: Vec<&str> = source::old_indexes().collect();
    let (valid, stale): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE c.relname = ANY($1) AND i.indisvalid), \
           count(*) FILTER (WHERE c.relname = ANY($2)) \
         FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
         WHERE c.relnamespace = current_schema()::regnamespace",
    )
    .bind(&wanted)
    .bind(&old)
    .persistent(false)
    .fetch_one(conn)
    .await?;
    Ok(valid == i64::try_from(wanted.len()).unwrap_or(i64::MAX) && stale == 0)
}

/// The online part of an upgrade (see [`migrate`]): the fills in batches, the indexes built and the old
/// ones dropped concurrently.
async fn upgrade_online(db: &Db) -> Result<(), sqlx::Error> {
    tracing::info!("upgrading the records' table: filling its columns from the records' bodies");
    fill_in_batches(db, &source::fill_columns(source::postgres_json), &["run", "thread"]).await?;
    let times = source::fill_run_times(source::postgres_json, source::POSTGRES_ALIVE);
    fill_in_batches(db, &times, &["run"]).await?;
    for (name, create) in source::indexes(source::POSTGRES_ALIVE, source::BYTE_ORDER, true) {
        tracing::info!(index = name, "upgrading the records' table: building an index concurrently");
        build_index(db, name, &create).await?;
    }
    for name in source::old_indexes() {
        concurrently(db, format!("DROP INDEX CONCURRENTLY IF EXISTS {name}")).await?;
    }
    Ok(())
}

/// Runs a concurrent index change (`CREATE` or `DROP INDEX CONCURRENTLY`), which waits for every older
/// transaction that may use the table: while it waits, the sessions it waits for are named in a warning
/// every [`WAIT_REPORT_EVERY`] (a session left idle in a transaction holds the upgrade until it ends).
async fn concurrently(db: &Db, statement: String) -> Result<(), sqlx::Error> {
    let change = sqlx::raw_sql(sqlx::AssertSqlSafe(statement.clone())).execute(&db.pool);
    tokio::pin!(change);
    loop {
        tokio::select! {
            done = &mut change => return done.map(drop),
            () = tokio::time::sleep(WAIT_REPORT_EVERY) => match waited_for(db, &statement).await {
                Ok(sessions) if !sessions.is_empty() => {
                    let sessions: Vec<String> = sessions
                        .iter()
                        .map(|(pid, state, app, open)| {
                            format!("pid {pid} ({state}, application `{app}`, in a transaction for {open:.0} s)")
                        })
                        .collect();
                    tracing::warn!(
                        statement = %statement,
                        waiting_for = %sessions.join("; "),
                        "the records' upgrade waits for older transactions to end"
                    );
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(error = %e, "cannot tell what the records' upgrade waits for"),
            },
        }
    }
}

/// The sessions that `statement`, running in another session of this database, waits for: each one's
/// process id, state, application, and how long its transaction has been open (seconds).
pub(super) async fn waited_for(
    db: &Db,
    statement: &str,
) -> Result<Vec<(i32, String, String, f64)>, sqlx::Error> {
    let query = sqlx::query_as(
        "SELECT b.pid, coalesce(b.state, ''), coalesce(b.application_name, ''), \
           coalesce(extract(epoch FROM now() - b.xact_start), 0)::float8 \
         FROM pg_stat_activity w \
         CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS blocking(pid) \
         JOIN pg_stat_activity b ON b.pid = blocking.pid \
         WHERE w.query = $1 AND w.datname = current_database() AND w.pid <> pg_backend_pid() \
         ORDER BY b.pid",
    );
    db.fetch_all(query.bind(statement)).await
}

/// Runs `fill` (an `UPDATE` ending in a `WHERE` clause) over the records of each of `kinds`, a batch of
/// [`FILL_BATCH`] at a time in the order of their ids, each batch its own transaction. A batch waits at
/// most 100 ms for a row another transaction holds (an instance's turn writing it), then lets go of what
/// it holds and is tried again: so a turn never waits long behind the fill, and the two cannot deadlock.
async fn fill_in_batches(db: &Db, fill: &str, kinds: &[&str]) -> Result<(), sqlx::Error> {
    for kind in kinds {
        let mut from = String::new();
        loop {
            // Through `Db`: behind a transaction-mode pooler an unnamed statement outside a transaction
            // may be bound on another server connection than it was parsed on.
            let next = "SELECT id FROM weft_server_records WHERE kind = $1 AND id > $2 ORDER BY id OFFSET $3 LIMIT 1";
            let to: Option<String> = db
                .fetch_optional(sqlx::query_scalar(next).bind(*kind).bind(&from).bind(FILL_BATCH - 1))
                .await?;
            let mut tries = 0;
            while let Err(e) = fill_batch(db, fill, kind, (&from, to.as_deref())).await {
                let waited = matches!(&e, sqlx::Error::Database(d) if d.code().as_deref() == Some("55P03"));
                tries += 1;
                if !waited || tries >= 100 {
                    return Err(e);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            match to {
                Some(to) => from = to,
                None => break,
            }
        }
    }
    Ok(())
}

/// One batch of [`fill_in_batches`]: the records of `kind` whose ids are after the range's first, up to
/// its last (to the end without one).
async fn fill_batch(
    db: &Db,
    fill: &str,
    kind: &str,
    (from, to): (&str, Option<&str>),
) -> Result<(), sqlx::Error> {
    let mut tx = db.pool.begin().await?;
    sqlx::raw_sql("SET LOCAL lock_timeout = '100ms'").execute(&mut *tx).await?;
    let range =
        if to.is_some() { " AND kind = $1 AND id > $2 AND id <= $3" } else { " AND kind = $1 AND id > $2" };
    let query = sqlx::query(sqlx::AssertSqlSafe(format!("{fill}{range}"))).bind(kind).bind(from).bind(to);
    query.persistent(false).execute(&mut *tx).await?;
    tx.commit().await
}

/// Builds an index concurrently (`create`), until it is valid: a build that failed or was cut short
/// leaves an invalid index, which is dropped and built again (three such builds at most, then an error).
/// A build of the table's indexes going on in another session (an earlier start's, which went on after
/// that start let go) is waited for, however long, and not counted: `create` itself waits for it.
async fn build_index(db: &Db, name: &str, create: &str) -> Result<(), sqlx::Error> {
    let mut failed = 0;
    while failed < 3 {
        concurrently(db, create.to_owned()).await?;
        // In a transaction of its own: pooler-safe (see `fill_in_batches`).
        let mut tx = db.pool.begin().await?;
        let state = index_state(&mut tx, name).await?;
        tx.commit().await?;
        match state {
            Some((true, _)) => return Ok(()),
            Some((false, true)) | None => tokio::time::sleep(Duration::from_secs(1)).await,
            Some((false, false)) => {
                failed += 1;
                tracing::warn!(index = name, "an invalid index (a build cut short): building it again");
                concurrently(db, format!("DROP INDEX CONCURRENTLY IF EXISTS {name}")).await?;
            }
        }
    }
    // Not valid after three builds: stop before the old indexes are dropped.
    Err(sqlx::Error::Protocol(format!("the index {name} is still not valid after three builds")))
}
