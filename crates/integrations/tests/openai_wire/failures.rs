//! Errors and retries: rate limits, server errors, broken streams, timeouts, secrets kept out of errors.

use super::*;

#[tokio::test]
async fn a_429_with_retry_after_is_retried_after_the_wait_then_succeeds() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "1")
                .set_body_json(json!({"error": {"message": "Rate limit reached", "type": "requests", "param": null, "code": "rate_limit_exceeded"}})),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    mount(&server, text_reply("finally")).await;
    let started = Instant::now();
    let reply = model(&server).invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(reply.text(), "finally");
    assert!(started.elapsed() >= Duration::from_secs(1), "waited only {:?}", started.elapsed());
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn exhausted_rate_limit_retries_give_a_typed_error_a_caller_can_act_on() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(429)
            .insert_header("retry-after-ms", "20")
            .set_body_json(json!({"error": {"message": "Rate limit reached for gpt-test", "type": "requests", "param": null, "code": "rate_limit_exceeded"}})),
    )
    .await;
    let model = ChatOpenAI::builder()
        .model("gpt-test")
        .base_url(format!("{}/v1", server.uri()))
        .max_retries(3)
        .retry_delay(Duration::from_millis(1), Duration::from_millis(5))
        .build()
        .unwrap();
    let err = model.invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(server.received_requests().await.unwrap().len(), 4, "the first attempt and three retries");

    let model_error = err.as_model().unwrap();
    assert_eq!(model_error.kind, ModelErrorKind::RateLimited);
    assert_eq!(model_error.status, Some(429));
    assert_eq!(model_error.retry_after, Some(Duration::from_millis(20)));
    assert!(model_error.is_transient());
    let openai = openai_error(&err);
    assert!(openai.is_rate_limited());
    assert_eq!(openai.status(), Some(429));
    assert_eq!(openai.retry_after(), Some(Duration::from_millis(20)));
    assert_eq!(openai.api_error().unwrap().code.as_deref(), Some("rate_limit_exceeded"));
    assert!(err.to_string().contains("Rate limit reached for gpt-test"), "{err}");
}

#[tokio::test]
async fn an_exhausted_quota_is_not_retried() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(429).set_body_json(
            json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}}),
        ),
    )
    .await;
    let err = model(&server).invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    assert!(openai_error(&err).is_rate_limited());
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_500_is_retried_then_reported_as_a_server_error() {
    let server = MockServer::start().await;
    mount(&server, ResponseTemplate::new(500).set_body_string("upstream exploded")).await;
    let err = model(&server).invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(server.received_requests().await.unwrap().len(), 3, "default: two retries");
    let openai = openai_error(&err);
    assert!(openai.is_server_error() && openai.is_retryable() && !openai.is_invalid_request());
    assert_eq!(openai.status(), Some(500));
    assert_eq!(openai.api_error().unwrap().message, "upstream exploded");
    assert_eq!(err.as_model().unwrap().kind, ModelErrorKind::Server);
}

#[tokio::test]
async fn a_503_then_success_recovers() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .respond_with(
            ResponseTemplate::new(503)
                .set_body_json(json!({"error": {"message": "overloaded", "type": "server_error"}})),
        )
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&server)
        .await;
    mount(&server, text_reply("back")).await;
    let reply = model(&server).invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(reply.text(), "back");
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
}

#[tokio::test]
async fn a_400_error_body_is_read_and_not_retried() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(400).set_body_json(json!({"error": {
            "message": "Invalid value for 'tool_choice': no function named 'nosuch' was specified in the 'tools' parameter.",
            "type": "invalid_request_error", "param": "tool_choice", "code": null}})),
    )
    .await;
    let err = model(&server).invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
    let openai = openai_error(&err);
    assert!(openai.is_invalid_request() && !openai.is_retryable());
    let api = openai.api_error().unwrap();
    assert_eq!(api.status, Some(400));
    assert_eq!(api.error_type.as_deref(), Some("invalid_request_error"));
    assert_eq!(api.param.as_deref(), Some("tool_choice"));
    assert!(api.message.starts_with("Invalid value for 'tool_choice'"));
    assert_eq!(err.as_model().unwrap().kind, ModelErrorKind::InvalidRequest);
    assert_eq!(err.as_model().unwrap().status, Some(400));
}

#[tokio::test]
async fn a_401_is_an_authentication_error() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(401).set_body_json(
            json!({"error": {"message": "Incorrect API key provided: sk-test-***-key.", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}),
        ),
    )
    .await;
    let err = model(&server).invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    assert!(openai_error(&err).is_authentication());
    assert_eq!(err.as_model().unwrap().kind, ModelErrorKind::Authentication);
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn an_error_status_on_a_streamed_request_is_an_error_item() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(400)
            .set_body_json(json!({"error": {"message": "bad", "type": "invalid_request_error"}})),
    )
    .await;
    let (chunks, err) = collect(&model(&server), prompt("hi")).await;
    assert!(chunks.is_empty());
    assert_eq!(openai_error(&err.unwrap()).status(), Some(400));
}

#[tokio::test]
async fn a_stream_cut_in_the_middle_is_an_error_after_the_chunks_that_came() {
    let server = MockServer::start().await;
    mount(
        &server,
        sse(
            &[
                chunk(json!({"role": "assistant", "content": ""}), None),
                chunk(json!({"content": "Hal"}), None),
            ],
            false,
        ),
    )
    .await;
    let (chunks, err) = collect(&model(&server), prompt("hi")).await;
    assert_eq!(chunks.iter().map(AiMessage::text).collect::<String>(), "Hal");
    let err = err.expect("a cut stream must fail");
    assert!(openai_error(&err).is_incomplete_stream(), "{err}");
    assert_eq!(err.as_model().unwrap().kind, ModelErrorKind::InvalidResponse);

    // Invoked with listeners (so streamed underneath), the cut stream fails the call too.
    let recorder = weft_runnable_core::EventRecorder::new();
    let config = RunnableConfig::default().with_callbacks(recorder.sink());
    let err = model(&server).invoke(prompt("hi"), &config).await.unwrap_err();
    assert!(openai_error(&err).is_incomplete_stream(), "{err}");
}

#[tokio::test]
async fn an_empty_stream_is_an_error_not_an_empty_answer() {
    let server = MockServer::start().await;
    mount(&server, sse(&[], true)).await;
    let (chunks, err) = collect(&model(&server), prompt("hi")).await;
    assert!(chunks.is_empty());
    assert!(openai_error(&err.unwrap()).is_incomplete_stream());
}

#[tokio::test]
async fn an_error_object_in_the_middle_of_a_stream_ends_it_with_that_error() {
    let server = MockServer::start().await;
    mount(
        &server,
        sse(
            &[
                chunk(json!({"content": "Hi"}), None),
                json!({"error": {"message": "The server had an error", "type": "server_error"}}),
            ],
            true,
        ),
    )
    .await;
    let (chunks, err) = collect(&model(&server), prompt("hi")).await;
    assert_eq!(chunks.len(), 1);
    let err = err.unwrap();
    assert_eq!(openai_error(&err).api_error().unwrap().message, "The server had an error");
}

#[tokio::test]
async fn a_connection_cut_mid_stream_is_a_connection_error() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buffer = vec![0_u8; 65536];
        let _ = socket.read(&mut buffer).await.unwrap();
        let event = format!("data: {}\n\n", chunk(json!({"content": "Hel"}), None));
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        let body = format!("{:x}\r\n{event}\r\n", event.len());
        socket.write_all(head.as_bytes()).await.unwrap();
        socket.write_all(body.as_bytes()).await.unwrap();
        socket.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Gone without the closing chunk: the body is cut.
    });
    let model = ChatOpenAI::builder().model("m").base_url(format!("http://{address}/v1")).build().unwrap();
    let (chunks, err) = collect(&model, prompt("hi")).await;
    assert_eq!(chunks.iter().map(AiMessage::text).collect::<String>(), "Hel");
    let err = err.expect("a cut connection must fail");
    let openai = openai_error(&err);
    assert!(openai.is_connection(), "{err}");
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let server = MockServer::start().await;
    mount(&server, text_reply("late").set_delay(Duration::from_secs(3))).await;
    let model = ChatOpenAI::builder()
        .model("m")
        .base_url(format!("{}/v1", server.uri()))
        .timeout(Duration::from_millis(200))
        .max_retries(0)
        .build()
        .unwrap();
    let started = Instant::now();
    let err = model.invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(openai_error(&err).is_timeout(), "{err}");
    assert_eq!(err.as_model().unwrap().kind, ModelErrorKind::Timeout);
}

#[tokio::test]
async fn a_refused_connection_is_retried_then_a_connection_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let model = ChatOpenAI::builder()
        .model("m")
        .base_url(format!("http://127.0.0.1:{port}/v1"))
        .retry_delay(Duration::from_millis(1), Duration::from_millis(2))
        .build()
        .unwrap();
    let err = model.invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    assert!(openai_error(&err).is_connection(), "{err}");
    assert_eq!(err.as_model().unwrap().kind, ModelErrorKind::Connection);
}

#[tokio::test]
async fn an_answer_that_is_not_json_is_an_invalid_response() {
    let server = MockServer::start().await;
    mount(&server, ResponseTemplate::new(200).set_body_raw("<html>proxy login</html>", "text/html")).await;
    let err = model(&server).invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    assert!(matches!(openai_error(&err), OpenAIError::InvalidResponse(_)), "{err}");
}

#[tokio::test]
async fn the_api_key_never_appears_in_errors_debug_output_or_logs() {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);
    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let secret = "sk-proj-SECRET-0123456789";
    let server = MockServer::start().await;
    mount(&server, ResponseTemplate::new(500).set_body_string("boom")).await;
    let model = ChatOpenAI::builder()
        .model("m")
        .base_url(format!("{}/v1", server.uri()))
        .api_key(secret)
        .retry_delay(Duration::from_millis(1), Duration::from_millis(2))
        .build()
        .unwrap();
    let err = model.invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    let request = &server.received_requests().await.unwrap()[0];
    assert_eq!(request.headers.get("authorization").unwrap().to_str().unwrap(), format!("Bearer {secret}"));

    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("openai request failed"), "the retries are logged: {logs}");
    for shown in [format!("{model:?}"), format!("{err}"), format!("{err:?}"), logs] {
        assert!(!shown.contains("SECRET"), "the key leaked: {shown}");
    }
}

#[tokio::test]
async fn an_http_error_names_the_request_the_status_and_the_body() {
    let server = MockServer::start().await;
    mount(&server, ResponseTemplate::new(500).set_body_string("upstream exploded: worker 3 is gone")).await;
    let model = ChatOpenAI::builder()
        .model("gpt-test")
        .base_url(format!("{}/v1", server.uri()))
        .max_retries(0)
        .build()
        .unwrap();
    let err = model.invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&format!("POST {}/v1/chat/completions", server.uri())), "{text}");
    assert!(text.contains("500"), "{text}");
    assert!(text.contains("upstream exploded: worker 3 is gone"), "{text}");
    assert!(!text.contains("hint"), "a 500 is not a base URL problem: {text}");
    let openai = openai_error(&err).to_string();
    assert!(
        openai.starts_with(&format!("POST {}/v1/chat/completions: api error 500:", server.uri())),
        "{openai}"
    );
}

#[tokio::test]
async fn a_404_from_a_base_url_without_v1_hints_at_v1() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(ResponseTemplate::new(404).set_body_string("404 page not found"))
        .mount(&server)
        .await;
    let model =
        ChatOpenAI::builder().model("gpt-test").base_url(server.uri()).max_retries(0).build().unwrap();
    let err = model.invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&format!("POST {}/chat/completions", server.uri())), "{text}");
    assert!(text.contains("404 page not found"), "{text}");
    assert!(text.contains(&format!("is the base URL {}/v1?", server.uri())), "{text}");
    // With /v1 a 404 is something else (an unknown model, say): no hint.
    let with_v1 = MockServer::start().await;
    mount(&with_v1, ResponseTemplate::new(404).set_body_json(json!({"error": {"message": "no such model"}})))
        .await;
    let model = ChatOpenAI::builder()
        .model("gpt-test")
        .base_url(format!("{}/v1", with_v1.uri()))
        .max_retries(0)
        .build()
        .unwrap();
    let err = model.invoke(prompt("hi"), &RunnableConfig::default()).await.unwrap_err();
    assert!(err.to_string().contains("no such model") && !err.to_string().contains("hint"), "{err}");
}
