//! Where a rolled-back run found its thread, from the checkpoints it saved.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use weft_graph::checkpoint::{
    CHECKPOINT_VERSION, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource, Checkpointer,
    InMemorySaver,
};

use super::{Before, started_from};

/// Saves one checkpoint after `parent`, by `run_id` when one is given (another writer's otherwise).
async fn save(
    saver: &InMemorySaver,
    parent: &CheckpointConfig,
    id: &str,
    run_id: Option<&str>,
) -> CheckpointConfig {
    let checkpoint = Checkpoint {
        v: CHECKPOINT_VERSION,
        id: id.to_owned(),
        ts: "2026-11-27T00:00:00+00:00".to_owned(),
        channel_values: Default::default(),
        channel_versions: Default::default(),
        versions_seen: Default::default(),
        updated_channels: Vec::new(),
    };
    let mut extra = Map::new();
    if let Some(run_id) = run_id {
        extra.insert("run_id".into(), Value::String(run_id.to_owned()));
    }
    let metadata = CheckpointMetadata {
        source: CheckpointSource::Loop,
        step: 0,
        parents: BTreeMap::new(),
        extra: extra.into(),
    };
    saver.put(parent, checkpoint, metadata, Default::default()).await.unwrap()
}

#[tokio::test]
async fn the_rollback_point_is_the_parent_of_the_runs_first_checkpoint_past_other_writers() {
    let saver = InMemorySaver::new();
    let thread = CheckpointConfig::thread("t");
    let before = save(&saver, &thread, "01", Some("earlier-run")).await;
    let first = save(&saver, &before, "02", Some("run")).await;
    // Another writer saves between the run's checkpoints: the run's first one still says where it began.
    let other = save(&saver, &first, "03", None).await;
    save(&saver, &other, "04", Some("run")).await;
    assert_eq!(started_from(&saver, "t", "run").await.unwrap(), Before::At("01".into()));
    assert_eq!(started_from(&saver, "t", "earlier-run").await.unwrap(), Before::Empty);
    assert_eq!(started_from(&saver, "t", "never-ran").await.unwrap(), Before::Untouched);
    assert_eq!(started_from(&saver, "elsewhere", "run").await.unwrap(), Before::Untouched, "another thread");
}

/// A failed run's error event names what the failed node raised, with the node's own message, through
/// subgraphs (as LangGraph's server reports the exception), and the run's own errors as they are.
#[test]
fn a_failed_runs_error_event_carries_the_nodes_own_error() {
    use weft_graph::{GraphError, NodeRef};
    use weft_runnable_core::Error;
    let inner = GraphError::Node {
        node: NodeRef::new("inner", "explode"),
        step: 2,
        source: Error::InvalidInput("boom".into()),
    };
    let outer = GraphError::Node { node: NodeRef::new("outer", "sub"), step: 1, source: Error::from(inner) };
    let event = super::error_json(&outer);
    assert_eq!(event["error"], "ValueError", "{event}");
    assert_eq!(event["message"], "boom", "{event}");
    let custom =
        GraphError::Node { node: NodeRef::new("g", "n"), step: 0, source: Error::msg("quota spent") };
    assert_eq!(
        super::error_json(&custom),
        serde_json::json!({"error": "NodeError", "message": "quota spent"})
    );
    let returned =
        GraphError::InvalidNodeReturn { node: NodeRef::new("g", "n"), step: 0, got: "hello".into() };
    assert_eq!(super::error_json(&returned)["error"], "InvalidUpdateError");
    let limit = super::error_json(&GraphError::EmptyInput);
    assert_eq!(limit["error"], "EmptyInputError");
    assert_eq!(limit["message"], GraphError::EmptyInput.to_string());
}
