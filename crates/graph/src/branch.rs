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

/// Values a router may return: a node name, `END`, a [`Send`], a [`Route`], or an `Option`, `Vec` or
/// `Result` of those.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be returned from a router",
    note = "a router returns a node name (&str or String), END, a Send, a Route, or a Vec/Option/Result of those"
)]
pub trait IntoRoutes {
    /// Converts into routes.
    fn into_routes(self) -> Result<Vec<Route>>;

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
}

impl IntoRoutes for &str {
    fn into_routes(self) -> Result<Vec<Route>> {
        Ok(vec![if self == END { Route::End } else { Route::Node(self.to_owned()) }])
    }
}

impl IntoRoutes for String {
    fn into_routes(self) -> Result<Vec<Route>> {
        self.as_str().into_routes()
    }
}

impl IntoRoutes for Send {
    fn into_routes(self) -> Result<Vec<Route>> {
        Ok(vec![Route::Send(self)])
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
}

impl<T: IntoRoutes, E: Into<Error>> IntoRoutes for std::result::Result<T, E> {
    fn destinations() -> Option<&'static [&'static str]> {
        T::destinations()
    }

    fn into_routes(self) -> Result<Vec<Route>> {
        self.map_err(Into::into)?.into_routes()
    }
}

type RouterFn<S> = dyn Fn(&S) -> Result<Vec<Route>> + std::marker::Send + Sync;

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
    pub(crate) router: Arc<RouterFn<S>>,
    pub(crate) path_map: PathMap,
}

impl<S> Clone for Branch<S> {
    fn clone(&self) -> Self {
        Self { name: self.name.clone(), router: Arc::clone(&self.router), path_map: self.path_map.clone() }
    }
}

impl<S> fmt::Debug for Branch<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Branch").field("name", &self.name).field("path_map", &self.path_map).finish()
    }
}

impl<S: State> Branch<S> {
    /// A branch from a router function.
    pub fn new<R: IntoRoutes>(
        name: impl Into<String>,
        router: impl Fn(&S) -> R + std::marker::Send + Sync + 'static,
        path_map: PathMap,
    ) -> Self {
        // A router typed with its destinations maps each to itself, as a path map listing them would.
        let path_map = match (path_map.0, R::destinations()) {
            (None, Some(names)) => PathMap::from(names.to_vec()),
            (map, _) => PathMap(map),
        };
        Self { name: name.into(), router: Arc::new(move |s: &S| router(s).into_routes()), path_map }
    }

    /// Runs the router and resolves names through the path map.
    /// `Ok(Err(NoDestination))` is a router that returned `None`; `Err` is the router's own error.
    pub(crate) fn route(&self, state: &S) -> Result<std::result::Result<Vec<Route>, NoDestination>> {
        let routes = match (self.router)(state) {
            Err(Error::InvalidInput(message)) if message == NO_DESTINATION => return Ok(Err(NoDestination)),
            other => other?,
        };
        let Some(map) = &self.path_map.0 else { return Ok(Ok(routes)) };
        routes
            .into_iter()
            .map(|r| match r {
                Route::Node(key) => match map.get(&key) {
                    Some(target) if target == END => Ok(Route::End),
                    Some(target) => Ok(Route::Node(target.clone())),
                    None => Err(Error::InvalidInput(format!(
                        "branch '{}' returned '{key}', which is not a key of its path map ({})",
                        self.name,
                        map.keys().cloned().collect::<Vec<_>>().join(", ")
                    ))),
                },
                other => Ok(other),
            })
            .collect::<Result<Vec<_>>>()
            .map(Ok)
    }
}

/// A router returned `None`.
#[derive(Debug)]
pub(crate) struct NoDestination;
