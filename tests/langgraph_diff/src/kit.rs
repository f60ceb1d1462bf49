//! Small helpers the scenarios share: JSON states declared like the Python half's `TypedDict`s, inputs,
//! checkpointed compiles and Python-style value printing (for node outputs that quote what they saw).

use std::sync::Arc;

use serde_json::{Map, Value};
use weft::graph::node::NodeFn;
use weft::graph::{
    CompileConfig, CompiledGraph, GraphInput, GraphOutput, GraphResult, InMemorySaver, IntoNode, JsonChannel,
    JsonState, JsonUpdate, Runtime, START, State, StateGraph,
};

/// `class Log(TypedDict): log: Annotated[list, operator.add]; last: str`.
pub(crate) fn log_state() -> JsonState {
    lists(
        JsonState::builder().channel("log", JsonChannel::Add).channel("last", JsonChannel::LastValue).build(),
        &["log"],
    )
}

/// `schema` with `keys` starting as empty lists, as LangGraph starts a reducer channel of type `list`
/// (its type's default value).
pub(crate) fn lists(mut schema: JsonState, keys: &[&str]) -> JsonState {
    let update: JsonUpdate = keys.iter().map(|k| ((*k).to_owned(), Value::Array(Vec::new()))).collect();
    // The keys are the caller's own list channels: applying empty lists to them cannot fail.
    let _ = schema.apply(vec![update]);
    schema
}

/// A graph over `schema`.
pub(crate) fn graph(schema: JsonState) -> StateGraph<JsonState> {
    StateGraph::with_initial(schema)
}

/// An update from a JSON object (anything else is an empty update).
pub(crate) fn upd(value: Value) -> JsonUpdate {
    match value {
        Value::Object(map) => JsonUpdate::from(map),
        _ => JsonUpdate::from(Map::new()),
    }
}

/// A graph input from a JSON object.
pub(crate) fn input(value: Value) -> GraphInput<JsonState> {
    GraphInput::Update(vec![upd(value)])
}

/// A compile config with a fresh in-memory checkpointer.
pub(crate) fn saver() -> CompileConfig {
    CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))
}

/// The length of list channel `key` (0 when unset).
pub(crate) fn len(s: &JsonState, key: &str) -> usize {
    s.get(key).and_then(Value::as_array).map_or(0, Vec::len)
}

/// A string field (empty when unset).
pub(crate) fn text(s: &JsonState, key: &str) -> String {
    s.get(key).and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// How Python's `str()` prints a JSON value (`None`, `'a'` inside lists, `['a', 'b']`, `True`).
pub(crate) fn py(value: Option<&Value>) -> String {
    fn inner(value: &Value, nested: bool) -> String {
        match value {
            Value::Null => "None".to_owned(),
            Value::Bool(true) => "True".to_owned(),
            Value::Bool(false) => "False".to_owned(),
            Value::String(s) if nested => format!("'{s}'"),
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Array(items) => {
                format!("[{}]", items.iter().map(|v| inner(v, true)).collect::<Vec<_>>().join(", "))
            }
            Value::Object(map) => {
                let items: Vec<String> =
                    map.iter().map(|(k, v)| format!("'{k}': {}", inner(v, true))).collect();
                format!("{{{}}}", items.join(", "))
            }
        }
    }
    value.map_or_else(|| "None".to_owned(), |v| inner(v, false))
}

/// A node of a JSON-state graph, boxed so that nodes of different closure types fit in one list.
pub(crate) type Node = Arc<dyn NodeFn<JsonState>>;

/// A node appending `name` to `log`.
pub(crate) fn note(name: &str) -> Node {
    let name = name.to_owned();
    (move |_: &JsonState| serde_json::json!({"log": [name]})).into_node()
}

/// A node that asks `times` questions (`{name}0?`, `{name}1?`, ...) with `interrupt` and then appends
/// `{name}:{answers joined by +} saw {length of log}` to `log`.
pub(crate) fn ask(name: &str, times: usize) -> Node {
    let name = name.to_owned();
    (move |s: &JsonState, rt: &Runtime| -> weft::Result<Value> {
        let mut answers = Vec::new();
        for i in 0..times {
            let answer: String = rt.interrupt(format!("{name}{i}?"))?;
            answers.push(answer);
        }
        Ok(serde_json::json!({"log": [format!("{name}:{} saw {}", answers.join("+"), len(s, "log"))]}))
    })
    .into_node()
}

/// A chain `START -> nodes[0] -> nodes[1] ...` over [`log_state`], compiled with `config`.
pub(crate) fn chain(
    nodes: Vec<(&str, Node)>,
    config: CompileConfig,
) -> GraphResult<CompiledGraph<JsonState>> {
    let mut g = graph(log_state());
    let mut previous = START.to_owned();
    for (name, node) in nodes {
        g.add_node(name, node);
        g.add_edge(previous, name);
        previous = name.to_owned();
    }
    g.compile_with(config)
}

/// The ids of an output's interrupts, by their value.
pub(crate) fn ids_by_value<S>(out: Option<&GraphOutput<S>>) -> Map<String, Value> {
    let mut ids = Map::new();
    for i in out.map(|o| o.interrupts.as_slice()).unwrap_or_default() {
        ids.insert(i.value.as_str().unwrap_or_default().to_owned(), Value::String(i.id.clone()));
    }
    ids
}

/// A resume map answering the interrupts named by value: `[("p0?", "P")]`.
pub(crate) fn answers(ids: &Map<String, Value>, pairs: &[(&str, &str)]) -> Map<String, Value> {
    let mut out = Map::new();
    for (question, answer) in pairs {
        let id = ids.get(*question).and_then(Value::as_str).unwrap_or(question);
        out.insert(id.to_owned(), Value::String((*answer).to_owned()));
    }
    out
}
