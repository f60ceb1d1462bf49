//! The `Runnable` trait: one protocol for prompts, models, parsers, tools, lambdas, chains and graphs.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt as _};
use serde::Serialize;

use crate::config::RunnableConfig;
use crate::error::{Error, Result};
use crate::events::RunKind;

/// Bounds every value flowing between weft's runnables meets: it can be cloned (retries, fallbacks and
/// parallel branches reuse inputs), shared across tasks, and shown in run events as JSON.
pub trait RunValue: Serialize + Clone + Send + Sync + 'static {}

impl<T: Serialize + Clone + Send + Sync + 'static> RunValue for T {}

/// Folds stream chunks into one value, the way LangChain adds chunks with `+`.
///
/// Strings concatenate, lists append, JSON objects merge key by key, AI message chunks merge content,
/// tool-call chunks and usage.
pub trait Merge: Sized {
    /// Merges `next` into `self`.
    fn merge(self, next: Self) -> Result<Self>;
}

impl Merge for String {
    fn merge(mut self, next: Self) -> Result<Self> {
        self.push_str(&next);
        Ok(self)
    }
}

impl<T> Merge for Vec<T> {
    fn merge(mut self, next: Self) -> Result<Self> {
        self.extend(next);
        Ok(self)
    }
}

impl Merge for serde_json::Value {
    fn merge(self, next: Self) -> Result<Self> {
        use serde_json::Value;
        Ok(match (self, next) {
            (Value::Object(mut left), Value::Object(right)) => {
                for (k, v) in right {
                    let merged = match left.remove(&k) {
                        Some(old) => old.merge(v)?,
                        None => v,
                    };
                    left.insert(k, merged);
                }
                Value::Object(left)
            }
            (Value::String(mut a), Value::String(b)) => {
                a.push_str(&b);
                Value::String(a)
            }
            (Value::Array(mut a), Value::Array(b)) => {
                a.extend(b);
                Value::Array(a)
            }
            (Value::Null, other) => other,
            (_, other) => other,
        })
    }
}

/// A stream of input chunks together with the way to fold them into one value.
///
/// A step of a sequence receives its predecessor's output this way: a step that can work chunk by chunk
/// (parsers, passthroughs, generator lambdas) consumes the chunks as they arrive; any other step folds
/// them with [`ChunkStream::collect`] and runs once.
pub struct ChunkStream<'a, T> {
    chunks: BoxStream<'a, Result<T>>,
    merge: MergeFn<'a, T>,
}

/// A boxed function merging two chunks.
pub type MergeFn<'a, T> = Box<dyn Fn(T, T) -> Result<T> + Send + Sync + 'a>;

impl<T> fmt::Debug for ChunkStream<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChunkStream").finish_non_exhaustive()
    }
}

impl<'a, T: Send + 'a> ChunkStream<'a, T> {
    /// Chunks and the function that merges two of them.
    pub fn new(
        chunks: BoxStream<'a, Result<T>>,
        merge: impl Fn(T, T) -> Result<T> + Send + Sync + 'a,
    ) -> Self {
        Self { chunks, merge: Box::new(merge) }
    }

    /// A stream of exactly one value.
    pub fn once(value: T) -> Self {
        Self::new(stream::once(async move { Ok(value) }).boxed(), |_, next| Ok(next))
    }

    /// Chunks of a type that knows how to merge itself.
    pub fn mergeable(chunks: BoxStream<'a, Result<T>>) -> Self
    where
        T: Merge,
    {
        Self::new(chunks, T::merge)
    }

    /// Folds every chunk into one value; an empty stream is an error naming `what`.
    pub async fn collect(self, what: &str) -> Result<T> {
        let Self { mut chunks, merge } = self;
        let mut acc: Option<T> = None;
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk?;
            acc = Some(match acc {
                None => chunk,
                Some(prev) => merge(prev, chunk)?,
            });
        }
        acc.ok_or_else(|| Error::EmptyStream(what.to_owned()))
    }

    /// Splits into the raw chunk stream and the merge function.
    pub fn into_parts(self) -> (BoxStream<'a, Result<T>>, MergeFn<'a, T>) {
        (self.chunks, self.merge)
    }
}

/// A unit of work that turns an `I` into an `O`, and everything that can be done with one: invoke it, batch
/// it, stream it, transform a stream with it.
///
/// Only [`invoke`](Runnable::invoke) is required; every other method has a correct default. Runnables
/// that produce output piece by piece override [`stream`](Runnable::stream) and
/// [`merge_chunks`](Runnable::merge_chunks); runnables that consume input piece by piece override
/// [`transform`](Runnable::transform).
///
/// Composition methods (`pipe`, `with_retry`, `with_fallbacks`, ...) live on
/// [`RunnableExt`](crate::RunnableExt).
#[async_trait]
pub trait Runnable<I, O>: Send + Sync
where
    I: Send + 'static,
    O: Send + 'static,
{
    /// The name of this runnable in events and traces.
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed(short_type_name::<Self>())
    }

    /// The kind of component, which names its events (`on_chain_*`, `on_parser_*`, ...).
    fn kind(&self) -> RunKind {
        RunKind::Chain
    }

    /// Runs on one input.
    async fn invoke(&self, input: I, config: &RunnableConfig) -> Result<O>;

    /// Runs on every input, at most `config.max_concurrency` at a time, keeping the input order; the
    /// first error stops the batch.
    async fn batch(&self, inputs: Vec<I>, config: &RunnableConfig) -> Result<Vec<O>> {
        self.batch_results(inputs, config).await.into_iter().collect()
    }

    /// Runs on every input like [`batch`](Runnable::batch), returning one result per input instead of
    /// failing on the first error.
    async fn batch_results(&self, inputs: Vec<I>, config: &RunnableConfig) -> Vec<Result<O>> {
        let limit = config.max_concurrency.unwrap_or(usize::MAX).max(1);
        stream::iter(inputs).map(|input| self.invoke(input, config)).buffered(limit).collect().await
    }

    /// Streams the output. The default yields one chunk: the result of `invoke`.
    fn stream<'a>(&'a self, input: I, config: &RunnableConfig) -> BoxStream<'a, Result<O>> {
        let config = config.clone();
        stream::once(async move { self.invoke(input, &config).await }).boxed()
    }

    /// Streams the output for a streamed input. The default folds the input chunks into one value and
    /// then calls [`stream`](Runnable::stream).
    fn transform<'a>(
        &'a self,
        input: ChunkStream<'a, I>,
        config: &RunnableConfig,
    ) -> BoxStream<'a, Result<O>> {
        let config = config.clone();
        stream::once(async move {
            match input.collect(&self.name()).await {
                Ok(value) => self.stream(value, &config),
                Err(err) => error_stream(err),
            }
        })
        .flatten()
        .boxed()
    }

    /// Merges two output chunks of this runnable's stream into one.
    ///
    /// The default accepts no merging, which is right for runnables that stream a single chunk;
    /// runnables whose stream yields several chunks override it.
    fn merge_chunks(&self, acc: O, next: O) -> Result<O> {
        let _ = (acc, next);
        Err(Error::InvalidInput(format!(
            "{} streamed several chunks but does not know how to merge them",
            self.name()
        )))
    }

    #[doc(hidden)]
    /// How many steps this runnable counts for when it is part of a sequence (a sequence counts its own).
    fn seq_len(&self) -> usize {
        1
    }

    #[doc(hidden)]
    /// Runs as steps `first..` of an enclosing sequence: tagged `seq:step:N`, without a run of its own
    /// when this is itself a sequence (so that sequences stay flat in events, as in LangChain).
    async fn invoke_seq_steps(&self, input: I, config: &RunnableConfig, first: usize) -> Result<O> {
        self.invoke(input, &config.child(Some(seq_step_tag(first)))).await
    }

    #[doc(hidden)]
    /// Streaming counterpart of [`invoke_seq_steps`](Runnable::invoke_seq_steps).
    fn transform_seq_steps<'a>(
        &'a self,
        input: ChunkStream<'a, I>,
        config: &RunnableConfig,
        first: usize,
    ) -> BoxStream<'a, Result<O>> {
        self.transform(input, &config.child(Some(seq_step_tag(first))))
    }
}

/// A stream of one item: `error`. For a runnable that fails before it can start streaming.
pub(crate) fn error_stream<'a, O: Send + 'a>(error: Error) -> BoxStream<'a, Result<O>> {
    stream::once(async move { Err(error) }).boxed()
}

/// The tag of step `n` (1-based) of a sequence.
pub fn seq_step_tag(n: usize) -> String {
    format!("seq:step:{n}")
}

/// The last path segment of a type name, without generic parameters.
pub fn short_type_name<T: ?Sized>() -> &'static str {
    let full = std::any::type_name::<T>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}

/// A shareable, type-erased runnable.
pub struct BoxRunnable<I, O>(Arc<dyn Runnable<I, O>>);

impl<I, O> Clone for BoxRunnable<I, O> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<I, O> fmt::Debug for BoxRunnable<I, O>
where
    I: Send + 'static,
    O: Send + 'static,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("BoxRunnable").field(&self.0.name()).finish()
    }
}

impl<I: Send + 'static, O: Send + 'static> BoxRunnable<I, O> {
    /// Boxes a runnable.
    pub fn new<R: Runnable<I, O> + 'static>(runnable: R) -> Self {
        Self(Arc::new(runnable))
    }

    /// Wraps an already shared runnable.
    pub fn from_arc(runnable: Arc<dyn Runnable<I, O>>) -> Self {
        Self(runnable)
    }
}

#[async_trait]
impl<I, O> Runnable<I, O> for BoxRunnable<I, O>
where
    I: Send + 'static,
    O: Send + 'static,
{
    fn name(&self) -> Cow<'_, str> {
        self.0.name()
    }

    fn kind(&self) -> RunKind {
        self.0.kind()
    }

    async fn invoke(&self, input: I, config: &RunnableConfig) -> Result<O> {
        self.0.invoke(input, config).await
    }

    async fn batch(&self, inputs: Vec<I>, config: &RunnableConfig) -> Result<Vec<O>> {
        self.0.batch(inputs, config).await
    }

    async fn batch_results(&self, inputs: Vec<I>, config: &RunnableConfig) -> Vec<Result<O>> {
        self.0.batch_results(inputs, config).await
    }

    fn stream<'a>(&'a self, input: I, config: &RunnableConfig) -> BoxStream<'a, Result<O>> {
        self.0.stream(input, config)
    }

    fn transform<'a>(
        &'a self,
        input: ChunkStream<'a, I>,
        config: &RunnableConfig,
    ) -> BoxStream<'a, Result<O>> {
        self.0.transform(input, config)
    }

    fn merge_chunks(&self, acc: O, next: O) -> Result<O> {
        self.0.merge_chunks(acc, next)
    }

    fn seq_len(&self) -> usize {
        self.0.seq_len()
    }

    async fn invoke_seq_steps(&self, input: I, config: &RunnableConfig, first: usize) -> Result<O> {
        self.0.invoke_seq_steps(input, config, first).await
    }

    fn transform_seq_steps<'a>(
        &'a self,
        input: ChunkStream<'a, I>,
        config: &RunnableConfig,
        first: usize,
    ) -> BoxStream<'a, Result<O>> {
        self.0.transform_seq_steps(input, config, first)
    }
}

#[async_trait]
impl<I, O, R> Runnable<I, O> for Arc<R>
where
    I: Send + 'static,
    O: Send + 'static,
    R: Runnable<I, O> + ?Sized,
{
    fn name(&self) -> Cow<'_, str> {
        (**self).name()
    }

    fn kind(&self) -> RunKind {
        (**self).kind()
    }

    async fn invoke(&self, input: I, config: &RunnableConfig) -> Result<O> {
        (**self).invoke(input, config).await
    }

    async fn batch(&self, inputs: Vec<I>, config: &RunnableConfig) -> Result<Vec<O>> {
        (**self).batch(inputs, config).await
    }

    async fn batch_results(&self, inputs: Vec<I>, config: &RunnableConfig) -> Vec<Result<O>> {
        (**self).batch_results(inputs, config).await
    }

    fn stream<'a>(&'a self, input: I, config: &RunnableConfig) -> BoxStream<'a, Result<O>> {
        (**self).stream(input, config)
    }

    fn transform<'a>(
        &'a self,
        input: ChunkStream<'a, I>,
        config: &RunnableConfig,
    ) -> BoxStream<'a, Result<O>> {
        (**self).transform(input, config)
    }

    fn merge_chunks(&self, acc: O, next: O) -> Result<O> {
        (**self).merge_chunks(acc, next)
    }

    fn seq_len(&self) -> usize {
        (**self).seq_len()
    }

    async fn invoke_seq_steps(&self, input: I, config: &RunnableConfig, first: usize) -> Result<O> {
        (**self).invoke_seq_steps(input, config, first).await
    }

    fn transform_seq_steps<'a>(
        &'a self,
        input: ChunkStream<'a, I>,
        config: &RunnableConfig,
        first: usize,
    ) -> BoxStream<'a, Result<O>> {
        (**self).transform_seq_steps(input, config, first)
    }
}

crate::impl_pipe_operator!([I, O] BoxRunnable<I, O> => O);
