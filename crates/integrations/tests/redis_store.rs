//! The store conformance suite against the Redis at 127.0.0.1:6379 (every case, on stores with a key
//! prefix of their own), and RedisStore's own rules.
#![cfg(feature = "redis")]
#![allow(clippy::unwrap_used, missing_docs)]

mod redis_common;

use redis_common::{Cleanup, fresh_prefix, reachable_or_skip, url};
use serde_json::json;
use weft_graph::store::conformance::{CASES, INDEXED_CASES, StoreCase, index_config};
use weft_graph::store::{IndexConfig, Store, StoreError};
use weft_integrations::redis::{RedisOptions, RedisStore};

type TestResult = Result<(), String>;

async fn store(prefix: &str, index: Option<IndexConfig>) -> RedisStore {
    RedisStore::connect_with(RedisOptions::new(url()).prefix(prefix)).await.unwrap().with_index(index)
}

/// Runs `cases` at once on one store (cases use roots of their own); returns the failures.
async fn run(cases: &[StoreCase], store: &RedisStore) -> Vec<String> {
    let runs = cases.iter().map(|case| async move {
        (case.run)(store).await.err().map(|rule| format!("{}: {rule}", case.name))
    });
    futures::future::join_all(runs).await.into_iter().flatten().collect()
}

#[tokio::test]
async fn store_conformance_suite_passes_in_full() -> TestResult {
    if reachable_or_skip("store-conformance")?.is_none() {
        return Ok(());
    }
    let prefix = fresh_prefix("store-conformance");
    let _cleanup = Cleanup(prefix.clone());
    let (plain, indexed) =
        (store(&prefix, None).await, store(&format!("{prefix}:indexed"), Some(index_config())).await);
    let (mut failures, more) = futures::join!(run(CASES, &plain), run(INDEXED_CASES, &indexed));
    failures.extend(more);
    assert_eq!(CASES.len() + INDEXED_CASES.len(), 23, "every case of the suite runs");
    if failures.is_empty() { Ok(()) } else { Err(failures.join("\n")) }
}

#[tokio::test]
async fn labels_with_separators_never_collide() -> TestResult {
    if reachable_or_skip("store-labels")?.is_none() {
        return Ok(());
    }
    let prefix = fresh_prefix("store-labels");
    let _cleanup = Cleanup(prefix.clone());
    let store = store(&prefix, None).await;
    let ns = |labels: &[&str]| labels.iter().map(|l| (*l).to_owned()).collect::<Vec<_>>();
    store.put(&ns(&["a", "b"]), "c", json!({"n": 1})).await.unwrap();
    store.put(&ns(&["a"]), "b:c", json!({"n": 2})).await.unwrap();
    store.put(&ns(&["a:b"]), "c", json!({"n": 3})).await.unwrap();
    for (labels, key, n) in [(ns(&["a", "b"]), "c", 1), (ns(&["a"]), "b:c", 2), (ns(&["a:b"]), "c", 3)] {
        assert_eq!(store.get(&labels, key).await.unwrap().unwrap().value, json!({"n": n}));
    }
    assert!(store.get(&ns(&["a.b"]), "c").await.unwrap().is_none());
    let err = store.put(&ns(&["a.b"]), "c", json!({})).await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidNamespace { .. }), "{err:?}");
    Ok(())
}

#[tokio::test]
async fn a_damaged_item_is_an_error_naming_it() -> TestResult {
    if reachable_or_skip("store-damage")?.is_none() {
        return Ok(());
    }
    let prefix = fresh_prefix("store-damage");
    let _cleanup = Cleanup(prefix.clone());
    let store = store(&prefix, None).await;
    let ns = vec!["users".to_owned(), "42".to_owned()];
    store.put(&ns, "prefs", json!({"theme": "dark"})).await.unwrap();
    let mut conn = redis_common::raw().await;
    let _: i64 = redis::cmd("HSET")
        .arg(format!("{prefix}:store:item:users:42:prefs"))
        .arg("value")
        .arg("{\"theme\": ")
        .query_async(&mut conn)
        .await
        .unwrap();
    let err = store.get(&ns, "prefs").await.unwrap_err().to_string();
    assert!(err.contains("prefs") && err.contains("42") && err.contains("unreadable value"), "{err}");
    Ok(())
}
