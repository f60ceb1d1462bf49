//! `RunnableParallel`: the same input to several runnables at once, their outputs as one JSON map.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt as _};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::config::RunnableConfig;
use crate::error::Result;
use crate::events::{RunKind, event_input, trace_invoke, trace_stream};
use crate::json::{from_value, into_value, single_entry};
use crate::runnable::{BoxRunnable, ChunkStream, Merge, RunValue, Runnable};

/// Runs every branch on the same input, concurrently (at most `config.max_concurrency` at a time), and
/// returns a JSON object with one key per branch, in the order the branches were added (LangChain's
/// `RunnableParallel`, or a dict literal in a chain).
///
/// Each branch runs as a child run tagged `map:key:<key>`. When streamed, every chunk is an object with
/// one key (the branch that produced it), in the order the branches produce them; merging the chunks gives
/// the whole map. The first branch to fail fails the whole run, and the other branches are dropped.
///
/// ```
/// use serde_json::json;
/// use weft_runnable_core::{Runnable, RunnableConfig, RunnableLambda, RunnableParallel};
/// # tokio_test::block_on(async {
/// let both = RunnableParallel::new()
///     .with("double", RunnableLambda::new(|x: i64| x * 2))
///     .with("text", RunnableLambda::new(|x: i64| format!("#{x}")));
/// let out = both.invoke(21, &RunnableConfig::default()).await.unwrap();
/// assert_eq!(out, json!({"double": 42, "text": "#21"}));
/// # });
/// ```
pub struct RunnableParallel<I> {
    branches: Vec<(String, BoxRunnable<I, Value>)>,
    name: Option<Cow<'static, str>>,
}

impl<I> Clone for RunnableParallel<I> {
    fn clone(&self) -> Self {
        Self { branches: self.branches.clone(), name: self.name.clone() }
    }
}

impl<I: RunValue> fmt::Debug for RunnableParallel<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunnableParallel").field("branches", &self.branches).finish()
    }
}

impl<I: RunValue> Default for RunnableParallel<I> {
    fn default() -> Self {
        Self::new()
    }
}

impl<I: RunValue> RunnableParallel<I> {
    /// A parallel map with no branch yet.
    pub fn new() -> Self {
        Self { branches: Vec::new(), name: None }
    }

    /// Adds the branch `key`, whose output is converted to JSON (a branch with the same key is replaced
    /// in place).
    ///
    /// Streamed chunks of the branch are converted one by one; when they must be merged they are read
    /// back and merged by the branch itself, so typed chunks (messages) merge by their own rules.
    pub fn with<R, O>(self, key: impl Into<String>, runnable: R) -> Self
    where
        R: Runnable<I, O> + 'static,
        O: RunValue + DeserializeOwned,
    {
        self.with_boxed(key, BoxRunnable::new(ToValue { inner: runnable, _output: PhantomData }))
    }

    /// Adds the branch `key`, a runnable that already outputs JSON.
    pub fn with_boxed(mut self, key: impl Into<String>, runnable: BoxRunnable<I, Value>) -> Self {
        let key = key.into();
        match self.branches.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = runnable,
            None => self.branches.push((key, runnable)),
        }
        self
    }

    /// Sets the name of the run (default `RunnableParallel<key1,key2,...>`).
    pub fn named(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The branch keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.branches.iter().map(|(k, _)| k.as_str())
    }

    fn branch(&self, key: &str) -> Option<&BoxRunnable<I, Value>> {
        self.branches.iter().find(|(k, _)| k == key).map(|(_, b)| b)
    }

    async fn run_branches(&self, input: I, config: &RunnableConfig) -> Result<Value> {
        let limit = config.max_concurrency.unwrap_or(usize::MAX).max(1);
        let input = &input;
        // The futures are built first: a stream holding the closure that builds them would not be `Send`.
        let runs: Vec<_> = self
            .branches
            .iter()
            .enumerate()
            .map(|(index, (key, branch))| {
                let child = config.child(Some(map_key_tag(key)));
                async move { (index, branch.invoke(input.clone(), &child).await) }
            })
            .collect();
        let mut runs = stream::iter(runs).buffer_unordered(limit);
        let mut outputs: Vec<Option<Value>> = vec![None; self.branches.len()];
        while let Some((index, output)) = runs.next().await {
            outputs[index] = Some(output?);
        }
        let map: Map<String, Value> = self
            .branches
            .iter()
            .zip(outputs)
            .map(|((key, _), output)| (key.clone(), output.unwrap_or(Value::Null)))
            .collect();
        Ok(Value::Object(map))
    }
}

/// The tag of the child run of branch `key`.
fn map_key_tag(key: &str) -> String {
    format!("map:key:{key}")
}

#[async_trait]
impl<I: RunValue> Runnable<I, Value> for RunnableParallel<I> {
    fn name(&self) -> Cow<'_, str> {
        match &self.name {
            Some(name) => Cow::Borrowed(name),
            None => Cow::Owned(format!("RunnableParallel<{}>", self.keys().collect::<Vec<_>>().join(","))),
        }
    }

    async fn invoke(&self, input: I, config: &RunnableConfig) -> Result<Value> {
        let name = self.name();
        trace_invoke(&name, RunKind::Chain, input, config, |input, child| async move {
            self.run_branches(input, &child).await
        })
        .await
    }

    fn stream<'a>(&'a self, input: I, config: &RunnableConfig) -> BoxStream<'a, Result<Value>> {
        let input_value = event_input(config, &input);
        trace_stream(
            &self.name(),
            RunKind::Chain,
            input_value,
            config,
            move |child| {
                let limit = child.max_concurrency.unwrap_or(usize::MAX).max(1);
                stream::iter(self.branches.iter())
                    .map(move |(key, branch)| {
                        let chunks = branch.stream(input.clone(), &child.child(Some(map_key_tag(key))));
                        chunks.map(move |chunk| chunk.map(|value| single_entry(key, value)))
                    })
                    .flatten_unordered(limit)
                    .boxed()
            },
            move |acc, next| self.merge_chunks(acc, next),
        )
    }

    /// Merges key by key, each key by its own branch's rules.
    fn merge_chunks(&self, acc: Value, next: Value) -> Result<Value> {
        match (acc, next) {
            (Value::Object(mut acc), Value::Object(next)) => {
                for (key, value) in next {
                    let merged = match (acc.remove(&key), self.branch(&key)) {
                        (Some(old), Some(branch)) => branch.merge_chunks(old, value)?,
                        (Some(old), None) => old.merge(value)?,
                        (None, _) => value,
                    };
                    acc.insert(key, merged);
                }
                Ok(Value::Object(acc))
            }
            (acc, next) => acc.merge(next),
        }
    }
}

crate::impl_pipe_operator!([I] RunnableParallel<I> => Value);

/// A runnable whose output is converted to JSON; chunks are read back to be merged by the runnable.
struct ToValue<R, O> {
    inner: R,
    _output: PhantomData<fn() -> O>,
}

#[async_trait]
impl<I, O, R> Runnable<I, Value> for ToValue<R, O>
where
    I: RunValue,
    O: RunValue + DeserializeOwned,
    R: Runnable<I, O>,
{
    fn name(&self) -> Cow<'_, str> {
        self.inner.name()
    }

    fn kind(&self) -> RunKind {
        self.inner.kind()
    }

    async fn invoke(&self, input: I, config: &RunnableConfig) -> Result<Value> {
        into_value(self.inner.invoke(input, config).await?, &self.inner.name())
    }

    fn stream<'a>(&'a self, input: I, config: &RunnableConfig) -> BoxStream<'a, Result<Value>> {
        self.inner.stream(input, config).map(move |chunk| into_value(chunk?, &self.inner.name())).boxed()
    }

    fn transform<'a>(
        &'a self,
        input: ChunkStream<'a, I>,
        config: &RunnableConfig,
    ) -> BoxStream<'a, Result<Value>> {
        self.inner.transform(input, config).map(move |chunk| into_value(chunk?, &self.inner.name())).boxed()
    }

    fn merge_chunks(&self, acc: Value, next: Value) -> Result<Value> {
        let name = self.inner.name();
        let merged = self.inner.merge_chunks(from_value(acc, &name)?, from_value(next, &name)?)?;
        into_value(merged, &name)
    }
}
