//! bind: options reach the runnable through its config, nest and merge.
#![allow(clippy::unwrap_used, missing_docs)]

use serde_json::{Map, Value, json};
use weft_runnable_core::{BoundKwargs, EventRecorder, Runnable, RunnableConfig, RunnableExt, RunnableLambda};

fn kwargs(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

/// Returns the options bound around it.
fn reader() -> RunnableLambda<i64, Value> {
    RunnableLambda::with_config_fn(|_: i64, config: &RunnableConfig| {
        Ok(BoundKwargs::from_config(config).map_or(Value::Null, |k| Value::Object(k.as_map().clone())))
    })
    .named("reader")
}

#[tokio::test]
async fn bound_kwargs_reach_the_runnable_through_its_config() {
    let bound = reader().bind(kwargs(json!({"stop": ["\n"], "temperature": 0})));
    let out = bound.invoke(1, &RunnableConfig::default()).await.unwrap();
    assert_eq!(out, json!({"stop": ["\n"], "temperature": 0}));
}

#[tokio::test]
async fn nothing_is_bound_without_a_binding() {
    assert_eq!(reader().invoke(1, &RunnableConfig::default()).await.unwrap(), Value::Null);
}

#[tokio::test]
async fn nested_bindings_merge_and_the_inner_binding_wins() {
    let chain = (reader().bind(kwargs(json!({"stop": ["inner"], "a": 1})))
        | RunnableLambda::new(|v: Value| v))
    .bind(kwargs(json!({"stop": ["outer"], "b": 2})));
    let out = chain.invoke(1, &RunnableConfig::default()).await.unwrap();
    assert_eq!(out, json!({"stop": ["inner"], "a": 1, "b": 2}));
}

#[tokio::test]
async fn binding_again_on_a_binding_merges_with_the_newer_options_winning() {
    let bound =
        reader().bind(kwargs(json!({"stop": ["first"], "a": 1}))).bind(kwargs(json!({"stop": ["second"]})));
    assert_eq!(bound.kwargs().len(), 2);
    let out = bound.invoke(1, &RunnableConfig::default()).await.unwrap();
    assert_eq!(out, json!({"stop": ["second"], "a": 1}));
}

#[tokio::test]
async fn a_binding_on_a_chain_reaches_the_steps_inside() {
    let chain = (RunnableLambda::new(|x: i64| x + 1) | reader()).bind(kwargs(json!({"tools": ["search"]})));
    let out = chain.invoke(1, &RunnableConfig::default()).await.unwrap();
    assert_eq!(out, json!({"tools": ["search"]}));
}

#[tokio::test]
async fn a_binding_adds_no_run_of_its_own() {
    let bound = reader().bind(kwargs(json!({"x": 1})));
    assert_eq!(bound.name(), "reader");
    let recorder = EventRecorder::new();
    bound.invoke(1, &RunnableConfig::default().with_callbacks(recorder.sink())).await.unwrap();
    assert_eq!(
        recorder.names(),
        vec![
            ("on_chain_start".to_owned(), "reader".to_owned()),
            ("on_chain_end".to_owned(), "reader".to_owned())
        ]
    );
}

#[tokio::test]
async fn bound_kwargs_apply_to_every_input_of_a_batch() {
    let bound = reader().bind(kwargs(json!({"n": 3})));
    let out = bound.batch(vec![1, 2], &RunnableConfig::default()).await.unwrap();
    assert_eq!(out, vec![json!({"n": 3}), json!({"n": 3})]);
}
