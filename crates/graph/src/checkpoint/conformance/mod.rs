//! The cases every [`Checkpointer`] must pass, public so that backends in other crates run the same
//! ones.
//!
//! Each case is an async function taking `&dyn Checkpointer` and returning `Err` with the rule that broke
//! (it never panics). Cases make their own fresh thread ids, so they may share one saver (and one
//! database) and run concurrently; `list(None)` cases only look at their own threads.
//!
//! In a backend's tests (say `tests/conformance.rs`; the crate needs tokio with `macros` and `rt` as a
//! dev-dependency), one `#[tokio::test]` per case:
//!
//! ```
//! // A backend writes e.g. `checkpointer_conformance_tests!(MySaver::connect(URL).await.unwrap());`
//! weft_graph::checkpointer_conformance_tests!(weft_graph::checkpoint::InMemorySaver::new());
//! ```
//!
//! The expression is evaluated inside each async test (so it may `.await`) and must give a value whose
//! type implements [`Checkpointer`]. Or all at once: [`run_all`] returns the failures.

use futures::future::BoxFuture;

use crate::checkpoint::Checkpointer;

mod basic;
mod batch;
mod heads;
mod kit;
mod listing;
mod odd;
mod threads;
mod writes;

pub use basic::{
    appended_values_rebuilt, empty_channel_has_no_value, get_by_id, get_missing_returns_none,
    metadata_round_trips, missing_value_is_corrupt, parent_config_points_to_parent, put_then_get_latest,
    scalar_values_round_trip, values_rebuilt_from_versions,
};
pub use batch::{batch_matches_one_by_one, batch_with_invalid_op_fails};
pub use heads::{
    batch_checks_expected_heads, concurrent_puts_one_head_one_wins, expected_head_per_namespace,
    put_checks_expected_head, repeated_put_is_not_a_conflict,
};
pub use listing::{
    list_all_threads, list_before_and_limit, list_filters_on_metadata, list_ids_newest_first,
    list_newest_first, list_with_checkpoint_id, namespaces_kept_apart, threads_kept_apart,
};
pub use odd::{concurrent_threads_do_not_interfere, long_thread_id, odd_characters_in_ids};
pub use threads::{
    copy_thread_copies_everything, copy_thread_keeps_threads_independent, copy_thread_rejects_bad_threads,
    delete_thread_removes_everything, prune_keeps_appended_values_whole, prune_keeps_latest_per_namespace,
    prune_keeps_values_still_referenced, retention_policy_prunes_old_checkpoints,
};
pub use writes::{
    pending_writes_ordered, put_writes_without_checkpoint_id_is_invalid, regular_writes_insert_if_absent,
    special_writes_replace, write_values_round_trip, writes_belong_to_their_checkpoint,
};

/// A case's function.
pub type CaseFn = for<'a> fn(&'a dyn Checkpointer) -> BoxFuture<'a, Result<(), String>>;

/// One named case.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// The case's name (its function's name).
    pub name: &'static str,
    /// Runs it.
    pub run: CaseFn,
}

/// Calls `$callback! { { $args } case, case, ... }` with every case's name: the one list that both
/// [`CASES`] and [`checkpointer_conformance_tests!`](crate::checkpointer_conformance_tests) read.
#[doc(hidden)]
#[macro_export]
macro_rules! __weft_checkpoint_cases {
    ($callback:ident ! { $($args:tt)* }) => {
        $crate::$callback! {
            { $($args)* }
            put_then_get_latest, get_by_id, get_missing_returns_none, parent_config_points_to_parent,
            values_rebuilt_from_versions, scalar_values_round_trip, empty_channel_has_no_value,
            missing_value_is_corrupt,
            metadata_round_trips, list_newest_first, list_filters_on_metadata, list_before_and_limit,
            list_with_checkpoint_id, list_all_threads, list_ids_newest_first, namespaces_kept_apart,
            threads_kept_apart, regular_writes_insert_if_absent, special_writes_replace, pending_writes_ordered,
            writes_belong_to_their_checkpoint, put_writes_without_checkpoint_id_is_invalid,
            write_values_round_trip, delete_thread_removes_everything, copy_thread_copies_everything,
            copy_thread_keeps_threads_independent, copy_thread_rejects_bad_threads,
            prune_keeps_latest_per_namespace, prune_keeps_values_still_referenced,
            prune_keeps_appended_values_whole, retention_policy_prunes_old_checkpoints, long_thread_id,
            odd_characters_in_ids, concurrent_threads_do_not_interfere, appended_values_rebuilt,
            batch_matches_one_by_one, batch_with_invalid_op_fails, put_checks_expected_head, expected_head_per_namespace,
            batch_checks_expected_heads, concurrent_puts_one_head_one_wins, repeated_put_is_not_a_conflict
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __weft_checkpoint_case_table {
    ({} $($case:ident),* $(,)?) => {
        /// Every case, in a stable order.
        pub const CASES: &[Case] = &[
            $( Case { name: stringify!($case), run: |saver| Box::pin($case(saver)) } ),*
        ];
    };
}

__weft_checkpoint_cases!(__weft_checkpoint_case_table! {});

/// Runs every case against `saver`, one after another; returns `"case: rule"` for each failure.
pub async fn run_all(saver: &dyn Checkpointer) -> Vec<String> {
    let mut failures = Vec::new();
    for case in CASES {
        if let Err(rule) = (case.run)(saver).await {
            failures.push(format!("{}: {rule}", case.name));
        }
    }
    failures
}

/// Expands to a module `checkpointer_conformance` with one `#[tokio::test]` per conformance case, each
/// running it against the saver `$saver` evaluates to (inside the async test, so it may `.await`).
#[macro_export]
macro_rules! checkpointer_conformance_tests {
    ($saver:expr) => {
        #[allow(missing_docs)]
        mod checkpointer_conformance {
            #[allow(unused_imports)]
            use super::*;
            $crate::__weft_checkpoint_cases!(__weft_checkpoint_test_fns! { $saver });
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __weft_checkpoint_test_fns {
    ({ $saver:expr } $($case:ident),* $(,)?) => {
        $(
            #[::tokio::test]
            async fn $case() -> ::std::result::Result<(), ::std::string::String> {
                let saver = $saver;
                $crate::checkpoint::conformance::$case(&saver).await
            }
        )*
    };
}
