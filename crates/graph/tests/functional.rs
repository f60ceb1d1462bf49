//! The functional API: entrypoints and tasks, with LangGraph's semantics (saved task results reused on
//! resume, `previous`, `Final`, streamed returns, tasks outside an entrypoint).
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use serde::{Deserialize, Serialize};
use weft_graph::func::{Final, FuncError, FuncState, Task, entrypoint, task};
use weft_graph::{
    Command, CompileConfig, CompiledGraph, Durability, GraphError, InMemorySaver, RetryPolicy, RunOptions,
    START, State, StateGraph, StreamData, StreamMode,
};
use weft_runnable_core::{Error, RunnableConfig};

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

fn saver() -> CompileConfig {
    CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))
}

/// A task that counts its runs.
fn counted(name: &str, runs: &Arc<AtomicUsize>) -> Task<i64, i64> {
    let runs = Arc::clone(runs);
    task(name, move |x: i64| {
        let runs = Arc::clone(&runs);
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            // Later inputs finish first: results still come back in call order.
            tokio::time::sleep(Duration::from_millis(u64::try_from(10 - x.min(10)).unwrap())).await;
            Ok(x * 10)
        }
    })
}

/// The review workflow's graph: numbers in, the tasks' results and the answer out.
type Review = CompiledGraph<FuncState<Vec<i64>, (Vec<i64>, String)>>;

/// Multiplies each number in parallel tasks, asks a question, returns the tasks' results and the answer.
fn review(runs: &Arc<AtomicUsize>) -> Review {
    let times = counted("times_ten", runs);
    entrypoint("review", move |numbers: Vec<i64>, _previous: Option<(Vec<i64>, String)>, rt| {
        let times = times.clone();
        async move {
            let results = futures::future::try_join_all(numbers.into_iter().map(|n| times.call(n))).await?;
            let answer: String = rt.interrupt(results.clone())?;
            Ok((results, answer))
        }
    })
    .compile_with(saver())
    .unwrap()
}

#[tokio::test]
async fn resume_reuses_finished_task_results_without_running_them_again() {
    let runs = Arc::new(AtomicUsize::new(0));
    let app = review(&runs);
    let cfg = thread("t");
    let paused = app.invoke(vec![1, 2, 3], &cfg).await.unwrap();
    assert_eq!(paused.interrupts.len(), 1);
    assert_eq!(paused.interrupts[0].value, serde_json::json!([10, 20, 30]));
    assert_eq!(paused.value.value(), None);
    assert_eq!(runs.load(Ordering::SeqCst), 3);

    let snapshot = app.get_state(&cfg).await.unwrap();
    assert_eq!(snapshot.next, ["review"]);
    assert_eq!(snapshot.values.value(), None);
    assert_eq!(snapshot.interrupts.len(), 1);

    let done = app.invoke(Command::resume("fine"), &cfg).await.unwrap();
    assert!(done.interrupts.is_empty());
    assert_eq!(done.value.value(), Some(&(vec![10, 20, 30], "fine".to_owned())));
    assert_eq!(runs.load(Ordering::SeqCst), 3, "finished tasks ran again on resume");
    let snapshot = app.get_state(&cfg).await.unwrap();
    assert!(snapshot.next.is_empty());
    assert_eq!(snapshot.values.value(), Some(&(vec![10, 20, 30], "fine".to_owned())));

    // A new run on the thread runs its tasks afresh.
    app.invoke(vec![4], &cfg).await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn resume_reuses_task_results_in_exit_and_sync_durability() {
    for durability in [Durability::Exit, Durability::Sync] {
        let runs = Arc::new(AtomicUsize::new(0));
        let app = review(&runs);
        let cfg = thread("t");
        let options = || RunOptions { durability, ..RunOptions::default() };
        app.invoke_with(vec![1, 2], &cfg, options()).await.unwrap();
        let done = app.invoke_with(Command::resume("ok"), &cfg, options()).await.unwrap();
        assert_eq!(done.value.value(), Some(&(vec![10, 20], "ok".to_owned())), "{durability:?}");
        assert_eq!(runs.load(Ordering::SeqCst), 2, "{durability:?}");
    }
}

#[tokio::test]
async fn previous_is_the_last_return_value_and_final_saves_another() {
    let app = entrypoint("accumulate", |n: i64, previous: Option<i64>, _rt| async move {
        let total = previous.unwrap_or(0) + n;
        // Return what came before, remember the running total.
        Ok(Final::new(previous, total))
    })
    .compile_with(saver())
    .unwrap();
    let cfg = thread("t");
    assert_eq!(app.invoke(3, &cfg).await.unwrap().value.value(), Some(&None));
    assert_eq!(app.invoke(4, &cfg).await.unwrap().value.value(), Some(&Some(3)));
    let out = app.invoke(5, &cfg).await.unwrap();
    assert_eq!(out.value.value(), Some(&Some(7)));
    assert_eq!(out.value.previous(), Some(&12));
    // Another thread starts from nothing.
    assert_eq!(app.invoke(1, &thread("other")).await.unwrap().value.value(), Some(&None));

    // A plain return value is also what is saved.
    let echo =
        entrypoint("echo", |n: i64, previous: Option<i64>, _rt| async move { Ok(n + previous.unwrap_or(0)) })
            .compile_with(saver())
            .unwrap();
    assert_eq!(echo.invoke(2, &cfg).await.unwrap().value.value(), Some(&2));
    assert_eq!(echo.invoke(2, &cfg).await.unwrap().value.value(), Some(&4));
}

#[tokio::test]
async fn without_a_checkpointer_previous_is_none() {
    let app =
        entrypoint("plain", |n: i64, previous: Option<i64>, _rt| async move { Ok(previous.unwrap_or(n)) })
            .compile()
            .unwrap();
    assert_eq!(app.invoke(1, &RunnableConfig::default()).await.unwrap().value.value(), Some(&1));
    assert_eq!(app.invoke(2, &RunnableConfig::default()).await.unwrap().value.value(), Some(&2));
}

#[tokio::test]
async fn a_task_called_outside_an_entrypoint_is_a_clear_error() {
    let double = task("double", |x: i64| async move { Ok(x * 2) });
    let err = double.call(2).await.unwrap_err();
    let Error::Custom(inner) = &err else { panic!("{err:?}") };
    assert_eq!(
        inner.downcast_ref::<FuncError>(),
        Some(&FuncError::OutsideEntrypoint { task: "double".to_owned() })
    );
    assert!(err.to_string().contains("task 'double' was called outside an entrypoint"), "{err}");

    // Inside a plain graph node the same: a node's writes are not task results.
    #[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
    struct Plain {
        n: i64,
    }
    let mut graph = StateGraph::<Plain>::new();
    graph.add_node("node", move |s: Plain| {
        let double = double.clone();
        async move { Ok::<_, Error>(Plain::update().n(double.call(s.n).await?)) }
    });
    graph.add_edge(START, "node");
    let err =
        graph.compile().unwrap().invoke(Plain::update().n(1), &RunnableConfig::default()).await.unwrap_err();
    assert!(matches!(&err, GraphError::Node { node, .. } if node == "node"), "{err:?}");
    assert!(err.to_string().contains("called outside an entrypoint"), "{err}");

    // And in a tokio task spawned by the entrypoint, which does not belong to the run.
    let inner = task("inner", |x: i64| async move { Ok(x) });
    let app = entrypoint("spawner", move |n: i64, _p: Option<i64>, _rt| {
        let inner = inner.clone();
        async move {
            let handle = tokio::spawn(async move { inner.call(n).await });
            handle.await.map_err(|e| Error::msg(e.to_string()))?
        }
    })
    .compile()
    .unwrap();
    let err = app.invoke(1, &RunnableConfig::default()).await.unwrap_err();
    assert!(err.to_string().contains("task 'inner' was called outside an entrypoint"), "{err}");
}

#[tokio::test]
async fn a_failed_task_runs_again_on_resume_and_finished_ones_do_not() {
    let runs = Arc::new(AtomicUsize::new(0));
    let flaky_runs = Arc::new(AtomicUsize::new(0));
    let good = counted("good", &runs);
    let flaky = {
        let flaky_runs = Arc::clone(&flaky_runs);
        task("flaky", move |x: i64| {
            let n = flaky_runs.fetch_add(1, Ordering::SeqCst);
            async move { if n == 0 { Err(Error::msg("first try fails")) } else { Ok(x + 1) } }
        })
    };
    let app = entrypoint("flow", move |x: i64, _p: Option<i64>, _rt| {
        let (good, flaky) = (good.clone(), flaky.clone());
        async move {
            let a = good.call(x).await?;
            let b = flaky.call(a).await?;
            Ok(b)
        }
    })
    .compile_with(saver())
    .unwrap();
    let cfg = thread("t");
    let err = app.invoke(1, &cfg).await.unwrap_err();
    assert!(err.to_string().contains("first try fails"), "{err}");
    let done = app.invoke(weft_graph::GraphInput::Resume, &cfg).await.unwrap();
    assert_eq!(done.value.value(), Some(&11));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(flaky_runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_task_retries_as_its_policy_says() {
    let tries = Arc::new(AtomicUsize::new(0));
    let shaky = {
        let tries = Arc::clone(&tries);
        task("shaky", move |x: i64| {
            let n = tries.fetch_add(1, Ordering::SeqCst);
            async move { if n < 2 { Err(Error::msg("not yet")) } else { Ok(x) } }
        })
        .with_retry(
            RetryPolicy::new()
                .max_attempts(3)
                .initial_interval(Duration::ZERO)
                .jitter(false)
                .retry_on(|_| true),
        )
    };
    let app = entrypoint("retrying", move |x: i64, _p: Option<i64>, _rt| {
        let shaky = shaky.clone();
        async move { shaky.call(x).await }
    })
    .compile()
    .unwrap();
    assert_eq!(app.invoke(7, &RunnableConfig::default()).await.unwrap().value.value(), Some(&7));
    assert_eq!(tries.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn tasks_may_call_tasks_and_their_results_are_saved_too() {
    let runs = Arc::new(AtomicUsize::new(0));
    let leaf = counted("leaf", &runs);
    let outer = task("outer", move |x: i64| {
        let leaf = leaf.clone();
        async move { Ok(leaf.call(x).await? + leaf.call(x + 1).await?) }
    });
    let app = entrypoint("nested", move |x: i64, _p: Option<i64>, rt| {
        let outer = outer.clone();
        async move {
            let sum = outer.call(x).await?;
            let bonus: i64 = rt.interrupt(sum)?;
            Ok(sum + bonus)
        }
    })
    .compile_with(saver())
    .unwrap();
    let cfg = thread("t");
    app.invoke(1, &cfg).await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let done = app.invoke(Command::resume(5), &cfg).await.unwrap();
    assert_eq!(done.value.value(), Some(&35));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

// Time is paused (it advances only when every task waits), so the tasks' sleeps end in the order of their
// lengths however loaded the machine is.
#[tokio::test(start_paused = true)]
async fn updates_stream_each_task_return_then_the_entrypoint_return() {
    let runs = Arc::new(AtomicUsize::new(0));
    let app = review(&runs);
    let cfg = thread("t");
    let chunks = |input| {
        let app = app.clone();
        let cfg = cfg.clone();
        async move {
            let mut out = Vec::new();
            let mut parts = app.stream(input, &cfg, &[StreamMode::Updates]);
            while let Some(part) = parts.next().await {
                match part.unwrap().data {
                    StreamData::Returned { node, value } => out.push(format!("{node}: {value}")),
                    StreamData::Interrupt(list) => out.push(format!("interrupt: {}", list[0].value)),
                    other => out.push(format!("{other:?}")),
                }
            }
            out
        }
    };
    // Parallel tasks stream as they finish (the last input finishes first here).
    let first =
        chunks(weft_graph::GraphInput::Update(vec![weft_graph::func::FuncUpdate::input(vec![1, 9])])).await;
    assert_eq!(first, ["times_ten: 90", "times_ten: 10", "interrupt: [10,90]"]);
    // On resume the saved task results are not streamed again.
    let second = chunks(weft_graph::GraphInput::Command(Command::resume("ok"))).await;
    assert_eq!(second, [r#"review: [[10,90],"ok"]"#]);
}

#[tokio::test]
async fn tasks_stream_their_start_and_result_in_tasks_mode() {
    let double = task("double", |x: i64| async move { Ok(x * 2) });
    let app = entrypoint("wf", move |x: i64, _p: Option<i64>, _rt| {
        let double = double.clone();
        async move { double.call(x).await }
    })
    .compile()
    .unwrap();
    let mut parts = app.stream(4, &RunnableConfig::default(), &[StreamMode::Tasks]);
    let mut seen = Vec::new();
    while let Some(part) = parts.next().await {
        match part.unwrap().data {
            StreamData::TaskStart { name, input, triggers, .. } => {
                seen.push(format!("start {name} {input} {triggers:?}"))
            }
            StreamData::TaskResult { name, result, error, .. } => {
                seen.push(format!("end {name} {result:?} {error:?}"))
            }
            _ => {}
        }
    }
    assert_eq!(
        seen,
        [
            r#"start wf 4 ["__start__"]"#.to_owned(),
            r#"start double 4 ["__pregel_push"]"#.to_owned(),
            r#"end double [("__return__", Number(8))] None"#.to_owned(),
            r#"end wf [("__end__", Number(8)), ("__previous__", Number(8))] None"#.to_owned(),
        ]
    );
}

#[tokio::test]
async fn an_entrypoint_is_a_node_of_another_graph_and_resumes_inside_it() {
    #[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
    struct Outer {
        topic: String,
        #[state(append)]
        notes: Vec<String>,
    }
    let runs = Arc::new(AtomicUsize::new(0));
    let write = {
        let runs = Arc::clone(&runs);
        task("write", move |topic: String| {
            runs.fetch_add(1, Ordering::SeqCst);
            async move { Ok(format!("essay on {topic}")) }
        })
    };
    let inner = entrypoint("draft", move |s: Outer, _p: Option<OuterUpdate>, rt| {
        let write = write.clone();
        async move {
            let essay = write.call(s.topic).await?;
            let verdict: String = rt.interrupt(essay.clone())?;
            Ok(Outer::update().notes(vec![essay, verdict]))
        }
    })
    .compile()
    .unwrap();
    let mut graph = StateGraph::<Outer>::new();
    graph.add_node("draft", inner.as_node());
    graph.add_edge(START, "draft");
    let app = graph.compile_with(saver()).unwrap();
    let cfg = thread("t");
    let paused = app.invoke(Outer::update().topic("cats"), &cfg).await.unwrap();
    assert_eq!(paused.interrupts[0].value, "essay on cats");
    let done = app.invoke(Command::resume("good"), &cfg).await.unwrap();
    assert_eq!(done.value.notes, ["essay on cats", "good"]);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_task_result_is_saved_as_it_finishes_while_the_entrypoint_still_runs() {
    use weft_graph::Checkpointer;
    use weft_graph::checkpoint::CheckpointConfig;
    for durability in [Durability::Sync, Durability::Async] {
        let saver = Arc::new(InMemorySaver::new());
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let double = task("double", |x: i64| async move { Ok(x * 2) });
        let (probe, record) = (Arc::clone(&saver), Arc::clone(&seen));
        let app = entrypoint("wf", move |x: i64, _p: Option<i64>, _rt| {
            let (double, probe, record) = (double.clone(), Arc::clone(&probe), Arc::clone(&record));
            async move {
                let y = double.call(x).await?;
                // Give the run a turn, then look at what the thread holds: the call's result is saved
                // before the entrypoint returns, so a run that died here would not run it again.
                tokio::time::sleep(Duration::from_millis(20)).await;
                let tuple = probe.get_tuple(&CheckpointConfig::thread("t")).await.unwrap().unwrap();
                let writes: Vec<(String, serde_json::Value)> =
                    tuple.pending_writes.into_iter().map(|w| (w.channel, w.value)).collect();
                record.lock().unwrap().extend(writes);
                Ok(y)
            }
        })
        .compile_with(CompileConfig::new().checkpointer(saver))
        .unwrap();
        let options = RunOptions { durability, ..RunOptions::default() };
        app.invoke_with(4, &thread("t"), options).await.unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            [("__return__".to_owned(), serde_json::json!(8))],
            "{durability:?}"
        );
    }
}

#[tokio::test]
async fn an_entrypoint_reaches_the_store_and_the_run_context() {
    use weft_graph::{InMemoryStore, Store};
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let app = entrypoint("remember", |fact: String, _p: Option<usize>, rt: weft_graph::Runtime| async move {
        let store = rt.store().ok_or_else(|| Error::msg("no store"))?;
        let user = rt.context::<String>().cloned().unwrap_or_default();
        store
            .put(std::slice::from_ref(&user), "fact", serde_json::json!({"text": fact}))
            .await
            .map_err(|e| Error::msg(e.to_string()))?;
        Ok(store.search(&[user], Default::default()).await.map_err(|e| Error::msg(e.to_string()))?.len())
    })
    .compile_with(CompileConfig::new().store(Arc::clone(&store)))
    .unwrap();
    let options = RunOptions { context: Some(Arc::new("ada".to_owned())), ..RunOptions::default() };
    let out = app.invoke_with("likes tea".to_owned(), &RunnableConfig::default(), options).await.unwrap();
    assert_eq!(out.value.value(), Some(&1));
    let item = store.get(&["ada".to_owned()], "fact").await.unwrap().unwrap();
    assert_eq!(item.value, serde_json::json!({"text": "likes tea"}));
}

#[tokio::test]
async fn a_task_may_interrupt_and_its_resume_reaches_it_by_id() {
    let runs = Arc::new(AtomicUsize::new(0));
    let before = counted("before", &runs);
    let ask = task("ask", |q: String| async move {
        let answer: String = weft_graph::func::interrupt(format!("{q}?"))?;
        Ok(format!("{q}: {answer}"))
    });
    let app = entrypoint("flow", move |x: i64, _p: Option<String>, _rt| {
        let (before, ask) = (before.clone(), ask.clone());
        async move {
            let n = before.call(x).await?;
            ask.call(format!("got {n}")).await
        }
    })
    .compile_with(saver())
    .unwrap();
    let cfg = thread("t");
    let paused = app.invoke(1, &cfg).await.unwrap();
    assert_eq!(paused.interrupts.len(), 1);
    assert_eq!(paused.interrupts[0].value, "got 10?");
    // The pause is the task's and its caller's: one pending interrupt.
    let snapshot = app.get_state(&cfg).await.unwrap();
    assert_eq!(snapshot.interrupts.len(), 1);
    let mut answers = serde_json::Map::new();
    answers.insert(paused.interrupts[0].id.clone(), serde_json::json!("yes"));
    let done = app.invoke(Command::resume_by_id(answers), &cfg).await.unwrap();
    assert_eq!(done.value.value().map(String::as_str), Some("got 10: yes"));
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // Outside an entrypoint there is nothing to pause.
    let err = weft_graph::func::interrupt::<String>("anyone?").unwrap_err();
    let Error::Custom(inner) = &err else { panic!("{err:?}") };
    assert_eq!(inner.downcast_ref::<FuncError>(), Some(&FuncError::InterruptOutsideEntrypoint));
    assert!(weft_graph::func::runtime().is_none());
}
