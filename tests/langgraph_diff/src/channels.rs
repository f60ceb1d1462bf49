//! Reducers and channels: last value, reducers, Overwrite, ephemeral values, topics, undeclared keys,
//! waiting edges, routers (python/s_channels.py).

use futures::future::BoxFuture;
use serde_json::json;
use weft::graph::{Durability, END, JsonChannel, JsonState, RunOptions, START, StreamMode};

use crate::kit::{graph, input, len, lists, log_state, py, saver, upd};
use crate::rec::{Rec, thread};
use crate::{Outcome, scenarios};

scenarios![
    root_value_state_is_the_bare_value,
    reducer_fan_out_appends_in_node_order,
    last_value_two_writes_in_a_step_is_an_error,
    overwrite_replaces_a_reducer_value,
    ephemeral_and_topic_written_by_one_task,
    ephemeral_and_topic_written_in_a_step_of_two_tasks,
    topic_accumulate_keeps_items_across_steps,
    undeclared_keys_in_input_and_updates_are_ignored,
    waiting_edge_joins_branches_of_unequal_length,
    router_loops_through_a_path_map,
    router_returning_none_is_an_error,
    router_error_fails_the_step_of_its_node,
    router_error_under_exit_durability_saves_the_step_it_failed_in,
    router_to_an_unknown_node,
    waiting_edge_and_a_branch_both_trigger_the_join,
    a_join_run_by_its_barrier_alone_lists_all_its_triggers,
];

fn reducer_fan_out_appends_in_node_order(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("b", |_: &JsonState| json!({"log": ["b"]}));
        g.add_node("a", |_: &JsonState| json!({"log": ["a"], "last": "a"}));
        g.add_node("c", |s: &JsonState| json!({"log": [format!("c saw {}", len(s, "log"))]}));
        g.add_edge(START, "a").add_edge(START, "b").add_edge("a", "c").add_edge("b", "c");
        rec.invoke(&g.compile()?, input(json!({"log": ["in"]})), &thread("t")).await;
        Ok(())
    })
}

fn last_value_two_writes_in_a_step_is_an_error(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("a", |_: &JsonState| json!({"last": "a"}));
        g.add_node("b", |_: &JsonState| json!({"last": "b"}));
        g.add_edge(START, "a").add_edge(START, "b");
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        rec.state(&app, &thread("t"), false).await;
        Ok(())
    })
}

fn overwrite_replaces_a_reducer_value(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("a", |_: &JsonState| json!({"log": ["a"]}));
        g.add_node("b", |_: &JsonState| upd(json!({})).overwrite("log", json!(["fresh"])));
        g.add_node("c", |_: &JsonState| json!({"log": ["c"]}));
        g.add_edge(START, "a").add_edge("a", "b").add_edge("a", "c");
        rec.invoke(&g.compile()?, input(json!({"log": ["in"]})), &thread("t")).await;
        Ok(())
    })
}

fn flash_state() -> JsonState {
    let schema = JsonState::builder()
        .channel("flash", JsonChannel::Ephemeral)
        .channel("events", JsonChannel::Topic { accumulate: false })
        .channel("kept", JsonChannel::Topic { accumulate: true })
        .channel("seen", JsonChannel::Add)
        .build();
    lists(schema, &["seen"])
}

fn flash_graph(writers: &[&str]) -> Result<weft::graph::CompiledGraph<JsonState>, weft::graph::GraphError> {
    let mut g = graph(flash_state());
    for name in writers {
        let name = (*name).to_owned();
        let owned = name.clone();
        g.add_node(name.clone(), move |_: &JsonState| {
            if owned == "w1" {
                json!({"flash": owned, "events": [owned]})
            } else {
                json!({"events": [owned]})
            }
        });
        g.add_edge(START, name.clone()).add_edge(name, "read");
    }
    g.add_node("read", |s: &JsonState| {
        json!({"seen": [format!("flash={} events={}", py(s.get("flash")), py(s.get("events")))]})
    });
    g.add_node("later", |s: &JsonState| {
        json!({"seen": [format!("later flash={} events={}", py(s.get("flash")), py(s.get("events")))]})
    });
    g.add_edge("read", "later");
    g.compile_with(saver())
}

fn ephemeral_and_topic_written_by_one_task(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = flash_graph(&["w1"])?;
        rec.invoke(&app, input(json!({"seen": []})), &thread("t")).await;
        Ok(())
    })
}

fn ephemeral_and_topic_written_in_a_step_of_two_tasks(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = flash_graph(&["w1", "w2"])?;
        rec.invoke(&app, input(json!({"seen": []})), &thread("t")).await;
        rec.history(&app, &thread("t")).await;
        Ok(())
    })
}

fn topic_accumulate_keeps_items_across_steps(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(flash_state());
        g.add_node("a", |_: &JsonState| json!({"kept": ["a1", "a2"]}));
        g.add_node("b", |s: &JsonState| json!({"kept": "b", "seen": [py(s.get("kept"))]}));
        g.add_edge(START, "a").add_edge("a", "b");
        rec.invoke(&g.compile()?, input(json!({"kept": ["in"]})), &thread("t")).await;
        Ok(())
    })
}

fn undeclared_keys_in_input_and_updates_are_ignored(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("a", |_: &JsonState| json!({"log": ["a"], "nope": 1}));
        g.add_edge(START, "a");
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": ["in"], "stranger": true})), &thread("t")).await;
        rec.state(&app, &thread("t"), false).await;
        Ok(())
    })
}

fn waiting_edge_joins_branches_of_unequal_length(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("a", |_: &JsonState| json!({"log": ["a"]}));
        g.add_node("b1", |_: &JsonState| json!({"log": ["b1"]}));
        g.add_node("b2", |_: &JsonState| json!({"log": ["b2"]}));
        g.add_node("join", |s: &JsonState| json!({"log": [format!("join {}", len(s, "log"))]}));
        g.add_edge(START, "a").add_edge(START, "b1").add_edge("b1", "b2");
        g.add_waiting_edge(["a", "b2"], "join");
        let app = g.compile_with(saver())?;
        // Saved synchronously, as the Python half is (see there).
        let sync = RunOptions { durability: Durability::Sync, ..RunOptions::default() };
        rec.invoke_with(&app, input(json!({"log": []})), &thread("t"), sync).await;
        rec.history(&app, &thread("t")).await;
        Ok(())
    })
}

fn router_loops_through_a_path_map(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("inc", |_: &JsonState| json!({"log": ["x"]}));
        g.add_edge(START, "inc");
        g.add_conditional_edges(
            "inc",
            |s: &JsonState| if len(s, "log") < 3 { "again" } else { "done" },
            [("again", "inc"), ("done", END)],
        );
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        rec.history(&app, &thread("t")).await;
        Ok(())
    })
}

fn router_returning_none_is_an_error(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("a", |_: &JsonState| json!({"log": ["a"]}));
        g.add_node("b", |_: &JsonState| json!({"log": ["b"]}));
        g.add_edge(START, "a");
        g.add_conditional_edges("a", |_: &JsonState| Option::<&str>::None, None);
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        rec.state(&app, &thread("t"), false).await;
        Ok(())
    })
}

fn router_error_fails_the_step_of_its_node(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("a", |_: &JsonState| json!({"log": ["a"]}));
        g.add_node("b", |_: &JsonState| json!({"log": ["b"]}));
        g.add_edge(START, "a").add_edge("a", "b");
        g.add_conditional_edges(
            "b",
            |_: &JsonState| -> Result<&str, weft::Error> { Err(weft::Error::msg("no way")) },
            ["a", END],
        );
        let app = g.compile_with(saver())?;
        rec.stream(
            &app,
            input(json!({"log": []})),
            &thread("t"),
            &[weft::graph::StreamMode::Tasks],
            Default::default(),
        )
        .await;
        rec.state(&app, &thread("t"), false).await;
        Ok(())
    })
}

fn router_error_under_exit_durability_saves_the_step_it_failed_in(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("a", |_: &JsonState| json!({"log": ["a"]}));
        g.add_node("b", |_: &JsonState| json!({"log": ["b"]}));
        g.add_edge(START, "a").add_edge("a", "b");
        g.add_conditional_edges(
            "b",
            |_: &JsonState| -> Result<&str, weft::Error> { Err(weft::Error::msg("no way")) },
            ["a", END],
        );
        let app = g.compile_with(saver())?;
        let exit =
            weft::graph::RunOptions { durability: weft::graph::Durability::Exit, ..Default::default() };
        rec.invoke_with(&app, input(json!({"log": []})), &thread("t"), exit).await;
        rec.state(&app, &thread("t"), false).await;
        rec.history(&app, &thread("t")).await;
        Ok(())
    })
}

fn router_to_an_unknown_node(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("a", |_: &JsonState| json!({"log": ["a"]}));
        g.add_edge(START, "a");
        g.add_conditional_edges("a", |_: &JsonState| "nowhere", None);
        rec.invoke(&g.compile()?, input(json!({"log": []})), &thread("t")).await;
        Ok(())
    })
}

fn root_value_state_is_the_bare_value(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = weft::graph::StateGraph::<
            weft::graph::root::RootState<Vec<String>, weft::graph::root::Append>,
        >::new();
        g.add_node("a", |s: Vec<String>| vec![format!("a saw {}", s.len())]);
        g.add_node("b", |_: Vec<String>| vec!["b".to_owned()]);
        g.add_node("c", |s: Vec<String>| vec![format!("c saw {}", s.len())]);
        g.add_edge(START, "a").add_edge(START, "b").add_edge("a", "c").add_edge("b", "c");
        let app = g.compile_with(saver().interrupt_before(["c"]))?;
        let modes = [weft::graph::StreamMode::Values, weft::graph::StreamMode::Updates];
        rec.stream(&app, vec!["0".to_owned()], &thread("t"), &modes, Default::default()).await;
        rec.unorder_parallel_results();
        rec.state(&app, &thread("t"), false).await;
        rec.invoke(&app, weft::graph::GraphInput::Resume, &thread("t")).await;
        rec.state(&app, &thread("t"), false).await;
        Ok(())
    })
}

fn waiting_edge_and_a_branch_both_trigger_the_join(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("a", |_: &JsonState| json!({"log": ["a"]}));
        g.add_node("b", |_: &JsonState| json!({"log": ["b"]}));
        g.add_node("join", |s: &JsonState| json!({"log": [format!("join {}", len(s, "log"))]}));
        g.add_edge(START, "a").add_edge(START, "b");
        g.add_conditional_edges("a", |_: &JsonState| "join", ["join"]);
        g.add_waiting_edge(["a", "b"], "join");
        let app = g.compile_with(saver())?;
        rec.stream(&app, input(json!({"log": []})), &thread("t"), &[StreamMode::Tasks], Default::default())
            .await;
        rec.unorder_parallel_results();
        rec.state(&app, &thread("t"), false).await;
        Ok(())
    })
}

fn a_join_run_by_its_barrier_alone_lists_all_its_triggers(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        for n in ["a", "b1", "b2", "join"] {
            g.add_node(n, move |_: &JsonState| json!({"log": [n]}));
        }
        g.add_edge(START, "a").add_edge(START, "b1").add_edge("b1", "b2");
        g.add_conditional_edges("b1", |_: &JsonState| "join", ["join"]);
        g.add_waiting_edge(["a", "b2"], "join");
        let app = g.compile_with(saver())?;
        let sync = RunOptions { durability: Durability::Sync, ..RunOptions::default() };
        rec.stream(&app, input(json!({"log": []})), &thread("t"), &[StreamMode::Tasks], sync).await;
        rec.unorder_parallel_results();
        rec.history(&app, &thread("t")).await;
        Ok(())
    })
}
