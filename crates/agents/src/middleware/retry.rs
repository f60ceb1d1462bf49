//! [`ModelRetry`] and [`ToolRetry`]: LangChain's `ModelRetryMiddleware` and `ToolRetryMiddleware`, with
//! what they share: which errors are retried, the waits, and what a final failure becomes.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use weft_runnable_core::retry::{Backoff, Jitter};
use weft_runnable_core::{AiMessage, Error, ModelErrorKind, Result, ToolCallOutput};

use crate::agent::{
    Hooks, Middleware, ModelHandler, ModelRequest, ModelResponse, ToolCallRequest, ToolHandler,
};

/// An error as LangChain names it in messages: its Python exception type and its text.
///
/// A provider's failure takes the name of the OpenAI SDK's exception for its kind (`RateLimitError`,
/// `InternalServerError`, `APITimeoutError`, ...), a tool's failure `ToolException`, bad tool
/// arguments `ToolInvocationError`; anything else is an `Exception`.
pub fn error_parts(err: &Error) -> (&'static str, String) {
    match err {
        Error::Model(e) => {
            let name = match e.kind {
                ModelErrorKind::RateLimited => "RateLimitError",
                ModelErrorKind::Server => "InternalServerError",
                ModelErrorKind::InvalidRequest => "BadRequestError",
                ModelErrorKind::Authentication => "AuthenticationError",
                ModelErrorKind::Timeout => "APITimeoutError",
                ModelErrorKind::Connection => "APIConnectionError",
                ModelErrorKind::InvalidResponse => "APIResponseValidationError",
                _ => "ModelError",
            };
            (name, e.message.clone())
        }
        Error::Tool { message, .. } => ("ToolException", message.clone()),
        Error::ToolArguments { .. } => ("ToolInvocationError", err.to_string()),
        Error::Timeout { .. } => ("TimeoutError", err.to_string()),
        other => ("Exception", other.to_string()),
    }
}

type RetryOnFn = dyn Fn(&Error) -> bool + Send + Sync;
type OnFailureFn = dyn Fn(&Error) -> String + Send + Sync;

/// Which errors are retried, how long to wait, and what the last failure becomes (LangChain's
/// `max_retries`, `retry_on`, `on_failure`, `backoff_factor`, `initial_delay`, `max_delay`, `jitter`).
#[derive(Clone)]
pub struct RetrySettings {
    max_retries: u32,
    retry_on: Option<Arc<RetryOnFn>>,
    on_failure: OnFailure,
    backoff: Backoff,
}

/// What the last failure becomes.
#[derive(Clone)]
pub enum OnFailure {
    /// A message saying what failed, so the agent goes on (the default).
    Continue,
    /// The error itself: the run fails.
    Error,
    /// A message with this text made from the error.
    Message(Arc<OnFailureFn>),
}

impl fmt::Debug for OnFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Continue => "Continue",
            Self::Error => "Error",
            Self::Message(_) => "Message(..)",
        })
    }
}

impl fmt::Debug for RetrySettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetrySettings")
            .field("max_retries", &self.max_retries)
            .field("backoff", &self.backoff)
            .finish_non_exhaustive()
    }
}

impl Default for RetrySettings {
    fn default() -> Self {
        Self {
            max_retries: 2,
            retry_on: None,
            on_failure: OnFailure::Continue,
            backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(60))
                .with_jitter(Jitter::Scale { low: 0.75, high: 1.25 }),
        }
    }
}

impl RetrySettings {
    /// Two retries, from 1 s doubling to at most 60 s with ±25 % jitter, every error retried but a
    /// provider's that cannot succeed again, a message on the last failure.
    pub fn new() -> Self {
        Self::default()
    }

    /// Retries at most `n` times after the first attempt.
    #[must_use]
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// Retries only the errors `f` accepts.
    #[must_use]
    pub fn retry_on(mut self, f: impl Fn(&Error) -> bool + Send + Sync + 'static) -> Self {
        self.retry_on = Some(Arc::new(f));
        self
    }

    /// What the last failure becomes.
    #[must_use]
    pub fn on_failure(mut self, on_failure: OnFailure) -> Self {
        self.on_failure = on_failure;
        self
    }

    /// The waits: from `initial` growing by `factor` up to `max`, with LangChain's ±25 % jitter or none.
    #[must_use]
    pub fn backoff(mut self, initial: Duration, factor: f64, max: Duration, jitter: bool) -> Self {
        let jitter = if jitter { Jitter::Scale { low: 0.75, high: 1.25 } } else { Jitter::None };
        self.backoff = Backoff::new(initial, max).with_factor(factor).with_jitter(jitter);
        self
    }

    fn retries(&self, err: &Error) -> bool {
        if err.is_control_flow() {
            return false;
        }
        match &self.retry_on {
            Some(f) => f(err),
            // LangChain's default: a provider error only when it may pass, anything else.
            None => match err {
                Error::Model(e) => e.is_transient(),
                _ => true,
            },
        }
    }
}

fn attempts(n: u32) -> String {
    format!("{n} {}", if n == 1 { "attempt" } else { "attempts" })
}

/// Retries failed model calls with backoff (LangChain's `ModelRetryMiddleware`); when the retries run
/// out the agent gets an AI message saying what failed, or the run fails ([`OnFailure::Error`]).
#[derive(Debug, Clone, Default)]
pub struct ModelRetry {
    settings: RetrySettings,
}

impl ModelRetry {
    /// With these settings.
    pub fn new(settings: RetrySettings) -> Self {
        Self { settings }
    }
}

#[async_trait]
impl<C: Send + Sync + 'static> Middleware<C> for ModelRetry {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed("ModelRetryMiddleware")
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().wrap_model_call()
    }

    async fn wrap_model_call(
        &self,
        request: ModelRequest<C>,
        next: ModelHandler<'_, C>,
    ) -> Result<ModelResponse> {
        let outcome = retry_loop(&self.settings, || next.call(request.clone())).await;
        match outcome {
            Ok(response) => Ok(response),
            Err((err, u32::MAX)) => Err(err),
            Err((err, made)) => match &self.settings.on_failure {
                OnFailure::Error => Err(err),
                OnFailure::Message(f) => Ok(ModelResponse::message(AiMessage::new(f(&err)))),
                OnFailure::Continue => {
                    let (name, text) = error_parts(&err);
                    let content = format!("Model call failed after {} with {name}: {text}", attempts(made));
                    Ok(ModelResponse::message(AiMessage::new(content)))
                }
            },
        }
    }
}

/// Runs `attempt` until it succeeds, an error is not retried, or the retries run out; on failure, the
/// last error and the number of attempts made (`u32::MAX` for an error that is not retried).
async fn retry_loop<'a, T, F>(
    settings: &RetrySettings,
    mut attempt: F,
) -> std::result::Result<T, (Error, u32)>
where
    F: FnMut() -> futures::future::BoxFuture<'a, Result<T>>,
{
    let mut made = 0;
    loop {
        made += 1;
        match attempt().await {
            Ok(value) => return Ok(value),
            Err(err) if !settings.retries(&err) => return Err((err, u32::MAX)),
            Err(err) if made > settings.max_retries => return Err((err, made)),
            Err(_) => {
                let wait = settings.backoff.delay(made);
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }
}

/// Retries failed tool calls with backoff (LangChain's `ToolRetryMiddleware`), for every tool or the
/// ones named; when the retries run out the model gets an error tool message saying what failed, or the
/// run fails ([`OnFailure::Error`]).
#[derive(Debug, Clone, Default)]
pub struct ToolRetry {
    settings: RetrySettings,
    tools: Option<Vec<String>>,
}

impl ToolRetry {
    /// With these settings, for every tool.
    pub fn new(settings: RetrySettings) -> Self {
        Self { settings, tools: None }
    }

    /// Only for these tools.
    #[must_use]
    pub fn tools(mut self, tools: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.tools = Some(tools.into_iter().map(Into::into).collect());
        self
    }
}

#[async_trait]
impl<C: Send + Sync + 'static> Middleware<C> for ToolRetry {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed("ToolRetryMiddleware")
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().wrap_tool_call()
    }

    async fn wrap_tool_call(
        &self,
        request: ToolCallRequest<C>,
        next: ToolHandler<'_, C>,
    ) -> Result<ToolCallOutput> {
        if !request.is_for(self.tools.as_deref()) {
            return next.call(request).await;
        }
        let outcome = retry_loop(&self.settings, || next.call(request.clone())).await;
        let content = match outcome {
            Ok(output) => return Ok(output),
            Err((err, u32::MAX)) => return Err(err),
            Err((err, made)) => match &self.settings.on_failure {
                OnFailure::Error => return Err(err),
                OnFailure::Message(f) => f(&err),
                OnFailure::Continue => {
                    let (name, text) = error_parts(&err);
                    format!(
                        "Tool '{}' failed after {} with {name}: {text}. Please try again.",
                        request.tool_name(),
                        attempts(made)
                    )
                }
            },
        };
        Ok(request.error_reply(content))
    }
}
