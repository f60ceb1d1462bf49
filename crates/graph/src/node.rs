//! Nodes: functions and runnables that turn the state (or a `Send` payload) into updates and commands.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use weft_runnable_core::{Error, Result};

use crate::runtime::Runtime;
use crate::state::State;
use crate::types::{Command, Payload};

/// What a node produced, normalised.
#[derive(Debug, Clone)]
pub enum NodeOutput<S: State> {
    /// Nothing to write.
    Empty,
    /// A partial update.
    Update(S::Update),
    /// An update-and-route command.
    Command(Command<S>),
    /// Several outputs, applied in order.
    Many(Vec<NodeOutput<S>>),
    /// Writes by channel name, as JSON, for a node that knows the channels only by name (a subgraph run
    /// from a `Send` hands back the channels it shares with the parent this way); names the state lacks
    /// are dropped, as LangGraph drops them.
    Writes(Vec<(String, serde_json::Value)>),
}

/// Values a node may return: its state's update type (implemented by `#[derive(State)]`), a
/// [`Command`], `()`, `Option`, `Vec` and `Result` of those.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be returned from a node of a graph over `{S}`",
    note = "a node returns the state's update type, a `Command`, `()`, or an `Option`, `Vec` or `Result` of those"
)]
pub trait IntoNodeOutput<S: State> {
    /// Converts into a node output.
    fn into_node_output(self) -> Result<NodeOutput<S>>;
}

impl<S: State> IntoNodeOutput<S> for NodeOutput<S> {
    fn into_node_output(self) -> Result<NodeOutput<S>> {
        Ok(self)
    }
}

impl<S: State> IntoNodeOutput<S> for () {
    fn into_node_output(self) -> Result<NodeOutput<S>> {
        Ok(NodeOutput::Empty)
    }
}

impl<S: State> IntoNodeOutput<S> for Command<S> {
    fn into_node_output(self) -> Result<NodeOutput<S>> {
        Ok(NodeOutput::Command(self))
    }
}

impl<S: State, T: IntoNodeOutput<S>> IntoNodeOutput<S> for Option<T> {
    fn into_node_output(self) -> Result<NodeOutput<S>> {
        match self {
            Some(v) => v.into_node_output(),
            None => Ok(NodeOutput::Empty),
        }
    }
}

impl<S: State, T: IntoNodeOutput<S>> IntoNodeOutput<S> for Vec<T> {
    fn into_node_output(self) -> Result<NodeOutput<S>> {
        Ok(NodeOutput::Many(self.into_iter().map(T::into_node_output).collect::<Result<_>>()?))
    }
}

impl<S: State, T: IntoNodeOutput<S>, E: Into<Error>> IntoNodeOutput<S> for std::result::Result<T, E> {
    fn into_node_output(self) -> Result<NodeOutput<S>> {
        self.map_err(Into::into)?.into_node_output()
    }
}

/// The input of one task: the state for tasks triggered by edges (borrowed: nodes that read it by
/// reference copy nothing), a payload for `Send` tasks.
#[derive(Debug, Clone)]
pub enum NodeInput<'a, S> {
    /// The state as of the start of the step.
    State(&'a S),
    /// A `Send` payload.
    Payload(Payload),
}

/// A node, boxed: what a node factory returns (`fn agent(model: M) -> BoxNode<MyState>`) and what
/// `add_node` takes as it is. Make one with [`IntoNode::into_node`] from any function a node can be, or
/// with `#[node]` on a method taking `&self` (`value.NAME_node()`).
pub type BoxNode<S> = Arc<dyn NodeFn<S>>;

/// A node as the engine calls it.
pub trait NodeFn<S: State>: std::marker::Send + Sync {
    /// Runs the node.
    fn call<'a>(&'a self, input: NodeInput<'a, S>, runtime: Runtime) -> BoxFuture<'a, Result<NodeOutput<S>>>;

    /// Runs the node on a `Send` payload, with the state as of the start of the step at hand: LangGraph
    /// lets a `Send` task read the graph's state (its `ToolNode` hands it to tools as `ToolRuntime.state`).
    /// The default ignores the state and calls [`call`](NodeFn::call).
    fn call_sent<'a>(
        &'a self,
        payload: Payload,
        state: &'a S,
        runtime: Runtime,
    ) -> BoxFuture<'a, Result<NodeOutput<S>>> {
        let _ = state;
        self.call(NodeInput::Payload(payload), runtime)
    }

    /// Turns a JSON payload (a `Send` restored from a checkpoint) into this node's input.
    fn payload_from_json(&self, value: serde_json::Value) -> Result<Payload>;

    /// Whether the node is a sync function, which runs to its end once called (a timeout cannot cancel
    /// it). The default says no.
    fn is_sync(&self) -> bool {
        false
    }

    /// Runs a sync node to its end with no future and no copy of the runtime, or says `None` (the
    /// default: the engine then calls [`call`](NodeFn::call)). The engine calls this for nodes that say
    /// they are sync, on the state (a `Send` task goes through [`call_sent`](NodeFn::call_sent)).
    fn call_sync(&self, input: NodeInput<'_, S>, runtime: &Runtime) -> Option<Result<NodeOutput<S>>> {
        let _ = (input, runtime);
        None
    }

    /// The compiled graph this node runs, when it is a subgraph (used by `get_state` to show its state).
    fn subgraph(&self) -> Option<&dyn crate::subgraph_reader::SubgraphStateReader> {
        None
    }

    /// The channels the node reads when it gets the state, when its input type names them (see
    /// [`NodeInputType::input_fields`]); compile checks them for a node an edge reaches.
    fn input_fields(&self) -> Option<&'static [&'static str]> {
        None
    }
}

/// Input types a node can take: the state itself, a `Send` payload type, a struct whose fields name
/// state channels (the node then reads just those channels), or the graph's [`Command`] (a node run by
/// `Send::command`).
pub trait NodeInputType<S: State>: Clone + std::marker::Send + Sync + 'static {
    /// Extracts the input from what the engine hands the task.
    fn from_input(input: NodeInput<'_, S>, node: &str) -> Result<Self>;

    /// Reads a `Send` payload of this type back from JSON (a `Send` restored from a checkpoint).
    fn payload_from_json(value: serde_json::Value) -> Result<Payload>;

    /// The channels this type reads when the node gets the state: a struct's field names (LangGraph's
    /// node input schema); `None` for the state itself and for types that are not structs.
    fn input_fields() -> Option<&'static [&'static str]> {
        None
    }
}

/// A node taking the graph's `Command` is run by a `Send` carrying one (`Send::command`), as LangGraph
/// hands a `Send(node, Command(...))` its command; returning it re-emits it, so its update applies and its
/// `goto` runs.
impl<S: State> NodeInputType<S> for Command<S> {
    fn from_input(input: NodeInput<'_, S>, node: &str) -> Result<Self> {
        match input {
            NodeInput::Payload(payload) => payload.downcast_ref::<Self>().cloned().ok_or_else(|| {
                Error::InvalidInput(format!(
                    "node '{node}' takes a Command but a Send carried {}",
                    payload.type_name()
                ))
            }),
            NodeInput::State(_) => Err(Error::InvalidInput(format!(
                "node '{node}' takes a Command and runs only from a Send carrying one (Send::command), not \
                 from an edge"
            ))),
        }
    }

    fn payload_from_json(_value: serde_json::Value) -> Result<Payload> {
        // The graph reads a saved command packet itself (it needs the state's channels and nodes); a
        // packet reaching the node's own reader was not written as a command.
        Err(Error::InvalidInput("a saved Send to a node taking a Command carries no command".to_owned()))
    }
}

impl<S, T> NodeInputType<S> for T
where
    S: State,
    T: Clone + Serialize + DeserializeOwned + std::marker::Send + Sync + 'static,
{
    fn payload_from_json(value: serde_json::Value) -> Result<Payload> {
        Ok(Payload::new(serde_json::from_value::<T>(value)?))
    }

    fn input_fields() -> Option<&'static [&'static str]> {
        if std::any::TypeId::of::<T>() == std::any::TypeId::of::<S>() {
            return None;
        }
        crate::node_input_fields::struct_fields::<T>()
    }

    fn from_input(input: NodeInput<'_, S>, node: &str) -> Result<Self> {
        match input {
            NodeInput::State(state) => match (state as &dyn Any).downcast_ref::<T>() {
                Some(state) => Ok(state.clone()),
                // A node with its own input type reads the channels of that name from the state
                // (LangGraph's node input schema); fields it lacks are ignored.
                None => serde_json::from_value(crate::state::state_json(state)).map_err(|e| {
                    Error::InvalidInput(format!(
                        "node '{node}' takes {}, which cannot be read from the state: {e}",
                        std::any::type_name::<T>()
                    ))
                }),
            },
            NodeInput::Payload(payload) => payload.downcast_ref::<T>().cloned().ok_or_else(|| {
                Error::InvalidInput(format!(
                    "node '{node}' takes {} but a Send carried {}",
                    std::any::type_name::<T>(),
                    payload.type_name()
                ))
            }),
        }
    }
}

/// Marker types that keep the [`IntoNode`] implementations apart.
pub mod marker {
    /// A sync function of the input.
    #[derive(Debug)]
    pub struct Sync<T, R>(std::marker::PhantomData<fn(T) -> R>);
    /// A sync function of the input and the runtime.
    #[derive(Debug)]
    pub struct SyncRt<T, R>(std::marker::PhantomData<fn(T) -> R>);
    /// An async function of the input.
    #[derive(Debug)]
    pub struct Async<T, R>(std::marker::PhantomData<fn(T) -> R>);
    /// An async function of the input and the runtime.
    #[derive(Debug)]
    pub struct AsyncRt<T, R>(std::marker::PhantomData<fn(T) -> R>);
    /// A ready-made node.
    #[derive(Debug)]
    pub struct Boxed;
    /// A sync function of a reference to the state.
    #[derive(Debug)]
    pub struct SyncRef<R>(std::marker::PhantomData<fn() -> R>);
    /// A sync function of a reference to the state and the runtime.
    #[derive(Debug)]
    pub struct SyncRefRt<R>(std::marker::PhantomData<fn() -> R>);
    /// A runnable from the input to a node output.
    #[derive(Debug)]
    pub struct Runnable<T, R>(std::marker::PhantomData<fn(T) -> R>);
}

/// Things `add_node` accepts: sync or async functions of `(input)` or `(input, Runtime)` returning a node
/// output, where the input is the state or a `Send` payload type.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be used as a node of a graph over `{S}`",
    label = "not a node",
    note = "a node is a sync or async fn of `(S)` or `(S, Runtime)` (or of a Send payload type instead of `S`) returning the state's update type, a `Command`, `()`, or an `Option`/`Vec`/`Result` of those"
)]
pub trait IntoNode<S: State, M> {
    /// Converts into a node.
    fn into_node(self) -> Arc<dyn NodeFn<S>>;
}

/// A sync node's future: its result, ready.
fn ready<'a, S: State>(out: Option<Result<NodeOutput<S>>>) -> BoxFuture<'a, Result<NodeOutput<S>>> {
    // A sync function node's `call_sync` always runs it.
    let out = out.unwrap_or_else(|| unreachable!("a sync function node runs when called"));
    futures::future::ready(out).boxed()
}

struct FnNode<F, T> {
    f: F,
    _t: std::marker::PhantomData<fn(T)>,
}

impl<S, T, R, F> NodeFn<S> for FnNode<F, marker::Sync<T, R>>
where
    S: State,
    T: NodeInputType<S>,
    R: IntoNodeOutput<S> + 'static,
    F: Fn(T) -> R + std::marker::Send + Sync + 'static,
{
    fn call<'a>(&'a self, input: NodeInput<'a, S>, runtime: Runtime) -> BoxFuture<'a, Result<NodeOutput<S>>> {
        ready(self.call_sync(input, &runtime))
    }

    fn is_sync(&self) -> bool {
        true
    }

    fn call_sync(&self, input: NodeInput<'_, S>, runtime: &Runtime) -> Option<Result<NodeOutput<S>>> {
        Some(T::from_input(input, runtime.node()).and_then(|input| (self.f)(input).into_node_output()))
    }

    fn payload_from_json(&self, value: serde_json::Value) -> Result<Payload> {
        T::payload_from_json(value)
    }

    fn input_fields(&self) -> Option<&'static [&'static str]> {
        T::input_fields()
    }
}

impl<S, T, R, F> IntoNode<S, marker::Sync<T, R>> for F
where
    S: State,
    T: NodeInputType<S>,
    R: IntoNodeOutput<S> + 'static,
    F: Fn(T) -> R + std::marker::Send + Sync + 'static,
{
    fn into_node(self) -> Arc<dyn NodeFn<S>> {
        Arc::new(FnNode { f: self, _t: std::marker::PhantomData::<fn(marker::Sync<T, R>)> })
    }
}

impl<S, T, R, F> NodeFn<S> for FnNode<F, marker::SyncRt<T, R>>
where
    S: State,
    T: NodeInputType<S>,
    R: IntoNodeOutput<S> + 'static,
    F: Fn(T, &Runtime) -> R + std::marker::Send + Sync + 'static,
{
    fn call<'a>(&'a self, input: NodeInput<'a, S>, runtime: Runtime) -> BoxFuture<'a, Result<NodeOutput<S>>> {
        ready(self.call_sync(input, &runtime))
    }

    fn is_sync(&self) -> bool {
        true
    }

    fn call_sync(&self, input: NodeInput<'_, S>, runtime: &Runtime) -> Option<Result<NodeOutput<S>>> {
        Some(
            T::from_input(input, runtime.node())
                .and_then(|input| (self.f)(input, runtime).into_node_output()),
        )
    }

    fn payload_from_json(&self, value: serde_json::Value) -> Result<Payload> {
        T::payload_from_json(value)
    }

    fn input_fields(&self) -> Option<&'static [&'static str]> {
        T::input_fields()
    }
}

impl<S, T, R, F> IntoNode<S, marker::SyncRt<T, R>> for F
where
    S: State,
    T: NodeInputType<S>,
    R: IntoNodeOutput<S> + 'static,
    F: Fn(T, &Runtime) -> R + std::marker::Send + Sync + 'static,
{
    fn into_node(self) -> Arc<dyn NodeFn<S>> {
        Arc::new(FnNode { f: self, _t: std::marker::PhantomData::<fn(marker::SyncRt<T, R>)> })
    }
}

impl<S, T, R, F, Fut> NodeFn<S> for FnNode<F, marker::Async<T, R>>
where
    S: State,
    T: NodeInputType<S>,
    R: IntoNodeOutput<S> + 'static,
    F: Fn(T) -> Fut + std::marker::Send + Sync + 'static,
    Fut: Future<Output = R> + std::marker::Send + 'static,
{
    fn call<'a>(&'a self, input: NodeInput<'a, S>, runtime: Runtime) -> BoxFuture<'a, Result<NodeOutput<S>>> {
        match T::from_input(input, runtime.node()) {
            Ok(input) => (self.f)(input).map(IntoNodeOutput::into_node_output).boxed(),
            Err(e) => futures::future::ready(Err(e)).boxed(),
        }
    }

    fn payload_from_json(&self, value: serde_json::Value) -> Result<Payload> {
        T::payload_from_json(value)
    }

    fn input_fields(&self) -> Option<&'static [&'static str]> {
        T::input_fields()
    }
}

impl<S, T, R, F, Fut> IntoNode<S, marker::Async<T, R>> for F
where
    S: State,
    T: NodeInputType<S>,
    R: IntoNodeOutput<S> + 'static,
    F: Fn(T) -> Fut + std::marker::Send + Sync + 'static,
    Fut: Future<Output = R> + std::marker::Send + 'static,
{
    fn into_node(self) -> Arc<dyn NodeFn<S>> {
        Arc::new(FnNode { f: self, _t: std::marker::PhantomData::<fn(marker::Async<T, R>)> })
    }
}

impl<S, T, R, F, Fut> NodeFn<S> for FnNode<F, marker::AsyncRt<T, R>>
where
    S: State,
    T: NodeInputType<S>,
    R: IntoNodeOutput<S> + 'static,
    F: Fn(T, Runtime) -> Fut + std::marker::Send + Sync + 'static,
    Fut: Future<Output = R> + std::marker::Send + 'static,
{
    fn call<'a>(&'a self, input: NodeInput<'a, S>, runtime: Runtime) -> BoxFuture<'a, Result<NodeOutput<S>>> {
        let node = runtime.node().to_owned();
        match T::from_input(input, &node) {
            Ok(input) => (self.f)(input, runtime).map(IntoNodeOutput::into_node_output).boxed(),
            Err(e) => futures::future::ready(Err(e)).boxed(),
        }
    }

    fn payload_from_json(&self, value: serde_json::Value) -> Result<Payload> {
        T::payload_from_json(value)
    }

    fn input_fields(&self) -> Option<&'static [&'static str]> {
        T::input_fields()
    }
}

impl<S, T, R, F, Fut> IntoNode<S, marker::AsyncRt<T, R>> for F
where
    S: State,
    T: NodeInputType<S>,
    R: IntoNodeOutput<S> + 'static,
    F: Fn(T, Runtime) -> Fut + std::marker::Send + Sync + 'static,
    Fut: Future<Output = R> + std::marker::Send + 'static,
{
    fn into_node(self) -> Arc<dyn NodeFn<S>> {
        Arc::new(FnNode { f: self, _t: std::marker::PhantomData::<fn(marker::AsyncRt<T, R>)> })
    }
}

impl<S: State> IntoNode<S, marker::Boxed> for Arc<dyn NodeFn<S>> {
    fn into_node(self) -> Arc<dyn NodeFn<S>> {
        self
    }
}

/// A runnable used as a node: invoked with the node's input and the task's config (so its events and
/// model tokens belong to the node).
struct RunnableNode<R, T, O> {
    runnable: R,
    _t: std::marker::PhantomData<fn(T) -> O>,
}

impl<S, T, O, R> NodeFn<S> for RunnableNode<R, T, O>
where
    S: State,
    T: NodeInputType<S>,
    O: IntoNodeOutput<S> + std::marker::Send + 'static,
    R: weft_runnable_core::Runnable<T, O> + 'static,
{
    fn call<'a>(&'a self, input: NodeInput<'a, S>, runtime: Runtime) -> BoxFuture<'a, Result<NodeOutput<S>>> {
        async move {
            let input = T::from_input(input, runtime.node())?;
            self.runnable.invoke(input, runtime.config()).await?.into_node_output()
        }
        .boxed()
    }

    fn payload_from_json(&self, value: serde_json::Value) -> Result<Payload> {
        T::payload_from_json(value)
    }

    fn input_fields(&self) -> Option<&'static [&'static str]> {
        T::input_fields()
    }
}

/// Any runnable is a node once boxed: `graph.add_node("summarize", chain.boxed())`.
impl<S, T, O> IntoNode<S, marker::Runnable<T, O>> for weft_runnable_core::BoxRunnable<T, O>
where
    S: State,
    T: NodeInputType<S>,
    O: IntoNodeOutput<S> + std::marker::Send + 'static,
{
    fn into_node(self) -> Arc<dyn NodeFn<S>> {
        Arc::new(RunnableNode { runnable: self, _t: std::marker::PhantomData::<fn(T) -> O> })
    }
}

fn state_ref<'a, S: State>(input: NodeInput<'a, S>, node: &str) -> Result<&'a S> {
    match input {
        NodeInput::State(state) => Ok(state),
        NodeInput::Payload(p) => Err(Error::InvalidInput(format!(
            "node '{node}' reads the state by reference and cannot be the target of a Send (it carried {})",
            p.type_name()
        ))),
    }
}

impl<S, R, F> NodeFn<S> for FnNode<F, marker::SyncRef<R>>
where
    S: State,
    R: IntoNodeOutput<S> + 'static,
    F: Fn(&S) -> R + std::marker::Send + Sync + 'static,
{
    fn call<'a>(&'a self, input: NodeInput<'a, S>, runtime: Runtime) -> BoxFuture<'a, Result<NodeOutput<S>>> {
        ready(self.call_sync(input, &runtime))
    }

    fn is_sync(&self) -> bool {
        true
    }

    fn call_sync(&self, input: NodeInput<'_, S>, runtime: &Runtime) -> Option<Result<NodeOutput<S>>> {
        Some(state_ref(input, runtime.node()).and_then(|state| (self.f)(state).into_node_output()))
    }

    fn payload_from_json(&self, _value: serde_json::Value) -> Result<Payload> {
        Err(Error::InvalidInput(
            "a node reading the state by reference cannot be the target of a Send".to_owned(),
        ))
    }
}

/// A sync node reading the state by reference: `|s: &MyState| ...` — nothing is copied.
impl<S, R, F> IntoNode<S, marker::SyncRef<R>> for F
where
    S: State,
    R: IntoNodeOutput<S> + 'static,
    F: Fn(&S) -> R + std::marker::Send + Sync + 'static,
{
    fn into_node(self) -> Arc<dyn NodeFn<S>> {
        Arc::new(FnNode { f: self, _t: std::marker::PhantomData::<fn(marker::SyncRef<R>)> })
    }
}

impl<S, R, F> NodeFn<S> for FnNode<F, marker::SyncRefRt<R>>
where
    S: State,
    R: IntoNodeOutput<S> + 'static,
    F: Fn(&S, &Runtime) -> R + std::marker::Send + Sync + 'static,
{
    fn call<'a>(&'a self, input: NodeInput<'a, S>, runtime: Runtime) -> BoxFuture<'a, Result<NodeOutput<S>>> {
        ready(self.call_sync(input, &runtime))
    }

    fn is_sync(&self) -> bool {
        true
    }

    fn call_sync(&self, input: NodeInput<'_, S>, runtime: &Runtime) -> Option<Result<NodeOutput<S>>> {
        Some(state_ref(input, runtime.node()).and_then(|state| (self.f)(state, runtime).into_node_output()))
    }

    fn payload_from_json(&self, _value: serde_json::Value) -> Result<Payload> {
        Err(Error::InvalidInput(
            "a node reading the state by reference cannot be the target of a Send".to_owned(),
        ))
    }
}

/// A sync node reading the state by reference, with the runtime.
impl<S, R, F> IntoNode<S, marker::SyncRefRt<R>> for F
where
    S: State,
    R: IntoNodeOutput<S> + 'static,
    F: Fn(&S, &Runtime) -> R + std::marker::Send + Sync + 'static,
{
    fn into_node(self) -> Arc<dyn NodeFn<S>> {
        Arc::new(FnNode { f: self, _t: std::marker::PhantomData::<fn(marker::SyncRefRt<R>)> })
    }
}
