//! `RunnableAssign`: the input JSON object plus keys computed from it.

use std::borrow::Cow;

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt as _};
use serde_json::{Map, Value};

use crate::config::RunnableConfig;
use crate::error::{Error, Result};
use crate::events::{RunKind, event_input, trace_invoke, trace_stream, trace_transform};
use crate::json::describe;
use crate::parallel::RunnableParallel;
use crate::runnable::{ChunkStream, Runnable};

/// Returns its input (a JSON object) with the keys computed by a [`RunnableParallel`] added; the
/// branches all receive the whole input and run concurrently, as a child run. A computed key replaces
/// an input key of the same name. Built by [`RunnablePassthrough::assign`](crate::RunnablePassthrough::assign)
/// or [`RunnableExt::assign`](crate::RunnableExt::assign).
///
/// When streamed, the input keys that are not computed pass through first, chunk by chunk as they
/// arrive; the computed keys follow as the branches produce them.
///
/// ```
/// use serde_json::{Value, json};
/// use weft_runnable_core::{Runnable, RunnableConfig, RunnableLambda, RunnableParallel, RunnablePassthrough};
/// # tokio_test::block_on(async {
/// let add_total = RunnablePassthrough::assign(
///     RunnableParallel::new().with("total", RunnableLambda::new(|v: Value| v["a"].as_i64().unwrap_or(0) + 1)),
/// );
/// let out = add_total.invoke(json!({"a": 1}), &RunnableConfig::default()).await.unwrap();
/// assert_eq!(out, json!({"a": 1, "total": 2}));
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct RunnableAssign {
    mapper: RunnableParallel<Value>,
    name: Option<Cow<'static, str>>,
}

impl RunnableAssign {
    /// Adds the outputs of `mapper`'s branches to the input.
    pub fn new(mapper: RunnableParallel<Value>) -> Self {
        Self { mapper, name: None }
    }

    /// Sets the name of the run (default `RunnableAssign<key1,key2,...>`).
    pub fn named(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The runnable computing the new keys.
    pub fn mapper(&self) -> &RunnableParallel<Value> {
        &self.mapper
    }

    fn expect_object(&self, input: Value) -> Result<Map<String, Value>> {
        match input {
            Value::Object(map) => Ok(map),
            other => Err(Error::InvalidInput(format!(
                "{} expects a JSON object as input, got {}",
                self.name(),
                describe(&other)
            ))),
        }
    }

    /// The input keys that pass through untouched (those the mapper does not compute).
    fn passed_through(&self, chunk: &Map<String, Value>) -> Map<String, Value> {
        chunk
            .iter()
            .filter(|(k, _)| !self.mapper.keys().any(|m| m == k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The streamed output: pass-through keys per input chunk, then the mapper's chunks.
    fn assign_stream<'a>(
        &'a self,
        input: ChunkStream<'a, Value>,
        child: RunnableConfig,
    ) -> BoxStream<'a, Result<Value>> {
        type MergeFn<'a> = Box<dyn Fn(Value, Value) -> Result<Value> + Send + Sync + 'a>;
        enum State<'a> {
            Reading(BoxStream<'a, Result<Value>>, MergeFn<'a>, Option<Value>),
            Mapping(BoxStream<'a, Result<Value>>),
            Done,
        }
        let (chunks, merge) = input.into_parts();
        let start = State::Reading(chunks, merge, None);
        stream::unfold((start, child), move |(mut state, child)| async move {
            loop {
                match state {
                    State::Reading(mut chunks, merge, acc) => {
                        let Some(chunk) = chunks.next().await else {
                            let Some(whole) = acc else {
                                let err = Error::EmptyStream(format!("input of {}", self.name()));
                                return Some((Err(err), (State::Done, child)));
                            };
                            state = State::Mapping(self.mapper.stream(whole, &child));
                            continue;
                        };
                        let object = match chunk.and_then(|c| self.expect_object(c)) {
                            Ok(object) => object,
                            Err(err) => return Some((Err(err), (State::Done, child))),
                        };
                        let passed = self.passed_through(&object);
                        let acc = match acc {
                            None => Ok(Value::Object(object)),
                            Some(prev) => merge(prev, Value::Object(object)),
                        };
                        let acc = match acc {
                            Ok(acc) => acc,
                            Err(err) => return Some((Err(err), (State::Done, child))),
                        };
                        state = State::Reading(chunks, merge, Some(acc));
                        if !passed.is_empty() {
                            return Some((Ok(Value::Object(passed)), (state, child)));
                        }
                    }
                    State::Mapping(mut chunks) => {
                        let next = chunks.next().await?;
                        let state = if next.is_ok() { State::Mapping(chunks) } else { State::Done };
                        return Some((next, (state, child)));
                    }
                    State::Done => return None,
                }
            }
        })
        .boxed()
    }
}

#[async_trait]
impl Runnable<Value, Value> for RunnableAssign {
    fn name(&self) -> Cow<'_, str> {
        match &self.name {
            Some(name) => Cow::Borrowed(name),
            None => {
                Cow::Owned(format!("RunnableAssign<{}>", self.mapper.keys().collect::<Vec<_>>().join(",")))
            }
        }
    }

    async fn invoke(&self, input: Value, config: &RunnableConfig) -> Result<Value> {
        let name = self.name();
        trace_invoke(&name, RunKind::Chain, input, config, |input, child| async move {
            let mut object = self.expect_object(input)?;
            let computed = self.mapper.invoke(Value::Object(object.clone()), &child).await?;
            if let Value::Object(computed) = computed {
                object.extend(computed);
            }
            Ok(Value::Object(object))
        })
        .await
    }

    fn stream<'a>(&'a self, input: Value, config: &RunnableConfig) -> BoxStream<'a, Result<Value>> {
        let input_value = event_input(config, &input);
        trace_stream(
            &self.name(),
            RunKind::Chain,
            input_value,
            config,
            move |child| self.assign_stream(ChunkStream::once(input), child),
            move |acc, next| self.merge_chunks(acc, next),
        )
    }

    fn transform<'a>(
        &'a self,
        input: ChunkStream<'a, Value>,
        config: &RunnableConfig,
    ) -> BoxStream<'a, Result<Value>> {
        trace_transform(
            &self.name(),
            RunKind::Chain,
            input,
            config,
            move |input, child| self.assign_stream(input, child),
            move |acc, next| self.merge_chunks(acc, next),
        )
    }

    fn merge_chunks(&self, acc: Value, next: Value) -> Result<Value> {
        self.mapper.merge_chunks(acc, next)
    }
}

crate::impl_pipe_operator!(RunnableAssign => Value);
