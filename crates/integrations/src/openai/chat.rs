//! `ChatOpenAI`: a chat model served by OpenAI or any server that speaks its chat completions API.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt as _};
use serde_json::{Map, Value};
use weft_runnable_core::{AiMessage, CallOptions, ChatModel, Message, PromptValue, Result, RunnableConfig};

use super::OpenAIError;
use super::error::from_transport;
use super::request::{ChatSettings, chat_request};
use super::response::{StreamState, parse_completion};
use super::transport::{ApiKey, Clients, Connection, DEFAULT_BASE_URL, RetrySettings};

/// The default timeout of a request (and of each wait for the next piece of a stream).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// A chat model behind OpenAI's chat completions API: OpenAI itself, or a compatible server (vLLM,
/// llama.cpp's `llama-server`, Ollama, Azure, Together, ...) through [`base_url`](ChatOpenAIBuilder::base_url).
///
/// It implements [`ChatModel`], so it is a runnable (`prompt | model | parser`), streams token chunks,
/// takes tools with `bind_tools` and answers typed questions with `with_structured_output` (by a strict
/// JSON schema response format, function calling, or JSON mode). Clones share one connection pool.
///
/// ```no_run
/// use weft_integrations::openai::ChatOpenAI;
/// use weft_runnable_core::{PromptValue, Runnable, RunnableConfig};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let model = ChatOpenAI::builder()
///     .model("gpt-4o-mini")
///     .temperature(0.0)
///     .max_tokens(64)
///     .build()?; // the key from OPENAI_API_KEY, the endpoint from OPENAI_BASE_URL or OpenAI's
/// let reply = model.invoke(PromptValue::from("Say hi"), &RunnableConfig::default()).await?;
/// println!("{}", reply.text());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ChatOpenAI {
    inner: Arc<Inner>,
}

struct Inner {
    settings: ChatSettings,
    connection: Connection,
    clients: Clients,
}

impl fmt::Debug for ChatOpenAI {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Inner { settings, connection, .. } = &*self.inner;
        f.debug_struct("ChatOpenAI")
            .field("model", &settings.model)
            .field("base_url", &connection.base_url)
            .field("api_key", &connection.api_key)
            .field("temperature", &settings.temperature)
            .field("max_tokens", &settings.max_tokens)
            .field("timeout", &connection.timeout)
            .field("max_retries", &connection.retry.max_retries)
            .finish_non_exhaustive()
    }
}

impl ChatOpenAI {
    /// A builder; only the model is required.
    pub fn builder() -> ChatOpenAIBuilder {
        ChatOpenAIBuilder::default()
    }

    /// The model `model` with the key from `OPENAI_API_KEY` and the endpoint from `OPENAI_BASE_URL` (OpenAI's
    /// when unset).
    pub fn from_env(model: impl Into<String>) -> Result<Self, OpenAIError> {
        Self::builder().model(model).build()
    }

    /// The endpoint requests go to.
    pub fn base_url(&self) -> &str {
        &self.inner.connection.base_url
    }

    async fn complete(&self, messages: &[Message], options: &CallOptions) -> Result<AiMessage, OpenAIError> {
        let request = chat_request(&self.inner.settings, messages, options, false)?;
        let body: Value =
            self.inner.clients.whole.chat().create_byot(request).await.map_err(from_transport)?;
        parse_completion(&body)
    }

    fn stream_answer(
        &self,
        messages: &[Message],
        options: &CallOptions,
    ) -> BoxStream<'static, Result<AiMessage, OpenAIError>> {
        let request = match chat_request(&self.inner.settings, messages, options, true) {
            Ok(request) => request,
            Err(error) => return stream::once(async move { Err(error) }).boxed(),
        };
        let client = self.inner.clients.stream.clone();
        let opened = async move {
            client.chat().create_stream_byot::<Value, Value>(request).await.map_err(from_transport)
        };
        stream::once(opened)
            .flat_map(|opened| match opened {
                Ok(events) => chunks(events.map(|event| event.map_err(from_transport)).boxed()),
                Err(error) => stream::once(async move { Err(error) }).boxed(),
            })
            .boxed()
    }
}

/// The AI message chunks of a stream of chat completion chunks, ending with the closing chunk, or with an
/// error at the first bad chunk or when the stream was empty or cut.
fn chunks(
    events: BoxStream<'static, Result<Value, OpenAIError>>,
) -> BoxStream<'static, Result<AiMessage, OpenAIError>> {
    stream::unfold(Some((events, StreamState::default())), |state| async move {
        let (mut events, mut stream_state) = state?;
        match events.next().await {
            Some(Ok(body)) => match stream_state.chunk(&body) {
                Ok(chunk) => Some((Ok(chunk), Some((events, stream_state)))),
                Err(error) => Some((Err(error), None)),
            },
            Some(Err(error)) => Some((Err(error), None)),
            None => Some((stream_state.finish(), None)),
        }
    })
    .boxed()
}

#[async_trait]
impl ChatModel for ChatOpenAI {
    fn type_name(&self) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed("ChatOpenAI")
    }

    fn model_name(&self) -> &str {
        &self.inner.settings.model
    }

    fn provider(&self) -> &str {
        "openai"
    }

    async fn generate(
        &self,
        messages: Vec<Message>,
        options: &CallOptions,
        _config: &RunnableConfig,
    ) -> Result<AiMessage> {
        Ok(self.complete(&messages, options).await?)
    }

    fn stream_chunks<'a>(
        &'a self,
        messages: Vec<Message>,
        options: &CallOptions,
        _config: &RunnableConfig,
    ) -> BoxStream<'a, Result<AiMessage>> {
        self.stream_answer(&messages, options).map(|chunk| chunk.map_err(Into::into)).boxed()
    }
}

weft_runnable_core::impl_chat_model_runnable!(ChatOpenAI);

impl ChatOpenAI {
    /// Streams the reply to `input` as [`Runnable::stream`](weft_runnable_core::Runnable::stream) does, with a stream that owns a handle on the
    /// model (a cheap clone), so it may be called on a temporary and outlive it.
    pub fn stream(
        &self,
        input: impl Into<PromptValue>,
        config: &RunnableConfig,
    ) -> BoxStream<'static, Result<AiMessage>> {
        weft_runnable_core::chat_model::stream_chat_model_owned(self.clone(), input.into(), config)
    }
}

/// Builds a [`ChatOpenAI`]; every setting but the model has a default.
#[derive(Clone, Default)]
pub struct ChatOpenAIBuilder {
    settings: ChatSettings,
    model: Option<String>,
    api_key: Option<ApiKey>,
    base_url: Option<String>,
    organization: Option<String>,
    timeout: Option<Duration>,
    retry: RetrySettings,
    stream_usage: Option<bool>,
    strict_json_schema: Option<bool>,
}

impl fmt::Debug for ChatOpenAIBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatOpenAIBuilder")
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key)
            .finish_non_exhaustive()
    }
}

impl ChatOpenAIBuilder {
    /// The model's name at the server (`gpt-4o-mini`; a local server may ignore it).
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The sampling temperature.
    pub fn temperature(mut self, temperature: f64) -> Self {
        self.settings.temperature = Some(temperature);
        self
    }

    /// The most tokens to generate (sent as `max_tokens`, which every compatible server reads; OpenAI's
    /// reasoning models want `max_completion_tokens`: set it with [`extra`](Self::extra)).
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.settings.max_tokens = Some(max_tokens);
        self
    }

    /// Stop sequences (a call's own stop sequences replace them).
    pub fn stop<S: Into<String>>(mut self, stop: impl IntoIterator<Item = S>) -> Self {
        self.settings.stop = Some(stop.into_iter().map(Into::into).collect());
        self
    }

    /// The sampling seed.
    pub fn seed(mut self, seed: i64) -> Self {
        self.settings.seed = Some(seed);
        self
    }

    /// Nucleus sampling: the probability mass to sample from.
    pub fn top_p(mut self, top_p: f64) -> Self {
        self.settings.top_p = Some(top_p);
        self
    }

    /// The longest wait for a whole answer, and for each piece of a streamed one (default 10 minutes).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// How many times a request failing with 429, 408, 409, 5xx, a timeout or a broken connection is
    /// tried again (default 2). The wait doubles from [`retry_delay`](Self::retry_delay), unless the
    /// server says how long to wait (`Retry-After`, up to a minute).
    pub fn max_retries(mut self, max_retries: u32) -> Self {
        self.retry.max_retries = max_retries;
        self
    }

    /// The wait before the first retry (default 0.5 s) and the longest computed wait (default 8 s).
    pub fn retry_delay(mut self, initial: Duration, max: Duration) -> Self {
        self.retry.initial_delay = initial;
        self.retry.max_delay = max.max(initial);
        self
    }

    /// The endpoint, up to and including `/v1` (default: `OPENAI_BASE_URL`, else OpenAI's).
    pub fn base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = Some(base_url.into());
        self
    }

    /// The API key (default: `OPENAI_API_KEY`). It never appears in `Debug` output, errors or logs.
    pub fn api_key(mut self, api_key: impl Into<String>) -> Self {
        self.api_key = Some(ApiKey::new(api_key.into()));
        self
    }

    /// The OpenAI organization to bill (default: `OPENAI_ORG_ID`, else none).
    pub fn organization(mut self, organization: impl Into<String>) -> Self {
        self.organization = Some(organization.into());
        self
    }

    /// A field added to every request body as it is (a vendor's option, `max_completion_tokens`,
    /// `reasoning_effort`, ...); it wins over the builder's settings. A call's `CallOptions::extra`
    /// wins over it.
    pub fn extra(mut self, key: impl Into<String>, value: Value) -> Self {
        self.settings.extra.insert(key.into(), value);
        self
    }

    /// Several extra request fields at once (see [`extra`](Self::extra)).
    pub fn extras(mut self, fields: Map<String, Value>) -> Self {
        self.settings.extra.extend(fields);
        self
    }

    /// Whether streamed answers ask for a final usage chunk (`stream_options.include_usage`; default on).
    /// Turn it off for servers that refuse `stream_options`.
    pub fn stream_usage(mut self, on: bool) -> Self {
        self.stream_usage = Some(on);
        self
    }

    /// Whether a `json_schema` response format without its own `strict` flag is sent in strict mode
    /// (default on): `strict: true`, objects closed and all their properties required.
    pub fn strict_json_schema(mut self, on: bool) -> Self {
        self.strict_json_schema = Some(on);
        self
    }

    /// The model, with settings left unset taken from the environment (`OPENAI_API_KEY`,
    /// `OPENAI_BASE_URL`, `OPENAI_ORG_ID`).
    pub fn build(self) -> Result<ChatOpenAI, OpenAIError> {
        self.build_with_env(|name| std::env::var(name).ok())
    }

    pub(crate) fn build_with_env(
        self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<ChatOpenAI, OpenAIError> {
        let model = self.model.filter(|m| !m.trim().is_empty()).ok_or_else(|| {
            OpenAIError::Config("no model given: call ChatOpenAI::builder().model(\"...\")".to_owned())
        })?;
        let connection =
            connection_from(self.base_url, self.api_key, self.organization, self.timeout, self.retry, &env)?;
        let settings = ChatSettings {
            model,
            stream_usage: self.stream_usage.unwrap_or(true),
            strict_json_schema: self.strict_json_schema.unwrap_or(true),
            ..self.settings
        };
        let clients = connection.clients()?;
        Ok(ChatOpenAI { inner: Arc::new(Inner { settings, connection, clients }) })
    }
}

/// The connection settings, with unset ones taken from the environment. OpenAI's own endpoint without an
/// API key is refused at once; a compatible server may go without one.
pub(crate) fn connection_from(
    base_url: Option<String>,
    api_key: Option<ApiKey>,
    organization: Option<String>,
    timeout: Option<Duration>,
    retry: RetrySettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Connection, OpenAIError> {
    let nonempty = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let base_url = base_url
        .or_else(|| nonempty("OPENAI_BASE_URL"))
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned())
        .trim()
        .trim_end_matches('/')
        .to_owned();
    let api_key = api_key.or_else(|| nonempty("OPENAI_API_KEY").map(ApiKey::new)).unwrap_or_default();
    if api_key.is_empty() && base_url == DEFAULT_BASE_URL {
        return Err(OpenAIError::Config(
            "no api key for OpenAI: set OPENAI_API_KEY or call api_key(), or point base_url at a compatible server"
                .to_owned(),
        ));
    }
    let organization = organization.or_else(|| nonempty("OPENAI_ORG_ID")).filter(|o| !o.is_empty());
    Ok(Connection { base_url, api_key, organization, timeout: timeout.unwrap_or(DEFAULT_TIMEOUT), retry })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
    }

    #[test]
    fn settings_come_from_the_environment_when_not_given() {
        let model = ChatOpenAI::builder()
            .model("m")
            .build_with_env(env(&[
                ("OPENAI_API_KEY", "sk-env"),
                ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/"),
            ]))
            .unwrap();
        assert_eq!(model.base_url(), "http://127.0.0.1:9/v1");
        assert_eq!(model.inner.connection.api_key, ApiKey::new("sk-env".to_owned()));
        let explicit = ChatOpenAI::builder()
            .model("m")
            .base_url("http://localhost:1/v1")
            .api_key("k")
            .build_with_env(env(&[
                ("OPENAI_API_KEY", "sk-env"),
                ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
            ]))
            .unwrap();
        assert_eq!(explicit.base_url(), "http://localhost:1/v1");
        assert_eq!(explicit.inner.connection.api_key, ApiKey::new("k".to_owned()));
    }

    #[test]
    fn openai_without_a_key_or_a_model_is_refused_but_a_local_server_needs_no_key() {
        let err = ChatOpenAI::builder().model("m").build_with_env(env(&[])).unwrap_err();
        assert!(err.to_string().contains("OPENAI_API_KEY"), "{err}");
        let err = ChatOpenAI::builder().api_key("k").build_with_env(env(&[])).unwrap_err();
        assert!(err.to_string().contains("no model"), "{err}");
        ChatOpenAI::builder().model("m").base_url("http://127.0.0.1:1/v1").build_with_env(env(&[])).unwrap();
    }

    #[test]
    fn settings_that_would_break_headers_or_urls_are_errors_not_panics() {
        let local = || ChatOpenAI::builder().model("m").base_url("http://127.0.0.1:1/v1");
        for builder in [
            local().api_key("sk-bad\nkey"),
            local().organization("org\r\n"),
            local().timeout(Duration::ZERO),
            ChatOpenAI::builder().model("m").base_url("not a url"),
            ChatOpenAI::builder().model("m").base_url("ftp://host/v1"),
        ] {
            let err = builder.build_with_env(env(&[])).unwrap_err();
            assert!(matches!(err, OpenAIError::Config(_)), "{err}");
            assert!(!err.to_string().contains("sk-bad"), "{err}");
        }
    }

    #[test]
    fn debug_output_hides_the_api_key() {
        let builder =
            ChatOpenAI::builder().model("m").base_url("http://127.0.0.1:1/v1").api_key("sk-very-secret");
        assert!(!format!("{builder:?}").contains("sk-very-secret"));
        let model = builder.build_with_env(env(&[])).unwrap();
        let shown = format!("{model:?}");
        assert!(!shown.contains("sk-very-secret"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }
}
