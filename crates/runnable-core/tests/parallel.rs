//! RunnableParallel: one input to every branch, concurrency, tags, streaming and errors.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use serde_json::{Value, json};
use weft_runnable_core::{
    Error, EventRecorder, Merge, Runnable, RunnableConfig, RunnableGenerator, RunnableLambda,
    RunnableParallel, RunnablePassthrough,
};

fn sleeper(millis: u64, active: Arc<AtomicUsize>, peak: Arc<AtomicUsize>) -> RunnableLambda<i64, i64> {
    RunnableLambda::new_async(move |x: i64| {
        let (active, peak) = (Arc::clone(&active), Arc::clone(&peak));
        async move {
            let now = active.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(millis)).await;
            active.fetch_sub(1, Ordering::SeqCst);
            Ok(x)
        }
    })
}

fn words() -> RunnableGenerator<String, String> {
    RunnableGenerator::new(|input: futures::stream::BoxStream<'_, weft_runnable_core::Result<String>>, _| {
        input
            .flat_map(|s| {
                let parts: Vec<_> = match s {
                    Ok(s) => s.split(' ').map(|w| Ok(format!("{w} "))).collect(),
                    Err(e) => vec![Err(e)],
                };
                futures::stream::iter(parts)
            })
            .boxed()
    })
}

#[tokio::test]
async fn parallel_gives_same_input_to_every_branch_and_keeps_branch_order() {
    let map = RunnableParallel::new()
        .with("plus", RunnableLambda::new(|x: i64| x + 1))
        .with("text", RunnableLambda::new(|x: i64| format!("#{x}")))
        .with("same", RunnableLambda::new(|x: i64| x));
    let out = map.invoke(5, &RunnableConfig::default()).await.unwrap();
    assert_eq!(out, json!({"plus": 6, "text": "#5", "same": 5}));
    let keys: Vec<_> = out.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, vec!["plus", "text", "same"]);
}

#[tokio::test]
async fn parallel_passthrough_branch_forwards_the_input() {
    let map = RunnableParallel::new()
        .with("question", RunnablePassthrough::new())
        .with("length", RunnableLambda::new(|q: String| q.len()));
    let out = map.invoke("why?".to_owned(), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out, json!({"question": "why?", "length": 4}));
}

#[tokio::test]
async fn parallel_with_same_key_replaces_the_branch() {
    let map = RunnableParallel::new()
        .with("a", RunnableLambda::new(|x: i64| x))
        .with("b", RunnableLambda::new(|x: i64| x * 2))
        .with("a", RunnableLambda::new(|x: i64| x * 100));
    assert_eq!(map.invoke(1, &RunnableConfig::default()).await.unwrap(), json!({"a": 100, "b": 2}));
}

#[tokio::test(start_paused = true)]
async fn parallel_runs_branches_concurrently() {
    let (active, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let map = RunnableParallel::new()
        .with("a", sleeper(1000, Arc::clone(&active), Arc::clone(&peak)))
        .with("b", sleeper(1000, Arc::clone(&active), Arc::clone(&peak)))
        .with("c", sleeper(1000, Arc::clone(&active), Arc::clone(&peak)));
    let start = tokio::time::Instant::now();
    map.invoke(1, &RunnableConfig::default()).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(peak.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn parallel_respects_max_concurrency() {
    let (active, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let map = RunnableParallel::new()
        .with("a", sleeper(1000, Arc::clone(&active), Arc::clone(&peak)))
        .with("b", sleeper(1000, Arc::clone(&active), Arc::clone(&peak)))
        .with("c", sleeper(1000, Arc::clone(&active), Arc::clone(&peak)));
    let start = tokio::time::Instant::now();
    let out = map.invoke(1, &RunnableConfig::default().with_max_concurrency(2)).await.unwrap();
    assert_eq!(out, json!({"a": 1, "b": 1, "c": 1}));
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    assert_eq!(peak.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn parallel_tags_child_runs_with_their_key() {
    let map = RunnableParallel::new()
        .with("left", RunnableLambda::new(|x: i64| x).named("l"))
        .with("right", RunnableLambda::new(|x: i64| x).named("r"));
    let recorder = EventRecorder::new();
    map.invoke(1, &RunnableConfig::default().with_callbacks(recorder.sink())).await.unwrap();
    let starts: Vec<_> = recorder
        .events()
        .into_iter()
        .filter(|e| e.event == "on_chain_start")
        .map(|e| (e.name, e.tags, e.parent_ids.len()))
        .collect();
    assert_eq!(starts[0], ("RunnableParallel<left,right>".to_owned(), vec![], 0));
    assert!(starts.contains(&("l".to_owned(), vec!["map:key:left".to_owned()], 1)));
    assert!(starts.contains(&("r".to_owned(), vec!["map:key:right".to_owned()], 1)));
}

#[tokio::test]
async fn parallel_fails_with_the_failing_branch_error() {
    let map = RunnableParallel::new().with("ok", RunnableLambda::new(|x: i64| x)).with(
        "bad",
        RunnableLambda::try_new(|_: i64| -> weft_runnable_core::Result<i64> {
            Err(Error::msg("bad branch"))
        }),
    );
    let err = map.invoke(1, &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(err.to_string(), "bad branch");
}

#[tokio::test]
async fn parallel_batch_reports_errors_per_input() {
    let map = RunnableParallel::new().with(
        "x",
        RunnableLambda::try_new(|x: i64| if x == 3 { Err(Error::msg("three")) } else { Ok(x * 10) }),
    );
    let results = map.batch_results(vec![1, 2, 3, 4], &RunnableConfig::default()).await;
    let shown: Vec<_> = results.into_iter().map(|r| r.map_err(|e| e.to_string())).collect();
    assert_eq!(
        shown,
        vec![Ok(json!({"x": 10})), Ok(json!({"x": 20})), Err("three".to_owned()), Ok(json!({"x": 40}))]
    );
}

#[tokio::test]
async fn parallel_streams_one_key_per_chunk_and_merges_into_the_whole_map() {
    let map =
        RunnableParallel::new().with("words", words()).with("len", RunnableLambda::new(|s: String| s.len()));
    let config = RunnableConfig::default();
    let chunks: Vec<Value> = map.stream("a b".to_owned(), &config).map(|c| c.unwrap()).collect().await;
    assert_eq!(chunks.len(), 3);
    assert!(chunks.iter().all(|c| c.as_object().unwrap().len() == 1));
    let words: Vec<_> = chunks.iter().filter_map(|c| c.get("words").cloned()).collect();
    assert_eq!(words, vec![json!("a "), json!("b ")]);
    let merged = chunks.into_iter().reduce(|a, b| map.merge_chunks(a, b).unwrap()).unwrap();
    assert_eq!(merged, json!({"words": "a b ", "len": 3}));
    assert_eq!(map.invoke("a b".to_owned(), &config).await.unwrap(), json!({"words": "a b ", "len": 3}));
}

#[tokio::test]
async fn parallel_stream_end_event_carries_the_merged_map() {
    let map = RunnableParallel::new().with("words", words()).named("par");
    let recorder = EventRecorder::new();
    let config = RunnableConfig::default().with_callbacks(recorder.sink());
    let _: Vec<_> = map.stream("a b c".to_owned(), &config).collect().await;
    let end = recorder.events().into_iter().find(|e| e.event == "on_chain_end" && e.name == "par").unwrap();
    assert_eq!(end.data.output, Some(json!({"words": "a b c "})));
}

#[tokio::test]
async fn parallel_pipes_with_the_bitor_operator() {
    let chain = RunnableParallel::new()
        .with("a", RunnableLambda::new(|x: i64| x + 1))
        .with("b", RunnableLambda::new(|x: i64| x + 2))
        | RunnableLambda::new(|v: Value| v["a"].as_i64().unwrap() * v["b"].as_i64().unwrap());
    assert_eq!(chain.invoke(1, &RunnableConfig::default()).await.unwrap(), 6);
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Tally {
    id: String,
    count: i64,
}

impl Merge for Tally {
    fn merge(self, next: Self) -> weft_runnable_core::Result<Self> {
        Ok(Tally { id: self.id, count: self.count + next.count })
    }
}

#[tokio::test]
async fn parallel_merges_branch_chunks_by_the_branch_type_rules() {
    // As JSON, the ids would concatenate and the counts be replaced; the branch's own type keeps the id
    // and sums the counts.
    let tallies =
        RunnableGenerator::new(|_: futures::stream::BoxStream<'_, weft_runnable_core::Result<i64>>, _| {
            futures::stream::iter([1, 2, 3].map(|count| Ok(Tally { id: "t".to_owned(), count }))).boxed()
        });
    let map = RunnableParallel::new().with("tally", tallies);
    let config = RunnableConfig::default();
    let chunks: Vec<Value> = map.stream(0, &config).map(|c| c.unwrap()).collect().await;
    assert_eq!(chunks.len(), 3);
    let merged = chunks.into_iter().reduce(|a, b| map.merge_chunks(a, b).unwrap()).unwrap();
    assert_eq!(merged, json!({"tally": {"id": "t", "count": 6}}));
    assert_eq!(map.invoke(0, &config).await.unwrap(), json!({"tally": {"id": "t", "count": 6}}));
}
