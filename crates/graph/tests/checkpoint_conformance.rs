//! The checkpointer conformance suite against `InMemorySaver`, and checks that the suite catches faults.
#![allow(clippy::unwrap_used, missing_docs)]

use async_trait::async_trait;
use serde_json::Value;
use weft_graph::checkpoint::conformance::{self, CASES};
use weft_graph::checkpoint::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointError, CheckpointMetadata, CheckpointTuple,
    Checkpointer, InMemorySaver, ListOptions,
};

weft_graph::checkpointer_conformance_tests!(InMemorySaver::new());

#[tokio::test]
async fn run_all_passes_on_one_shared_in_memory_saver() {
    let saver = InMemorySaver::new();
    let failures = conformance::run_all(&saver).await;
    assert!(failures.is_empty(), "{failures:#?}");
}

#[tokio::test]
async fn cases_have_unique_names() {
    let mut names: Vec<_> = CASES.iter().map(|c| c.name).collect();
    let count = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), count);
    assert!(count >= 30, "{count}");
}

/// A saver with one deliberate fault, to show the suite notices it.
#[derive(Debug, Default)]
struct Faulty {
    inner: InMemorySaver,
    fault: Fault,
}

#[derive(Debug, Default, Clone, Copy, PartialEq)]
enum Fault {
    #[default]
    None,
    IgnoreBefore,
    ReverseWrites,
    SpecialWritesInsertOnly,
    KeepEverythingOnPrune,
}

#[async_trait]
impl Checkpointer for Faulty {
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>, CheckpointError> {
        let mut tuple = self.inner.get_tuple(config).await?;
        if let (Fault::ReverseWrites, Some(t)) = (self.fault, tuple.as_mut()) {
            t.pending_writes.reverse();
        }
        Ok(tuple)
    }

    async fn list(
        &self,
        config: Option<&CheckpointConfig>,
        mut options: ListOptions,
    ) -> Result<Vec<CheckpointTuple>, CheckpointError> {
        if self.fault == Fault::IgnoreBefore {
            options.before = None;
        }
        self.inner.list(config, options).await
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig, CheckpointError> {
        self.inner.put(config, checkpoint, metadata, new_versions).await
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<(), CheckpointError> {
        if self.fault == Fault::SpecialWritesInsertOnly {
            let existing = self.inner.get_tuple(config).await?.map(|t| t.pending_writes).unwrap_or_default();
            let fresh = writes
                .into_iter()
                .filter(|(c, _)| !existing.iter().any(|w| w.task_id == task_id && &w.channel == c))
                .collect();
            return self.inner.put_writes(config, fresh, task_id, task_path).await;
        }
        self.inner.put_writes(config, writes, task_id, task_path).await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<(), CheckpointError> {
        self.inner.delete_thread(thread_id).await
    }

    async fn copy_thread(&self, src: &str, dst: &str) -> Result<(), CheckpointError> {
        self.inner.copy_thread(src, dst).await
    }

    async fn prune(&self, thread_id: &str, keep_latest: usize) -> Result<(), CheckpointError> {
        if self.fault == Fault::KeepEverythingOnPrune {
            return Ok(());
        }
        self.inner.prune(thread_id, keep_latest).await
    }
}

async fn failures_with(fault: Fault) -> Vec<String> {
    conformance::run_all(&Faulty { inner: InMemorySaver::new(), fault }).await
}

#[tokio::test]
async fn default_list_ids_built_from_list_passes_the_suite() {
    let failures = failures_with(Fault::None).await;
    assert!(failures.is_empty(), "{failures:#?}");
}

#[tokio::test]
async fn suite_catches_a_saver_that_ignores_before() {
    let failures = failures_with(Fault::IgnoreBefore).await;
    assert!(failures.iter().any(|f| f.starts_with("list_before_and_limit: before")), "{failures:#?}");
}

#[tokio::test]
async fn suite_catches_writes_out_of_order() {
    let failures = failures_with(Fault::ReverseWrites).await;
    assert!(failures.iter().any(|f| f.starts_with("pending_writes_ordered:")), "{failures:#?}");
}

#[tokio::test]
async fn suite_catches_special_writes_that_are_not_replaced() {
    let failures = failures_with(Fault::SpecialWritesInsertOnly).await;
    assert!(failures.iter().any(|f| f.starts_with("special_writes_replace:")), "{failures:#?}");
}

#[tokio::test]
async fn suite_catches_a_prune_that_keeps_everything() {
    let failures = failures_with(Fault::KeepEverythingOnPrune).await;
    assert!(failures.iter().any(|f| f.starts_with("prune_keeps_latest_per_namespace:")), "{failures:#?}");
    assert!(
        failures.iter().any(|f| f.starts_with("retention_policy_prunes_old_checkpoints:")),
        "{failures:#?}"
    );
}
