//! `OpenAIError`: what can go wrong talking to an OpenAI-compatible server, with predicates to act on.

use std::time::Duration;

use weft_runnable_core::{Error, ModelError, ModelErrorKind};

/// The error body an OpenAI-compatible server sent (`{"error": {"message", "type", "code", "param"}}`),
/// with the HTTP status and the server's `Retry-After`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ApiError {
    /// The HTTP status; `None` for an error object sent in the middle of a stream.
    pub status: Option<u16>,
    /// The server's message (the raw body when it sent no error object).
    pub message: String,
    /// The error's `type` (`invalid_request_error`, `rate_limit_error`, ...).
    pub error_type: Option<String>,
    /// The error's `code` (`model_not_found`, `insufficient_quota`, ...).
    pub code: Option<String>,
    /// The request parameter the error is about.
    pub param: Option<String>,
    /// How long the server asked us to wait (`retry-after-ms` or `Retry-After` headers).
    pub retry_after: Option<Duration>,
    /// The request that failed, `POST https://host/v1/chat/completions` (no query, no credentials);
    /// `None` for an error object sent in the middle of a stream.
    pub request: Option<String>,
}

/// A failure of [`ChatOpenAI`](super::ChatOpenAI) or [`OpenAIEmbeddings`](super::OpenAIEmbeddings).
///
/// Converted into weft's [`Error::Model`] (a [`ModelError`] with provider `openai`, the matching
/// [`ModelErrorKind`], status and `retry_after`), which keeps this error inside: get it back with
/// [`OpenAIError::from_weft`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenAIError {
    /// The server answered with an error status or an error object.
    #[error("{}", describe_api(.0))]
    Api(Box<ApiError>),
    /// The request did not finish within the configured timeout.
    #[error("request timed out: {0}")]
    Timeout(String),
    /// The connection could not be made or broke (a stream cut by the network included).
    #[error("connection failed: {0}")]
    Connection(String),
    /// The server's answer could not be understood (not JSON, no choices, a bad chunk).
    #[error("invalid response: {0}")]
    InvalidResponse(String),
    /// A streamed answer ended early: no chunk at all, or no finish reason before the end.
    #[error("incomplete stream: {0}")]
    IncompleteStream(String),
    /// The request could not be built (a message that cannot be sent, an option of the wrong shape).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The client is misconfigured (no model, no API key for OpenAI, a header value that is not valid).
    #[error("invalid configuration: {0}")]
    Config(String),
}

fn describe_api(error: &ApiError) -> String {
    let request = error.request.as_ref().map(|r| format!("{r}: ")).unwrap_or_default();
    match error.status {
        Some(status) => format!("{request}api error {status}: {}{}", api_message(error), hint(error)),
        None => format!("{request}api error: {}", api_message(error)),
    }
}

/// A hint for the commonest misconfiguration: a 404 from a base URL without the `/v1` that
/// OpenAI-compatible servers serve under.
fn hint(error: &ApiError) -> String {
    let Some(request) = &error.request else { return String::new() };
    let url = request.split_once(' ').map_or(request.as_str(), |(_, url)| url);
    if error.status == Some(404) && !url.contains("/v1/") {
        let base = ["/chat/completions", "/embeddings"]
            .iter()
            .find_map(|endpoint| url.strip_suffix(endpoint))
            .unwrap_or_else(|| url.rsplit_once('/').map_or(url, |(base, _)| base));
        format!("; hint: OpenAI-compatible servers serve under /v1: is the base URL {base}/v1?")
    } else {
        String::new()
    }
}

/// The server's message followed by the error's type, code and parameter when it gave them.
fn api_message(error: &ApiError) -> String {
    let details: Vec<String> = [("type", &error.error_type), ("code", &error.code), ("param", &error.param)]
        .into_iter()
        .filter_map(|(name, value)| value.as_ref().map(|v| format!("{name} {v}")))
        .collect();
    if details.is_empty() {
        error.message.clone()
    } else {
        format!("{} ({})", error.message, details.join(", "))
    }
}

impl OpenAIError {
    /// The API error inside, if the server sent one.
    pub fn api_error(&self) -> Option<&ApiError> {
        match self {
            Self::Api(error) => Some(error),
            _ => None,
        }
    }

    /// The HTTP status of the server's error answer.
    pub fn status(&self) -> Option<u16> {
        self.api_error().and_then(|e| e.status)
    }

    /// How long the server asked us to wait before trying again.
    pub fn retry_after(&self) -> Option<Duration> {
        self.api_error().and_then(|e| e.retry_after)
    }

    /// Whether the server refused the request for its rate limits (HTTP 429).
    pub fn is_rate_limited(&self) -> bool {
        self.status() == Some(429)
    }

    /// Whether the request timed out (on our side, or HTTP 408).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout(_)) || self.status() == Some(408)
    }

    /// Whether the connection failed or broke.
    pub fn is_connection(&self) -> bool {
        matches!(self, Self::Connection(_))
    }

    /// Whether the server failed (HTTP 5xx, or an error object in the middle of a stream).
    pub fn is_server_error(&self) -> bool {
        match self.api_error() {
            Some(error) => error.status.is_none_or(|s| s >= 500),
            None => false,
        }
    }

    /// Whether the credentials were refused (HTTP 401 or 403).
    pub fn is_authentication(&self) -> bool {
        matches!(self.status(), Some(401 | 403))
    }

    /// Whether the request itself was wrong: HTTP 400, 404, 422 and the other 4xx that are not about
    /// credentials, time or rate limits, or a request that could not be built here.
    pub fn is_invalid_request(&self) -> bool {
        match self {
            Self::InvalidRequest(_) | Self::Config(_) => true,
            _ => {
                matches!(self.status(), Some(s) if (400..500).contains(&s) && !matches!(s, 401 | 403 | 408 | 409 | 429))
            }
        }
    }

    /// Whether a streamed answer ended early.
    pub fn is_incomplete_stream(&self) -> bool {
        matches!(self, Self::IncompleteStream(_))
    }

    /// Whether trying again may succeed: rate limits (except an exhausted quota), server errors, 408 and
    /// 409, timeouts and connection failures.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Timeout(_) | Self::Connection(_) => true,
            Self::Api(error) => match error.status {
                Some(429) => {
                    error.code.as_deref() != Some("insufficient_quota")
                        && error.error_type.as_deref() != Some("insufficient_quota")
                }
                Some(status) => matches!(status, 408 | 409) || status >= 500,
                None => false,
            },
            _ => false,
        }
    }

    /// The kind weft's [`ModelError`] gets for this error.
    pub fn kind(&self) -> ModelErrorKind {
        match self {
            Self::Timeout(_) => ModelErrorKind::Timeout,
            Self::Connection(_) => ModelErrorKind::Connection,
            Self::InvalidResponse(_) | Self::IncompleteStream(_) => ModelErrorKind::InvalidResponse,
            Self::InvalidRequest(_) | Self::Config(_) => ModelErrorKind::InvalidRequest,
            Self::Api(error) => match error.status {
                Some(429) => ModelErrorKind::RateLimited,
                Some(401 | 403) => ModelErrorKind::Authentication,
                Some(408) => ModelErrorKind::Timeout,
                Some(status) if status >= 500 => ModelErrorKind::Server,
                Some(_) => ModelErrorKind::InvalidRequest,
                None => ModelErrorKind::Server,
            },
        }
    }

    /// The OpenAI error inside a weft error, if it came from this integration.
    pub fn from_weft(error: &Error) -> Option<&OpenAIError> {
        error.as_model().and_then(ModelError::provider_error::<OpenAIError>)
    }

    #[cfg(test)]
    pub(crate) fn api(status: Option<u16>, message: impl Into<String>) -> Self {
        Self::Api(Box::new(ApiError { status, message: message.into(), ..ApiError::default() }))
    }
}

impl From<OpenAIError> for ModelError {
    fn from(error: OpenAIError) -> Self {
        let message = match &error {
            OpenAIError::Api(api) => {
                let request = api.request.as_ref().map(|r| format!("{r}: ")).unwrap_or_default();
                format!("{request}{}{}", api_message(api), hint(api))
            }
            other => other.to_string(),
        };
        let mut model_error = ModelError::new("openai", error.kind(), message);
        model_error.status = error.status();
        model_error.retry_after = error.retry_after();
        model_error.with_source(error)
    }
}

impl From<OpenAIError> for Error {
    fn from(error: OpenAIError) -> Self {
        Error::from(ModelError::from(error))
    }
}

/// Maps an error of the transport library to ours.
pub(crate) fn from_transport(error: async_openai::error::OpenAIError) -> OpenAIError {
    use async_openai::error::OpenAIError as Transport;
    match error {
        Transport::Boxed(boxed) => match boxed.downcast::<OpenAIError>() {
            Ok(ours) => *ours,
            Err(other) => OpenAIError::Connection(other.to_string()),
        },
        Transport::Reqwest(error) => from_reqwest(&error),
        Transport::ApiError(response) => {
            let api = response.api_error;
            OpenAIError::Api(Box::new(ApiError {
                status: Some(response.status_code.as_u16()),
                message: api.message,
                error_type: api.r#type,
                code: api.code,
                param: api.param,
                retry_after: None,
                request: None,
            }))
        }
        Transport::JSONDeserialize(error, body) => {
            OpenAIError::InvalidResponse(format!("{error}; body: {}", excerpt(&body)))
        }
        Transport::StreamError(error) => OpenAIError::Connection(format!("the stream broke: {error}")),
        Transport::InvalidArgument(message) => OpenAIError::InvalidRequest(message),
        other => OpenAIError::InvalidRequest(other.to_string()),
    }
}

/// Maps an HTTP client error: timeouts, connection failures, anything else as a connection failure
/// (reqwest's own errors never carry request headers, so the API key cannot leak through them).
pub(crate) fn from_reqwest(error: &reqwest::Error) -> OpenAIError {
    let text = error_chain(error);
    if error.is_timeout() {
        OpenAIError::Timeout(text)
    } else if error.is_builder() {
        OpenAIError::Config(text)
    } else {
        OpenAIError::Connection(text)
    }
}

fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// At most 500 characters of a body, for error messages.
pub(crate) fn excerpt(body: &str) -> String {
    const LIMIT: usize = 500;
    match body.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}...", &body[..cut]),
        None => body.to_owned(),
    }
}
