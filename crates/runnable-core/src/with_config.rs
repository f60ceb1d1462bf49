//! `WithConfig`: a runnable with a bound config.

use crate::config::RunnableConfig;

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

    /// The bound `run_name`, which names the run instead of the inner runnable's name.
    fn bound_name(&self) -> Option<&str> {
        self.config.run_name.as_deref()
    }
}

/// Implements `Runnable` for a wrapper `$ty<R>` (fields `inner: R`) that calls `inner` with the config
/// its inherent `effective(&self, &RunnableConfig) -> RunnableConfig` makes, under the name its
/// `bound_name(&self) -> Option<&str>` gives (else the inner runnable's), keeping the inner kind and
/// chunk merging: the config-binding wrappers `WithConfig` and `RunnableBinding`.
macro_rules! config_wrapper_runnable {
    ($ty:ident) => {
        #[async_trait::async_trait]
        impl<I, O, R> crate::runnable::Runnable<I, O> for $ty<R>
        where
            I: crate::runnable::RunValue,
            O: crate::runnable::RunValue,
            R: crate::runnable::Runnable<I, O>,
        {
            fn name(&self) -> std::borrow::Cow<'_, str> {
                match self.bound_name() {
                    Some(name) => std::borrow::Cow::Borrowed(name),
                    None => self.inner.name(),
                }
            }

            fn kind(&self) -> crate::events::RunKind {
                self.inner.kind()
            }

            async fn invoke(
                &self,
                input: I,
                config: &crate::config::RunnableConfig,
            ) -> crate::error::Result<O> {
                self.inner.invoke(input, &self.effective(config)).await
            }

            async fn batch(
                &self,
                inputs: Vec<I>,
                config: &crate::config::RunnableConfig,
            ) -> crate::error::Result<Vec<O>> {
                self.inner.batch(inputs, &self.effective(config)).await
            }

            async fn batch_results(
                &self,
                inputs: Vec<I>,
                config: &crate::config::RunnableConfig,
            ) -> Vec<crate::error::Result<O>> {
                self.inner.batch_results(inputs, &self.effective(config)).await
            }

            fn stream<'a>(
                &'a self,
                input: I,
                config: &crate::config::RunnableConfig,
            ) -> futures::stream::BoxStream<'a, crate::error::Result<O>> {
                self.inner.stream(input, &self.effective(config))
            }

            fn transform<'a>(
                &'a self,
                input: crate::runnable::ChunkStream<'a, I>,
                config: &crate::config::RunnableConfig,
            ) -> futures::stream::BoxStream<'a, crate::error::Result<O>> {
                self.inner.transform(input, &self.effective(config))
            }

            fn merge_chunks(&self, acc: O, next: O) -> crate::error::Result<O> {
                self.inner.merge_chunks(acc, next)
            }
        }
    };
}
pub(crate) use config_wrapper_runnable;

config_wrapper_runnable!(WithConfig);

crate::impl_pipe_operator!([R: crate::ext::FixedOutput] WithConfig<R> => R::Output);
