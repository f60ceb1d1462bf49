//! Sequences: piping, batching, streaming through transformable steps, flat event runs.
#![allow(clippy::unwrap_used, missing_docs)]

use futures::StreamExt as _;
use weft_runnable_core::{
    EventRecorder, Runnable, RunnableConfig, RunnableExt, RunnableGenerator, RunnableLambda,
};

fn upper_generator() -> RunnableGenerator<String, String> {
    RunnableGenerator::new(|input: futures::stream::BoxStream<'_, weft_runnable_core::Result<String>>, _| {
        input.map(|chunk| chunk.map(|s| s.to_uppercase())).boxed()
    })
    .named("upper")
}

#[tokio::test]
async fn pipe_feeds_output_to_next_step() {
    let chain = RunnableLambda::new(|x: i64| x + 1).pipe(RunnableLambda::new(|x: i64| x * 10));
    assert_eq!(chain.invoke(1, &RunnableConfig::default()).await.unwrap(), 20);
}

#[tokio::test]
async fn bitor_builds_flat_sequence_with_step_tags() {
    let chain = RunnableLambda::new(|x: i64| x + 1).named("a")
        | RunnableLambda::new(|x: i64| x * 10).named("b")
        | RunnableLambda::new(|x: i64| x - 1).named("c");
    let recorder = EventRecorder::new();
    let config = RunnableConfig::default().with_callbacks(recorder.sink());
    assert_eq!(chain.invoke(1, &config).await.unwrap(), 19);
    let events = recorder.events();
    let starts: Vec<_> = events
        .iter()
        .filter(|e| e.event.ends_with("_start"))
        .map(|e| (e.name.clone(), e.tags.clone(), e.parent_ids.len()))
        .collect();
    assert_eq!(
        starts,
        vec![
            ("RunnableSequence".to_owned(), vec![], 0),
            ("a".to_owned(), vec!["seq:step:1".to_owned()], 1),
            ("b".to_owned(), vec!["seq:step:2".to_owned()], 1),
            ("c".to_owned(), vec!["seq:step:3".to_owned()], 1),
        ]
    );
}

#[tokio::test]
async fn stream_passes_chunks_through_transforming_steps() {
    let words = RunnableGenerator::new(
        |input: futures::stream::BoxStream<'_, weft_runnable_core::Result<String>>, _| {
            input
                .flat_map(|s| {
                    let parts: Vec<_> = match s {
                        Ok(s) => s.split(' ').map(|w| Ok(format!("{w} "))).collect(),
                        Err(e) => vec![Err(e)],
                    };
                    futures::stream::iter(parts)
                })
                .boxed()
        },
    );
    let chain = words | upper_generator();
    let chunks: Vec<String> =
        chain.stream("a b c".to_owned(), &RunnableConfig::default()).map(|c| c.unwrap()).collect().await;
    assert_eq!(chunks, vec!["A ", "B ", "C "]);
    assert_eq!(chain.invoke("a b".to_owned(), &RunnableConfig::default()).await.unwrap(), "A B ");
}

#[tokio::test]
async fn stream_buffers_before_a_step_that_cannot_transform() {
    let split = RunnableGenerator::new(
        |input: futures::stream::BoxStream<'_, weft_runnable_core::Result<String>>, _| {
            input
                .flat_map(|s| {
                    futures::stream::iter(s.unwrap().chars().map(|c| Ok(c.to_string())).collect::<Vec<_>>())
                })
                .boxed()
        },
    );
    let chain = split | RunnableLambda::new(|s: String| format!("{s}!"));
    let chunks: Vec<String> =
        chain.stream("ABC".to_owned(), &RunnableConfig::default()).map(|c| c.unwrap()).collect().await;
    assert_eq!(chunks, vec!["ABC!"]);
}

#[tokio::test]
async fn stream_events_reports_nested_runs_in_order() {
    let chain = (RunnableLambda::new(|s: String| s).named("first") | upper_generator())
        .with_config(RunnableConfig::default().with_run_name("mychain"));
    let events: Vec<_> = chain
        .stream_events("ab".to_owned(), &RunnableConfig::default())
        .map(|e| {
            let e = e.unwrap();
            (e.event, e.name)
        })
        .collect()
        .await;
    let expected: Vec<(String, String)> = [
        ("on_chain_start", "mychain"),
        ("on_chain_start", "first"),
        ("on_chain_end", "first"),
        ("on_chain_start", "upper"),
        ("on_chain_stream", "upper"),
        ("on_chain_stream", "mychain"),
        ("on_chain_end", "upper"),
        ("on_chain_end", "mychain"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect();
    assert_eq!(events, expected);
}

#[tokio::test]
async fn batch_keeps_order_and_reports_errors_per_item() {
    let r = RunnableLambda::try_new(|x: i64| {
        if x == 3 { Err(weft_runnable_core::Error::msg("three")) } else { Ok(x * 10) }
    });
    let config = RunnableConfig::default().with_max_concurrency(2);
    let results = r.batch_results(vec![1, 2, 3, 4, 5], &config).await;
    let shown: Vec<_> = results.iter().map(|r| r.as_ref().map_err(|e| e.to_string()).cloned()).collect();
    assert_eq!(shown, vec![Ok(10), Ok(20), Err("three".to_owned()), Ok(40), Ok(50)]);
    assert!(r.batch(vec![1, 3], &config).await.is_err());
}
