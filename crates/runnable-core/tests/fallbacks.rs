//! WithFallbacks: order, first error, unhandled errors, control flow, exception key, streaming.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt as _;
use futures::stream::BoxStream;
use serde_json::{Value, json};
use weft_runnable_core::{
    ControlFlow, Error, EventRecorder, Result, Runnable, RunnableConfig, RunnableExt, RunnableGenerator,
    RunnableLambda,
};

/// A lambda that counts its calls and fails with `message` (or succeeds with `output` when `None`).
fn counted(calls: &Arc<AtomicUsize>, message: Option<&'static str>, output: i64) -> RunnableLambda<i64, i64> {
    let calls = Arc::clone(calls);
    RunnableLambda::try_new(move |_: i64| {
        calls.fetch_add(1, Ordering::SeqCst);
        match message {
            Some(m) => Err(Error::msg(m)),
            None => Ok(output),
        }
    })
}

fn failing_json(message: &'static str) -> RunnableLambda<Value, Value> {
    RunnableLambda::try_new(move |_: Value| -> Result<Value> { Err(Error::msg(message)) })
}

#[tokio::test]
async fn fallbacks_are_not_called_when_the_primary_succeeds() {
    let (p, f) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let r = counted(&p, None, 1).with_fallbacks([counted(&f, None, 2)]);
    assert_eq!(r.invoke(0, &RunnableConfig::default()).await.unwrap(), 1);
    assert_eq!((p.load(Ordering::SeqCst), f.load(Ordering::SeqCst)), (1, 0));
}

#[tokio::test]
async fn fallbacks_are_tried_in_order_until_one_succeeds() {
    let calls: Vec<_> = (0..4).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    let r = counted(&calls[0], Some("primary"), 0).with_fallbacks([
        counted(&calls[1], Some("first fallback"), 1),
        counted(&calls[2], None, 2),
        counted(&calls[3], None, 3),
    ]);
    assert_eq!(r.invoke(0, &RunnableConfig::default()).await.unwrap(), 2);
    let counts: Vec<_> = calls.iter().map(|c| c.load(Ordering::SeqCst)).collect();
    assert_eq!(counts, vec![1, 1, 1, 0]);
}

#[tokio::test]
async fn fallbacks_return_the_first_error_when_all_fail() {
    let c = Arc::new(AtomicUsize::new(0));
    let r = counted(&c, Some("primary failed"), 0).with_fallbacks([
        counted(&c, Some("fallback 1 failed"), 1),
        counted(&c, Some("fallback 2 failed"), 2),
    ]);
    let err = r.invoke(0, &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(err.to_string(), "primary failed");
    assert_eq!(c.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn fallbacks_propagate_unhandled_errors_at_once() {
    let (p, f) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let r = counted(&p, Some("not a timeout"), 0)
        .with_fallbacks([counted(&f, None, 2)])
        .handle_if(|e| matches!(e, Error::Timeout { .. }));
    assert_eq!(r.invoke(0, &RunnableConfig::default()).await.unwrap_err().to_string(), "not a timeout");
    assert_eq!(f.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn fallbacks_stop_at_an_unhandled_error_of_a_fallback() {
    let c = Arc::new(AtomicUsize::new(0));
    let last = Arc::new(AtomicUsize::new(0));
    let r = counted(&c, Some("handled"), 0)
        .with_fallbacks([counted(&c, Some("unhandled"), 1), counted(&last, None, 2)])
        .handle_if(|e| e.to_string() == "handled");
    assert_eq!(r.invoke(0, &RunnableConfig::default()).await.unwrap_err().to_string(), "unhandled");
    assert_eq!(last.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn fallbacks_never_handle_control_flow() {
    let f = Arc::new(AtomicUsize::new(0));
    let primary = RunnableLambda::try_new(|_: i64| -> Result<i64> {
        Err(Error::ControlFlow(ControlFlow::new("interrupt", 42_u32)))
    });
    let r = primary.with_fallbacks([counted(&f, None, 2).boxed()]).handle_if(|_| true);
    let err = r.invoke(0, &RunnableConfig::default()).await.unwrap_err();
    let Error::ControlFlow(flow) = err else { panic!("expected control flow, got {err}") };
    assert_eq!(flow.downcast_ref::<u32>(), Some(&42));
    assert_eq!(f.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn fallbacks_pass_the_previous_error_under_the_exception_key() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = |output: Option<&'static str>| {
        let seen = Arc::clone(&seen);
        RunnableLambda::try_new(move |v: Value| {
            seen.lock().unwrap().push(v.clone());
            match output {
                Some(o) => Ok(json!(o)),
                None => Err(Error::msg(format!("failed on {}", v["q"]))),
            }
        })
    };
    let r = failing_json("primary broke")
        .boxed()
        .with_fallbacks([record(None).boxed(), record(Some("ok")).boxed()])
        .with_exception_key("__exception__");
    let out = r.invoke(json!({"q": 1}), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out, json!("ok"));
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            json!({"q": 1, "__exception__": "primary broke"}),
            json!({"q": 1, "__exception__": "failed on 1"}),
        ]
    );
}

#[tokio::test]
async fn fallbacks_with_exception_key_need_an_object_input() {
    let r = failing_json("x").with_fallbacks([failing_json("y")]).with_exception_key("err");
    let err = r.invoke(json!("text"), &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid input: RunnableWithFallbacks with exception key 'err' expects a JSON object as input, got a string"
    );

    let c = Arc::new(AtomicUsize::new(0));
    let typed = counted(&c, None, 1).with_fallbacks([counted(&c, None, 2)]).with_exception_key("err");
    let err = typed.invoke(0, &RunnableConfig::default()).await.unwrap_err();
    assert!(err.to_string().contains("expects a JSON object as input, got a value of type i64"), "{err}");
    assert_eq!(c.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn fallbacks_run_as_one_run_whose_children_are_the_runnables_tried() {
    let c = Arc::new(AtomicUsize::new(0));
    let r = counted(&c, Some("x"), 0).named("primary").with_fallbacks([counted(&c, None, 1).named("backup")]);
    let recorder = EventRecorder::new();
    r.invoke(0, &RunnableConfig::default().with_callbacks(recorder.sink())).await.unwrap();
    let starts: Vec<_> = recorder
        .events()
        .into_iter()
        .filter(|e| e.event == "on_chain_start")
        .map(|e| (e.name, e.parent_ids.len()))
        .collect();
    assert_eq!(
        starts,
        vec![("RunnableWithFallbacks".to_owned(), 0), ("primary".to_owned(), 1), ("backup".to_owned(), 1)]
    );
}

fn chunks_then(fail_after: Option<usize>, text: &'static str) -> RunnableGenerator<i64, String> {
    RunnableGenerator::new(move |_: BoxStream<'_, Result<i64>>, _| {
        let mut items: Vec<Result<String>> = text.chars().map(|c| Ok(c.to_string())).collect();
        if let Some(n) = fail_after {
            items.truncate(n);
            items.push(Err(Error::msg(format!("{text} broke"))));
        }
        futures::stream::iter(items).boxed()
    })
}

#[tokio::test]
async fn fallbacks_stream_from_the_next_runnable_when_one_fails_before_its_first_chunk() {
    let r = chunks_then(Some(0), "abc").with_fallbacks([chunks_then(None, "xyz")]);
    let chunks: Vec<String> = r.stream(0, &RunnableConfig::default()).map(|c| c.unwrap()).collect().await;
    assert_eq!(chunks, vec!["x", "y", "z"]);
}

#[tokio::test]
async fn fallbacks_do_not_catch_a_stream_error_after_the_first_chunk() {
    let r = chunks_then(Some(1), "abc").with_fallbacks([chunks_then(None, "xyz")]);
    let items: Vec<_> =
        r.stream(0, &RunnableConfig::default()).map(|c| c.map_err(|e| e.to_string())).collect().await;
    assert_eq!(items, vec![Ok("a".to_owned()), Err("abc broke".to_owned())]);
}

#[tokio::test]
async fn fallbacks_stream_returns_the_first_error_when_all_fail() {
    let r = chunks_then(Some(0), "abc").with_fallbacks([chunks_then(Some(0), "xyz")]);
    let items: Vec<_> =
        r.stream(0, &RunnableConfig::default()).map(|c| c.map_err(|e| e.to_string())).collect().await;
    assert_eq!(items, vec![Err("abc broke".to_owned())]);
}
