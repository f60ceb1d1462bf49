//! Subgraphs: compiled graphs as nodes, interrupts inside them (one, two in a step, Send'd), Command to
//! the parent, subgraphs invoked inside function nodes, per-node checkpointed subgraphs, namespaces
//! (python/s_subgraphs.py).

use futures::future::BoxFuture;
use serde_json::{Value, json};
use weft::graph::{
    Command, CompileConfig, CompiledGraph, Durability, GraphResult, JsonChannel, JsonState, Runtime, START,
    Send, StreamMode, SubgraphCheckpoints,
};

use crate::kit::{answers, graph, ids_by_value, input, len, lists, log_state, py, saver, upd};
use crate::rec::{Rec, thread};
use crate::{Outcome, scenarios};

scenarios![
    subgraph_node_reads_and_writes_shared_keys,
    interrupt_inside_a_subgraph_and_resume,
    two_subgraphs_interrupting_in_one_step_resumed_one_at_a_time,
    sent_subgraphs_interrupting_resumed_one_at_a_time,
    sent_subgraphs_resumed_one_at_a_time_stream_each_step_as_one_group,
    sent_subgraphs_resumed_one_at_a_time_stream_values,
    command_to_parent_from_a_subgraph,
    subgraph_invoked_inside_a_function_node_shows_in_get_state,
    two_checkpointed_subgraphs_in_one_node_keep_their_own_state,
    nested_subgraphs_stream_with_namespaces,
    finished_subgraph_is_reemitted_as_cached_when_its_sibling_resumes,
    inner_writes_of_a_resumed_subgraph_are_reemitted_as_cached,
    finished_subgraph_is_reemitted_as_cached_with_subgraphs_streamed,
    function_node_calling_a_subgraph_is_reemitted_as_cached,
];

type Cmd = Command<JsonState>;

/// `class Inner(TypedDict): log: Annotated[list, add]; topic: str; notes: Annotated[list, add]`.
fn inner() -> JsonState {
    let schema = JsonState::builder()
        .channel("log", JsonChannel::Add)
        .channel("topic", JsonChannel::LastValue)
        .channel("notes", JsonChannel::Add)
        .build();
    lists(schema, &["log", "notes"])
}

/// `START -> one -> two`; `one` asks `{name}?` when `asks`.
fn child(name: &str, asks: bool, config: CompileConfig) -> GraphResult<CompiledGraph<JsonState>> {
    let mut g = graph(inner());
    let label = name.to_owned();
    g.add_node("one", move |_: &JsonState, rt: &Runtime| -> weft::Result<Value> {
        let answer: String = if asks { rt.interrupt(format!("{label}?"))? } else { "-".to_owned() };
        Ok(json!({"notes": [format!("{label}.one:{answer}")]}))
    });
    let label = name.to_owned();
    g.add_node(
        "two",
        move |s: &JsonState| json!({"log": [format!("{label}.two saw {} notes", len(s, "notes"))]}),
    );
    g.add_edge(START, "one").add_edge("one", "two");
    g.compile_with(config)
}

fn parent(
    children: Vec<(&str, CompiledGraph<JsonState>)>,
    after: bool,
) -> GraphResult<CompiledGraph<JsonState>> {
    let mut g = graph(log_state());
    let names: Vec<String> = children.iter().map(|(n, _)| (*n).to_owned()).collect();
    for (name, sub) in children {
        g.add_node(name, sub);
        g.add_edge(START, name);
    }
    if after {
        g.add_node("after", |_: &JsonState| json!({"log": ["after"]}));
        g.add_waiting_edge(names, "after");
    }
    g.compile_with(saver())
}

fn subgraphs_on() -> weft::graph::RunOptions {
    weft::graph::RunOptions { subgraphs: true, ..Default::default() }
}

fn subgraph_node_reads_and_writes_shared_keys(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = parent(vec![("sub", child("sub", false, CompileConfig::new())?)], true)?;
        rec.invoke(&app, input(json!({"log": ["in"]})), &thread("t")).await;
        rec.stream(
            &app,
            input(json!({"log": ["in"]})),
            &thread("t2"),
            &[StreamMode::Updates],
            subgraphs_on(),
        )
        .await;
        rec.history(&app, &thread("t")).await;
        Ok(())
    })
}

fn interrupt_inside_a_subgraph_and_resume(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = parent(vec![("sub", child("sub", true, CompileConfig::new())?)], true)?;
        let t = thread("t");
        rec.invoke(&app, input(json!({"log": []})), &t).await;
        rec.state(&app, &t, true).await;
        rec.invoke(&app, Cmd::resume("yes"), &t).await;
        rec.state(&app, &t, false).await;
        Ok(())
    })
}

fn two_subgraphs_interrupting_in_one_step_resumed_one_at_a_time(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let s1 = child("s1", true, CompileConfig::new())?;
        let s2 = child("s2", true, CompileConfig::new())?;
        let app = parent(vec![("s1", s1), ("s2", s2)], true)?;
        let t = thread("t");
        let out = rec.invoke(&app, input(json!({"log": []})), &t).await;
        let ids = ids_by_value(out.as_ref());
        rec.invoke(&app, Cmd::resume_by_id(answers(&ids, &[("s1?", "A")])), &t).await;
        rec.state(&app, &t, false).await;
        rec.invoke(&app, Cmd::resume_by_id(answers(&ids, &[("s2?", "B")])), &t).await;
        rec.state(&app, &t, false).await;
        Ok(())
    })
}

fn sent_subgraphs_interrupting_resumed_one_at_a_time(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut sg = graph(inner());
        // Each packet's subgraph asks its own question.
        sg.add_node("one", |s: &JsonState, rt: &Runtime| -> weft::Result<Value> {
            let first =
                s.get("log").and_then(|l| l.get(0)).and_then(Value::as_str).unwrap_or_default().to_owned();
            let answer: String = rt.interrupt(format!("{first}?"))?;
            Ok(json!({"notes": [format!("{first}:{answer}")]}))
        });
        sg.add_edge(START, "one");
        let mut g = graph(log_state());
        g.add_node("sub", sg.compile()?);
        g.set_conditional_entry_point(
            |_: &JsonState| {
                ["x", "y"].iter().map(|t| Send::new("sub", json!({"log": [t]}))).collect::<Vec<_>>()
            },
            None,
        );
        let app = g.compile_with(saver())?;
        let t = thread("t");
        rec.invoke(&app, input(json!({"log": []})), &t).await;
        // Each packet's interrupt, in send order.
        let tasks = app.get_state(&t).await.map(|s| s.tasks).unwrap_or_default();
        let ids: Vec<String> =
            tasks.iter().filter_map(|task| task.interrupts.first().map(|i| i.id.clone())).collect();
        let by = |i: usize| {
            let mut m = serde_json::Map::new();
            m.insert(ids.get(i).cloned().unwrap_or_default(), Value::from(if i == 0 { "A" } else { "B" }));
            m
        };
        rec.invoke(&app, Cmd::resume_by_id(by(0)), &t).await;
        rec.state(&app, &t, false).await;
        rec.invoke(&app, Cmd::resume_by_id(by(1)), &t).await;
        Ok(())
    })
}

/// Two `Send`s to one subgraph whose node asks `{first log entry}?`; `y`'s asks 50 ms later, so the
/// packets finish in send order on both sides.
fn sent_asking_subgraphs() -> GraphResult<CompiledGraph<JsonState>> {
    let mut sg = graph(inner());
    sg.add_node("one", |s: Value, rt: Runtime| async move {
        let first =
            s.get("log").and_then(|l| l.get(0)).and_then(Value::as_str).unwrap_or_default().to_owned();
        if first == "y" {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let answer: String = rt.interrupt(format!("{first}?"))?;
        Ok::<_, weft::Error>(json!({"notes": [format!("{first}:{answer}")]}))
    });
    sg.add_edge(START, "one");
    let mut g = graph(log_state());
    g.add_node("sub", sg.compile()?);
    g.set_conditional_entry_point(
        |_: &JsonState| ["x", "y"].iter().map(|t| Send::new("sub", json!({"log": [t]}))).collect::<Vec<_>>(),
        None,
    );
    g.compile_with(saver())
}

/// The ids of the interrupts of `t`'s pending tasks, in send order.
async fn pending_interrupt_ids(app: &CompiledGraph<JsonState>, t: &weft::RunnableConfig) -> Vec<String> {
    let tasks = app.get_state(t).await.map(|s| s.tasks).unwrap_or_default();
    tasks.iter().filter_map(|task| task.interrupts.first().map(|i| i.id.clone())).collect()
}

/// `Command(resume={ids[i]: answer})`.
fn resume_one(ids: &[String], i: usize, answer: &str) -> Cmd {
    let mut m = serde_json::Map::new();
    m.insert(ids.get(i).cloned().unwrap_or_default(), Value::from(answer));
    Cmd::resume_by_id(m)
}

fn sent_subgraphs_resumed_one_at_a_time_stream_each_step_as_one_group(
    rec: &mut Rec,
) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = sent_asking_subgraphs()?;
        let t = thread("t");
        let modes = [StreamMode::Updates, StreamMode::Tasks, StreamMode::Checkpoints, StreamMode::Debug];
        let sync = || weft::graph::RunOptions { durability: Durability::Sync, ..Default::default() };
        // Both packets' subgraphs run at once here: the first two streams keep the parent's chunks only.
        rec.stream(&app, input(json!({"log": []})), &t, &modes, sync()).await;
        let ids = pending_interrupt_ids(&app, &t).await;
        rec.stream(&app, resume_one(&ids, 0, "A"), &t, &modes, sync()).await;
        // `x`'s packet finished: its saved result is reused, `y`'s subgraph runs again.
        let on = weft::graph::RunOptions { subgraphs: true, ..sync() };
        rec.stream(&app, resume_one(&ids, 1, "B"), &t, &modes, on).await;
        rec.state(&app, &t, false).await;
        Ok(())
    })
}

fn sent_subgraphs_resumed_one_at_a_time_stream_values(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = sent_asking_subgraphs()?;
        let t = thread("t");
        rec.invoke(&app, input(json!({"log": []})), &t).await;
        let ids = pending_interrupt_ids(&app, &t).await;
        let modes = [StreamMode::Values, StreamMode::Updates];
        rec.stream(&app, resume_one(&ids, 0, "A"), &t, &modes, Default::default()).await;
        rec.stream(&app, resume_one(&ids, 1, "B"), &t, &modes, subgraphs_on()).await;
        Ok(())
    })
}

fn command_to_parent_from_a_subgraph(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut sg = graph(inner());
        sg.add_node("hop", |_: &JsonState| {
            Cmd::new().goto("other").update(upd(json!({"log": ["hop"]}))).to_parent()
        });
        sg.add_edge(START, "hop");
        let mut g = graph(log_state());
        g.add_node("sub", sg.compile()?);
        g.add_node("other", |_: &JsonState| json!({"log": ["other"]}));
        g.add_edge(START, "sub");
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        rec.history(&app, &thread("t")).await;
        Ok(())
    })
}

/// A function node `call` that invokes `sub` and writes back its `log` (a pause of the subgraph pauses the
/// node: `?` turns it into the node's interrupt).
fn add_calling_node(g: &mut weft::graph::StateGraph<JsonState>, sub: CompiledGraph<JsonState>) {
    g.add_node("call", move |_: Value, rt: Runtime| {
        let sub = sub.clone();
        async move {
            let out = sub.invoke(input(json!({"log": [], "notes": []})), rt.config()).await?;
            Ok::<_, weft::Error>(json!({"log": out.value.get("log").cloned().unwrap_or(Value::Null)}))
        }
    });
}

fn subgraph_invoked_inside_a_function_node_shows_in_get_state(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let sub = child("inner", true, CompileConfig::new())?;
        let mut g = graph(log_state());
        add_calling_node(&mut g, sub);
        g.add_edge(START, "call");
        let app = g.compile_with(saver())?;
        let t = thread("t");
        rec.invoke(&app, input(json!({"log": []})), &t).await;
        rec.state(&app, &t, true).await;
        rec.invoke(&app, Cmd::resume("yes"), &t).await;
        Ok(())
    })
}

fn two_checkpointed_subgraphs_in_one_node_keep_their_own_state(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let per_node =
            |name: &str| CompileConfig::new().subgraph_checkpoints(SubgraphCheckpoints::PerNode).name(name);
        let one = child("one", false, per_node("one"))?;
        let two = child("two", false, per_node("two"))?;
        let mut g = graph(log_state());
        g.add_node("call", move |_: Value, rt: Runtime| {
            let (one, two) = (one.clone(), two.clone());
            async move {
                let a = one.invoke(input(json!({"notes": []})), rt.config()).await?;
                let b = two.invoke(input(json!({"notes": []})), rt.config()).await?;
                let (a, b) = (py(a.value.get("notes")), py(b.value.get("notes")));
                Ok::<_, weft::Error>(json!({"log": [format!("one has {a}"), format!("two has {b}")]}))
            }
        });
        g.add_edge(START, "call");
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        Ok(())
    })
}

fn nested_subgraphs_stream_with_namespaces(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut mid = graph(inner());
        mid.add_node("inner", child("inner", false, CompileConfig::new())?);
        mid.add_node("m", |_: &JsonState| json!({"log": ["m"]}));
        mid.add_edge(START, "inner").add_edge("inner", "m");
        let app = parent(vec![("mid", mid.compile()?)], false)?;
        let modes = [StreamMode::Updates, StreamMode::Values];
        rec.stream(&app, input(json!({"log": []})), &thread("t"), &modes, subgraphs_on()).await;
        Ok(())
    })
}

fn finished_subgraph_is_reemitted_as_cached_when_its_sibling_resumes(
    rec: &mut Rec,
) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let s1 = child("s1", false, CompileConfig::new())?;
        let s2 = child("s2", true, CompileConfig::new())?;
        let app = parent(vec![("s1", s1), ("s2", s2)], true)?;
        let t = thread("t");
        let none = weft::graph::RunOptions::default;
        rec.invoke(&app, input(json!({"log": []})), &t).await;
        rec.stream(&app, Cmd::resume("B"), &t, &[StreamMode::Updates], none()).await;
        Ok(())
    })
}

fn inner_writes_of_a_resumed_subgraph_are_reemitted_as_cached(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut sg = graph(inner());
        sg.add_node("x", |_: &JsonState| json!({"notes": ["x"]}));
        sg.add_node("y", |_: Value, rt: Runtime| async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let answer: String = rt.interrupt("y?")?;
            Ok::<_, weft::Error>(json!({"notes": [format!("y:{answer}")]}))
        });
        sg.add_edge(START, "x").add_edge(START, "y");
        let app = parent(vec![("sub", sg.compile()?)], false)?;
        let t = thread("t");
        rec.invoke(&app, input(json!({"log": []})), &t).await;
        rec.stream(&app, Cmd::resume("Y"), &t, &[StreamMode::Updates], subgraphs_on()).await;
        Ok(())
    })
}

fn finished_subgraph_is_reemitted_as_cached_with_subgraphs_streamed(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let s1 = child("s1", false, CompileConfig::new())?;
        let s2 = child("s2", true, CompileConfig::new())?;
        let app = parent(vec![("s1", s1), ("s2", s2)], true)?;
        let t = thread("t");
        rec.invoke(&app, input(json!({"log": []})), &t).await;
        rec.stream(&app, Cmd::resume("B"), &t, &[StreamMode::Updates], subgraphs_on()).await;
        Ok(())
    })
}

fn function_node_calling_a_subgraph_is_reemitted_as_cached(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let sub = child("inner", false, CompileConfig::new())?;
        let mut g = graph(log_state());
        add_calling_node(&mut g, sub);
        g.add_node("p", |_: Value, rt: Runtime| async move {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let answer: String = rt.interrupt("p?")?;
            Ok::<_, weft::Error>(json!({"log": [format!("p:{answer}")]}))
        });
        g.add_edge(START, "call").add_edge(START, "p");
        let app = g.compile_with(saver())?;
        let t = thread("t");
        rec.invoke(&app, input(json!({"log": []})), &t).await;
        rec.stream(&app, Cmd::resume("P"), &t, &[StreamMode::Updates], subgraphs_on()).await;
        Ok(())
    })
}
