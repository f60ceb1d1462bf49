//! Embeddings: batches and their order, typed errors.

use super::*;

/// Answers an embeddings request with one vector per input: `[length of the text, its position]`.
struct EchoEmbeddings;

impl Respond for EchoEmbeddings {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = request.body_json().unwrap();
        let data: Vec<Value> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .rev() // out of order on purpose: the index places them
            .map(|(i, text)| json!({"object": "embedding", "index": i, "embedding": [text.as_str().unwrap().len() as f64, i as f64]}))
            .collect();
        ResponseTemplate::new(200).set_body_json(
            json!({"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 1, "total_tokens": 1}}),
        )
    }
}

#[tokio::test]
async fn embeddings_are_sent_in_batches_and_come_back_in_order() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path("/v1/embeddings")).respond_with(EchoEmbeddings).mount(&server).await;
    let embeddings = OpenAIEmbeddings::builder()
        .model("text-embedding-3-small")
        .dimensions(2)
        .batch_size(2)
        .base_url(format!("{}/v1", server.uri()))
        .api_key("k")
        .build()
        .unwrap();
    let texts: Vec<String> = ["a", "bb", "ccc", "dddd", "eeeee"].iter().map(|s| (*s).to_owned()).collect();
    let vectors = embeddings.embed_documents(texts).await.unwrap();
    assert_eq!(vectors, vec![vec![1.0, 0.0], vec![2.0, 1.0], vec![3.0, 0.0], vec![4.0, 1.0], vec![5.0, 0.0]]);
    let sent = bodies(&server).await;
    let inputs: Vec<&Value> = sent.iter().map(|b| &b["input"]).collect();
    assert_eq!(inputs, vec![&json!(["a", "bb"]), &json!(["ccc", "dddd"]), &json!(["eeeee"])]);
    assert!(sent.iter().all(|b| b["dimensions"] == json!(2) && b["encoding_format"] == json!("float")));
    assert!(sent.iter().all(|b| b["model"] == json!("text-embedding-3-small")));

    assert_eq!(embeddings.embed_query("xyz").await.unwrap(), vec![3.0, 0.0]);
    assert!(embeddings.embed_documents(Vec::new()).await.unwrap().is_empty());
    assert_eq!(server.received_requests().await.unwrap().len(), 4, "no request for no texts");
}

#[tokio::test]
async fn embedding_errors_and_short_answers_are_typed_errors() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"data": [{"index": 0, "embedding": [1.0]}]})),
        )
        .mount(&server)
        .await;
    let embeddings =
        OpenAIEmbeddings::builder().model("e").base_url(format!("{}/v1", server.uri())).build().unwrap();
    let err = embeddings.embed_documents(vec!["a".to_owned(), "b".to_owned()]).await.unwrap_err();
    assert!(matches!(openai_error(&err), OpenAIError::InvalidResponse(_)), "{err}");

    let failing = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(400)
                .set_body_json(json!({"error": {"message": "too long", "type": "invalid_request_error"}})),
        )
        .mount(&failing)
        .await;
    let embeddings =
        OpenAIEmbeddings::builder().model("e").base_url(format!("{}/v1", failing.uri())).build().unwrap();
    let err = embeddings.embed_query("x").await.unwrap_err();
    assert!(openai_error(&err).is_invalid_request());
}
