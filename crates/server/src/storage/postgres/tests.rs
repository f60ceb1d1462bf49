//! The records on PostgreSQL: turns across instances, each one transaction that leaves no lock behind, the
//! queue kept in step. Each test gets a database of its own (dropped after). Without PostgreSQL at 127.0.0.1:5432
//! (`WEFT_TEST_PG_ADMIN_URL` overrides it) the tests skip loudly, and fail in CI (`CI` set).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use sqlx::{Connection as _, PgPool};

use super::super::{Change, Key, Records, RecordsLock};
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
    (RecordsLock::new(Records::open_postgres(db, 1_000).await.unwrap()), pool)
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

/// A run of `thread_id` made at `created_at`.
fn run_at(run_id: &str, thread_id: &str, status: &str, created_at: &str) -> RunRecord {
    let Change::Run(mut record) = run(run_id, thread_id, status) else { unreachable!() };
    record.run.created_at = created_at.to_owned();
    *record
}

async fn queued(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar("SELECT run_id FROM weft_server_queue ORDER BY run_id").fetch_all(pool).await.unwrap()
}

#[tokio::test]
async fn the_queue_follows_the_runs_written_in_one_turn() {
    let Some(db) = database().await else { return };
    let (a, pool) = instance(&db).await;
    let mut records = a.lock(Key::All).await.unwrap();
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
    let mut seen = b.lock(Key::All).await.unwrap();
    assert_eq!(seen.run("r4").await.unwrap().unwrap().run.status, crate::model::RunStatus::Error);
    assert!(seen.run("r3").await.unwrap().is_none() && seen.thread("t1").await.unwrap().is_none());
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
    let mut turn = a.lock(Key::All).await.unwrap();
    assert_eq!(advisory_locks(&pool).await, 1, "a turn holds the records' lock");
    turn.commit(vec![thread("t1")]).await.unwrap();
    assert_eq!(advisory_locks(&pool).await, 0, "its write's commit lets go of it");
    // The guard lives on: b takes its turn meanwhile, and a's next write reads b's in first.
    let mut other = tokio::time::timeout(Duration::from_secs(5), b.lock(Key::All))
        .await
        .expect("b is not kept out")
        .unwrap();
    other.commit(vec![thread("t2"), run("r2", "t2", "pending")]).await.unwrap();
    drop(other);
    turn.commit(vec![thread("t3"), run("r3", "t3", "pending")]).await.unwrap();
    assert!(turn.is_live("r2"), "a second write takes a new turn, which reads b's write in");
    drop(turn);
    // A turn that writes nothing is rolled back when let go.
    let idle = a.lock(Key::All).await.unwrap();
    drop(idle);
    let mut seen = tokio::time::timeout(Duration::from_secs(5), b.lock(Key::All))
        .await
        .expect("a turn let go without a write lets go of the lock")
        .unwrap();
    assert!(seen.is_live("r3"), "a turn reads in what the other wrote");
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
    let held = a.lock(Key::All).await.unwrap();
    // b's caller waits for the lock, then goes away before it is granted.
    assert!(tokio::time::timeout(Duration::from_millis(200), b.lock(Key::All)).await.is_err());
    drop(held);
    let mut seen = tokio::time::timeout(Duration::from_secs(5), a.lock(Key::All))
        .await
        .expect("the abandoned wait does not keep the lock")
        .unwrap();
    seen.commit(vec![thread("after"), run("r-after", "after", "pending")]).await.unwrap();
    drop(seen);
    let records =
        tokio::time::timeout(Duration::from_secs(5), b.lock(Key::All)).await.expect("b's turn").unwrap();
    assert!(records.is_live("r-after"));
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
                let mut records = a.lock(Key::All).await.unwrap();
                let id = format!("a{caller}-{n}");
                records.commit(vec![thread(&id), run(&format!("r-{id}"), &id, "pending")]).await.unwrap();
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
        let mut seen = tokio::time::timeout(Duration::from_secs(2), b.lock(Key::All))
            .await
            .expect("b gets a turn while a is busy")
            .unwrap();
        seen.commit(vec![thread("from-b"), run("r-from-b", "from-b", "pending")]).await.unwrap();
        assert!(seen.is_live("r-a0-0"));
    }
    stop.store(true, Ordering::SeqCst);
    for caller in callers {
        caller.await.unwrap();
    }
    let records = a.lock(Key::All).await.unwrap();
    assert!(records.is_live("r-from-b"));
    let written = turns.load(Ordering::SeqCst);
    assert_eq!(records.live_runs().count(), written + 1, "every turn of a and b's run, none lost");
    let threads = records.source().unwrap().count_threads().await.unwrap();
    assert_eq!(threads, written + 1, "every turn of a and b's thread, none lost");
}

#[tokio::test]
async fn a_reader_neither_waits_for_the_lock_nor_misses_what_was_committed() {
    let Some(db) = database().await else { return };
    let (a, _) = instance(&db).await;
    let (b, _) = instance(&db).await;
    let mut held = a.lock(Key::All).await.unwrap();
    held.commit(vec![thread("t1")]).await.unwrap();
    // a's guard lives: b's reader does not wait for it, and sees a's committed write.
    let mut seen = tokio::time::timeout(Duration::from_secs(5), b.read())
        .await
        .expect("a reader does not wait for another instance's lock")
        .unwrap();
    assert!(seen.thread("t1").await.unwrap().is_some());
    drop(seen);
    held.commit(vec![thread("t2"), run("r1", "t2", "pending")]).await.unwrap();
    let mut seen = b.read().await.unwrap();
    assert!(seen.is_live("r1"), "a later read sees the later write");
    assert!(seen.thread("t2").await.unwrap().is_some());
    drop(seen);
    drop(held);
    // A writer of b after its reads starts from where they left off, and reads what came since.
    let mut turn = a.lock(Key::All).await.unwrap();
    turn.commit(vec![Change::DeleteThread("t1".into())]).await.unwrap();
    drop(turn);
    let mut turn = b.lock(Key::All).await.unwrap();
    assert!(turn.held_thread("t1").is_none(), "the deletion read in: memory forgot t1, which b had read");
    assert!(turn.thread("t1").await.unwrap().is_none() && turn.thread("t2").await.unwrap().is_some());
    turn.commit(vec![thread("t3"), run("r3", "t3", "pending")]).await.unwrap();
    drop(turn);
    let seen = a.read().await.unwrap();
    assert!(seen.is_live("r3"));
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
                let mut turn = records.lock(Key::All).await.unwrap();
                turn.commit(vec![run(&format!("w{w}-{n}"), "t", "pending")]).await.unwrap();
            }
        }));
    }
    // Each writer's threads are committed in order: a reader that sees one of them sees those before.
    let mut reads = 0;
    loop {
        let done = writers.iter().all(tokio::task::JoinHandle::is_finished);
        let seen = reader.read().await.unwrap();
        for w in 0..2 {
            let count = (0..60).take_while(|n| seen.is_live(&format!("w{w}-{n}"))).count();
            let any_after = (count..60).any(|n| seen.is_live(&format!("w{w}-{n}")));
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
    assert_eq!(seen.live_runs().count(), 120, "the last read sees every write");
}

#[tokio::test]
async fn behind_a_transaction_pooler_turns_and_reads_prepare_no_named_statement() {
    let Some(db) = database().await else { return };
    let options = db.uri.parse::<sqlx::postgres::PgConnectOptions>().unwrap().statement_cache_capacity(0);
    let pool = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect_with(options).await.unwrap();
    let pooled = crate::scale::Db::new(pool.clone(), false);
    let a = RecordsLock::new(Records::open_postgres(pooled, 1_000).await.unwrap());
    let (b, _) = instance(&db).await;
    let mut turn = a.lock(Key::All).await.unwrap();
    turn.commit(vec![thread("t1"), run("r1", "t1", "pending")]).await.unwrap();
    drop(turn);
    let mut other = b.lock(Key::All).await.unwrap();
    other.commit(vec![thread("t2"), run("r2", "t2", "pending")]).await.unwrap();
    drop(other);
    assert!(a.read().await.unwrap().is_live("r2"));
    let queue: Vec<String> = sqlx::query_scalar("SELECT run_id FROM weft_server_queue")
        .persistent(false)
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(queue, ["r1", "r2"]);
    // One connection: the pool's only session is the one every statement above ran on.
    let named = sqlx::raw_sql("SELECT count(*) FROM pg_prepared_statements").fetch_one(&pool).await.unwrap();
    assert_eq!(
        sqlx::Row::get::<i64, _>(&named, 0),
        0,
        "a named statement would stay on the server connection"
    );
}

#[tokio::test]
async fn what_memory_keeps_follows_the_other_instances_and_the_rest_is_read_when_asked() {
    let Some(db) = database().await else { return };
    let (a, _) = instance(&db).await;
    let (b, _) = instance(&db).await;
    a.lock(Key::All).await.unwrap().commit(vec![thread("t1"), run("r1", "t1", "success")]).await.unwrap();
    // b reads t1 and r1 from the table, and keeps them.
    let mut seen = b.read().await.unwrap();
    assert_eq!(seen.thread("t1").await.unwrap().unwrap().status, crate::model::ThreadStatus::Idle);
    assert!(seen.run("r1").await.unwrap().is_some());
    drop(seen);
    // a changes both: b's next read brings what it keeps up to date from the log.
    let mut busy = match thread("t1") {
        Change::Thread(t) => t,
        _ => unreachable!(),
    };
    busy.status = crate::model::ThreadStatus::Busy;
    a.lock(Key::All)
        .await
        .unwrap()
        .commit(vec![Change::Thread(busy), run("r1", "t1", "error")])
        .await
        .unwrap();
    let seen = b.read().await.unwrap();
    assert_eq!(seen.held_thread("t1").unwrap().status, crate::model::ThreadStatus::Busy, "kept, and updated");
    drop(seen);
    let mut seen = b.read().await.unwrap();
    assert_eq!(seen.run("r1").await.unwrap().unwrap().run.status, crate::model::RunStatus::Error);
    // A thread b never read is not pulled into its memory by the log.
    drop(seen);
    a.lock(Key::All).await.unwrap().commit(vec![thread("t2")]).await.unwrap();
    let seen = b.read().await.unwrap();
    assert!(seen.held_thread("t2").is_none());
    // A new instance starts with the live runs only, and finds the rest on demand.
    let (c, _) = instance(&db).await;
    a.lock(Key::All).await.unwrap().commit(vec![run("r2", "t2", "pending")]).await.unwrap();
    let (d, _) = instance(&db).await;
    let mut fresh = d.read().await.unwrap();
    assert!(fresh.is_live("r2") && fresh.held_thread("t1").is_none());
    assert!(fresh.thread("t1").await.unwrap().is_some());
    drop(fresh);
    assert!(c.read().await.unwrap().is_live("r2"), "learnt from the log");
}

#[tokio::test]
async fn turns_of_different_threads_go_side_by_side_and_turns_of_one_thread_in_turn() {
    let Some(db) = database().await else { return };
    let (a, _) = instance(&db).await;
    let (b, _) = instance(&db).await;
    let held = a.lock(Key::Thread("t1")).await.unwrap();
    // Another thread's turn is not kept waiting by a's.
    let mut other = tokio::time::timeout(Duration::from_secs(5), b.lock(Key::Thread("t2")))
        .await
        .expect("a turn of another thread does not wait")
        .unwrap();
    other.commit(vec![thread("t2"), run("r2", "t2", "pending")]).await.unwrap();
    drop(other);
    // The same thread's turn waits, as does a turn of everything.
    assert!(tokio::time::timeout(Duration::from_millis(300), b.lock(Key::Thread("t1"))).await.is_err());
    assert!(tokio::time::timeout(Duration::from_millis(300), b.lock(Key::All)).await.is_err());
    drop(held);
    let mut next = tokio::time::timeout(Duration::from_secs(5), b.lock(Key::Thread("t1")))
        .await
        .expect("the thread's turn once a let go")
        .unwrap();
    next.commit(vec![thread("t1")]).await.unwrap();
    drop(next);
    // A turn of everything keeps every keyed turn waiting.
    let all = a.lock(Key::All).await.unwrap();
    assert!(tokio::time::timeout(Duration::from_millis(300), b.lock(Key::Cron("c"))).await.is_err());
    drop(all);
    assert!(tokio::time::timeout(Duration::from_secs(5), b.lock(Key::Cron("c"))).await.is_ok());
    assert!(a.read().await.unwrap().is_live("r2"), "b's write read in by a");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_one_instance_a_turn_waiting_on_its_write_keeps_only_its_own_thread_waiting() {
    let Some(db) = database().await else { return };
    let (a, pool) = instance(&db).await;
    let a = Arc::new(a);
    a.lock(Key::All).await.unwrap().commit(vec![thread("t1"), thread("t2")]).await.unwrap();
    // Another connection holds t1's row: the write of a turn of t1 waits for it.
    let blocker = hold_row(&pool, "thread", "t1").await;
    let slow = tokio::spawn({
        let a = Arc::clone(&a);
        async move {
            let mut turn = a.lock(Key::Thread("t1")).await.unwrap();
            turn.commit(vec![thread("t1"), run("r1", "t1", "pending")]).await.unwrap();
            assert!(turn.is_live("r1"), "the commit applied in memory under the guard");
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!slow.is_finished(), "t1's write waits for the row");
    // Meanwhile this instance's turns of other threads, and its readers, go on.
    let other = async {
        let mut turn = a.lock(Key::Thread("t2")).await.unwrap();
        turn.commit(vec![run("r2", "t2", "pending")]).await.unwrap();
        drop(turn);
        let read = a.read().await.unwrap();
        (read.is_live("r2"), read.is_live("r1"))
    };
    let seen =
        tokio::time::timeout(Duration::from_secs(5), other).await.expect("t2's turn does not wait for t1's");
    assert_eq!(seen, (true, false), "t2's run is in; t1's is not committed yet");
    // A second turn of t1 here waits for the first (it would otherwise wait on PostgreSQL's lock of t1
    // while holding what the first needs to commit).
    let second = tokio::spawn({
        let a = Arc::clone(&a);
        async move {
            let mut turn = a.lock(Key::Thread("t1")).await.unwrap();
            assert!(turn.is_live("r1"), "the first turn's run is there when the second starts");
            turn.commit(vec![run("r1", "t1", "success")]).await.unwrap();
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!second.is_finished());
    blocker.rollback().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), slow).await.expect("t1's turn ends").unwrap();
    tokio::time::timeout(Duration::from_secs(5), second).await.expect("the second turn of t1 ends").unwrap();
    let read = a.read().await.unwrap();
    assert!(!read.is_live("r1") && read.is_live("r2"));
    drop(read);
    assert!(a.keys_held() == 0, "no key lock is kept once its turns are over");
}

#[tokio::test]
async fn a_write_committed_after_a_later_one_is_still_read_in() {
    let Some(db) = database().await else { return };
    let (a, pool) = instance(&db).await;
    let (b, _) = instance(&db).await;
    // An older transaction writes a run and stays open (its commit comes last).
    let Change::Run(late) = run("r-late", "t1", "pending") else { unreachable!() };
    let mut older = pool.begin().await.unwrap();
    sqlx::query(
        "SELECT weft_server_records_write(ARRAY['run'], ARRAY['r-late'], ARRAY[$1], \
         ARRAY[]::text[], ARRAY[]::text[], ARRAY[]::text[], ARRAY[]::text[])",
    )
    .bind(serde_json::to_string(&late).unwrap())
    .execute(&mut *older)
    .await
    .unwrap();
    // A later one commits first, and a reads it in.
    b.lock(Key::Thread("t2")).await.unwrap().commit(vec![run("r-early", "t2", "pending")]).await.unwrap();
    let seen = a.read().await.unwrap();
    assert!(seen.is_live("r-early") && !seen.is_live("r-late"));
    drop(seen);
    older.commit().await.unwrap();
    // a's horizon stayed before the older transaction: its write is read at the next look.
    assert!(a.read().await.unwrap().is_live("r-late"), "a write committed after a later one is not missed");
    assert!(a.lock(Key::Thread("t1")).await.unwrap().is_live("r-late"));
    // Written as an instance of an earlier release writes (without the columns): they are read from the
    // body.
    let columns: (Option<String>, Option<String>) =
        sqlx::query_as("SELECT parent, status FROM weft_server_records WHERE id = 'r-late'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(columns, (Some("t1".to_owned()), Some("pending".to_owned())));
}

#[tokio::test]
async fn a_lease_the_worker_no_longer_runs_is_left_to_lapse() {
    let Some(db) = database().await else { return };
    let (a, pool) = instance(&db).await;
    let mut turn = a.lock(Key::All).await.unwrap();
    turn.commit(vec![run("r1", "t1", "pending"), run("r2", "t2", "pending")]).await.unwrap();
    drop(turn);
    let queue = crate::scale::Db::new(pool.clone(), true);
    let lease = Duration::from_secs(60);
    for _ in 0..2 {
        assert!(crate::scale::queue::claim(&queue, "w", lease).await.unwrap().is_some());
    }
    sqlx::query("UPDATE weft_server_queue SET lease_until = now()").execute(&pool).await.unwrap();
    let renewed = crate::scale::queue::renew(&queue, "w", lease, &["r1".to_owned()]).await.unwrap();
    assert_eq!(renewed.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ["r1"]);
    let lapsed: Vec<String> =
        sqlx::query_scalar("SELECT run_id FROM weft_server_queue WHERE lease_until <= now() ORDER BY run_id")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(lapsed, ["r2"], "the run the worker no longer runs is not renewed");
    let again = crate::scale::queue::claim(&queue, "other", lease).await.unwrap().unwrap();
    assert_eq!(again.run_id, "r2", "another worker takes it");
}

#[tokio::test]
async fn a_run_stored_as_its_makers_is_claimed_by_no_other_worker_until_its_lease_lapses() {
    let Some(db) = database().await else { return };
    let (a, pool) = instance(&db).await;
    let mut turn = a.lock(Key::Thread("t1")).await.unwrap();
    turn.own_on_write("r1", "maker", Duration::from_secs(60));
    turn.commit(vec![run("r1", "t1", "running"), run("r2", "t2", "pending")]).await.unwrap();
    drop(turn);
    let owner: (Option<String>, i32) =
        sqlx::query_as("SELECT worker, attempts FROM weft_server_queue WHERE run_id = 'r1'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(owner, (Some("maker".to_owned()), 1), "claimed in the transaction that made it");
    let queue = crate::scale::Db::new(pool.clone(), true);
    let lease = Duration::from_secs(60);
    let first = crate::scale::queue::claim(&queue, "other", lease).await.unwrap().unwrap();
    assert_eq!(first.run_id, "r2", "only the run made unclaimed is claimed");
    assert!(!first.more, "the run its maker holds is not claimable");
    assert!(crate::scale::queue::claim(&queue, "other", lease).await.unwrap().is_none());
    // Its maker dies: the lease lapses, another worker takes the run over, and the maker's end turn finds
    // the run no longer its own.
    sqlx::query("UPDATE weft_server_queue SET lease_until = now() - interval '1 second' WHERE run_id = 'r1'")
        .execute(&pool)
        .await
        .unwrap();
    let again = crate::scale::queue::claim(&queue, "other", lease).await.unwrap().unwrap();
    assert_eq!(again.run_id, "r1");
    let mut end = a.lock(Key::Thread("t1")).await.unwrap();
    assert!(!end.lease_held("maker", "r1").await.unwrap(), "the maker records no end");
    assert!(end.lease_held("other", "r1").await.unwrap(), "the worker that took it over does");
}

#[tokio::test]
async fn a_lease_checked_as_a_turn_starts_is_answered_and_stays_locked_until_the_turn_ends() {
    let Some(db) = database().await else { return };
    let (a, pool) = instance(&db).await;
    a.lock(Key::All).await.unwrap().commit(vec![run("r1", "t1", "pending")]).await.unwrap();
    let queue = crate::scale::Db::new(pool.clone(), true);
    assert!(crate::scale::queue::claim(&queue, "w", Duration::from_secs(60)).await.unwrap().is_some());
    let lease = |worker: &str| super::Lease { run_id: "r1".into(), worker: worker.into() };
    let mut turn = a.lock_checking(Key::Thread("t1"), Some(lease("w"))).await.unwrap();
    assert!(turn.lease_held("w", "r1").await.unwrap(), "held by w");
    // The queue row is locked by the turn: no one else takes or changes it meanwhile.
    let mut other = pool.begin().await.unwrap();
    let locked = sqlx::query("SELECT 1 FROM weft_server_queue WHERE run_id = 'r1' FOR UPDATE NOWAIT")
        .execute(&mut *other)
        .await;
    assert!(locked.is_err(), "the queue row is locked until the turn ends");
    drop(other);
    turn.commit(vec![run("r1", "t1", "success")]).await.unwrap();
    drop(turn);
    assert!(queued(&pool).await.is_empty(), "the run left the queue with its end");
    // Another worker's lease, and a lease asked of a turn that checked another one, are answered too.
    a.lock(Key::All).await.unwrap().commit(vec![run("r1", "t1", "pending")]).await.unwrap();
    assert!(crate::scale::queue::claim(&queue, "w", Duration::from_secs(60)).await.unwrap().is_some());
    let mut turn = a.lock_checking(Key::Thread("t1"), Some(lease("v"))).await.unwrap();
    assert!(!turn.lease_held("v", "r1").await.unwrap(), "not v's");
    assert!(turn.lease_held("w", "r1").await.unwrap(), "asked again in a round trip of its own");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_waits_for_its_locks_before_it_holds_the_records_so_turns_waiting_to_commit_go_on() {
    let Some(db) = database().await else { return };
    let (a, pool) = instance(&db).await;
    let a = Arc::new(a);
    a.lock(Key::All).await.unwrap().commit(vec![run("r1", "t1", "pending")]).await.unwrap();
    let queue = crate::scale::Db::new(pool.clone(), true);
    assert!(crate::scale::queue::claim(&queue, "w", Duration::from_secs(60)).await.unwrap().is_some());
    // The turn ending r1 writes (r1's queue row locked until it commits) and waits for the records to
    // commit, which a reader holds: its write first waits for r1's record, held by another connection
    // until the reader has the records.
    let blocker = hold_row(&pool, "run", "r1").await;
    let ending = tokio::spawn({
        let a = Arc::clone(&a);
        async move {
            let mut turn = a.lock(Key::Thread("t1")).await.unwrap();
            turn.commit(vec![run("r1", "t1", "success")]).await.unwrap();
        }
    });
    seen(&pool, "wait_event_type = 'Lock'", "SELECT weft_server_records_write%").await;
    let reader = a.read().await.unwrap();
    blocker.rollback().await.unwrap();
    // Written now: it waits for the records to commit.
    seen(&pool, "state = 'idle in transaction'", "SELECT weft_server_records_write%").await;
    // Another turn checks r1's lease as it starts: it waits for r1's row, which the first turn holds.
    let checking = tokio::spawn({
        let a = Arc::clone(&a);
        async move {
            let lease = super::Lease { run_id: "r1".into(), worker: "w".into() };
            let mut turn = a.lock_checking(Key::Thread("t2"), Some(lease)).await.unwrap();
            turn.lease_held("w", "r1").await.unwrap()
        }
    });
    seen(&pool, "wait_event_type = 'Lock'", "BEGIN%weft_server_lease_held%").await;
    assert!(!ending.is_finished() && !checking.is_finished());
    // Let go, the records go to the first turn's commit: the second waited for its lock without them.
    drop(reader);
    tokio::time::timeout(Duration::from_secs(5), ending).await.expect("the first turn commits").unwrap();
    let held = tokio::time::timeout(Duration::from_secs(5), checking).await.expect("the second turn starts");
    assert!(!held.unwrap(), "r1 ended: its lease is gone with its queue row");
}

#[tokio::test]
async fn the_turn_start_of_releases_before_schema_4_still_locks_and_reads() {
    let Some(db) = database().await else { return };
    let (a, pool) = instance(&db).await;
    a.lock(Key::All).await.unwrap().commit(vec![thread("t1")]).await.unwrap();
    let mut old = pool.begin().await.unwrap();
    let rows: Vec<(Option<String>, Option<String>)> =
        sqlx::query_as("SELECT kind, id FROM weft_server_records_enter('thread:t1', '0')")
            .fetch_all(&mut *old)
            .await
            .unwrap();
    assert_eq!(rows, [(Some("thread".to_owned()), Some("t1".to_owned()))]);
    // Its key's lock is held: this release's turn of t1 waits for it.
    assert!(tokio::time::timeout(Duration::from_millis(300), a.lock(Key::Thread("t1"))).await.is_err());
    old.rollback().await.unwrap();
    assert!(tokio::time::timeout(Duration::from_secs(5), a.lock(Key::Thread("t1"))).await.is_ok());
}

#[tokio::test]
async fn a_table_of_an_earlier_release_gets_its_columns_filled_from_the_bodies() {
    let Some(db) = database().await else { return };
    let pool = sqlx::postgres::PgPoolOptions::new().max_connections(2).connect(&db.uri).await.unwrap();
    // The table as an earlier release made it, with one of its JSON-expression indexes and its rows (a
    // deleted run without a body).
    for sql in [
        "CREATE SEQUENCE weft_server_records_seq",
        "CREATE TABLE weft_server_records (kind TEXT NOT NULL, id TEXT NOT NULL, body TEXT, \
         seq BIGINT NOT NULL, xid xid8 NOT NULL DEFAULT '0', PRIMARY KEY (kind, id))",
        "CREATE INDEX weft_server_runs_by_thread ON weft_server_records \
         ((body::jsonb #>> '{run,thread_id}')) WHERE kind = 'run' AND body IS NOT NULL",
    ] {
        sqlx::raw_sql(sql).execute(&pool).await.unwrap();
    }
    let Change::Run(live) = run("r1", "t1", "running") else { unreachable!() };
    let Change::Thread(t1) = thread("t1") else { unreachable!() };
    for (kind, id, body) in [
        ("run", "r1", Some(serde_json::to_string(&live).unwrap())),
        ("run", "r0", None),
        ("thread", "t1", Some(serde_json::to_string(&t1).unwrap())),
    ] {
        sqlx::query("INSERT INTO weft_server_records (kind, id, body, seq) VALUES ($1, $2, $3, 1)")
            .bind(kind)
            .bind(id)
            .bind(body)
            .execute(&pool)
            .await
            .unwrap();
    }
    let (records, _) = instance(&db).await;
    assert!(records.read().await.unwrap().is_live("r1"), "the running run found by its status column");
    type Stored = (String, Option<String>, Option<String>, Option<String>);
    let columns: Vec<Stored> =
        sqlx::query_as("SELECT id, parent, status, created_at FROM weft_server_records ORDER BY kind, id")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        columns,
        [
            ("r0".into(), None, None, None),
            ("r1".into(), Some("t1".into()), Some("running".into()), Some("2026-11-27T00:00:00Z".into())),
            ("t1".into(), None, Some("idle".into()), Some("2026-11-27T00:00:00Z".into())),
        ]
    );
    let old: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_indexes WHERE indexname = 'weft_server_runs_by_thread'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(old, 0, "the JSON-expression index is dropped");
}

/// Whether a lock on the records' table waits (not granted) in the database.
/// Another connection's transaction holding the record's row (until it is dropped or rolled back).
async fn hold_row(pool: &PgPool, kind: &str, id: &str) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM weft_server_records WHERE kind = $1 AND id = $2 FOR UPDATE")
        .bind(kind)
        .bind(id)
        .execute(&mut *holder)
        .await
        .unwrap();
    holder
}

/// Waits (10 s at most) until a session of this database is `state` (a condition on
/// `pg_stat_activity`) with its last statement like `like`.
async fn seen(pool: &PgPool, state: &str, like: &str) {
    let sql = format!(
        "SELECT count(*) > 0 FROM pg_stat_activity WHERE datname = current_database() AND {state} \
         AND query LIKE $1"
    );
    let waiting = async {
        while !sqlx::query_scalar::<_, bool>(sqlx::AssertSqlSafe(sql.clone()))
            .bind(like)
            .fetch_one(pool)
            .await
            .unwrap()
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("the session is seen");
}

async fn lock_waits(pool: &PgPool) -> bool {
    sqlx::query_scalar(
        "SELECT count(*) > 0 FROM pg_locks WHERE relation = 'weft_server_records'::regclass AND NOT granted",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_turn_reads_through_its_own_transaction_so_a_lock_queued_behind_it_cannot_wedge_it() {
    let Some(db) = database().await else { return };
    let (a, pool) = instance(&db).await;
    let (b, _) = instance(&db).await;
    // b writes a thread that a does not keep in memory.
    b.lock(Key::Thread("t9")).await.unwrap().commit(vec![thread("t9")]).await.unwrap();
    let mut turn = a.lock(Key::Thread("t9")).await.unwrap();
    // A table lock queued behind the turn's (as a starting instance's schema change takes): every later
    // statement of another transaction on the table waits behind it, and it waits for the turn.
    let mut other = pool.begin().await.unwrap();
    let queued = tokio::spawn(async move {
        sqlx::raw_sql("LOCK TABLE weft_server_records IN ACCESS EXCLUSIVE MODE")
            .execute(&mut *other)
            .await
            .unwrap();
        other.rollback().await.unwrap();
    });
    let start = std::time::Instant::now();
    while !lock_waits(&pool).await {
        assert!(start.elapsed() < Duration::from_secs(5), "the table lock never queued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let read = tokio::time::timeout(Duration::from_secs(5), turn.thread("t9")).await;
    let found = read.expect("the turn's read waited behind the queued lock").unwrap();
    assert_eq!(found.map(|t| t.thread_id.clone()).as_deref(), Some("t9"));
    drop(turn);
    tokio::time::timeout(Duration::from_secs(5), queued).await.expect("the table lock is granted").unwrap();
}

#[tokio::test]
async fn a_start_that_finds_the_schema_current_takes_no_lock_on_the_tables() {
    let Some(db) = database().await else { return };
    let (a, pool) = instance(&db).await;
    let turn = a.lock(Key::Thread("t1")).await.unwrap();
    // A second instance starts while a turn holds the records' table.
    let started = tokio::time::timeout(Duration::from_secs(5), instance(&db)).await;
    assert!(started.is_ok(), "the start waited for the turn");
    assert!(!lock_waits(&pool).await);
    drop(turn);
}

#[tokio::test]
async fn the_functions_of_a_turn_are_planned_once_per_connection() {
    let Some(db) = database().await else { return };
    let (_records, pool) = instance(&db).await;
    // The records' pool asks for a plan per call (`force_custom_plan`); each function's own setting wins.
    for (function, args) in [
        ("weft_server_records_lock", 1),
        ("weft_server_records_since", 1),
        ("weft_server_records_write", 14),
        ("weft_server_lease_held", 2),
    ] {
        let config: Vec<String> = sqlx::query_scalar(
            "SELECT unnest(proconfig) FROM pg_proc WHERE proname = $1 AND pronargs = $2 \
             AND pronamespace = current_schema()::regnamespace",
        )
        .bind(function)
        .bind(args)
        .fetch_all(&pool)
        .await
        .unwrap();
        assert_eq!(config, vec!["plan_cache_mode=force_generic_plan".to_owned()], "{function}");
    }
}

/// A checkpoint of `thread_id` expecting `head`, as a run's last save; its id.
fn last_save(
    thread_id: &str,
    head: weft_graph::checkpoint::ExpectedHead,
) -> (String, weft_graph::checkpoint::SaveOp) {
    use weft_graph::checkpoint::{
        Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource, SaveOp,
    };
    let id = uuid::Uuid::now_v7().to_string();
    let versions: weft_graph::checkpoint::ChannelVersions =
        [("step".into(), format!("{:032}.{:016}", 1, 0.5).into())].into();
    let checkpoint = Checkpoint {
        v: 1,
        id: id.clone(),
        ts: "2026-11-27T00:00:00+00:00".into(),
        channel_values: [("step".into(), json!(0))].into_iter().collect(),
        channel_versions: versions.clone(),
        versions_seen: Default::default(),
        updated_channels: vec!["step".into()],
    };
    let metadata = CheckpointMetadata {
        source: CheckpointSource::Loop,
        step: 0,
        parents: Default::default(),
        extra: Default::default(),
    };
    let op = SaveOp::Put {
        config: Arc::new(CheckpointConfig::thread(thread_id)),
        checkpoint,
        metadata,
        new_versions: versions,
        appends: Default::default(),
        expected_head: head,
    };
    (id, op)
}

#[tokio::test]
async fn a_turns_write_stores_a_runs_last_saves_with_the_records_or_neither() {
    use weft_graph::checkpoint::{CheckpointConfig, Checkpointer as _, ExpectedHead};
    let Some(db) = database().await else { return };
    let (a, pool) = instance(&db).await;
    let options = weft_integrations::postgres::PostgresOptions::default();
    let saver =
        Arc::new(weft_integrations::postgres::PostgresSaver::from_pool(pool.clone(), options).await.unwrap());
    let head =
        || async { saver.get_tuple(&CheckpointConfig::thread("t1")).await.unwrap().map(|t| t.checkpoint.id) };
    // Stored together.
    let (first, op) = last_save("t1", ExpectedHead::Empty);
    let mut records = a.lock(Key::Thread("t1")).await.unwrap();
    assert!(records.save_on_write(&saver, vec![op]).is_empty(), "the turn takes them");
    records.commit(vec![thread("t1"), run("r1", "t1", "success")]).await.unwrap();
    drop(records);
    assert_eq!(head().await, Some(first.clone()));
    // Saves that cannot be stored (the head moved meanwhile): the records are not written either.
    let (_, op) = last_save("t1", ExpectedHead::Empty);
    let mut records = a.lock(Key::Thread("t1")).await.unwrap();
    assert!(records.save_on_write(&saver, vec![op]).is_empty());
    let err = records.commit(vec![run("r2", "t1", "success")]).await.unwrap_err();
    let conflict = Some(weft_graph::checkpoint::CheckpointErrorKind::Conflict);
    assert!(
        matches!(&err, crate::error::ServerError::Storage(e) if e.checkpoint_kind() == conflict),
        "{err}"
    );
    drop(records);
    // Records that cannot be written (a fault injected in PostgreSQL): the saves are not stored either.
    sqlx::raw_sql(
        "CREATE FUNCTION refuse_r3() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
           IF NEW.id = 'r3' THEN RAISE EXCEPTION 'injected: the record cannot be written'; END IF; \
           RETURN NEW; END $$; \
         CREATE TRIGGER refuse_r3 BEFORE INSERT OR UPDATE ON weft_server_records \
           FOR EACH ROW EXECUTE FUNCTION refuse_r3()",
    )
    .execute(&pool)
    .await
    .unwrap();
    let (_, op) = last_save("t1", ExpectedHead::Id(first.clone()));
    let mut records = a.lock(Key::Thread("t1")).await.unwrap();
    assert!(records.save_on_write(&saver, vec![op]).is_empty());
    records.commit(vec![run("r3", "t1", "success")]).await.unwrap_err();
    drop(records);
    assert_eq!(head().await, Some(first.clone()), "the saves went with the records' failure");
    // A turn left without a write stores them not, nor does the next turn.
    let (_, op) = last_save("t1", ExpectedHead::Id(first.clone()));
    let mut records = a.lock(Key::Thread("t1")).await.unwrap();
    assert!(records.save_on_write(&saver, vec![op]).is_empty());
    drop(records);
    let mut records = a.lock(Key::Thread("t1")).await.unwrap();
    records.commit(vec![run("r4", "t1", "success")]).await.unwrap();
    drop(records);
    assert_eq!(head().await, Some(first), "saves left in a turn without a write are dropped with it");
    let (b, _) = instance(&db).await;
    let mut seen = b.lock(Key::All).await.unwrap();
    assert!(seen.run("r1").await.unwrap().is_some() && seen.run("r4").await.unwrap().is_some());
    assert!(seen.run("r2").await.unwrap().is_none(), "not recorded without its saves");
    assert!(seen.run("r3").await.unwrap().is_none());
}

/// A rolling upgrade, or a rollback after one: an instance starts on records a newer build changed when
/// that build recorded that it can, and refuses to, naming the versions, when it did not (or when the
/// schema predates the record).
#[tokio::test]
async fn an_older_build_starts_on_newer_records_only_when_they_allow_it() {
    let Some(db) = database().await else { return };
    let (_, pool) = instance(&db).await;
    let recorded: (i32, Option<i32>) =
        sqlx::query_as("SELECT version, readable_from FROM weft_server_schema")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(recorded, (super::SCHEMA_VERSION, Some(super::SCHEMA_READABLE_FROM)));
    let open = || async {
        let pool = sqlx::postgres::PgPoolOptions::new().max_connections(2).connect(&db.uri).await.unwrap();
        Records::open_postgres(crate::scale::Db::new(pool, true), 1_000).await
    };
    let newer = super::SCHEMA_VERSION + 1;
    let set = |readable_from: i32| {
        format!("UPDATE weft_server_schema SET version = {newer}, readable_from = {readable_from}")
    };
    sqlx::raw_sql(sqlx::AssertSqlSafe(set(super::SCHEMA_VERSION))).execute(&pool).await.unwrap();
    assert!(open().await.is_ok(), "a newer schema that this build can work with");
    sqlx::raw_sql(sqlx::AssertSqlSafe(set(newer))).execute(&pool).await.unwrap();
    let Err(err) = open().await else { panic!("records this build cannot use were opened") };
    assert!(
        matches!(err, crate::ServerError::SchemaTooNew { found, needs, knows }
            if found == newer && needs == newer && knows == super::SCHEMA_VERSION),
        "{err}"
    );
    // Recorded before the column existed: only builds that know the version.
    sqlx::raw_sql("ALTER TABLE weft_server_schema DROP COLUMN readable_from").execute(&pool).await.unwrap();
    let Err(err) = open().await else { panic!("records this build cannot use were opened") };
    assert!(
        err.to_string().contains(&format!(
            "at version {newer}, which needs a weft-server that knows versions up to {newer}"
        )),
        "{err}"
    );
    // The refusals changed nothing.
    let version: i32 =
        sqlx::query_scalar("SELECT version FROM weft_server_schema").fetch_one(&pool).await.unwrap();
    assert_eq!(version, newer);
}

/// What the transaction of `conn` has read of the records so far: entries of the index of runs by
/// thread and time, rows of sequential scans and rows fetched.
async fn records_read(conn: &mut sqlx::PgConnection) -> i64 {
    sqlx::query_scalar(
        "SELECT pg_stat_get_xact_tuples_returned('weft_server_run_thread_created'::regclass) \
         + pg_stat_get_xact_tuples_returned('weft_server_records'::regclass) \
         + pg_stat_get_xact_tuples_fetched('weft_server_records'::regclass)",
    )
    .fetch_one(conn)
    .await
    .unwrap()
}

/// `GET /threads/{thread_id}/runs` pages a thread's runs newest first, in byte order, and a page reads
/// its rows and its offset's, not the thread's: before, every run of the thread was read and decoded.
#[tokio::test]
async fn a_page_of_a_long_threads_runs_reads_the_page_not_the_threads_runs() {
    let Some(db) = database().await else { return };
    let (a, pool) = instance(&db).await;
    // Written as an instance writes them: times that repeat, ids whose byte order is not a case-blind one.
    let statuses = ["pending", "success", "error", "interrupted"];
    let runs: Vec<RunRecord> = (0..30)
        .map(|i| {
            let id = if i % 3 == 0 { format!("R{i:03}") } else { format!("r{i:03}") };
            let mut run = run_at(&id, "t1", statuses[i % 4], &format!("2026-11-30T00:00:0{}Z", i % 4));
            Arc::make_mut(&mut run.run.kwargs).resumable = i % 5 == 0;
            run
        })
        .collect();
    let mut changes = vec![thread("t1"), run("other", "t2", "success")];
    changes.extend(runs.iter().map(|r| Change::Run(Box::new(r.clone()))));
    a.lock(Key::All).await.unwrap().commit(changes).await.unwrap();
    let (b, _) = instance(&db).await;
    for (status, (limit, offset)) in [None, Some(crate::model::RunStatus::Success)]
        .into_iter()
        .flat_map(|s| [(10, 0), (4, 5), (100, 0), (3, 40)].map(|p| (s, p)))
    {
        let mut expected: Vec<(&str, &str)> = (runs.iter())
            .filter(|r| status.is_none_or(|s| r.run.status == s))
            .map(|r| (r.run.created_at.as_str(), r.run.run_id.as_str()))
            .collect();
        expected.sort_by(|x, y| y.cmp(x));
        let expected: Vec<&str> = expected.into_iter().skip(offset).take(limit).map(|k| k.1).collect();
        // Read by another instance (from the table), in a turn and outside one.
        let page = b.read().await.unwrap().thread_runs_page("t1", status, (limit, offset)).await.unwrap();
        let ids: Vec<&str> = page.iter().map(|r| r.run.run_id.as_str()).collect();
        assert_eq!(ids, expected, "{status:?}, limit {limit}, offset {offset}");
        let mut turn = b.lock(Key::Thread("t1")).await.unwrap();
        let page = turn.thread_runs_page("t1", status, (limit, offset)).await.unwrap();
        assert_eq!(page.iter().map(|r| r.run.run_id.as_str()).collect::<Vec<_>>(), expected);
    }
    // Every run without its body, oldest first, in a turn and outside one.
    let mut oldest_first: Vec<&RunRecord> = runs.iter().collect();
    oldest_first.sort_by(|x, y| (&x.run.created_at, &x.run.run_id).cmp(&(&y.run.created_at, &y.run.run_id)));
    let expected: Vec<_> = oldest_first.into_iter().map(|r| super::super::RunHead::of(&r.run)).collect();
    assert!(expected.iter().any(|r| r.resumable) && expected.iter().any(|r| !r.resumable));
    assert_eq!(b.read().await.unwrap().thread_run_heads("t1").await.unwrap(), expected);
    assert_eq!(b.lock(Key::Thread("t1")).await.unwrap().thread_run_heads("t1").await.unwrap(), expected);
    // A thread of 3,000 runs among 2,000 threads of 10, analyzed.
    sqlx::raw_sql(
        "INSERT INTO weft_server_records (kind, id, body, parent, status, created_at, seq) \
         SELECT 'run', 'long-' || lpad(i::text, 5, '0'), '{}', 'long', \
           CASE WHEN i % 2 = 0 THEN 'success' ELSE 'error' END, \
           '2026-11-30T00:' || lpad((i / 60)::text, 2, '0') || ':' || lpad((i % 60)::text, 2, '0') || 'Z', \
           nextval('weft_server_records_seq') FROM generate_series(1, 3000) i; \
         INSERT INTO weft_server_records (kind, id, body, parent, status, created_at, seq) \
         SELECT 'run', 'short-' || i, '{}', 'short-' || (i % 2000), 'success', '2026-11-30T00:00:00Z', \
           nextval('weft_server_records_seq') FROM generate_series(1, 20000) i; \
         ANALYZE weft_server_records",
    )
    .execute(&pool)
    .await
    .unwrap();
    let source = super::super::Source::Postgres(crate::scale::Db::new(pool.clone(), true));
    let mut conn = pool.acquire().await.unwrap();
    for (status, limit, offset, most) in
        [(None, 10, 0, 12), (Some("success"), 10, 0, 24), (None, 10, 100, 112)]
    {
        let mut tx = sqlx::Connection::begin(&mut *conn).await.unwrap();
        // As the instances' connections plan their reads.
        sqlx::raw_sql("SET LOCAL plan_cache_mode = force_custom_plan").execute(&mut *tx).await.unwrap();
        let before = records_read(&mut tx).await;
        let sql = source.thread_runs_page_sql(status.is_some());
        let mut query =
            sqlx::query_as::<_, (String, Option<String>, String)>(sqlx::AssertSqlSafe(sql)).bind("long");
        if let Some(status) = status {
            query = query.bind(status);
        }
        let rows = query.bind(limit.to_string()).bind(offset.to_string()).fetch_all(&mut *tx).await.unwrap();
        let read = records_read(&mut tx).await - before;
        let newest = 3000 - offset;
        assert_eq!(
            rows.first().map(|r| r.0.clone()),
            Some(format!("long-{newest:05}")),
            "{status:?} {offset}"
        );
        assert_eq!(rows.len(), limit);
        assert!(read <= most, "a page of {limit} after {offset} ({status:?}) read {read} rows and entries");
        tx.rollback().await.unwrap();
    }
}

/// Records of a build before runs had their time (records schema 5): a start fills it from the bodies
/// once, and the writes of such a build (a rolling upgrade's old instances) still fill it.
#[tokio::test]
async fn runs_written_before_their_time_was_a_column_get_it_from_their_bodies() {
    let Some(db) = database().await else { return };
    let (a, pool) = instance(&db).await;
    let runs: Vec<RunRecord> = (0..5)
        .map(|i| run_at(&format!("r{i}"), "t1", "success", &format!("2026-11-30T00:00:0{i}Z")))
        .collect();
    let changes = runs.iter().map(|r| Change::Run(Box::new(r.clone()))).collect();
    a.lock(Key::All).await.unwrap().commit(changes).await.unwrap();
    // Back to schema 5: no times, the index of runs by thread alone.
    sqlx::raw_sql(
        "UPDATE weft_server_records SET created_at = NULL WHERE kind = 'run'; \
         DROP INDEX weft_server_run_thread_created; \
         CREATE INDEX weft_server_run_thread ON weft_server_records (parent) WHERE kind = 'run' AND body IS NOT NULL; \
         UPDATE weft_server_schema SET version = 5",
    )
    .execute(&pool)
    .await
    .unwrap();
    let (b, _) = instance(&db).await;
    let page = b.read().await.unwrap().thread_runs_page("t1", None, (2, 0)).await.unwrap();
    assert_eq!(page.iter().map(|r| r.run.run_id.as_str()).collect::<Vec<_>>(), ["r4", "r3"]);
    let indexes: Vec<String> = sqlx::query_scalar(
        "SELECT indexname::text FROM pg_indexes WHERE indexname LIKE 'weft_server_run_thread%'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(indexes, ["weft_server_run_thread_created"]);
    let version: i32 =
        sqlx::query_scalar("SELECT version FROM weft_server_schema").fetch_one(&pool).await.unwrap();
    assert_eq!(version, super::SCHEMA_VERSION);
    // A build of schema 5 writes a run without its time, through the function of this one.
    let late = run_at("r9", "t1", "success", "2026-11-30T00:00:09Z");
    sqlx::query(
        "SELECT weft_server_records_write(ARRAY['run'], ARRAY['r9'], ARRAY[$1], ARRAY['t1'], \
           ARRAY['success'], ARRAY[NULL]::text[], ARRAY[NULL]::text[], ARRAY[NULL]::integer[], \
           '{}', '{}', '{}', '{}', NULL, 0)",
    )
    .bind(serde_json::to_string(&late).unwrap())
    .execute(&pool)
    .await
    .unwrap();
    let time: Option<String> =
        sqlx::query_scalar("SELECT created_at FROM weft_server_records WHERE kind = 'run' AND id = 'r9'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(time.as_deref(), Some("2026-11-30T00:00:09Z"));
}

/// Makes the table as records schema 5 left it, holding `count` finished runs of 1,000 threads: runs
/// without their time, the index of runs by thread alone.
async fn schema_5_with_runs(pool: &PgPool, count: usize) {
    let template = serde_json::to_string(&run_at("RUN", "THREAD", "success", "TIME")).unwrap();
    sqlx::query(
        "INSERT INTO weft_server_records (kind, id, body, parent, status, seq, xid) \
         SELECT 'run', r.id, replace(replace(replace($1, 'RUN', r.id), 'THREAD', r.thread), 'TIME', r.at), \
           r.thread, 'success', nextval('weft_server_records_seq'), pg_current_xact_id() \
         FROM (SELECT 'r' || lpad(i::text, 8, '0') AS id, 't' || (i % 1000) AS thread, \
           to_char(timestamptz '2026-01-01' + i * interval '1 second', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS at \
           FROM generate_series(1, $2) i) r",
    )
    .bind(template)
    .bind(i64::try_from(count).unwrap())
    .execute(pool)
    .await
    .unwrap();
    sqlx::raw_sql(
        "DROP INDEX weft_server_run_thread_created; \
         CREATE INDEX weft_server_run_thread ON weft_server_records (parent) WHERE kind = 'run' AND body IS NOT NULL; \
         UPDATE weft_server_schema SET version = 5; ANALYZE weft_server_records",
    )
    .execute(pool)
    .await
    .unwrap();
}

/// Writes a thread through the write function every 5 ms (as an instance of the earlier build does
/// during a rolling upgrade) until `stop`; the slowest write and how many there were.
async fn write_on(pool: PgPool, stop: Arc<AtomicBool>) -> (Duration, usize) {
    let Change::Thread(template) = thread("w") else { unreachable!() };
    let (mut slowest, mut count) = (Duration::ZERO, 0);
    while !stop.load(Ordering::SeqCst) {
        let mut record = template.clone();
        record.thread_id = format!("w{count}");
        let started = std::time::Instant::now();
        sqlx::query(
            "SELECT weft_server_records_write(ARRAY['thread'], ARRAY[$1], ARRAY[$2], ARRAY[NULL]::text[], \
               ARRAY['idle'], ARRAY['2026-11-27T00:00:00Z'], ARRAY['2026-11-27T00:00:00Z'], \
               ARRAY[NULL]::integer[], '{}', '{}', '{}', '{}', NULL, 0)",
        )
        .bind(&record.thread_id)
        .bind(serde_json::to_string(&record).unwrap())
        .execute(&pool)
        .await
        .unwrap();
        slowest = slowest.max(started.elapsed());
        count += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (slowest, count)
}

/// Upgrading a large table (records schema 5, 100,000 runs) does not stop the writes of the instances
/// at work: the runs' times are filled in batches of their own transactions, the index is built
/// concurrently. (In one transaction, the fill held every run's row and the index build the whole table
/// until it committed: with 300,000 runs, a write waited 12 s, the whole upgrade.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrading_a_large_table_lets_the_instances_at_work_write_on() {
    let Some(db) = database().await else { return };
    let (_a, pool) = instance(&db).await;
    schema_5_with_runs(&pool, 100_000).await;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(write_on(pool.clone(), Arc::clone(&stop)));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = std::time::Instant::now();
    // Two instances start together: one upgrades, the other waits for it.
    let ((b, _), (c, _)) = tokio::join!(instance(&db), instance(&db));
    let took = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    let (slowest, writes) = writer.await.unwrap();
    assert!(writes > 0);
    let unfilled: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM weft_server_records WHERE kind = 'run' AND created_at IS NULL",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(unfilled, 0, "every run has its time");
    for records in [&b, &c] {
        let page = records.read().await.unwrap().thread_runs_page("t7", None, (2, 0)).await.unwrap();
        assert_eq!(
            page.iter().map(|r| r.run.run_id.as_str()).collect::<Vec<_>>(),
            ["r00099007", "r00098007"]
        );
    }
    let (version, leases): (i32, i64) = sqlx::query_as(
        "SELECT (SELECT version FROM weft_server_schema), (SELECT count(*) FROM weft_server_sweeps)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((version, leases), (super::SCHEMA_VERSION, 0), "recorded, and the upgrade's lease let go");
    // Held for the whole upgrade, a write waited seconds (see above); a second allows for a machine whose
    // two cores the other tests keep busy (a write waited over 300 ms under that load, in two runs of
    // the suite of 2026-12-02).
    assert!(slowest < Duration::from_secs(1), "a write waited {slowest:?} during a {took:?} upgrade");
}

/// An index left invalid (a concurrent build cut short) is built again by the next start, which records
/// the version only then.
#[tokio::test]
async fn an_index_left_invalid_is_built_again_before_the_version_is_recorded() {
    let Some(db) = database().await else { return };
    let (_a, pool) = instance(&db).await;
    sqlx::raw_sql(
        "UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'weft_server_run_thread_created'::regclass; \
         UPDATE weft_server_schema SET version = 5",
    )
    .execute(&pool)
    .await
    .unwrap();
    let (_b, _) = instance(&db).await;
    let (valid, version): (bool, i32) = sqlx::query_as(
        "SELECT (SELECT indisvalid FROM pg_index WHERE indexrelid = 'weft_server_run_thread_created'::regclass), \
           (SELECT version FROM weft_server_schema)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((valid, version), (true, super::SCHEMA_VERSION));
}

/// The online upgrade's lease, while it upgrades.
async fn upgrade_leases(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar("SELECT name FROM weft_server_sweeps WHERE starts_with(name, 'records_upgrade:')")
        .fetch_all(pool)
        .await
        .unwrap()
}

/// A start whose lease is taken over while it upgrades (it was held up past the lease, say) stops,
/// touches the new holder's lease neither to renew it nor to delete it, waits while that lease is in
/// force, and finishes the upgrade once it lapses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_that_loses_its_lease_leaves_the_upgrade_to_the_new_holder() {
    let Some(db) = database().await else { return };
    let (_a, pool) = instance(&db).await;
    schema_5_with_runs(&pool, 30_000).await;
    let options = db.uri.parse::<sqlx::postgres::PgConnectOptions>().unwrap().application_name("upgrading");
    let upgrading =
        sqlx::postgres::PgPoolOptions::new().max_connections(4).connect_with(options).await.unwrap();
    let starting = crate::scale::Db::new(upgrading, true);
    let start =
        tokio::spawn(
            async move { super::migrate::migrate_leased(&starting, Duration::from_millis(600)).await },
        );
    let mut taken = Vec::new();
    for _ in 0..500 {
        taken = upgrade_leases(&pool).await;
        if !taken.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(taken.len(), 1, "the start took the lease (the table is upgraded online)");
    // Another start takes it over, for 6 s (longer than the whole upgrade takes).
    let stolen: String = sqlx::query_scalar(
        "UPDATE weft_server_sweeps SET name = 'records_upgrade:other', due_at = now() + interval '6 s' \
         WHERE starts_with(name, 'records_upgrade:') RETURNING due_at::text",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    // Within two renewals (200 ms each) and what was under way then, it stops filling and building.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    for _ in 0..40 {
        let working: Vec<String> = sqlx::query_scalar(
            "SELECT query FROM pg_stat_activity WHERE application_name = 'upgrading' AND state = 'active' \
             AND (query LIKE 'UPDATE weft_server_records%' OR query LIKE '%INDEX CONCURRENTLY%')",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        assert!(working.is_empty(), "still upgrading after losing the lease: {working:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    loop {
        let (version, names, due, in_force): (i32, Vec<String>, Option<String>, bool) = sqlx::query_as(
            "SELECT (SELECT version FROM weft_server_schema), \
               (SELECT coalesce(array_agg(name), '{}') FROM weft_server_sweeps WHERE starts_with(name, 'records_upgrade:')), \
               (SELECT max(due_at)::text FROM weft_server_sweeps WHERE starts_with(name, 'records_upgrade:')), \
               now() + interval '100 ms' < $1::timestamptz",
        )
        .bind(&stolen)
        .fetch_one(&pool)
        .await
        .unwrap();
        if !in_force {
            break;
        }
        assert_eq!(version, 5, "no version recorded while the other's lease is in force");
        assert_eq!(
            (names, due),
            (vec!["records_upgrade:other".to_owned()], Some(stolen.clone())),
            "untouched"
        );
        assert!(!start.is_finished(), "the start waits while the other's lease is in force");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::timeout(Duration::from_secs(60), start).await.unwrap().unwrap().unwrap();
    let (version, unfilled, leases): (i32, i64, i64) = sqlx::query_as(
        "SELECT (SELECT version FROM weft_server_schema), \
           (SELECT count(*) FROM weft_server_records WHERE kind = 'run' AND created_at IS NULL), \
           (SELECT count(*) FROM weft_server_sweeps)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((version, unfilled, leases), (super::SCHEMA_VERSION, 0, 0));
}

/// A concurrent index build waits for a transaction that holds a snapshot older than it (a backup's,
/// say, or a session left open); what it waits for is told (and the build ends once that one does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_concurrent_index_build_waits_for_is_told() {
    let Some(db) = database().await else { return };
    let (_a, pool) = instance(&db).await;
    let mut idle = sqlx::PgConnection::connect(&db.uri).await.unwrap();
    sqlx::raw_sql(
        "SET application_name = 'left-open'; BEGIN ISOLATION LEVEL REPEATABLE READ; \
         SELECT count(*) FROM weft_server_records",
    )
    .execute(&mut idle)
    .await
    .unwrap();
    let statement = "CREATE INDEX CONCURRENTLY weft_test_by_seq ON weft_server_records (seq)";
    let building = pool.clone();
    let build = tokio::spawn(async move { sqlx::raw_sql(statement).execute(&building).await });
    let pooled = crate::scale::Db::new(pool.clone(), false);
    let mut told = Vec::new();
    // The build first waits for the sessions holding locks on the table (an autovacuum of the new table,
    // which gives way within a second; a turn of the instance), then for the older snapshot: until it
    // waits for that one alone.
    for _ in 0..500 {
        told = super::migrate::waited_for(&pooled, statement).await.unwrap();
        if told.len() == 1 && told[0].2 == "left-open" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let pid: i32 =
        sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE application_name = 'left-open'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(told.len(), 1, "{told:?}");
    let (who, state, app, _) = &told[0];
    assert_eq!((*who, state.as_str(), app.as_str()), (pid, "idle in transaction", "left-open"));
    assert!(!build.is_finished());
    sqlx::raw_sql("COMMIT").execute(&mut idle).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), build).await.unwrap().unwrap().unwrap();
}

/// The online upgrade through PgBouncer in transaction mode, every statement unnamed (as an instance with
/// `DATABASE_POOL_MODE=transaction` runs), two new instances starting together while a writer writes
/// on: the same result as straight to PostgreSQL. `WEFT_TEST_PGBOUNCER_URL` names the pooler (CI's
/// test stage starts one); without it the test skips, and fails in CI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrading_a_large_table_through_a_transaction_pooler() {
    let Ok(pooler) = std::env::var("WEFT_TEST_PGBOUNCER_URL") else {
        weft_testenv::skip_or_fail(
            "PgBouncer",
            "WEFT_TEST_PGBOUNCER_URL is not set",
            "`cargo xtask ci test` starts PgBouncer and sets it",
        );
        return;
    };
    let Some(db) = database().await else { return };
    let (_a, pool) = instance(&db).await;
    schema_5_with_runs(&pool, 30_000).await;
    let uri = format!("{}/{}", pooler.trim_end_matches('/'), db.name);
    let options = uri.parse::<sqlx::postgres::PgConnectOptions>().unwrap().statement_cache_capacity(0);
    let pooled = sqlx::postgres::PgPoolOptions::new().max_connections(4).connect_with(options).await.unwrap();
    let open = || async {
        let db = crate::scale::Db::new(pooled.clone(), false);
        RecordsLock::new(Records::open_postgres(db, 1_000).await.unwrap())
    };
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(write_on(pool.clone(), Arc::clone(&stop)));
    let (b, c) = tokio::join!(open(), open());
    stop.store(true, Ordering::SeqCst);
    let (_, writes) = writer.await.unwrap();
    assert!(writes > 0);
    for records in [&b, &c] {
        let page = records.read().await.unwrap().thread_runs_page("t7", None, (2, 0)).await.unwrap();
        assert_eq!(
            page.iter().map(|r| r.run.run_id.as_str()).collect::<Vec<_>>(),
            ["r00029007", "r00028007"]
        );
    }
    let (version, unfilled, leases, valid): (i32, i64, i64, bool) = sqlx::query_as(
        "SELECT (SELECT version FROM weft_server_schema), \
           (SELECT count(*) FROM weft_server_records WHERE kind = 'run' AND created_at IS NULL), \
           (SELECT count(*) FROM weft_server_sweeps), \
           (SELECT indisvalid FROM pg_index WHERE indexrelid = 'weft_server_run_thread_created'::regclass)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((version, unfilled, leases, valid), (super::SCHEMA_VERSION, 0, 0, true));
}

#[tokio::test]
async fn a_turns_write_reads_the_threads_head_with_it() {
    use weft_graph::checkpoint::{CheckpointConfig, Checkpointer as _, ExpectedHead};
    let Some(db) = database().await else { return };
    let (a, pool) = instance(&db).await;
    let options = weft_integrations::postgres::PostgresOptions::default();
    let saver =
        Arc::new(weft_integrations::postgres::PostgresSaver::from_pool(pool.clone(), options).await.unwrap());
    // A thread without a checkpoint: read as such, beside the write.
    let mut records = a.lock(Key::Thread("t1")).await.unwrap();
    records.head_on_write("t1");
    records.commit(vec![thread("t1"), run("r1", "t1", "running")]).await.unwrap();
    assert_eq!(records.take_head(), Some(None), "read with the write: no checkpoint");
    drop(records);
    // With a checkpoint: the one `get_tuple` reads, whole.
    let (first, op) = last_save("t1", ExpectedHead::Empty);
    saver.put_batch(vec![op]).await.unwrap();
    let mut records = a.lock(Key::Thread("t1")).await.unwrap();
    records.head_on_write("t1");
    records.commit(vec![run("r1", "t1", "success")]).await.unwrap();
    let read = records.take_head().expect("read with the write");
    assert!(records.take_head().is_none(), "taken once");
    drop(records);
    let expected = saver.get_tuple(&CheckpointConfig::thread("t1")).await.unwrap();
    assert_eq!(expected.as_ref().map(|t| t.checkpoint.id.clone()), Some(first));
    assert_eq!(read, expected);
    // Without the request, no head is read.
    let mut records = a.lock(Key::Thread("t1")).await.unwrap();
    records.commit(vec![run("r2", "t1", "success")]).await.unwrap();
    assert!(records.take_head().is_none());
}

#[tokio::test]
async fn a_key_is_written_as_a_literal_that_reads_back_as_itself_whatever_the_string_settings() {
    let Some(db) = database().await else { return };
    let mut conn = sqlx::PgConnection::connect(&db.uri).await.unwrap();
    let keys = ["thread:plain", "it's", "ends with \\", "\\'; SELECT 1; --", "two \\\\ and ''", "é ✓"];
    for conforming in ["on", "off"] {
        let set = format!("SET standard_conforming_strings = {conforming}");
        sqlx::raw_sql(sqlx::AssertSqlSafe(set)).execute(&mut conn).await.unwrap();
        for key in keys {
            // One statement with one row: a literal that ended early would make more, or fail to parse.
            let sql = format!("SELECT {}::text", super::literal(key));
            let rows = sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).fetch_all(&mut conn).await.unwrap();
            assert_eq!(rows.len(), 1, "{key:?} with standard_conforming_strings = {conforming}");
            assert_eq!(
                sqlx::Row::get::<String, _>(&rows[0], 0),
                key,
                "standard_conforming_strings = {conforming}"
            );
        }
    }
    // A turn of such a key takes its lock and commits on a database where the setting is off.
    let set = format!("ALTER DATABASE \"{}\" SET standard_conforming_strings = off", db.name);
    sqlx::raw_sql(sqlx::AssertSqlSafe(set)).execute(&mut conn).await.unwrap();
    let (a, _pool) = instance(&db).await;
    let thread = "t\\'x";
    a.lock(Key::Thread(thread)).await.unwrap().commit(vec![self::thread(thread)]).await.unwrap();
}

/// A thread whose body holds U+0000 (serde_json writes `\u0000`, which PostgreSQL's `jsonb` refuses)
/// neither fails a search that parses the bodies nor hides from it: the metadata prefilter and the order by
/// `state_updated_at` read it, and the caller's check still tells U+0000 from U+FFFD.
#[tokio::test]
async fn a_body_holding_u0000_neither_fails_a_thread_search_nor_hides_from_it() {
    use super::super::source::{ThreadOrder, ThreadScan};
    let Some(db) = database().await else { return };
    let (a, _pool) = instance(&db).await;
    let threads = [
        ("nul-values", json!({"user": "u1"}), json!({"messages": ["a\u{0}b"]}), "03"),
        ("nul-metadata", json!({"user": "u\u{0}1"}), json!(null), "02"),
        ("fffd-metadata", json!({"user": "u\u{fffd}1"}), json!(null), "05"),
        ("plain", json!({"user": "u1"}), json!(null), "01"),
        ("escaped-text", json!({"user": "u2", "note": "\\u0000"}), json!(null), "04"),
    ];
    for (id, metadata, values, second) in threads {
        let Change::Thread(mut thread) = self::thread(id) else { unreachable!() };
        thread.metadata = metadata.as_object().cloned().unwrap();
        thread.values = Some(values);
        thread.state_updated_at = format!("2026-11-27T00:00:{second}Z");
        a.lock(Key::Thread(id)).await.unwrap().commit(vec![Change::Thread(thread)]).await.unwrap();
    }
    let search = |metadata: serde_json::Value| {
        let a = &a;
        async move {
            let metadata = metadata.as_object().cloned().filter(|m| !m.is_empty());
            let scan = ThreadScan {
                metadata: metadata.as_ref(),
                ..ThreadScan::all(ThreadOrder::StateUpdatedAt, false)
            };
            let exact = |t: &Thread| {
                metadata.as_ref().is_none_or(|m| m.iter().all(|(k, v)| t.metadata.get(k) == Some(v)))
            };
            let (page, total) = a.search_threads(scan, Some(&exact), 0, 10).await.unwrap();
            assert_eq!(page.len(), total);
            page.into_iter().map(|t| t.thread_id).collect::<Vec<_>>()
        }
    };
    assert_eq!(
        search(json!({})).await,
        ["fffd-metadata", "escaped-text", "nul-values", "nul-metadata", "plain"],
        "ordered by state_updated_at, newest first"
    );
    assert_eq!(search(json!({"user": "u1"})).await, ["nul-values", "plain"]);
    assert_eq!(search(json!({"user": "u\u{0}1"})).await, ["nul-metadata"]);
    assert_eq!(search(json!({"user": "u\u{fffd}1"})).await, ["fffd-metadata"]);
    assert_eq!(search(json!({"note": "\\u0000"})).await, ["escaped-text"]);
}
