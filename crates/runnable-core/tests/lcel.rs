//! `prompt | fake model | StrOutputParser`: invoke, batch, token streaming and the event order.
#![allow(clippy::unwrap_used, missing_docs)]

use futures::StreamExt as _;
use serde_json::json;
use weft_runnable_core::fakes::FakeChatModel;
use weft_runnable_core::{ChatPromptTemplate, Runnable, RunnableConfig, RunnableExt, StrOutputParser};

fn prompt() -> ChatPromptTemplate {
    ChatPromptTemplate::from_messages([("system", "You are {role}."), ("human", "{question}")]).unwrap()
}

#[tokio::test]
async fn prompt_model_parser_invokes_and_batches() {
    let model = FakeChatModel::new(["Paris", "Rome", "Oslo", "Bern"]);
    let chain = prompt() | model.clone() | StrOutputParser;
    let input = |q: &str| json!({"role": "a guide", "question": q});
    assert_eq!(chain.invoke(input("France?"), &RunnableConfig::default()).await.unwrap(), "Paris");
    let config = RunnableConfig::default().with_max_concurrency(2);
    let answers =
        chain.batch(vec![input("Italy?"), input("Norway?"), input("Swiss?")], &config).await.unwrap();
    assert_eq!(answers, vec!["Rome", "Oslo", "Bern"]);
    let first = &model.calls()[0].messages;
    assert_eq!((first[0].text(), first[1].text()), ("You are a guide.".to_owned(), "France?".to_owned()));
}

#[tokio::test]
async fn prompt_model_parser_streams_tokens_and_reports_events_in_langchain_order() {
    let chain = (prompt() | FakeChatModel::new(["Hi there", "Hi there"]) | StrOutputParser)
        .with_config(RunnableConfig::default().with_run_name("mychain"));
    let input = json!({"role": "terse", "question": "hello"});
    let tokens: Vec<String> =
        chain.stream(input.clone(), &RunnableConfig::default()).map(|t| t.unwrap()).collect().await;
    // The model leaves its stream open: the empty chunk that closes it comes through too, as in LangChain.
    assert_eq!(tokens, vec!["Hi", " there", ""]);

    let events: Vec<(String, String)> = chain
        .stream_events(input, &RunnableConfig::default())
        .map(|e| {
            let e = e.unwrap();
            (e.event, e.name)
        })
        .collect()
        .await;
    let per_token = [
        ("on_chat_model_stream", "FakeChatModel"),
        ("on_parser_stream", "StrOutputParser"),
        ("on_chain_stream", "mychain"),
    ];
    let mut expected = vec![
        ("on_chain_start", "mychain"),
        ("on_prompt_start", "ChatPromptTemplate"),
        ("on_prompt_end", "ChatPromptTemplate"),
        ("on_chat_model_start", "FakeChatModel"),
    ];
    expected.push(per_token[0]);
    expected.push(("on_parser_start", "StrOutputParser"));
    expected.extend(&per_token[1..]);
    expected.extend(per_token);
    expected.extend(per_token);
    expected.extend([
        ("on_chat_model_end", "FakeChatModel"),
        ("on_parser_end", "StrOutputParser"),
        ("on_chain_end", "mychain"),
    ]);
    let expected: Vec<(String, String)> =
        expected.into_iter().map(|(a, b)| (a.to_owned(), b.to_owned())).collect();
    assert_eq!(events, expected);
}
