//! RunnablePassthrough, assign and pick.
#![allow(clippy::unwrap_used, missing_docs)]

use futures::StreamExt as _;
use futures::stream::BoxStream;
use serde_json::{Value, json};
use weft_runnable_core::{
    EventRecorder, Result, Runnable, RunnableConfig, RunnableExt, RunnableGenerator, RunnableLambda,
    RunnableParallel, RunnablePassthrough, RunnablePick,
};

/// Streams its input object back one key at a time.
fn key_by_key() -> RunnableGenerator<Value, Value> {
    RunnableGenerator::new(|input: BoxStream<'_, Result<Value>>, _| {
        input
            .flat_map(|v| {
                let chunks: Vec<Result<Value>> = match v {
                    Ok(Value::Object(map)) => map.into_iter().map(|(k, v)| Ok(json!({ k: v }))).collect(),
                    Ok(other) => vec![Ok(other)],
                    Err(e) => vec![Err(e)],
                };
                futures::stream::iter(chunks)
            })
            .boxed()
    })
}

fn letters() -> RunnableGenerator<String, String> {
    RunnableGenerator::new(|input: BoxStream<'_, Result<String>>, _| {
        input
            .flat_map(|s| {
                futures::stream::iter(s.unwrap().chars().map(|c| Ok(c.to_string())).collect::<Vec<_>>())
            })
            .boxed()
    })
}

#[tokio::test]
async fn passthrough_returns_its_input_as_a_traced_run() {
    let recorder = EventRecorder::new();
    let config = RunnableConfig::default().with_callbacks(recorder.sink());
    let out = RunnablePassthrough::new().invoke(json!({"a": 1}), &config).await.unwrap();
    assert_eq!(out, json!({"a": 1}));
    assert_eq!(
        recorder.names(),
        vec![
            ("on_chain_start".to_owned(), "RunnablePassthrough".to_owned()),
            ("on_chain_end".to_owned(), "RunnablePassthrough".to_owned())
        ]
    );
}

#[tokio::test]
async fn passthrough_transforms_a_stream_chunk_by_chunk() {
    let chain = letters() | RunnablePassthrough::new();
    let chunks: Vec<String> =
        chain.stream("abc".to_owned(), &RunnableConfig::default()).map(|c| c.unwrap()).collect().await;
    assert_eq!(chunks, vec!["a", "b", "c"]);
}

#[tokio::test]
async fn assign_adds_computed_keys_to_the_input() {
    let assign = RunnablePassthrough::assign(
        RunnableParallel::new()
            .with("double", RunnableLambda::new(|v: Value| v["x"].as_i64().unwrap() * 2))
            .with("x", RunnableLambda::new(|v: Value| v["x"].as_i64().unwrap() + 100)),
    );
    let out = assign.invoke(json!({"x": 1, "y": "keep"}), &RunnableConfig::default()).await.unwrap();
    // Computed keys are computed from the original input; a computed key replaces the input's.
    assert_eq!(out, json!({"x": 101, "y": "keep", "double": 2}));
}

#[tokio::test]
async fn assign_runs_its_mapper_as_a_child_parallel_run() {
    let assign = RunnablePassthrough::assign(
        RunnableParallel::new().with("n", RunnableLambda::new(|_: Value| 1).named("one")),
    );
    let recorder = EventRecorder::new();
    assign.invoke(json!({}), &RunnableConfig::default().with_callbacks(recorder.sink())).await.unwrap();
    let starts: Vec<_> = recorder
        .events()
        .into_iter()
        .filter(|e| e.event == "on_chain_start")
        .map(|e| (e.name, e.tags, e.parent_ids.len()))
        .collect();
    assert_eq!(
        starts,
        vec![
            ("RunnableAssign<n>".to_owned(), vec![], 0),
            ("RunnableParallel<n>".to_owned(), vec![], 1),
            ("one".to_owned(), vec!["map:key:n".to_owned()], 2),
        ]
    );
}

#[tokio::test]
async fn assign_rejects_input_that_is_not_an_object() {
    let assign =
        RunnablePassthrough::assign(RunnableParallel::new().with("n", RunnableLambda::new(|_: Value| 1)));
    let err = assign.invoke(json!("text"), &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid input: RunnableAssign<n> expects a JSON object as input, got a string"
    );
}

#[tokio::test]
async fn assign_streams_passed_through_keys_first_then_computed_keys() {
    let chain = key_by_key()
        | RunnablePassthrough::assign(RunnableParallel::new().with(
            "sum",
            RunnableLambda::new(|v: Value| v["a"].as_i64().unwrap() + v["b"].as_i64().unwrap()),
        ));
    let chunks: Vec<Value> =
        chain.stream(json!({"a": 1, "b": 2}), &RunnableConfig::default()).map(|c| c.unwrap()).collect().await;
    assert_eq!(chunks, vec![json!({"a": 1}), json!({"b": 2}), json!({"sum": 3})]);
    assert_eq!(
        chain.invoke(json!({"a": 1, "b": 2}), &RunnableConfig::default()).await.unwrap(),
        json!({"a": 1, "b": 2, "sum": 3})
    );
}

#[tokio::test]
async fn assign_on_a_runnable_adds_keys_to_its_output() {
    let chain = RunnableLambda::new(|x: i64| json!({"x": x})).assign(
        RunnableParallel::new().with("y", RunnableLambda::new(|v: Value| v["x"].as_i64().unwrap() + 1)),
    );
    assert_eq!(chain.invoke(1, &RunnableConfig::default()).await.unwrap(), json!({"x": 1, "y": 2}));
}

#[tokio::test]
async fn pick_one_key_gives_its_value() {
    let pick = RunnablePassthrough::pick("b");
    let out = pick.invoke(json!({"a": 1, "b": [2]}), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out, json!([2]));
}

#[tokio::test]
async fn pick_several_keys_gives_a_sub_object_in_listed_order() {
    let pick = RunnablePassthrough::pick(["c", "a"]);
    let out = pick.invoke(json!({"a": 1, "b": 2, "c": 3}), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out, json!({"c": 3, "a": 1}));
    let keys: Vec<_> = out.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, vec!["c", "a"]);
}

#[tokio::test]
async fn pick_missing_single_key_gives_null() {
    let out = RunnablePick::new("zz").invoke(json!({"a": 1}), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out, Value::Null);
}

#[tokio::test]
async fn pick_skips_missing_keys_of_a_list_and_gives_null_when_none_is_present() {
    let config = RunnableConfig::default();
    let some = RunnablePick::new(vec!["a", "zz"]).invoke(json!({"a": 1, "b": 2}), &config).await.unwrap();
    assert_eq!(some, json!({"a": 1}));
    let none = RunnablePick::new(vec!["y", "zz"]).invoke(json!({"a": 1}), &config).await.unwrap();
    assert_eq!(none, Value::Null);
}

#[tokio::test]
async fn pick_rejects_input_that_is_not_an_object() {
    let err = RunnablePick::new("a").invoke(json!([1]), &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(err.to_string(), "invalid input: RunnablePick expects a JSON object as input, got an array");
}

#[tokio::test]
async fn pick_streams_picked_chunks_and_skips_chunks_without_the_key() {
    let chain = key_by_key() | RunnablePassthrough::pick("b");
    let chunks: Vec<Value> = chain
        .stream(json!({"a": 1, "b": "x", "c": 3}), &RunnableConfig::default())
        .map(|c| c.unwrap())
        .collect()
        .await;
    assert_eq!(chunks, vec![json!("x")]);
}

#[tokio::test]
async fn pick_on_a_runnable_picks_from_its_output() {
    let chain = RunnableLambda::new(|x: i64| json!({"x": x, "y": x * 2})).pick("y");
    assert_eq!(chain.invoke(4, &RunnableConfig::default()).await.unwrap(), json!(8));
}
