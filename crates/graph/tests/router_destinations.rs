//! Where routers' destinations lead, and how a destination that cannot be taken fails: names and
//! path-map keys, `END`, fan-out, unknown nodes, `START`, keys missing from the path map, `None`.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use common::{Counter, CounterUpdate};
use weft_graph::{END, GraphError, PathMap, START, Send, StateGraph};
use weft_runnable_core::RunnableConfig;

fn log(name: &'static str) -> impl Fn(Counter) -> CounterUpdate + std::marker::Send + Sync + 'static {
    move |_| CounterUpdate::log(name)
}

/// `first` (logging "first") then whatever `router` says, with `a`, `b` and `c` logging their names.
fn graph<R>(
    router: impl Fn(&Counter) -> R + std::marker::Send + Sync + 'static,
    map: PathMap,
) -> StateGraph<Counter>
where
    R: weft_graph::IntoRoutes,
{
    let mut g = StateGraph::<Counter>::new();
    g.add_node("first", log("first"));
    g.add_node("a", log("a")).add_node("b", log("b")).add_node("c", log("c"));
    g.add_edge(START, "first");
    g.add_conditional_edges("first", router, map);
    g
}

async fn run(g: StateGraph<Counter>) -> Result<Vec<String>, GraphError> {
    let app = g.compile()?;
    Ok(app.invoke(CounterUpdate::count(0), &RunnableConfig::default()).await?.value.log)
}

#[tokio::test]
async fn path_map_keys_lead_to_their_nodes_and_to_end() {
    let map = PathMap::from([("left", "a"), ("right", "b"), ("stop", END)]);
    assert_eq!(run(graph(|_: &Counter| "right", map.clone())).await.unwrap(), ["first", "b"]);
    assert_eq!(
        run(graph(|_: &Counter| vec!["left", "right"], map.clone())).await.unwrap(),
        ["first", "a", "b"]
    );
    assert_eq!(run(graph(|_: &Counter| "stop", map)).await.unwrap(), ["first"]);
}

#[tokio::test]
async fn names_without_a_path_map_lead_to_their_nodes() {
    let fan_out = graph(|_: &Counter| vec!["c".to_owned(), "a".to_owned()], PathMap::none());
    assert_eq!(run(fan_out).await.unwrap(), ["first", "a", "c"]);
    let with_end = graph(|_: &Counter| vec!["b", END], PathMap::none());
    assert_eq!(run(with_end).await.unwrap(), ["first", "b"]);
    let sent = graph(|_: &Counter| Send::new("c", Counter::default()), PathMap::none());
    assert_eq!(run(sent).await.unwrap(), ["first", "c"]);
}

#[tokio::test]
async fn a_name_that_is_no_node_fails_naming_it() {
    let err = run(graph(|_: &Counter| vec!["a", "nowhere"], PathMap::none())).await.unwrap_err();
    match err {
        GraphError::UnknownDestination { source_node, target } => {
            assert_eq!((source_node.as_str(), target.as_str()), ("first", "nowhere"));
        }
        other => panic!("expected UnknownDestination, got {other:?}"),
    }
}

#[tokio::test]
async fn start_is_no_destination() {
    let err = run(graph(|_: &Counter| START, PathMap::none())).await.unwrap_err();
    assert!(matches!(err, GraphError::InvalidDestination(ref node) if node == "first"), "{err:?}");
}

#[tokio::test]
async fn a_key_missing_from_the_path_map_fails_naming_the_keys() {
    let map = PathMap::from([("left", "a"), ("right", "b")]);
    // The first key is known: the route still fails at the second.
    let err = run(graph(|_: &Counter| vec!["left", "up"], map)).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, GraphError::Node { .. }), "{err:?}");
    assert!(text.contains("'up'") && text.contains("left, right"), "{text}");
}

#[tokio::test]
async fn the_routers_own_failure_comes_before_a_missing_key() {
    let map = PathMap::from([("left", "a")]);
    let err = run(graph(|_: &Counter| vec![Some("up"), None], map)).await.unwrap_err();
    assert!(matches!(err, GraphError::NoDestination { ref node, .. } if node == "first"), "{err:?}");
}

#[tokio::test]
async fn none_is_no_destination() {
    let err = run(graph(|_: &Counter| None::<&str>, PathMap::none())).await.unwrap_err();
    assert!(matches!(err, GraphError::NoDestination { .. }), "{err:?}");
}
