//! Concurrent runs on one saver, shared by the backends' tests: many threads at once (isolation, no
//! deadlock) and two runs of one thread at once (exactly one fails with a conflict, the thread's
//! history stays one chain).

#![allow(dead_code, unreachable_pub, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use serde::{Deserialize, Serialize};
use weft_graph::checkpoint::{CheckpointConfig, CheckpointErrorKind, Checkpointer, ListOptions};
use weft_graph::{CompileConfig, CompiledGraph, END, START, State, StateGraph};
use weft_runnable_core::RunnableConfig;

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Count {
    n: i64,
    #[state(append)]
    seen: Vec<i64>,
}

/// `inc` adds one per superstep (after a short sleep, so that concurrent runs overlap) until `n`
/// reaches `limit`.
fn counting(saver: Arc<dyn Checkpointer>, limit: i64) -> CompiledGraph<Count> {
    let mut g = StateGraph::<Count>::new();
    g.add_node("inc", |s: Count| async move {
        tokio::time::sleep(Duration::from_millis(5)).await;
        CountUpdate::new().n(s.n + 1).seen(vec![s.n + 1])
    });
    g.add_edge(START, "inc");
    g.add_conditional_edges("inc", move |s: &Count| if s.n < limit { "inc" } else { END }, ["inc", END]);
    g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

/// Checks that the checkpoints of `thread_id` (root namespace) form one chain, newest first, each the
/// parent of the one after it; returns how many there are.
pub async fn single_chain(saver: &dyn Checkpointer, thread_id: &str) -> usize {
    let history =
        saver.list(Some(&CheckpointConfig::thread(thread_id)), ListOptions::default()).await.unwrap();
    for pair in history.windows(2) {
        let parent = pair[0].parent_config.as_ref().and_then(|p| p.checkpoint_id.as_deref());
        assert_eq!(
            parent,
            Some(pair[1].checkpoint.id.as_str()),
            "thread '{thread_id}': each checkpoint's parent is the one saved before it (one chain)"
        );
    }
    if let Some(first) = history.last() {
        assert!(
            first.parent_config.is_none(),
            "thread '{thread_id}': the chain starts at the thread's first"
        );
    }
    history.len()
}

/// `threads` runs of their own thread at once, each `steps` supersteps: all finish, each with its own
/// result, and each thread's history is one chain of its own checkpoints.
pub async fn many_threads_at_once(saver: Arc<dyn Checkpointer>, label: &str, threads: usize, steps: i64) {
    let app = counting(saver.clone(), steps);
    let ids: Vec<String> =
        (0..threads).map(|i| format!("{label}-{i}-{}", uuid::Uuid::new_v4().simple())).collect();
    let runs = ids.iter().map(|id| {
        let app = app.clone();
        async move {
            let config = thread(id);
            let run = app.invoke(CountUpdate::new().n(0), &config);
            tokio::time::timeout(Duration::from_secs(120), run).await
        }
    });
    let results = join_all(runs).await;
    for (id, result) in ids.iter().zip(results) {
        let out = result.unwrap_or_else(|_| panic!("thread '{id}' finished (no deadlock)")).unwrap();
        assert_eq!(out.value.n, steps, "thread '{id}' saw only its own updates");
        assert_eq!(out.value.seen, (1..=steps).collect::<Vec<_>>(), "thread '{id}'");
    }
    for id in &ids {
        // The input checkpoint, then one per superstep.
        let expected = usize::try_from(steps).unwrap_or(0) + 2;
        assert_eq!(
            single_chain(saver.as_ref(), id).await,
            expected,
            "thread '{id}' holds its own checkpoints"
        );
        saver.delete_thread(id).await.unwrap();
    }
}

/// Two runs of one thread started together: exactly one fails, with a conflict error reachable from the
/// graph error; the other finishes; the history is one chain. A run started after them continues the
/// thread.
pub async fn two_runs_of_one_thread(saver: Arc<dyn Checkpointer>, label: &str) {
    let app = counting(saver.clone(), 6);
    let id = format!("{label}-{}", uuid::Uuid::new_v4().simple());
    let config = thread(&id);
    let (a, b) = tokio::join!(
        app.invoke(CountUpdate::new().n(0), &config),
        app.invoke(CountUpdate::new().n(0), &config)
    );
    let (ok, failed) = match (a, b) {
        (Ok(ok), Err(e)) | (Err(e), Ok(ok)) => (ok, e),
        (Ok(_), Ok(_)) => panic!("both runs of one thread succeeded: their checkpoints interleaved"),
        (Err(a), Err(b)) => panic!("both runs failed: {a} / {b}"),
    };
    assert_eq!(ok.value.n, 6);
    assert_eq!(failed.checkpoint_error_kind(), Some(CheckpointErrorKind::Conflict), "{failed}");
    assert!(!failed.is_retryable());
    assert!(failed.to_string().contains(&id), "the conflict names the thread: {failed}");
    single_chain(saver.as_ref(), &id).await;
    // The thread goes on from its head.
    let state = app.get_state(&config).await.unwrap();
    assert_eq!(state.values.n, 6);
    saver.delete_thread(&id).await.unwrap();
}

/// Forks still work with the head checked: `update_state` on an older checkpoint and a run from an older
/// `checkpoint_id` (time travel) each save a new head whose parent is the older checkpoint.
pub async fn forks_make_new_heads(saver: Arc<dyn Checkpointer>, label: &str) {
    let app = counting(saver.clone(), 3);
    let id = format!("{label}-fork-{}", uuid::Uuid::new_v4().simple());
    let config = thread(&id);
    app.invoke(CountUpdate::new().n(0), &config).await.unwrap();
    let history = app.get_state_history(&config, ListOptions::default()).await.unwrap();
    // The checkpoint after the first superstep (n = 1).
    let old = history.iter().find(|s| s.values.n == 1).and_then(|s| s.config.clone()).unwrap();
    let old_id = old.checkpoint_id.clone().unwrap();
    let at_old = config.clone().with_configurable("checkpoint_id", old_id.as_str());
    let forked = app.update_state(&at_old, vec![CountUpdate::new().n(10)], Some("inc")).await.unwrap();
    let head = saver.get_tuple(&CheckpointConfig::thread(id.as_str())).await.unwrap().unwrap();
    assert_eq!(head.config, forked, "update_state on an older checkpoint makes the new head");
    assert_eq!(head.parent_config.and_then(|p| p.checkpoint_id), Some(old_id.clone()));
    // Time travel: run again from the older checkpoint.
    let out = app.invoke(CountUpdate::new(), &at_old).await.unwrap();
    assert_eq!(out.value.n, 3);
    let head = saver.get_tuple(&CheckpointConfig::thread(id.as_str())).await.unwrap().unwrap();
    assert_ne!(head.config, forked, "the replay saved a newer head");
    saver.delete_thread(&id).await.unwrap();
}

/// A batch of a run's chained saves stored again whole (PostgreSQL retries a batch whose commit reply
/// was lost): not a conflict, nothing stored twice.
pub async fn a_batch_stored_again_is_not_a_conflict(saver: &dyn Checkpointer) {
    use weft_graph::checkpoint::{
        ChannelAppends, Checkpoint, CheckpointMetadata, CheckpointSource, ExpectedHead, SaveOp,
    };
    let thread = CheckpointConfig::thread(format!("again-{}", uuid::Uuid::new_v4().simple()));
    let ids: Vec<String> = (0..3).map(|_| uuid::Uuid::now_v7().to_string()).collect();
    let put = |parent: Option<&String>, id: &String, head: ExpectedHead| {
        let versions: weft_graph::checkpoint::ChannelVersions =
            [("n".into(), id.as_str().into())].into_iter().collect();
        SaveOp::Put {
            config: Arc::new(CheckpointConfig { checkpoint_id: parent.cloned(), ..thread.clone() }),
            checkpoint: Checkpoint {
                v: 1,
                id: id.clone(),
                ts: "2025-01-01T00:00:00+00:00".to_owned(),
                channel_values: [("n".into(), serde_json::json!(id))].into_iter().collect(),
                channel_versions: versions.clone(),
                versions_seen: Default::default(),
                updated_channels: Vec::new(),
            },
            metadata: CheckpointMetadata {
                source: CheckpointSource::Loop,
                step: 0,
                parents: Default::default(),
                extra: Default::default(),
            },
            new_versions: versions,
            appends: ChannelAppends::new(),
            expected_head: head,
        }
    };
    let batch = || {
        vec![
            put(None, &ids[0], ExpectedHead::Empty),
            put(Some(&ids[0]), &ids[1], ExpectedHead::Id(ids[0].clone())),
            put(Some(&ids[1]), &ids[2], ExpectedHead::Id(ids[1].clone())),
        ]
    };
    saver.put_batch(batch()).await.unwrap();
    saver.put_batch(batch()).await.unwrap();
    assert_eq!(single_chain(saver, &thread.thread_id).await, 3);
    let stale = vec![put(Some(&ids[0]), &uuid::Uuid::now_v7().to_string(), ExpectedHead::Id(ids[0].clone()))];
    let err = saver.put_batch(stale).await.unwrap_err();
    assert_eq!(err.kind(), CheckpointErrorKind::Conflict, "{err:?}");
    saver.delete_thread(&thread.thread_id).await.unwrap();
}
