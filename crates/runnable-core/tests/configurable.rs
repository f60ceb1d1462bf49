//! Configurable fields and alternatives, chosen per call through `config.configurable`.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt as _;
use futures::stream::BoxStream;
use serde_json::{Map, Value, json};
use weft_runnable_core::{
    Configurable, ConfigurableField, Error, Result, Runnable, RunnableConfig, RunnableExt, RunnableGenerator,
    RunnableLambda,
};

/// What the factory received, call by call.
type Seen = Arc<std::sync::Mutex<Vec<Map<String, Value>>>>;

/// Adds `step` (default 1) to its input.
fn adder(seen: Option<Seen>) -> Configurable<RunnableLambda<i64, i64>> {
    Configurable::new(
        [ConfigurableField::new("step").with_name("Step").with_description("what to add")],
        move |fields| {
            if let Some(seen) = &seen {
                seen.lock().unwrap().push(fields.clone());
            }
            let step = match fields.get("step") {
                None => 1,
                Some(v) => v
                    .as_i64()
                    .ok_or_else(|| Error::InvalidConfig(format!("step must be an integer, got {v}")))?,
            };
            Ok(RunnableLambda::new(move |x: i64| x + step))
        },
    )
}

/// Repeats its input `times` times, one chunk each.
fn repeater() -> Configurable<RunnableGenerator<String, String>> {
    Configurable::new([ConfigurableField::new("times")], |fields| {
        let times = fields.get("times").and_then(Value::as_u64).unwrap_or(1) as usize;
        Ok(RunnableGenerator::new(move |input: BoxStream<'_, Result<String>>, _| {
            input.flat_map(move |s| futures::stream::iter(vec![s; times])).boxed()
        }))
    })
}

#[tokio::test]
async fn configurable_uses_factory_defaults_when_no_field_is_set() {
    assert_eq!(adder(None).invoke(1, &RunnableConfig::default()).await.unwrap(), 2);
}

#[tokio::test]
async fn configurable_rebuilds_the_runnable_from_the_fields_of_each_call() {
    let add = adder(None);
    let ten = RunnableConfig::default().with_configurable("step", 10);
    let hundred = RunnableConfig::default().with_configurable("step", 100);
    assert_eq!(add.invoke(1, &ten).await.unwrap(), 11);
    assert_eq!(add.invoke(1, &hundred).await.unwrap(), 101);
    assert_eq!(add.batch(vec![1, 2], &ten).await.unwrap(), vec![11, 12]);
}

#[tokio::test]
async fn configurable_passes_only_declared_fields_to_the_factory() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let config = RunnableConfig::default().with_configurable("step", 5).with_configurable("thread_id", "t1");
    adder(Some(Arc::clone(&seen))).invoke(1, &config).await.unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![json!({"step": 5}).as_object().unwrap().clone()]);
}

#[tokio::test]
async fn configurable_factory_errors_fail_the_call() {
    let config = RunnableConfig::default().with_configurable("step", "ten");
    let err = adder(None).invoke(1, &config).await.unwrap_err();
    assert_eq!(err.to_string(), "invalid config: step must be an integer, got \"ten\"");
    let items: Vec<_> = adder(None).stream(1, &config).collect().await;
    assert_eq!(items.len(), 1);
    assert!(items[0].is_err());
}

#[tokio::test]
async fn configurable_streams_the_built_runnable_chunk_by_chunk() {
    let config = RunnableConfig::default().with_configurable("times", 3);
    let chunks: Vec<String> = repeater().stream("ab".to_owned(), &config).map(|c| c.unwrap()).collect().await;
    assert_eq!(chunks, vec!["ab", "ab", "ab"]);
    // Inside a sequence its chunks are merged by the built runnable's rules.
    let chain = repeater() | RunnableLambda::new(|s: String| s.len());
    assert_eq!(chain.invoke("ab".to_owned(), &config).await.unwrap(), 6);
}

#[tokio::test]
async fn configurable_transforms_a_streamed_input() {
    let upper = RunnableGenerator::new(|input: BoxStream<'_, Result<String>>, _| {
        input
            .flat_map(|s| {
                futures::stream::iter(s.unwrap().chars().map(|c| Ok(c.to_string())).collect::<Vec<_>>())
            })
            .boxed()
    });
    let chain = upper | repeater();
    let config = RunnableConfig::default().with_configurable("times", 2);
    let chunks: Vec<String> = chain.stream("ab".to_owned(), &config).map(|c| c.unwrap()).collect().await;
    assert_eq!(chunks, vec!["a", "a", "b", "b"]);
}

fn greeter() -> weft_runnable_core::ConfigurableAlternatives<String, String> {
    RunnableLambda::new(|n: String| format!("hello {n}"))
        .configurable_alternatives(ConfigurableField::new("lang"), "en")
        .with_alternative("fr", RunnableLambda::new(|n: String| format!("bonjour {n}")))
        .with_alternative("de", RunnableLambda::new(|n: String| format!("hallo {n}")))
}

#[tokio::test]
async fn alternatives_run_the_default_when_the_field_is_absent() {
    assert_eq!(greeter().invoke("Ada".to_owned(), &RunnableConfig::default()).await.unwrap(), "hello Ada");
}

#[tokio::test]
async fn alternatives_run_the_one_named_in_configurable() {
    let config = RunnableConfig::default().with_configurable("lang", "de");
    assert_eq!(greeter().invoke("Ada".to_owned(), &config).await.unwrap(), "hallo Ada");
    let config = RunnableConfig::default().with_configurable("lang", "en");
    assert_eq!(greeter().invoke("Ada".to_owned(), &config).await.unwrap(), "hello Ada");
}

#[tokio::test]
async fn alternatives_reject_an_unknown_key_naming_it_and_the_known_keys() {
    let config = RunnableConfig::default().with_configurable("lang", "it");
    let err = greeter().invoke("Ada".to_owned(), &config).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid config: unknown alternative 'it' for configurable 'lang'; known alternatives: en, fr, de"
    );
}

#[tokio::test]
async fn alternatives_reject_a_key_that_is_not_a_string() {
    let config = RunnableConfig::default().with_configurable("lang", 3);
    let err = greeter().invoke("Ada".to_owned(), &config).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid config: configurable 'lang' must name an alternative as a string, got a number"
    );
}

#[tokio::test]
async fn alternatives_build_nothing_they_do_not_run() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = {
        let calls = Arc::clone(&calls);
        RunnableLambda::new(move |n: String| {
            calls.fetch_add(1, Ordering::SeqCst);
            n
        })
    };
    let alts = greeter().with_alternative("echo", counted);
    alts.invoke("x".to_owned(), &RunnableConfig::default()).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let config = RunnableConfig::default().with_configurable("lang", "echo");
    assert_eq!(alts.invoke("x".to_owned(), &config).await.unwrap(), "x");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn alternatives_pipe_with_the_bitor_operator() {
    let chain = greeter() | RunnableLambda::new(|s: String| s.len());
    let config = RunnableConfig::default().with_configurable("lang", "fr");
    assert_eq!(chain.invoke("Ada".to_owned(), &config).await.unwrap(), "bonjour Ada".len());
}
