//! Cases: `list_namespaces` (prefix, suffix, wildcards, depth, paging, emptied namespaces).

use serde_json::json;

use super::kit::{Ctx, Outcome, ensure_eq, fresh_root, ns};
use crate::store::{ListNamespacesOptions, Store};

async fn list(store: &dyn Store, options: ListNamespacesOptions) -> Result<Vec<Vec<String>>, String> {
    store.list_namespaces(options).await.ctx("list_namespaces")
}

/// Namespaces holding items, sorted, filtered by prefix and suffix with `*` matching any one label.
pub async fn list_namespaces_by_prefix_and_suffix(store: &dyn Store) -> Outcome {
    let root = fresh_root("list-ns");
    let all = [
        ns(&root, &["a", "x"]),
        ns(&root, &["a", "y"]),
        ns(&root, &["b", "x"]),
        ns(&root, &["b", "x", "deep"]),
        ns(&root, &["c"]),
    ];
    for namespace in all.iter().rev() {
        store.put(namespace, "k", json!({})).await.ctx("put")?;
    }
    let under_root =
        || ListNamespacesOptions { prefix: Some(ns(&root, &[])), ..ListNamespacesOptions::default() };
    ensure_eq(list(store, under_root()).await?, all.to_vec(), "every namespace under a prefix, sorted")?;
    let wild =
        ListNamespacesOptions { prefix: Some(ns(&root, &["*", "x"])), ..ListNamespacesOptions::default() };
    let want = vec![all[0].clone(), all[2].clone(), all[3].clone()];
    ensure_eq(list(store, wild).await?, want, "'*' in a prefix matches any one label")?;
    let suffix = ListNamespacesOptions { suffix: Some(vec!["x".into()]), ..under_root() };
    ensure_eq(list(store, suffix).await?, vec![all[0].clone(), all[2].clone()], "suffix filter")?;
    let wild_suffix = ListNamespacesOptions { suffix: Some(vec!["b".into(), "*".into()]), ..under_root() };
    ensure_eq(list(store, wild_suffix).await?, vec![all[2].clone()], "'*' in a suffix matches any one label")
}

/// `max_depth` cuts namespaces and removes duplicates; `limit` and `offset` page the sorted result.
pub async fn list_namespaces_depth_and_paging(store: &dyn Store) -> Outcome {
    let root = fresh_root("depth");
    for rest in [&["a", "x"][..], &["a", "y"], &["b", "x", "deep"], &["c"]] {
        store.put(&ns(&root, rest), "k", json!({})).await.ctx("put")?;
    }
    let under = |max_depth, limit, offset| ListNamespacesOptions {
        prefix: Some(ns(&root, &[])),
        suffix: None,
        max_depth,
        limit,
        offset,
    };
    let want = vec![ns(&root, &["a"]), ns(&root, &["b"]), ns(&root, &["c"])];
    ensure_eq(list(store, under(Some(2), 100, 0)).await?, want, "max_depth cuts and deduplicates")?;
    ensure_eq(
        list(store, under(Some(1), 100, 0)).await?,
        vec![ns(&root, &[])],
        "max_depth 1 gives the root",
    )?;
    let page = list(store, under(None, 2, 1)).await?;
    ensure_eq(page, vec![ns(&root, &["a", "y"]), ns(&root, &["b", "x", "deep"])], "offset then limit")?;
    let default_limit = ListNamespacesOptions::default().limit;
    ensure_eq(default_limit, 100, "the default limit is 100")
}

/// A namespace whose items are all deleted is no longer listed.
pub async fn emptied_namespaces_are_not_listed(store: &dyn Store) -> Outcome {
    let root = fresh_root("emptied");
    store.put(&ns(&root, &["keep"]), "k", json!({})).await.ctx("put")?;
    store.put(&ns(&root, &["drop"]), "k", json!({})).await.ctx("put")?;
    store.delete(&ns(&root, &["drop"]), "k").await.ctx("delete")?;
    let options = ListNamespacesOptions { prefix: Some(ns(&root, &[])), ..ListNamespacesOptions::default() };
    ensure_eq(list(store, options).await?, vec![ns(&root, &["keep"])], "emptied namespaces disappear")
}
