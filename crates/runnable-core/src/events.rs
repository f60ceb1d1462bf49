//! Run events: what `stream_events` yields, the sink that receives them, and the run scopes that emit them.
//!
//! Every weft runnable traces itself: its `invoke`, `stream` and `transform` open a [`RunScope`], which emits
//! `on_<kind>_start`, `on_<kind>_stream` and `on_<kind>_end` events to the config's [`EventSink`] (when
//! there is one) and opens a `tracing` span (named `weft.run`, at debug level, so nothing is printed by
//! default; its fields are described in [`crate::trace`]). A runnable written outside weft gets the same by calling [`trace_invoke`] or [`trace_stream`].

use std::borrow::Cow;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::Stream;
use futures::stream::BoxStream;
use serde::Serialize;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::config::RunnableConfig;
use crate::error::{Error, Result};
use crate::gate::QueueGate;

/// What kind of component a run belongs to; it names the event (`on_chat_model_stream`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunKind {
    /// A chain: sequences, lambdas, parallel maps, graphs and their nodes.
    Chain,
    /// A prompt template.
    Prompt,
    /// A chat model.
    ChatModel,
    /// A completion (text-in, text-out) model.
    Llm,
    /// An output parser.
    Parser,
    /// A tool.
    Tool,
    /// A retriever.
    Retriever,
}

impl RunKind {
    /// The kind as it appears in event names (`chat_model`, `parser`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Chain => "chain",
            RunKind::Prompt => "prompt",
            RunKind::ChatModel => "chat_model",
            RunKind::Llm => "llm",
            RunKind::Parser => "parser",
            RunKind::Tool => "tool",
            RunKind::Retriever => "retriever",
        }
    }
}

/// Which moment of a run an event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventPhase {
    /// The run started.
    Start,
    /// The run produced a chunk of output.
    Stream,
    /// The run finished.
    End,
    /// The run failed (reported for tools as `on_tool_error`; other kinds end with an `error` field).
    Error,
    /// A custom event dispatched by user code.
    Custom,
}

/// The payload of an event.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EventData {
    /// The run's input (start and end events), absent when the input was streamed in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// One chunk of output (stream events) or the payload of a custom event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk: Option<Value>,
    /// The run's whole output (end events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The error, when the run failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One event of a run: its start, a chunk it streamed, its end, or a custom event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamEvent {
    /// The event name, e.g. `on_chain_start`, `on_chat_model_stream`, `on_custom_event`.
    pub event: String,
    /// The run's name (or the custom event's name).
    pub name: String,
    /// The run's id.
    pub run_id: Uuid,
    /// Ids of the enclosing runs, root first.
    pub parent_ids: Vec<Uuid>,
    /// The run's tags.
    pub tags: Vec<String>,
    /// The run's metadata.
    pub metadata: Map<String, Value>,
    /// The payload.
    pub data: EventData,
    /// The kind of the run (`None` for custom events).
    #[serde(skip)]
    pub kind: Option<RunKind>,
    /// The moment of the run this event reports.
    #[serde(skip)]
    pub phase: EventPhase,
    /// The tool call a tool run answers (LangChain hands it to `on_tool_start`), on each event of a tool
    /// run started by [`trace_tool_call`]; `None` otherwise.
    #[serde(skip)]
    pub tool_call_id: Option<String>,
}

type Handler = dyn Fn(StreamEvent) + Send + Sync;

/// Receives the events of every run made under a config. Cheap to clone.
#[derive(Clone)]
pub struct EventSink {
    handler: Arc<Handler>,
    /// The bounds of the queues the handler feeds, which a streaming run waits on ([`EventSink::ready`]).
    gates: Option<Arc<[QueueGate]>>,
}

impl fmt::Debug for EventSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventSink").finish_non_exhaustive()
    }
}

impl EventSink {
    /// A sink that calls `handler` for every event.
    pub fn new(handler: impl Fn(StreamEvent) + Send + Sync + 'static) -> Self {
        Self { handler: Arc::new(handler), gates: None }
    }

    /// This sink, its handler feeding a queue bounded by `gate`: runs that stream chunks (chat models)
    /// wait on it before each chunk ([`ready`](EventSink::ready)), so that a consumer behind by the gate's
    /// limit holds the producer instead of letting the queue grow.
    pub fn with_gate(mut self, gate: QueueGate) -> Self {
        let gates = self.gates.iter().flat_map(|g| g.iter().cloned()).chain([gate]).collect();
        self.gates = Some(gates);
        self
    }

    /// Waits until every queue this sink feeds has room; at once when none is bounded.
    pub async fn ready(&self) {
        for gate in self.gates.iter().flat_map(|g| g.iter()) {
            gate.ready().await;
        }
    }

    /// A sink that sends every event into a channel, and the receiving end.
    pub fn channel() -> (Self, tokio::sync::mpsc::UnboundedReceiver<StreamEvent>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (
            Self::new(move |event| {
                // The receiver may be gone when the consumer stopped listening; events are then dropped.
                let _ = tx.send(event);
            }),
            rx,
        )
    }

    /// A sink that delivers every event to both `self` and `other`.
    pub fn and(self, other: EventSink) -> Self {
        let gates: Vec<QueueGate> =
            self.gates.iter().chain(&other.gates).flat_map(|g| g.iter().cloned()).collect();
        let (first, second) = (self.handler, other.handler);
        let both = Self::new(move |event: StreamEvent| {
            first(event.clone());
            second(event);
        });
        Self { gates: (!gates.is_empty()).then(|| gates.into()), ..both }
    }

    /// Delivers one event.
    pub fn emit(&self, event: StreamEvent) {
        (self.handler)(event);
    }
}

/// Records every event, for tests and debugging.
#[derive(Debug, Clone, Default)]
pub struct EventRecorder {
    events: Arc<Mutex<Vec<StreamEvent>>>,
}

impl EventRecorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// A sink that records into this recorder.
    pub fn sink(&self) -> EventSink {
        let events = Arc::clone(&self.events);
        EventSink::new(move |event| {
            if let Ok(mut events) = events.lock() {
                events.push(event);
            }
        })
    }

    /// Every event recorded so far.
    pub fn events(&self) -> Vec<StreamEvent> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// `(event, name)` of every event recorded so far, handy in assertions.
    pub fn names(&self) -> Vec<(String, String)> {
        self.events().into_iter().map(|e| (e.event, e.name)).collect()
    }
}

/// Which events `stream_events` keeps: by run name, kind and tag, with include and exclude lists.
///
/// An event is kept when it matches any include list (or no include list is set) and matches no exclude
/// list.
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    /// Keep runs with these names.
    pub include_names: Vec<String>,
    /// Keep runs of these kinds (`chain`, `chat_model`, `parser`, ...).
    pub include_types: Vec<String>,
    /// Keep runs with any of these tags.
    pub include_tags: Vec<String>,
    /// Drop runs with these names.
    pub exclude_names: Vec<String>,
    /// Drop runs of these kinds.
    pub exclude_types: Vec<String>,
    /// Drop runs with any of these tags.
    pub exclude_tags: Vec<String>,
}

impl EventFilter {
    /// Whether `event` passes the filter.
    pub fn matches(&self, event: &StreamEvent) -> bool {
        let kind = event.kind.map_or("custom", RunKind::as_str);
        let has_tag = |tags: &[String]| event.tags.iter().any(|t| tags.contains(t));
        let included =
            (self.include_names.is_empty() && self.include_types.is_empty() && self.include_tags.is_empty())
                || self.include_names.contains(&event.name)
                || self.include_types.iter().any(|t| t == kind)
                || has_tag(&self.include_tags);
        let excluded = self.exclude_names.contains(&event.name)
            || self.exclude_types.iter().any(|t| t == kind)
            || has_tag(&self.exclude_tags);
        included && !excluded
    }
}

/// Converts a value to JSON for an event; a value that cannot be converted is shown as an error string.
pub fn to_event_value<T: Serialize + ?Sized>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_else(|e| Value::String(format!("<unserializable: {e}>")))
}

/// The input a run reports in its start event: `input` as JSON when somebody listens (`config` has an
/// event sink, or spans record content: [`crate::trace::set_record_content`]), else `None`, so that
/// unobserved runs never pay for serialization. Pass it to
/// [`trace_stream`].
pub fn event_input<T: Serialize + ?Sized>(config: &RunnableConfig, input: &T) -> Option<Value> {
    (config.callbacks.is_some() || crate::trace::records_content()).then(|| to_event_value(input))
}

/// One run in progress: emits its events and hands its children a config that names it as their parent.
#[derive(Debug)]
pub struct RunScope {
    run_id: Uuid,
    name: String,
    kind: RunKind,
    tags: Vec<String>,
    metadata: Map<String, Value>,
    parent_ids: Arc<[Uuid]>,
    sink: Option<EventSink>,
    child_config: RunnableConfig,
    span: tracing::Span,
    tool_call_id: Option<String>,
}

impl RunScope {
    /// Starts a run named `config.run_name` or else `name`, and emits its start event with `input` (pass
    /// `None` when the input is streamed in).
    pub fn start(config: &RunnableConfig, name: &str, kind: RunKind, input: Option<Value>) -> Self {
        Self::start_from(Cow::Borrowed(config), name, kind, input, None)
    }

    fn start_from(
        config: Cow<'_, RunnableConfig>,
        name: &str,
        kind: RunKind,
        input: Option<Value>,
        tool_call_id: Option<String>,
    ) -> Self {
        let run_id = config.run_id.unwrap_or_else(Uuid::now_v7);
        let name = config.run_name.clone().unwrap_or_else(|| name.to_owned());
        let parent = config.parent_ids.last().copied();
        let span = crate::trace::run_span(&name, kind, run_id, parent);
        Self::with_span(config, name, kind, (input, tool_call_id), run_id, span)
    }

    /// Starts a run as [`start`](Self::start) does, in a span the caller opened (a graph's run or task
    /// span, which carries fields of its own); the run's id is recorded in its `run_id` field.
    pub fn start_in_span(
        config: &RunnableConfig,
        name: &str,
        kind: RunKind,
        input: Option<Value>,
        span: tracing::Span,
    ) -> Self {
        let run_id = config.run_id.unwrap_or_else(Uuid::now_v7);
        let name = config.run_name.clone().unwrap_or_else(|| name.to_owned());
        if !span.is_disabled() {
            span.record("run_id", run_id.to_string().as_str());
        }
        Self::with_span(Cow::Borrowed(config), name, kind, (input, None), run_id, span)
    }

    /// The scope of a run; its children's config is `config`'s child (`config` itself, changed in place,
    /// when the caller handed it over). `start`: the start event's input, and the tool call a tool run
    /// answers.
    fn with_span(
        config: Cow<'_, RunnableConfig>,
        name: String,
        kind: RunKind,
        start: (Option<Value>, Option<String>),
        run_id: Uuid,
        span: tracing::Span,
    ) -> Self {
        let parent_ids = Arc::clone(&config.parent_ids);
        let sink = config.callbacks.clone();
        // Tags and metadata go only into events: kept when somebody listens.
        let (tags, metadata) = match &config.callbacks {
            Some(_) => (config.tags.clone(), config.metadata.clone()),
            None => (Vec::new(), Map::new()),
        };
        let mut child_config = match config {
            Cow::Borrowed(config) => config.child(None),
            Cow::Owned(config) => config.into_child(),
        };
        let mut ids = Vec::with_capacity(parent_ids.len() + 1);
        ids.extend_from_slice(&parent_ids);
        ids.push(run_id);
        child_config.parent_ids = Arc::from(ids);
        let (input, tool_call_id) = start;
        let scope =
            Self { run_id, name, kind, tags, metadata, parent_ids, sink, child_config, span, tool_call_id };
        scope.emit(EventPhase::Start, EventData { input, ..EventData::default() });
        scope
    }

    /// Whether anybody listens to this run's events (when not, building event payloads can be skipped).
    pub fn is_observed(&self) -> bool {
        self.sink.is_some()
    }

    /// The run's id.
    pub fn run_id(&self) -> Uuid {
        self.run_id
    }

    /// The run's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The config to give to child runs.
    pub fn child_config(&self) -> &RunnableConfig {
        &self.child_config
    }

    /// The run's tracing span.
    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// Emits a stream event carrying `chunk`.
    pub fn on_stream<T: Serialize + ?Sized>(&self, chunk: &T) {
        if self.sink.is_some() {
            self.emit(
                EventPhase::Stream,
                EventData { chunk: Some(to_event_value(chunk)), ..EventData::default() },
            );
        }
    }

    /// Ends the run successfully.
    pub fn end<T: Serialize + ?Sized>(&self, input: Option<Value>, output: &T) {
        crate::trace::record_output(&self.span, output);
        if self.sink.is_some() {
            self.emit(
                EventPhase::End,
                EventData { input, output: Some(to_event_value(output)), ..EventData::default() },
            );
        }
    }

    /// Ends the run with an error (tools report `on_tool_error`, other kinds an end event with `error`; a
    /// tool stopped by control flow, an interrupt say, is paused, not failed: it ends with `error` too).
    pub fn fail(&self, input: Option<Value>, error: &Error) {
        crate::trace::record_run_error(&self.span, error);
        if self.sink.is_some() {
            let failed_tool = self.kind == RunKind::Tool && !error.is_control_flow();
            let phase = if failed_tool { EventPhase::Error } else { EventPhase::End };
            self.emit(phase, EventData { input, error: Some(error.to_string()), ..EventData::default() });
        }
    }

    fn emit(&self, phase: EventPhase, data: EventData) {
        let Some(sink) = &self.sink else { return };
        let suffix = match phase {
            EventPhase::Start => "start",
            EventPhase::Stream => "stream",
            EventPhase::End => "end",
            EventPhase::Error => "error",
            EventPhase::Custom => "custom",
        };
        sink.emit(StreamEvent {
            event: format!("on_{}_{}", self.kind.as_str(), suffix),
            name: self.name.clone(),
            run_id: self.run_id,
            parent_ids: self.parent_ids.to_vec(),
            tags: self.tags.clone(),
            metadata: self.metadata.clone(),
            data,
            kind: Some(self.kind),
            phase,
            tool_call_id: self.tool_call_id.clone(),
        });
    }
}

/// Sends an `on_custom_event` with `name` and `data` to whoever listens to runs under `config`.
pub fn dispatch_custom_event<T: Serialize + ?Sized>(config: &RunnableConfig, name: &str, data: &T) {
    let Some(sink) = &config.callbacks else { return };
    sink.emit(StreamEvent {
        event: "on_custom_event".to_owned(),
        name: name.to_owned(),
        run_id: config.parent_ids.last().copied().unwrap_or_else(Uuid::now_v7),
        parent_ids: config.parent_ids.to_vec(),
        tags: config.tags.clone(),
        metadata: config.metadata.clone(),
        data: EventData { chunk: Some(to_event_value(data)), ..EventData::default() },
        kind: None,
        phase: EventPhase::Custom,
        tool_call_id: None,
    });
}

/// Runs `body` as a traced run: start event, then end (or error) event, inside a tracing span.
///
/// `body` receives the input back and the config for its children. The input is converted to JSON only
/// when somebody listens.
pub async fn trace_invoke<I, O, F, Fut>(
    name: &str,
    kind: RunKind,
    input: I,
    config: &RunnableConfig,
    body: F,
) -> Result<O>
where
    I: Serialize,
    O: Serialize,
    F: FnOnce(I, RunnableConfig) -> Fut,
    Fut: Future<Output = Result<O>>,
{
    traced(name, kind, input, Cow::Borrowed(config), None, body).await
}

/// Runs `body` as a traced run, as [`trace_invoke`] does, under a config the caller hands over: the
/// config for its children is made from it in place instead of copied.
pub async fn trace_invoke_owned<I, O, F, Fut>(
    name: &str,
    kind: RunKind,
    input: I,
    config: RunnableConfig,
    body: F,
) -> Result<O>
where
    I: Serialize,
    O: Serialize,
    F: FnOnce(I, RunnableConfig) -> Fut,
    Fut: Future<Output = Result<O>>,
{
    traced(name, kind, input, Cow::Owned(config), None, body).await
}

/// Runs `body` as a traced tool run answering the tool call `tool_call_id`, as [`trace_invoke_owned`]
/// does: each of the run's events carries the id ([`StreamEvent::tool_call_id`]), as LangChain hands it
/// to its tool callbacks.
pub async fn trace_tool_call<I, O, F, Fut>(
    name: &str,
    tool_call_id: Option<String>,
    input: I,
    config: RunnableConfig,
    body: F,
) -> Result<O>
where
    I: Serialize,
    O: Serialize,
    F: FnOnce(I, RunnableConfig) -> Fut,
    Fut: Future<Output = Result<O>>,
{
    traced(name, RunKind::Tool, input, Cow::Owned(config), tool_call_id, body).await
}

async fn traced<I, O, F, Fut>(
    name: &str,
    kind: RunKind,
    input: I,
    config: Cow<'_, RunnableConfig>,
    tool_call_id: Option<String>,
    body: F,
) -> Result<O>
where
    I: Serialize,
    O: Serialize,
    F: FnOnce(I, RunnableConfig) -> Fut,
    Fut: Future<Output = Result<O>>,
{
    use tracing::Instrument as _;
    let input_value = event_input(&config, &input);
    let mut scope = RunScope::start_from(config, name, kind, input_value.clone(), tool_call_id);
    if let Some(value) = &input_value {
        crate::trace::record_input(&scope.span, value);
    }
    let span = scope.span.clone();
    // The scope has no further use for the child config: the body takes it.
    let child = std::mem::take(&mut scope.child_config);
    let result = body(input, child).instrument(span).await;
    match &result {
        Ok(output) => scope.end(input_value, output),
        Err(err) => scope.fail(input_value, err),
    }
    result
}

/// Wraps a stream as a traced run: the start event on first poll, a stream event per chunk, and the end
/// event with the chunks merged by `merge` once the stream is exhausted.
///
/// `input` is `None` when the input arrives as a stream, else [`event_input`] of it; `make` receives the
/// config for children.
pub fn trace_stream<'a, O, M>(
    name: &str,
    kind: RunKind,
    input: Option<Value>,
    config: &RunnableConfig,
    make: impl FnOnce(RunnableConfig) -> BoxStream<'a, Result<O>> + Send + 'a,
    merge: M,
) -> BoxStream<'a, Result<O>>
where
    O: Serialize + Clone + Send + 'a,
    M: Fn(O, O) -> Result<O> + Send + 'a,
{
    let name = name.to_owned();
    let config = Box::new(config.clone());
    let state = TraceState::Pending { name, kind, input, config, make: Box::new(make) };
    Box::pin(TracedStream { state, merge, acc: None })
}

type MakeStream<'a, O> = Box<dyn FnOnce(RunnableConfig) -> BoxStream<'a, Result<O>> + Send + 'a>;

/// A traced stream's state; its configs are boxed, each being several hundred bytes.
enum TraceState<'a, O> {
    Pending {
        name: String,
        kind: RunKind,
        input: Option<Value>,
        config: Box<RunnableConfig>,
        make: MakeStream<'a, O>,
    },
    Running {
        scope: Box<RunScope>,
        input: Option<Value>,
        inner: BoxStream<'a, Result<O>>,
    },
    Done,
}

struct TracedStream<'a, O, M> {
    state: TraceState<'a, O>,
    merge: M,
    acc: Option<O>,
}

impl<O, M> Unpin for TracedStream<'_, O, M> {}

impl<'a, O, M> Stream for TracedStream<'a, O, M>
where
    O: Serialize + Clone + Send + 'a,
    M: Fn(O, O) -> Result<O> + Send + 'a,
{
    type Item = Result<O>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let TraceState::Pending { .. } = &this.state {
            let TraceState::Pending { name, kind, input, config, make } =
                std::mem::replace(&mut this.state, TraceState::Done)
            else {
                return Poll::Ready(None);
            };
            let scope = RunScope::start(&config, &name, kind, input.clone());
            if let Some(input) = &input {
                crate::trace::record_input(&scope.span, input);
            }
            let inner = {
                let _entered = scope.span.enter();
                make(scope.child_config.clone())
            };
            this.state = TraceState::Running { scope: Box::new(scope), input, inner };
        }
        let TraceState::Running { scope, input, inner } = &mut this.state else {
            return Poll::Ready(None);
        };
        let polled = {
            let _entered = scope.span.enter();
            inner.as_mut().poll_next(cx)
        };
        match polled {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(chunk))) => {
                scope.on_stream(&chunk);
                if scope.is_observed() || (crate::trace::records_content() && !scope.span.is_disabled()) {
                    let merged = match this.acc.take() {
                        None => Ok(chunk.clone()),
                        Some(acc) => (this.merge)(acc, chunk.clone()),
                    };
                    match merged {
                        Ok(m) => this.acc = Some(m),
                        Err(err) => {
                            scope.fail(input.take(), &err);
                            this.state = TraceState::Done;
                            return Poll::Ready(Some(Err(err)));
                        }
                    }
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(err))) => {
                scope.fail(input.take(), &err);
                this.state = TraceState::Done;
                Poll::Ready(Some(Err(err)))
            }
            Poll::Ready(None) => {
                match this.acc.take() {
                    Some(output) => scope.end(input.take(), &output),
                    None => scope.end(input.take(), &Value::Null),
                }
                this.state = TraceState::Done;
                Poll::Ready(None)
            }
        }
    }
}

/// Wraps a stream transformation as a traced run whose input arrives as a stream: the run starts once
/// the first input chunk has arrived (as in LangChain, so a parser's start event follows the model's
/// first token), then behaves like [`trace_stream`] with no input recorded.
pub fn trace_transform<'a, I, O, M>(
    name: &str,
    kind: RunKind,
    input: crate::runnable::ChunkStream<'a, I>,
    config: &RunnableConfig,
    body: impl FnOnce(crate::runnable::ChunkStream<'a, I>, RunnableConfig) -> BoxStream<'a, Result<O>> + Send + 'a,
    merge: M,
) -> BoxStream<'a, Result<O>>
where
    I: Send + 'a,
    O: Serialize + Clone + Send + 'a,
    M: Fn(O, O) -> Result<O> + Send + 'a,
{
    use futures::StreamExt as _;
    let name = name.to_owned();
    let config = config.clone();
    futures::stream::once(async move {
        let (mut chunks, merge_input) = input.into_parts();
        let first = chunks.next().await;
        let rest: BoxStream<'a, Result<I>> = match first {
            Some(first) => futures::stream::once(async move { first }).chain(chunks).boxed(),
            None => futures::stream::empty().boxed(),
        };
        let input = crate::runnable::ChunkStream::new(rest, merge_input);
        trace_stream(&name, kind, None, &config, move |child| body(input, child), merge)
    })
    .flatten()
    .boxed()
}
