//! Nodes: deferred nodes, retry policies, node caches, remaining steps, message-list merging (replace by
//! id, remove), Send'd plain nodes that interrupt (python/s_nodes.py).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use weft::Message;
use weft::graph::{
    CachePolicy, Command, InMemoryCache, JsonState, MessagesState, NodeConfig, RetryPolicy, RunOptions,
    Runtime, START, Send, StateGraph, StreamMode,
};

use crate::kit::{answers, graph, ids_by_value, input, len, log_state, saver};
use crate::rec::{Rec, thread};
use crate::{Outcome, scenarios};

scenarios![
    deferred_node_runs_once_after_branches_of_unequal_length,
    retry_policy_reruns_a_failing_node,
    retry_policy_gives_up_after_max_attempts,
    retry_policy_list_applies_the_first_matching_policy,
    cached_node_reuses_its_writes,
    remaining_steps_count_down_to_the_limit,
    messages_are_replaced_by_id_and_removed,
    messages_remove_all_drops_what_came_before_it,
    sent_plain_nodes_interrupt_and_resume_together,
    a_node_returning_a_string_or_a_number_is_an_invalid_update,
    a_nodes_own_error_reaches_the_caller_as_itself,
];

fn quick_retry(max_attempts: u32) -> NodeConfig {
    let policy = RetryPolicy::new()
        .max_attempts(max_attempts)
        .initial_interval(Duration::from_millis(1))
        .jitter(false)
        .retry_on(|_| true);
    NodeConfig::new().retry(policy)
}

fn deferred_node_runs_once_after_branches_of_unequal_length(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("a", |_: &JsonState| json!({"log": ["a"]}));
        g.add_node("b1", |_: &JsonState| json!({"log": ["b1"]}));
        g.add_node("b2", |_: &JsonState| json!({"log": ["b2"]}));
        g.add_node_with(
            "end",
            |s: &JsonState| json!({"log": [format!("end saw {}", len(s, "log"))]}),
            NodeConfig::new().defer(),
        );
        g.add_edge(START, "a")
            .add_edge(START, "b1")
            .add_edge("b1", "b2")
            .add_edge("a", "end")
            .add_edge("b2", "end");
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        rec.history(&app, &thread("t")).await;
        Ok(())
    })
}

fn retry_policy_reruns_a_failing_node(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let tries = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&tries);
        let mut g = graph(log_state());
        g.add_node_with(
            "shaky",
            move |_: &JsonState| -> weft::Result<Value> {
                let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
                if n < 3 {
                    Err(weft::Error::msg("not yet"))
                } else {
                    Ok(json!({"log": [format!("shaky after {n} tries")]}))
                }
            },
            quick_retry(3),
        );
        g.add_edge(START, "shaky");
        let app = g.compile_with(saver())?;
        let modes = [StreamMode::Updates, StreamMode::Values];
        rec.stream(&app, input(json!({"log": []})), &thread("t"), &modes, RunOptions::default()).await;
        rec.note(json!({"op": "tries", "tries": tries.load(Ordering::SeqCst)}));
        Ok(())
    })
}

fn retry_policy_gives_up_after_max_attempts(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let tries = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&tries);
        let mut g = graph(log_state());
        g.add_node_with(
            "broken",
            move |_: &JsonState| -> weft::Result<Value> {
                counted.fetch_add(1, Ordering::SeqCst);
                Err(weft::Error::msg("never"))
            },
            quick_retry(2),
        );
        g.add_edge(START, "broken");
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        rec.note(json!({"op": "tries", "tries": tries.load(Ordering::SeqCst)}));
        rec.state(&app, &thread("t"), false).await;
        Ok(())
    })
}

fn retry_policy_list_applies_the_first_matching_policy(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let tries = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&tries);
        let quick =
            |n| RetryPolicy::new().max_attempts(n).initial_interval(Duration::from_millis(1)).jitter(false);
        let policies = [
            quick(5).retry_on(|e| matches!(e, weft::Error::Timeout { .. })),
            quick(4).retry_on(|e| matches!(e, weft::Error::Custom(_))),
        ];
        let mut g = graph(log_state());
        g.add_node_with(
            "shaky",
            move |_: &JsonState| -> weft::Result<Value> {
                match counted.fetch_add(1, Ordering::SeqCst) + 1 {
                    n @ 1..=2 => {
                        Err(weft::Error::Timeout { what: format!("try {n}"), after: Duration::ZERO })
                    }
                    3 => Err(weft::Error::msg("not yet")),
                    n => Ok(json!({"log": [format!("shaky after {n} tries")]})),
                }
            },
            NodeConfig::new().retry_policies(policies),
        );
        g.add_edge(START, "shaky");
        let app = g.compile_with(saver())?;
        rec.invoke(&app, input(json!({"log": []})), &thread("t")).await;
        rec.note(json!({"op": "tries", "tries": tries.load(Ordering::SeqCst)}));
        Ok(())
    })
}

fn cached_node_reuses_its_writes(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&calls);
        let mut g = graph(log_state());
        g.add_node_with(
            "slow",
            move |_: &JsonState| {
                let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
                json!({"log": [format!("slow #{n}")]})
            },
            NodeConfig::new().cache(CachePolicy::new()),
        );
        g.add_edge(START, "slow");
        let app = g.compile_with(saver().cache(Arc::new(InMemoryCache::new())))?;
        for (tid, item) in [("t1", "x"), ("t2", "x"), ("t3", "y")] {
            let start = input(json!({"log": [item]}));
            rec.stream(&app, start, &thread(tid), &[StreamMode::Updates], RunOptions::default()).await;
        }
        rec.note(json!({"op": "calls", "calls": calls.load(Ordering::SeqCst)}));
        Ok(())
    })
}

fn remaining_steps_count_down_to_the_limit(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node(
            "a",
            |_: &JsonState, rt: &Runtime| json!({"log": [format!("a has {}", rt.remaining_steps())]}),
        );
        g.add_node(
            "b",
            |_: &JsonState, rt: &Runtime| json!({"log": [format!("b has {}", rt.remaining_steps())]}),
        );
        g.add_edge(START, "a").add_edge("a", "b");
        let config = weft::RunnableConfig::default().with_recursion_limit(5);
        rec.invoke(&g.compile()?, input(json!({"log": []})), &config).await;
        Ok(())
    })
}

fn messages_are_replaced_by_id_and_removed(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = StateGraph::<MessagesState>::new();
        g.add_node("edit", |_: &MessagesState| {
            MessagesState::update().messages(vec![
                Message::human("edited").with_id("m1"),
                Message::remove("m2"),
                Message::ai("new").with_id("m3"),
            ])
        });
        g.add_edge(START, "edit");
        let app = g.compile_with(saver())?;
        let t = thread("t");
        let first = vec![Message::human("first").with_id("m1"), Message::ai("second").with_id("m2")];
        rec.invoke(&app, MessagesState::update().messages(first), &t).await;
        rec.update(
            &app,
            &t,
            vec![MessagesState::update().messages(vec![Message::remove("m3")])],
            Some("edit"),
        )
        .await;
        rec.state(&app, &t, false).await;
        Ok(())
    })
}

fn messages_remove_all_drops_what_came_before_it(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    use weft::graph::messages::REMOVE_ALL_MESSAGES;
    Box::pin(async move {
        let mut g = StateGraph::<MessagesState>::new();
        g.add_node("a", |_: &MessagesState| {
            MessagesState::update()
                .messages(vec![Message::remove(REMOVE_ALL_MESSAGES), Message::ai("summary").with_id("s")])
        });
        g.add_node("b", |_: &MessagesState| {
            MessagesState::update().messages(vec![Message::ai("b").with_id("b")])
        });
        g.add_edge(START, "a").add_edge(START, "b");
        let app = g.compile_with(saver())?;
        let t = thread("t");
        let first = vec![Message::human("first").with_id("m1"), Message::ai("second").with_id("m2")];
        rec.invoke(&app, MessagesState::update().messages(first), &t).await;
        let fresh = vec![
            Message::human("old").with_id("o"),
            Message::remove(REMOVE_ALL_MESSAGES),
            Message::human("fresh").with_id("f"),
        ];
        rec.update(&app, &t, vec![MessagesState::update().messages(fresh)], Some("a")).await;
        rec.state(&app, &t, false).await;
        Ok(())
    })
}

fn sent_plain_nodes_interrupt_and_resume_together(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut g = graph(log_state());
        g.add_node("w", |p: Value, rt: &Runtime| -> weft::Result<Value> {
            let topic = p["topic"].as_str().unwrap_or_default().to_owned();
            let answer: String = rt.interrupt(format!("{topic}?"))?;
            Ok(json!({"log": [format!("{topic}:{answer}")]}))
        });
        g.set_conditional_entry_point(
            |_: &JsonState| {
                ["x", "y"].iter().map(|t| Send::new("w", json!({"topic": t}))).collect::<Vec<_>>()
            },
            None,
        );
        let app = g.compile_with(saver())?;
        let t = thread("t");
        let out = rec.invoke(&app, input(json!({"log": []})), &t).await;
        let ids = ids_by_value(out.as_ref());
        rec.state(&app, &t, false).await;
        let resume = answers(&ids, &[("x?", "X"), ("y?", "Y")]);
        rec.invoke(&app, Command::<JsonState>::resume_by_id(resume), &t).await;
        Ok(())
    })
}

fn a_node_returning_a_string_or_a_number_is_an_invalid_update(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        for (tid, value) in [("s", json!("hello")), ("n", json!(5))] {
            let mut g = graph(log_state());
            g.add_node("a", move |_: &JsonState| value.clone());
            g.add_edge(START, "a");
            let app = g.compile_with(saver())?;
            match app.invoke(input(json!({"log": []})), &thread(tid)).await {
                Ok(_) => rec.note(json!({"op": "invoke", "ok": true})),
                Err(err) => rec.note(json!({"op": "invoke", "error": crate::observe::error(&err),
                    "message": err.to_string()})),
            }
            rec.state(&app, &thread(tid), false).await;
        }
        Ok(())
    })
}

/// The scenario's own failure (Python's `NodeFailure`).
#[derive(Debug)]
struct NodeFailure(&'static str);

impl std::fmt::Display for NodeFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for NodeFailure {}

fn quota_spent(_: &JsonState) -> weft::Result<Value> {
    Err(weft::Error::custom(NodeFailure("quota spent")))
}

fn a_nodes_own_error_reaches_the_caller_as_itself(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let mut inner = graph(log_state());
        inner.add_node("call", quota_spent);
        inner.add_edge(START, "call");
        let inner = inner.compile()?;
        for tid in ["own", "sub"] {
            let mut g = graph(log_state());
            if tid == "own" {
                g.add_node("a", quota_spent);
            } else {
                g.add_node("a", inner.clone());
            }
            g.add_edge(START, "a");
            let app = g.compile_with(saver())?;
            match app.invoke(input(json!({"log": []})), &thread(tid)).await {
                Ok(_) => rec.note(json!({"op": "invoke", "ok": true})),
                Err(err) => match err.downcast_node_error::<NodeFailure>() {
                    Some(own) => {
                        rec.note(json!({"op": "invoke", "caught": "NodeFailure", "message": own.to_string()}))
                    }
                    None => rec.note(json!({"op": "invoke", "error": crate::observe::error(&err)})),
                },
            }
            // The saved task error is the node's own.
            let tasks = app.get_state(&thread(tid)).await.map(|s| s.tasks).unwrap_or_default();
            let own: Vec<bool> = tasks.iter().map(|t| t.error.as_deref() == Some("quota spent")).collect();
            rec.note(json!({"op": "task_errors", "own": own}));
        }
        Ok(())
    })
}
