//! Threads over several runs: new input after a finished run, history filters (limit, before, metadata,
//! a config naming a checkpoint), update_state through a router, object interrupts, a subgraph's own
//! checkpoints and custom chunks from inside subgraphs (python/s_threads.py).

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use weft::RunnableConfig;
use weft::graph::{
    Command, CompiledGraph, END, GraphInput, GraphResult, JsonState, ListOptions, RunOptions, Runtime, START,
    StreamMode, TaskState,
};

use crate::kit::{graph, input, len, log_state, saver, text, upd};
use crate::observe::snapshot;
use crate::rec::{Rec, thread};
use crate::{Outcome, scenarios};

scenarios![
    a_second_input_continues_the_thread,
    history_filters_by_limit_before_and_metadata,
    update_state_runs_the_router_of_its_node,
    interrupt_values_and_answers_are_any_json,
    a_subgraph_keeps_checkpoints_in_its_namespace,
    custom_chunks_from_inside_a_subgraph_carry_its_namespace,
    command_goto_end_stops_the_run,
];

type Cmd = Command<JsonState>;

fn ab() -> GraphResult<CompiledGraph<JsonState>> {
    let mut g = graph(log_state());
    g.add_node("a", |_: &JsonState| json!({"log": ["a"]}));
    g.add_node("b", |s: &JsonState| json!({"log": [format!("b saw {}", len(s, "log"))]}));
    g.add_edge(START, "a").add_edge("a", "b");
    g.compile_with(saver())
}

fn a_second_input_continues_the_thread(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = ab()?;
        let t = thread("t");
        rec.invoke(&app, input(json!({"log": ["one"]})), &t).await;
        rec.invoke(&app, input(json!({"log": ["two"]})), &t).await;
        rec.history(&app, &t).await;
        Ok(())
    })
}

async fn listed(app: &CompiledGraph<JsonState>, op: &str, options: ListOptions) -> Value {
    match app.get_state_history(&thread("t"), options).await {
        Ok(list) => json!({"op": op, "snaps": list.iter().map(snapshot).collect::<Vec<_>>()}),
        Err(err) => json!({"op": op, "error": crate::rec::error(&err)}),
    }
}

fn history_filters_by_limit_before_and_metadata(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = ab()?;
        let t = thread("t");
        rec.invoke(&app, input(json!({"log": []})), &t).await;
        let full = app.get_state_history(&t, ListOptions::default()).await?;
        let id = |i: usize| full.get(i).and_then(|s| s.config.as_ref()).and_then(|c| c.checkpoint_id.clone());
        rec.note(listed(&app, "limit", ListOptions { limit: Some(2), ..ListOptions::default() }).await);
        rec.note(listed(&app, "before", ListOptions { before: id(1), ..ListOptions::default() }).await);
        let mut filter = Map::new();
        filter.insert("source".to_owned(), json!("input"));
        rec.note(listed(&app, "filter", ListOptions { filter, ..ListOptions::default() }).await);
        rec.history(&app, &t.clone().with_configurable("checkpoint_id", id(2).unwrap_or_default())).await;
        Ok(())
    })
}

fn update_state_runs_the_router_of_its_node(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("a", |_: &JsonState| json!({"log": ["a"]}));
        g.add_node("yes", |_: &JsonState| json!({"log": ["yes"]}));
        g.add_node("no", |_: &JsonState| json!({"log": ["no"]}));
        g.add_edge(START, "a");
        g.add_conditional_edges(
            "a",
            |s: &JsonState| if text(s, "last") == "ok" { "yes" } else { "no" },
            ["yes", "no"],
        );
        let app = g.compile_with(saver().interrupt_before(["yes", "no"]))?;
        let t = thread("t");
        rec.invoke(&app, input(json!({"log": []})), &t).await;
        rec.state(&app, &t, false).await;
        rec.update(&app, &t, vec![upd(json!({"last": "ok"}))], Some("a")).await;
        rec.state(&app, &t, false).await;
        rec.invoke(&app, GraphInput::Resume, &t).await;
        Ok(())
    })
}

fn interrupt_values_and_answers_are_any_json(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("form", |_: &JsonState, rt: &Runtime| -> weft::Result<Value> {
            let answer: Value = rt.interrupt(json!({"question": "size?", "options": [1, 2, 3], "nested": {"ok": true}}))?;
            Ok(json!({"log": [format!("picked {} ({})", answer["size"], answer["why"].as_str().unwrap_or_default())]}))
        });
        g.add_edge(START, "form");
        let app = g.compile_with(saver())?;
        let t = thread("t");
        rec.invoke(&app, input(json!({"log": []})), &t).await;
        rec.invoke(&app, Cmd::resume(json!({"size": 2, "why": "fits"})), &t).await;
        Ok(())
    })
}

fn a_subgraph_keeps_checkpoints_in_its_namespace(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut sg = graph(log_state());
        sg.add_node("x", |_: &JsonState| json!({"log": ["x"]}));
        sg.add_node("y", |_: &JsonState, rt: &Runtime| -> weft::Result<Value> {
            let answer: String = rt.interrupt("y?")?;
            Ok(json!({"log": [format!("y:{answer}")]}))
        });
        sg.add_edge(START, "x").add_edge("x", "y");
        let mut g = graph(log_state());
        g.add_node("sub", sg.compile()?);
        g.add_edge(START, "sub");
        let app = g.compile_with(saver())?;
        let t = thread("t");
        rec.invoke(&app, input(json!({"log": []})), &t).await;
        let parent = app.get_state(&t).await?;
        let mut sub = RunnableConfig::default().with_configurable("thread_id", "t");
        if let Some(TaskState::Config(c)) = parent.tasks.first().and_then(|task| task.state.as_ref()) {
            sub = sub.with_configurable("checkpoint_ns", c.checkpoint_ns.clone());
            if let Some(id) = &c.checkpoint_id {
                sub = sub.with_configurable("checkpoint_id", id.clone());
            }
        }
        rec.state(&app, &sub, false).await;
        rec.history(&app, &sub).await;
        Ok(())
    })
}

fn custom_chunks_from_inside_a_subgraph_carry_its_namespace(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut sg = graph(log_state());
        sg.add_node("talk", |_: &JsonState, rt: &Runtime| {
            rt.write(&json!({"from": "inside"}));
            json!({"log": ["talk"]})
        });
        sg.add_edge(START, "talk");
        let mut g = graph(log_state());
        g.add_node("sub", sg.compile()?);
        g.add_node("out", |_: &JsonState, rt: &Runtime| {
            rt.write(&"outside");
            json!({"log": ["out"]})
        });
        g.add_edge(START, "sub").add_edge("sub", "out");
        let app = g.compile_with(saver())?;
        let on = RunOptions { subgraphs: true, ..RunOptions::default() };
        rec.stream(&app, input(json!({"log": []})), &thread("t"), &[StreamMode::Custom], on).await;
        rec.stream(
            &app,
            input(json!({"log": []})),
            &thread("t2"),
            &[StreamMode::Custom],
            RunOptions::default(),
        )
        .await;
        Ok(())
    })
}

fn command_goto_end_stops_the_run(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("a", |_: &JsonState| Cmd::new().update(upd(json!({"log": ["a"]}))).goto(END));
        g.add_node("b", |_: &JsonState| json!({"log": ["b"]}));
        g.add_edge(START, "a");
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        rec.state(&app, &thread("t"), false).await;
        Ok(())
    })
}
