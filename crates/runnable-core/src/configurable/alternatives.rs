//! `ConfigurableAlternatives`: one of several runnables, chosen per call through `config.configurable`.

use std::borrow::Cow;
use std::fmt;

use async_trait::async_trait;
use futures::stream::BoxStream;
use serde_json::Value;

use super::fields::ConfigurableField;
use crate::config::RunnableConfig;
use crate::error::{Error, Result};
use crate::events::RunKind;
use crate::json::describe;
use crate::runnable::{BoxRunnable, ChunkStream, RunValue, Runnable, error_stream};

/// Runs the alternative named by `config.configurable[which.id]`, or the default when the key is absent
/// (LangChain's `configurable_alternatives`). Built by
/// [`RunnableExt::configurable_alternatives`](crate::RunnableExt::configurable_alternatives).
///
/// An unknown name is an error naming it and listing the known ones; so is a value that is not a
/// string. The chosen runnable runs with the caller's config and its own run: the alternatives add no
/// run of their own.
///
/// ```
/// use weft_runnable_core::{ConfigurableField, Runnable, RunnableConfig, RunnableExt, RunnableLambda};
/// # tokio_test::block_on(async {
/// let greet = RunnableLambda::new(|name: String| format!("hello {name}"))
///     .configurable_alternatives(ConfigurableField::new("lang"), "en")
///     .with_alternative("fr", RunnableLambda::new(|name: String| format!("bonjour {name}")));
/// let config = RunnableConfig::default().with_configurable("lang", "fr");
/// assert_eq!(greet.invoke("Ada".to_owned(), &config).await.unwrap(), "bonjour Ada");
/// # });
/// ```
pub struct ConfigurableAlternatives<I, O> {
    which: ConfigurableField,
    default_key: String,
    default: BoxRunnable<I, O>,
    /// The other alternatives, in the order added.
    alternatives: Vec<(String, BoxRunnable<I, O>)>,
}

impl<I, O> Clone for ConfigurableAlternatives<I, O> {
    fn clone(&self) -> Self {
        Self {
            which: self.which.clone(),
            default_key: self.default_key.clone(),
            default: self.default.clone(),
            alternatives: self.alternatives.clone(),
        }
    }
}

impl<I: RunValue, O: RunValue> fmt::Debug for ConfigurableAlternatives<I, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigurableAlternatives")
            .field("which", &self.which)
            .field("default_key", &self.default_key)
            .field("default", &self.default)
            .field("alternatives", &self.alternatives)
            .finish()
    }
}

impl<I: RunValue, O: RunValue> ConfigurableAlternatives<I, O> {
    /// `default`, known as `default_key`, chosen by `config.configurable[which.id]`.
    pub fn new(
        which: ConfigurableField,
        default_key: impl Into<String>,
        default: impl Runnable<I, O> + 'static,
    ) -> Self {
        Self {
            which,
            default_key: default_key.into(),
            default: BoxRunnable::new(default),
            alternatives: Vec::new(),
        }
    }

    /// Adds the alternative `key` (replacing one of the same key, the default included).
    pub fn with_alternative(
        mut self,
        key: impl Into<String>,
        runnable: impl Runnable<I, O> + 'static,
    ) -> Self {
        let key = key.into();
        let runnable = BoxRunnable::new(runnable);
        if key == self.default_key {
            self.default = runnable;
            return self;
        }
        match self.alternatives.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = runnable,
            None => self.alternatives.push((key, runnable)),
        }
        self
    }

    /// The field that chooses.
    pub fn which(&self) -> &ConfigurableField {
        &self.which
    }

    /// Every key, the default first.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.default_key.as_str()).chain(self.alternatives.iter().map(|(k, _)| k.as_str()))
    }

    /// The runnable chosen by `config`.
    pub fn choose(&self, config: &RunnableConfig) -> Result<&BoxRunnable<I, O>> {
        let key = match config.configurable.get(&self.which.id) {
            None | Some(Value::Null) => self.default_key.as_str(),
            Some(Value::String(key)) => key.as_str(),
            Some(other) => {
                return Err(Error::InvalidConfig(format!(
                    "configurable '{}' must name an alternative as a string, got {}",
                    self.which.id,
                    describe(other)
                )));
            }
        };
        if key == self.default_key {
            return Ok(&self.default);
        }
        self.alternatives.iter().find(|(k, _)| k == key).map(|(_, r)| r).ok_or_else(|| {
            Error::InvalidConfig(format!(
                "unknown alternative '{key}' for configurable '{}'; known alternatives: {}",
                self.which.id,
                self.keys().collect::<Vec<_>>().join(", ")
            ))
        })
    }
}

#[async_trait]
impl<I: RunValue, O: RunValue> Runnable<I, O> for ConfigurableAlternatives<I, O> {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed("RunnableConfigurableAlternatives")
    }

    /// The default's kind.
    fn kind(&self) -> RunKind {
        self.default.kind()
    }

    async fn invoke(&self, input: I, config: &RunnableConfig) -> Result<O> {
        self.choose(config)?.invoke(input, config).await
    }

    async fn batch_results(&self, inputs: Vec<I>, config: &RunnableConfig) -> Vec<Result<O>> {
        match self.choose(config) {
            Ok(runnable) => runnable.batch_results(inputs, config).await,
            Err(err) => inputs.iter().map(|_| Err(err.clone())).collect(),
        }
    }

    fn stream<'a>(&'a self, input: I, config: &RunnableConfig) -> BoxStream<'a, Result<O>> {
        match self.choose(config) {
            Ok(runnable) => runnable.stream(input, config),
            Err(err) => error_stream(err),
        }
    }

    fn transform<'a>(
        &'a self,
        input: ChunkStream<'a, I>,
        config: &RunnableConfig,
    ) -> BoxStream<'a, Result<O>> {
        match self.choose(config) {
            Ok(runnable) => runnable.transform(input, config),
            Err(err) => error_stream(err),
        }
    }

    /// Merges by the default's rules (every alternative produces the same type).
    fn merge_chunks(&self, acc: O, next: O) -> Result<O> {
        self.default.merge_chunks(acc, next)
    }
}

crate::impl_pipe_operator!([I, O] ConfigurableAlternatives<I, O> => O);
