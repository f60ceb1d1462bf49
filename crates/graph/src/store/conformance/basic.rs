//! Cases: get, put, replace, delete, validation, values, awkward names, concurrency.

use std::time::{Duration, SystemTime};

use futures::future::try_join_all;
use serde_json::{Value, json};

use super::kit::{Ctx, Outcome, ensure, ensure_eq, fresh_root, must_get, ns};
use crate::store::{SearchOptions, Store, StoreError};

/// A put item comes back whole: namespace, key, value, and creation and update times of the put.
pub async fn put_then_get(store: &dyn Store) -> Outcome {
    let namespace = ns(&fresh_root("get"), &["users", "42"]);
    let value = json!({"theme": "dark", "size": 3, "tags": ["a", "b"], "nested": {"x": null}});
    let before = SystemTime::now() - Duration::from_secs(5);
    store.put(&namespace, "prefs", value.clone()).await.ctx("put")?;
    let after = SystemTime::now() + Duration::from_secs(5);
    let item = must_get(store, &namespace, "prefs", "a put item").await?;
    ensure_eq(&item.namespace, &namespace, "the item keeps its namespace")?;
    ensure_eq(item.key.as_str(), "prefs", "the item keeps its key")?;
    ensure_eq(&item.value, &value, "the item keeps its value")?;
    ensure(item.created_at >= before && item.created_at <= after, || {
        format!("created_at is the time of the put: {:?}", item.created_at)
    })?;
    ensure_eq(item.created_at <= item.updated_at, true, "updated_at is not before created_at")
}

/// Putting an existing key replaces the value, keeps `created_at` and moves `updated_at`.
pub async fn put_replaces_and_keeps_created_at(store: &dyn Store) -> Outcome {
    let namespace = ns(&fresh_root("replace"), &[]);
    store.put(&namespace, "k", json!({"v": 1})).await.ctx("put")?;
    let first = must_get(store, &namespace, "k", "the first version").await?;
    tokio::time::sleep(Duration::from_millis(20)).await;
    store.put(&namespace, "k", json!({"v": 2})).await.ctx("put")?;
    let second = must_get(store, &namespace, "k", "the second version").await?;
    ensure_eq(&second.value, &json!({"v": 2}), "a second put replaces the value")?;
    ensure_eq(second.created_at, first.created_at, "a replaced item keeps created_at")?;
    ensure(second.updated_at > first.updated_at, || "a replaced item gets a later updated_at".into())
}

/// Absent keys and namespaces read as `None`, not errors.
pub async fn get_missing_returns_none(store: &dyn Store) -> Outcome {
    let namespace = ns(&fresh_root("missing"), &["a"]);
    ensure(store.get(&namespace, "nope").await.ctx("get")?.is_none(), || {
        "an unknown namespace gives None".into()
    })?;
    store.put(&namespace, "k", json!({})).await.ctx("put")?;
    ensure(store.get(&namespace, "nope").await.ctx("get")?.is_none(), || "an unknown key gives None".into())?;
    let parent = ns(&namespace[0], &[]);
    ensure(store.get(&parent, "k").await.ctx("get")?.is_none(), || {
        "get does not look into child namespaces".into()
    })
}

/// `delete` removes one item; deleting an absent item is not an error.
pub async fn delete_removes_item(store: &dyn Store) -> Outcome {
    let namespace = ns(&fresh_root("delete"), &[]);
    store.put(&namespace, "gone", json!({"x": 1})).await.ctx("put")?;
    store.put(&namespace, "kept", json!({"x": 2})).await.ctx("put")?;
    store.delete(&namespace, "gone").await.ctx("delete")?;
    ensure(store.get(&namespace, "gone").await.ctx("get")?.is_none(), || "a deleted item is gone".into())?;
    ensure(store.get(&namespace, "kept").await.ctx("get")?.is_some(), || "delete leaves other keys".into())?;
    store.delete(&namespace, "gone").await.ctx("delete of an absent item")
}

/// Puts check namespaces as LangGraph does; each error names the namespace and stores nothing.
pub async fn namespace_rules_are_enforced(store: &dyn Store) -> Outcome {
    let root = fresh_root("rules");
    let cases: [(Vec<String>, &str); 4] = [
        (Vec::new(), "an empty namespace"),
        (ns(&root, &["", "x"]), "an empty label"),
        (ns(&root, &["a.b"]), "a label with a period"),
        (vec!["langgraph".to_owned(), root.clone()], "the root label \"langgraph\""),
    ];
    for (namespace, what) in cases {
        match store.put(&namespace, "k", json!({"v": 1})).await {
            Err(err @ StoreError::InvalidNamespace { .. }) => {
                let text = err.to_string();
                let named = namespace.iter().all(|label| text.contains(label.as_str()));
                ensure(named, || format!("the error for {what} names the namespace: {text}"))?;
            }
            other => return Err(format!("a put with {what} is InvalidNamespace, got {other:?}")),
        }
    }
    let valid = ns(&root, &["ok"]);
    store.put(&valid, "k", json!({})).await.ctx("put with a valid namespace")
}

/// Values must be JSON objects; the error names the key and stores nothing.
pub async fn values_must_be_objects(store: &dyn Store) -> Outcome {
    let namespace = ns(&fresh_root("objects"), &[]);
    for value in [json!([1, 2]), json!("text"), json!(3), json!(null)] {
        match store.put(&namespace, "bad-key", value.clone()).await {
            Err(err @ StoreError::InvalidValue { .. }) => {
                ensure(err.to_string().contains("bad-key"), || format!("the error names the key: {err}"))?;
            }
            other => return Err(format!("putting {value} is InvalidValue, got {other:?}")),
        }
    }
    ensure(store.get(&namespace, "bad-key").await.ctx("get")?.is_none(), || {
        "a rejected put stores nothing".into()
    })
}

/// Labels and keys with odd characters, long ones included, are stored and found again, and matched
/// exactly (never as patterns).
pub async fn odd_labels_and_keys(store: &dyn Store) -> Outcome {
    let root = fresh_root("odd");
    let long = "l".repeat(2_000);
    let labels = ["it's \"odd\"", "50% off_sale", "*", "a|b:c/d", "tab\there", "é中🦀", long.as_str()];
    for (i, label) in labels.iter().enumerate() {
        let namespace = ns(&root, &[label]);
        let key = format!("key {label} #{i}");
        store.put(&namespace, &key, json!({"label": label})).await.ctx("put")?;
        let item = must_get(store, &namespace, &key, "an item under an odd label").await?;
        ensure_eq(&item.value, &json!({"label": label}), "odd labels and keys round-trip")?;
    }
    let exact = store.search(&ns(&root, &["50%"]), Default::default()).await.ctx("search")?;
    ensure_eq(exact.len(), 0, "a prefix label with % matches only that exact label")?;
    let star = store.search(&ns(&root, &["*"]), Default::default()).await.ctx("search")?;
    ensure_eq(star.len(), 1, "search prefixes match labels literally, '*' included")
}

/// JSON of every kind inside a value comes back unchanged.
pub async fn values_round_trip(store: &dyn Store) -> Outcome {
    let namespace = ns(&fresh_root("values"), &[]);
    let value = json!({
        "null": null, "t": true, "i": -7, "big": 9_007_199_254_740_993_i64, "f": 0.25,
        "s": "quote \" backslash \\ newline \n emoji 🦀", "list": [1, [2, {"x": []}]], "map": {"empty": {}}
    });
    store.put(&namespace, "k", value.clone()).await.ctx("put")?;
    ensure_eq(must_get(store, &namespace, "k", "a rich value").await?.value, value, "values round-trip")
}

/// Many tasks putting into one store at once all land.
pub async fn concurrent_puts_all_land(store: &dyn Store) -> Outcome {
    let root = fresh_root("parallel");
    let puts = (0..32).map(|i| {
        let namespace = ns(&root, &[&format!("n{}", i % 4)]);
        async move { store.put(&namespace, &format!("k{i}"), json!({"i": i})).await.ctx("put") }
    });
    try_join_all(puts).await?;
    let found = store.search(&ns(&root, &[]), SearchOptions::default().limit(100)).await.ctx("search")?;
    let mut got: Vec<i64> =
        found.iter().filter_map(|i| i.item.value.get("i").and_then(Value::as_i64)).collect();
    got.sort_unstable();
    ensure_eq(got, (0..32).collect(), "every concurrent put is stored")
}
