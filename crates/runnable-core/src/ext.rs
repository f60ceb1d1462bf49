//! `RunnableExt`: composition methods available on every runnable.

use futures::stream::{BoxStream, StreamExt as _};
use serde_json::{Map, Value};

use crate::assign::RunnableAssign;
use crate::binding::RunnableBinding;
use crate::config::RunnableConfig;
use crate::configurable::{ConfigurableAlternatives, ConfigurableField};
use crate::error::Result;
use crate::events::{EventFilter, EventSink, StreamEvent};
use crate::fallbacks::WithFallbacks;
use crate::gate::QueueGate;
use crate::parallel::RunnableParallel;
use crate::pick::{PickKeys, RunnablePick};
use crate::retry::{ExponentialBackoff, Retry, RetryPolicy};
use crate::runnable::{BoxRunnable, RunValue, Runnable};
use crate::sequence::Sequence;
use crate::with_config::WithConfig;

/// Composition methods for every [`Runnable`]; blanket-implemented.
pub trait RunnableExt<I: RunValue, O: RunValue>: Runnable<I, O> + Sized {
    /// Feeds this runnable's output into `next` (the `|` operator does the same on weft's own types).
    fn pipe<B, P>(self, next: B) -> Sequence<Self, B, O>
    where
        B: Runnable<O, P>,
        P: RunValue,
    {
        Sequence::new(self, next)
    }

    /// Erases the type, for storing runnables of different types together.
    fn boxed(self) -> BoxRunnable<I, O>
    where
        Self: 'static,
    {
        BoxRunnable::new(self)
    }

    /// Binds a config that is merged under the caller's config on every call (the caller's keys win).
    fn with_config(self, config: RunnableConfig) -> WithConfig<Self> {
        WithConfig::new(self, config)
    }

    /// Retries failed calls with the default policy: up to 3 attempts, exponential backoff from 1 s with
    /// up to 1 s of jitter, every error retried except control flow (see [`ExponentialBackoff`]).
    fn with_retry(self) -> Retry<Self, ExponentialBackoff> {
        Retry::new(self, ExponentialBackoff::default())
    }

    /// Retries failed calls as `policy` decides (control flow is never retried).
    fn with_retry_policy<P: RetryPolicy>(self, policy: P) -> Retry<Self, P> {
        Retry::new(self, policy)
    }

    /// Tries `fallbacks` in order when this runnable fails (see [`WithFallbacks`]); box them
    /// ([`boxed`](RunnableExt::boxed)) when they are of different types.
    fn with_fallbacks<F>(self, fallbacks: impl IntoIterator<Item = F>) -> WithFallbacks<Self, F>
    where
        F: Runnable<I, O>,
    {
        WithFallbacks::new(self, fallbacks)
    }

    /// Binds call options (`stop`, `tools`, ...) that this runnable reads with
    /// [`BoundKwargs::from_config`](crate::BoundKwargs::from_config).
    fn bind(self, kwargs: Map<String, Value>) -> RunnableBinding<Self> {
        RunnableBinding::new(self, kwargs)
    }

    /// Adds to this runnable's output (a JSON object) the keys computed by `mapper` from it.
    fn assign(self, mapper: RunnableParallel<Value>) -> Sequence<Self, RunnableAssign, Value>
    where
        Self: Runnable<I, Value>,
    {
        Sequence::new(self, RunnableAssign::new(mapper))
    }

    /// Keeps one key of this runnable's output (a JSON object), or a sub-object of several keys (see
    /// [`RunnablePick`]).
    fn pick(self, keys: impl Into<PickKeys>) -> Sequence<Self, RunnablePick, Value>
    where
        Self: Runnable<I, Value>,
    {
        Sequence::new(self, RunnablePick::new(keys))
    }

    /// Makes this runnable the default, known as `default_key`, of alternatives chosen per call by
    /// `config.configurable[which.id]`; add the others with
    /// [`with_alternative`](ConfigurableAlternatives::with_alternative).
    fn configurable_alternatives(
        self,
        which: ConfigurableField,
        default_key: impl Into<String>,
    ) -> ConfigurableAlternatives<I, O>
    where
        Self: 'static,
    {
        ConfigurableAlternatives::new(which, default_key, self)
    }

    /// Streams every run event (start, chunk, end) of this runnable and everything it calls.
    fn stream_events<'a>(&'a self, input: I, config: &RunnableConfig) -> BoxStream<'a, Result<StreamEvent>> {
        self.stream_events_filtered(input, config, EventFilter::default())
    }

    /// Like [`stream_events`](RunnableExt::stream_events), keeping only the events that pass `filter`.
    ///
    /// The run's own error, if any, comes last as an `Err` item.
    fn stream_events_filtered<'a>(
        &'a self,
        input: I,
        config: &RunnableConfig,
        filter: EventFilter,
    ) -> BoxStream<'a, Result<StreamEvent>> {
        // The run's chat models wait while the reader is `QUEUED_EVENTS` behind.
        let gate = QueueGate::new(QUEUED_EVENTS);
        let (tx, receiver) = tokio::sync::mpsc::unbounded_channel();
        let counted = gate.clone();
        let sink = EventSink::new(move |event| {
            // The receiver may be gone when the consumer stopped listening; events are then dropped.
            if tx.send(event).is_ok() {
                counted.add(1);
            }
        })
        .with_gate(gate.clone());
        let sink = match &config.callbacks {
            Some(existing) => existing.clone().and(sink),
            None => sink,
        };
        let config = config.clone().with_callbacks(sink);
        let run = async move {
            let mut chunks = self.stream(input, &config);
            let mut failure = None;
            while let Some(chunk) = chunks.next().await {
                if let Err(err) = chunk {
                    failure = Some(err);
                    break;
                }
            }
            drop(chunks);
            drop(config);
            failure
        };
        event_stream(run, Reader { receiver, gate }, filter)
    }
}

impl<I: RunValue, O: RunValue, R: Runnable<I, O>> RunnableExt<I, O> for R {}

/// Polls `run` and the event receiver together, yielding events as they come and the run's error last.
fn event_stream<'a>(
    run: impl Future<Output = Option<crate::Error>> + Send + 'a,
    receiver: Reader,
    filter: EventFilter,
) -> BoxStream<'a, Result<StreamEvent>> {
    enum Item {
        Event(Box<StreamEvent>),
        Done(Option<crate::Error>),
    }
    let events = tokio_stream_from(receiver).map(|e| Item::Event(Box::new(e)));
    let done = futures::stream::once(Box::pin(run)).map(Item::Done);
    // Events keep flowing while the run is in progress; once it is done, the remaining buffered events
    // drain (the sink's senders are gone, so the receiver ends) and the error, if any, comes last.
    let merged = futures::stream::select(events, done);
    futures::stream::unfold((merged, filter, None), |(mut merged, filter, mut failure)| async move {
        loop {
            match merged.next().await {
                Some(Item::Event(event)) => {
                    if filter.matches(&event) {
                        return Some((Ok(*event), (merged, filter, failure)));
                    }
                }
                Some(Item::Done(err)) => failure = err,
                None => return failure.take().map(|err| (Err(err), (merged, filter, None))),
            }
        }
    })
    .boxed()
}

/// The most events `stream_events` queues ahead of its reader before the run's chat models wait.
const QUEUED_EVENTS: usize = 128;

/// The reading end of `stream_events`: counts what it takes off its gate, and closes the gate when
/// dropped (a reader that left holds no run).
struct Reader {
    receiver: tokio::sync::mpsc::UnboundedReceiver<StreamEvent>,
    gate: QueueGate,
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.gate.close();
    }
}

fn tokio_stream_from(mut reader: Reader) -> impl futures::Stream<Item = StreamEvent> + Send {
    futures::stream::poll_fn(move |cx| {
        let polled = reader.receiver.poll_recv(cx);
        if let std::task::Poll::Ready(Some(_)) = &polled {
            reader.gate.take(1);
        }
        polled
    })
}

/// Names the one output type of a runnable type, so that `|` can work out the middle type of the
/// sequence it builds. [`impl_pipe_operator!`](crate::impl_pipe_operator) implements it.
pub trait FixedOutput {
    /// The output type.
    type Output;
}

/// Implements the `|` operator (`a | b` = `a.pipe(b)`) and [`FixedOutput`] for a runnable type whose
/// output type is fixed.
///
/// ```
/// use weft_runnable_core::{Result, Runnable, RunnableConfig, RunnableLambda};
///
/// /// Doubles a number.
/// struct Double;
///
/// #[async_trait::async_trait]
/// impl Runnable<i64, i64> for Double {
///     async fn invoke(&self, input: i64, _: &RunnableConfig) -> Result<i64> {
///         Ok(input * 2)
///     }
/// }
///
/// weft_runnable_core::impl_pipe_operator!(Double => i64);
/// // For a generic type: `impl_pipe_operator!([T: Clone] MyParser<T> => T);`
///
/// # tokio_test::block_on(async {
/// let chain = Double | RunnableLambda::new(|n: i64| n + 1);
/// assert_eq!(chain.invoke(20, &RunnableConfig::default()).await?, 41);
/// # Ok::<(), weft_runnable_core::Error>(())
/// # }).unwrap();
/// ```
#[macro_export]
macro_rules! impl_pipe_operator {
    ([$($gen:tt)*] $ty:ty => $out:ty) => {
        impl<$($gen)*> $crate::FixedOutput for $ty {
            type Output = $out;
        }
        impl<__R, $($gen)*> ::std::ops::BitOr<__R> for $ty {
            type Output = $crate::Sequence<$ty, __R, $out>;
            fn bitor(self, next: __R) -> Self::Output {
                $crate::Sequence::new(self, next)
            }
        }
    };
    ($ty:ty => $out:ty) => {
        $crate::impl_pipe_operator!([] $ty => $out);
    };
}
