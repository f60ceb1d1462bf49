//! Durability modes and what checkpoints hold: exit/sync/async, interrupted steps under `exit`, saved
//! versions_seen and updated_channels, failures that keep the finished tasks' writes
//! (python/s_durability.py).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use weft::graph::checkpoint::{
    ChannelVersion, CheckpointConfig, CheckpointError, Checkpointer, InMemorySaver, Intercept, Intercepted,
};
use weft::graph::{
    Command, CompileConfig, CompiledGraph, Durability, GraphInput, GraphResult, JsonState, RunOptions,
    Runtime, START,
};

use crate::kit::{chain, graph, input, log_state, note, saver};
use crate::rec::{Rec, thread};
use crate::{Outcome, scenarios};

scenarios![
    durability_exit_saves_only_the_last_checkpoint,
    durability_sync_saves_every_step,
    durability_exit_keeps_the_finished_tasks_of_an_interrupted_step,
    durability_async_keeps_the_finished_tasks_of_an_interrupted_step,
    saved_checkpoints_record_versions_seen_and_updated_channels,
    a_failed_task_reruns_alone_and_finished_writes_are_kept,
    a_saver_failing_to_give_a_version_fails_the_run,
];

type Runs = Arc<Mutex<Vec<String>>>;

fn with(durability: Durability) -> RunOptions {
    RunOptions { durability, ..RunOptions::default() }
}

fn ran(runs: &Runs, name: &str) -> usize {
    let mut runs = runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    runs.push(name.to_owned());
    runs.iter().filter(|r| *r == name).count()
}

fn runs_note(runs: &Runs) -> Value {
    let mut list = runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    list.sort();
    json!({"op": "runs", "runs": list})
}

fn chain3() -> GraphResult<CompiledGraph<JsonState>> {
    chain(vec![("a", note("a")), ("b", note("b")), ("c", note("c"))], saver())
}

fn durability_exit_saves_only_the_last_checkpoint(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = chain3()?;
        rec.invoke_with(&app, input(json!({"log": []})), &thread("t"), with(Durability::Exit)).await;
        rec.history(&app, &thread("t")).await;
        Ok(())
    })
}

fn durability_sync_saves_every_step(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = chain3()?;
        rec.invoke_with(&app, input(json!({"log": []})), &thread("t"), with(Durability::Sync)).await;
        rec.history(&app, &thread("t")).await;
        rec.saved(&app, "t", &["updated_channels"]).await;
        Ok(())
    })
}

fn pq(runs: &Runs) -> GraphResult<CompiledGraph<JsonState>> {
    let mut g = graph(log_state());
    let r = Arc::clone(runs);
    g.add_node("p", move |_: &JsonState, rt: &Runtime| -> weft::Result<Value> {
        ran(&r, "p");
        let answer: String = rt.interrupt("p?")?;
        Ok(json!({"log": [format!("p:{answer}")]}))
    });
    let r = Arc::clone(runs);
    g.add_node("q", move |_: &JsonState| {
        ran(&r, "q");
        json!({"log": ["q"]})
    });
    g.add_edge(START, "p").add_edge(START, "q");
    g.compile_with(saver())
}

async fn interrupted_step(rec: &mut Rec, durability: Durability) -> Outcome {
    let runs = Runs::default();
    let app = pq(&runs)?;
    let t = thread("t");
    rec.invoke_with(&app, input(json!({"log": []})), &t, with(durability)).await;
    rec.state(&app, &t, false).await;
    rec.invoke_with(&app, Command::<JsonState>::resume("P"), &t, with(durability)).await;
    rec.note(runs_note(&runs));
    Ok(())
}

fn durability_exit_keeps_the_finished_tasks_of_an_interrupted_step(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(interrupted_step(rec, Durability::Exit))
}

fn durability_async_keeps_the_finished_tasks_of_an_interrupted_step(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(interrupted_step(rec, Durability::Async))
}

fn saved_checkpoints_record_versions_seen_and_updated_channels(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("a", |_: &JsonState| json!({"log": ["a"], "last": "a"}));
        g.add_node("b", |_: &JsonState| json!({"log": ["b"]}));
        g.add_node("c", |_: &JsonState| json!({"last": "c"}));
        g.add_edge(START, "a").add_edge(START, "b").add_edge("a", "c");
        let app = g.compile_with(saver())?;
        rec.invoke_with(&app, input(json!({"log": []})), &thread("t"), with(Durability::Sync)).await;
        rec.saved(&app, "t", &["versions_seen", "updated_channels", "channel_versions"]).await;
        Ok(())
    })
}

fn a_failed_task_reruns_alone_and_finished_writes_are_kept(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let runs = Runs::default();
        let mut g = graph(log_state());
        let r = Arc::clone(&runs);
        g.add_node("flaky", move |_: Value| {
            let r = Arc::clone(&r);
            async move {
                let n = ran(&r, "flaky");
                // Fail after `steady` has finished and saved its writes.
                tokio::time::sleep(Duration::from_millis(200)).await;
                if n == 1 { Err(weft::Error::msg("first try")) } else { Ok(json!({"log": ["flaky"]})) }
            }
        });
        let r = Arc::clone(&runs);
        g.add_node("steady", move |_: &JsonState| {
            ran(&r, "steady");
            json!({"log": ["steady"]})
        });
        g.add_edge(START, "flaky").add_edge(START, "steady");
        let app = g.compile_with(saver())?;
        let t = thread("t");
        rec.invoke_with(&app, input(json!({"log": []})), &t, with(Durability::Sync)).await;
        rec.state(&app, &t, false).await;
        rec.invoke_with(&app, GraphInput::Resume, &t, with(Durability::Sync)).await;
        rec.note(runs_note(&runs));
        rec.history(&app, &t).await;
        Ok(())
    })
}

/// A saver whose version counter is out of reach: `get_next_version` fails.
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

fn a_saver_failing_to_give_a_version_fails_the_run(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("a", note("a"));
        g.add_edge(START, "a");
        let inner: Arc<dyn Checkpointer> = Arc::new(InMemorySaver::new());
        let saver = Arc::new(Intercepted::new(inner, NoVersions));
        let app = g.compile_with(CompileConfig::new().checkpointer(saver.clone()))?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        let saved = saver.get_tuple(&CheckpointConfig::thread("t")).await.ok().flatten();
        rec.note(json!({"op": "saved", "checkpoint": saved.is_some()}));
        Ok(())
    })
}
