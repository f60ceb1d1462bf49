//! `Sequence`: the output of one runnable feeds the next (`a | b`, `a.pipe(b)`).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::config::RunnableConfig;
use crate::error::Result;
use crate::events::{RunKind, event_input, trace_invoke, trace_stream, trace_transform};
use crate::runnable::{ChunkStream, RunValue, Runnable};

/// Two runnables in a row; longer chains nest but run, stream and trace as one flat sequence whose steps
/// are tagged `seq:step:1`, `seq:step:2`, ...
///
/// Streaming goes through every step: a step that can transform a stream consumes its predecessor's
/// chunks as they arrive; a step that cannot waits for the merged input and then runs once.
pub struct Sequence<A, B, M> {
    first: A,
    second: B,
    name: Option<Cow<'static, str>>,
    _middle: PhantomData<fn() -> M>,
}

impl<A: fmt::Debug, B: fmt::Debug, M> fmt::Debug for Sequence<A, B, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sequence").field("first", &self.first).field("second", &self.second).finish()
    }
}

impl<A: Clone, B: Clone, M> Clone for Sequence<A, B, M> {
    fn clone(&self) -> Self {
        Self {
            first: self.first.clone(),
            second: self.second.clone(),
            name: self.name.clone(),
            _middle: PhantomData,
        }
    }
}

impl<A, B, M> Sequence<A, B, M> {
    /// `first` then `second`.
    pub fn new(first: A, second: B) -> Self {
        Self { first, second, name: None, _middle: PhantomData }
    }

    /// Sets the name of the sequence's run (default `RunnableSequence`).
    pub fn named(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The first runnable.
    pub fn first(&self) -> &A {
        &self.first
    }

    /// The second runnable.
    pub fn second(&self) -> &B {
        &self.second
    }
}

#[async_trait]
impl<I, M, O, A, B> Runnable<I, O> for Sequence<A, B, M>
where
    I: RunValue,
    M: RunValue,
    O: RunValue,
    A: Runnable<I, M>,
    B: Runnable<M, O>,
{
    fn name(&self) -> Cow<'_, str> {
        match &self.name {
            Some(name) => Cow::Borrowed(name),
            None => Cow::Borrowed("RunnableSequence"),
        }
    }

    fn kind(&self) -> RunKind {
        RunKind::Chain
    }

    async fn invoke(&self, input: I, config: &RunnableConfig) -> Result<O> {
        let name = self.name();
        trace_invoke(&name, RunKind::Chain, input, config, |input, child| async move {
            self.invoke_seq_steps(input, &child, 1).await
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
            move |child| self.transform_seq_steps(ChunkStream::once(input), &child, 1),
            move |a, b| self.merge_chunks(a, b),
        )
    }

    fn transform<'a>(
        &'a self,
        input: ChunkStream<'a, I>,
        config: &RunnableConfig,
    ) -> BoxStream<'a, Result<O>> {
        trace_transform(
            &self.name(),
            RunKind::Chain,
            input,
            config,
            move |input, child| self.transform_seq_steps(input, &child, 1),
            move |a, b| self.merge_chunks(a, b),
        )
    }

    fn merge_chunks(&self, acc: O, next: O) -> Result<O> {
        self.second.merge_chunks(acc, next)
    }

    fn seq_len(&self) -> usize {
        self.first.seq_len() + self.second.seq_len()
    }

    async fn invoke_seq_steps(&self, input: I, config: &RunnableConfig, first: usize) -> Result<O> {
        let middle = self.first.invoke_seq_steps(input, config, first).await?;
        self.second.invoke_seq_steps(middle, config, first + self.first.seq_len()).await
    }

    fn transform_seq_steps<'a>(
        &'a self,
        input: ChunkStream<'a, I>,
        config: &RunnableConfig,
        first: usize,
    ) -> BoxStream<'a, Result<O>> {
        let middle = self.first.transform_seq_steps(input, config, first);
        let middle = ChunkStream::new(middle, move |a, b| self.first.merge_chunks(a, b));
        self.second.transform_seq_steps(middle, config, first + self.first.seq_len())
    }
}

impl<A, B: crate::ext::FixedOutput, M> crate::ext::FixedOutput for Sequence<A, B, M> {
    type Output = B::Output;
}

impl<A, B: crate::ext::FixedOutput, M, R> std::ops::BitOr<R> for Sequence<A, B, M> {
    type Output = Sequence<Self, R, B::Output>;

    fn bitor(self, next: R) -> Self::Output {
        Sequence::new(self, next)
    }
}
