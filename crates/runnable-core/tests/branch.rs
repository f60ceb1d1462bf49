//! RunnableBranch: first true condition wins, default otherwise, tags, streaming, failures.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt as _;
use futures::stream::BoxStream;
use weft_runnable_core::{
    Error, EventRecorder, Result, Runnable, RunnableBranch, RunnableConfig, RunnableGenerator, RunnableLambda,
};

fn label(text: &'static str) -> RunnableLambda<i64, String> {
    RunnableLambda::new(move |_: i64| text.to_owned())
}

fn sign() -> RunnableBranch<i64, String> {
    RunnableBranch::builder()
        .when(RunnableLambda::new(|x: i64| x < 0), label("negative"))
        .when(RunnableLambda::new(|x: i64| x < 10), label("small"))
        .when(RunnableLambda::new(|x: i64| x < 100), label("medium"))
        .otherwise(label("large"))
}

#[tokio::test]
async fn branch_runs_the_first_branch_whose_condition_holds() {
    let config = RunnableConfig::default();
    // -5 satisfies the first three conditions: the first wins.
    assert_eq!(sign().invoke(-5, &config).await.unwrap(), "negative");
    assert_eq!(sign().invoke(5, &config).await.unwrap(), "small");
    assert_eq!(sign().invoke(50, &config).await.unwrap(), "medium");
}

#[tokio::test]
async fn branch_runs_the_default_when_no_condition_holds() {
    assert_eq!(sign().invoke(500, &RunnableConfig::default()).await.unwrap(), "large");
}

#[tokio::test]
async fn branch_stops_evaluating_conditions_after_the_first_true_one() {
    let evaluated = Arc::new(AtomicUsize::new(0));
    let counted = |result: bool| {
        let evaluated = Arc::clone(&evaluated);
        RunnableLambda::new(move |_: i64| {
            evaluated.fetch_add(1, Ordering::SeqCst);
            result
        })
    };
    let branch = RunnableBranch::builder()
        .when(counted(false), label("a"))
        .when(counted(true), label("b"))
        .when(counted(true), label("c"))
        .otherwise(label("d"));
    assert_eq!(branch.invoke(0, &RunnableConfig::default()).await.unwrap(), "b");
    assert_eq!(evaluated.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn branch_tags_conditions_and_the_chosen_branch() {
    let branch = RunnableBranch::builder()
        .when(RunnableLambda::new(|_: i64| false).named("c1"), label("x").named("b1"))
        .when(RunnableLambda::new(|_: i64| true).named("c2"), label("y").named("b2"))
        .otherwise(label("z").named("default"));
    let recorder = EventRecorder::new();
    branch.invoke(1, &RunnableConfig::default().with_callbacks(recorder.sink())).await.unwrap();
    let starts: Vec<_> = recorder
        .events()
        .into_iter()
        .filter(|e| e.event == "on_chain_start")
        .map(|e| (e.name, e.tags.join(",")))
        .collect();
    let expected: Vec<(String, String)> =
        [("RunnableBranch", ""), ("c1", "condition:1"), ("c2", "condition:2"), ("b2", "branch:2")]
            .into_iter()
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect();
    assert_eq!(starts, expected);

    let recorder = EventRecorder::new();
    sign().invoke(1000, &RunnableConfig::default().with_callbacks(recorder.sink())).await.unwrap();
    let last_start = recorder.events().into_iter().rfind(|e| e.event == "on_chain_start").unwrap();
    assert_eq!(last_start.tags, vec!["branch:default".to_owned()]);
}

#[tokio::test]
async fn branch_fails_when_a_condition_fails() {
    let branch = RunnableBranch::builder()
        .when(
            RunnableLambda::try_new(|_: i64| -> Result<bool> { Err(Error::msg("condition broke")) }),
            label("x"),
        )
        .otherwise(label("y"));
    let err = branch.invoke(1, &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(err.to_string(), "condition broke");
}

#[tokio::test]
async fn branch_streams_the_chosen_runnable_chunk_by_chunk() {
    let spell = RunnableGenerator::new(|input: BoxStream<'_, Result<i64>>, _| {
        input
            .flat_map(|x| {
                futures::stream::iter(
                    x.unwrap().to_string().chars().map(|c| Ok(c.to_string())).collect::<Vec<_>>(),
                )
            })
            .boxed()
    });
    let branch =
        RunnableBranch::builder().when(RunnableLambda::new(|x: i64| x > 0), spell).otherwise(label("none"));
    let config = RunnableConfig::default();
    let chunks: Vec<String> = branch.stream(123, &config).map(|c| c.unwrap()).collect().await;
    assert_eq!(chunks, vec!["1", "2", "3"]);
    let chunks: Vec<String> = branch.stream(-1, &config).map(|c| c.unwrap()).collect().await;
    assert_eq!(chunks, vec!["none"]);
}

#[tokio::test]
async fn branch_pipes_with_the_bitor_operator() {
    let chain = sign() | RunnableLambda::new(|s: String| s.len());
    assert_eq!(chain.invoke(5, &RunnableConfig::default()).await.unwrap(), 5);
}
