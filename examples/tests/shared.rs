//! The examples' shared library: model choice, strictness of checks, structured replies, embeddings.
#![allow(clippy::unwrap_used, missing_docs)]

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use weft::fakes::FakeChatModel;
use weft::graph::store::cosine_similarity;
use weft::prelude::*;
use weft::{Embeddings, StructuredOutputMethod};
use weft_examples::{Models, WordEmbeddings, structured};

/// A route.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Route {
    /// Where to go.
    datasource: String,
}

#[tokio::test]
async fn a_scripted_role_answers_from_its_script_and_records_prompts() {
    let models = Models::scripted();
    assert!(models.is_scripted());
    let writer = models.chat_model("writer", ["first", "second"]);
    let config = RunnableConfig::default();
    assert_eq!(writer.invoke("a".into(), &config).await.unwrap().text(), "first");
    assert_eq!(writer.invoke("b".into(), &config).await.unwrap().text(), "second");
    let err = writer.invoke("c".into(), &config).await.unwrap_err();
    assert!(err.to_string().contains("no scripted reply left for call 3"), "{err}");
    let asked: Vec<String> = writer.prompts().iter().map(|p| p[0].text()).collect();
    assert_eq!(asked, ["a", "b", "c"]);
    assert_eq!(writer.role(), "writer");
    assert_eq!(ChatModel::model_name(&writer), "scripted-writer");
}

#[tokio::test]
async fn a_live_model_ignores_the_scripts() {
    let live = FakeChatModel::new(["live answer"]);
    let models = Models::live(live.clone());
    assert!(!models.is_scripted());
    let writer = models.chat_model("writer", ["scripted answer"]);
    assert!(writer.script().is_none());
    let reply = writer.invoke("hi".into(), &RunnableConfig::default()).await.unwrap();
    assert_eq!(reply.text(), "live answer");
    assert_eq!(writer.prompts().len(), 1, "prompts are recorded on a live model too");
    assert_eq!(writer.prompts()[0][0].text(), "hi");
    assert_eq!(live.calls().len(), 1);
}

#[test]
fn exact_checks_hold_on_the_script() {
    Models::scripted().expect_eq("same", 1, 1);
    let mismatch = std::panic::catch_unwind(|| Models::scripted().expect_eq("the answer", 1, 2));
    assert!(mismatch.is_err(), "a wrong value on the script fails the example");
}

#[test]
fn exact_checks_only_print_on_a_live_model() {
    let models = Models::live(FakeChatModel::new(["x"]));
    assert!(!models.checks_exactly());
    models.expect_eq("the answer", 1, 2);
}

#[test]
fn exact_checks_hold_on_a_live_server_that_answers_by_the_scripts() {
    let models = Models::live(FakeChatModel::new(["x"])).answering_by_script();
    assert!(models.checks_exactly());
    models.expect_eq("same", 1, 1);
    let mismatch =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| models.expect_eq("the answer", 1, 2)));
    assert!(mismatch.is_err(), "a drifting rule fails the example");
    // On the script, declaring it changes nothing.
    assert!(Models::scripted().answering_by_script().checks_exactly());
}

#[tokio::test]
async fn a_structured_reply_parses_as_the_type() {
    let models = Models::scripted();
    let route = Route { datasource: "web_search".to_owned() };
    let router = models.chat_model("router", [structured(&route)]);
    let parsed = router
        .clone()
        .with_structured_output::<Route>(StructuredOutputMethod::FunctionCalling)
        .invoke("where?".into(), &RunnableConfig::default())
        .await
        .unwrap();
    assert_eq!(parsed, route);
    assert_eq!(router.script().unwrap().calls()[0].options.tools[0].name, "Route");
}

#[tokio::test]
async fn word_embeddings_bring_texts_with_shared_words_together() {
    let embed = WordEmbeddings::new(256);
    let query = embed.embed_query("How are checkpoints saved?").await.unwrap();
    let near = embed.embed("A checkpoint is saved after every superstep.");
    let far = embed.embed("Tokio runs futures on worker threads.");
    assert!(cosine_similarity(&query, &near) > 0.5, "{}", cosine_similarity(&query, &near));
    assert!(cosine_similarity(&query, &far).abs() < 1e-6);
    assert_eq!(embed.embed("Checkpoints saved"), embed.embed("checkpoint saved"), "plurals fold");
    assert_eq!(embed.embed_documents(vec!["a b".into()]).await.unwrap(), [vec![0.0; 256]]);
    assert_eq!(WordEmbeddings::words("What does the Store do?"), ["store"]);
    assert_eq!(WordEmbeddings::new(0).dims(), 1);
}
