//! Interrupts and resumes: interrupt(), Command(resume, update), resume by id, static breakpoints,
//! recursion limits on resumed runs, commands as root input (python/s_interrupts.py).

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use weft::graph::{Command, CompileConfig, GraphInput, JsonState, START};

use crate::kit::{answers, ask, chain, graph, ids_by_value, input, log_state, note, saver, upd};
use crate::rec::{Rec, thread};
use crate::{Outcome, scenarios};

scenarios![
    interrupt_pauses_and_resume_reruns_the_node,
    two_interrupts_in_one_node_take_two_resumes,
    resume_with_update_when_the_node_interrupts_again,
    resume_with_update_when_the_node_finishes,
    parallel_interrupts_resumed_one_at_a_time_by_id,
    parallel_interrupts_resumed_together_by_id,
    interrupt_beside_a_finished_task,
    one_resume_value_for_two_pending_interrupts_is_an_error,
    resume_by_an_unknown_id_returns_the_pending_interrupt_again,
    resume_without_a_checkpointer_is_an_error,
    static_breakpoints_before_and_after,
    command_update_at_a_static_breakpoint_continues,
    recursion_limit_two_suffices_for_a_resumed_chain,
    recursion_limit_one_on_a_resumed_chain,
    recursion_limit_stops_a_loop,
    command_to_parent_as_root_input_is_an_error,
    empty_command_input_is_an_error,
    recursion_limit_two_after_an_interrupt_in_the_first_node,
];

type Cmd = Command<JsonState>;

fn start() -> GraphInput<JsonState> {
    input(json!({"log": []}))
}

/// Two nodes in one step (and `after`, joined on both, when asked).
fn pair(
    a: (&str, crate::kit::Node),
    b: (&str, crate::kit::Node),
    after: bool,
) -> weft::graph::GraphResult<weft::graph::CompiledGraph<JsonState>> {
    let mut g = graph(log_state());
    let names = [a.0.to_owned(), b.0.to_owned()];
    for (name, node) in [a, b] {
        g.add_node(name, node);
        g.add_edge(START, name);
    }
    if after {
        g.add_node("after", note("after"));
        g.add_waiting_edge(names, "after");
    }
    g.compile_with(saver())
}

fn interrupt_pauses_and_resume_reruns_the_node(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = chain(vec![("a", note("a")), ("b", ask("b", 1)), ("c", note("c"))], saver())?;
        let t = thread("t");
        rec.invoke(&app, start(), &t).await;
        rec.state(&app, &t, false).await;
        rec.invoke(&app, Cmd::resume("yes"), &t).await;
        rec.state(&app, &t, false).await;
        rec.history(&app, &t).await;
        Ok(())
    })
}

fn two_interrupts_in_one_node_take_two_resumes(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = chain(vec![("a", ask("a", 2))], saver())?;
        let t = thread("t");
        rec.invoke(&app, start(), &t).await;
        rec.invoke(&app, Cmd::resume("x"), &t).await;
        rec.state(&app, &t, false).await;
        rec.invoke(&app, Cmd::resume("y"), &t).await;
        Ok(())
    })
}

fn resume_with_update_when_the_node_interrupts_again(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = chain(vec![("a", ask("a", 2)), ("b", note("b"))], saver())?;
        let t = thread("t");
        rec.invoke(&app, start(), &t).await;
        rec.invoke(&app, Cmd::resume("x").update(upd(json!({"log": ["upd"]}))), &t).await;
        rec.state(&app, &t, false).await;
        rec.invoke(&app, Cmd::resume("y"), &t).await;
        rec.history(&app, &t).await;
        Ok(())
    })
}

fn resume_with_update_when_the_node_finishes(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = chain(vec![("a", ask("a", 1)), ("b", note("b"))], saver())?;
        let t = thread("t");
        rec.invoke(&app, start(), &t).await;
        rec.invoke(&app, Cmd::resume("x").update(upd(json!({"log": ["upd"]}))), &t).await;
        rec.state(&app, &t, false).await;
        Ok(())
    })
}

fn parallel_interrupts_resumed_one_at_a_time_by_id(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = pair(("p", ask("p", 1)), ("q", ask("q", 1)), true)?;
        let t = thread("t");
        let out = rec.invoke(&app, start(), &t).await;
        let ids = ids_by_value(out.as_ref());
        rec.invoke(&app, Cmd::resume_by_id(answers(&ids, &[("p0?", "P")])), &t).await;
        rec.state(&app, &t, false).await;
        rec.invoke(&app, Cmd::resume_by_id(answers(&ids, &[("q0?", "Q")])), &t).await;
        rec.state(&app, &t, false).await;
        Ok(())
    })
}

fn parallel_interrupts_resumed_together_by_id(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = pair(("p", ask("p", 1)), ("q", ask("q", 1)), true)?;
        let t = thread("t");
        let out = rec.invoke(&app, start(), &t).await;
        let ids = ids_by_value(out.as_ref());
        rec.invoke(&app, Cmd::resume_by_id(answers(&ids, &[("p0?", "P"), ("q0?", "Q")])), &t).await;
        rec.history(&app, &t).await;
        Ok(())
    })
}

fn interrupt_beside_a_finished_task(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = pair(("p", ask("p", 1)), ("q", note("q")), false)?;
        let t = thread("t");
        rec.invoke(&app, start(), &t).await;
        rec.state(&app, &t, false).await;
        rec.invoke(&app, Cmd::resume("P"), &t).await;
        rec.state(&app, &t, false).await;
        Ok(())
    })
}

fn one_resume_value_for_two_pending_interrupts_is_an_error(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = pair(("p", ask("p", 1)), ("q", ask("q", 1)), false)?;
        let t = thread("t");
        rec.invoke(&app, start(), &t).await;
        rec.invoke(&app, Cmd::resume("x"), &t).await;
        rec.state(&app, &t, false).await;
        Ok(())
    })
}

fn resume_by_an_unknown_id_returns_the_pending_interrupt_again(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = chain(vec![("a", ask("a", 1))], saver())?;
        let t = thread("t");
        rec.invoke(&app, start(), &t).await;
        let mut unknown = Map::new();
        unknown.insert("0123456789abcdef0123456789abcdef".to_owned(), Value::from("x"));
        rec.invoke(&app, Cmd::resume_by_id(unknown), &t).await;
        rec.state(&app, &t, false).await;
        Ok(())
    })
}

fn resume_without_a_checkpointer_is_an_error(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = chain(vec![("a", ask("a", 1))], CompileConfig::new())?;
        let none = weft::RunnableConfig::default();
        rec.invoke(&app, start(), &none).await;
        rec.invoke(&app, Cmd::resume("x"), &none).await;
        Ok(())
    })
}

fn abc(config: CompileConfig) -> weft::graph::GraphResult<weft::graph::CompiledGraph<JsonState>> {
    chain(vec![("a", note("a")), ("b", note("b")), ("c", note("c"))], config)
}

fn static_breakpoints_before_and_after(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = abc(saver().interrupt_before(["b"]).interrupt_after(["c"]))?;
        let t = thread("t");
        rec.invoke(&app, start(), &t).await;
        rec.state(&app, &t, false).await;
        rec.invoke(&app, GraphInput::Resume, &t).await;
        rec.state(&app, &t, false).await;
        rec.invoke(&app, GraphInput::Resume, &t).await;
        rec.state(&app, &t, false).await;
        Ok(())
    })
}

fn command_update_at_a_static_breakpoint_continues(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = abc(saver().interrupt_before(["b"]))?;
        let t = thread("t");
        rec.invoke(&app, start(), &t).await;
        rec.invoke(&app, Cmd::new().update(upd(json!({"log": ["upd"]}))), &t).await;
        rec.state(&app, &t, false).await;
        Ok(())
    })
}

fn recursion_limit_two_suffices_for_a_resumed_chain(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = abc(saver().interrupt_after(["a"]))?;
        let t = thread("t");
        rec.invoke(&app, start(), &t).await;
        rec.invoke(&app, GraphInput::Resume, &t.clone().with_recursion_limit(2)).await;
        rec.state(&app, &t, false).await;
        Ok(())
    })
}

fn recursion_limit_one_on_a_resumed_chain(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = abc(saver().interrupt_after(["a"]))?;
        let t = thread("t");
        rec.invoke(&app, start(), &t).await;
        rec.invoke(&app, GraphInput::Resume, &t.clone().with_recursion_limit(1)).await;
        rec.state(&app, &t, false).await;
        Ok(())
    })
}

fn recursion_limit_stops_a_loop(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("spin", note("x"));
        g.add_edge(START, "spin").add_edge("spin", "spin");
        let app = g.compile_with(saver())?;
        let t = thread("t");
        rec.invoke(&app, start(), &t.clone().with_recursion_limit(4)).await;
        rec.state(&app, &t, false).await;
        Ok(())
    })
}

fn command_to_parent_as_root_input_is_an_error(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = chain(vec![("a", note("a"))], saver())?;
        rec.invoke(&app, Cmd::new().goto("a").to_parent(), &thread("t")).await;
        Ok(())
    })
}

fn empty_command_input_is_an_error(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = chain(vec![("a", note("a"))], saver())?;
        rec.invoke(&app, Cmd::new(), &thread("t")).await;
        Ok(())
    })
}

fn recursion_limit_two_after_an_interrupt_in_the_first_node(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = chain(vec![("a", ask("a", 1)), ("b", note("b")), ("c", note("c"))], saver())?;
        let t = thread("t");
        rec.invoke(&app, start(), &t).await;
        rec.invoke(&app, Cmd::resume("x"), &t.clone().with_recursion_limit(2)).await;
        rec.state(&app, &t, false).await;
        Ok(())
    })
}
