//! Send (map-reduce, push tasks beside pull tasks, untracked values in packets) and Command (goto with
//! static edges, goto Send, Command as input) (python/s_send_command.py).

use futures::future::BoxFuture;
use serde_json::{Value, json};
use weft::graph::{Command, END, GraphInput, JsonChannel, JsonState, Route, START, Send};

use crate::kit::{graph, input, len, lists, saver, text};
use crate::rec::{Rec, thread};
use crate::{Outcome, scenarios};

scenarios![
    send_fans_out_one_task_per_packet_in_send_order,
    send_tasks_run_beside_pull_tasks_and_come_first_in_next,
    untracked_values_never_reach_a_checkpoint_even_inside_sends,
    send_to_end_is_an_error,
    command_goto_and_static_edges_both_fire,
    command_goto_send_packets,
    command_as_input_updates_and_goes_to_a_node,
    node_returning_several_commands_and_updates,
    send_carrying_a_command_runs_its_reemitted_goto,
    send_carrying_a_command_resumes_from_a_breakpoint,
];

type Cmd = Command<JsonState>;

/// `class Jobs(TypedDict): topics: list; log: Annotated[list, operator.add]; secret: UntrackedValue`.
fn jobs() -> JsonState {
    let schema = JsonState::builder()
        .channel("topics", JsonChannel::LastValue)
        .channel("log", JsonChannel::Add)
        .channel("secret", JsonChannel::Untracked)
        .build();
    lists(schema, &["log"])
}

fn worker(p: Value) -> Value {
    json!({"log": [format!("w:{}", p["topic"].as_str().unwrap_or_default())]})
}

fn sends(s: &JsonState) -> Vec<Send> {
    let topics = s.get("topics").and_then(Value::as_array).cloned().unwrap_or_default();
    topics.into_iter().map(|t| Send::new("w", json!({"topic": t}))).collect()
}

fn send_fans_out_one_task_per_packet_in_send_order(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(jobs());
        g.add_node("w", worker);
        g.set_conditional_entry_point(sends, None);
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"topics": ["c", "a", "b"]})), &thread("t")).await;
        rec.history(&app, &thread("t")).await;
        Ok(())
    })
}

fn send_tasks_run_beside_pull_tasks_and_come_first_in_next(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(jobs());
        g.add_node("fan", |_: &JsonState| json!({"log": ["fan"]}));
        g.add_node("pull", |_: &JsonState| json!({"log": ["pull"]}));
        g.add_node("w", worker);
        g.add_edge(START, "fan").add_edge("fan", "pull");
        g.add_conditional_edges("fan", sends, None);
        let app = g.compile_with(saver().interrupt_before(["pull"]))?;
        let t = thread("t");
        rec.invoke(&app, input(json!({"topics": ["x", "y"]})), &t).await;
        rec.state(&app, &t, false).await;
        rec.invoke(&app, GraphInput::Resume, &t).await;
        rec.history(&app, &t).await;
        Ok(())
    })
}

fn untracked_values_never_reach_a_checkpoint_even_inside_sends(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(jobs());
        g.add_node("prep", |_: &JsonState| json!({"secret": "s3cr3t", "log": ["prep"]}));
        g.add_node("w", |p: Value| {
            let secret = p.get("secret").and_then(Value::as_str).unwrap_or("None").to_owned();
            json!({"log": [format!("w:{}:{secret}", p["topic"].as_str().unwrap_or_default())]})
        });
        g.add_edge(START, "prep");
        g.add_conditional_edges(
            "prep",
            |s: &JsonState| vec![Send::new("w", json!({"topic": "t", "secret": text(s, "secret")}))],
            None,
        );
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"topics": []})), &thread("t")).await;
        rec.state(&app, &thread("t"), false).await;
        rec.saved(&app, "t", &[]).await;
        Ok(())
    })
}

fn send_to_end_is_an_error(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(jobs());
        g.add_node("w", worker);
        g.set_conditional_entry_point(|_: &JsonState| vec![Send::new(END, json!({"topic": "x"}))], None);
        rec.invoke(&g.compile()?, input(json!({"topics": []})), &weft::RunnableConfig::default()).await;
        Ok(())
    })
}

fn command_goto_and_static_edges_both_fire(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(jobs());
        g.add_node("a", |_: &JsonState| Cmd::new().update(crate::kit::upd(json!({"log": ["a"]}))).goto("c"));
        g.add_node("b", |_: &JsonState| json!({"log": ["b"]}));
        g.add_node("c", |_: &JsonState| json!({"log": ["c"]}));
        g.add_edge(START, "a").add_edge("a", "b");
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        rec.history(&app, &thread("t")).await;
        Ok(())
    })
}

fn command_goto_send_packets(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(jobs());
        g.add_node("a", |_: &JsonState| {
            let mut cmd = Cmd::new().update(crate::kit::upd(json!({"log": ["a"]})));
            for t in ["1", "2"] {
                cmd = cmd.goto(Send::new("w", json!({"topic": t})));
            }
            cmd
        });
        g.add_node("w", worker);
        g.add_edge(START, "a");
        let app = g.compile_with(saver())?;
        let modes = [weft::graph::StreamMode::Values];
        rec.stream(&app, input(json!({"log": []})), &thread("t"), &modes, Default::default()).await;
        Ok(())
    })
}

fn command_as_input_updates_and_goes_to_a_node(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(jobs());
        g.add_node("a", |_: &JsonState| json!({"log": ["a"]}));
        g.add_node("b", |s: &JsonState| json!({"log": [format!("b saw {}", len(s, "log"))]}));
        g.add_edge(START, "a");
        let app = g.compile_with(saver())?;
        let t = thread("t");
        rec.invoke(&app, input(json!({"log": []})), &t).await;
        rec.invoke(&app, Cmd::new().update(crate::kit::upd(json!({"log": ["cmd"]}))).goto("b"), &t).await;
        rec.state(&app, &t, false).await;
        rec.history(&app, &t).await;
        Ok(())
    })
}

fn node_returning_several_commands_and_updates(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(jobs());
        g.add_node("a", |_: &JsonState| {
            vec![
                weft::graph::NodeOutput::Command(
                    Cmd::new().update(crate::kit::upd(json!({"log": ["a1"]}))).goto("b"),
                ),
                weft::graph::NodeOutput::Update(crate::kit::upd(json!({"log": ["a2"]}))),
            ]
        });
        g.add_node("b", |_: &JsonState| json!({"log": ["b"]}));
        g.add_edge(START, "a");
        rec.invoke(&g.compile()?, input(json!({"log": []})), &weft::RunnableConfig::default()).await;
        Ok(())
    })
}

/// Node "2" of the command scenarios: re-emits the command it was sent, with its own update.
fn relay(cmd: Cmd) -> Vec<Cmd> {
    vec![cmd, Cmd::new().update(crate::kit::upd(json!({"log": ["2"]})))]
}

fn relay_sends(_: &JsonState) -> Vec<Route> {
    vec![
        Route::Send(Send::command("2", Cmd::new().goto(Send::new("w", json!({"topic": "x"}))))),
        Route::Send(Send::command(
            "2",
            Cmd::new()
                .update(crate::kit::upd(json!({"log": ["cmd"]})))
                .goto(Send::new("w", json!({"topic": "y"}))),
        )),
        Route::Node("3".to_owned()),
    ]
}

fn relay_graph() -> weft::graph::StateGraph<JsonState> {
    let mut g = graph(jobs());
    g.add_node("1", |_: &JsonState| json!({"log": ["1"]}));
    g.add_node("2", relay);
    g.add_node("w", worker);
    g.add_node("3", |_: &JsonState| json!({"log": ["3"]}));
    g.add_edge(START, "1");
    g.add_conditional_edges("1", relay_sends, None);
    g
}

fn send_carrying_a_command_runs_its_reemitted_goto(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = relay_graph().compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        rec.state(&app, &thread("t"), false).await;
        Ok(())
    })
}

fn send_carrying_a_command_resumes_from_a_breakpoint(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = relay_graph().compile_with(saver().interrupt_before(["2"]))?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        rec.state(&app, &thread("t"), false).await;
        rec.invoke(&app, GraphInput::Resume, &thread("t")).await;
        rec.state(&app, &thread("t"), false).await;
        Ok(())
    })
}
