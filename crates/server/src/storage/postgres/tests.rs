//! The records on PostgreSQL: turns across instances, each one transaction that leaves no lock behind, the
//! queue kept in step. Each test gets a database of its own (dropped after). Without PostgreSQL at 127.0.0.1:5432
//! (`WEFT_TEST_PG_ADMIN_URL` overrides it) the tests skip loudly, and fail in CI (`CI` set).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use sqlx::{Connection as _, PgPool};

use super::super::{Change, Records, RecordsLock};
use crate::model::{RunRecord, Thread};

fn admin_url() -> String {
    std::env::var("WEFT_TEST_PG_ADMIN_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// A database of one test, dropped when this goes.
struct Database {
    name: String,
    uri: String,
}

impl Drop for Database {
    fn drop(&mut self) {
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            runtime.block_on(async {
                let mut conn = sqlx::PgConnection::connect(&admin_url()).await.ok()?;
                let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await.ok()
            })
        })
        .join();
    }
}

async fn database() -> Option<Database> {
    let connect =
        tokio::time::timeout(Duration::from_secs(5), sqlx::PgConnection::connect(&admin_url())).await;
    let Ok(Ok(mut conn)) = connect else {
        weft_testenv::skip_or_fail("PostgreSQL", "unreachable", "`cargo xtask services` starts it");
        return None;
    };
    let name = format!("weft_records_{}", uuid::Uuid::new_v4().simple());
    let sql = format!("CREATE DATABASE \"{name}\"");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await.unwrap();
    let uri = format!("{}/{name}", admin_url().rsplit_once('/').unwrap().0);
    Some(Database { name, uri })
}

/// An instance's records on the database.
async fn instance(db: &Database) -> (RecordsLock, PgPool) {
    let pool = sqlx::postgres::PgPoolOptions::new().max_connections(4).connect(&db.uri).await.unwrap();
    let db = crate::scale::Db::new(pool.clone(), true);
    (RecordsLock::new(Records::open_postgres(db).await.unwrap()), pool)
}

fn thread(thread_id: &str) -> Change {
    let thread: Thread = serde_json::from_value(json!({
        "thread_id": thread_id, "created_at": "2026-11-27T00:00:00Z", "updated_at": "2026-11-27T00:00:00Z",
        "state_updated_at": "2026-11-27T00:00:00Z", "metadata": {}, "status": "idle", "config": {},
        "values": null, "error": null, "interrupts": {}
    }))
    .unwrap();
    Change::Thread(thread)
}

fn run(run_id: &str, thread_id: &str, status: &str) -> Change {
    let record: RunRecord = serde_json::from_value(json!({
        "run": {
            "run_id": run_id, "thread_id": thread_id, "assistant_id": "a", "metadata": {},
            "status": status, "multitask_strategy": "enqueue",
            "created_at": "2026-11-27T00:00:00Z", "updated_at": "2026-11-27T00:00:00Z",
            "langsmith_session_name": null,
            "kwargs": {
                "input": null, "command": null, "config": {}, "context": {}, "stream_mode": ["values"],
                "interrupt_before": null, "interrupt_after": null, "webhook": null, "feedback_keys": null,
                "temporary": false, "subgraphs": false, "resumable": false, "checkpoint_during": true,
                "durability": "async"
            }
        }
    }))
    .unwrap();
    Change::Run(Box::new(record))
}

async fn queued(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar("SELECT run_id FROM weft_server_queue ORDER BY run_id").fetch_all(pool).await.unwrap()
}

#[tokio::test]
async fn the_queue_follows_the_runs_written_in_one_turn() {
    let Some(db) = database().await else { return };
    let (a, pool) = instance(&db).await;
    let mut records = a.lock().await.unwrap();
    records
        .commit(vec![
            thread("t1"),
            run("r1", "t1", "pending"),
            run("r2", "t1", "pending"),
            run("r3", "t2", "running"),
            run("r2", "t1", "success"),
        ])
        .await
        .unwrap();
    assert_eq!(queued(&pool).await, ["r1", "r3"], "r2 queued, then ended in the same turn");
    records.commit(vec![Change::DeleteThread("t1".into()), run("r4", "t1", "pending")]).await.unwrap();
    assert_eq!(queued(&pool).await, ["r3", "r4"], "t1's runs went with it, then r4 came");
    records.commit(vec![Change::DeleteRun("r3".into()), run("r4", "t1", "error")]).await.unwrap();
    assert!(queued(&pool).await.is_empty());
    drop(records);
    let (b, _) = instance(&db).await;
    let seen = b.lock().await.unwrap();
    assert_eq!(seen.runs["r4"].run.status, crate::model::RunStatus::Error);
    assert!(!seen.runs.contains_key("r3") && !seen.threads.contains_key("t1"));
    assert!(seen.active_runs("t1").all(|r| r.run.run_id == "r1"), "r4 ended");
}

/// The advisory locks held on this test's database, by anyone.
async fn advisory_locks(pool: &PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted \
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn no_lock_outlives_a_turn() {
    let Some(db) = database().await else { return };
    let (a, pool) = instance(&db).await;
    let (b, _) = instance(&db).await;
    let mut turn = a.lock().await.unwrap();
    assert_eq!(advisory_locks(&pool).await, 1, "a turn holds the records' lock");
    turn.commit(vec![thread("t1")]).await.unwrap();
    assert_eq!(advisory_locks(&pool).await, 0, "its write's commit lets go of it");
    // The guard lives on: b takes its turn meanwhile, and a's next write reads b's in first.
    let mut other =
        tokio::time::timeout(Duration::from_secs(5), b.lock()).await.expect("b is not kept out").unwrap();
    other.commit(vec![thread("t2")]).await.unwrap();
    drop(other);
    turn.commit(vec![thread("t3")]).await.unwrap();
    assert!(turn.threads.contains_key("t2"), "a second write takes a new turn, which reads b's write in");
    drop(turn);
    // A turn that writes nothing is rolled back when let go.
    let idle = a.lock().await.unwrap();
    drop(idle);
    let mut seen = tokio::time::timeout(Duration::from_secs(5), b.lock())
        .await
        .expect("a turn let go without a write lets go of the lock")
        .unwrap();
    assert!(seen.threads.contains_key("t3"));
    seen.commit(vec![thread("t4")]).await.unwrap();
    drop(seen);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while advisory_locks(&pool).await > 0 {
        assert!(tokio::time::Instant::now() < deadline, "an advisory lock stays after every turn ended");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_caller_that_goes_away_while_waiting_leaves_no_lock() {
    let Some(db) = database().await else { return };
    let (a, _) = instance(&db).await;
    let (b, _) = instance(&db).await;
    let held = a.lock().await.unwrap();
    // b's caller waits for the lock, then goes away before it is granted.
    assert!(tokio::time::timeout(Duration::from_millis(200), b.lock()).await.is_err());
    drop(held);
    let mut seen = tokio::time::timeout(Duration::from_secs(5), a.lock())
        .await
        .expect("the abandoned wait does not keep the lock")
        .unwrap();
    seen.commit(vec![thread("after")]).await.unwrap();
    drop(seen);
    let records = tokio::time::timeout(Duration::from_secs(5), b.lock()).await.expect("b's turn").unwrap();
    assert!(records.threads.contains_key("after"));
}

#[tokio::test]
async fn an_instance_busy_with_its_own_callers_lets_the_others_in() {
    let Some(db) = database().await else { return };
    let (a, _) = instance(&db).await;
    let (b, _) = instance(&db).await;
    let a = Arc::new(a);
    let stop = Arc::new(AtomicBool::new(false));
    let turns = Arc::new(AtomicUsize::new(0));
    let mut callers = Vec::new();
    for caller in 0..4 {
        let (a, stop, turns) = (Arc::clone(&a), Arc::clone(&stop), Arc::clone(&turns));
        callers.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                let mut records = a.lock().await.unwrap();
                records.commit(vec![thread(&format!("a{caller}-{n}"))]).await.unwrap();
                n += 1;
                turns.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    while turns.load(Ordering::SeqCst) < 20 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // a always has callers waiting: b still gets turns in between.
    for _ in 0..3 {
        let mut seen = tokio::time::timeout(Duration::from_secs(2), b.lock())
            .await
            .expect("b gets a turn while a is busy")
            .unwrap();
        seen.commit(vec![thread("from-b")]).await.unwrap();
        assert!(seen.threads.contains_key("a0-0"));
    }
    stop.store(true, Ordering::SeqCst);
    for caller in callers {
        caller.await.unwrap();
    }
    let records = a.lock().await.unwrap();
    assert!(records.threads.contains_key("from-b"));
    let written = turns.load(Ordering::SeqCst);
    assert_eq!(records.threads.len(), written + 1, "every turn of a and b's thread, none lost");
}

#[tokio::test]
async fn a_reader_neither_waits_for_the_lock_nor_misses_what_was_committed() {
    let Some(db) = database().await else { return };
    let (a, _) = instance(&db).await;
    let (b, _) = instance(&db).await;
    let mut held = a.lock().await.unwrap();
    held.commit(vec![thread("t1")]).await.unwrap();
    // a's guard lives: b's reader does not wait for it, and sees a's committed write.
    let seen = tokio::time::timeout(Duration::from_secs(5), b.read())
        .await
        .expect("a reader does not wait for another instance's lock")
        .unwrap();
    assert!(seen.threads.contains_key("t1"));
    drop(seen);
    held.commit(vec![thread("t2"), run("r1", "t2", "pending")]).await.unwrap();
    let seen = b.read().await.unwrap();
    assert!(
        seen.threads.contains_key("t2") && seen.runs.contains_key("r1"),
        "a later read sees the later write"
    );
    drop(seen);
    drop(held);
    // A writer of b after its reads starts from where they left off, and reads what came since.
    let mut turn = a.lock().await.unwrap();
    turn.commit(vec![Change::DeleteThread("t1".into())]).await.unwrap();
    drop(turn);
    let mut turn = b.lock().await.unwrap();
    assert!(!turn.threads.contains_key("t1") && turn.threads.contains_key("t2"));
    turn.commit(vec![thread("t3")]).await.unwrap();
    drop(turn);
    let seen = a.read().await.unwrap();
    assert!(seen.threads.contains_key("t3"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_never_see_a_write_without_the_ones_before_it() {
    let Some(db) = database().await else { return };
    let (reader, _) = instance(&db).await;
    let mut writers = Vec::new();
    for w in 0..2 {
        let (records, _) = instance(&db).await;
        writers.push(tokio::spawn(async move {
            for n in 0..60 {
                let mut turn = records.lock().await.unwrap();
                turn.commit(vec![thread(&format!("w{w}-{n}"))]).await.unwrap();
            }
        }));
    }
    // Each writer's threads are committed in order: a reader that sees one of them sees those before.
    let mut reads = 0;
    loop {
        let done = writers.iter().all(tokio::task::JoinHandle::is_finished);
        let seen = reader.read().await.unwrap();
        for w in 0..2 {
            let count = (0..60).take_while(|n| seen.threads.contains_key(&format!("w{w}-{n}"))).count();
            let any_after = (count..60).any(|n| seen.threads.contains_key(&format!("w{w}-{n}")));
            assert!(!any_after, "read {reads}: writer {w}'s thread {count} is missing before later ones");
        }
        drop(seen);
        reads += 1;
        if done {
            break;
        }
    }
    for writer in writers {
        writer.await.unwrap();
    }
    let seen = reader.read().await.unwrap();
    assert_eq!(seen.threads.len(), 120, "the last read sees every write");
}

#[tokio::test]
async fn behind_a_transaction_pooler_turns_and_reads_prepare_no_named_statement() {
    let Some(db) = database().await else { return };
    let options = db.uri.parse::<sqlx::postgres::PgConnectOptions>().unwrap().statement_cache_capacity(0);
    let pool = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect_with(options).await.unwrap();
    let pooled = crate::scale::Db::new(pool.clone(), false);
    let a = RecordsLock::new(Records::open_postgres(pooled).await.unwrap());
    let (b, _) = instance(&db).await;
    let mut turn = a.lock().await.unwrap();
    turn.commit(vec![thread("t1"), run("r1", "t1", "pending")]).await.unwrap();
    drop(turn);
    let mut other = b.lock().await.unwrap();
    other.commit(vec![thread("t2")]).await.unwrap();
    drop(other);
    assert!(a.read().await.unwrap().threads.contains_key("t2"));
    let queue: Vec<String> = sqlx::query_scalar("SELECT run_id FROM weft_server_queue")
        .persistent(false)
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(queue, ["r1"]);
    // One connection: the pool's only session is the one every statement above ran on.
    let named = sqlx::raw_sql("SELECT count(*) FROM pg_prepared_statements").fetch_one(&pool).await.unwrap();
    assert_eq!(
        sqlx::Row::get::<i64, _>(&named, 0),
        0,
        "a named statement would stay on the server connection"
    );
}
