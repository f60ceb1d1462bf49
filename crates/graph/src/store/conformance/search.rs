//! Cases: search by namespace prefix, order, limit and offset, filters.

use std::time::Duration;

use serde_json::json;

use super::kit::{Ctx, Outcome, ensure_eq, fresh_root, ns, put_all, search_keys};
use crate::store::{SearchOptions, Store, StoreError};

fn opts() -> SearchOptions {
    SearchOptions::default()
}

/// Search covers the namespaces that start with the prefix, label by label.
pub async fn search_by_namespace_prefix(store: &dyn Store) -> Outcome {
    let root = fresh_root("prefix");
    put_all(store, &ns(&root, &["docs"]), &[("d1", json!({"n": 1}))]).await?;
    put_all(store, &ns(&root, &["docs", "deep"]), &[("d2", json!({"n": 2}))]).await?;
    put_all(store, &ns(&root, &["docsx"]), &[("d3", json!({"n": 3}))]).await?;
    put_all(store, &ns(&root, &["other"]), &[("o1", json!({"n": 4}))]).await?;
    let mut docs = search_keys(store, &ns(&root, &["docs"]), opts()).await?;
    docs.sort();
    ensure_eq(docs, vec!["d1".to_owned(), "d2".to_owned()], "a prefix matches whole labels and children")?;
    let everything = search_keys(store, &ns(&root, &[]), opts()).await?;
    ensure_eq(everything.len(), 4, "the root prefix covers every namespace under it")?;
    let found = store.search(&ns(&root, &["docs", "deep"]), opts()).await.ctx("search")?;
    ensure_eq(
        found.first().map(|i| i.item.namespace.clone()),
        Some(ns(&root, &["docs", "deep"])),
        "items keep namespaces",
    )?;
    ensure_eq(found.first().and_then(|i| i.score), None, "search without a query gives no score")
}

/// Without a query, results are newest update first; updating an item moves it to the front.
pub async fn search_orders_by_last_update(store: &dyn Store) -> Outcome {
    let namespace = ns(&fresh_root("order"), &[]);
    for key in ["k1", "k2", "k3"] {
        store.put(&namespace, key, json!({"key": key})).await.ctx("put")?;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let order = search_keys(store, &namespace, opts()).await?;
    ensure_eq(order, vec!["k3".to_owned(), "k2".into(), "k1".into()], "newest update first")?;
    store.put(&namespace, "k1", json!({"key": "k1", "again": true})).await.ctx("put")?;
    let order = search_keys(store, &namespace, opts()).await?;
    ensure_eq(order, vec!["k1".to_owned(), "k3".into(), "k2".into()], "an update moves the item first")
}

/// `limit` defaults to 10; `offset` skips results.
pub async fn search_limit_and_offset(store: &dyn Store) -> Outcome {
    let namespace = ns(&fresh_root("limit"), &[]);
    for i in 0..12 {
        store.put(&namespace, &format!("k{i:02}"), json!({"i": i})).await.ctx("put")?;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let all = search_keys(store, &namespace, opts().limit(100)).await?;
    ensure_eq(all.len(), 12, "a large limit returns everything")?;
    ensure_eq(search_keys(store, &namespace, opts()).await?, all[..10].to_vec(), "the default limit is 10")?;
    let page = search_keys(store, &namespace, opts().limit(3).offset(4)).await?;
    ensure_eq(page, all[4..7].to_vec(), "offset skips, then limit caps")?;
    ensure_eq(search_keys(store, &namespace, opts().offset(20)).await?.len(), 0, "an offset past the end")
}

/// Filters match top-level keys by equality; nested maps as containment; lists element by element;
/// numbers by value.
pub async fn filter_by_equality(store: &dyn Store) -> Outcome {
    let namespace = ns(&fresh_root("eq"), &[]);
    put_all(
        store,
        &namespace,
        &[
            ("a", json!({"kind": "note", "meta": {"lang": "en", "v": 1}, "tags": ["x", "y"], "n": 1})),
            ("b", json!({"kind": "note", "meta": {"lang": "fr", "v": 1}, "tags": ["x"], "n": 2.5})),
            ("c", json!({"kind": "task", "meta": {"lang": "en"}, "tags": ["y", "x"], "n": 3})),
        ],
    )
    .await?;
    let find = |filter: serde_json::Value| {
        let namespace = namespace.clone();
        async move {
            let mut k = search_keys(store, &namespace, opts().filter(filter)).await?;
            k.sort();
            Ok::<_, String>(k)
        }
    };
    ensure_eq(find(json!({"kind": "note"})).await?, vec!["a".to_owned(), "b".into()], "top-level equality")?;
    ensure_eq(find(json!({"kind": "note", "n": 2.5})).await?, vec!["b".to_owned()], "every pair must match")?;
    ensure_eq(
        find(json!({"meta": {"lang": "en"}})).await?,
        vec!["a".to_owned(), "c".into()],
        "nested containment",
    )?;
    ensure_eq(
        find(json!({"meta": {"lang": "en", "v": 1}})).await?,
        vec!["a".to_owned()],
        "nested keys all match",
    )?;
    ensure_eq(find(json!({"tags": ["x", "y"]})).await?, vec!["a".to_owned()], "lists match in order")?;
    ensure_eq(find(json!({"n": 1.0})).await?, vec!["a".to_owned()], "numbers compare by value")?;
    ensure_eq(find(json!({"missing": 1})).await?.len(), 0, "a missing key never equals")
}

/// `$eq $ne $gt $gte $lt $lte` compare numbers with numbers and strings with strings.
pub async fn filter_by_operators(store: &dyn Store) -> Outcome {
    let namespace = ns(&fresh_root("ops"), &[]);
    put_all(
        store,
        &namespace,
        &[
            ("a", json!({"score": 1, "name": "apple"})),
            ("b", json!({"score": 5.5, "name": "banana"})),
            ("c", json!({"score": 10, "name": "cherry"})),
            ("d", json!({"score": "high", "name": 7})),
        ],
    )
    .await?;
    let find = |filter: serde_json::Value| {
        let namespace = namespace.clone();
        async move {
            let mut k = search_keys(store, &namespace, opts().filter(filter)).await?;
            k.sort();
            Ok::<_, String>(k)
        }
    };
    let v = |keys: &[&str]| keys.iter().map(|k| (*k).to_owned()).collect::<Vec<_>>();
    ensure_eq(find(json!({"score": {"$gt": 5}})).await?, v(&["b", "c"]), "$gt on numbers")?;
    ensure_eq(find(json!({"score": {"$gte": 10}})).await?, v(&["c"]), "$gte on numbers")?;
    ensure_eq(find(json!({"score": {"$lt": 5.5}})).await?, v(&["a"]), "$lt on numbers")?;
    ensure_eq(find(json!({"score": {"$lte": 5.5}})).await?, v(&["a", "b"]), "$lte on numbers")?;
    ensure_eq(
        find(json!({"score": {"$gt": 1, "$lt": 10}})).await?,
        v(&["b"]),
        "several operators all apply",
    )?;
    ensure_eq(find(json!({"name": {"$gte": "banana"}})).await?, v(&["b", "c"]), "ordering on strings")?;
    ensure_eq(find(json!({"score": {"$eq": 10}})).await?, v(&["c"]), "$eq")?;
    ensure_eq(find(json!({"score": {"$ne": 10}})).await?, v(&["a", "b", "d"]), "$ne")?;
    ensure_eq(find(json!({"absent": {"$ne": 1}})).await?, v(&["a", "b", "c", "d"]), "$ne on a missing key")?;
    ensure_eq(find(json!({"absent": {"$gt": 0}})).await?, v(&[]), "ordering on a missing key never matches")
}

/// An unknown operator is `InvalidFilter` naming it.
pub async fn unknown_filter_operator_is_rejected(store: &dyn Store) -> Outcome {
    let namespace = ns(&fresh_root("badop"), &[]);
    store.put(&namespace, "k", json!({"score": 1})).await.ctx("put")?;
    match store.search(&namespace, opts().filter(json!({"score": {"$between": [0, 2]}}))).await {
        Err(err @ StoreError::InvalidFilter(_)) => {
            ensure_eq(err.to_string().contains("$between"), true, "the error names the operator")
        }
        other => Err(format!("an unknown operator is InvalidFilter, got {other:?}")),
    }
}
