//! The store conformance suite against `InMemoryStore`, and checks that the suite catches faults.
#![allow(clippy::unwrap_used, missing_docs)]

use async_trait::async_trait;
use serde_json::Value;
use weft_graph::store::conformance::{self, CASES, INDEXED_CASES};
use weft_graph::store::{
    InMemoryStore, IndexConfig, Item, ListNamespacesOptions, PutOptions, SearchItem, SearchOptions, Store,
    StoreError,
};

weft_graph::store_conformance_tests!(|index: Option<IndexConfig>| async move {
    InMemoryStore::new().with_index(index)
});

#[tokio::test]
async fn run_all_passes_on_shared_in_memory_stores() {
    let failures = conformance::run_all(|index| async move { InMemoryStore::new().with_index(index) }).await;
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn cases_have_unique_names() {
    let mut names: Vec<_> = CASES.iter().chain(INDEXED_CASES).map(|c| c.name).collect();
    let count = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), count);
    assert!(count >= 20, "{count}");
}

/// A store with one deliberate fault, to show the suite notices it.
#[derive(Debug)]
struct Faulty {
    inner: InMemoryStore,
    fault: Fault,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    None,
    IgnoreOffset,
    OldestFirst,
    NoDepthCut,
    NoSweep,
}

#[async_trait]
impl Store for Faulty {
    async fn get_with(
        &self,
        ns: &[String],
        key: &str,
        refresh: Option<bool>,
    ) -> Result<Option<Item>, StoreError> {
        self.inner.get_with(ns, key, refresh).await
    }

    async fn put_with(
        &self,
        ns: &[String],
        key: &str,
        value: Value,
        options: PutOptions,
    ) -> Result<(), StoreError> {
        self.inner.put_with(ns, key, value, options).await
    }

    async fn delete(&self, ns: &[String], key: &str) -> Result<(), StoreError> {
        self.inner.delete(ns, key).await
    }

    async fn search(
        &self,
        prefix: &[String],
        mut options: SearchOptions,
    ) -> Result<Vec<SearchItem>, StoreError> {
        if self.fault == Fault::IgnoreOffset {
            options.offset = 0;
        }
        let mut found = self.inner.search(prefix, options).await?;
        if self.fault == Fault::OldestFirst && found.iter().all(|i| i.score.is_none()) {
            found.reverse();
        }
        Ok(found)
    }

    async fn list_namespaces(
        &self,
        mut options: ListNamespacesOptions,
    ) -> Result<Vec<Vec<String>>, StoreError> {
        if self.fault == Fault::NoDepthCut {
            options.max_depth = None;
        }
        self.inner.list_namespaces(options).await
    }

    async fn sweep_ttl(&self) -> Result<u64, StoreError> {
        if self.fault == Fault::NoSweep { Ok(0) } else { self.inner.sweep_ttl().await }
    }
}

async fn failures_with(fault: Fault) -> Vec<String> {
    conformance::run_all(
        |index| async move { Faulty { inner: InMemoryStore::new().with_index(index), fault } },
    )
    .await
}

#[tokio::test(start_paused = true)]
async fn default_get_and_put_pass_the_suite_through_a_wrapper() {
    let failures = failures_with(Fault::None).await;
    assert!(failures.is_empty(), "{failures:#?}");
}

#[tokio::test(start_paused = true)]
async fn suite_catches_a_store_that_does_not_sweep() {
    let failures = failures_with(Fault::NoSweep).await;
    assert_eq!(failures.len(), 1, "{failures:#?}");
    assert!(failures[0].starts_with("sweep_ttl_deletes_expired_items:"), "{failures:#?}");
}

#[tokio::test(start_paused = true)]
async fn suite_catches_a_store_that_ignores_offset() {
    let failures = failures_with(Fault::IgnoreOffset).await;
    assert!(failures.iter().any(|f| f.starts_with("search_limit_and_offset:")), "{failures:#?}");
    assert!(failures.iter().any(|f| f.starts_with("vector_search_ranks_by_similarity:")), "{failures:#?}");
}

#[tokio::test(start_paused = true)]
async fn suite_catches_results_oldest_first() {
    let failures = failures_with(Fault::OldestFirst).await;
    assert!(failures.iter().any(|f| f.starts_with("search_orders_by_last_update:")), "{failures:#?}");
}

#[tokio::test(start_paused = true)]
async fn suite_catches_a_store_that_ignores_max_depth() {
    let failures = failures_with(Fault::NoDepthCut).await;
    assert!(failures.iter().any(|f| f.starts_with("list_namespaces_depth_and_paging:")), "{failures:#?}");
}
