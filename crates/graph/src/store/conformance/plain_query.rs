//! Case for stores without a vector index.

use std::time::Duration;

use serde_json::json;

use super::kit::{Ctx, Outcome, ensure, ensure_eq, fresh_root, keys, ns};
use crate::store::{SearchOptions, Store};

/// A store without a vector index ignores the query: newest update first, no scores.
pub async fn query_without_index_is_ignored(store: &dyn Store) -> Outcome {
    let namespace = ns(&fresh_root("no-index"), &[]);
    store.put(&namespace, "match", json!({"text": "python"})).await.ctx("put")?;
    tokio::time::sleep(Duration::from_millis(5)).await;
    store.put(&namespace, "other", json!({"text": "cooking"})).await.ctx("put")?;
    let found = store.search(&namespace, SearchOptions::default().query("python")).await.ctx("search")?;
    ensure_eq(keys(&found), vec!["other".to_owned(), "match".into()], "the query does not reorder")?;
    ensure(found.iter().all(|i| i.score.is_none()), || "no scores without an index".into())
}
