//! `RunnableLambda` and `RunnableGenerator`: plain functions as runnables.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;
use futures::stream::{BoxStream, StreamExt as _};

use crate::config::RunnableConfig;
use crate::error::Result;
use crate::events::{RunKind, event_input, trace_invoke, trace_stream, trace_transform};
use crate::runnable::{BoxRunnable, ChunkStream, Merge, RunValue, Runnable};

type LambdaFn<I, O> = dyn Fn(I, RunnableConfig) -> BoxFuture<'static, Result<O>> + Send + Sync;

/// A sync or async function (optionally taking the config) as a runnable.
///
/// ```
/// use weft_runnable_core::{Runnable, RunnableConfig, RunnableLambda};
/// # tokio_test::block_on(async {
/// let double = RunnableLambda::new(|x: i64| x * 2);
/// assert_eq!(double.invoke(21, &RunnableConfig::default()).await.unwrap(), 42);
/// # });
/// ```
pub struct RunnableLambda<I, O> {
    func: Arc<LambdaFn<I, O>>,
    name: Cow<'static, str>,
}

impl<I, O> Clone for RunnableLambda<I, O> {
    fn clone(&self) -> Self {
        Self { func: Arc::clone(&self.func), name: self.name.clone() }
    }
}

impl<I, O> fmt::Debug for RunnableLambda<I, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunnableLambda").field("name", &self.name).finish()
    }
}

/// What a sync function given to [`RunnableLambda::new`] returns: any [`RunValue`]. A future is not one;
/// the diagnostic points an async closure at [`RunnableLambda::new_async`].
#[diagnostic::on_unimplemented(
    message = "`RunnableLambda::new` takes a sync function, whose output `{Self}` must be a value weft can pass on",
    label = "the function given to `RunnableLambda::new` returns `{Self}`",
    note = "for an async closure (`|x| async move {{ .. }}`) use `RunnableLambda::new_async`, which expects it to return `Result<O>`",
    note = "a sync function's output must be `Serialize + Clone + Send + Sync + 'static`"
)]
pub trait SyncLambdaOutput: RunValue {}

impl<T: RunValue> SyncLambdaOutput for T {}

impl<I: RunValue, O: SyncLambdaOutput> RunnableLambda<I, O> {
    /// An infallible sync function. For an async one, see [`new_async`](Self::new_async).
    pub fn new(f: impl Fn(I) -> O + Send + Sync + 'static) -> Self {
        Self::from_boxed(Arc::new(move |input, _| {
            let out = f(input);
            Box::pin(async move { Ok(out) })
        }))
    }
}

impl<I: RunValue, O: RunValue> RunnableLambda<I, O> {
    fn from_boxed(func: Arc<LambdaFn<I, O>>) -> Self {
        Self { func, name: Cow::Borrowed("RunnableLambda") }
    }

    /// A fallible sync function.
    pub fn try_new(f: impl Fn(I) -> Result<O> + Send + Sync + 'static) -> Self {
        Self::from_boxed(Arc::new(move |input, _| {
            let out = f(input);
            Box::pin(async move { out })
        }))
    }

    /// A fallible sync function that also reads the config.
    pub fn with_config_fn(f: impl Fn(I, &RunnableConfig) -> Result<O> + Send + Sync + 'static) -> Self {
        Self::from_boxed(Arc::new(move |input, config| {
            let out = f(input, &config);
            Box::pin(async move { out })
        }))
    }

    /// An async function.
    pub fn new_async<F, Fut>(f: F) -> Self
    where
        F: Fn(I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O>> + Send + 'static,
    {
        Self::from_boxed(Arc::new(move |input, _| Box::pin(f(input))))
    }

    /// An async function that also receives the config (owned, so the future can keep it).
    pub fn new_async_with_config<F, Fut>(f: F) -> Self
    where
        F: Fn(I, RunnableConfig) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O>> + Send + 'static,
    {
        Self::from_boxed(Arc::new(move |input, config| Box::pin(f(input, config))))
    }

    /// A function that picks a runnable, which is then invoked with the same input.
    pub fn routing(f: impl Fn(&I) -> Result<BoxRunnable<I, O>> + Send + Sync + 'static) -> Self {
        Self::from_boxed(Arc::new(move |input: I, config: RunnableConfig| {
            let chosen = f(&input);
            Box::pin(async move {
                let runnable = chosen?;
                runnable.invoke(input, &config).await
            })
        }))
    }

    /// Sets the name shown in events and traces.
    pub fn named(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = name.into();
        self
    }
}

#[async_trait]
impl<I: RunValue, O: RunValue> Runnable<I, O> for RunnableLambda<I, O> {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed(&self.name)
    }

    async fn invoke(&self, input: I, config: &RunnableConfig) -> Result<O> {
        let func = &self.func;
        trace_invoke(&self.name, RunKind::Chain, input, config, |input, child| func(input, child)).await
    }
}

type GeneratorFn<I, O> =
    dyn for<'a> Fn(BoxStream<'a, Result<I>>, RunnableConfig) -> BoxStream<'a, Result<O>> + Send + Sync;

/// A function from a stream of input chunks to a stream of output chunks: a step that keeps a sequence
/// streaming (LangChain's `RunnableGenerator`).
pub struct RunnableGenerator<I, O> {
    func: Arc<GeneratorFn<I, O>>,
    name: Cow<'static, str>,
}

impl<I, O> fmt::Debug for RunnableGenerator<I, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunnableGenerator").field("name", &self.name).finish()
    }
}

impl<I: RunValue, O: RunValue + Merge> RunnableGenerator<I, O> {
    /// Wraps a stream-to-stream function. Output chunks are merged with [`Merge`] when a whole output is
    /// needed.
    pub fn new(
        f: impl for<'a> Fn(BoxStream<'a, Result<I>>, RunnableConfig) -> BoxStream<'a, Result<O>>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        Self { func: Arc::new(f), name: Cow::Borrowed("RunnableGenerator") }
    }

    /// Sets the name shown in events and traces.
    pub fn named(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = name.into();
        self
    }
}

#[async_trait]
impl<I: RunValue, O: RunValue + Merge> Runnable<I, O> for RunnableGenerator<I, O> {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed(&self.name)
    }

    async fn invoke(&self, input: I, config: &RunnableConfig) -> Result<O> {
        ChunkStream::new(self.stream(input, config), O::merge).collect(&self.name).await
    }

    fn stream<'a>(&'a self, input: I, config: &RunnableConfig) -> BoxStream<'a, Result<O>> {
        let input_value = event_input(config, &input);
        trace_stream(
            &self.name,
            RunKind::Chain,
            input_value,
            config,
            move |child| (self.func)(futures::stream::once(async move { Ok(input) }).boxed(), child),
            O::merge,
        )
    }

    fn transform<'a>(
        &'a self,
        input: ChunkStream<'a, I>,
        config: &RunnableConfig,
    ) -> BoxStream<'a, Result<O>> {
        trace_transform(
            &self.name,
            RunKind::Chain,
            input,
            config,
            move |input, child| (self.func)(input.into_parts().0, child),
            O::merge,
        )
    }

    fn merge_chunks(&self, acc: O, next: O) -> Result<O> {
        acc.merge(next)
    }
}

crate::impl_pipe_operator!([I, O] RunnableLambda<I, O> => O);
crate::impl_pipe_operator!([I, O] RunnableGenerator<I, O> => O);
