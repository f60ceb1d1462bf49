//! `RunnablePassthrough`: the identity runnable, and the entry points of `assign` and `pick`.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt as _};
use serde_json::Value;

use crate::assign::RunnableAssign;
use crate::config::RunnableConfig;
use crate::error::Result;
use crate::events::{RunKind, event_input, trace_invoke, trace_stream, trace_transform};
use crate::parallel::RunnableParallel;
use crate::pick::{PickKeys, RunnablePick};
use crate::runnable::{ChunkStream, Merge, RunValue, Runnable};

/// Returns its input unchanged. Streamed input passes through chunk by chunk, so a passthrough keeps a
/// sequence streaming.
///
/// It passes any value that knows how to merge its chunks ([`Merge`]: strings, lists, JSON, messages).
/// Typical use: a branch of a [`RunnableParallel`] that forwards the original input next to computed
/// values. [`RunnablePassthrough::assign`] and [`RunnablePassthrough::pick`] build the dict-shaped helpers.
///
/// ```
/// use serde_json::json;
/// use weft_runnable_core::{Runnable, RunnableConfig, RunnableLambda, RunnableParallel, RunnablePassthrough};
/// # tokio_test::block_on(async {
/// let map = RunnableParallel::new()
///     .with("question", RunnablePassthrough::new())
///     .with("length", RunnableLambda::new(|q: String| q.len()));
/// let out = map.invoke("why?".to_owned(), &RunnableConfig::default()).await.unwrap();
/// assert_eq!(out, json!({"question": "why?", "length": 4}));
/// # });
/// ```
pub struct RunnablePassthrough<T = Value> {
    _value: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for RunnablePassthrough<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RunnablePassthrough")
    }
}

impl<T> Clone for RunnablePassthrough<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for RunnablePassthrough<T> {}

impl<T> Default for RunnablePassthrough<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> RunnablePassthrough<T> {
    /// The identity runnable.
    pub fn new() -> Self {
        Self { _value: PhantomData }
    }
}

impl RunnablePassthrough<Value> {
    /// The input JSON object plus the keys computed by `mapper`'s branches (LangChain's
    /// `RunnablePassthrough.assign(k=...)`).
    pub fn assign(mapper: RunnableParallel<Value>) -> RunnableAssign {
        RunnableAssign::new(mapper)
    }

    /// One key of the input JSON object, or a sub-object of several keys (see [`RunnablePick`]).
    pub fn pick(keys: impl Into<PickKeys>) -> RunnablePick {
        RunnablePick::new(keys)
    }
}

const NAME: &str = "RunnablePassthrough";

#[async_trait]
impl<T: RunValue + Merge> Runnable<T, T> for RunnablePassthrough<T> {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed(NAME)
    }

    async fn invoke(&self, input: T, config: &RunnableConfig) -> Result<T> {
        trace_invoke(NAME, RunKind::Chain, input, config, |input, _| async move { Ok(input) }).await
    }

    fn stream<'a>(&'a self, input: T, config: &RunnableConfig) -> BoxStream<'a, Result<T>> {
        let input_value = event_input(config, &input);
        trace_stream(
            NAME,
            RunKind::Chain,
            input_value,
            config,
            move |_| stream::once(async move { Ok(input) }).boxed(),
            T::merge,
        )
    }

    fn transform<'a>(
        &'a self,
        input: ChunkStream<'a, T>,
        config: &RunnableConfig,
    ) -> BoxStream<'a, Result<T>> {
        trace_transform(NAME, RunKind::Chain, input, config, |input, _| input.into_parts().0, T::merge)
    }

    fn merge_chunks(&self, acc: T, next: T) -> Result<T> {
        acc.merge(next)
    }
}

crate::impl_pipe_operator!([T] RunnablePassthrough<T> => T);
