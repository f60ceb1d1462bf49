//! The functional API: entrypoints and tasks. Parallel tasks, an interrupt and a resume that reuses the
//! finished tasks, `previous`, `Final`, streamed returns (python/s_functional.py).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use weft::graph::func::{Final, FuncState, Task, entrypoint, task};
use weft::graph::{Command, CompiledGraph, GraphInput, RunOptions, StreamMode};

use crate::kit::saver;
use crate::observe::{Observe, interrupts};
use crate::rec::{Rec, thread};
use crate::{Outcome, scenarios};

scenarios![
    functional_parallel_tasks_stream_their_returns,
    functional_resume_reuses_finished_tasks,
    functional_interrupt_with_a_bare_value_hides_it,
    functional_previous_and_final,
    functional_task_error_fails_the_run_and_resume_reruns_it,
    functional_history_and_saved_checkpoints,
    functional_interrupt_inside_a_task,
];

/// A task multiplying by ten that counts its runs; later inputs finish first.
fn times_ten(runs: &Arc<AtomicUsize>) -> Task<i64, i64> {
    let runs = Arc::clone(runs);
    task("times_ten", move |x: i64| {
        let runs = Arc::clone(&runs);
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20 * u64::try_from(4 - x).unwrap_or(0))).await;
            Ok(x * 10)
        }
    })
}

fn runs(rec: &mut Rec, runs: &AtomicUsize) {
    rec.note(json!({"op": "runs", "n": runs.load(Ordering::SeqCst)}));
}

/// What `get_state` shows of a functional thread: values, next, tasks and interrupts.
async fn paused_state<S: Observe>(rec: &mut Rec, app: &CompiledGraph<S>, tid: &str) -> Outcome {
    let s = app.get_state(&thread(tid)).await?;
    let tasks: Vec<Value> = s
        .tasks
        .iter()
        .map(|t| json!({"id": t.id, "name": t.name, "interrupts": interrupts(&t.interrupts)}))
        .collect();
    rec.note(json!({"op": "state", "values": s.values.values(), "next": s.next, "tasks": tasks,
        "interrupts": interrupts(&s.interrupts)}));
    Ok(())
}

fn functional_parallel_tasks_stream_their_returns(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let count = Arc::new(AtomicUsize::new(0));
        let ten = times_ten(&count);
        let fan = entrypoint("fan", move |numbers: Vec<i64>, _previous: Option<Vec<i64>>, _rt| {
            let ten = ten.clone();
            async move { futures::future::try_join_all(numbers.into_iter().map(|n| ten.call(n))).await }
        })
        .compile_with(saver())?;
        let modes = [StreamMode::Updates, StreamMode::Values];
        rec.stream(&fan, vec![1, 2, 3], &thread("t"), &modes, RunOptions::default()).await;
        runs(rec, &count);
        paused_state(rec, &fan, "t").await?;
        rec.invoke(&fan, vec![3], &thread("t")).await;
        Ok(())
    })
}

type Review = FuncState<Vec<i64>, Value>;

fn review(count: &Arc<AtomicUsize>) -> weft::graph::GraphResult<CompiledGraph<Review>> {
    let ten = times_ten(count);
    entrypoint("review", move |numbers: Vec<i64>, _previous: Option<Value>, rt| {
        let ten = ten.clone();
        async move {
            let results = futures::future::try_join_all(numbers.into_iter().map(|n| ten.call(n))).await?;
            let verdict: Value = rt.interrupt(json!({"results": results}))?;
            Ok(json!({"results": results, "verdict": verdict}))
        }
    })
    .compile_with(saver())
}

fn functional_resume_reuses_finished_tasks(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let count = Arc::new(AtomicUsize::new(0));
        let app = review(&count)?;
        let cfg = thread("t");
        let modes = [StreamMode::Updates, StreamMode::Values];
        rec.stream(&app, vec![1, 2], &cfg, &modes, RunOptions::default()).await;
        runs(rec, &count);
        paused_state(rec, &app, "t").await?;
        rec.stream(&app, Command::resume("approved"), &cfg, &modes, RunOptions::default()).await;
        runs(rec, &count);
        paused_state(rec, &app, "t").await?;
        rec.invoke(&app, vec![3], &cfg).await;
        runs(rec, &count);
        rec.invoke(&app, Command::resume("rejected"), &cfg).await;
        Ok(())
    })
}

fn functional_interrupt_with_a_bare_value_hides_it(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let add = entrypoint("add", |n: i64, previous: Option<i64>, rt| async move {
            let _go: bool = rt.interrupt("go?")?;
            Ok(n + previous.unwrap_or(0))
        })
        .compile_with(saver())?;
        let cfg = thread("t");
        rec.invoke(&add, 1, &cfg).await;
        rec.invoke(&add, Command::resume(true), &cfg).await;
        rec.invoke(&add, 2, &cfg).await;
        let modes = [StreamMode::Values, StreamMode::Updates];
        rec.stream(&add, Command::resume(true), &cfg, &modes, RunOptions::default()).await;
        Ok(())
    })
}

fn functional_previous_and_final(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let accumulate = entrypoint("accumulate", |n: i64, previous: Option<i64>, _rt| async move {
            let total = previous.unwrap_or(0) + n;
            Ok(Final::new(previous, total))
        })
        .compile_with(saver())?;
        for n in [3, 4, 5] {
            rec.invoke(&accumulate, n, &thread("t")).await;
        }
        rec.invoke(&accumulate, 1, &thread("other")).await;
        paused_state(rec, &accumulate, "t").await?;
        Ok(())
    })
}

fn functional_task_error_fails_the_run_and_resume_reruns_it(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let count = Arc::new(AtomicUsize::new(0));
        let tries = Arc::new(AtomicUsize::new(0));
        let ten = times_ten(&count);
        let flaky = {
            let tries = Arc::clone(&tries);
            task("flaky", move |x: i64| {
                let n = tries.fetch_add(1, Ordering::SeqCst);
                async move { if n == 0 { Err(weft::Error::msg("first try fails")) } else { Ok(x + 1) } }
            })
        };
        let flow = entrypoint("flow", move |x: i64, _previous: Option<i64>, _rt| {
            let (ten, flaky) = (ten.clone(), flaky.clone());
            async move { flaky.call(ten.call(x).await?).await }
        })
        .compile_with(saver())?;
        let cfg = thread("t");
        rec.invoke(&flow, 1, &cfg).await;
        rec.invoke(&flow, GraphInput::Resume, &cfg).await;
        rec.note(
            json!({"op": "runs", "n": count.load(Ordering::SeqCst), "tries": tries.load(Ordering::SeqCst)}),
        );
        Ok(())
    })
}

fn functional_history_and_saved_checkpoints(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let count = Arc::new(AtomicUsize::new(0));
        let ten = times_ten(&count);
        let app = entrypoint("review", move |n: i64, _previous: Option<Value>, rt| {
            let ten = ten.clone();
            async move {
                let result = ten.call(n).await?;
                let verdict: Value = rt.interrupt(result)?;
                Ok(json!({"result": result, "verdict": verdict}))
            }
        })
        .compile_with(saver())?;
        let cfg = thread("t");
        let fields = ["versions_seen", "updated_channels"];
        rec.invoke(&app, 1, &cfg).await;
        rec.state(&app, &cfg, false).await;
        rec.saved(&app, "t", &fields).await;
        rec.invoke(&app, Command::resume("ok"), &cfg).await;
        rec.history(&app, &cfg).await;
        rec.saved(&app, "t", &fields).await;
        Ok(())
    })
}

fn functional_interrupt_inside_a_task(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let count = Arc::new(AtomicUsize::new(0));
        let step_1 = {
            let count = Arc::clone(&count);
            task("step_1", move |query: String| {
                count.fetch_add(1, Ordering::SeqCst);
                async move { Ok(format!("{query} bar")) }
            })
        };
        let human_feedback = task("human_feedback", |query: String| async move {
            let feedback: String = weft::graph::func::interrupt(format!("Please provide feedback: {query}"))?;
            Ok(format!("{query} {feedback}"))
        });
        let step_3 = task("step_3", |query: String| async move { Ok(format!("{query} qux")) });
        let graph = entrypoint("graph", move |query: String, _previous: Option<String>, _rt| {
            let (step_1, human_feedback, step_3) = (step_1.clone(), human_feedback.clone(), step_3.clone());
            async move {
                let result_1 = step_1.call(query).await?;
                let result_2 = human_feedback.call(result_1).await?;
                step_3.call(result_2).await
            }
        })
        .compile_with(saver())?;
        let cfg = thread("t");
        rec.stream(&graph, "foo".to_owned(), &cfg, &[StreamMode::Updates], RunOptions::default()).await;
        paused_state(rec, &graph, "t").await?;
        rec.stream(&graph, Command::resume("baz"), &cfg, &[StreamMode::Updates], RunOptions::default()).await;
        runs(rec, &count);
        paused_state(rec, &graph, "t").await?;
        Ok(())
    })
}
