//! `RunnableBinding`: extra call options (`stop`, `tools`, ...) bound to a runnable, and `BoundKwargs`,
//! through which the runnable reads them.

use serde_json::{Map, Value};

use crate::config::RunnableConfig;

/// Call options bound with [`RunnableExt::bind`](crate::RunnableExt::bind), as a runnable finds them in
/// its config: a chat model reads `stop`, `tools`, `tool_choice`, ... here.
///
/// ```
/// use serde_json::{Map, Value, json};
/// use weft_runnable_core::{BoundKwargs, Runnable, RunnableConfig, RunnableExt, RunnableLambda};
/// # tokio_test::block_on(async {
/// let model = RunnableLambda::with_config_fn(|prompt: String, config: &RunnableConfig| {
///     let stop = BoundKwargs::from_config(config).and_then(|k| k.get("stop")).cloned();
///     Ok(format!("{prompt} (stop: {})", stop.unwrap_or(Value::Null)))
/// });
/// let mut kwargs = Map::new();
/// kwargs.insert("stop".to_owned(), json!(["\n"]));
/// let out = model.bind(kwargs).invoke("hi".to_owned(), &RunnableConfig::default()).await.unwrap();
/// assert_eq!(out, r#"hi (stop: ["\n"])"#);
/// # });
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BoundKwargs(Map<String, Value>);

impl BoundKwargs {
    /// The options bound around the run that received `config`, if any.
    pub fn from_config(config: &RunnableConfig) -> Option<&BoundKwargs> {
        config.extensions.get::<BoundKwargs>()
    }

    /// The option `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    /// Every option.
    pub fn as_map(&self) -> &Map<String, Value> {
        &self.0
    }

    /// Every option, owned.
    pub fn into_map(self) -> Map<String, Value> {
        self.0
    }
}

/// A runnable called with extra options (see [`RunnableExt::bind`](crate::RunnableExt::bind)).
///
/// The options reach the runnable, and everything it calls, as [`BoundKwargs`] in
/// `config.extensions`. Bindings nest: options bound further out are kept, and where both bind the same
/// key the inner binding (the one closer to the runnable) wins. Binding again directly on a binding
/// ([`RunnableBinding::bind`]) merges into it, the newer options winning, as LangChain's chained `bind`.
///
/// A binding adds no run of its own: the runnable's name, kind and events are its own.
#[derive(Debug, Clone)]
pub struct RunnableBinding<R> {
    inner: R,
    kwargs: Map<String, Value>,
}

impl<R> RunnableBinding<R> {
    /// Binds `kwargs` to `inner`.
    pub fn new(inner: R, kwargs: Map<String, Value>) -> Self {
        Self { inner, kwargs }
    }

    /// Adds more options to this binding; they replace options of the same key.
    pub fn bind(mut self, kwargs: Map<String, Value>) -> Self {
        self.kwargs.extend(kwargs);
        self
    }

    /// The bound options.
    pub fn kwargs(&self) -> &Map<String, Value> {
        &self.kwargs
    }

    /// The bound runnable.
    pub fn inner(&self) -> &R {
        &self.inner
    }

    /// The config the inner runnable receives: `config` with this binding's options merged over the
    /// options already bound.
    fn effective(&self, config: &RunnableConfig) -> RunnableConfig {
        let mut merged = BoundKwargs::from_config(config).map(|k| k.0.clone()).unwrap_or_default();
        merged.extend(self.kwargs.iter().map(|(k, v)| (k.clone(), v.clone())));
        let mut config = config.clone();
        config.extensions.insert(BoundKwargs(merged));
        config
    }

    /// A binding adds no run of its own: the runnable keeps its name.
    fn bound_name(&self) -> Option<&str> {
        None
    }
}

crate::with_config::config_wrapper_runnable!(RunnableBinding);

crate::impl_pipe_operator!([R: crate::ext::FixedOutput] RunnableBinding<R> => R::Output);
