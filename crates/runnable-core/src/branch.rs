//! `RunnableBranch`: the first runnable whose condition holds, else a default.

use std::borrow::Cow;
use std::fmt;

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt as _};

use crate::config::RunnableConfig;
use crate::error::Result;
use crate::events::{RunKind, event_input, trace_invoke, trace_stream};
use crate::runnable::{BoxRunnable, RunValue, Runnable, error_stream};

/// Routes its input to the first branch whose condition returns `true`, or to the default when none
/// does (LangChain's `RunnableBranch`).
///
/// Conditions are evaluated in order, each as a child run tagged `condition:N` (1-based); the chosen
/// runnable runs tagged `branch:N`, or `branch:default`. A condition that fails fails the branch. When
/// streamed, the chosen runnable's chunks come through as it produces them.
///
/// ```
/// use weft_runnable_core::{Runnable, RunnableBranch, RunnableConfig, RunnableLambda};
/// # tokio_test::block_on(async {
/// let sign = RunnableBranch::builder()
///     .when(RunnableLambda::new(|x: i64| x < 0), RunnableLambda::new(|_: i64| "negative".to_owned()))
///     .when(RunnableLambda::new(|x: i64| x == 0), RunnableLambda::new(|_: i64| "zero".to_owned()))
///     .otherwise(RunnableLambda::new(|_: i64| "positive".to_owned()));
/// assert_eq!(sign.invoke(0, &RunnableConfig::default()).await.unwrap(), "zero");
/// # });
/// ```
pub struct RunnableBranch<I, O> {
    branches: Vec<(BoxRunnable<I, bool>, BoxRunnable<I, O>)>,
    default: BoxRunnable<I, O>,
    name: Option<Cow<'static, str>>,
}

impl<I, O> Clone for RunnableBranch<I, O> {
    fn clone(&self) -> Self {
        Self { branches: self.branches.clone(), default: self.default.clone(), name: self.name.clone() }
    }
}

impl<I: RunValue, O: RunValue> fmt::Debug for RunnableBranch<I, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunnableBranch")
            .field("branches", &self.branches)
            .field("default", &self.default)
            .finish()
    }
}

/// Collects the `(condition, runnable)` pairs of a [`RunnableBranch`]; [`otherwise`](Self::otherwise)
/// adds the default and builds it.
pub struct RunnableBranchBuilder<I, O> {
    branches: Vec<(BoxRunnable<I, bool>, BoxRunnable<I, O>)>,
}

impl<I: RunValue, O: RunValue> fmt::Debug for RunnableBranchBuilder<I, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunnableBranchBuilder").field("branches", &self.branches).finish()
    }
}

impl<I: RunValue, O: RunValue> RunnableBranchBuilder<I, O> {
    /// Adds a branch: `runnable` runs when `condition` is the first to return `true`.
    pub fn when(
        mut self,
        condition: impl Runnable<I, bool> + 'static,
        runnable: impl Runnable<I, O> + 'static,
    ) -> Self {
        self.branches.push((BoxRunnable::new(condition), BoxRunnable::new(runnable)));
        self
    }

    /// Sets the runnable that runs when no condition holds, and builds the branch.
    pub fn otherwise(self, default: impl Runnable<I, O> + 'static) -> RunnableBranch<I, O> {
        RunnableBranch { branches: self.branches, default: BoxRunnable::new(default), name: None }
    }
}

impl<I: RunValue, O: RunValue> RunnableBranch<I, O> {
    /// Starts a branch with no condition yet.
    pub fn builder() -> RunnableBranchBuilder<I, O> {
        RunnableBranchBuilder { branches: Vec::new() }
    }

    /// Sets the name of the run (default `RunnableBranch`).
    pub fn named(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Evaluates the conditions in order; the runnable to run and the tag of its child run.
    async fn choose(&self, input: &I, config: &RunnableConfig) -> Result<(&BoxRunnable<I, O>, String)> {
        for (index, (condition, runnable)) in self.branches.iter().enumerate() {
            let tag = format!("condition:{}", index + 1);
            if condition.invoke(input.clone(), &config.child(Some(tag))).await? {
                return Ok((runnable, format!("branch:{}", index + 1)));
            }
        }
        Ok((&self.default, "branch:default".to_owned()))
    }
}

#[async_trait]
impl<I: RunValue, O: RunValue> Runnable<I, O> for RunnableBranch<I, O> {
    fn name(&self) -> Cow<'_, str> {
        match &self.name {
            Some(name) => Cow::Borrowed(name),
            None => Cow::Borrowed("RunnableBranch"),
        }
    }

    async fn invoke(&self, input: I, config: &RunnableConfig) -> Result<O> {
        let name = self.name();
        trace_invoke(&name, RunKind::Chain, input, config, |input, child| async move {
            let (runnable, tag) = self.choose(&input, &child).await?;
            runnable.invoke(input, &child.child(Some(tag))).await
        })
        .await
    }

    fn stream<'a>(&'a self, input: I, config: &RunnableConfig) -> BoxStream<'a, Result<O>> {
        let input_value = event_input(config, &input);
        trace_stream(
            &self.name(),
            RunKind::Chain,
            input_value,
            config,
            move |child| {
                stream::once(async move {
                    match self.choose(&input, &child).await {
                        Ok((runnable, tag)) => runnable.stream(input, &child.child(Some(tag))),
                        Err(err) => error_stream(err),
                    }
                })
                .flatten()
                .boxed()
            },
            move |acc, next| self.merge_chunks(acc, next),
        )
    }

    /// Merges by the default runnable's rules (every branch produces the same type).
    fn merge_chunks(&self, acc: O, next: O) -> Result<O> {
        self.default.merge_chunks(acc, next)
    }
}

crate::impl_pipe_operator!([I, O] RunnableBranch<I, O> => O);
