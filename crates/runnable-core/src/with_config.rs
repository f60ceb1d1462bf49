//! `WithConfig`: a runnable with a bound config.

use std::borrow::Cow;

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::config::RunnableConfig;
use crate::error::Result;
use crate::events::RunKind;
use crate::runnable::{ChunkStream, RunValue, Runnable};

/// A runnable whose calls get a bound config merged under the caller's (see
/// [`RunnableExt::with_config`](crate::RunnableExt::with_config)).
#[derive(Debug, Clone)]
pub struct WithConfig<R> {
    inner: R,
    config: RunnableConfig,
}

impl<R> WithConfig<R> {
    /// Binds `config` to `inner`.
    pub fn new(inner: R, config: RunnableConfig) -> Self {
        Self { inner, config }
    }

    fn effective(&self, config: &RunnableConfig) -> RunnableConfig {
        self.config.merge(config)
    }
}

#[async_trait]
impl<I: RunValue, O: RunValue, R: Runnable<I, O>> Runnable<I, O> for WithConfig<R> {
    fn name(&self) -> Cow<'_, str> {
        match &self.config.run_name {
            Some(name) => Cow::Borrowed(name),
            None => self.inner.name(),
        }
    }

    fn kind(&self) -> RunKind {
        self.inner.kind()
    }

    async fn invoke(&self, input: I, config: &RunnableConfig) -> Result<O> {
        self.inner.invoke(input, &self.effective(config)).await
    }

    async fn batch(&self, inputs: Vec<I>, config: &RunnableConfig) -> Result<Vec<O>> {
        self.inner.batch(inputs, &self.effective(config)).await
    }

    async fn batch_results(&self, inputs: Vec<I>, config: &RunnableConfig) -> Vec<Result<O>> {
        self.inner.batch_results(inputs, &self.effective(config)).await
    }

    fn stream<'a>(&'a self, input: I, config: &RunnableConfig) -> BoxStream<'a, Result<O>> {
        self.inner.stream(input, &self.effective(config))
    }

    fn transform<'a>(
        &'a self,
        input: ChunkStream<'a, I>,
        config: &RunnableConfig,
    ) -> BoxStream<'a, Result<O>> {
        self.inner.transform(input, &self.effective(config))
    }

    fn merge_chunks(&self, acc: O, next: O) -> Result<O> {
        self.inner.merge_chunks(acc, next)
    }
}

crate::impl_pipe_operator!([R: crate::ext::FixedOutput] WithConfig<R> => R::Output);
