//! Cases: TTLs (expiry, refresh on read, opting out of refresh, no TTL, the sweep).

use std::time::Duration;

use serde_json::json;

use super::kit::{Ctx, Outcome, ensure, ensure_eq, fresh_root, ns};
use crate::store::{ListNamespacesOptions, PutOptions, SearchOptions, Store, Ttl};

/// Items expire after their TTL and are then invisible to get, search and list_namespaces; reads
/// (get and search) restart the TTL unless told not to; `Ttl::Never` items stay. Runs in about five
/// seconds of real time (on a paused tokio clock, at once for stores that use it).
pub async fn ttl_expires_items_and_reads_refresh_them(store: &dyn Store) -> Outcome {
    let root = fresh_root("ttl");
    let ttl = Duration::from_secs(3);
    let with_ttl = PutOptions { ttl: Ttl::After(ttl), ..PutOptions::default() };
    let (gone, by_get, by_search, forever) =
        (ns(&root, &["gone"]), ns(&root, &["get"]), ns(&root, &["search"]), ns(&root, &["forever"]));
    for namespace in [&gone, &by_get, &by_search] {
        store.put_with(namespace, "k", json!({"v": 1}), with_ttl.clone()).await.ctx("put")?;
    }
    let never = PutOptions { ttl: Ttl::Never, ..PutOptions::default() };
    store.put_with(&forever, "k", json!({"v": 1}), never).await.ctx("put")?;
    ensure(store.get_with(&gone, "k", Some(false)).await.ctx("get")?.is_some(), || {
        "a fresh item is visible".into()
    })?;

    tokio::time::sleep(Duration::from_millis(1500)).await;
    ensure(store.get_with(&by_get, "k", Some(true)).await.ctx("get")?.is_some(), || {
        "visible before its TTL".into()
    })?;
    let refresh = SearchOptions { refresh_ttl: Some(true), ..SearchOptions::default() };
    let found = store.search(&by_search, refresh).await.ctx("search")?;
    ensure_eq(found.len(), 1, "search finds an item before its TTL")?;

    tokio::time::sleep(Duration::from_millis(2000)).await;
    ensure(store.get_with(&gone, "k", Some(false)).await.ctx("get")?.is_none(), || {
        "an expired item is gone".into()
    })?;
    let no_refresh = SearchOptions { refresh_ttl: Some(false), ..SearchOptions::default() };
    let gone_found = store.search(&gone, no_refresh.clone()).await.ctx("search")?;
    ensure_eq(gone_found.len(), 0, "search does not return expired items")?;
    ensure(store.get_with(&by_get, "k", Some(false)).await.ctx("get")?.is_some(), || {
        "a get with refresh restarts the TTL".into()
    })?;
    ensure_eq(
        store.search(&by_search, no_refresh.clone()).await.ctx("search")?.len(),
        1,
        "search refreshes",
    )?;
    let listed = store
        .list_namespaces(ListNamespacesOptions {
            prefix: Some(ns(&root, &[])),
            ..ListNamespacesOptions::default()
        })
        .await
        .ctx("list_namespaces")?;
    ensure_eq(
        listed,
        vec![forever.clone(), by_get.clone(), by_search.clone()],
        "expired namespaces are not listed",
    )?;

    tokio::time::sleep(Duration::from_millis(1500)).await;
    ensure(store.get_with(&by_get, "k", Some(false)).await.ctx("get")?.is_none(), || {
        "reads without refresh do not extend the TTL".into()
    })?;
    ensure_eq(
        store.search(&by_search, no_refresh).await.ctx("search")?.len(),
        0,
        "a refreshed item expires later",
    )?;
    ensure(store.get(&forever, "k").await.ctx("get")?.is_some(), || "an item without TTL stays".into())
}

/// `sweep_ttl` deletes the items whose TTL ran out and counts them; items still alive and items without
/// a TTL stay, and a second sweep finds nothing more of them. Runs in about 1.5 seconds of real time.
pub async fn sweep_ttl_deletes_expired_items(store: &dyn Store) -> Outcome {
    let root = fresh_root("sweep");
    let short = PutOptions { ttl: Ttl::After(Duration::from_millis(800)), ..PutOptions::default() };
    let long = PutOptions { ttl: Ttl::minutes(10.0), ..PutOptions::default() };
    let (expiring, alive) = (ns(&root, &["expiring"]), ns(&root, &["alive"]));
    for key in ["a", "b", "c"] {
        store.put_with(&expiring, key, json!({"v": key}), short.clone()).await.ctx("put")?;
    }
    store.put_with(&alive, "long", json!({"v": 1}), long).await.ctx("put")?;
    store.put(&alive, "forever", json!({"v": 2})).await.ctx("put")?;

    tokio::time::sleep(Duration::from_millis(1300)).await;
    let swept = store.sweep_ttl().await.ctx("sweep_ttl")?;
    ensure(swept >= 3, || format!("a sweep counts the three expired items, got {swept}"))?;
    let again = store.sweep_ttl().await.ctx("sweep_ttl")?;
    ensure_eq(again, 0, "a second sweep at once finds nothing more")?;
    let left = store.search(&ns(&root, &[]), SearchOptions::default()).await.ctx("search")?;
    let mut keys: Vec<String> = left.into_iter().map(|hit| hit.item.key).collect();
    keys.sort();
    ensure_eq(keys, vec!["forever".to_owned(), "long".to_owned()], "the sweep keeps live items")
}
