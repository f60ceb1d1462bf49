//! `ConfigurableField` and `Configurable`: a runnable rebuilt on each call from `config.configurable`.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt as _};
use serde_json::{Map, Value};

use super::owned_stream::stream_owned;
use crate::config::RunnableConfig;
use crate::error::Result;
use crate::runnable::{ChunkStream, RunValue, Runnable, error_stream};

/// A setting of a runnable that a caller may override per call through `config.configurable[id]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigurableField {
    /// The key in `config.configurable`.
    pub id: String,
    /// A human-readable name.
    pub name: Option<String>,
    /// What the setting does.
    pub description: Option<String>,
}

impl ConfigurableField {
    /// A field read from `config.configurable[id]`.
    pub fn new(id: impl Into<String>) -> Self {
        Self { id: id.into(), name: None, description: None }
    }

    /// Sets the human-readable name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}

type Factory<R> = dyn Fn(&Map<String, Value>) -> Result<R> + Send + Sync;

/// A runnable built on each call by a factory from the values of its declared fields found in
/// `config.configurable` (LangChain's `configurable_fields`).
///
/// The factory receives a map from field id to value holding only the declared fields the caller set;
/// it uses its own defaults for the others, and may fail (for example on a value of the wrong type).
/// Other keys of `configurable` are not passed. The built runnable then runs with the caller's config:
/// the configurable adds no run of its own.
///
/// Streamed chunks are merged by an instance built with no field set (built once, on first need).
///
/// ```
/// use serde_json::Value;
/// use weft_runnable_core::{Configurable, ConfigurableField, Runnable, RunnableConfig, RunnableLambda};
/// # tokio_test::block_on(async {
/// let add = Configurable::new([ConfigurableField::new("step")], |fields| {
///     let step = fields.get("step").and_then(Value::as_i64).unwrap_or(1);
///     Ok(RunnableLambda::new(move |x: i64| x + step))
/// });
/// assert_eq!(add.invoke(1, &RunnableConfig::default()).await.unwrap(), 2);
/// let config = RunnableConfig::default().with_configurable("step", 10);
/// assert_eq!(add.invoke(1, &config).await.unwrap(), 11);
/// # });
/// ```
pub struct Configurable<R> {
    fields: Vec<ConfigurableField>,
    factory: Arc<Factory<R>>,
    default: OnceLock<R>,
}

impl<R> Clone for Configurable<R> {
    fn clone(&self) -> Self {
        Self { fields: self.fields.clone(), factory: Arc::clone(&self.factory), default: OnceLock::new() }
    }
}

impl<R> fmt::Debug for Configurable<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Configurable").field("fields", &self.fields).finish_non_exhaustive()
    }
}

impl<R> Configurable<R> {
    /// A runnable built by `factory` from the values of `fields`.
    pub fn new(
        fields: impl IntoIterator<Item = ConfigurableField>,
        factory: impl Fn(&Map<String, Value>) -> Result<R> + Send + Sync + 'static,
    ) -> Self {
        Self { fields: fields.into_iter().collect(), factory: Arc::new(factory), default: OnceLock::new() }
    }

    /// The declared fields.
    pub fn fields(&self) -> &[ConfigurableField] {
        &self.fields
    }

    /// Builds the runnable for a call under `config`.
    pub fn build(&self, config: &RunnableConfig) -> Result<R> {
        let values: Map<String, Value> = self
            .fields
            .iter()
            .filter_map(|field| config.configurable.get(&field.id).map(|v| (field.id.clone(), v.clone())))
            .collect();
        (self.factory)(&values)
    }

    /// The instance built with no field set.
    fn default_instance(&self) -> Result<&R> {
        if let Some(built) = self.default.get() {
            return Ok(built);
        }
        let built = (self.factory)(&Map::new())?;
        Ok(self.default.get_or_init(|| built))
    }
}

#[async_trait]
impl<I, O, R> Runnable<I, O> for Configurable<R>
where
    I: RunValue,
    O: RunValue,
    R: Runnable<I, O>,
{
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed("RunnableConfigurableFields")
    }

    async fn invoke(&self, input: I, config: &RunnableConfig) -> Result<O> {
        self.build(config)?.invoke(input, config).await
    }

    async fn batch_results(&self, inputs: Vec<I>, config: &RunnableConfig) -> Vec<Result<O>> {
        match self.build(config) {
            Ok(runnable) => runnable.batch_results(inputs, config).await,
            Err(err) => inputs.iter().map(|_| Err(err.clone())).collect(),
        }
    }

    fn stream<'a>(&'a self, input: I, config: &RunnableConfig) -> BoxStream<'a, Result<O>> {
        let runnable = match self.build(config) {
            Ok(runnable) => runnable,
            Err(err) => return error_stream(err),
        };
        let config = config.clone();
        stream_owned(runnable, move |runnable| runnable.stream(input, &config))
    }

    fn transform<'a>(
        &'a self,
        input: ChunkStream<'a, I>,
        config: &RunnableConfig,
    ) -> BoxStream<'a, Result<O>> {
        let runnable = match self.build(config) {
            Ok(runnable) => runnable,
            Err(err) => return error_stream(err),
        };
        let config = config.clone();
        stream_owned((runnable, Some(input)), move |(runnable, input)| match input.take() {
            Some(input) => runnable.transform(input, &config),
            None => stream::empty().boxed(),
        })
    }

    fn merge_chunks(&self, acc: O, next: O) -> Result<O> {
        self.default_instance()?.merge_chunks(acc, next)
    }
}

crate::impl_pipe_operator!([R: crate::ext::FixedOutput] Configurable<R> => R::Output);
