//! Requests as sent and answers as parsed: settings, streams, tool calls, structured output, events.

use super::*;

#[tokio::test]
async fn invoke_sends_the_settings_and_reads_text_usage_and_metadata() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .and(header("authorization", "Bearer sk-test-key"))
        .and(header("openai-organization", "org-1"))
        .respond_with(text_reply("Hello there."))
        .mount(&server)
        .await;
    let model = ChatOpenAI::builder()
        .model("gpt-test")
        .base_url(format!("{}/v1/", server.uri()))
        .api_key("sk-test-key")
        .organization("org-1")
        .temperature(0.0)
        .max_tokens(64)
        .seed(7)
        .top_p(0.9)
        .stop(["END"])
        .extra("user", json!("u-1"))
        .build()
        .unwrap();
    let reply = model.invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap();

    assert_eq!(reply.text(), "Hello there.");
    assert_eq!(reply.id.as_deref(), Some("chatcmpl-abc"));
    let usage = reply.usage_metadata.clone().unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens, usage.total_tokens), (9, 12, 21));
    assert_eq!(usage.input_token_details.unwrap()["cache_read"], json!(3));
    assert_eq!(reply.response_metadata["model_name"], json!("gpt-test-0613"));
    assert_eq!(reply.response_metadata["finish_reason"], json!("stop"));
    assert_eq!(reply.response_metadata["system_fingerprint"], json!("fp_44709d6fcb"));

    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0],
        json!({
            "model": "gpt-test",
            "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"}],
            "temperature": 0.0, "max_tokens": 64, "seed": 7, "top_p": 0.9, "stop": ["END"], "user": "u-1",
            "stream": false
        })
    );
}

#[tokio::test]
async fn stream_yields_token_chunks_then_the_usage_chunk_with_no_choices() {
    let server = MockServer::start().await;
    mount(
        &server,
        sse(
            &[
                chunk(json!({"role": "assistant", "content": ""}), None),
                chunk(json!({"content": "Hel"}), None),
                chunk(json!({"content": "lo"}), None),
                chunk(json!({"content": " world"}), None),
                chunk(json!({}), Some("stop")),
                usage_chunk(),
            ],
            true,
        ),
    )
    .await;
    let model = model(&server);
    let (chunks, err) = collect(&model, prompt("hi")).await;
    assert!(err.is_none(), "{err:?}");
    let texts: Vec<String> = chunks.iter().map(AiMessage::text).collect();
    assert_eq!(texts, vec!["", "Hel", "lo", " world", "", "", ""]);
    assert_eq!(chunks[5].usage_metadata.as_ref().unwrap().input_tokens, 7);
    assert_eq!(chunks.last().unwrap().chunk_position.as_deref(), Some("last"));

    let whole = merged(&chunks);
    assert_eq!(whole.text(), "Hello world");
    assert_eq!(whole.id.as_deref(), Some("chatcmpl-s1"));
    let usage = whole.usage_metadata.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens, usage.total_tokens), (7, 3, 10));
    assert_eq!(usage.input_token_details.unwrap()["cache_read"], json!(2));
    assert_eq!(whole.response_metadata["model_name"], json!("gpt-test-0613"), "not repeated per chunk");
    assert_eq!(whole.response_metadata["finish_reason"], json!("stop"));

    let sent = bodies(&server).await;
    assert_eq!(sent[0]["stream"], json!(true));
    assert_eq!(sent[0]["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn stream_usage_can_be_turned_off() {
    let server = MockServer::start().await;
    mount(&server, sse(&[chunk(json!({"content": "ok"}), Some("stop"))], true)).await;
    let model = ChatOpenAI::builder()
        .model("m")
        .base_url(format!("{}/v1", server.uri()))
        .stream_usage(false)
        .build()
        .unwrap();
    let (chunks, err) = collect(&model, prompt("hi")).await;
    assert!(err.is_none());
    assert_eq!(merged(&chunks).text(), "ok");
    assert!(bodies(&server).await[0].get("stream_options").is_none());
}

#[tokio::test]
async fn streamed_tool_calls_merge_split_arguments_and_repeated_ids_and_names() {
    let server = MockServer::start().await;
    let call = |index: u32, id: &str, name: &str, args: &str| {
        chunk(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": args}}]}),
            None,
        )
    };
    mount(
        &server,
        sse(
            &[
                chunk(json!({"role": "assistant", "content": ""}), None),
                // This server repeats id and name in every fragment, as some compatible servers do.
                call(0, "call_a", "get_weather", ""),
                call(0, "call_a", "get_weather", "{\"city\": "),
                call(0, "call_a", "get_weather", "\"Paris\"}"),
                // The second call gives its id and name once, then only argument pieces.
                call(1, "call_b", "get_time", "{\"tz\""),
                chunk(json!({"tool_calls": [{"index": 1, "function": {"arguments": ": \"CET\"}"}}]}), None),
                chunk(json!({}), Some("tool_calls")),
                usage_chunk(),
            ],
            true,
        ),
    )
    .await;
    let (chunks, err) = collect(&model(&server), prompt("weather?")).await;
    assert!(err.is_none(), "{err:?}");
    let whole = merged(&chunks);
    assert_eq!(whole.text(), "");
    let calls: Vec<(&str, &Value, Option<&str>)> =
        whole.tool_calls.iter().map(|c| (c.name.as_str(), &c.args, c.id.as_deref())).collect();
    assert_eq!(
        calls,
        vec![
            ("get_weather", &json!({"city": "Paris"}), Some("call_a")),
            ("get_time", &json!({"tz": "CET"}), Some("call_b"))
        ]
    );
    assert!(whole.invalid_tool_calls.is_empty());
    assert_eq!(whole.response_metadata["finish_reason"], json!("tool_calls"));
}

#[tokio::test]
async fn streamed_arguments_that_never_parse_become_an_invalid_tool_call() {
    let server = MockServer::start().await;
    mount(
        &server,
        sse(
            &[
                chunk(json!({"tool_calls": [{"index": 0, "id": "call_x", "type": "function", "function": {"name": "f", "arguments": "not"}}]}), None),
                chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": " json at all"}}]}), None),
                chunk(json!({}), Some("tool_calls")),
            ],
            true,
        ),
    )
    .await;
    let reply = model(&server)
        .invoke(
            prompt("go"),
            &RunnableConfig::default().with_callbacks(weft_runnable_core::EventRecorder::new().sink()),
        )
        .await
        .unwrap();
    assert!(reply.tool_calls.is_empty(), "{reply:?}");
    assert_eq!(reply.invalid_tool_calls.len(), 1);
    assert_eq!(reply.invalid_tool_calls[0].args.as_deref(), Some("not json at all"));
    assert_eq!(reply.invalid_tool_calls[0].id.as_deref(), Some("call_x"));
}

#[tokio::test]
async fn whole_tool_calls_with_empty_content_and_broken_arguments() {
    let server = MockServer::start().await;
    let message = json!({"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 3}"}},
        {"id": "call_2", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 2, \"b\""}}
    ]});
    mount(&server, ResponseTemplate::new(200).set_body_json(completion(message, "tool_calls"))).await;
    let reply = model(&server).invoke(prompt("add"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(reply.text(), "");
    assert_eq!(reply.tool_calls.len(), 1);
    assert_eq!(reply.tool_calls[0].args, json!({"a": 2, "b": 3}));
    assert_eq!(reply.invalid_tool_calls.len(), 1);
    assert_eq!(reply.invalid_tool_calls[0].id.as_deref(), Some("call_2"));
    assert_eq!(reply.invalid_tool_calls[0].args.as_deref(), Some("{\"a\": 2, \"b\""));
}

#[tokio::test]
async fn bound_tools_and_every_tool_choice_are_sent_as_openai_functions() {
    let server = MockServer::start().await;
    mount(&server, text_reply("ok")).await;
    let add = ToolSpec::new(
        "add",
        "Adds two numbers.",
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
    );
    let choices = [
        (Some(ToolChoice::Auto), json!("auto")),
        (Some(ToolChoice::Required), json!("required")),
        (Some(ToolChoice::None), json!("none")),
        (Some(ToolChoice::Tool("add".to_owned())), json!({"type": "function", "function": {"name": "add"}})),
        (None, Value::Null),
    ];
    for (choice, _) in &choices {
        let bound = model(&server).bind_tools([add.clone()], choice.clone());
        bound.invoke(prompt("2+3"), &RunnableConfig::default()).await.unwrap();
    }
    let parallel = model(&server).with_options(CallOptions {
        tools: vec![add.clone()],
        parallel_tool_calls: Some(false),
        ..CallOptions::default()
    });
    parallel.invoke(prompt("2+3"), &RunnableConfig::default()).await.unwrap();

    let sent = bodies(&server).await;
    for (body, (_, expected)) in sent.iter().zip(&choices) {
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "function": {"name": "add", "description": "Adds two numbers.",
                "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}])
        );
        assert_eq!(body.get("tool_choice").cloned().unwrap_or(Value::Null), *expected);
        assert!(body.get("parallel_tool_calls").is_none());
    }
    assert_eq!(sent[5]["parallel_tool_calls"], json!(false));
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
/// A person.
struct Person {
    name: String,
    age: u32,
}

#[tokio::test]
async fn structured_output_by_strict_json_schema_function_calling_and_json_mode() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .and(wiremock::matchers::body_partial_json(json!({"tool_choice": {"type": "function"}})))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_p", "type": "function", "function": {"name": "Person", "arguments": "{\"name\": \"Ada\", \"age\": 36}"}}]}),
            "tool_calls",
        )))
        .with_priority(1)
        .mount(&server)
        .await;
    mount(&server, text_reply("{\"name\": \"Ada\", \"age\": 36}")).await;
    let ada = Person { name: "Ada".to_owned(), age: 36 };
    for method in [
        StructuredOutputMethod::JsonSchema,
        StructuredOutputMethod::FunctionCalling,
        StructuredOutputMethod::JsonMode,
    ] {
        let person = model(&server)
            .with_structured_output::<Person>(method)
            .invoke(prompt("who?"), &RunnableConfig::default())
            .await
            .unwrap();
        assert_eq!(person, ada, "{method:?}");
    }
    let sent = bodies(&server).await;
    let schema = &sent[0]["response_format"];
    assert_eq!(schema["type"], json!("json_schema"));
    assert_eq!(schema["json_schema"]["name"], json!("Person"));
    assert_eq!(schema["json_schema"]["strict"], json!(true));
    assert_eq!(schema["json_schema"]["schema"]["additionalProperties"], json!(false));
    assert_eq!(schema["json_schema"]["schema"]["required"], json!(["name", "age"]));
    assert_eq!(sent[1]["tool_choice"], json!({"type": "function", "function": {"name": "Person"}}));
    assert_eq!(sent[1]["parallel_tool_calls"], json!(false));
    assert_eq!(sent[2]["response_format"], json!({"type": "json_object"}));
}

#[tokio::test]
async fn reasoning_content_is_kept_whole_and_streamed() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .and(wiremock::matchers::body_partial_json(json!({"stream": true})))
        .respond_with(sse(
            &[
                chunk(json!({"role": "assistant", "reasoning_content": "Let me "}), None),
                chunk(json!({"reasoning_content": "think."}), None),
                chunk(json!({"content": "42"}), None),
                chunk(json!({}), Some("stop")),
            ],
            true,
        ))
        .with_priority(1)
        .mount(&server)
        .await;
    mount(
        &server,
        ResponseTemplate::new(200).set_body_json(completion(
            json!({"role": "assistant", "content": "42", "reasoning_content": "Let me think."}),
            "stop",
        )),
    )
    .await;
    let model = model(&server);
    let whole = model.invoke(prompt("?"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(whole.additional_kwargs["reasoning_content"], json!("Let me think."));
    let (chunks, _) = collect(&model, prompt("?")).await;
    let streamed = merged(&chunks);
    assert_eq!(streamed.text(), "42");
    assert_eq!(streamed.additional_kwargs["reasoning_content"], json!("Let me think."));
}

#[tokio::test]
async fn tokens_show_in_stream_events_as_on_chat_model_stream() {
    let server = MockServer::start().await;
    mount(
        &server,
        sse(
            &[
                chunk(json!({"content": "A"}), None),
                chunk(json!({"content": "B"}), None),
                chunk(json!({}), Some("stop")),
                usage_chunk(),
            ],
            true,
        ),
    )
    .await;
    let model = model(&server);
    let events: Vec<_> =
        weft_runnable_core::RunnableExt::stream_events(&model, prompt("hi"), &RunnableConfig::default())
            .map(|e| e.unwrap())
            .collect()
            .await;
    let names: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(names.first(), Some(&"on_chat_model_start"));
    assert_eq!(names.last(), Some(&"on_chat_model_end"));
    let tokens: String = events
        .iter()
        .filter(|e| e.event == "on_chat_model_stream")
        .map(|e| e.data.chunk.as_ref().unwrap()["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(tokens, "AB");
    assert_eq!(events[0].name, "ChatOpenAI");
    assert_eq!(events[0].metadata["ls_provider"], json!("openai"));
    assert_eq!(events[0].metadata["ls_model_name"], json!("gpt-test"));
}

#[tokio::test]
async fn tokens_show_in_the_graph_messages_stream_mode_with_the_node() {
    use weft_graph::{MessagesState, Runtime, START, StateGraph, StreamData, StreamMode};

    let server = MockServer::start().await;
    mount(
        &server,
        sse(
            &[
                chunk(json!({"content": "Hi"}), None),
                chunk(json!({"content": " you"}), None),
                chunk(json!({}), Some("stop")),
            ],
            true,
        ),
    )
    .await;
    let model = model(&server);
    let mut graph = StateGraph::<MessagesState>::new();
    graph.add_node("agent", move |state: MessagesState, rt: Runtime| {
        let model = model.clone();
        async move {
            let reply = model.invoke(PromptValue::from(state.messages.to_vec()), rt.config()).await?;
            Ok::<_, weft_runnable_core::Error>(MessagesState::update().messages(vec![Message::Ai(reply)]))
        }
    });
    graph.add_edge(START, "agent");
    let app = graph.compile().unwrap();
    let input = MessagesState::update().messages(vec![Message::human("hello")]);
    let parts: Vec<_> =
        app.stream(input, &RunnableConfig::default(), &[StreamMode::Messages]).collect().await;
    let mut tokens = String::new();
    for part in parts {
        match part.unwrap().data {
            StreamData::Message { chunk, metadata } => {
                assert_eq!(metadata["langgraph_node"], json!("agent"));
                tokens.push_str(&chunk.text());
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(tokens, "Hi you");
    assert_eq!(bodies(&server).await[0]["stream"], json!(true), "the node's model streamed");
}

#[tokio::test]
async fn generate_and_stream_chunks_take_call_options_directly() {
    let server = MockServer::start().await;
    mount(&server, text_reply("ok")).await;
    let model = model(&server);
    let options = CallOptions::default().with_stop(["\n"]).with_extra("logit_bias", json!({"50256": -100}));
    let reply =
        model.generate(vec![Message::human("hi")], &options, &RunnableConfig::default()).await.unwrap();
    assert_eq!(reply.text(), "ok");
    let sent = bodies(&server).await;
    assert_eq!(sent[0]["stop"], json!(["\n"]));
    assert_eq!(sent[0]["logit_bias"], json!({"50256": -100}));
}

#[tokio::test]
async fn structured_output_with_raw_reports_a_reply_that_does_not_parse() {
    let server = MockServer::start().await;
    mount(&server, text_reply("I would rather not say.")).await;
    let result = model(&server)
        .with_structured_output::<Person>(StructuredOutputMethod::JsonSchema)
        .include_raw()
        .invoke(prompt("who?"), &RunnableConfig::default())
        .await
        .unwrap();
    assert_eq!(result.raw.text(), "I would rather not say.");
    assert_eq!(result.parsed, None);
    assert!(result.parsing_error.unwrap().contains("failed to parse Person"));
}
