//! The checkpointer decides the next channel version (`Checkpointer::get_next_version`): a saver using
//! LangGraph's plain integer versions runs, pauses, resumes and takes state updates; a saver whose
//! versions do not grow fails the run with an error naming them; a saver failing there fails the run with
//! its error.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;
use weft_graph::checkpoint::{
    ChannelVersion, CheckpointConfig, CheckpointError, CheckpointErrorKind, Checkpointer, InMemorySaver,
    Intercept, Intercepted, ListOptions, version_counter,
};
use weft_graph::{Command, CompileConfig, CompiledGraph, START, State, StateGraph};
use weft_runnable_core::RunnableConfig;

/// Gives an in-memory saver its own versions: plain integers (LangGraph's base form), or always `"1"`.
#[derive(Debug)]
struct Versions {
    stuck: bool,
}

impl Intercept for Versions {
    fn get_next_version(
        &self,
        _inner: &dyn Checkpointer,
        current: Option<&str>,
    ) -> Result<ChannelVersion, CheckpointError> {
        if self.stuck {
            return Ok("1".into());
        }
        Ok((current.and_then(version_counter).unwrap_or(0) + 1).to_string().into())
    }
}

/// A saver whose versions ran out: `get_next_version` fails.
#[derive(Debug)]
struct NoVersions;

impl Intercept for NoVersions {
    fn get_next_version(
        &self,
        _: &dyn Checkpointer,
        _: Option<&str>,
    ) -> Result<ChannelVersion, CheckpointError> {
        Err(CheckpointError::unavailable("version counter offline"))
    }
}

#[tokio::test]
async fn a_saver_failing_to_give_a_version_fails_the_run_with_its_error() {
    let inner: Arc<dyn Checkpointer> = Arc::new(InMemorySaver::new());
    let saver = Arc::new(Intercepted::new(inner, NoVersions));
    let err = app(saver.clone()).invoke(Doc::update(), &thread("t")).await.unwrap_err();
    assert_eq!(err.checkpoint_error_kind(), Some(CheckpointErrorKind::Unavailable), "{err}");
    assert!(err.to_string().contains("version counter offline"), "{err}");
    assert!(saver.get_tuple(&CheckpointConfig::thread("t")).await.unwrap().is_none(), "nothing saved");
}

/// An in-memory saver with the versions `Versions { stuck }` gives.
fn versioned(stuck: bool) -> Arc<Intercepted<Versions>> {
    Arc::new(Intercepted::new(Arc::new(InMemorySaver::new()), Versions { stuck }))
}

#[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
struct Doc {
    #[state(append)]
    log: Vec<String>,
}

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

fn app(saver: Arc<dyn Checkpointer>) -> CompiledGraph<Doc> {
    let mut g = StateGraph::<Doc>::new();
    g.add_node("a", |_: Doc| DocUpdate::new().log(vec!["a".to_owned()]));
    g.add_node("ask", |_: Doc, rt: &weft_graph::Runtime| -> weft_runnable_core::Result<DocUpdate> {
        let answer: String = rt.interrupt("go on?")?;
        Ok(DocUpdate::new().log(vec![answer]))
    });
    g.add_edge(START, "a");
    g.add_edge("a", "ask");
    g.compile_with(CompileConfig::new().checkpointer(saver)).unwrap()
}

async fn latest_versions(saver: &Intercepted<Versions>, thread_id: &str) -> Vec<(String, String)> {
    let tuple = saver.get_tuple(&CheckpointConfig::thread(thread_id)).await.unwrap().unwrap();
    tuple.checkpoint.channel_versions.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[tokio::test]
async fn a_saver_with_integer_versions_runs_pauses_resumes_and_takes_updates() {
    let saver = versioned(false);
    let app = app(saver.clone());
    let first = app.invoke(Doc::update(), &thread("t")).await.unwrap();
    assert_eq!(first.interrupts.len(), 1);
    let versions = latest_versions(&saver, "t").await;
    assert!(!versions.is_empty());
    for (channel, v) in &versions {
        assert!(v.bytes().all(|b| b.is_ascii_digit()), "{channel} has version '{v}'");
    }
    // Input (1), START (2), a (3): `log` was last written by `a`.
    assert!(versions.contains(&("log".to_owned(), "3".to_owned())), "{versions:?}");

    let done = app.invoke(Command::<Doc>::resume(json!("yes")), &thread("t")).await.unwrap();
    assert_eq!(done.value.log, ["a", "yes"]);
    assert!(latest_versions(&saver, "t").await.contains(&("log".to_owned(), "4".to_owned())));

    app.update_state(&thread("t"), vec![DocUpdate::new().log(vec!["edited".to_owned()])], Some("ask"))
        .await
        .unwrap();
    assert!(latest_versions(&saver, "t").await.contains(&("log".to_owned(), "5".to_owned())));
    let state = app.get_state(&thread("t")).await.unwrap();
    assert_eq!(state.values.log, ["a", "yes", "edited"]);
}

#[tokio::test]
async fn a_saver_whose_versions_do_not_grow_fails_the_run_naming_them() {
    let saver = versioned(true);
    let err = app(saver).invoke(Doc::update(), &thread("t")).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("the checkpointer's next version '1' has no counter above the current version '1'"),
        "{err}"
    );
}

#[tokio::test]
async fn the_default_versions_keep_the_engines_form() {
    let saver = InMemorySaver::new();
    let v = saver.get_next_version(Some("00000000000000000000000000000002.0000000000000007")).unwrap();
    assert_eq!(version_counter(&v), Some(3));
    assert_eq!(v.len(), 32 + 1 + 16);
}

/// `versions_seen` of node `node` in the latest checkpoint of `thread_id`, and whether each of its versions
/// is one `channel_versions` gave that channel in some checkpoint of the thread.
async fn seen_of(saver: &dyn Checkpointer, thread_id: &str, node: &str) -> (Vec<(String, String)>, bool) {
    let history =
        saver.list(Some(&CheckpointConfig::thread(thread_id)), ListOptions::default()).await.unwrap();
    let seen: Vec<(String, String)> = history[0]
        .checkpoint
        .versions_seen
        .iter()
        .find(|(n, _)| &***n == node)
        .map(|(_, m)| m.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
        .unwrap_or_default();
    let given = seen.iter().all(|(channel, v)| {
        history.iter().any(|t| {
            t.checkpoint
                .channel_versions
                .iter()
                .any(|(c, cv)| &**c == channel.as_str() && &**cv == v.as_str())
        })
    });
    (seen, given)
}

#[tokio::test]
async fn versions_seen_holds_the_savers_versions_as_channel_versions_does() {
    let saver = versioned(false);
    app(saver.clone()).invoke(Doc::update(), &thread("t")).await.unwrap();
    let (seen, given) = seen_of(saver.as_ref(), "t", "a").await;
    // `a` ran on `branch:to:a` at version 2, written by the START step.
    assert_eq!(seen, [("branch:to:a".to_owned(), "2".to_owned())]);
    assert!(given);
}

#[tokio::test]
async fn versions_seen_holds_the_default_versions_as_channel_versions_does() {
    let saver = Arc::new(InMemorySaver::new());
    app(saver.clone()).invoke(Doc::update(), &thread("t")).await.unwrap();
    let (seen, given) = seen_of(saver.as_ref(), "t", "a").await;
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].1.len(), 32 + 1 + 16, "{seen:?}");
    assert!(given, "{seen:?}");
}

#[tokio::test]
async fn a_checkpoint_with_counter_versions_seen_from_an_older_weft_still_loads() {
    let saver = Arc::new(InMemorySaver::new());
    let app = app(saver.clone());
    app.invoke(Doc::update(), &thread("t")).await.unwrap();
    app.invoke(Command::<Doc>::resume(json!("yes")), &thread("t")).await.unwrap();
    let tuple = saver.get_tuple(&CheckpointConfig::thread("t")).await.unwrap().unwrap();
    // Older weft versions wrote `versions_seen` as bare 32-digit counters.
    let mut checkpoint = tuple.checkpoint.clone();
    for (_, seen) in checkpoint.versions_seen.iter_mut() {
        for (_, v) in seen.iter_mut() {
            *v = format!("{:032}", version_counter(v).unwrap()).into();
        }
    }
    let versions = checkpoint.channel_versions.clone();
    saver.put(&CheckpointConfig::thread("old"), checkpoint, tuple.metadata.clone(), versions).await.unwrap();

    let state = app.get_state(&thread("old")).await.unwrap();
    assert!(state.next.is_empty(), "nothing is left to run: {:?}", state.next);
    assert_eq!(state.values.log, ["a", "yes"]);
    let again = app.invoke(Doc::update(), &thread("old")).await.unwrap();
    assert_eq!(again.value.log, ["a", "yes", "a"]);
    assert_eq!(again.interrupts.len(), 1);
}
