//! Options bound with `RunnableExt::bind` reach chat models and completion models.
#![allow(clippy::unwrap_used, missing_docs)]

use serde_json::{Map, Value, json};
use weft_runnable_core::fakes::{FakeChatModel, FakeListLlm};
use weft_runnable_core::{PromptValue, Runnable, RunnableConfig, RunnableExt, ToolChoice};

fn kwargs(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

#[tokio::test]
async fn bound_stop_sequences_cut_a_completion_model() {
    let llm = FakeListLlm::new(["Thought: x\nObservation: y"]);
    let bound = llm.bind(kwargs(json!({"stop": ["\nObservation"]})));
    let out = bound.invoke(PromptValue::from("q"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out, "Thought: x");
}

#[tokio::test]
async fn bound_tool_choice_reaches_the_chat_model() {
    let model = FakeChatModel::new(["ok"]);
    let bound = model.clone().bind(kwargs(json!({"tool_choice": "required", "stop": ["END"]})));
    bound.invoke(PromptValue::from("hi"), &RunnableConfig::default()).await.unwrap();
    let calls = model.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].options.tool_choice, Some(ToolChoice::Required));
    assert_eq!(calls[0].options.stop, Some(vec!["END".to_owned()]));
}

#[tokio::test]
async fn a_bound_option_of_the_wrong_shape_is_an_error_naming_it() {
    let model = FakeChatModel::new(["ok"]);
    let bound = model.bind(kwargs(json!({"stop": 42})));
    let err = bound.invoke(PromptValue::from("hi"), &RunnableConfig::default()).await.unwrap_err();
    assert!(err.to_string().contains("'stop'"), "{err}");
}
