//! Conditional edges: routers that pick the next nodes from the state.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use weft_runnable_core::{Error, Result};

use crate::state::State;
use crate::types::{END, Send};

/// One destination chosen by a router.
#[derive(Debug, Clone)]
pub enum Route {
    /// A node by name (or a path-map key).
    Node(String),
    /// A task with its own input.
    Send(Send),
    /// Nowhere: the branch ends here.
    End,
}

/// One destination as a router hands it over without collecting: what
/// [`IntoRoutes::visit_routes`] passes on, borrowing a node's name where it can.
#[derive(Debug)]
pub enum RouteRef<'a> {
    /// A node by name (or a path-map key).
    Node(&'a str),
    /// A task with its own input.
    Send(Send),
    /// Nowhere: the branch ends here.
    End,
}

impl Route {
    /// Hands this route to `visit` as a [`RouteRef`].
    fn visit(self, visit: &mut dyn FnMut(RouteRef<'_>)) {
        match self {
            Route::Node(name) => visit(RouteRef::Node(&name)),
            Route::Send(send) => visit(RouteRef::Send(send)),
            Route::End => visit(RouteRef::End),
        }
    }
}

/// Values a router may return: a node name, `END`, a [`Send`], a [`Route`], or an `Option`, `Vec` or
/// `Result` of those.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be returned from a router",
    note = "a router returns a node name (&str or String), END, a Send, a Route, or a Vec/Option/Result of those"
)]
pub trait IntoRoutes {
    /// Converts into routes.
    fn into_routes(self) -> Result<Vec<Route>>;

    /// Hands each route to `visit`, in order, or fails as [`into_routes`](Self::into_routes) would (routes
    /// handed over before such a failure are then ignored). The engine routes through this: the
    /// implementations for names, options, vectors and results hand their routes over without
    /// allocating; the default collects `into_routes`.
    fn visit_routes(self, visit: &mut dyn FnMut(RouteRef<'_>)) -> Result<()>
    where
        Self: Sized,
    {
        for route in self.into_routes()? {
            route.visit(visit);
        }
        Ok(())
    }

    /// Every node this type can route to (`END` included), when the type says so: an enum with
    /// `#[derive(Destinations)]`. A router returning such a type needs no path map: its destinations are
    /// drawn and checked at compile as a path map's would be.
    fn destinations() -> Option<&'static [&'static str]>
    where
        Self: Sized,
    {
        None
    }
}

/// What [`IntoRoutes::into_routes`] returns (named for the code `#[derive(Destinations)]` writes).
pub type RoutesResult = Result<Vec<Route>>;

/// What [`IntoRoutes::visit_routes`] returns (named for the code `#[derive(Destinations)]` writes).
pub type VisitResult = Result<()>;

/// A type whose values are the destinations of a router: `#[derive(Destinations)]` on an enum of unit
/// variants, each a node (its name in snake case, or `#[route(name = "node")]`) or `END`
/// (`#[route(end)]`). The derive also implements [`IntoRoutes`], so a router may return the enum, and
/// `add_conditional_edges` then needs no path map.
///
/// ```
/// use weft_graph::{Destinations, JsonState, JsonUpdate, PathMap, START, StateGraph, ChannelKind};
///
/// #[derive(Destinations)]
/// enum Next {
///     CallTool,
///     #[route(name = "writer")]
///     Write,
///     #[route(end)]
///     Done,
/// }
///
/// assert_eq!(<Next as Destinations>::destinations(), ["call_tool", "writer", "__end__"]);
///
/// let mut g = StateGraph::with_initial(JsonState::builder().channel("n", ChannelKind::LastValue).build());
/// for name in ["agent", "call_tool", "writer"] {
///     g.add_node(name, |_: &JsonState| JsonUpdate::new());
/// }
/// g.add_edge(START, "agent");
/// g.add_conditional_edges("agent", |_: &JsonState| Next::Done, PathMap::none());
/// let mermaid = g.compile()?.get_graph().draw_mermaid();
/// assert!(mermaid.contains("agent -.-> call_tool;") && mermaid.contains("agent -.-> __end__;"));
/// # Ok::<(), weft_graph::GraphError>(())
/// ```
pub trait Destinations {
    /// The node names, in variant order (`END` is `"__end__"`).
    fn destinations() -> &'static [&'static str];
}

impl IntoRoutes for Route {
    fn into_routes(self) -> Result<Vec<Route>> {
        Ok(vec![self])
    }

    fn visit_routes(self, visit: &mut dyn FnMut(RouteRef<'_>)) -> Result<()> {
        self.visit(visit);
        Ok(())
    }
}

impl IntoRoutes for &str {
    fn into_routes(self) -> Result<Vec<Route>> {
        Ok(vec![if self == END { Route::End } else { Route::Node(self.to_owned()) }])
    }

    fn visit_routes(self, visit: &mut dyn FnMut(RouteRef<'_>)) -> Result<()> {
        visit(if self == END { RouteRef::End } else { RouteRef::Node(self) });
        Ok(())
    }
}

impl IntoRoutes for String {
    fn into_routes(self) -> Result<Vec<Route>> {
        self.as_str().into_routes()
    }

    fn visit_routes(self, visit: &mut dyn FnMut(RouteRef<'_>)) -> Result<()> {
        self.as_str().visit_routes(visit)
    }
}

impl IntoRoutes for Send {
    fn into_routes(self) -> Result<Vec<Route>> {
        Ok(vec![Route::Send(self)])
    }

    fn visit_routes(self, visit: &mut dyn FnMut(RouteRef<'_>)) -> Result<()> {
        visit(RouteRef::Send(self));
        Ok(())
    }
}

impl<T: IntoRoutes> IntoRoutes for Vec<T> {
    fn destinations() -> Option<&'static [&'static str]> {
        T::destinations()
    }

    fn into_routes(self) -> Result<Vec<Route>> {
        let mut routes = Vec::new();
        for item in self {
            routes.extend(item.into_routes()?);
        }
        Ok(routes)
    }

    fn visit_routes(self, visit: &mut dyn FnMut(RouteRef<'_>)) -> Result<()> {
        for item in self {
            item.visit_routes(visit)?;
        }
        Ok(())
    }
}

/// What a router's `None` turns into: LangGraph refuses a router that returns `None` (an empty `Vec` is
/// fine: no destination), and so does weft, naming the branch.
const NO_DESTINATION: &str = "branch did not return a valid destination";

impl<T: IntoRoutes> IntoRoutes for Option<T> {
    fn destinations() -> Option<&'static [&'static str]> {
        T::destinations()
    }

    fn into_routes(self) -> Result<Vec<Route>> {
        match self {
            Some(v) => v.into_routes(),
            None => Err(Error::InvalidInput(NO_DESTINATION.to_owned())),
        }
    }

    fn visit_routes(self, visit: &mut dyn FnMut(RouteRef<'_>)) -> Result<()> {
        match self {
            Some(v) => v.visit_routes(visit),
            None => Err(Error::InvalidInput(NO_DESTINATION.to_owned())),
        }
    }
}

impl<T: IntoRoutes, E: Into<Error>> IntoRoutes for std::result::Result<T, E> {
    fn destinations() -> Option<&'static [&'static str]> {
        T::destinations()
    }

    fn into_routes(self) -> Result<Vec<Route>> {
        self.map_err(Into::into)?.into_routes()
    }

    fn visit_routes(self, visit: &mut dyn FnMut(RouteRef<'_>)) -> Result<()> {
        self.map_err(Into::into)?.visit_routes(visit)
    }
}

/// A router as the engine calls it: the state (with the source node's writes applied), the indexes of
/// the channels its input type reads (`None`: the whole state), and what takes each route.
type RouterFn<S> =
    dyn Fn(&S, Option<&[usize]>, &mut dyn FnMut(RouteRef<'_>)) -> Result<()> + std::marker::Send + Sync;

/// Marker types that keep the [`IntoRouter`] implementations apart.
pub mod marker {
    /// A function of a reference to the state.
    #[derive(Debug)]
    pub struct Ref<R>(std::marker::PhantomData<fn() -> R>);
    /// A ready-made [`Router`](super::Router).
    #[derive(Debug)]
    pub struct Made;
}

/// Things a conditional edge accepts as its router: a function of `&S` returning something
/// [`IntoRoutes`] accepts, or a [`Router`] (one taking an input type: [`Router::with_input`]).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be used as a router of a graph over `{S}`",
    label = "not a router",
    note = "a router is a fn of `&S` returning a node name, END, a Send, a Route, or a Vec/Option/Result of those; a fn of a narrower input type goes through `Router::with_input`"
)]
pub trait IntoRouter<S: State, M> {
    /// Converts into a router.
    fn into_router(self) -> Router<S>;
}

/// A router ready for a [`Branch`]: made from a function of `&S` by [`IntoRouter`], or from a function of
/// an input type by [`Router::with_input`].
pub struct Router<S> {
    call: Arc<RouterFn<S>>,
    /// The fields of its input type, when that is a struct other than the state.
    input_fields: Option<&'static [&'static str]>,
    /// The nodes its return type can name, when the type says so ([`IntoRoutes::destinations`]).
    destinations: Option<&'static [&'static str]>,
}

impl<S> Clone for Router<S> {
    fn clone(&self) -> Self {
        Self {
            call: Arc::clone(&self.call),
            input_fields: self.input_fields,
            destinations: self.destinations,
        }
    }
}

impl<S> fmt::Debug for Router<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Router")
            .field("input_fields", &self.input_fields)
            .field("destinations", &self.destinations)
            .finish_non_exhaustive()
    }
}

impl<S: State> IntoRouter<S, marker::Made> for Router<S> {
    fn into_router(self) -> Router<S> {
        self
    }
}

impl<S, R, F> IntoRouter<S, marker::Ref<R>> for F
where
    S: State,
    R: IntoRoutes,
    F: Fn(&S) -> R + std::marker::Send + Sync + 'static,
{
    fn into_router(self) -> Router<S> {
        Router {
            call: Arc::new(move |state: &S, _: Option<&[usize]>, visit: &mut dyn FnMut(RouteRef<'_>)| {
                self(state).visit_routes(visit)
            }),
            input_fields: None,
            destinations: R::destinations(),
        }
    }
}

impl<S: State> Router<S> {
    /// A router taking an input type instead of `&S` (LangGraph's path function input schema): the state
    /// itself by value, or a `Deserialize` struct whose fields name the channels it reads, private ones
    /// included; it is handed just those channels. A field that is no channel of the state is a compile
    /// error ([`GraphError::UnknownRouterInputChannel`](crate::GraphError::UnknownRouterInputChannel)); a
    /// value that does not read as the type fails the run, naming the type.
    ///
    /// ```
    /// use serde::{Deserialize, Serialize};
    /// use weft_graph::{END, Router, START, State, StateGraph};
    ///
    /// #[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
    /// struct Loop {
    ///     count: i64,
    ///     notes: Vec<String>,
    /// }
    ///
    /// #[derive(Debug, Clone, Deserialize)]
    /// struct Count {
    ///     count: i64,
    /// }
    ///
    /// let mut graph = StateGraph::<Loop>::new();
    /// graph.add_node("inc", |s: Loop| LoopUpdate::new().count(s.count + 1));
    /// graph.add_edge(START, "inc");
    /// graph.add_conditional_edges("inc", Router::with_input(|c: Count| if c.count < 3 { "inc" } else { END }), None);
    /// assert!(graph.compile().is_ok());
    /// ```
    pub fn with_input<T, R, F>(router: F) -> Self
    where
        T: serde::de::DeserializeOwned + Clone + 'static,
        R: IntoRoutes,
        F: Fn(T) -> R + std::marker::Send + Sync + 'static,
    {
        let input_fields = if std::any::TypeId::of::<T>() == std::any::TypeId::of::<S>() {
            None
        } else {
            crate::node_input_fields::struct_fields::<T>()
        };
        let call = move |state: &S, channels: Option<&[usize]>, visit: &mut dyn FnMut(RouteRef<'_>)| {
            let input = match (state as &dyn std::any::Any).downcast_ref::<T>() {
                // `T` is the state itself.
                Some(state) => state.clone(),
                None => {
                    let json = match channels {
                        Some(indexes) => crate::state::channels_json(state, indexes),
                        None => crate::state::state_json(state),
                    };
                    serde_json::from_value::<T>(json).map_err(|e| {
                        Error::InvalidInput(format!(
                            "a router takes {}, which cannot be read from the state: {e}",
                            std::any::type_name::<T>()
                        ))
                    })?
                }
            };
            router(input).visit_routes(visit)
        };
        Router { call: Arc::new(call), input_fields, destinations: R::destinations() }
    }
}

/// Maps what a router returns to node names; `None` means the router returns node names itself.
#[derive(Debug, Clone, Default)]
pub struct PathMap(pub(crate) Option<BTreeMap<String, String>>);

impl PathMap {
    /// No path map: the router returns node names.
    pub fn none() -> Self {
        Self(None)
    }

    /// The destinations, for drawing and validation.
    pub fn targets(&self) -> Vec<(String, String)> {
        self.0.as_ref().map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).unwrap_or_default()
    }
}

impl<const N: usize> From<[&str; N]> for PathMap {
    fn from(names: [&str; N]) -> Self {
        Self(Some(names.iter().map(|n| ((*n).to_owned(), (*n).to_owned())).collect()))
    }
}

impl From<Vec<&str>> for PathMap {
    fn from(names: Vec<&str>) -> Self {
        Self(Some(names.iter().map(|n| ((*n).to_owned(), (*n).to_owned())).collect()))
    }
}

impl<const N: usize> From<[(&str, &str); N]> for PathMap {
    fn from(pairs: [(&str, &str); N]) -> Self {
        Self(Some(pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()))
    }
}

impl From<BTreeMap<String, String>> for PathMap {
    fn from(map: BTreeMap<String, String>) -> Self {
        Self(Some(map))
    }
}

impl From<Option<PathMap>> for PathMap {
    fn from(p: Option<PathMap>) -> Self {
        p.unwrap_or_default()
    }
}

/// A conditional edge: a router and its optional path map.
pub struct Branch<S> {
    pub(crate) name: String,
    pub(crate) router: Router<S>,
    pub(crate) path_map: PathMap,
    /// The path map's keys, sorted, each with its destination: by name until compile resolves the nodes
    /// to their indexes ([`Branch::resolve`]).
    keys: Option<PathKeys>,
    /// The indexes of the channels the router's input type reads, resolved by compile.
    pub(crate) input_channels: Option<Arc<[usize]>>,
}

/// A path map's keys, sorted, with where each leads.
type PathKeys = Arc<[(Box<str>, Dest)]>;

/// Where a path-map key leads.
#[derive(Debug, Clone)]
enum Dest {
    End,
    /// A node of the compiled graph, by index.
    Node(usize),
    /// A name compile did not resolve (the engine checks it when the key is taken).
    Name(Box<str>),
}

/// A destination the engine takes from [`Branch::route`].
#[derive(Debug)]
pub(crate) enum Target<'a> {
    End,
    /// A node of the compiled graph, by index.
    Node(usize),
    /// A node by name, to look up (and check).
    Name(&'a str),
    Send(Send),
}

impl<S> Clone for Branch<S> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            router: self.router.clone(),
            path_map: self.path_map.clone(),
            keys: self.keys.clone(),
            input_channels: self.input_channels.clone(),
        }
    }
}

impl<S> fmt::Debug for Branch<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Branch").field("name", &self.name).field("path_map", &self.path_map).finish()
    }
}

impl<S: State> Branch<S> {
    /// A branch from a router: a function of `&S`, or of an input type naming the channels it reads (see
    /// [`IntoRouter`]).
    /// A router typed with its destinations ([`Destinations`]) and no path map maps each destination to
    /// itself, as a path map listing them would.
    pub fn new<M>(name: impl Into<String>, router: impl IntoRouter<S, M>, path_map: PathMap) -> Self {
        let router = router.into_router();
        let path_map = match (path_map.0, router.destinations) {
            (None, Some(names)) => PathMap::from(names.to_vec()),
            (map, _) => PathMap(map),
        };
        let keys = path_map.0.as_ref().map(|map| {
            map.iter()
                .map(|(key, target)| {
                    let dest = if target == END { Dest::End } else { Dest::Name(target.as_str().into()) };
                    (key.as_str().into(), dest)
                })
                .collect()
        });
        Self { name: name.into(), router, path_map, keys, input_channels: None }
    }

    /// Resolves the path map's destinations to node indexes (`index_of` gives a node's, `None` for a name
    /// that is no node: it is checked, and refused, when a router takes it).
    pub(crate) fn resolve(&mut self, index_of: impl Fn(&str) -> Option<usize>) {
        let Some(keys) = &self.keys else { return };
        let resolved = keys
            .iter()
            .map(|(key, dest)| {
                let dest = match dest {
                    Dest::Name(name) => index_of(name).map_or_else(|| dest.clone(), Dest::Node),
                    other => other.clone(),
                };
                (key.clone(), dest)
            })
            .collect();
        self.keys = Some(resolved);
    }

    /// The fields of the router's input type, when it reads named channels rather than the whole state.
    pub(crate) fn input_fields(&self) -> Option<&'static [&'static str]> {
        self.router.input_fields
    }

    /// Runs the router and hands each destination to `take`, resolved through the path map.
    /// `Ok(Err(NoDestination))` is a router that returned `None`; `Err` is the router's own error, or else a
    /// key its path map does not have (then `take` has had the destinations before that key only).
    pub(crate) fn route(
        &self,
        state: &S,
        take: &mut dyn FnMut(Target<'_>),
    ) -> Result<std::result::Result<(), NoDestination>> {
        let mut unknown_key: Option<String> = None;
        let mut each = |route: RouteRef<'_>| {
            if unknown_key.is_some() {
                return;
            }
            match route {
                RouteRef::End => take(Target::End),
                RouteRef::Send(send) => take(Target::Send(send)),
                RouteRef::Node(key) => match &self.keys {
                    None => take(Target::Name(key)),
                    Some(keys) => match keys.binary_search_by(|(k, _)| (**k).cmp(key)) {
                        Ok(at) => match &keys[at].1 {
                            Dest::End => take(Target::End),
                            Dest::Node(n) => take(Target::Node(*n)),
                            Dest::Name(name) => take(Target::Name(name)),
                        },
                        Err(_) => unknown_key = Some(key.to_owned()),
                    },
                },
            }
        };
        match (self.router.call)(state, self.input_channels.as_deref(), &mut each) {
            Err(Error::InvalidInput(message)) if message == NO_DESTINATION => return Ok(Err(NoDestination)),
            other => other?,
        }
        match unknown_key {
            None => Ok(Ok(())),
            Some(key) => Err(Error::InvalidInput(format!(
                "branch '{}' returned '{key}', which is not a key of its path map ({})",
                self.name,
                self.path_map.0.iter().flat_map(|m| m.keys().cloned()).collect::<Vec<_>>().join(", ")
            ))),
        }
    }
}

/// A router returned `None`.
#[derive(Debug)]
pub(crate) struct NoDestination;
