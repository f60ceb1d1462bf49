//! `OpenAIEmbeddings`: text embeddings from OpenAI's embeddings API or a compatible server.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use weft_runnable_core::{Embeddings, Result};

use super::OpenAIError;
use super::chat::connection_from;
use super::error::from_transport;
use super::transport::{ApiKey, Clients, Connection, RetrySettings};

/// The most texts sent in one request by default (OpenAI accepts up to 2,048).
const DEFAULT_BATCH_SIZE: usize = 1000;

/// Embeddings from OpenAI's `/embeddings` endpoint or a compatible server; implements [`Embeddings`],
/// so it serves stores' vector search.
///
/// Documents are sent in batches of at most [`batch_size`](OpenAIEmbeddingsBuilder::batch_size) texts,
/// one request after another; the vectors come back in the order of the texts.
///
/// ```no_run
/// use weft_integrations::openai::OpenAIEmbeddings;
/// use weft_runnable_core::Embeddings;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let embeddings = OpenAIEmbeddings::builder().model("text-embedding-3-small").dimensions(256).build()?;
/// let vector = embeddings.embed_query("what is weft?").await?;
/// assert_eq!(vector.len(), 256);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct OpenAIEmbeddings {
    model: String,
    dimensions: Option<u32>,
    batch_size: usize,
    extra: Map<String, Value>,
    connection: Connection,
    clients: Clients,
}

impl fmt::Debug for OpenAIEmbeddings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAIEmbeddings")
            .field("model", &self.model)
            .field("dimensions", &self.dimensions)
            .field("batch_size", &self.batch_size)
            .field("base_url", &self.connection.base_url)
            .field("api_key", &self.connection.api_key)
            .finish_non_exhaustive()
    }
}

impl OpenAIEmbeddings {
    /// A builder; only the model is required.
    pub fn builder() -> OpenAIEmbeddingsBuilder {
        OpenAIEmbeddingsBuilder::default()
    }

    /// The model `model` with the key from `OPENAI_API_KEY` and the endpoint from `OPENAI_BASE_URL`.
    pub fn from_env(model: impl Into<String>) -> Result<Self, OpenAIError> {
        Self::builder().model(model).build()
    }

    /// Embeds `texts` in batches, returning one vector per text, in order.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, OpenAIError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.batch_size) {
            vectors.extend(self.embed_batch(batch).await?);
        }
        Ok(vectors)
    }

    async fn embed_batch(&self, batch: &[String]) -> Result<Vec<Vec<f32>>, OpenAIError> {
        let mut request = Map::new();
        request.insert("model".to_owned(), json!(self.model));
        request.insert("input".to_owned(), json!(batch));
        request.insert("encoding_format".to_owned(), json!("float"));
        if let Some(dimensions) = self.dimensions {
            request.insert("dimensions".to_owned(), json!(dimensions));
        }
        for (key, value) in &self.extra {
            request.insert(key.clone(), value.clone());
        }
        let body: Value = self
            .clients
            .whole
            .embeddings()
            .create_byot(Value::Object(request))
            .await
            .map_err(from_transport)?;
        vectors_of(&body, batch.len())
    }
}

/// The vectors of an embeddings answer, placed by their `index`; exactly one per text, or an error.
fn vectors_of(body: &Value, expected: usize) -> Result<Vec<Vec<f32>>, OpenAIError> {
    let invalid = |why: String| OpenAIError::InvalidResponse(why);
    let data = body.get("data").and_then(Value::as_array).ok_or_else(|| {
        invalid(format!("the embeddings answer has no data: {}", super::error::excerpt(&body.to_string())))
    })?;
    if data.len() != expected {
        return Err(invalid(format!("sent {expected} texts, got {} embeddings", data.len())));
    }
    let mut vectors: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (position, item) in data.iter().enumerate() {
        let index = match item.get("index") {
            Some(index) => index
                .as_u64()
                .and_then(|i| usize::try_from(i).ok())
                .ok_or_else(|| invalid(format!("embedding index {index} is not a position")))?,
            None => position,
        };
        let slot = vectors.get_mut(index).ok_or_else(|| {
            invalid(format!("embedding index {index} is out of range for {expected} texts"))
        })?;
        if slot.is_some() {
            return Err(invalid(format!("embedding index {index} appears twice")));
        }
        let numbers = item
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid(format!("embedding {index} is not a list of numbers")))?;
        let vector = numbers
            .iter()
            .map(|n| n.as_f64().map(|x| x as f32))
            .collect::<Option<Vec<f32>>>()
            .ok_or_else(|| invalid(format!("embedding {index} holds something that is not a number")))?;
        *slot = Some(vector);
    }
    vectors.into_iter().map(|v| v.ok_or_else(|| invalid("an embedding is missing".to_owned()))).collect()
}

#[async_trait]
impl Embeddings for OpenAIEmbeddings {
    async fn embed_documents(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>> {
        Ok(self.embed(&texts).await?)
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        let mut vectors = self.embed(&[text.to_owned()]).await?;
        Ok(vectors.pop().unwrap_or_default())
    }
}

/// Builds [`OpenAIEmbeddings`]; every setting but the model has a default.
#[derive(Clone, Default)]
pub struct OpenAIEmbeddingsBuilder {
    model: Option<String>,
    dimensions: Option<u32>,
    batch_size: Option<usize>,
    extra: Map<String, Value>,
    api_key: Option<ApiKey>,
    base_url: Option<String>,
    organization: Option<String>,
    timeout: Option<Duration>,
    retry: RetrySettings,
}

impl fmt::Debug for OpenAIEmbeddingsBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAIEmbeddingsBuilder")
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key)
            .finish_non_exhaustive()
    }
}

impl OpenAIEmbeddingsBuilder {
    /// The embedding model (`text-embedding-3-small`, ...).
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The length of the vectors, for models that can shorten them (`text-embedding-3-*`).
    pub fn dimensions(mut self, dimensions: u32) -> Self {
        self.dimensions = Some(dimensions);
        self
    }

    /// The most texts per request (default 1,000; must be at least 1).
    pub fn batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = Some(batch_size);
        self
    }

    /// A field added to every request body as it is.
    pub fn extra(mut self, key: impl Into<String>, value: Value) -> Self {
        self.extra.insert(key.into(), value);
        self
    }

    /// The endpoint, up to and including `/v1` (default: `OPENAI_BASE_URL`, else OpenAI's).
    pub fn base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = Some(base_url.into());
        self
    }

    /// The API key (default: `OPENAI_API_KEY`); never shown.
    pub fn api_key(mut self, api_key: impl Into<String>) -> Self {
        self.api_key = Some(ApiKey::new(api_key.into()));
        self
    }

    /// The OpenAI organization (default: `OPENAI_ORG_ID`).
    pub fn organization(mut self, organization: impl Into<String>) -> Self {
        self.organization = Some(organization.into());
        self
    }

    /// The longest wait for an answer (default 10 minutes).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Retries on 429, 5xx, timeouts and broken connections (default 2), as for chat models.
    pub fn max_retries(mut self, max_retries: u32) -> Self {
        self.retry.max_retries = max_retries;
        self
    }

    /// The wait before the first retry and the longest computed wait.
    pub fn retry_delay(mut self, initial: Duration, max: Duration) -> Self {
        self.retry.initial_delay = initial;
        self.retry.max_delay = max.max(initial);
        self
    }

    /// The embeddings, with unset settings taken from the environment.
    pub fn build(self) -> Result<OpenAIEmbeddings, OpenAIError> {
        let model = self.model.filter(|m| !m.trim().is_empty()).ok_or_else(|| {
            OpenAIError::Config("no model given: call OpenAIEmbeddings::builder().model(\"...\")".to_owned())
        })?;
        let batch_size = self.batch_size.unwrap_or(DEFAULT_BATCH_SIZE);
        if batch_size == 0 {
            return Err(OpenAIError::Config("the batch size must be at least 1".to_owned()));
        }
        let env = |name: &str| std::env::var(name).ok();
        let connection =
            connection_from(self.base_url, self.api_key, self.organization, self.timeout, self.retry, &env)?;
        let clients = connection.clients()?;
        Ok(OpenAIEmbeddings {
            model,
            dimensions: self.dimensions,
            batch_size,
            extra: self.extra,
            connection,
            clients,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_placed_by_index_and_checked() {
        let body = json!({"data": [
            {"object": "embedding", "index": 1, "embedding": [0.5, 1.0]},
            {"object": "embedding", "index": 0, "embedding": [1.0, 0.0]}
        ]});
        assert_eq!(vectors_of(&body, 2).unwrap(), vec![vec![1.0, 0.0], vec![0.5, 1.0]]);
        assert!(vectors_of(&body, 3).is_err());
        let twice = json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}]});
        assert!(vectors_of(&twice, 2).unwrap_err().to_string().contains("twice"));
        let far = json!({"data": [{"index": 7, "embedding": [1.0]}]});
        assert!(vectors_of(&far, 1).unwrap_err().to_string().contains("out of range"));
        let text = json!({"data": [{"index": 0, "embedding": "AAAA"}]});
        assert!(vectors_of(&text, 1).is_err());
        assert!(vectors_of(&json!({"object": "list"}), 1).is_err());
    }

    #[test]
    fn a_zero_batch_size_is_refused() {
        let err = OpenAIEmbeddings::builder()
            .model("e")
            .base_url("http://127.0.0.1:1/v1")
            .batch_size(0)
            .build()
            .unwrap_err();
        assert!(matches!(err, OpenAIError::Config(_)));
    }
}
