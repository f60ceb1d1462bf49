//! `WithFallbacks`: when a runnable fails, try the next one.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt as _};
use serde_json::Value;

use crate::config::RunnableConfig;
use crate::error::{Error, Result};
use crate::events::{RunKind, event_input, trace_invoke, trace_stream};
use crate::json::{as_object_mut, describe_typed};
use crate::runnable::{RunValue, Runnable, error_stream};

type Predicate = Arc<dyn Fn(&Error) -> bool + Send + Sync>;

/// A runnable with fallbacks (see [`RunnableExt::with_fallbacks`](crate::RunnableExt::with_fallbacks)).
///
/// The primary runs first; when it fails with an error the fallbacks handle (every error by default, see
/// [`handle_if`](Self::handle_if)), the fallbacks are tried in order until one succeeds. When all fail,
/// the **first** error (the primary's) is returned. An error that is not handled is returned at once,
/// without trying the remaining fallbacks; control flow ([`Error::ControlFlow`]) never is handled.
///
/// With an [exception key](Self::with_exception_key), each fallback's input (which must then be a JSON
/// object) gets the previous runnable's error message under that key.
///
/// Runs as one run named `RunnableWithFallbacks`, whose children are the runnables tried. When streamed,
/// a runnable that fails before its first chunk hands over to the next; an error after the first chunk
/// ends the stream.
#[derive(Clone)]
pub struct WithFallbacks<R, F> {
    primary: R,
    fallbacks: Vec<F>,
    handle_if: Option<Predicate>,
    exception_key: Option<String>,
}

impl<R: fmt::Debug, F: fmt::Debug> fmt::Debug for WithFallbacks<R, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WithFallbacks")
            .field("primary", &self.primary)
            .field("fallbacks", &self.fallbacks)
            .field("handle_if", &self.handle_if.is_some())
            .field("exception_key", &self.exception_key)
            .finish()
    }
}

impl<R, F> WithFallbacks<R, F> {
    /// `primary`, then each of `fallbacks` in order.
    pub fn new(primary: R, fallbacks: impl IntoIterator<Item = F>) -> Self {
        Self { primary, fallbacks: fallbacks.into_iter().collect(), handle_if: None, exception_key: None }
    }

    /// Falls back only on the errors for which `predicate` returns `true`; other errors are returned at
    /// once (control flow always is).
    pub fn handle_if(mut self, predicate: impl Fn(&Error) -> bool + Send + Sync + 'static) -> Self {
        self.handle_if = Some(Arc::new(predicate));
        self
    }

    /// Passes the previous error's message to each fallback under `key` of its input, which must be a
    /// JSON object (LangChain's `exception_key`).
    pub fn with_exception_key(mut self, key: impl Into<String>) -> Self {
        self.exception_key = Some(key.into());
        self
    }

    /// The primary runnable.
    pub fn primary(&self) -> &R {
        &self.primary
    }

    /// The fallbacks, in order.
    pub fn fallbacks(&self) -> &[F] {
        &self.fallbacks
    }

    fn handles(&self, error: &Error) -> bool {
        !error.is_control_flow() && self.handle_if.as_ref().is_none_or(|p| p(error))
    }

    /// Checks that the input can carry the exception key.
    fn check_input<I: 'static>(&self, input: &mut I) -> Result<()> {
        let Some(key) = &self.exception_key else { return Ok(()) };
        if as_object_mut(input).is_some() {
            return Ok(());
        }
        Err(Error::InvalidInput(format!(
            "RunnableWithFallbacks with exception key '{key}' expects a JSON object as input, got {}",
            describe_typed(input)
        )))
    }

    /// The input of the next runnable: `input`, with `previous`'s message under the exception key.
    fn next_input<I: Clone + 'static>(&self, input: &I, previous: &Error) -> I {
        let mut next = input.clone();
        if let Some(key) = &self.exception_key {
            if let Some(object) = as_object_mut(&mut next) {
                object.insert(key.clone(), Value::String(previous.to_string()));
            }
        }
        next
    }
}

const NAME: &str = "RunnableWithFallbacks";

#[async_trait]
impl<I, O, R, F> Runnable<I, O> for WithFallbacks<R, F>
where
    I: RunValue,
    O: RunValue,
    R: Runnable<I, O>,
    F: Runnable<I, O>,
{
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed(NAME)
    }

    async fn invoke(&self, input: I, config: &RunnableConfig) -> Result<O> {
        trace_invoke(NAME, RunKind::Chain, input, config, |mut input, child| async move {
            self.check_input(&mut input)?;
            let first_error = match self.primary.invoke(input.clone(), &child).await {
                Ok(output) => return Ok(output),
                Err(error) if !self.handles(&error) => return Err(error),
                Err(error) => error,
            };
            // The latest error when it is not the first one.
            let mut latest: Option<Error> = None;
            for fallback in &self.fallbacks {
                let fallback_input = self.next_input(&input, latest.as_ref().unwrap_or(&first_error));
                match fallback.invoke(fallback_input, &child).await {
                    Ok(output) => return Ok(output),
                    Err(error) if !self.handles(&error) => return Err(error),
                    Err(error) => latest = Some(error),
                }
            }
            Err(first_error)
        })
        .await
    }

    fn stream<'a>(&'a self, input: I, config: &RunnableConfig) -> BoxStream<'a, Result<O>> {
        let input_value = event_input(config, &input);
        trace_stream(
            NAME,
            RunKind::Chain,
            input_value,
            config,
            move |child| {
                stream::once(async move {
                    let mut input = input;
                    if let Err(err) = self.check_input(&mut input) {
                        return error_stream(err);
                    }
                    let first_error = match started(self.primary.stream(input.clone(), &child)).await {
                        Started::Chunks(chunks) => return chunks,
                        Started::Failed(error) if !self.handles(&error) => return error_stream(error),
                        Started::Failed(error) => error,
                    };
                    let mut latest: Option<Error> = None;
                    for fallback in &self.fallbacks {
                        let fallback_input = self.next_input(&input, latest.as_ref().unwrap_or(&first_error));
                        match started(fallback.stream(fallback_input, &child)).await {
                            Started::Chunks(chunks) => return chunks,
                            Started::Failed(error) if !self.handles(&error) => return error_stream(error),
                            Started::Failed(error) => latest = Some(error),
                        }
                    }
                    error_stream(first_error)
                })
                .flatten()
                .boxed()
            },
            move |acc, next| self.merge_chunks(acc, next),
        )
    }

    fn merge_chunks(&self, acc: O, next: O) -> Result<O> {
        self.primary.merge_chunks(acc, next)
    }
}

crate::impl_pipe_operator!([R: crate::ext::FixedOutput, F] WithFallbacks<R, F> => R::Output);

/// How a stream began: with a chunk (the stream, that chunk included) or with an error.
enum Started<'a, O> {
    Chunks(BoxStream<'a, Result<O>>),
    Failed(Error),
}

/// Waits for the first item of `chunks`.
async fn started<'a, O: Send + 'a>(mut chunks: BoxStream<'a, Result<O>>) -> Started<'a, O> {
    match chunks.next().await {
        Some(Ok(first)) => Started::Chunks(stream::once(async move { Ok(first) }).chain(chunks).boxed()),
        Some(Err(error)) => Started::Failed(error),
        None => Started::Chunks(stream::empty().boxed()),
    }
}
