#![allow(clippy::unwrap_used, missing_docs)]
//! The checkpointer and store conformance suites on PostgreSQL, each test in a schema of its own.
//! Without a reachable server these tests skip loudly (and fail in CI): see `common`.

#![cfg(feature = "postgres")]

mod common;

weft_graph::checkpointer_conformance_tests!(match common::saver().await {
    Some(saver) => saver,
    None => return Ok(()),
});

/// The suite again as behind a transaction-mode pooler: no server-side prepared statements.
mod without_prepared_statements {
    use super::common;

    weft_graph::checkpointer_conformance_tests!(
        match common::saver_with(|o| o.without_prepared_statements()).await {
            Some(saver) => saver,
            None => return Ok(()),
        }
    );
}

/// One test per store case, on a store from [`common::store`]. The list must name every case of the
/// suite: `store_case_list_is_complete` checks it against the suite's own tables.
macro_rules! store_cases {
    ([$($plain:ident),* $(,)?] [$($indexed:ident),* $(,)?]) => {
        mod store_conformance {
            use weft_graph::store::conformance;

            $(
                #[tokio::test]
                async fn $plain() -> Result<(), String> {
                    let Some(store) = super::common::store(None).await else { return Ok(()) };
                    conformance::$plain(&store).await
                }
            )*
            $(
                #[tokio::test]
                async fn $indexed() -> Result<(), String> {
                    let index = Some(conformance::index_config());
                    let Some(store) = super::common::store(index).await else { return Ok(()) };
                    conformance::$indexed(&store).await
                }
            )*

            #[test]
            fn store_case_list_is_complete() {
                let mut ours = vec![$(stringify!($plain)),*];
                let mut suite: Vec<&str> = conformance::CASES.iter().map(|c| c.name).collect();
                ours.sort_unstable();
                suite.sort_unstable();
                assert_eq!(ours, suite, "the plain store cases listed here differ from the suite's");
                let mut ours = vec![$(stringify!($indexed)),*];
                let mut suite: Vec<&str> = conformance::INDEXED_CASES.iter().map(|c| c.name).collect();
                ours.sort_unstable();
                suite.sort_unstable();
                assert_eq!(ours, suite, "the indexed store cases listed here differ from the suite's");
            }
        }
    };
}

store_cases! {
    [
        put_then_get, put_replaces_and_keeps_created_at, get_missing_returns_none, delete_removes_item,
        namespace_rules_are_enforced, values_must_be_objects, odd_labels_and_keys, values_round_trip,
        concurrent_puts_all_land, search_by_namespace_prefix, search_orders_by_last_update,
        search_limit_and_offset, filter_by_equality, filter_by_operators, unknown_filter_operator_is_rejected,
        query_without_index_is_ignored, list_namespaces_by_prefix_and_suffix, list_namespaces_depth_and_paging,
        emptied_namespaces_are_not_listed, ttl_expires_items_and_reads_refresh_them,
        sweep_ttl_deletes_expired_items
    ]
    [vector_search_ranks_by_similarity, vector_index_field_choices]
}
