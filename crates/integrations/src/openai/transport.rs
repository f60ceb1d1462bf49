//! The HTTP side: the API key, the connection settings, and the tower service under async-openai that
//! sends each request, retries it on 429, 5xx, timeouts and broken connections (honouring the server's
//! `Retry-After`), and turns error answers into [`OpenAIError`]s.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::middleware::HttpRequestFactory;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::Value;
use weft_runnable_core::retry::{Backoff, Jitter};

use super::error::{ApiError, OpenAIError, excerpt, from_reqwest};

/// OpenAI's own endpoint, used when neither the builder nor `OPENAI_BASE_URL` gives one.
pub(crate) const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The longest `Retry-After` we wait for; a server asking for more gets our own backoff instead.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// An API key: sent as a bearer token, never shown by `Debug` or `Display` or written to logs.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct ApiKey(String);

impl ApiKey {
    pub(crate) fn new(key: String) -> Self {
        Self(key)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() { "ApiKey(none)" } else { "ApiKey(<redacted>)" })
    }
}

/// When to try a failed request again, and how long to wait first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RetrySettings {
    /// Retries after the first attempt.
    pub(crate) max_retries: u32,
    /// The wait before the first retry; it doubles with each retry.
    pub(crate) initial_delay: Duration,
    /// The longest computed wait (a server's `Retry-After` may ask for more, up to a minute).
    pub(crate) max_delay: Duration,
}

impl Default for RetrySettings {
    fn default() -> Self {
        Self { max_retries: 2, initial_delay: Duration::from_millis(500), max_delay: Duration::from_secs(8) }
    }
}

impl RetrySettings {
    /// The wait before retry number `retry` (1 for the first), after `error`.
    /// weft's [`Backoff`]: doubling from `initial_delay`, up to a quarter less at random (so that
    /// clients failing together do not retry together), at most `max_delay`; a `Retry-After` of up to
    /// a minute is honoured.
    fn delay(&self, retry: u32, error: &OpenAIError) -> Duration {
        Backoff::new(self.initial_delay, self.max_delay)
            .with_jitter(Jitter::Scale { low: 0.75, high: 1.0 })
            .with_max_retry_after(MAX_RETRY_AFTER)
            .delay_after(retry, error.retry_after())
    }
}

/// Where and how to connect: everything the async-openai clients are built from.
#[derive(Debug, Clone)]
pub(crate) struct Connection {
    pub(crate) base_url: String,
    pub(crate) api_key: ApiKey,
    pub(crate) organization: Option<String>,
    pub(crate) timeout: Duration,
    pub(crate) retry: RetrySettings,
}

impl Connection {
    /// Checks the settings that end up in headers (async-openai would panic on a value that is not a
    /// valid header) and the base URL.
    pub(crate) fn validate(&self) -> Result<(), OpenAIError> {
        let url = reqwest::Url::parse(&self.base_url).map_err(|e| {
            OpenAIError::Config(format!("base url '{}' is not a valid url: {e}", self.base_url))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(OpenAIError::Config(format!("base url '{}' must be http or https", self.base_url)));
        }
        if HeaderValue::from_str(&format!("Bearer {}", self.api_key.0)).is_err() {
            return Err(OpenAIError::Config(
                "the api key holds characters that cannot be sent in a header".to_owned(),
            ));
        }
        if let Some(org) = &self.organization {
            if HeaderValue::from_str(org).is_err() {
                return Err(OpenAIError::Config(
                    "the organization holds characters that cannot be sent in a header".to_owned(),
                ));
            }
        }
        if self.timeout.is_zero() {
            return Err(OpenAIError::Config("the timeout must be longer than zero".to_owned()));
        }
        Ok(())
    }

    /// Two clients sharing one connection pool: one for whole answers (the timeout bounds each
    /// request), one for streams (the timeout bounds the wait for each piece of the stream).
    pub(crate) fn clients(&self) -> Result<Clients, OpenAIError> {
        self.validate()?;
        crate::install_crypto_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(self.timeout)
            .read_timeout(self.timeout)
            // Servers and proxies commonly close a keep-alive connection after 5 idle seconds (llama.cpp's
            // server does; OpenAI's Python SDK expires its own at 5 s): a request sent on one the server
            // is closing fails with "connection closed before message completed". Drop them sooner.
            .pool_idle_timeout(Duration::from_secs(4))
            .build()
            .map_err(|e| from_reqwest(&e))?;
        let config = OpenAIConfig::new()
            .with_api_base(self.base_url.clone())
            .with_api_key(self.api_key.0.clone())
            .with_org_id(self.organization.clone().unwrap_or_default())
            .with_project_id("");
        let service = |total_timeout| RetryService { http: http.clone(), retry: self.retry, total_timeout };
        Ok(Clients {
            whole: Client::build(http.clone(), config.clone()).with_http_service(service(Some(self.timeout))),
            stream: Client::build(http.clone(), config).with_http_service(service(None)),
        })
    }
}

/// The async-openai clients of one model.
#[derive(Clone)]
pub(crate) struct Clients {
    pub(crate) whole: Client<OpenAIConfig>,
    pub(crate) stream: Client<OpenAIConfig>,
}

/// Sends requests with retries; every failure comes out as an [`OpenAIError`] boxed into async-openai's
/// error, so nothing of the answer (status, body, `Retry-After`) is lost on the way.
#[derive(Clone)]
struct RetryService {
    http: reqwest::Client,
    retry: RetrySettings,
    /// The limit on a whole request (answers); `None` for streams, bounded by the read timeout only.
    total_timeout: Option<Duration>,
}

type ServiceFuture =
    Pin<Box<dyn Future<Output = Result<reqwest::Response, async_openai::error::OpenAIError>> + Send>>;

impl tower::Service<HttpRequestFactory> for RetryService {
    type Response = reqwest::Response;
    type Error = async_openai::error::OpenAIError;
    type Future = ServiceFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            this.send(factory).await.map_err(|error| async_openai::error::OpenAIError::Boxed(Box::new(error)))
        })
    }
}

impl RetryService {
    async fn send(&self, factory: HttpRequestFactory) -> Result<reqwest::Response, OpenAIError> {
        let mut retry = 0;
        loop {
            let mut request =
                factory.build().await.map_err(|e| OpenAIError::InvalidRequest(e.to_string()))?;
            if let Some(limit) = self.total_timeout {
                *request.timeout_mut() = Some(limit);
            }
            let path = request.url().path().to_owned();
            let described = describe_request(request.method(), request.url());
            let error = match self.http.execute(request).await {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) => error_from_response(response, described).await,
                Err(error) => from_reqwest(&error),
            };
            if retry >= self.retry.max_retries || !error.is_retryable() {
                tracing::debug!(path, retries = retry, error = %error, "openai request failed");
                return Err(error);
            }
            retry += 1;
            let delay = self.retry.delay(retry, &error);
            tracing::debug!(path, retry, ?delay, error = %error, "openai request failed; retrying");
            tokio::time::sleep(delay).await;
        }
    }
}

/// Reads an error answer: the status, the `Retry-After`, and the error object of the body (or the body
/// itself when it has none).
/// `METHOD scheme://host/path` of a request: no query, no user or password.
fn describe_request(method: &reqwest::Method, url: &reqwest::Url) -> String {
    let mut shown = url.clone();
    shown.set_query(None);
    shown.set_fragment(None);
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    format!("{method} {shown}")
}

async fn error_from_response(response: reqwest::Response, request: String) -> OpenAIError {
    let status = response.status().as_u16();
    let retry_after = retry_after(response.headers());
    let body = match response.text().await {
        Ok(body) => body,
        Err(error) => return from_reqwest(&error),
    };
    let mut error = parse_error_body(Some(status), &body);
    error.retry_after = retry_after;
    error.request = Some(request);
    OpenAIError::Api(Box::new(error))
}

/// The error object of an error body: `{"error": {...}}`, `{"error": "text"}`, `{"message": ...}`
/// (servers differ), or the body's text.
pub(crate) fn parse_error_body(status: Option<u16>, body: &str) -> ApiError {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let object = parsed.as_ref().map(|v| v.get("error").unwrap_or(v));
    let text = |value: Option<&Value>| match value {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    match object {
        Some(Value::String(message)) => ApiError { status, message: message.clone(), ..ApiError::default() },
        Some(object @ Value::Object(_)) if object.get("message").is_some() => ApiError {
            status,
            message: text(object.get("message")).unwrap_or_default(),
            error_type: text(object.get("type")),
            code: text(object.get("code")),
            param: text(object.get("param")),
            retry_after: None,
            request: None,
        },
        _ => ApiError {
            status,
            message: if body.trim().is_empty() { "(empty body)".to_owned() } else { excerpt(body.trim()) },
            ..ApiError::default()
        },
    }
}

/// The server's requested wait: OpenAI's `retry-after-ms`, else `Retry-After` in seconds (HTTP dates
/// are not supported and ignored).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| -> Option<f64> {
        let value = headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok()?;
        (value.is_finite() && value >= 0.0).then_some(value)
    };
    if let Some(ms) = number("retry-after-ms") {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    number("retry-after").map(Duration::from_secs_f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_prefers_milliseconds_and_ignores_dates() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(150)));
        let mut dated = HeaderMap::new();
        dated.insert("retry-after", HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"));
        assert_eq!(retry_after(&dated), None);
        let mut negative = HeaderMap::new();
        negative.insert("retry-after", HeaderValue::from_static("-3"));
        assert_eq!(retry_after(&negative), None);
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_and_honours_short_retry_after() {
        let settings = RetrySettings {
            max_retries: 5,
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(300),
        };
        let server = OpenAIError::api(Some(500), "boom");
        for (retry, full) in [(1, 100), (2, 200), (3, 300), (4, 300)] {
            let delay = settings.delay(retry, &server);
            assert!(delay <= Duration::from_millis(full), "{retry}: {delay:?}");
            assert!(delay >= Duration::from_millis(full * 3 / 4), "{retry}: {delay:?}");
        }
        let mut limited =
            ApiError { status: Some(429), retry_after: Some(Duration::from_secs(5)), ..ApiError::default() };
        assert_eq!(settings.delay(1, &OpenAIError::Api(Box::new(limited.clone()))), Duration::from_secs(5));
        limited.retry_after = Some(Duration::from_secs(3600));
        assert!(settings.delay(1, &OpenAIError::Api(Box::new(limited))) <= Duration::from_millis(100));
    }

    #[test]
    fn error_bodies_of_every_shape_are_read() {
        let openai = parse_error_body(
            Some(400),
            r#"{"error": {"message": "bad model", "type": "invalid_request_error", "param": "model", "code": "model_not_found"}}"#,
        );
        assert_eq!(openai.message, "bad model");
        assert_eq!(openai.error_type.as_deref(), Some("invalid_request_error"));
        assert_eq!(openai.param.as_deref(), Some("model"));
        assert_eq!(openai.code.as_deref(), Some("model_not_found"));
        assert_eq!(parse_error_body(Some(500), r#"{"error": "overloaded"}"#).message, "overloaded");
        let numeric =
            parse_error_body(Some(400), r#"{"error": {"code": 400, "message": "too long", "type": "x"}}"#);
        assert_eq!(numeric.code.as_deref(), Some("400"));
        assert_eq!(
            parse_error_body(Some(502), "<html>bad gateway</html>").message,
            "<html>bad gateway</html>"
        );
        assert_eq!(parse_error_body(Some(503), "").message, "(empty body)");
    }

    #[test]
    fn the_api_key_is_never_shown() {
        let key = ApiKey::new("sk-secret-123".to_owned());
        assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
        let connection = Connection {
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: key,
            organization: None,
            timeout: Duration::from_secs(1),
            retry: RetrySettings::default(),
        };
        assert!(!format!("{connection:?}").contains("sk-secret"));
    }
}
