//! Root-value state: the whole state is one value with a reducer, LangGraph's bare
//! `StateGraph(Annotated[list, operator.add])` schema.
//!
//! A graph over [`RootState<T, R>`] takes the bare `T` as input, its nodes take and return the bare `T`
//! (the returned value is folded into the state by the reducer `R`), and its stream chunks, `get_state`
//! and checkpoints show the bare value (as JSON: the value itself, not an object of channels).
//!
//! ```
//! use weft_graph::root::{Append, RootState};
//! use weft_graph::{START, StateGraph};
//! # tokio_test::block_on(async {
//! let mut graph = StateGraph::<RootState<Vec<String>, Append>>::new();
//! graph.add_node("a", |seen: Vec<String>| vec![format!("a saw {}", seen.len())]);
//! graph.add_node("b", |_: Vec<String>| vec!["b".to_owned()]);
//! graph.add_edge(START, "a");
//! graph.add_edge("a", "b");
//! let out = graph.compile().unwrap().invoke(vec!["0".to_owned()], &Default::default()).await.unwrap();
//! assert_eq!(*out.value, ["0", "a saw 1", "b"]);
//! # });
//! ```

use std::borrow::Cow;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use weft_runnable_core::{Error, Result};

use crate::compiled::{GraphInput, IntoGraphInput};
use crate::node::{IntoNode, NodeFn, NodeInput, NodeOutput};
use crate::runtime::Runtime;
use crate::state::{ChannelKind, ChannelSet, ChannelSpec, State, UpdateError};
use crate::types::Payload;

/// The name of the one channel of a [`RootState`] (LangGraph's `__root__`).
pub const ROOT_CHANNEL: &str = "__root__";

/// Values a root state can hold: cloneable, serializable, with an empty value to start from (LangGraph's
/// list reducer channel starts as `[]`).
pub trait RootValue:
    Clone + std::fmt::Debug + Default + Serialize + DeserializeOwned + Send + Sync + 'static
{
}

impl<T> RootValue for T where
    T: Clone + std::fmt::Debug + Default + Serialize + DeserializeOwned + Send + Sync + 'static
{
}

/// How a [`RootState`] folds the values nodes return.
pub trait RootReducer<T>: Send + Sync + 'static {
    /// The channel kind reported for the root channel.
    const KIND: ChannelKind;
    /// Folds `write` into `value`.
    fn reduce(value: &mut T, write: T);
}

/// The value is replaced; two writes in one step are an error, as for any last-value channel.
#[derive(Debug, Clone, Copy, Default)]
pub struct LastValue;

/// A list extended by each write (LangGraph's `operator.add` on lists).
#[derive(Debug, Clone, Copy, Default)]
pub struct Append;

/// Writes added with `+=` (numbers, and any `AddAssign` type).
#[derive(Debug, Clone, Copy, Default)]
pub struct Add;

impl<T> RootReducer<T> for LastValue {
    const KIND: ChannelKind = ChannelKind::LastValue;
    fn reduce(value: &mut T, write: T) {
        *value = write;
    }
}

impl<X: Send + Sync + 'static> RootReducer<Vec<X>> for Append {
    const KIND: ChannelKind = ChannelKind::Reducer;
    fn reduce(value: &mut Vec<X>, write: Vec<X>) {
        value.extend(write);
    }
}

impl<T: std::ops::AddAssign> RootReducer<T> for Add {
    const KIND: ChannelKind = ChannelKind::Reducer;
    fn reduce(value: &mut T, write: T) {
        *value += write;
    }
}

/// A state that is one value `T` folded by the reducer `R`. It dereferences to the value.
pub struct RootState<T, R = LastValue> {
    value: T,
    _reducer: PhantomData<fn() -> R>,
}

impl<T: RootValue, R: RootReducer<T>> RootState<T, R> {
    /// The one channel, made once per reducer.
    const CHANNELS: &'static [ChannelSpec] = &[ChannelSpec::new(ROOT_CHANNEL, R::KIND)];
}

impl<T: RootValue, R> RootState<T, R> {
    /// A state holding `value`.
    pub fn new(value: T) -> Self {
        Self { value, _reducer: PhantomData }
    }

    /// The value.
    pub fn into_inner(self) -> T {
        self.value
    }
}

impl<T: Clone, R> Clone for RootState<T, R> {
    fn clone(&self) -> Self {
        Self { value: self.value.clone(), _reducer: PhantomData }
    }
}

impl<T: Default, R> Default for RootState<T, R> {
    fn default() -> Self {
        Self { value: T::default(), _reducer: PhantomData }
    }
}

impl<T: std::fmt::Debug, R> std::fmt::Debug for RootState<T, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.value.fmt(f)
    }
}

impl<T: PartialEq, R> PartialEq for RootState<T, R> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl<T, R> std::ops::Deref for RootState<T, R> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

/// Serialized as the bare value.
impl<T: Serialize, R> Serialize for RootState<T, R> {
    fn serialize<Z: serde::Serializer>(&self, serializer: Z) -> std::result::Result<Z::Ok, Z::Error> {
        self.value.serialize(serializer)
    }
}

/// A write to a [`RootState`]: the values nodes returned, in order (empty: no write).
#[derive(Debug, Clone)]
pub struct RootUpdate<T>(pub Vec<T>);

impl<T> Default for RootUpdate<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

fn serialization(e: impl std::fmt::Display) -> UpdateError {
    UpdateError::Serialization { key: ROOT_CHANNEL.to_owned(), message: e.to_string() }
}

impl<T: RootValue, R: RootReducer<T>> State for RootState<T, R> {
    type Update = RootUpdate<T>;

    fn channels(&self) -> Cow<'_, [ChannelSpec]> {
        Cow::Borrowed(Self::CHANNELS)
    }

    fn written(&self, update: &RootUpdate<T>, out: &mut ChannelSet) {
        if !update.0.is_empty() {
            out.insert(0);
        }
    }

    fn apply(&mut self, updates: Vec<RootUpdate<T>>) -> Result<ChannelSet, UpdateError> {
        let count: usize = updates.iter().map(|u| u.0.len()).sum();
        let mut changed = ChannelSet::new();
        if count == 0 {
            return Ok(changed);
        }
        if matches!(R::KIND, ChannelKind::LastValue) && count > 1 {
            return Err(UpdateError::ConcurrentUpdate { key: ROOT_CHANNEL.to_owned(), writers: Vec::new() });
        }
        for w in updates.into_iter().flat_map(|u| u.0) {
            R::reduce(&mut self.value, w);
        }
        changed.insert(0);
        Ok(changed)
    }

    fn channel_to_json(&self, index: usize) -> Result<Option<Value>, UpdateError> {
        if index != 0 {
            return Ok(None);
        }
        serde_json::to_value(&self.value).map(Some).map_err(serialization)
    }

    fn channel_from_json(&mut self, index: usize, value: Value) -> Result<(), UpdateError> {
        if index == 0 {
            self.value = if value.is_null() {
                T::default()
            } else {
                serde_json::from_value(value).map_err(serialization)?
            };
        }
        Ok(())
    }

    fn update_to_json(&self, update: &RootUpdate<T>) -> Result<Vec<(usize, Value)>, UpdateError> {
        update.0.iter().map(|v| Ok((0, serde_json::to_value(v).map_err(serialization)?))).collect()
    }

    fn update_from_json(&self, writes: Vec<(usize, Value)>) -> Result<RootUpdate<T>, UpdateError> {
        let mut values = Vec::with_capacity(writes.len());
        for (i, v) in writes {
            if i != 0 {
                return Err(UpdateError::UnknownChannel { key: format!("#{i}") });
            }
            values.push(serde_json::from_value(v).map_err(serialization)?);
        }
        Ok(RootUpdate(values))
    }

    /// The bare value.
    fn to_json_value(&self) -> Value {
        serde_json::to_value(&self.value).unwrap_or(Value::Null)
    }

    /// Each value written, bare: a node that wrote several shows them as a list, as LangGraph groups a
    /// task's writes to its root channel.
    fn update_chunks(&self, update: &RootUpdate<T>, out: &mut Vec<Value>) -> Result<(), UpdateError> {
        for v in &update.0 {
            out.push(serde_json::to_value(v).map_err(serialization)?);
        }
        Ok(())
    }
}

/// The bare value is the input of a run on a root state.
impl<T: RootValue, R: RootReducer<T>> IntoGraphInput<RootState<T, R>> for T {
    fn into_graph_input(self) -> GraphInput<RootState<T, R>> {
        GraphInput::Update(vec![RootUpdate(vec![self])])
    }
}

/// Values a node of a root-state graph returns: the bare value (folded into the state), or a `Result`
/// of it. A node that returns a `Command` takes the bare value as an ordinary node does.
pub trait IntoRootOutput<T> {
    /// The value to write, if any.
    fn into_root_output(self) -> Result<Option<T>>;
}

impl<T> IntoRootOutput<T> for T {
    fn into_root_output(self) -> Result<Option<T>> {
        Ok(Some(self))
    }
}

impl<T, E: Into<Error>> IntoRootOutput<T> for std::result::Result<T, E> {
    fn into_root_output(self) -> Result<Option<T>> {
        self.map(Some).map_err(Into::into)
    }
}

/// Markers of the [`IntoNode`] implementations for root-state nodes.
#[derive(Debug)]
pub struct RootFnMarker<O>(PhantomData<fn() -> O>);
/// A root-state node with the runtime.
#[derive(Debug)]
pub struct RootFnRtMarker<O>(PhantomData<fn() -> O>);
/// An async root-state node.
#[derive(Debug)]
pub struct RootAsyncMarker<O>(PhantomData<fn() -> O>);

struct RootNode<F, M> {
    f: F,
    _m: PhantomData<fn(M)>,
}

/// How a root-state node's function is called: each marker's function, as one future of the value to
/// fold in, so the three kinds share one [`NodeFn`] implementation.
trait RootCall<T>: Send + Sync + 'static {
    /// The call's future.
    type Fut: Future<Output = Result<Option<T>>> + Send + 'static;
    /// Calls the function with the bare value.
    fn call_root(&self, value: T, runtime: Runtime) -> Self::Fut;
}

/// A node's input: the state's value, or a `Send` packet of the value's type.
fn root_input<T: RootValue, R>(input: NodeInput<'_, RootState<T, R>>, node: &str) -> Result<T> {
    match input {
        NodeInput::State(state) => Ok(state.value.clone()),
        NodeInput::Payload(p) => p.downcast_ref::<T>().cloned().ok_or_else(|| {
            Error::InvalidInput(format!(
                "node '{node}' takes {} but a Send carried {}",
                std::any::type_name::<T>(),
                p.type_name()
            ))
        }),
    }
}

fn root_output<T: RootValue, R>(out: Result<Option<T>>) -> Result<NodeOutput<RootState<T, R>>>
where
    R: RootReducer<T>,
{
    Ok(match out? {
        Some(v) => NodeOutput::Update(RootUpdate(vec![v])),
        None => NodeOutput::Empty,
    })
}

impl<T, R, F, M> NodeFn<RootState<T, R>> for RootNode<F, M>
where
    T: RootValue,
    R: RootReducer<T>,
    Self: RootCall<T>,
{
    fn call<'a>(
        &'a self,
        input: NodeInput<'a, RootState<T, R>>,
        runtime: Runtime,
    ) -> BoxFuture<'a, Result<NodeOutput<RootState<T, R>>>> {
        match root_input(input, runtime.node()) {
            Ok(v) => self.call_root(v, runtime).map(root_output).boxed(),
            Err(e) => futures::future::ready(Err(e)).boxed(),
        }
    }

    fn payload_from_json(&self, value: Value) -> Result<Payload> {
        Ok(Payload::new(serde_json::from_value::<T>(value)?))
    }
}

impl<T, O, F> RootCall<T> for RootNode<F, RootFnMarker<O>>
where
    T: RootValue,
    O: IntoRootOutput<T> + 'static,
    F: Fn(T) -> O + Send + Sync + 'static,
{
    type Fut = futures::future::Ready<Result<Option<T>>>;
    fn call_root(&self, value: T, _: Runtime) -> Self::Fut {
        futures::future::ready((self.f)(value).into_root_output())
    }
}

/// A sync function of the bare value returning the bare value to fold in.
impl<T, R, O, F> IntoNode<RootState<T, R>, RootFnMarker<O>> for F
where
    T: RootValue,
    R: RootReducer<T>,
    O: IntoRootOutput<T> + 'static,
    F: Fn(T) -> O + Send + Sync + 'static,
{
    fn into_node(self) -> Arc<dyn NodeFn<RootState<T, R>>> {
        Arc::new(RootNode { f: self, _m: PhantomData::<fn(RootFnMarker<O>)> })
    }
}

impl<T, O, F> RootCall<T> for RootNode<F, RootFnRtMarker<O>>
where
    T: RootValue,
    O: IntoRootOutput<T> + 'static,
    F: Fn(T, &Runtime) -> O + Send + Sync + 'static,
{
    type Fut = futures::future::Ready<Result<Option<T>>>;
    fn call_root(&self, value: T, runtime: Runtime) -> Self::Fut {
        futures::future::ready((self.f)(value, &runtime).into_root_output())
    }
}

/// A sync function of the bare value and the runtime.
impl<T, R, O, F> IntoNode<RootState<T, R>, RootFnRtMarker<O>> for F
where
    T: RootValue,
    R: RootReducer<T>,
    O: IntoRootOutput<T> + 'static,
    F: Fn(T, &Runtime) -> O + Send + Sync + 'static,
{
    fn into_node(self) -> Arc<dyn NodeFn<RootState<T, R>>> {
        Arc::new(RootNode { f: self, _m: PhantomData::<fn(RootFnRtMarker<O>)> })
    }
}

impl<T, O, F, Fut> RootCall<T> for RootNode<F, RootAsyncMarker<(O, Fut)>>
where
    T: RootValue,
    O: IntoRootOutput<T> + 'static,
    F: Fn(T, Runtime) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = O> + Send + 'static,
{
    type Fut = futures::future::Map<Fut, fn(O) -> Result<Option<T>>>;
    fn call_root(&self, value: T, runtime: Runtime) -> Self::Fut {
        (self.f)(value, runtime).map(IntoRootOutput::into_root_output as fn(O) -> Result<Option<T>>)
    }
}

/// An async function of the bare value and the runtime.
impl<T, R, O, F, Fut> IntoNode<RootState<T, R>, RootAsyncMarker<(O, Fut)>> for F
where
    T: RootValue,
    R: RootReducer<T>,
    O: IntoRootOutput<T> + 'static,
    F: Fn(T, Runtime) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = O> + Send + 'static,
{
    fn into_node(self) -> Arc<dyn NodeFn<RootState<T, R>>> {
        Arc::new(RootNode { f: self, _m: PhantomData::<fn(RootAsyncMarker<(O, Fut)>)> })
    }
}

/// An update written by hand (from a node that also routes, or that takes a `Send` packet of another
/// type): the values to fold in.
impl<T: RootValue, R: RootReducer<T>> crate::node::IntoNodeOutput<RootState<T, R>> for RootUpdate<T> {
    fn into_node_output(self) -> Result<NodeOutput<RootState<T, R>>> {
        Ok(NodeOutput::Update(self))
    }
}

impl<T> RootUpdate<T> {
    /// An update writing `value`.
    pub fn of(value: T) -> Self {
        Self(vec![value])
    }
}
