//! The cases every [`Store`] must pass, public so that backends in other crates run the same ones.
//!
//! Each case is an async function taking `&dyn Store` and returning `Err` with the rule that broke (it
//! never panics). Cases file their items under a fresh root label, so they may share one store (and one
//! database) and run concurrently. The cases in [`INDEXED_CASES`] need a store built with
//! [`index_config`] (a small deterministic embedding model, [`WordEmbeddings`]); the others, a store
//! without a vector index.
//!
//! A backend's tests build stores with a factory, a closure from `Option<IndexConfig>` to a future of
//! the store, and get one `#[tokio::test]` per case (the crate needs tokio with `macros` and `rt` as a
//! dev-dependency):
//!
//! ```
//! use weft_graph::store::{IndexConfig, InMemoryStore};
//!
//! // A backend writes e.g. `|index| async move { MyStore::connect(URL, index).await.unwrap() }`.
//! weft_graph::store_conformance_tests!(|index: Option<IndexConfig>| async move {
//!     InMemoryStore::new().with_index(index)
//! });
//! ```
//!
//! Or all at once: [`run_all`] returns the failures. The TTL case sleeps about five seconds.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::store::{IndexConfig, Store};

mod basic;
mod kit;
mod namespaces;
mod plain_query;
mod search;
mod ttl;
mod vector;

pub use basic::{
    concurrent_puts_all_land, delete_removes_item, get_missing_returns_none, namespace_rules_are_enforced,
    odd_labels_and_keys, put_replaces_and_keeps_created_at, put_then_get, values_must_be_objects,
    values_round_trip,
};
pub use kit::WordEmbeddings;
pub use namespaces::{
    emptied_namespaces_are_not_listed, list_namespaces_by_prefix_and_suffix, list_namespaces_depth_and_paging,
};
pub use plain_query::query_without_index_is_ignored;
pub use search::{
    filter_by_equality, filter_by_operators, search_by_namespace_prefix, search_limit_and_offset,
    search_orders_by_last_update, unknown_filter_operator_is_rejected,
};
pub use ttl::{sweep_ttl_deletes_expired_items, ttl_expires_items_and_reads_refresh_them};
pub use vector::{vector_index_field_choices, vector_search_ranks_by_similarity};

/// The vector index the indexed cases expect: [`WordEmbeddings`] of 128 dimensions over the `text`
/// field.
pub fn index_config() -> IndexConfig {
    IndexConfig::new(128, Arc::new(WordEmbeddings { dims: 128 })).with_fields(["text"])
}

/// Builds a store with `factory` (used by [`store_conformance_tests!`](crate::store_conformance_tests);
/// taking the closure here lets its argument type be inferred).
pub async fn build<F, Fut, S>(factory: F, index: Option<IndexConfig>) -> S
where
    F: FnOnce(Option<IndexConfig>) -> Fut,
    Fut: Future<Output = S>,
{
    factory(index).await
}

/// A case's function.
pub type StoreCaseFn = for<'a> fn(&'a dyn Store) -> BoxFuture<'a, Result<(), String>>;

/// One named case.
#[derive(Debug, Clone, Copy)]
pub struct StoreCase {
    /// The case's name (its function's name).
    pub name: &'static str,
    /// Runs it.
    pub run: StoreCaseFn,
}

/// Calls `$callback! { { $args } [plain cases] [indexed cases] }`: the one list that [`CASES`],
/// [`INDEXED_CASES`] and [`store_conformance_tests!`](crate::store_conformance_tests) read.
#[doc(hidden)]
#[macro_export]
macro_rules! __weft_store_cases {
    ($callback:ident ! { $($args:tt)* }) => {
        $crate::$callback! {
            { $($args)* }
            [
                put_then_get, put_replaces_and_keeps_created_at, get_missing_returns_none, delete_removes_item,
                namespace_rules_are_enforced, values_must_be_objects, odd_labels_and_keys, values_round_trip,
                concurrent_puts_all_land, search_by_namespace_prefix, search_orders_by_last_update,
                search_limit_and_offset, filter_by_equality, filter_by_operators,
                unknown_filter_operator_is_rejected, query_without_index_is_ignored,
                list_namespaces_by_prefix_and_suffix, list_namespaces_depth_and_paging,
                emptied_namespaces_are_not_listed, ttl_expires_items_and_reads_refresh_them,
                sweep_ttl_deletes_expired_items
            ]
            [ vector_search_ranks_by_similarity, vector_index_field_choices ]
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __weft_store_case_table {
    ({} [$($plain:ident),* $(,)?] [$($indexed:ident),* $(,)?]) => {
        /// The cases for a store without a vector index, in a stable order.
        pub const CASES: &[StoreCase] = &[
            $( StoreCase { name: stringify!($plain), run: |store| Box::pin($plain(store)) } ),*
        ];
        /// The cases for a store built with [`index_config`].
        pub const INDEXED_CASES: &[StoreCase] = &[
            $( StoreCase { name: stringify!($indexed), run: |store| Box::pin($indexed(store)) } ),*
        ];
    };
}

__weft_store_cases!(__weft_store_case_table! {});

/// Runs every case (plain ones on `factory(None)`, indexed ones on `factory(Some(index_config()))`,
/// one store each, cases one after another); returns `"case: rule"` for each failure.
pub async fn run_all<F, Fut, S>(factory: F) -> Vec<String>
where
    F: Fn(Option<IndexConfig>) -> Fut,
    Fut: Future<Output = S>,
    S: Store,
{
    let mut failures = Vec::new();
    for (cases, index) in [(CASES, None), (INDEXED_CASES, Some(index_config()))] {
        let store = factory(index).await;
        for case in cases {
            if let Err(rule) = (case.run)(&store).await {
                failures.push(format!("{}: {rule}", case.name));
            }
        }
    }
    failures
}

/// Expands to a module `store_conformance` with one `#[tokio::test]` per store conformance case, each on
/// a store from `$factory` (a closure from `Option<IndexConfig>` to a future of the store).
#[macro_export]
macro_rules! store_conformance_tests {
    ($factory:expr) => {
        #[allow(missing_docs)]
        mod store_conformance {
            #[allow(unused_imports)]
            use super::*;
            $crate::__weft_store_cases!(__weft_store_test_fns! { $factory });
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __weft_store_test_fns {
    ({ $factory:expr } [$($plain:ident),* $(,)?] [$($indexed:ident),* $(,)?]) => {
        $(
            #[::tokio::test]
            async fn $plain() -> ::std::result::Result<(), ::std::string::String> {
                let store = $crate::store::conformance::build($factory, None).await;
                $crate::store::conformance::$plain(&store).await
            }
        )*
        $(
            #[::tokio::test]
            async fn $indexed() -> ::std::result::Result<(), ::std::string::String> {
                let index = $crate::store::conformance::index_config();
                let store = $crate::store::conformance::build($factory, Some(index)).await;
                $crate::store::conformance::$indexed(&store).await
            }
        )*
    };
}
