//! Append deltas: a list channel that a step only appended to is checkpointed as its new items, and every
//! checkpoint still reads back exactly as if whole values had been saved (runs, replacements, removals,
//! remove-all, overwrites, update_state forks, time travel, pruning).
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_graph::checkpoint::{
    ChannelAppends, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointError, CheckpointMetadata,
    Checkpointer, InMemorySaver, Intercept, Intercepted, ListOptions, RetentionPolicy, SaveOp,
};
use weft_graph::messages::Messages;
use weft_graph::{CompileConfig, CompiledGraph, END, GraphInput, START, State, StateGraph};
use weft_runnable_core::{Message, REMOVE_ALL_MESSAGES, RunnableConfig};

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Chat {
    #[state(add_messages)]
    messages: Messages,
    #[state(append)]
    log: Vec<i64>,
    turn: i64,
}

/// Wraps an `InMemorySaver`, takes deltas or not, and records how list channels arrive.
#[derive(Debug)]
struct Recording {
    deltas: bool,
    /// Per put: the list channels given as deltas, and those given whole.
    puts: Mutex<Vec<(Vec<String>, Vec<String>)>>,
}

impl Recording {
    fn new(deltas: bool) -> Arc<Intercepted<Self>> {
        let recording = Self { deltas, puts: Mutex::new(Vec::new()) };
        Arc::new(Intercepted::new(Arc::new(InMemorySaver::new()), recording))
    }

    fn record(&self, checkpoint: &Checkpoint, appends: &ChannelAppends) {
        assert!(self.deltas || appends.is_empty(), "deltas sent to a saver that does not take them");
        let lists = ["messages", "log"];
        let whole =
            lists.iter().filter(|c| checkpoint.channel_values.contains_key(**c)).map(|c| c.to_string());
        self.puts.lock().unwrap().push((appends.keys().map(|k| k.to_string()).collect(), whole.collect()));
    }

    fn record_op(&self, op: &SaveOp) {
        if let SaveOp::Put { checkpoint, appends, .. } = op {
            self.record(checkpoint, appends);
        }
    }

    fn deltas_of(&self, channel: &str) -> usize {
        self.puts.lock().unwrap().iter().filter(|(d, _)| d.iter().any(|c| c == channel)).count()
    }

    fn wholes_of(&self, channel: &str) -> usize {
        self.puts.lock().unwrap().iter().filter(|(_, w)| w.iter().any(|c| c == channel)).count()
    }
}

#[async_trait]
impl Intercept for Recording {
    async fn put(
        &self,
        inner: &dyn Checkpointer,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig, CheckpointError> {
        self.record(&checkpoint, &ChannelAppends::new());
        inner.put(config, checkpoint, metadata, new_versions).await
    }

    fn stores_appends(&self, _inner: &dyn Checkpointer) -> bool {
        self.deltas
    }

    async fn put_with_appends(
        &self,
        inner: &dyn Checkpointer,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        appends: ChannelAppends,
    ) -> Result<CheckpointConfig, CheckpointError> {
        self.record(&checkpoint, &appends);
        inner.put_with_appends(config, checkpoint, metadata, new_versions, appends).await
    }

    fn save_now(&self, inner: &dyn Checkpointer, op: SaveOp) -> Result<Option<SaveOp>, CheckpointError> {
        // An op handed back comes again through `put_batch`, and is recorded there.
        let saved = inner.save_now(op.clone())?;
        if saved.is_none() {
            self.record_op(&op);
        }
        Ok(saved)
    }

    async fn put_batch(&self, inner: &dyn Checkpointer, ops: Vec<SaveOp>) -> Result<(), CheckpointError> {
        ops.iter().for_each(|op| self.record_op(op));
        inner.put_batch(ops).await
    }
}

fn id_of(m: &Message) -> String {
    m.id().unwrap().to_owned()
}

/// One turn: mostly appends, with a replacement by id, removals, a remove-all and an overwrite of the
/// log at fixed turns. Ids are fixed, so two runs of the same turns store the same values.
fn talk(s: &Chat) -> ChatUpdate {
    let t = s.turn;
    let new = |text: String| Message::ai(text).with_id(format!("id-{t}"));
    let messages = match t {
        20 => vec![Message::remove(REMOVE_ALL_MESSAGES), Message::ai("fresh").with_id("fresh")],
        t if t % 5 == 3 && !s.messages.is_empty() => {
            vec![Message::ai(format!("edited at {t}")).with_id(id_of(&s.messages[0]))]
        }
        t if t % 7 == 6 && s.messages.len() > 1 => {
            vec![Message::remove(id_of(&s.messages[1])), new(format!("m{t}"))]
        }
        // Several at once, one of them replaced in the same write.
        9 => vec![new("a".into()), Message::ai("b").with_id("nine-b"), Message::ai("b2").with_id("nine-b")],
        _ => vec![new(format!("m{t}"))],
    };
    let update = ChatUpdate::new().messages(messages).turn(t + 1);
    if t == 12 { update.overwrite_log(vec![-1]) } else { update.log(vec![t]) }
}

fn graph(saver: Arc<Intercepted<Recording>>, retention: Option<RetentionPolicy>) -> CompiledGraph<Chat> {
    let mut g = StateGraph::<Chat>::new();
    g.add_node("talk", |s: &Chat| talk(s));
    g.add_edge(START, "talk");
    g.add_conditional_edges(
        "talk",
        |s: &Chat| if s.turn < 30 { "talk" } else { END },
        [("talk", "talk"), (END, END)],
    );
    let mut config = CompileConfig::new().checkpointer(saver);
    if let Some(policy) = retention {
        config = config.retention(policy);
    }
    g.compile_with(config).unwrap()
}

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id).with_recursion_limit(100)
}

fn input() -> ChatUpdate {
    ChatUpdate::new().messages(vec![Message::human("hi").with_id("hi")]).log(vec![100])
}

/// Every checkpoint of the thread, oldest first, as (step, source, values, pending writes).
async fn history(
    saver: &dyn Checkpointer,
    thread_id: &str,
) -> Vec<(i64, Value, Value, Vec<(String, Value)>)> {
    let mut tuples =
        saver.list(Some(&CheckpointConfig::thread(thread_id)), ListOptions::default()).await.unwrap();
    tuples.reverse();
    tuples
        .into_iter()
        .map(|t| {
            let writes = t.pending_writes.into_iter().map(|w| (w.channel, w.value)).collect();
            let source = serde_json::to_value(t.metadata.source).unwrap();
            (t.metadata.step, source, serde_json::to_value(t.checkpoint.channel_values).unwrap(), writes)
        })
        .collect()
}

/// Each checkpoint read one by one (`get_tuple` by id) equals the same checkpoint from `list`.
async fn each_checkpoint_reads_alike(saver: &dyn Checkpointer, thread_id: &str) {
    let tuples =
        saver.list(Some(&CheckpointConfig::thread(thread_id)), ListOptions::default()).await.unwrap();
    for t in tuples {
        let one = saver.get_tuple(&t.config).await.unwrap().unwrap();
        assert_eq!(one, t);
    }
}

/// Runs the same operations on a saver that takes deltas and on one that does not.
async fn both<F, Fut>(ops: F) -> (Arc<Intercepted<Recording>>, Arc<Intercepted<Recording>>)
where
    F: Fn(CompiledGraph<Chat>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let (deltas, whole) = (Recording::new(true), Recording::new(false));
    ops(graph(Arc::clone(&deltas), None)).await;
    ops(graph(Arc::clone(&whole), None)).await;
    (deltas, whole)
}

#[tokio::test]
async fn every_checkpoint_of_a_run_reads_back_exactly() {
    let (deltas, whole) = both(|app| async move {
        let out = app.invoke(input(), &thread("t")).await.unwrap();
        assert_eq!(out.value.turn, 30);
    })
    .await;
    let expected = history(whole.as_ref(), "t").await;
    assert_eq!(expected.len(), 32);
    assert_eq!(history(deltas.as_ref(), "t").await, expected);
    each_checkpoint_reads_alike(deltas.as_ref(), "t").await;

    // Appends went as deltas; replacements, removals, the remove-all and the overwrite went whole.
    assert!(deltas.intercept().deltas_of("messages") >= 15, "{:?}", deltas.intercept().puts.lock().unwrap());
    assert!(deltas.intercept().wholes_of("messages") >= 8, "{:?}", deltas.intercept().puts.lock().unwrap());
    assert!(deltas.intercept().deltas_of("log") >= 25);
    assert_eq!(whole.intercept().deltas_of("messages"), 0);

    // The final state is the one the whole-value run has.
    let last = expected.last().unwrap().2.clone();
    assert_eq!(last["turn"], 30);
    assert_eq!(last["log"][0], -1, "the overwrite at turn 12 restarts the log");
    assert_eq!(last["messages"][0]["id"], "fresh", "the remove-all at turn 20 restarts the list");
}

#[tokio::test]
async fn update_state_forks_and_time_travel_read_back_exactly() {
    let (deltas, whole) = both(|app| async move {
        app.invoke(input(), &thread("t")).await.unwrap();
        let history = app.get_state_history(&thread("t"), ListOptions::default()).await.unwrap();
        // Fork an old checkpoint twice with update_state: an append, then a replacement by id.
        let old = history.iter().find(|s| s.values.turn == 8).unwrap();
        let at = |s: &weft_graph::StateSnapshot<Chat>| {
            let id = s.config.as_ref().unwrap().checkpoint_id.clone().unwrap();
            thread("t").with_configurable("checkpoint_id", id)
        };
        let append = ChatUpdate::new().messages(vec![Message::human("aside").with_id("aside")]);
        let forked = app.update_state(&at(old), vec![append], Some("talk")).await.unwrap();
        let first = old.values.messages[0].id().unwrap().to_owned();
        let replace = ChatUpdate::new().messages(vec![Message::human("again").with_id(first)]);
        let fork_config = thread("t").with_configurable("checkpoint_id", forked.checkpoint_id.unwrap());
        let forked = app.update_state(&fork_config, vec![replace], Some("talk")).await.unwrap();
        // Continue the fork to the end, then time-travel to a checkpoint in the middle of the first run.
        let fork_config = thread("t").with_configurable("checkpoint_id", forked.checkpoint_id.unwrap());
        let fork = app.get_state(&fork_config).await.unwrap().values;
        assert!(fork.messages.iter().any(|m| m.id() == Some("aside")));
        assert_eq!(fork.messages[0].text(), "again");
        let out = app.invoke(GraphInput::Resume, &fork_config).await.unwrap();
        assert_eq!(out.value.turn, 30);
        let middle = history.iter().find(|s| s.values.turn == 17).unwrap();
        let out = app.invoke(GraphInput::Resume, &at(middle)).await.unwrap();
        assert_eq!(out.value.turn, 30);
    })
    .await;
    let expected = history(whole.as_ref(), "t").await;
    assert!(expected.len() > 60, "{}", expected.len());
    assert!(expected.iter().any(|(_, source, ..)| source == "fork"));
    assert_eq!(history(deltas.as_ref(), "t").await, expected);
    each_checkpoint_reads_alike(deltas.as_ref(), "t").await;
    assert!(deltas.intercept().deltas_of("messages") > whole.intercept().deltas_of("messages"));
}

#[tokio::test]
async fn copied_and_pruned_threads_keep_exact_values() {
    let (deltas, whole) = both(|app| async move {
        app.invoke(input(), &thread("t")).await.unwrap();
    })
    .await;
    for saver in [&deltas, &whole] {
        saver.copy_thread("t", "copy").await.unwrap();
        saver.prune("t", 3).await.unwrap();
    }
    assert_eq!(history(deltas.as_ref(), "copy").await, history(whole.as_ref(), "copy").await);
    let kept = history(deltas.as_ref(), "t").await;
    assert_eq!(kept.len(), 3);
    assert_eq!(kept, history(whole.as_ref(), "t").await);
    each_checkpoint_reads_alike(deltas.as_ref(), "t").await;

    // A thread pruned while it runs (retention) keeps the versions its lists extend.
    let saver = Recording::new(true);
    let app = graph(Arc::clone(&saver), Some(RetentionPolicy::keep_last(2)));
    app.invoke(input(), &thread("r")).await.unwrap();
    let out = app.invoke(ChatUpdate::new().turn(25), &thread("r")).await.unwrap();
    assert_eq!(out.value.turn, 30);
    let state = app.get_state(&thread("r")).await.unwrap();
    assert_eq!(state.values, out.value);
    assert_eq!(history(saver.as_ref(), "r").await.len(), 2);
}

#[tokio::test]
async fn a_delta_with_an_unknown_base_is_rejected_and_stores_nothing() {
    let saver = InMemorySaver::new();
    let config = CheckpointConfig::thread("x");
    let mut checkpoint = Checkpoint {
        v: 1,
        id: "00000000-0000-7000-8000-000000000001".into(),
        ts: String::new(),
        channel_values: Default::default(),
        channel_versions: ChannelVersions::from([("m".into(), "2.0".into())]),
        versions_seen: Default::default(),
        updated_channels: Vec::new(),
    };
    let metadata: CheckpointMetadata =
        serde_json::from_value(serde_json::json!({"source": "loop", "step": 0})).unwrap();
    let delta =
        weft_graph::checkpoint::AppendDelta { base_version: "1.0".into(), items: vec![Value::from(1)] };
    let appends = ChannelAppends::from([("m".into(), delta)]);
    let versions = checkpoint.channel_versions.clone();
    let err = saver
        .put_with_appends(&config, checkpoint.clone(), metadata.clone(), versions.clone(), appends.clone())
        .await
        .unwrap_err();
    assert!(matches!(err, CheckpointError::Invalid(_)), "{err}");
    assert!(err.to_string().contains("'m'"), "{err}");
    assert_eq!(saver.stored_value_count(), 0);
    assert!(saver.get_tuple(&config).await.unwrap().is_none());

    // With the base stored, the same delta is accepted and read back whole.
    checkpoint.id = "00000000-0000-7000-8000-000000000000".into();
    checkpoint.channel_values.insert("m".into(), serde_json::json!([0]));
    checkpoint.channel_versions.insert("m".into(), "1.0".into());
    let first = ChannelVersions::from([("m".into(), "1.0".into())]);
    let parent = saver.put(&config, checkpoint.clone(), metadata.clone(), first).await.unwrap();
    checkpoint.id = "00000000-0000-7000-8000-000000000001".into();
    checkpoint.channel_values.clear();
    checkpoint.channel_versions.insert("m".into(), "2.0".into());
    saver.put_with_appends(&parent, checkpoint, metadata, versions, appends).await.unwrap();
    let latest = saver.get_tuple(&config).await.unwrap().unwrap();
    assert_eq!(latest.checkpoint.channel_values["m"], serde_json::json!([0, 1]));
}

/// On a multi-thread runtime every `async` save goes through the background writer; they still arrive in
/// order (a delta before its base would be rejected) and read back exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_async_saves_keep_their_order() {
    let (deltas, whole) = both(|app| async move {
        let options =
            weft_graph::RunOptions { durability: weft_graph::Durability::Async, ..Default::default() };
        let out = app.invoke_with(input(), &thread("t"), options).await.unwrap();
        assert_eq!(out.value.turn, 30);
    })
    .await;
    let expected = history(whole.as_ref(), "t").await;
    assert_eq!(expected.len(), 32);
    assert_eq!(history(deltas.as_ref(), "t").await, expected);
    assert!(deltas.intercept().deltas_of("messages") >= 15);
}
