//! Time travel: replaying from an old checkpoint, update_state (as a node, on a fresh thread, at an old
//! checkpoint, __copy__, __input__, END, inferred), bulk_update_state, and what the history shows
//! (python/s_time_travel.py).

use futures::future::BoxFuture;
use serde_json::json;
use weft::RunnableConfig;
use weft::graph::{
    CompileConfig, CompiledGraph, END, GraphInput, GraphResult, JsonState, ListOptions, StateUpdate,
};

use crate::kit::{chain, input, saver, upd};
use crate::rec::{Rec, thread};
use crate::{Outcome, scenarios};

scenarios![
    replaying_from_an_old_checkpoint_reruns_what_follows,
    update_state_then_continue_runs_from_the_update,
    update_state_on_a_fresh_thread,
    update_state_at_an_old_checkpoint_starts_a_branch,
    update_state_as_copy_makes_a_sibling,
    update_state_as_end_clears_next,
    update_state_as_input_starts_over,
    update_state_infers_the_last_writer,
    bulk_update_state_saves_one_checkpoint_per_superstep,
    bulk_update_state_without_supersteps_is_a_value_error,
];

/// `a -> b -> c`, each writing its name to `log` and `last`.
fn abc(config: CompileConfig) -> GraphResult<CompiledGraph<JsonState>> {
    let node = |n: &'static str| -> crate::kit::Node {
        use weft::graph::IntoNode as _;
        (move |_: &JsonState| json!({"log": [n], "last": n})).into_node()
    };
    chain(vec![("a", node("a")), ("b", node("b")), ("c", node("c"))], config)
}

/// The config of the newest checkpoint whose `next` is `next`.
async fn at(app: &CompiledGraph<JsonState>, next: &[&str]) -> RunnableConfig {
    let history = app.get_state_history(&thread("t"), ListOptions::default()).await.unwrap_or_default();
    let id = history
        .iter()
        .find(|s| s.next.iter().map(String::as_str).eq(next.iter().copied()))
        .and_then(|s| s.config.as_ref())
        .and_then(|c| c.checkpoint_id.clone())
        .unwrap_or_default();
    thread("t").with_configurable("checkpoint_id", id)
}

fn start() -> GraphInput<JsonState> {
    input(json!({"log": []}))
}

fn replaying_from_an_old_checkpoint_reruns_what_follows(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = abc(saver())?;
        rec.invoke(&app, start(), &thread("t")).await;
        let cfg = at(&app, &["b"]).await;
        rec.invoke(&app, GraphInput::Resume, &cfg).await;
        rec.history(&app, &thread("t")).await;
        Ok(())
    })
}

fn update_state_then_continue_runs_from_the_update(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = abc(saver().interrupt_before(["b"]))?;
        let t = thread("t");
        rec.invoke(&app, start(), &t).await;
        rec.update(&app, &t, vec![upd(json!({"log": ["fix"]}))], Some("a")).await;
        rec.state(&app, &t, false).await;
        rec.invoke(&app, GraphInput::Resume, &t).await;
        rec.history(&app, &t).await;
        Ok(())
    })
}

fn update_state_on_a_fresh_thread(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = abc(saver())?;
        let t = thread("t");
        rec.update(&app, &t, vec![upd(json!({"log": ["seed"]}))], Some("a")).await;
        rec.state(&app, &t, false).await;
        rec.invoke(&app, GraphInput::Resume, &t).await;
        rec.history(&app, &t).await;
        Ok(())
    })
}

fn update_state_at_an_old_checkpoint_starts_a_branch(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = abc(saver())?;
        rec.invoke(&app, start(), &thread("t")).await;
        let old = at(&app, &["c"]).await;
        let cfg = rec.update(&app, &old, vec![upd(json!({"log": ["alt"]}))], Some("b")).await;
        rec.invoke(&app, GraphInput::Resume, &cfg.unwrap_or_else(|| thread("t"))).await;
        rec.history(&app, &thread("t")).await;
        Ok(())
    })
}

fn update_state_as_copy_makes_a_sibling(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = abc(saver().interrupt_before(["c"]))?;
        rec.invoke(&app, start(), &thread("t")).await;
        let old = at(&app, &["b"]).await;
        rec.update(&app, &old, vec![], Some("__copy__")).await;
        rec.history(&app, &thread("t")).await;
        Ok(())
    })
}

fn update_state_as_end_clears_next(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = abc(saver().interrupt_before(["b"]))?;
        let t = thread("t");
        rec.invoke(&app, start(), &t).await;
        rec.update(&app, &t, vec![upd(json!({"log": ["stop"]}))], Some(END)).await;
        rec.state(&app, &t, false).await;
        Ok(())
    })
}

fn update_state_as_input_starts_over(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = abc(saver().interrupt_before(["b"]))?;
        let t = thread("t");
        rec.invoke(&app, start(), &t).await;
        rec.update(&app, &t, vec![upd(json!({"log": ["again"]}))], Some("__input__")).await;
        rec.state(&app, &t, false).await;
        rec.invoke(&app, GraphInput::Resume, &t).await;
        Ok(())
    })
}

fn update_state_infers_the_last_writer(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = abc(saver().interrupt_before(["c"]))?;
        let t = thread("t");
        rec.invoke(&app, start(), &t).await;
        rec.update(&app, &t, vec![upd(json!({"last": "patched"}))], None).await;
        rec.state(&app, &t, false).await;
        Ok(())
    })
}

fn bulk_update_state_saves_one_checkpoint_per_superstep(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = abc(saver())?;
        let t = thread("t");
        let step = |node: &str, log: &str| {
            vec![StateUpdate { as_node: Some(node.to_owned()), updates: vec![upd(json!({"log": [log]}))] }]
        };
        match app.bulk_update_state(&t, vec![step("a", "x"), step("b", "y")]).await {
            Ok(_) => rec.note(json!({"op": "bulk_update_state", "ok": true})),
            Err(err) => rec.note(json!({"op": "bulk_update_state", "error": crate::rec::error(&err)})),
        }
        rec.state(&app, &t, false).await;
        rec.history(&app, &t).await;
        Ok(())
    })
}

fn bulk_update_state_without_supersteps_is_a_value_error(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = abc(saver())?;
        let t = thread("t");
        rec.invoke(&app, input(json!({"log": []})), &t).await;
        for supersteps in [Vec::new(), vec![Vec::new()]] {
            match app.bulk_update_state(&t, supersteps).await {
                Ok(_) => rec.note(json!({"op": "bulk_update_state", "ok": true})),
                Err(err) => rec.note(json!({"op": "bulk_update_state", "error": crate::rec::error(&err),
                    "message": err.to_string()})),
            }
        }
        rec.state(&app, &t, false).await;
        Ok(())
    })
}
