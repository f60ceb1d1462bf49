//! The `otel` feature against an HTTP mock of an OTLP receiver: spans are posted as OTLP protobuf to
//! `/v1/traces`, with the model's GenAI and OpenInference attributes, and content only when asked for.
#![cfg(feature = "otel")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use tracing_subscriber::layer::SubscriberExt as _;
use weft_integrations::otel::{OtelConfig, OtelError, layer};
use weft_runnable_core::fakes::FakeChatModel;
use weft_runnable_core::messages::UsageMetadata;
use weft_runnable_core::{AiMessage, Runnable, RunnableConfig};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Runs one model call with the export configured by `config` and returns the bodies the receiver got.
async fn export(server: &MockServer, config: OtelConfig) -> Vec<Vec<u8>> {
    let (layer, guard) = layer(&config).unwrap();
    {
        let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
        let reply = AiMessage {
            usage_metadata: Some(UsageMetadata {
                input_tokens: 7,
                output_tokens: 2,
                total_tokens: 9,
                ..Default::default()
            }),
            ..AiMessage::new("the answer is blue")
        };
        let model = FakeChatModel::new([reply]).with_model_name("model-x");
        model.invoke("secret question".into(), &RunnableConfig::default()).await.unwrap();
    }
    // Shutting down waits for the exporter's thread to post: off the runtime's threads.
    tokio::task::spawn_blocking(move || guard.shutdown()).await.unwrap().unwrap();
    let requests = server.received_requests().await.unwrap();
    for request in &requests {
        assert_eq!(request.url.path(), "/v1/traces");
        let kind = request.headers.get("content-type").unwrap().to_str().unwrap();
        assert_eq!(kind, "application/x-protobuf");
    }
    requests.into_iter().map(|r| r.body).collect()
}

fn contains(bodies: &[Vec<u8>], text: &str) -> bool {
    bodies.iter().any(|b| b.windows(text.len()).any(|w| w == text.as_bytes()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_call_is_exported_with_its_attributes_and_content_only_when_asked() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/traces"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;

    let bodies = export(&server, OtelConfig::new(server.uri()).project("proj-1")).await;
    assert!(!bodies.is_empty(), "spans were posted");
    for expected in [
        "FakeChatModel",
        "openinference.span.kind",
        "LLM",
        "gen_ai.request.model",
        "model-x",
        "llm.token_count.prompt",
        "gen_ai.usage.output_tokens",
        "openinference.project.name",
        "proj-1",
        "service.name",
    ] {
        assert!(contains(&bodies, expected), "the export carries {expected}");
    }
    assert!(!contains(&bodies, "secret question"), "no prompt unless asked for");
    assert!(!contains(&bodies, "the answer is blue"), "no completion unless asked for");

    server.reset().await;
    Mock::given(method("POST"))
        .and(path("/v1/traces"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let bodies =
        export(&server, OtelConfig::new(format!("{}/v1/traces", server.uri())).record_content(true)).await;
    assert!(
        contains(&bodies, "input.value") && contains(&bodies, "secret question"),
        "the prompt, when asked for"
    );
    assert!(contains(&bodies, "output.value") && contains(&bodies, "the answer is blue"), "the completion");
    weft_runnable_core::trace::set_record_content(false);
}

#[test]
fn a_bad_endpoint_is_a_typed_error() {
    let Err(err) = layer::<tracing_subscriber::Registry>(&OtelConfig::new("127.0.0.1:4318")) else {
        panic!("an endpoint without a scheme was accepted")
    };
    assert!(matches!(err, OtelError::InvalidEndpoint { .. }), "{err}");
}
