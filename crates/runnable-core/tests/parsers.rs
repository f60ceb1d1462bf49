#![allow(clippy::unwrap_used, missing_docs)]
//! Output parsers: text, JSON (streamed as progressively completed partials) and typed values.

use futures::StreamExt as _;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use weft_runnable_core::{
    AiMessage, Error, EventRecorder, JsonOutputParser, Message, Result, Runnable, RunnableConfig,
    RunnableGenerator, RunnableLambda, StrOutputParser, TypedOutputParser,
};

const NAME_AGE_CHUNKS: [&str; 5] = [r#"{"na"#, r#"me": "Al"#, r#"ice", "ag"#, r#"e": 3"#, "0}"];

/// A fake streaming model: ignores its input and streams `chunks` as AI message chunks.
fn streaming_model(chunks: &[&str]) -> RunnableGenerator<String, AiMessage> {
    let chunks: Vec<String> = chunks.iter().map(|c| (*c).to_owned()).collect();
    RunnableGenerator::new(move |_input: BoxStream<'_, Result<String>>, _| {
        futures::stream::iter(chunks.clone().into_iter().map(|c| Ok(AiMessage::new(c)))).boxed()
    })
    .named("model")
}

/// Streams `chunks` as plain strings.
fn streaming_text(chunks: &[&str]) -> RunnableGenerator<String, String> {
    let chunks: Vec<String> = chunks.iter().map(|c| (*c).to_owned()).collect();
    RunnableGenerator::new(move |_input: BoxStream<'_, Result<String>>, _| {
        futures::stream::iter(chunks.clone().into_iter().map(Ok)).boxed()
    })
}

async fn collect<T>(stream: BoxStream<'_, Result<T>>) -> Vec<Result<T>> {
    stream.collect().await
}

#[tokio::test]
async fn json_parser_streams_progressively_completed_partials() {
    let expected = vec![
        json!({}),
        json!({"name": "Al"}),
        json!({"name": "Alice"}),
        json!({"name": "Alice", "age": 3}),
        json!({"name": "Alice", "age": 30}),
    ];
    let chain = streaming_model(&NAME_AGE_CHUNKS) | JsonOutputParser;
    let chunks: Vec<Value> = collect(chain.stream(String::new(), &RunnableConfig::default()))
        .await
        .into_iter()
        .map(|c| c.unwrap())
        .collect();
    assert_eq!(chunks, expected);

    let chain = streaming_text(&NAME_AGE_CHUNKS) | JsonOutputParser;
    let chunks: Vec<Value> = collect(chain.stream(String::new(), &RunnableConfig::default()))
        .await
        .into_iter()
        .map(|c| c.unwrap())
        .collect();
    assert_eq!(chunks, expected);
}

#[tokio::test]
async fn json_parser_skips_chunks_that_change_nothing() {
    let chain = streaming_text(&[r#"{"a": 1"#, " ", ", ", r#""b"#, r#"": 2}"#]) | JsonOutputParser;
    let chunks: Vec<Value> = collect(chain.stream(String::new(), &RunnableConfig::default()))
        .await
        .into_iter()
        .map(|c| c.unwrap())
        .collect();
    assert_eq!(chunks, vec![json!({"a": 1}), json!({"a": 1, "b": 2})]);
}

#[tokio::test]
async fn json_chain_invoke_merges_chunks_then_parses() {
    let chain = streaming_model(&NAME_AGE_CHUNKS) | JsonOutputParser;
    let value = chain.invoke(String::new(), &RunnableConfig::default()).await.unwrap();
    assert_eq!(value, json!({"name": "Alice", "age": 30}));
    assert_eq!(
        Runnable::<String, Value>::merge_chunks(&JsonOutputParser, json!({"a": 1}), json!({"a": 12}))
            .unwrap(),
        json!({"a": 12})
    );
}

#[tokio::test]
async fn json_parser_strips_markdown_fences() {
    let config = RunnableConfig::default();
    let text = "```json\n{\"answer\": [1, 2]}\n```".to_owned();
    assert_eq!(JsonOutputParser.invoke(text, &config).await.unwrap(), json!({"answer": [1, 2]}));
    let message = AiMessage::new("Here it is:\n```json\n{\"ok\": true}\n```\nDone.");
    assert_eq!(JsonOutputParser.invoke(message, &config).await.unwrap(), json!({"ok": true}));
    let chain = streaming_text(&["```js", "on\n{\"a\"", ": 1}\n``", "`"]) | JsonOutputParser;
    let chunks: Vec<Value> =
        collect(chain.stream(String::new(), &config)).await.into_iter().map(|c| c.unwrap()).collect();
    assert_eq!(chunks, vec![json!({}), json!({"a": 1})]);
}

#[tokio::test]
async fn invalid_json_is_an_output_parser_error_naming_the_text() {
    let err =
        JsonOutputParser.invoke("no json here".to_owned(), &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(err.to_string(), "invalid json output: no json here");
    let parser_error = err.as_output_parser().unwrap();
    assert_eq!(parser_error.llm_output.as_deref(), Some("no json here"));
    assert!(matches!(JsonOutputParser.parse("{\"a\": 1]"), Err(Error::OutputParser(_))));
}

#[tokio::test]
async fn streamed_text_without_json_ends_with_the_error() {
    let chain = streaming_text(&["no ", "json"]) | JsonOutputParser;
    let chunks = collect(chain.stream(String::new(), &RunnableConfig::default())).await;
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].as_ref().unwrap_err().to_string(), "invalid json output: no json");
}

#[tokio::test]
async fn str_parser_reads_text_of_messages_and_strings() {
    let config = RunnableConfig::default();
    assert_eq!(StrOutputParser.invoke(AiMessage::new("a"), &config).await.unwrap(), "a");
    assert_eq!(StrOutputParser.invoke(Message::human("b"), &config).await.unwrap(), "b");
    assert_eq!(StrOutputParser.invoke("c".to_owned(), &config).await.unwrap(), "c");
}

#[tokio::test]
async fn str_parser_streams_each_chunk_text_and_reports_parser_events() {
    let chain = streaming_model(&["Hel", "lo", "!"]) | StrOutputParser;
    let recorder = EventRecorder::new();
    let config = RunnableConfig::default().with_callbacks(recorder.sink());
    let chunks: Vec<String> =
        collect(chain.stream(String::new(), &config)).await.into_iter().map(|c| c.unwrap()).collect();
    assert_eq!(chunks, vec!["Hel", "lo", "!"]);
    let parser_events: Vec<(String, Option<Value>)> = recorder
        .events()
        .into_iter()
        .filter(|e| e.name == "StrOutputParser")
        .map(|e| (e.event, e.data.chunk.or(e.data.output)))
        .collect();
    assert_eq!(
        parser_events,
        vec![
            ("on_parser_start".to_owned(), None),
            ("on_parser_stream".to_owned(), Some(json!("Hel"))),
            ("on_parser_stream".to_owned(), Some(json!("lo"))),
            ("on_parser_stream".to_owned(), Some(json!("!"))),
            ("on_parser_end".to_owned(), Some(json!("Hello!"))),
        ]
    );
}

#[tokio::test]
async fn parsers_pipe_into_further_steps() {
    let chain = streaming_model(&["{\"n\": ", "2}"])
        | JsonOutputParser
        | RunnableLambda::new(|v: Value| v["n"].as_i64().unwrap() * 10);
    assert_eq!(chain.invoke(String::new(), &RunnableConfig::default()).await.unwrap(), 20);
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct Person {
    /// The person's name.
    name: String,
    age: u32,
}

#[tokio::test]
async fn typed_parser_parses_fenced_json_into_the_type() {
    let parser = TypedOutputParser::<Person>::new();
    let text = "```json\n{\"name\": \"Ada\", \"age\": 36}\n```".to_owned();
    let person = parser.invoke(text, &RunnableConfig::default()).await.unwrap();
    assert_eq!(person, Person { name: "Ada".into(), age: 36 });
}

#[tokio::test]
async fn typed_parser_failure_names_the_type_and_the_completion() {
    let parser = TypedOutputParser::<Person>::new();
    let err = parser.invoke(r#"{"name": "Ada"}"#.to_owned(), &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"failed to parse Person from completion {"name":"Ada"}. got: missing field `age`"#
    );
    let err = parser.parse("nothing").unwrap_err();
    assert_eq!(err.to_string(), "invalid json output: nothing");
}

#[tokio::test]
async fn typed_parser_streams_values_once_they_fit_the_type() {
    let parser = TypedOutputParser::<Person>::new();
    let chain = streaming_model(&NAME_AGE_CHUNKS) | parser;
    let chunks: Vec<Person> = collect(chain.stream(String::new(), &RunnableConfig::default()))
        .await
        .into_iter()
        .map(|c| c.unwrap())
        .collect();
    assert_eq!(
        chunks,
        vec![Person { name: "Alice".into(), age: 3 }, Person { name: "Alice".into(), age: 30 }]
    );

    let chain = streaming_model(&[r#"{"name": "Al"#, r#"ice"}"#]) | parser;
    let chunks = collect(chain.stream(String::new(), &RunnableConfig::default())).await;
    assert_eq!(chunks.len(), 1);
    assert!(
        chunks[0].as_ref().unwrap_err().to_string().starts_with("failed to parse Person from completion")
    );
}

#[test]
fn typed_parser_format_instructions_carry_the_schema() {
    let instructions = TypedOutputParser::<Person>::new().format_instructions();
    assert!(instructions.starts_with(
        "The output should be formatted as a JSON instance that conforms to the JSON schema below."
    ));
    let schema_text = instructions.rsplit("```\n").next().unwrap().trim_end_matches("\n```");
    let schema: Value = serde_json::from_str(schema_text).unwrap();
    assert_eq!(schema["properties"]["name"]["description"], json!("The person's name."));
    assert_eq!(schema["required"], json!(["name", "age"]));
    for noise in ["title", "$schema", "type"] {
        assert!(schema.get(noise).is_none(), "{noise} left in {schema}");
    }
}
