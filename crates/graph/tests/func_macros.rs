//! `#[task]` and `#[entrypoint]`: the functional API's attributes behave as the builders they stand for
//! (saved task results reused on resume, `previous`, `Final`, names, retries, inputs as saved).
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use weft_graph::func::{Final, FuncError, entrypoint, task};
use weft_graph::{Command, CompileConfig, InMemorySaver, RetryPolicy, Runtime, StreamData, StreamMode};
use weft_runnable_core::{Error, Result, RunnableConfig};

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

fn saver() -> CompileConfig {
    CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))
}

static SECTIONS_WRITTEN: AtomicUsize = AtomicUsize::new(0);

/// Writes one section.
#[task]
async fn write_section(topic: String, section: u32) -> Result<String> {
    SECTIONS_WRITTEN.fetch_add(1, Ordering::SeqCst);
    Ok(format!("{topic} #{section}"))
}

#[entrypoint]
async fn essay(topic: String, previous: Option<String>, rt: Runtime) -> Result<String> {
    let calls = (1..=3).map(|n| write_section(topic.clone(), n));
    let text = futures::future::try_join_all(calls).await?.join(", ");
    let verdict: String = rt.interrupt(&text)?;
    Ok(format!("{text} ({verdict}; before: {})", previous.unwrap_or_default()))
}

#[tokio::test]
async fn a_resumed_entrypoint_gets_its_finished_tasks_back_without_running_them() {
    let app = essay().compile_with(saver()).unwrap();
    let cfg = thread("essay");
    let paused = app.invoke("cats".to_owned(), &cfg).await.unwrap();
    assert_eq!(paused.interrupts[0].value, "cats #1, cats #2, cats #3");
    assert_eq!(SECTIONS_WRITTEN.load(Ordering::SeqCst), 3);
    let done = app.invoke(Command::resume("ok"), &cfg).await.unwrap();
    assert_eq!(done.value.value().unwrap(), "cats #1, cats #2, cats #3 (ok; before: )");
    assert_eq!(SECTIONS_WRITTEN.load(Ordering::SeqCst), 3, "no section was written again");
    // The thread's next run gets the last return value as `previous`.
    app.invoke("dogs".to_owned(), &cfg).await.unwrap();
    let second = app.invoke(Command::resume("no"), &cfg).await.unwrap();
    assert_eq!(
        second.value.value().unwrap(),
        "dogs #1, dogs #2, dogs #3 (no; before: cats #1, cats #2, cats #3 (ok; before: ))"
    );
    assert_eq!(SECTIONS_WRITTEN.load(Ordering::SeqCst), 6);
}

#[task(name = "double")]
async fn twice(x: i64) -> Result<i64> {
    Ok(x * 2)
}

#[task]
async fn answer() -> Result<i64> {
    Ok(42)
}

#[task]
async fn add(a: i64, b: i64) -> Result<i64> {
    Ok(a + b)
}

#[entrypoint(name = "wf")]
async fn combine(x: i64) -> Result<i64> {
    let doubled = twice(x).await?;
    let sum = add(doubled, answer().await?).await?;
    Ok(sum)
}

#[tokio::test]
async fn task_inputs_are_the_one_value_a_tuple_or_null_and_names_are_as_given() {
    let app = combine().compile().unwrap();
    let mut parts = app.stream(4, &RunnableConfig::default(), &[StreamMode::Tasks]);
    let mut seen = Vec::new();
    while let Some(part) = parts.next().await {
        match part.unwrap().data {
            StreamData::TaskStart { name, input, .. } => seen.push(format!("start {name} {input}")),
            StreamData::TaskResult { name, result, .. } => seen.push(format!("end {name} {result:?}")),
            _ => {}
        }
    }
    assert_eq!(
        seen,
        [
            "start wf 4",
            "start double 4",
            r#"end double [("__return__", Number(8))]"#,
            "start answer null",
            r#"end answer [("__return__", Number(42))]"#,
            "start add [8,42]",
            r#"end add [("__return__", Number(50))]"#,
            r#"end wf [("__end__", Number(50)), ("__previous__", Number(50))]"#,
        ]
    );
}

/// Returns the running total and saves it.
#[entrypoint]
async fn running_total(add: i64, previous: Option<i64>) -> Result<Final<String, i64>> {
    let sum = previous.unwrap_or(0) + add;
    Ok(Final::new(format!("total {sum}"), sum))
}

#[tokio::test]
async fn an_entrypoint_returning_final_returns_one_value_and_saves_another() {
    let app = running_total().compile_with(saver()).unwrap();
    let cfg = thread("sum");
    assert_eq!(app.invoke(2, &cfg).await.unwrap().value.value().unwrap(), "total 2");
    let out = app.invoke(5, &cfg).await.unwrap();
    assert_eq!(out.value.value().unwrap(), "total 7");
    assert_eq!(out.value.previous(), Some(&7));
}

static SHAKY_TRIES: AtomicUsize = AtomicUsize::new(0);

#[task(retry = RetryPolicy::new().max_attempts(3).initial_interval(Duration::ZERO).jitter(false).retry_on(|_| true))]
async fn shaky(x: i64) -> Result<i64> {
    if SHAKY_TRIES.fetch_add(1, Ordering::SeqCst) < 2 { Err(Error::msg("not yet")) } else { Ok(x) }
}

#[entrypoint]
async fn retrying(x: i64) -> Result<i64> {
    shaky(x).await
}

#[tokio::test]
async fn a_task_retries_as_its_retry_attribute_says() {
    let app = retrying().compile().unwrap();
    assert_eq!(app.invoke(7, &RunnableConfig::default()).await.unwrap().value.value(), Some(&7));
    assert_eq!(SHAKY_TRIES.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_task_function_called_outside_an_entrypoint_is_a_clear_error() {
    let err = twice(2).await.unwrap_err();
    let Error::Custom(inner) = &err else { panic!("{err:?}") };
    assert_eq!(
        inner.downcast_ref::<FuncError>(),
        Some(&FuncError::OutsideEntrypoint { task: "double".to_owned() })
    );
}

#[tokio::test]
async fn the_attributes_and_the_builders_are_the_same_graph() {
    let built = entrypoint("wf", |x: i64, _previous: Option<i64>, _rt| async move {
        let doubled = task("double", |x: i64| async move { Ok(x * 2) }).call(x).await?;
        Ok(doubled + 42)
    })
    .compile()
    .unwrap();
    let attributed = combine().compile().unwrap();
    assert_eq!(built.get_graph().draw_mermaid(), attributed.get_graph().draw_mermaid());
    let cfg = RunnableConfig::default();
    assert_eq!(
        built.invoke(4, &cfg).await.unwrap().value.value(),
        attributed.invoke(4, &cfg).await.unwrap().value.value()
    );
}
