//! Where a run's stream chunks go, and the stream that drives a run while yielding them.

use std::sync::Arc;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use weft_runnable_core::QueueGate;

use crate::error::{GraphError, GraphResult};
use crate::pregel::emit::StreamedIds;
use crate::state::State;
use crate::stream::{Forward, JsonStreamData, Modes, StreamData, StreamMode, StreamPart, debug_event};

pub(crate) type SendPart<S> = Arc<dyn Fn(StreamPart<S>) + std::marker::Send + Sync>;

/// The most chunks a run queues ahead of the reader of its stream before it waits for the reader (one
/// chat model token each in `messages` mode: a few kilobytes with their metadata).
pub(crate) const QUEUED_CHUNKS: usize = 128;

/// Where a streaming run sends its chunks: the caller's channel, or (for a subgraph) the parent's stream.
pub(crate) struct Sink<S: State> {
    pub(crate) send: SendPart<S>,
    pub(crate) modes: Modes,
    /// Whether subgraphs stream into this run's stream too.
    pub(crate) subgraphs: bool,
    /// Ids of the messages sent in `messages` mode, so that a message is sent once (a subgraph's sink
    /// shares its parent's, as LangGraph's one handler serves a run and its subgraphs).
    pub(crate) seen: StreamedIds,
    /// The bound of the caller's queue, which the run waits on at its await points ([`Sink::ready`]).
    pub(crate) gate: QueueGate,
}

impl<S: State> Sink<S> {
    /// A sink feeding the caller's channel, whose reader counts what it takes on `gate`.
    pub(crate) fn root(
        tx: tokio::sync::mpsc::UnboundedSender<GraphResult<StreamPart<S>>>,
        gate: QueueGate,
        modes: Modes,
        subgraphs: bool,
    ) -> Self {
        // A consumer that dropped the stream no longer wants chunks; the run still completes.
        let counted = gate.clone();
        let send: SendPart<S> = Arc::new(move |part| {
            if tx.send(Ok(part)).is_ok() {
                counted.add(1);
            }
        });
        Self { send, modes, subgraphs, seen: StreamedIds::default(), gate }
    }

    /// Waits while the reader of the run's stream is [`QUEUED_CHUNKS`] behind.
    pub(crate) async fn ready(&self) {
        self.gate.ready().await;
    }

    /// Another handle on this sink (for senders that outlive a borrow of it).
    pub(crate) fn share(&self) -> Self {
        Self {
            send: Arc::clone(&self.send),
            modes: self.modes,
            subgraphs: self.subgraphs,
            seen: Arc::clone(&self.seen),
            gate: self.gate.clone(),
        }
    }

    /// A sink of a subgraph run, forwarding its chunks (state erased) to the parent's stream.
    pub(crate) fn forwarding(parent: ParentStream, state: S) -> Self {
        let ParentStream { forward, modes, seen, gate } = parent;
        let send: SendPart<S> =
            Arc::new(move |part: StreamPart<S>| forward(part.ns, JsonStreamData::erase(part.data, &state)));
        Self { send, modes, subgraphs: true, seen, gate }
    }

    /// Sends a chunk; task and checkpoint events go as they are to their own modes when those were asked
    /// for, then to `debug` mode wrapped (LangGraph's `{step, timestamp, type, payload}`), in that order
    /// as LangGraph sends them.
    pub(crate) fn send(&self, data: StreamData<S>) {
        let own = match &data {
            StreamData::TaskStart { .. } | StreamData::TaskResult { .. } => StreamMode::Tasks,
            StreamData::Checkpoint(_) => StreamMode::Checkpoints,
            _ => return (self.send)(StreamPart { ns: Vec::new(), data }),
        };
        let debug = if self.modes.has(StreamMode::Debug) { debug_event(&data) } else { None };
        if self.modes.has(own) {
            (self.send)(StreamPart { ns: Vec::new(), data });
        }
        if let Some(debug) = debug {
            (self.send)(StreamPart { ns: Vec::new(), data: debug });
        }
    }

    /// Where the subgraphs of one task stream: forwarded to this stream under that task's namespace
    /// segment.
    pub(crate) fn forward_for(&self, segment: String) -> ParentStream {
        let send = Arc::clone(&self.send);
        let forward: Forward = Arc::new(move |mut ns: Vec<String>, data: JsonStreamData| {
            ns.insert(0, segment.clone());
            send(StreamPart { ns, data: data.typed::<S>() });
        });
        ParentStream { forward, modes: self.modes, seen: Arc::clone(&self.seen), gate: self.gate.clone() }
    }
}

/// The stream a subgraph run sends its chunks to: its parent task's.
#[derive(Clone)]
pub(crate) struct ParentStream {
    /// Forwards a chunk to the parent's stream.
    pub(crate) forward: Forward,
    /// The parent stream's modes.
    pub(crate) modes: Modes,
    /// The parent stream's sent message ids.
    pub(crate) seen: StreamedIds,
    /// The bound of the root stream's queue.
    pub(crate) gate: QueueGate,
}

/// Polls the run and its chunk receiver together, yielding chunks as they come and the run's error last.
/// Each chunk taken is counted off `gate`; a stream dropped before its end closes the gate, so that
/// nothing waits on a reader that left.
pub(crate) fn drive<S: State>(
    run: impl Future<Output = Option<GraphError>> + Send + 'static,
    rx: tokio::sync::mpsc::UnboundedReceiver<GraphResult<StreamPart<S>>>,
    gate: QueueGate,
) -> BoxStream<'static, GraphResult<StreamPart<S>>> {
    enum Item<S: State> {
        Part(Box<GraphResult<StreamPart<S>>>),
        Done(Option<GraphError>),
    }
    let mut reader = Reader { rx, gate };
    let parts = futures::stream::poll_fn(move |cx| {
        let polled = reader.rx.poll_recv(cx);
        if let std::task::Poll::Ready(Some(_)) = &polled {
            reader.gate.take(1);
        }
        polled
    })
    .map(|p| Item::Part(Box::new(p)));
    let done = futures::stream::once(Box::pin(run)).map(Item::Done);
    let merged = futures::stream::select(parts, done);
    futures::stream::unfold((merged, None::<GraphError>), |(mut merged, mut failure)| async move {
        loop {
            match merged.next().await {
                Some(Item::Part(p)) => return Some((*p, (merged, failure))),
                Some(Item::Done(err)) => failure = err,
                None => return failure.take().map(|e| (Err(e), (merged, None))),
            }
        }
    })
    .boxed()
}

/// The reading end of a run's stream; closes its gate when dropped.
struct Reader<S: State> {
    rx: tokio::sync::mpsc::UnboundedReceiver<GraphResult<StreamPart<S>>>,
    gate: QueueGate,
}

impl<S: State> Drop for Reader<S> {
    fn drop(&mut self) {
        self.gate.close();
    }
}
