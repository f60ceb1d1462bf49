//! Streams: values (resume, pause), updates (parallel interrupts, cached writes on resume in subgraphs),
//! updates with tasks, tasks, checkpoints, debug, custom, messages, v2 parts (python/s_streams.py).

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use weft::fakes::FakeChatModel;
use weft::graph::{
    Command, CompiledGraph, Durability, GraphResult, IntoNode as _, JsonState, MessagesState, RunOptions,
    Runtime, START, StreamMode,
};
use weft::{Message, Runnable as _};

use crate::kit::{Node, graph, input, log_state, saver};
use crate::rec::{Rec, thread};
use crate::{Outcome, scenarios};

scenarios![
    values_stream_of_a_pause_and_a_resume,
    updates_stream_of_a_pause_and_a_resume,
    parallel_interrupts_stream_one_update_chunk_per_task,
    updates_come_before_task_results,
    task_events_carry_triggers,
    checkpoint_events_carry_metadata_parent_and_tasks,
    debug_events_are_wrapped_with_step_and_type,
    custom_stream_carries_what_nodes_write,
    messages_stream_tokens_and_written_messages_with_metadata,
    values_parts_v2_carry_interrupts,
    resumed_subgraph_writes_are_reemitted_as_cached,
    resumed_subgraph_writes_are_reemitted_as_cached_with_subgraphs_streamed,
];

type Cmd = Command<JsonState>;

/// A node asking `{name}?` after `delay` (which orders parallel interrupts).
fn ask(name: &str, delay: u64) -> Node {
    let name = name.to_owned();
    (move |_: Value, rt: Runtime| {
        let name = name.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            let answer: String = rt.interrupt(format!("{name}?"))?;
            Ok::<_, weft::Error>(json!({"log": [format!("{name}:{answer}")]}))
        }
    })
    .into_node()
}

fn chain(
    names: &[&str],
    asks: &[&str],
    config: weft::graph::CompileConfig,
) -> GraphResult<CompiledGraph<JsonState>> {
    let nodes =
        names.iter().map(|n| (*n, if asks.contains(n) { ask(n, 0) } else { crate::kit::note(n) })).collect();
    crate::kit::chain(nodes, config)
}

fn start() -> weft::graph::GraphInput<JsonState> {
    input(json!({"log": []}))
}

fn sync() -> RunOptions {
    RunOptions { durability: Durability::Sync, ..RunOptions::default() }
}

fn values_stream_of_a_pause_and_a_resume(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = chain(&["a", "b", "c"], &["b"], saver())?;
        let t = thread("t");
        rec.stream(&app, start(), &t, &[StreamMode::Values], RunOptions::default()).await;
        rec.stream(&app, Cmd::resume("yes"), &t, &[StreamMode::Values], RunOptions::default()).await;
        Ok(())
    })
}

fn updates_stream_of_a_pause_and_a_resume(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = chain(&["a", "b", "c"], &["b"], saver())?;
        let t = thread("t");
        rec.stream(&app, start(), &t, &[StreamMode::Updates], RunOptions::default()).await;
        rec.stream(&app, Cmd::resume("yes"), &t, &[StreamMode::Updates], RunOptions::default()).await;
        Ok(())
    })
}

fn parallel_interrupts_stream_one_update_chunk_per_task(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("p", ask("p", 0));
        g.add_node("q", ask("q", 200));
        g.add_edge(START, "p").add_edge(START, "q");
        let app = g.compile_with(saver())?;
        rec.stream(&app, start(), &thread("t"), &[StreamMode::Updates], RunOptions::default()).await;
        Ok(())
    })
}

fn updates_come_before_task_results(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = chain(&["a", "b"], &[], saver())?;
        let modes = [StreamMode::Updates, StreamMode::Tasks];
        rec.stream(&app, start(), &thread("t"), &modes, RunOptions::default()).await;
        Ok(())
    })
}

fn task_events_carry_triggers(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = chain(&["a", "b"], &["b"], saver())?;
        rec.stream(&app, start(), &thread("t"), &[StreamMode::Tasks], RunOptions::default()).await;
        Ok(())
    })
}

fn checkpoint_events_carry_metadata_parent_and_tasks(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = chain(&["a", "b"], &[], saver())?;
        rec.stream(&app, start(), &thread("t"), &[StreamMode::Checkpoints], sync()).await;
        Ok(())
    })
}

fn debug_events_are_wrapped_with_step_and_type(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = chain(&["a"], &[], saver())?;
        rec.stream(&app, start(), &thread("t"), &[StreamMode::Debug], sync()).await;
        Ok(())
    })
}

fn custom_stream_carries_what_nodes_write(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("talk", |_: &JsonState, rt: &Runtime| {
            rt.write(&json!({"status": "thinking"}));
            rt.write(&"done");
            json!({"log": ["talk"]})
        });
        g.add_edge(START, "talk");
        let app = g.compile_with(saver())?;
        let modes = [StreamMode::Custom, StreamMode::Updates];
        rec.stream(&app, start(), &thread("t"), &modes, RunOptions::default()).await;
        Ok(())
    })
}

fn messages_stream_tokens_and_written_messages_with_metadata(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let model = FakeChatModel::new(["Hello there, friend"]);
        let mut g = weft::graph::StateGraph::<MessagesState>::new();
        g.add_node("reply", move |s: MessagesState, rt: Runtime| {
            let model = model.clone();
            async move {
                let reply = model.invoke(s.messages.to_vec().into(), rt.config()).await?;
                Ok::<_, weft::Error>(MessagesState::update().messages(vec![reply.into()]))
            }
        });
        g.add_node("sign", |_: &MessagesState| {
            MessagesState::update().messages(vec![Message::ai("signed").with_id("sig-1")])
        });
        g.add_edge(START, "reply").add_edge("reply", "sign");
        let app = g.compile_with(saver())?;
        let hi = MessagesState::update().messages(vec![Message::human("hi").with_id("h-1")]);
        rec.stream(&app, hi, &thread("t"), &[StreamMode::Messages], RunOptions::default()).await;
        Ok(())
    })
}

fn values_parts_v2_carry_interrupts(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = chain(&["a", "b"], &["b"], saver())?;
        rec.stream_v2(&app, start(), &thread("t")).await;
        Ok(())
    })
}

fn cached_graph() -> GraphResult<CompiledGraph<JsonState>> {
    {
        let mut sub = graph(log_state());
        sub.add_node("s", |_: Value| async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            json!({"log": ["s"]})
        });
        sub.add_edge(START, "s");
        let mut g = graph(log_state());
        g.add_node("sub", sub.compile()?);
        g.add_node("plain", |_: &JsonState| json!({"log": ["plain"]}));
        g.add_node("p", ask("p", 50));
        g.add_edge(START, "sub").add_edge(START, "plain").add_edge(START, "p");
        g.compile_with(saver())
    }
}

fn resumed_subgraph_writes_are_reemitted_as_cached(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = cached_graph()?;
        let t = thread("t");
        rec.invoke(&app, start(), &t).await;
        rec.stream(&app, Cmd::resume("P"), &t, &[StreamMode::Updates], RunOptions::default()).await;
        Ok(())
    })
}

fn resumed_subgraph_writes_are_reemitted_as_cached_with_subgraphs_streamed(
    rec: &mut Rec,
) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = cached_graph()?;
        let t = thread("t");
        let on = || RunOptions { subgraphs: true, ..RunOptions::default() };
        rec.invoke(&app, start(), &t).await;
        rec.stream(&app, Cmd::resume("P"), &t, &[StreamMode::Updates], on()).await;
        Ok(())
    })
}
