#![allow(clippy::unwrap_used, missing_docs)]
//! PostgreSQL specifics: secrets kept out of `Debug`, errors and logs; pooler mode without prepared
//! statements; migrations from many processes at once; retries after a dropped connection; 200 threads
//! through one saver; a batch stored in a transaction of the caller's; a long thread's head read without
//! reading its history.

#![cfg(feature = "postgres")]

mod common;

use std::io::Write;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use futures::future::join_all;
use serde_json::json;
use sqlx::Connection as _;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use weft_graph::checkpoint::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointErrorKind, CheckpointMetadata, CheckpointSource,
    Checkpointer, ExpectedHead, ListOptions, SaveOp,
};
use weft_integrations::postgres::{PgStatements, PostgresOptions, PostgresSaver, PostgresStore, RetryPolicy};

const SECRET: &str = "sup3r-s3cret-pw";

fn metadata(step: i64) -> CheckpointMetadata {
    CheckpointMetadata {
        source: CheckpointSource::Loop,
        step,
        parents: Default::default(),
        extra: Default::default(),
    }
}

/// Puts `n` checkpoints on `thread` (channel `step` = i, each with a pending write naming the thread).
async fn chain(saver: &dyn Checkpointer, thread: &str, n: u32) -> Vec<CheckpointConfig> {
    let mut parent = CheckpointConfig::thread(thread);
    let mut out = Vec::new();
    for i in 0..n {
        let version = format!("{:032}.{:016}", i + 1, 0.5);
        let versions: weft_graph::checkpoint::ChannelVersions = [("step".into(), version.into())].into();
        let cp = Checkpoint {
            v: 1,
            id: uuid::Uuid::now_v7().to_string(),
            ts: "2025-01-01T00:00:00+00:00".into(),
            channel_values: [("step".into(), json!(i))].into_iter().collect(),
            channel_versions: versions.clone(),
            versions_seen: Default::default(),
            updated_channels: vec!["step".into()],
        };
        parent = saver.put(&parent, cp, metadata(i64::from(i)), versions).await.unwrap();
        saver.put_writes(&parent, vec![("owner".into(), json!(thread))], "t", "").await.unwrap();
        out.push(parent.clone());
    }
    out
}

/// A `tracing` writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn passwords_never_reach_debug_output_errors_or_logs() {
    let Some(schema) = common::schema().await else { return };
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let url = format!("postgres://postgres:{SECRET}@127.0.0.1:5432/test");
    let saver = PostgresSaver::connect_with(&url, schema.options()).await.unwrap();
    chain(&saver, "secret-test", 2).await;
    let debug = format!("{saver:?} {:#?}", saver);
    assert!(!debug.contains(SECRET), "{debug}");
    assert!(debug.contains("postgres@127.0.0.1:5432/test"), "Debug still says where it connects: {debug}");
    let store = PostgresStore::connect_with(&url, schema.options()).await.unwrap();
    assert!(!format!("{store:?}").contains(SECRET));

    let closed = format!("postgres://postgres:{SECRET}@127.0.0.1:1/test");
    let options = PostgresOptions { retry: RetryPolicy::none(), ..PostgresOptions::default() };
    let err = PostgresSaver::connect_with(&closed, options).await.unwrap_err();
    let mut text = format!("{err} {err:?}");
    let mut source = std::error::Error::source(&err);
    while let Some(e) = source {
        text.push_str(&format!(" <- {e} {e:?}"));
        source = e.source();
    }
    assert!(!text.contains(SECRET) && text.contains("127.0.0.1:1"), "the error and its sources: {text}");
    assert!(err.is_retryable(), "a refused connection is unavailable: {err:?}");
    let err = PostgresSaver::connect(&format!("postgres://postgres:{SECRET}@127.0.0.1:notaport/test"))
        .await
        .unwrap_err()
        .to_string();
    assert!(!err.contains(SECRET), "{err}");

    let logged = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(!logged.is_empty(), "the test captured the logs");
    assert!(!logged.contains(SECRET), "{logged}");
}

async fn prepared_statement_count(saver: &PostgresSaver) -> i64 {
    use sqlx::Row;
    let row =
        sqlx::raw_sql("SELECT count(*) FROM pg_prepared_statements").fetch_one(saver.pool()).await.unwrap();
    row.get(0)
}

#[tokio::test]
async fn pooler_mode_uses_no_named_prepared_statements() {
    let single = |o: PostgresOptions| PostgresOptions { max_connections: 1, ..o };
    let Some(pooled) = common::saver_with(|o| single(o).without_prepared_statements()).await else { return };
    chain(pooled.inner(), "pooled", 3).await;
    pooled.inner().list(None, ListOptions::default()).await.unwrap();
    assert_eq!(prepared_statement_count(pooled.inner()).await, 0);

    let Some(cached) = common::saver_with(single).await else { return };
    chain(cached.inner(), "cached", 3).await;
    assert!(prepared_statement_count(cached.inner()).await > 0, "the default mode does prepare statements");
}

/// A caller's pool of one connection in `schema`: sqlx's statement cache on, and sessions serializable by
/// default (so a transaction that states read committed shows).
async fn one_connection(schema: &common::TestSchema) -> sqlx::PgPool {
    let options = PgConnectOptions::from_str(&common::pg_url())
        .unwrap()
        .options([("search_path", schema.name.as_str()), ("default_transaction_isolation", "serializable")]);
    PgPoolOptions::new().max_connections(1).connect_with(options).await.unwrap()
}

async fn named_statements(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pg_prepared_statements")
        .persistent(false)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn postgres_statements_unprepared_run_unnamed_each_in_a_committed_read_committed_transaction() {
    let Some(schema) = common::schema().await else { return };
    let pool = one_connection(&schema).await;
    sqlx::raw_sql("CREATE TABLE seen (n int)").execute(&pool).await.unwrap();
    let (unnamed, named) = (PgStatements::new(pool.clone(), false), PgStatements::new(pool.clone(), true));
    let isolation = || sqlx::query_scalar::<_, String>("SELECT current_setting('transaction_isolation')");

    let inside = unnamed.fetch_one(isolation()).await.unwrap();
    assert_eq!(inside, "read committed", "the statement runs in a transaction that states its isolation");
    let after = isolation().persistent(false).fetch_one(&pool).await.unwrap();
    assert_eq!(after, "serializable", "the transaction ended with the statement");
    let inserted = unnamed.execute(sqlx::query("INSERT INTO seen VALUES ($1)").bind(7)).await.unwrap();
    assert_eq!(inserted.rows_affected(), 1);
    let mut other = sqlx::PgConnection::connect_with(
        &PgConnectOptions::from_str(&common::pg_url())
            .unwrap()
            .options([("search_path", schema.name.as_str())]),
    )
    .await
    .unwrap();
    let committed: i64 = sqlx::query_scalar("SELECT count(*) FROM seen").fetch_one(&mut other).await.unwrap();
    assert_eq!(committed, 1, "the write is committed");
    let rows: Vec<(i32,)> =
        unnamed.fetch_all(sqlx::query_as("SELECT n FROM seen WHERE n = $1").bind(7)).await.unwrap();
    assert_eq!(rows, [(7,)]);
    assert_eq!(named_statements(&pool).await, 0, "every statement was the unnamed one");

    let outside = named.fetch_one(isolation()).await.unwrap();
    assert_eq!(outside, "serializable", "prepared, a statement runs as it is, in no transaction of ours");
    let found: Option<i32> =
        named.fetch_optional(sqlx::query_scalar("SELECT n FROM seen WHERE n = $1").bind(7)).await.unwrap();
    assert_eq!(found, Some(7));
    assert_eq!(named_statements(&pool).await, 2, "prepared statements are named and cached");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_from_many_processes_at_once_run_once() {
    let Some(existing) = common::schema().await else { return };
    drop(existing);
    // A schema that does not exist yet: every connection races to create it and its tables.
    let schema = common::TestSchema { name: format!("weft_test_{}", uuid::Uuid::new_v4().simple()) };
    let starts = (0..8).map(|i| {
        let options = schema.options();
        async move {
            if i % 2 == 0 {
                PostgresSaver::connect_with(&common::pg_url(), options)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            } else {
                PostgresStore::connect_with(&common::pg_url(), options)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
        }
    });
    for outcome in join_all(starts).await {
        outcome.unwrap();
    }
    let saver = PostgresSaver::connect_with(&common::pg_url(), schema.options()).await.unwrap();
    let steps: Vec<(String, i64)> =
        sqlx::query_as("SELECT component, version FROM weft_migrations ORDER BY component, version")
            .fetch_all(saver.pool())
            .await
            .unwrap();
    assert_eq!(
        steps,
        vec![
            ("checkpoint".to_owned(), 1),
            ("checkpoint".to_owned(), 2),
            ("checkpoint".to_owned(), 3),
            ("checkpoint".to_owned(), 4),
            ("checkpoint".to_owned(), 5),
            ("checkpoint".to_owned(), 6),
            ("checkpoint".to_owned(), 7),
            ("checkpoint".to_owned(), 8),
            ("store".to_owned(), 1)
        ]
    );
    // The head check, the batch and the reads are planned once per connection, not at every call.
    for function in [
        "weft_checkpoint_heads",
        "weft_checkpoint_batch",
        "weft_checkpoint_blobs",
        "weft_checkpoint_tuple",
        "weft_checkpoint_list",
    ] {
        let config: Vec<String> = sqlx::query_scalar(
            "SELECT unnest(proconfig) FROM pg_proc WHERE proname = $1 \
             AND pronamespace = current_schema()::regnamespace",
        )
        .bind(function)
        .fetch_all(saver.pool())
        .await
        .unwrap();
        assert!(config.iter().any(|c| c == "plan_cache_mode=force_generic_plan"), "{function}: {config:?}");
        // Those that read a thread's head have no plan but the walk down the primary key (see
        // `a_long_threads_head_is_read_without_reading_its_history`).
        if function != "weft_checkpoint_blobs" {
            for off in ["enable_bitmapscan=off", "enable_sort=off"] {
                assert!(config.iter().any(|c| c == off), "{function}: {config:?}");
            }
        }
    }
}

/// A rolling upgrade, or a rollback after one: a newer build's step that leaves older builds working lets
/// this build start on the database; one that does not is refused by name, and so is a step recorded
/// before steps said which builds they leave working.
#[tokio::test]
async fn an_older_build_starts_on_a_newer_schema_only_when_the_newer_steps_allow_it() {
    let Some(schema) = common::schema().await else { return };
    let saver = PostgresSaver::connect_with(&common::pg_url(), schema.options()).await.unwrap();
    let steps: Vec<(i64, Option<i64>)> = sqlx::query_as(
        "SELECT version, readable_from FROM weft_migrations WHERE component = 'checkpoint' ORDER BY version",
    )
    .fetch_all(saver.pool())
    .await
    .unwrap();
    assert_eq!(
        steps,
        vec![
            (1, Some(0)),
            (2, Some(1)),
            (3, Some(2)),
            (4, Some(3)),
            (5, Some(4)),
            (6, Some(5)),
            (7, Some(6)),
            (8, Some(8))
        ]
    );
    // A table made before the column: it is added, empty for the steps recorded then.
    sqlx::raw_sql("ALTER TABLE weft_migrations DROP COLUMN readable_from")
        .execute(saver.pool())
        .await
        .unwrap();
    let saver = PostgresSaver::connect_with(&common::pg_url(), schema.options()).await.unwrap();
    let empty: i64 = sqlx::query_scalar("SELECT count(*) FROM weft_migrations WHERE readable_from IS NULL")
        .fetch_one(saver.pool())
        .await
        .unwrap();
    assert_eq!(empty, 8);
    let newer = |readable_from: Option<i64>| {
        sqlx::query(
            "INSERT INTO weft_migrations (component, version, name, readable_from) \
             VALUES ('checkpoint', 99, 'a newer build''s step', $1)",
        )
        .bind(readable_from)
    };
    newer(Some(6)).execute(saver.pool()).await.unwrap();
    let again = PostgresSaver::connect_with(&common::pg_url(), schema.options()).await.unwrap();
    let thread = CheckpointConfig::thread("after-upgrade");
    assert!(again.get_tuple(&thread).await.unwrap().is_none(), "the saver works on that schema");
    // Refused on a caller's pool as on its own.
    let callers = one_connection(&schema).await;
    for refusing in [Some(99), None] {
        sqlx::query("DELETE FROM weft_migrations WHERE version = 99").execute(saver.pool()).await.unwrap();
        newer(refusing).execute(saver.pool()).await.unwrap();
        let Err(err) = PostgresSaver::from_pool(callers.clone(), schema.options()).await else {
            panic!("a caller's pool on a schema this build cannot use was accepted");
        };
        let err = err.to_string();
        assert!(
            err.contains("checkpoint schema version 99, which needs a build that knows versions up to 99")
                && err.contains("this build knows versions up to 8"),
            "{err}"
        );
    }
    let Err(err) = PostgresSaver::connect_with(&common::pg_url(), schema.options()).await else {
        panic!("a schema this build cannot use was accepted");
    };
    assert!(err.to_string().contains("checkpoint schema version 99"), "{err}");
}

/// A saver on a one-connection pool that does not test connections before use, so a killed connection
/// fails the next operation.
async fn fragile_saver(schema: &common::TestSchema, retry: RetryPolicy) -> PostgresSaver {
    let connect = PgConnectOptions::from_str(&common::pg_url())
        .unwrap()
        .options([("search_path", schema.name.as_str())]);
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .test_before_acquire(false)
        .connect_with(connect)
        .await
        .unwrap();
    PostgresSaver::from_pool(pool, PostgresOptions { retry, ..PostgresOptions::default() }).await.unwrap()
}

async fn kill_connections(saver: &PostgresSaver) {
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(saver.pool()).await.unwrap();
    let admin = sqlx::PgPool::connect(&common::pg_url()).await.unwrap();
    let killed: bool =
        sqlx::query_scalar("SELECT pg_terminate_backend($1)").bind(pid).fetch_one(&admin).await.unwrap();
    assert!(killed);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
}

#[tokio::test]
async fn a_dropped_connection_is_retried() {
    let Some(schema) = common::schema().await else { return };
    let saver = fragile_saver(&schema, RetryPolicy::default()).await;
    let saved = chain(&saver, "retry", 2).await;
    kill_connections(&saver).await;
    let got = saver.get_tuple(&saved[1]).await.unwrap().unwrap();
    assert_eq!(got.checkpoint.channel_values.get("step"), Some(&json!(1)));
    kill_connections(&saver).await;
    chain(&saver, "retry-write", 1).await;

    let brittle = fragile_saver(&schema, RetryPolicy::none()).await;
    kill_connections(&brittle).await;
    assert!(
        brittle.get_tuple(&saved[1]).await.is_err(),
        "without retries the dropped connection fails the call"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_threads_at_once_through_one_saver() {
    let Some(saver) = common::saver().await else { return };
    let threads: Vec<String> =
        (0..200).map(|i| format!("many-{i}-{}", uuid::Uuid::new_v4().simple())).collect();
    let runs = threads.iter().map(|thread| chain(saver.inner(), thread, 5));
    let saved = join_all(runs).await;
    for (thread, saved) in threads.iter().zip(saved) {
        let listed = saver
            .inner()
            .list(Some(&CheckpointConfig::thread(thread.as_str())), ListOptions::default())
            .await
            .unwrap();
        let ids: Vec<_> = listed.iter().map(|t| t.config.clone()).collect();
        let want: Vec<_> = saved.into_iter().rev().collect();
        assert_eq!(ids, want, "thread {thread} has its whole history");
        for tuple in &listed {
            let owners: Vec<_> = tuple.pending_writes.iter().map(|w| w.value.clone()).collect();
            assert_eq!(owners, vec![json!(thread)], "no thread sees another's writes");
        }
    }
}

/// A checkpoint of `thread` expecting `head`, and a pending write on it; the checkpoint's id.
fn saves(thread: &str, head: ExpectedHead) -> (String, Vec<SaveOp>) {
    let id = uuid::Uuid::now_v7().to_string();
    let versions: ChannelVersions = [("step".into(), format!("{:032}.{:016}", 1, 0.5).into())].into();
    let checkpoint = Checkpoint {
        v: 1,
        id: id.clone(),
        ts: "2025-01-01T00:00:00+00:00".into(),
        channel_values: [("step".into(), json!(0))].into_iter().collect(),
        channel_versions: versions.clone(),
        versions_seen: Default::default(),
        updated_channels: vec!["step".into()],
    };
    let put = SaveOp::Put {
        config: Arc::new(CheckpointConfig::thread(thread)),
        checkpoint,
        metadata: metadata(0),
        new_versions: versions,
        appends: Default::default(),
        expected_head: head,
    };
    let writes = SaveOp::Writes {
        config: Arc::new(CheckpointConfig {
            checkpoint_id: Some(id.clone()),
            ..CheckpointConfig::thread(thread)
        }),
        writes: vec![("owner".into(), json!(thread))],
        task_id: "t".into(),
        task_path: "".into(),
    };
    (id, vec![put, writes])
}

/// The thread's head and the number of its pending writes, as another connection reads them.
async fn head(saver: &PostgresSaver, thread: &str) -> Option<(String, usize)> {
    let tuple = saver.get_tuple(&CheckpointConfig::thread(thread)).await.unwrap()?;
    Some((tuple.checkpoint.id, tuple.pending_writes.len()))
}

async fn callers_rows(saver: &PostgresSaver) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM ended").fetch_one(saver.pool()).await.unwrap()
}

#[tokio::test]
async fn a_batch_in_the_callers_transaction_is_stored_when_and_only_when_the_caller_commits() {
    for prepared in [true, false] {
        let Some(saver) =
            common::saver_with(|o| PostgresOptions { prepared_statements: prepared, ..o }).await
        else {
            return;
        };
        let saver = saver.inner();
        sqlx::raw_sql("CREATE TABLE ended (run TEXT)").execute(saver.pool()).await.unwrap();

        // Rolled back: nothing stored, nor seen before but in the transaction itself.
        let (written, ops) = saves("t", ExpectedHead::Empty);
        let mut tx = saver.pool().begin().await.unwrap();
        saver.put_batch_in(&mut tx, ops).await.unwrap();
        let inside = saver.get_tuple_in(&mut tx, &CheckpointConfig::thread("t")).await.unwrap().unwrap();
        assert_eq!(
            (inside.checkpoint.id, inside.pending_writes.len()),
            (written, 1),
            "read in the transaction"
        );
        assert_eq!(head(saver, "t").await, None, "not stored before the caller commits");
        tx.rollback().await.unwrap();
        assert_eq!(head(saver, "t").await, None, "rolled back with the caller's transaction");

        // Committed: stored with the caller's own row, at once.
        let (first, ops) = saves("t", ExpectedHead::Empty);
        let mut tx = saver.pool().begin().await.unwrap();
        saver.put_batch_in(&mut tx, ops).await.unwrap();
        sqlx::query("INSERT INTO ended VALUES ($1)").bind("r1").execute(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(head(saver, "t").await, Some((first.clone(), 1)), "prepared: {prepared}");
        assert_eq!(callers_rows(saver).await, 1);

        // A head that moved: a conflict that writes nothing and leaves the transaction to the caller.
        let (_, ops) = saves("t", ExpectedHead::Empty);
        let mut tx = saver.pool().begin().await.unwrap();
        let err = saver.put_batch_in(&mut tx, ops).await.unwrap_err();
        assert_eq!(err.kind(), CheckpointErrorKind::Conflict, "{err}");
        sqlx::query("INSERT INTO ended VALUES ($1)").bind("r2").execute(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(head(saver, "t").await, Some((first.clone(), 1)), "the head did not move");
        assert_eq!(callers_rows(saver).await, 2, "the caller's transaction went on");

        // Extending the head: stored.
        let (second, ops) = saves("t", ExpectedHead::Id(first));
        let mut tx = saver.pool().begin().await.unwrap();
        saver.put_batch_in(&mut tx, ops).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(head(saver, "t").await, Some((second, 1)));
    }
}

/// What the transaction of `conn` has read of the checkpoints so far: entries of both their indexes,
/// rows of sequential scans and rows fetched.
async fn checkpoints_read(conn: &mut sqlx::PgConnection) -> i64 {
    sqlx::query_scalar(
        "SELECT pg_stat_get_xact_tuples_returned('checkpoints_pkey'::regclass) \
         + pg_stat_get_xact_tuples_returned('checkpoints_by_id'::regclass) \
         + pg_stat_get_xact_tuples_returned('checkpoints'::regclass) \
         + pg_stat_get_xact_tuples_fetched('checkpoints'::regclass)",
    )
    .fetch_one(conn)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_long_threads_head_is_read_without_reading_its_history() {
    let Some(saver) = common::saver().await else { return };
    let saver = saver.inner();
    // One thread of 3,000 checkpoints among 2,000 threads of 10, the table analyzed: for a thread given
    // as a parameter PostgreSQL estimates about 10 rows, for which reading them all and then sorting them
    // looks cheapest; on the long thread that is every checkpoint, at every save and every read of its
    // head.
    let (head, ops) = saves("long", ExpectedHead::Empty);
    saver.put_batch(ops).await.unwrap();
    sqlx::raw_sql(
        "INSERT INTO checkpoints (thread_id, checkpoint_id, checkpoint) \
         SELECT 'long', '0-' || lpad(i::text, 8, '0'), '{}' FROM generate_series(1, 3000) i; \
         INSERT INTO checkpoints (thread_id, checkpoint_id, checkpoint) \
         SELECT 'short-' || (i % 2000), '0-' || lpad(i::text, 8, '0'), '{}' FROM generate_series(1, 20000) i; \
         ANALYZE checkpoints",
    )
    .execute(saver.pool())
    .await
    .unwrap();

    let mut tx = saver.pool().begin().await.unwrap();
    let before = checkpoints_read(&mut tx).await;
    let (next, ops) = saves("long", ExpectedHead::Id(head.clone()));
    saver.put_batch_in(&mut tx, ops).await.unwrap();
    let saved = checkpoints_read(&mut tx).await;
    let tuple = saver.get_tuple_in(&mut tx, &CheckpointConfig::thread("long")).await.unwrap().unwrap();
    let read = checkpoints_read(&mut tx).await;
    // A page of its history, from the head and from the middle (what `list` sends).
    let mut pages = Vec::new();
    for before in [None, Some("0-00001500")] {
        let start = checkpoints_read(&mut tx).await;
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT checkpoint_id FROM weft_checkpoint_list('long', '', NULL, $1, NULL, 10)",
        )
        .bind(before)
        .fetch_all(&mut *tx)
        .await
        .unwrap();
        pages.push((ids, checkpoints_read(&mut tx).await - start));
    }
    tx.commit().await.unwrap();
    assert_eq!(tuple.checkpoint.id, next);
    assert!(saved - before < 20, "a save read {} rows and index entries", saved - before);
    assert!(read - saved < 20, "a read of the head read {} rows and index entries", read - saved);
    let expected: Vec<String> = (1490..1500).rev().map(|i| format!("0-{i:08}")).collect();
    assert_eq!(pages[1].0, expected, "the page before the middle, newest first");
    assert_eq!(pages[0].0[..2], [next, head], "the newest page starts at the head");
    for (ids, entries) in &pages {
        assert!(*entries < 80, "a page of {} read {entries} rows and index entries", ids.len());
    }
}
