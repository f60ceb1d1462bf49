//! `RunnablePick`: one key of a JSON object, or a sub-object of several keys.

use std::borrow::Cow;

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt as _};
use serde_json::{Map, Value};

use crate::config::RunnableConfig;
use crate::error::{Error, Result};
use crate::events::{RunKind, event_input, trace_invoke, trace_stream, trace_transform};
use crate::json::describe;
use crate::runnable::{ChunkStream, Merge, Runnable};

/// Which keys a [`RunnablePick`] keeps: one key (the output is its value) or a list (the output is an
/// object).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PickKeys {
    /// One key; the output is its value.
    One(String),
    /// Several keys; the output is an object with those keys, in this order.
    Many(Vec<String>),
}

impl From<&str> for PickKeys {
    fn from(key: &str) -> Self {
        Self::One(key.to_owned())
    }
}

impl From<String> for PickKeys {
    fn from(key: String) -> Self {
        Self::One(key)
    }
}

impl<S: Into<String>> From<Vec<S>> for PickKeys {
    fn from(keys: Vec<S>) -> Self {
        Self::Many(keys.into_iter().map(Into::into).collect())
    }
}

impl<S: Into<String>, const N: usize> From<[S; N]> for PickKeys {
    fn from(keys: [S; N]) -> Self {
        Self::Many(keys.into_iter().map(Into::into).collect())
    }
}

/// Picks from its input (a JSON object) the value of one key, or a sub-object of several keys in the
/// listed order (LangChain's `RunnablePassthrough.pick`).
///
/// Missing keys follow LangChain: a single missing key gives `null`; missing keys of a list are left
/// out, and when none of the listed keys is present the output is `null`. Input that is not an object is
/// an error naming the runnable. When streamed, each input chunk is picked as it arrives and chunks in
/// which nothing was picked are skipped.
///
/// ```
/// use serde_json::json;
/// use weft_runnable_core::{Runnable, RunnableConfig, RunnablePassthrough};
/// # tokio_test::block_on(async {
/// let config = RunnableConfig::default();
/// let input = json!({"a": 1, "b": 2, "c": 3});
/// assert_eq!(RunnablePassthrough::pick("b").invoke(input.clone(), &config).await.unwrap(), json!(2));
/// let sub = RunnablePassthrough::pick(["c", "a"]).invoke(input, &config).await.unwrap();
/// assert_eq!(sub, json!({"c": 3, "a": 1}));
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct RunnablePick {
    keys: PickKeys,
}

impl RunnablePick {
    /// Picks `keys`: a `&str` or `String` for one key, an array or `Vec` for several.
    pub fn new(keys: impl Into<PickKeys>) -> Self {
        Self { keys: keys.into() }
    }

    /// The keys picked.
    pub fn keys(&self) -> &PickKeys {
        &self.keys
    }

    /// Picks from one value; `None` when nothing was picked.
    fn pick(&self, input: Value) -> Result<Option<Value>> {
        let Value::Object(mut object) = input else {
            return Err(Error::InvalidInput(format!(
                "RunnablePick expects a JSON object as input, got {}",
                describe(&input)
            )));
        };
        Ok(match &self.keys {
            PickKeys::One(key) => object.remove(key),
            PickKeys::Many(keys) => {
                let picked: Map<String, Value> =
                    keys.iter().filter_map(|k| object.remove(k).map(|v| (k.clone(), v))).collect();
                (!picked.is_empty()).then_some(Value::Object(picked))
            }
        })
    }

    fn pick_stream<'a>(&'a self, chunks: BoxStream<'a, Result<Value>>) -> BoxStream<'a, Result<Value>> {
        chunks
            .filter_map(move |chunk| std::future::ready(chunk.and_then(|c| self.pick(c)).transpose()))
            .boxed()
    }
}

const NAME: &str = "RunnablePick";

#[async_trait]
impl Runnable<Value, Value> for RunnablePick {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed(NAME)
    }

    async fn invoke(&self, input: Value, config: &RunnableConfig) -> Result<Value> {
        trace_invoke(NAME, RunKind::Chain, input, config, |input, _| async move {
            Ok(self.pick(input)?.unwrap_or(Value::Null))
        })
        .await
    }

    fn stream<'a>(&'a self, input: Value, config: &RunnableConfig) -> BoxStream<'a, Result<Value>> {
        let input_value = event_input(config, &input);
        trace_stream(
            NAME,
            RunKind::Chain,
            input_value,
            config,
            move |_| self.pick_stream(stream::once(async move { Ok(input) }).boxed()),
            Value::merge,
        )
    }

    fn transform<'a>(
        &'a self,
        input: ChunkStream<'a, Value>,
        config: &RunnableConfig,
    ) -> BoxStream<'a, Result<Value>> {
        trace_transform(
            NAME,
            RunKind::Chain,
            input,
            config,
            move |input, _| self.pick_stream(input.into_parts().0),
            Value::merge,
        )
    }

    fn merge_chunks(&self, acc: Value, next: Value) -> Result<Value> {
        acc.merge(next)
    }
}

crate::impl_pipe_operator!(RunnablePick => Value);
