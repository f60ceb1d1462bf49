//! The graphs a server serves: [`ServerGraph`] (a compiled graph with what the API says about it) and
//! the registry that finds them by graph id.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use uuid::Uuid;
use weft_graph::erased::ErasedGraph;
use weft_graph::{CompiledGraph, State};

/// LangGraph's namespace for the ids of the assistants it makes for graphs (`NAMESPACE_GRAPH` in
/// `langgraph_api/graph.py`).
const NAMESPACE_GRAPH: Uuid = Uuid::from_u128(0x6ba7b821_9dad_11d1_80b4_00c04fd430c8);

/// The id of the assistant made for graph `graph_id` at start-up: `uuid5(NAMESPACE_GRAPH, graph_id)`, as
/// LangGraph's server makes it (so `simple` is `5e0f6b46-d00f-5af4-87dc-ea2105ff526d` on both servers).
pub fn default_assistant_id(graph_id: &str) -> String {
    Uuid::new_v5(&NAMESPACE_GRAPH, graph_id.as_bytes()).to_string()
}

/// A graph to serve, with what `GET /assistants/{id}/schemas` says about it.
///
/// ```
/// use serde_json::json;
/// use weft_graph::{ChannelKind, JsonState, START, StateGraph};
/// use weft_server::ServerGraph;
///
/// let mut graph = StateGraph::with_initial(JsonState::builder().channel("n", ChannelKind::LastValue).build());
/// graph.add_node("noop", |_: &JsonState| json!({}));
/// graph.add_edge(START, "noop");
/// let served = ServerGraph::new(graph.compile().unwrap())
///     .description("does nothing")
///     .state_schema(json!({"type": "object", "properties": {"n": {"type": "integer"}}}));
/// # drop(served);
/// ```
#[derive(Debug, Clone)]
pub struct ServerGraph {
    pub(crate) graph: Arc<dyn ErasedGraph>,
    pub(crate) description: Option<String>,
    pub(crate) state_schema: Option<Value>,
    pub(crate) input_schema: Option<Value>,
    pub(crate) output_schema: Option<Value>,
    pub(crate) context_schema: Option<Value>,
}

impl ServerGraph {
    /// Serves `graph`. Its checkpointer and store are replaced by the server's.
    pub fn new<S: State>(graph: CompiledGraph<S>) -> Self {
        Self::from_erased(graph.erase())
    }

    /// Serves a graph already behind the [`ErasedGraph`] interface.
    pub fn from_erased(graph: Arc<dyn ErasedGraph>) -> Self {
        Self {
            graph,
            description: None,
            state_schema: None,
            input_schema: None,
            output_schema: None,
            context_schema: None,
        }
    }

    /// The description of the graph's assistant.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }

    /// The JSON Schema of the state (by default, one untyped property per channel).
    pub fn state_schema(mut self, schema: Value) -> Self {
        self.state_schema = Some(schema);
        self
    }

    /// The state schema of a type's JSON Schema (schemars): for a `#[derive(State, JsonSchema)]` state,
    /// `ServerGraph::new(graph).state_type::<MyState>()`.
    pub fn state_type<T: schemars::JsonSchema>(self) -> Self {
        self.state_schema(schemars::schema_for!(T).to_value())
    }

    /// The input schema of a type's JSON Schema (schemars).
    pub fn input_type<T: schemars::JsonSchema>(self) -> Self {
        self.input_schema(schemars::schema_for!(T).to_value())
    }

    /// The output schema of a type's JSON Schema (schemars).
    pub fn output_type<T: schemars::JsonSchema>(self) -> Self {
        self.output_schema(schemars::schema_for!(T).to_value())
    }

    /// The context schema of a type's JSON Schema (schemars): what nodes read with `Runtime::context`.
    pub fn context_type<T: schemars::JsonSchema>(self) -> Self {
        self.context_schema(schemars::schema_for!(T).to_value())
    }

    /// The JSON Schema of the input (by default `null`: the state's).
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.input_schema = Some(schema);
        self
    }

    /// The JSON Schema of the output (by default `null`: the state's).
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// The JSON Schema of the run context nodes read (by default `null`).
    pub fn context_schema(mut self, schema: Value) -> Self {
        self.context_schema = Some(schema);
        self
    }

    /// The state schema: the one given, or one property per channel, titled as LangGraph titles them.
    pub(crate) fn state_schema_or_default(&self, graph_id: &str) -> Value {
        if let Some(schema) = &self.state_schema {
            return schema.clone();
        }
        channels_schema(self.graph.as_ref(), &format!("{graph_id}_state"))
    }
}

impl<S: State> From<CompiledGraph<S>> for ServerGraph {
    fn from(graph: CompiledGraph<S>) -> Self {
        Self::new(graph)
    }
}

/// A schema with one untyped property per channel (weft's JSON states carry no types).
pub(crate) fn channels_schema(graph: &dyn ErasedGraph, title: &str) -> Value {
    let mut properties = Map::new();
    for channel in graph.channels() {
        let name = channel.name.to_string();
        properties.insert(name.clone(), json!({"title": title_case(&name), "default": null}));
    }
    json!({"properties": properties, "title": title, "type": "object"})
}

/// `foo_bar` → `Foo Bar` (pydantic's field titles).
fn title_case(name: &str) -> String {
    name.split('_')
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars.next().map(|c| c.to_uppercase().chain(chars).collect::<String>()).unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A registered graph: as served (with the server's checkpointer and store), and without a checkpointer
/// (stateless runs keep no checkpoints).
#[derive(Debug, Clone)]
pub(crate) struct Registered {
    pub(crate) id: String,
    pub(crate) spec: ServerGraph,
    pub(crate) stateful: Arc<dyn ErasedGraph>,
    pub(crate) stateless: Arc<dyn ErasedGraph>,
}

/// The graphs by id, in registration order.
#[derive(Debug, Clone, Default)]
pub(crate) struct GraphRegistry {
    graphs: Vec<Registered>,
}

impl GraphRegistry {
    pub(crate) fn new(graphs: Vec<Registered>) -> Self {
        Self { graphs }
    }

    pub(crate) fn get(&self, graph_id: &str) -> Option<&Registered> {
        self.graphs.iter().find(|g| g.id == graph_id)
    }

    /// The ids, comma-separated, in registration order (error messages list them).
    pub(crate) fn ids(&self) -> String {
        self.graphs.iter().map(|g| g.id.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// The ids sorted, as Python's list repr (`['a', 'b']`).
    pub(crate) fn sorted_ids_repr(&self) -> String {
        let mut ids: Vec<&str> = self.graphs.iter().map(|g| g.id.as_str()).collect();
        ids.sort_unstable();
        let quoted: Vec<String> = ids.iter().map(|id| format!("'{id}'")).collect();
        format!("[{}]", quoted.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_assistant_ids_are_langgraphs() {
        assert_eq!(default_assistant_id("simple"), "5e0f6b46-d00f-5af4-87dc-ea2105ff526d");
        assert_eq!(default_assistant_id("chat"), "eb6db400-e3c8-5d06-a834-015cb89efe69");
    }

    #[test]
    fn schemas_come_from_types() {
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Doc {
            title: String,
            pages: Vec<u32>,
        }
        let mut graph =
            weft_graph::StateGraph::with_initial(weft_graph::JsonState::builder().append("items").build());
        graph.add_node("n", |_: &weft_graph::JsonState| serde_json::json!({}));
        graph.add_edge(weft_graph::START, "n");
        let served = ServerGraph::new(graph.compile().unwrap()).state_type::<Doc>().context_type::<Doc>();
        let schema = served.state_schema_or_default("g");
        assert_eq!(schema["properties"]["pages"]["type"], "array");
        assert_eq!(schema["title"], "Doc");
        assert!(served.context_schema.is_some());
        let untyped = ServerGraph::from_erased(served.graph.clone()).state_schema_or_default("g");
        assert_eq!(untyped["title"], "g_state");
        assert_eq!(untyped["properties"]["items"], json!({"title": "Items", "default": null}));
    }

    #[test]
    fn titles_are_pydantics() {
        assert_eq!(title_case("items"), "Items");
        assert_eq!(title_case("tool_calls"), "Tool Calls");
    }
}
